"""SELECT over one row source (a catalog view, a DMV, a queue, a table variable, or no FROM at
all) or over several joined (:mod:`.joins`): WHERE, aggregates with or without GROUP BY, ORDER
BY, DISTINCT, TOP, the select list — evaluated here, over rows the interpreter's
:class:`Sources` give (:mod:`.catalog_rows`).

A row is a mapping of lower-case column name to :class:`~.types.Typed`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cmp_to_key
from typing import Protocol

from ..errors import TSqlError
from . import nodes as n
from .evaluate import evaluate, is_true, test
from .for_xml import shape
from .joins import Binding, Bound, join_rows, outer_value
from .scope import ErrorContext, Scope, to_type
from .types import BIGINT, INT, NVARCHAR, SqlType, Typed
from .unsupported import not_supported
from .xml_methods import XmlNode, apply_rows, nodes_column_error

__all__ = ["Query", "Row", "RowSource", "Sources", "run_query"]

Row = Mapping[str, Typed]


@dataclass(frozen=True)
class RowSource:
    """A source's columns (names as SQL Server spells them, and types) and rows."""

    columns: tuple[tuple[str, SqlType], ...]
    rows: Sequence[Row]


class Sources(Protocol):
    """Where FROM finds its rows."""

    def rows(self, parts: tuple[str, ...], line: int) -> RowSource:
        """The rows of the object named by ``parts`` (``[database.][schema.]name``).

        Raises:
            TSqlError: Msg 208, the object does not exist.
        """
        ...


@dataclass
class Query:
    """A SELECT's outcome: its column names and types, the rows of values, and the variable
    assignments to make (SELECT @v = …: the last row's, none when no row)."""

    columns: list[tuple[str, SqlType]]
    rows: list[list[Typed]]
    assignments: list[tuple[str, Typed]]
    assigns: bool


class _RowScope:
    """A scope that reads a row's columns and aggregates over a group of rows; ``binding``
    the column names of joined rows (:class:`~.joins.Binding`; None: one source's row, keyed
    by column name); ``named`` whether a column's qualifier names that one source (or an
    APPLY's table): a column whose qualifier does not is an outer reference."""

    def __init__(
        self,
        base: Scope,
        row: Row | None,
        group: Sequence[Row] | None = None,
        binding: Binding | None = None,
        named: Callable[[tuple[str, ...]], bool] | None = None,
    ) -> None:
        self.base = base
        self.row = row
        self.group = group
        self.binding = binding
        self.named = named

    def _at(self, row: Row) -> _RowScope:
        return _RowScope(self.base, row, binding=self.binding, named=self.named)

    @property
    def line(self) -> int:
        return self.base.line

    def variable(self, name: str, line: int) -> Typed:
        return self.base.variable(name, line)

    def global_variable(self, name: str) -> Typed:
        return self.base.global_variable(name)

    def column(self, parts: tuple[str, ...]) -> Typed:
        if self.binding is not None:
            return self.binding.value(parts, self.row, self.base.column, self.line)
        if len(parts) > 1 and self.named is not None and not self.named(parts[:-1]):
            return outer_value(parts, self.base.column, self.line)
        if self.row is not None:
            value = self.row.get(parts[-1].lower())
            if value is not None:
                return value
        return self.base.column(parts)

    def now(self) -> datetime:
        return self.base.now()

    def utc_now(self) -> datetime:
        return self.base.utc_now()

    def caught(self) -> ErrorContext | None:
        return self.base.caught()

    def xact_state(self) -> int:
        return self.base.xact_state()

    def cursor_status(self, kind: str, name: str) -> int:
        return self.base.cursor_status(kind, name)

    def column_updated(self, column: str) -> bool:
        return self.base.column_updated(column)

    def subquery(self, select: n.SelectCore, outer: Scope | None = None) -> list[list[Typed]]:
        return self.base.subquery(select, outer if outer is not None else self)

    def object_id(self, name: str) -> int | None:
        return self.base.object_id(name)

    def database_id(self, name: str | None) -> int | None:
        return self.base.database_id(name)

    def database_name(self, database_id: int | None) -> str | None:
        return self.base.database_name(database_id)

    def aggregate(self, call: n.FunctionCall) -> Typed:
        if self.group is None:
            raise TSqlError(
                147,
                "An aggregate may not appear in the WHERE clause unless it is in a subquery "
                "contained in a HAVING clause or a select list, and the column being aggregated "
                "is an outer reference.",
                line=self.line,
                severity=15,
            )
        name = call.name
        if name in ("COUNT", "COUNT_BIG"):
            type_ = BIGINT if name == "COUNT_BIG" else INT
            if call.star:
                return Typed(len(self.group), type_)
            values = [evaluate(call.args[0], self._at(r)) for r in self.group]
            return Typed(sum(1 for v in values if v.value is not None), type_)
        if len(call.args) != 1:
            raise TSqlError(
                174,
                f"The {name.lower()} function requires 1 argument(s).",
                line=self.line,
                severity=15,
            )
        values = [evaluate(call.args[0], self._at(r)) for r in self.group]
        present = [v for v in values if v.value is not None]
        type_ = values[0].type if values else INT
        if not present:
            return Typed(None, type_)

        def compare(a: Typed, b: Typed) -> int:
            return _order(a, b, self)

        key = cmp_to_key(compare)
        if name == "MIN":
            return sorted(present, key=key)[0]
        if name == "MAX":
            return sorted(present, key=key)[-1]
        numbers = [
            to_type(v, BIGINT if type_.is_integer else SqlType("DECIMAL", 38, 10), self)
            for v in present
        ]
        total = Decimal(0)
        for number in numbers:
            assert isinstance(number, int | Decimal)
            total += number
        if name == "SUM":
            return Typed(int(total) if type_.is_integer else total, type_)
        average = total / len(present)
        return Typed(int(average) if type_.is_integer else average, type_)


