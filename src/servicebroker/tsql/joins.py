"""FROM with joins over the interpreter's own row sources — catalog views and DMVs, queues,
table variables (from-transact-sql.md, <joined_table>): INNER, LEFT / RIGHT / FULL [OUTER] and
CROSS JOIN, a comma (a CROSS join), each source under its alias or its name, ON with any search
condition. The sources are joined left to right, as written; an outer join's missing side is
NULLs of that side's column types. WHERE, the select list, GROUP BY, ORDER BY, DISTINCT and TOP
then run over the joined rows as over one source (:func:`.queries.run_query`).

A joined row is a mapping from a key per source and column (:func:`_key`) to its value; a
:class:`Binding` turns a column reference into that key as SQL Server binds names:
``alias.column`` or ``[database.][schema.]name.column`` (once a source has an alias, only the
alias names it), or a bare column that exactly one source has (Msg 209 when several have it,
Msg 4104 for a qualifier that names no source, Msg 207 for a column the named source lacks).

Which sources run here, and what is refused, is the interpreter's choice
(:mod:`.select_routing`): a join only between the application's tables is
translated to the database underneath (:mod:`.tables`); one that mixes them with these sources
is refused by name (:func:`.unsupported.not_supported`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import TSqlError
from . import nodes as n
from .types import SqlType, Typed

__all__ = ["Binding", "Bound", "join_rows", "outer_value"]

Row = Mapping[str, Typed]


class _Source(Protocol):
    """A source's columns and rows (:class:`.queries.RowSource`)."""

    @property
    def columns(self) -> tuple[tuple[str, SqlType], ...]: ...
    @property
    def rows(self) -> Sequence[Row]: ...


def _key(index: int, column: str) -> str:
    """The key of source ``index``'s ``column`` in a joined row."""
    return f"{index}\x1f{column.casefold()}"


@dataclass(frozen=True)
class Bound:
    """One FROM source: its position, the name parts written (``sys.services``, ``q``,
    ``@t``), its alias (None without one), and its columns (names as the source spells them)."""

    index: int
    parts: tuple[str, ...]
    alias: str | None
    columns: tuple[tuple[str, SqlType], ...]

    @property
    def shown(self) -> str:
        """The source as SQL Server names it in a message: its alias, else its name."""
        return self.alias if self.alias is not None else ".".join(self.parts)

    def named_by(self, qualifier: tuple[str, ...]) -> bool:
        """Whether ``qualifier`` (``ce``, ``sys.services``, ``services``, ``db.sys.services``)
        names this source: its alias when it has one, else the trailing parts of its name (a
        longer qualifier's extra leading parts are a database and schema the name left out)."""
        wanted = tuple(p.casefold() for p in qualifier)
        if self.alias is not None:
            return wanted == (self.alias.casefold(),)
        have = tuple(p.casefold() for p in self.parts)
        common = min(len(have), len(wanted))
        return have[-common:] == wanted[-common:] and (
            len(wanted) <= len(have) or len(wanted) - len(have) <= 3 - len(have)
        )


class Binding:
    """The column names a joined row answers: ``sources`` in FROM order (module docstring)."""

    def __init__(self, sources: Sequence[Bound]) -> None:
        self.sources = tuple(sources)
        self._types = {_key(b.index, c): t for b in self.sources for c, t in b.columns}

    def prefix(self, count: int) -> Binding:
        """The binding of the first ``count`` sources (what an ON condition may name:
        from-transact-sql.md, the sources joined so far)."""
        return Binding(self.sources[:count])

    def key(self, parts: tuple[str, ...], line: int) -> str | None:
        """The joined row's key for the column ``parts`` (``[qualifier.]column``), or None
        when no source is named by the qualifier or, bare, has the column (an outer
        reference, or an error of the scope around).

        Raises:
            TSqlError: Msg 209, a bare column more than one source has; Msg 207, a column the
                qualified source does not have.
        """
        column = parts[-1].casefold()
        if len(parts) == 1:
            having = [b for b in self.sources if _key(b.index, column) in self._types]
            if len(having) > 1:
                raise TSqlError(209, f"Ambiguous column name '{parts[-1]}'.", line=line)
            return _key(having[0].index, column) if having else None
        for bound in self.sources:
            if bound.named_by(parts[:-1]):
                if _key(bound.index, column) not in self._types:
                    raise TSqlError(207, f"Invalid column name '{parts[-1]}'.", line=line)
                return _key(bound.index, column)
        return None

    def value(
        self,
        parts: tuple[str, ...],
        row: Row | None,
        outer: Callable[[tuple[str, ...]], Typed],
        line: int,
    ) -> Typed:
        """The value of column ``parts`` in ``row`` (a NULL of its type when there is no row:
        an aggregate over no rows); a name no source answers is ``outer``'s (the query around a
        correlated subquery, or the session: Msg 207).

        Raises:
            TSqlError: Msg 209 and 207 (:meth:`key`); Msg 4104, a qualifier that names no
                source here nor around.
        """
        key = self.key(parts, line)
        if key is not None:
            return row[key] if row is not None else Typed(None, self._types[key])
        return outer_value(parts, outer, line)

    def star(self, qualifier: tuple[str, ...], line: int) -> list[tuple[str, SqlType, str]]:
        """The columns ``*`` (every source's, in FROM order) or ``qualifier.*`` returns: name,
        type and key.

        Raises:
            TSqlError: Msg 107, a qualifier that names no source.
        """
        chosen = [b for b in self.sources if not qualifier or b.named_by(qualifier)]
        if not chosen:
            raise TSqlError(
                107,
                f"The column prefix '{'.'.join(qualifier)}' does not match with a table name "
                "or alias name used in the query.",
                severity=15,
                line=line,
            )
        return [(c, t, _key(b.index, c)) for b in chosen for c, t in b.columns]

    def type_of(self, parts: tuple[str, ...]) -> SqlType | None:
        """The type of column ``parts`` when it binds without error here (else None)."""
        try:
            key = self.key(parts, 0)
        except TSqlError:
            return None
        return self._types.get(key) if key is not None else None


