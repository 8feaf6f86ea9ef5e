"""Table variables (declare-local-variable-transact-sql.md, the table form; table-transact-sql.md):
``DECLARE @t TABLE (…)``, INSERT, UPDATE, DELETE and SELECT on it, kept in the session in Python
— typed with the interpreter's :class:`~.types.SqlType` and its conversions, read by its own
query evaluation (:mod:`.queries`) — never in the database underneath: they are not the
application's tables. As on SQL Server a table variable lives for its batch (or procedure), and
a ROLLBACK does not undo its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..errors import TSqlError
from . import nodes as n
from .catalog_rows import CatalogRows
from .evaluate import evaluate, is_true, test
from .queries import RowSource, _RowScope
from .results import ResultSet
from .scope import Scope, to_type
from .types import BIGINT, SqlType, Typed

__all__ = ["TABLE_VARIABLE_STATEMENTS", "TableVariable", "VariableSources"]


class TableVariable:
    """One table variable: its columns (as declared) and rows (column name, lower case →
    value), and the next value of each IDENTITY column."""

    def __init__(self, definition: n.TableDef) -> None:
        self.name = definition.name
        self.columns = definition.columns
        self.keys = definition.keys
        self.rows: list[dict[str, Typed]] = []
        self._identity = {c.name.casefold(): c.identity[0] for c in self.columns if c.identity}

    def source(self) -> RowSource:
        """Its columns and a copy of its rows, for a query."""
        return RowSource(
            tuple((c.name, c.type) for c in self.columns), [dict(r) for r in self.rows]
        )

    def column(self, name: str, line: int) -> n.ColumnDef:
        """The column ``name`` (Msg 207 when there is none)."""
        for c in self.columns:
            if c.name.casefold() == name.casefold():
                return c
        raise TSqlError(207, f"Invalid column name '{name}'.", line=line)

    def next_identity(self, column: n.ColumnDef) -> int:
        """The next value of IDENTITY ``column`` (seed, then seed + increment, …): SQL Server
        does not give a value back when its row is rolled back or deleted."""
        key = column.name.casefold()
        value = self._identity[key]
        assert column.identity is not None
        self._identity[key] = value + column.identity[1]
        return value

    def check(self, rows: Sequence[dict[str, Typed]], verb: str, line: int) -> None:
        """NOT NULL and the PRIMARY KEY / UNIQUE keys hold on ``rows`` (Msg 515, 2627)."""
        for row in rows:
            for c in self.columns:
                if not c.nullable and row[c.name.lower()].value is None:
                    raise TSqlError(
                        515,
                        f"Cannot insert the value NULL into column '{c.name}', table "
                        f"'{self.name}'; column does not allow nulls. {verb} fails.",
                        line=line,
                    )
        for key in self.keys:
            seen: set[tuple[object, ...]] = set()
            for row in rows:
                value = tuple(_key(row[k.lower()]) for k in key)
                if value in seen:
                    shown = ", ".join(str(row[k.lower()].value) for k in key)
                    raise TSqlError(
                        2627,
                        f"Violation of PRIMARY KEY or UNIQUE constraint on {', '.join(key)}. "
                        f"Cannot insert duplicate key in object '{self.name}'. The duplicate "
                        f"key value is ({shown}).",
                        severity=14,
                        line=line,
                    )
                seen.add(value)


def _key(value: Typed) -> object:
    v = value.value
    return v.rstrip(" ").casefold() if isinstance(v, str) else v


class VariableSources:
    """Where FROM finds rows: the batch's table variables (``@t``), in a trigger its
    ``inserted`` and ``deleted`` tables (``trigger_tables``), else the catalog views and
    queues of :class:`~.catalog_rows.CatalogRows`."""

    def __init__(
        self,
        base: CatalogRows,
        tables: dict[str, TableVariable],
        trigger_tables: dict[str, RowSource] | None = None,
    ) -> None:
        self.base = base
        self.tables = tables
        self.trigger_tables = trigger_tables or {}

    def _trigger_table(self, parts: tuple[str, ...]) -> RowSource | None:
        if len(parts) != 1:
            return None
        return self.trigger_tables.get(parts[0].strip("[]").casefold())

    def has(self, parts: tuple[str, ...]) -> bool:
        """True when the interpreter reads ``parts`` itself: a table variable (declared or not:
        Msg 1087 then, never the application's table), a trigger's ``inserted`` or
        ``deleted``, or what ``base`` reads."""
        return (
            parts[-1].startswith("@")
            or self._trigger_table(parts) is not None
            or self.base.has(parts)
        )

    def in_database(self, parts: tuple[str, ...]) -> bool:
        """True for a trigger's ``inserted`` and ``deleted``: the database underneath has them
        too (as temporary tables), so they join the application's tables there."""
        return self._trigger_table(parts) is not None

    def table(self, name: str, line: int) -> TableVariable:
        """The table variable ``name`` (Msg 1087 when not declared)."""
        table = self.tables.get(name.casefold())
        if table is None:
            raise TSqlError(
                1087, f'Must declare the table variable "{name}".', severity=15, line=line
            )
        return table

    def rows(self, parts: tuple[str, ...], line: int) -> RowSource:
        """The rows of ``parts``: a table variable's (Msg 1087 when not declared), else
        ``base``'s (a catalog view or a queue)."""
        if parts[-1].startswith("@"):
            return self.table(parts[-1], line).source()
        trigger_table = self._trigger_table(parts)
        if trigger_table is not None:  # a copy: the trigger's statements cannot change it
            return RowSource(trigger_table.columns, [dict(r) for r in trigger_table.rows])
        return self.base.rows(parts, line)

    def object_id(self, name: str) -> int | None:
        """OBJECT_ID(``name``), as ``base`` answers it (a table variable has none)."""
        return self.base.object_id(name)


class Session(Scope, Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    rowcount: int
    nocount: bool

    def table_variable(self, name: str) -> TableVariable: ...
    def rows_of_call(self, call: n.Execute) -> list[list[Typed]]: ...
    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...


def _converted(value: Typed, column: n.ColumnDef, scope: Scope) -> Typed:
    """``value`` as ``column`` holds it; a string or binary longer than the column is
    Msg 8152, as an INSERT or UPDATE of a table refuses it."""
    converted = to_type(value, column.type, scope)
    original = value.value
    if (
        isinstance(original, str | bytes)
        and isinstance(converted, str | bytes)
        and len(original.rstrip(" ") if isinstance(original, str) else original) > len(converted)
    ):
        raise TSqlError(8152, "String or binary data would be truncated.", line=scope.line)
    return Typed(converted, column.type)


def _counted(session: Session, rows: int) -> None:
    session.rowcount = rows
    if not session.nocount:
        session.emit(rows)


def _insert(session: Session, s: n.InsertVariable) -> None:
    table = session.table_variable(s.table)
    given = [[None if e is None else evaluate(e, session) for e in row] for row in s.rows]
    values: list[list[Typed | None]] = list(given)
    if s.select is not None:
        values = [list[Typed | None](row) for row in session.subquery(s.select)]
    if s.execute is not None:  # the rows of the procedure's result sets
        values = [list[Typed | None](row) for row in session.rows_of_call(s.execute)]
    if s.columns is not None:
        targets = [table.column(name, s.line) for name in s.columns]
    else:
        targets = [c for c in table.columns if c.identity is None]
    made = []
    for row in values:
        if row and len(row) != len(targets):
            if s.columns is None:
                raise TSqlError(
                    213,
                    "Column name or number of supplied values does not match table definition.",
                    line=s.line,
                )
            number = 109 if len(targets) > len(row) else 110
            raise TSqlError(
                number,
                f"There are {'more' if number == 109 else 'fewer'} columns in the INSERT "
                "statement than values specified in the VALUES clause. The number of values in "
                "the VALUES clause must match the number of columns specified in the INSERT "
                "statement.",
                severity=15,
                line=s.line,
            )
        by_name = {c.name.lower(): v for c, v in zip(targets, row, strict=False)}
        out: dict[str, Typed] = {}
        for c in table.columns:
            key = c.name.lower()
            if c.identity is not None:
                if key in by_name:
                    raise TSqlError(
                        8101,
                        f"An explicit value for the identity column in table '{table.name}' can "
                        "only be specified when a column list is used and IDENTITY_INSERT is ON.",
                        line=s.line,
                    )
                out[key] = Typed(table.next_identity(c), c.type)
            elif by_name.get(key) is not None:
                out[key] = _converted(by_name[key], c, session)  # type: ignore[arg-type]
            elif c.default is not None:
                out[key] = _converted(evaluate(c.default, session), c, session)
            else:
                out[key] = Typed(None, c.type)
        made.append(out)
    table.check(table.rows + made, "INSERT", s.line)
    table.rows.extend(made)
    _counted(session, len(made))


def _matching(
    session: Session, table: TableVariable, where: n.Cond | None, top: n.Expr | None
) -> list[int]:
    """The positions of the rows ``where`` holds for, at most TOP of them."""
    found = [
        i
        for i, row in enumerate(table.rows)
        if where is None or is_true(test(where, _RowScope(session, row)))
    ]
    if top is not None:
        limit = to_type(evaluate(top, session), BIGINT, session)
        found = found[: max(int(limit), 0)] if isinstance(limit, int) else found
    return found


def _update(session: Session, s: n.UpdateVariable) -> None:
    table = session.table_variable(s.table)
    columns = [table.column(name, s.line) for name, _ in s.sets]
    for c in columns:
        if c.identity is not None:
            raise TSqlError(8102, f"Cannot update identity column '{c.name}'.", line=s.line)
    rows = [dict(r) for r in table.rows]
    positions = _matching(session, table, s.where, s.top)
    for i in positions:
        scope = _RowScope(session, table.rows[i])  # every SET reads the row as it was
        for c, (_, expr) in zip(columns, s.sets, strict=True):
            rows[i][c.name.lower()] = _converted(evaluate(expr, scope), c, session)
    table.check(rows, "UPDATE", s.line)
    table.rows[:] = rows
    _counted(session, len(positions))


def _delete(session: Session, s: n.DeleteVariable) -> None:
    table = session.table_variable(s.table)
    gone = set(_matching(session, table, s.where, s.top))
    table.rows[:] = [r for i, r in enumerate(table.rows) if i not in gone]
    _counted(session, len(gone))


def fill_from_receive(
    table: TableVariable, columns: Sequence[SqlType], rows: list[list[Typed]], scope: Scope
) -> None:
    """RECEIVE … INTO ``table`` (receive-transact-sql.md: "The table variable must have the
    same number of columns as are in the messages. The data type of each column in the table
    variable must be implicitly convertible to the data type of the corresponding column in
    the messages"): ``rows`` by position, converted to the table's columns.

    Raises:
        TSqlError: Msg 213 when the counts differ; the conversion errors; 515 and 2627.
    """
    if len(columns) != len(table.columns):
        raise TSqlError(
            213,
            "Column name or number of supplied values does not match table definition.",
            line=scope.line,
        )
    made = [
        {c.name.lower(): _converted(v, c, scope) for c, v in zip(table.columns, row, strict=True)}
        for row in rows
    ]
    table.check(table.rows + made, "INSERT", scope.line)
    table.rows.extend(made)


TABLE_VARIABLE_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.InsertVariable: _insert,
    n.UpdateVariable: _update,
    n.DeleteVariable: _delete,
}
"""The statement runner of each table-variable statement's node type."""