def _order(a: Typed, b: Typed, scope: Scope) -> int:
    if a.value is None and b.value is None:
        return 0
    if a.value is None:
        return -1  # NULLs sort first in ascending order
    if b.value is None:
        return 1
    x = a.value
    y = b.value
    if isinstance(x, str) and isinstance(y, str):
        x, y = x.casefold(), y.casefold()
    elif type(x) is not type(y):
        x = to_type(a, SqlType("NVARCHAR"), scope)
        y = to_type(b, SqlType("NVARCHAR"), scope)
    return int(x > y) - int(x < y)  # type: ignore[operator]


def _has_aggregate(expr: n.Expr) -> bool:
    if isinstance(expr, n.FunctionCall):
        return expr.name in ("COUNT", "COUNT_BIG", "SUM", "MIN", "MAX", "AVG") or any(
            _has_aggregate(a) for a in expr.args
        )
    if isinstance(expr, n.Binary):
        return _has_aggregate(expr.left) or _has_aggregate(expr.right)
    if isinstance(expr, n.Cast | n.Negate):
        return _has_aggregate(expr.expr)
    return False


def _order_expr(expr: n.Expr, core: n.SelectCore, scope: Scope) -> n.Expr:
    """What an ORDER BY item sorts by: a select-list column's expression when the item is its
    alias (``ORDER BY c`` for ``COUNT(*) AS c``) or its position (``ORDER BY 2``), else the
    item itself (select-transact-sql-order-by-clause.md)."""
    items = [item for item in core.items if isinstance(item, n.ExprItem)]
    positional = items and len(items) == len(core.items)  # SELECT *: positions not known here
    if isinstance(expr, n.Literal) and isinstance(expr.value, int) and positional:
        if not 1 <= expr.value <= len(items):
            raise TSqlError(
                108,
                f"The ORDER BY position number {expr.value} is out of range of the number of "
                "items in the select list.",
                line=scope.line,
                severity=15,
            )
        return items[expr.value - 1].expr
    if isinstance(expr, n.Column) and len(expr.parts) == 1:
        wanted = expr.parts[0].casefold()
        for item in items:
            if item.alias is not None and item.alias.casefold() == wanted:
                return item.expr
    return expr