def outer_value(
    parts: tuple[str, ...], outer: Callable[[tuple[str, ...]], Typed], line: int
) -> Typed:
    """Column ``parts``, which no source of this query answers, read from ``outer`` (the query
    around a correlated subquery, or the session: Msg 207).

    Raises:
        TSqlError: Msg 4104 instead of 207 when ``parts`` is qualified (its qualifier names no
            source here nor around), and what ``outer`` raises.
    """
    try:
        return outer(parts)
    except TSqlError as exc:
        if exc.number != 207 or len(parts) == 1:
            raise
        raise TSqlError(
            4104, f'The multi-part identifier "{".".join(parts)}" could not be bound.', line=line
        ) from None


def _check_names(sources: Sequence[Bound], line: int) -> None:
    """SQL Server's refusals of two FROM sources with one exposed name (database-engine-events-
    and-errors-1000-1999.md): Msg 1011 an alias twice, 1012 an alias that is a source's name,
    1013 two sources of one name without aliases."""
    for i, later in enumerate(sources):
        for earlier in sources[:i]:
            if later.alias is not None and earlier.alias is not None:
                if later.alias.casefold() == earlier.alias.casefold():
                    raise TSqlError(
                        1011,
                        f"The correlation name '{later.alias}' is specified multiple times in "
                        "a FROM clause.",
                        severity=15,
                        line=line,
                    )
            elif later.alias is None and earlier.alias is None:
                if later.parts[-1].casefold() == earlier.parts[-1].casefold():
                    raise TSqlError(
                        1013,
                        f'The objects "{later.shown}" and "{earlier.shown}" in the FROM clause '
                        "have the same exposed names. Use correlation names to distinguish them.",
                        severity=15,
                        line=line,
                    )
            else:
                aliased, plain = (later, earlier) if later.alias is not None else (earlier, later)
                assert aliased.alias is not None
                if aliased.alias.casefold() == plain.parts[-1].casefold():
                    raise TSqlError(
                        1012,
                        f"The correlation name '{aliased.alias}' has the same exposed name as "
                        f"table '{plain.shown}'.",
                        severity=15,
                        line=line,
                    )


def join_rows(
    core: n.SelectCore,
    rows_of: Callable[[tuple[str, ...]], _Source],
    holds: Callable[[n.Cond, Row, Binding], bool],
    line: int,
) -> tuple[Binding, list[Row]]:
    """The rows of ``core``'s FROM with its joins (module docstring), and the binding of
    their column names.

    Args:
        core: the SELECT; ``core.source`` is the first source, ``core.joins`` the rest.
        rows_of: a source's columns and rows by its name parts (Msg 208 / 1087 when unknown).
        holds: whether an ON condition is TRUE for a joined row (evaluated under the binding
            of the sources joined so far).
        line: the batch line, for errors.

    Raises:
        TSqlError: Msg 1011 / 1012 / 1013 (two sources with one exposed name), and what
            ``rows_of`` and ``holds`` raise (208, 1087, 209, 207, 4104, …).
    """
    assert core.source is not None
    written = [(core.source, core.alias), *((j.source, j.alias) for j in core.joins)]
    data = [rows_of(parts) for parts, _ in written]
    sources = [
        Bound(i, parts, alias, tuple(data[i].columns)) for i, (parts, alias) in enumerate(written)
    ]
    _check_names(sources, line)
    binding = Binding(sources)
    current: list[dict[str, Typed]] = [_keyed(0, row) for row in data[0].rows]
    for index, join in enumerate(core.joins, start=1):
        right = [_keyed(index, row) for row in data[index].rows]
        visible = binding.prefix(index + 1)
        current = _join(join, current, right, visible, holds, sources[:index], sources[index])
    return binding, list(current)


def _keyed(index: int, row: Row) -> dict[str, Typed]:
    return {_key(index, column): value for column, value in row.items()}


def _nulls(sources: Sequence[Bound]) -> dict[str, Typed]:
    return {_key(b.index, c): Typed(None, t) for b in sources for c, t in b.columns}


def _join(
    join: n.Join,
    left: list[dict[str, Typed]],
    right: list[dict[str, Typed]],
    visible: Binding,
    holds: Callable[[n.Cond, Row, Binding], bool],
    left_sources: Sequence[Bound],
    right_source: Bound,
) -> list[dict[str, Typed]]:
    """One join step (from-transact-sql.md): the pairs ON holds for; LEFT adds each left row
    that matched none with NULLs on the right, RIGHT each such right row, FULL both."""
    out: list[dict[str, Typed]] = []
    matched_right: set[int] = set()
    for l_row in left:
        matched = False
        for r_index, r_row in enumerate(right):
            merged = {**l_row, **r_row}
            if join.on is None or holds(join.on, merged, visible):
                out.append(merged)
                matched = True
                matched_right.add(r_index)
        if not matched and join.kind in ("LEFT", "FULL"):
            out.append({**l_row, **_nulls([right_source])})
    if join.kind in ("RIGHT", "FULL"):
        missing = _nulls(left_sources)
        out.extend(
            {**missing, **r_row}
            for r_index, r_row in enumerate(right)
            if r_index not in matched_right
        )
    return out