def _column_name(item: n.ExprItem) -> str:
    if item.alias is not None:
        return item.alias
    if isinstance(item.expr, n.Column):
        return item.expr.parts[-1]
    return ""


def run_query(core: n.SelectCore, scope: Scope, sources: Sources) -> Query:
    """Run one SELECT.

    Raises:
        TSqlError: SQL Server's errors: 208 unknown object, 207 unknown column, 141 a select
            list that both assigns and returns, the join errors of :mod:`.joins` (209, 4104,
            107, 1011-1013), 40000 for ``.nodes()`` APPLY with a join, and the evaluation
            errors of :func:`~.evaluate.evaluate`.
    """
    assigns = any(isinstance(item, n.Assign) for item in core.items)
    if assigns and not all(isinstance(item, n.Assign) for item in core.items):
        raise TSqlError(
            141,
            "A SELECT statement that assigns a value to a variable must not be combined with "
            "data-retrieval operations.",
            line=scope.line,
            severity=15,
        )
    binding: Binding | None = None
    named: Callable[[tuple[str, ...]], bool] | None = None
    star: _Star
    type_of: Callable[[tuple[str, ...]], SqlType | None]
    if core.joins:
        if core.applies:
            raise not_supported("APPLY of .nodes() in a SELECT with a JOIN", scope.line)

        def holds(cond: n.Cond, row: Row, visible: Binding) -> bool:
            return is_true(test(cond, _RowScope(scope, row, binding=visible)))

        binding, rows = join_rows(
            core, lambda parts: sources.rows(parts, scope.line), holds, scope.line
        )
        star = binding.star
        type_of = binding.type_of
    else:
        source = (
            RowSource((), [{}]) if core.source is None else sources.rows(core.source, scope.line)
        )
        rows = list(source.rows)
        named = _single_names(core)
        if core.applies:  # CROSS / OUTER APPLY ….nodes(…): a row per node
            rows = list(
                apply_rows(
                    source.rows, core.applies, lambda r: _RowScope(scope, r, named=named), evaluate
                )
            )
        star = _single_star(core, source)
        type_of = _single_type(source)

    def at(row: Row | None, group: Sequence[Row] | None = None) -> _RowScope:
        return _RowScope(scope, row, group, binding, named)

    if core.where is not None:
        where = core.where
        rows = [row for row in rows if is_true(test(where, at(row)))]
    aggregate = core.group_by or any(
        isinstance(item, n.ExprItem | n.Assign) and _has_aggregate(item.expr) for item in core.items
    )
    groups: list[tuple[Row | None, Sequence[Row]]]
    if core.group_by:
        keyed: dict[tuple[object, ...], list[Row]] = {}
        for row in rows:
            key = tuple(_group_key(evaluate(e, at(row))) for e in core.group_by)
            keyed.setdefault(key, []).append(row)
        groups = [(members[0], members) for members in keyed.values()]
    elif aggregate:
        groups = [(rows[0] if rows else None, rows)]
    else:
        groups = [(row, [row]) for row in rows]
    if core.order_by:
        order_by = [
            (_order_expr(expr, core, scope), descending) for expr, descending in core.order_by
        ]

        def compare(
            a: tuple[Row | None, Sequence[Row]], b: tuple[Row | None, Sequence[Row]]
        ) -> int:
            for expr, descending in order_by:
                x = evaluate(expr, at(a[0], a[1] if aggregate else None))
                y = evaluate(expr, at(b[0], b[1] if aggregate else None))
                result = _order(x, y, scope)
                if result:
                    return -result if descending else result
            return 0

        groups.sort(key=cmp_to_key(compare))
    columns: list[tuple[str, SqlType]] = []
    out: list[list[Typed]] = []
    assignments: list[tuple[str, Typed]] = []
    for first, members in groups:
        row_scope = at(first, members if aggregate else None)
        values: list[Typed] = []
        names: list[tuple[str, SqlType]] = []
        for item in core.items:
            if isinstance(item, n.Star):
                if first is None and core.source is None:
                    raise TSqlError(
                        263, "Must specify table to select from.", line=scope.line, severity=16
                    )
                for name, type_, column in star(item.qualifier, scope.line):
                    values.append(first[column] if first is not None else Typed(None, type_))
                    names.append((name, type_))
            elif isinstance(item, n.Assign):
                assignments.append((item.variable, evaluate(item.expr, row_scope)))
            else:
                value = evaluate(item.expr, row_scope)
                if isinstance(value.value, XmlNode):
                    raise nodes_column_error(_column_name(item), scope.line)
                values.append(value)
                names.append((_column_name(item), value.type))
        if not columns:
            columns = names
        out.append(values)
    if not columns and not assigns:
        columns = _static_columns(core, star, type_of, scope.line)
    if core.distinct:
        seen: set[tuple[object, ...]] = set()
        unique = []
        for values in out:
            key = tuple(_group_key(v) for v in values)
            if key not in seen:
                seen.add(key)
                unique.append(values)
        out = unique
    if core.top is not None:
        top = evaluate(core.top, scope)
        limit = to_type(top, BIGINT, scope)
        assert isinstance(limit, int)
        out = out[: max(limit, 0)]
        if assigns:
            assignments = assignments[
                : max(limit, 0) * sum(isinstance(i, n.Assign) for i in core.items)
            ]
    if core.for_xml is not None:
        columns, out = shape(core.for_xml, columns, out, scope.line)
    return Query(columns, out, assignments, assigns)


_Star = Callable[[tuple[str, ...], int], list[tuple[str, SqlType, str]]]
"""The columns ``*`` or ``qualifier.*`` returns (name, type, the row's key), at a line."""


def _single_names(core: n.SelectCore) -> Callable[[tuple[str, ...]], bool]:
    """Whether a qualifier names the one source of ``core`` (its alias, else its name) or
    the table of one of its APPLYs (``AS table(column)``)."""
    bound = Bound(0, core.source, core.alias, ()) if core.source is not None else None
    tables = {a.table.casefold() for a in core.applies}

    def named(qualifier: tuple[str, ...]) -> bool:
        if len(qualifier) == 1 and qualifier[0].casefold() in tables:
            return True
        return bound is not None and bound.named_by(qualifier)

    return named


def _single_star(core: n.SelectCore, source: RowSource) -> _Star:
    """``*`` over one source: its columns; ``qualifier.*`` too when the qualifier names the
    source (:meth:`.joins.Bound.named_by`), else Msg 107."""
    columns = [(name, type_, name.lower()) for name, type_ in source.columns]

    def star(qualifier: tuple[str, ...], line: int) -> list[tuple[str, SqlType, str]]:
        if qualifier and core.source is not None:
            Binding([Bound(0, core.source, core.alias, source.columns)]).star(qualifier, line)
        return columns

    return star


def _single_type(source: RowSource) -> Callable[[tuple[str, ...]], SqlType | None]:
    """The type of one source's column, by its name (None when it has none)."""
    types = {name.lower(): t for name, t in source.columns}
    return lambda parts: types.get(parts[-1].lower())


def _static_columns(
    core: n.SelectCore,
    star: _Star,
    type_of: Callable[[tuple[str, ...]], SqlType | None],
    line: int,
) -> list[tuple[str, SqlType]]:
    """The columns of a SELECT that returned no row (sqlcmd still prints the header)."""
    columns: list[tuple[str, SqlType]] = []
    for item in core.items:
        if isinstance(item, n.Star):
            columns.extend((name, type_) for name, type_, _ in star(item.qualifier, line))
        elif isinstance(item, n.ExprItem):
            type_ = NVARCHAR
            if isinstance(item.expr, n.Column):
                type_ = type_of(item.expr.parts) or NVARCHAR
            columns.append((_column_name(item), type_))
    return columns


def _group_key(value: Typed) -> object:
    v = value.value
    if isinstance(v, str):
        return v.rstrip(" ").casefold()
    return v
