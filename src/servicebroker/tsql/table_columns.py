"""The declared T-SQL types of the application's tables' columns (create-table-transact-sql.md).

The database underneath keeps a column in its own type (SQLite: an affinity; PostgreSQL: the
type sqlglot translated to), which does not say what T-SQL declared: ``VARCHAR(20)`` and
``NVARCHAR(MAX)`` both come back as text, ``BIT`` as an integer, ``DATETIME`` on SQLite as a
string. So CREATE TABLE records each column's declared type in the database's
:data:`COLUMNS` table (dropped with the table), and a SELECT's result set reads them: its
columns carry the declared types (sqlcmd's display widths follow: ``varchar(20)`` is 20 wide),
and its values are converted to them as SQL Server returns them. ``SELECT *`` lists every
column of every table of the FROM clause and its joins, in the order CREATE TABLE gave them.

A table created before its columns were recorded, or an expression rather than a column, is
typed by its values, as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..engine.transaction import Transaction
from .types import ConversionFailed, SqlType, Typed, convert, parse_type

__all__ = [
    "COLUMNS",
    "COLUMNS_TABLE",
    "Origin",
    "declared_columns",
    "forget_columns",
    "inserted_columns",
    "origins_of",
    "record_columns",
    "result_columns",
    "typed_as",
]

COLUMNS = "servicebroker_sql_columns"
"""The table, in each database, of the declared types of the columns of the tables T-SQL
created: ``table_name``, ``ordinal`` (from 1), ``name`` (as declared), ``type`` (T-SQL's text,
``VARCHAR(20)``; ``INT IDENTITY`` for an identity column)."""

COLUMNS_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {COLUMNS} (table_name VARCHAR(128) NOT NULL, "
    "ordinal INT NOT NULL, name VARCHAR(128) NOT NULL, type VARCHAR(64) NOT NULL, "
    "PRIMARY KEY (table_name, ordinal))"
)
"""Made with the table registry when an instance opens a database."""

_TYPE = re.compile(r"\s*([A-Za-z0-9_]+)\s*(?:\(\s*([A-Za-z0-9]+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")
_ALIASES = {"INTEGER": "INT", "UUID": "UNIQUEIDENTIFIER"}
_IDENTITY = " IDENTITY"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a select-list item comes from: ``column`` of the table named or aliased
    ``table`` (``""``: not qualified), ``"*"`` for ``*`` or ``table.*``; None (in a list of
    origins) for an expression."""

    table: str
    column: str


def _declared(kind: exp.DataType) -> str:
    """A column definition's type as T-SQL text (``VARCHAR(20)``, ``INT``; as sqlglot writes
    it, lower case, when it is no type :func:`.types.parse_type` knows)."""
    text = kind.sql(dialect="tsql")
    found = _parsed(text)
    return text.lower() if found is None else _text(found)


def record_columns(tx: Transaction, mark: str, table: str, create: exp.Expr) -> None:
    """Record the declared types of the columns CREATE TABLE ``create`` (sqlglot's tree, as
    read from T-SQL) gives ``table`` (case-folded); ``mark`` the placeholder."""
    schema = create.this
    if not isinstance(schema, exp.Schema):
        return
    definitions = [c for c in schema.expressions if isinstance(c, exp.ColumnDef)]
    for ordinal, column in enumerate(definitions, start=1):
        kind = column.args.get("kind")
        if isinstance(kind, exp.DataType):
            identity = any(
                isinstance(c.args.get("kind"), exp.GeneratedAsIdentityColumnConstraint)
                for c in column.constraints
            )
            tx.execute(
                f"INSERT INTO {COLUMNS} (table_name, ordinal, name, type) "
                f"VALUES ({mark}, {mark}, {mark}, {mark})",
                (table, ordinal, column.name, _declared(kind) + (_IDENTITY if identity else "")),
            )


def _text(t: SqlType) -> str:
    """``t`` as :func:`_parsed` reads it back: ``VARCHAR(20)``, ``NVARCHAR(MAX)``,
    ``DECIMAL(10,2)``, ``INT``."""
    if t.name in ("CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "BINARY", "VARBINARY"):
        return f"{t.name}({'MAX' if t.length is None else t.length})"
    if t.name == "DECIMAL":
        return f"DECIMAL({t.length},{t.scale or 0})"
    return t.name


def forget_columns(tx: Transaction, mark: str, table: str) -> None:
    """DROP TABLE ``table``: its columns' records go with it."""
    tx.execute(f"DELETE FROM {COLUMNS} WHERE table_name = {mark}", (table,))


def declared_columns(
    tx: Transaction, mark: str, tables: Sequence[str]
) -> dict[str, list[tuple[str, SqlType | None]]]:
    """The recorded columns of ``tables`` (case-folded names), each table's in CREATE TABLE's
    order with its declared type; a table without records is missing from the answer."""
    wanted = sorted(set(tables))
    if not wanted:
        return {}
    marks = ", ".join([mark] * len(wanted))
    rows = tx.execute(
        f"SELECT table_name, name, type FROM {COLUMNS} WHERE table_name IN ({marks}) "
        "ORDER BY table_name, ordinal",
        wanted,
    )
    found: dict[str, list[tuple[str, SqlType | None]]] = {}
    for table, name, text in rows:
        found.setdefault(str(table), []).append((str(name), _parsed(str(text))))
    return found


def inserted_columns(tx: Transaction, mark: str, table: str) -> list[str] | None:
    """The columns an INSERT without a column list gives values to (insert-transact-sql.md):
    every recorded column of ``table`` but its identity column (None: not recorded)."""
    rows = tx.execute(
        f"SELECT name, type FROM {COLUMNS} WHERE table_name = {mark} ORDER BY ordinal", (table,)
    )
    if not rows:
        return None
    return [str(name) for name, text in rows if not str(text).endswith(_IDENTITY)]


def _parsed(text: str) -> SqlType | None:
    """The type T-SQL text names (``VARCHAR(20)``, sqlglot's ``INTEGER`` and ``UUID`` too;
    a recorded ``… IDENTITY`` without it), or None when it is none the interpreter knows."""
    match = _TYPE.match(text.removesuffix(_IDENTITY))
    if match is None:
        return None
    name = _ALIASES.get(match[1].upper(), match[1].upper())
    try:
        return parse_type(name, match[2], int(match[3]) if match[3] else None)
    except (KeyError, ValueError):
        return None


def origins_of(select: exp.Select) -> tuple[list[Origin | None], list[tuple[str, str]]]:
    """The origin of each select-list item of ``select``, and its FROM clause's tables and
    joined tables in order as (alias or name, table name), case-folded."""
    origins: list[Origin | None] = []
    for item in select.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Star):
            origins.append(Origin("", "*"))
        elif isinstance(inner, exp.Column):
            column = "*" if isinstance(inner.this, exp.Star) else inner.name.casefold()
            origins.append(Origin(inner.table.casefold(), column))
        else:
            origins.append(None)
    sources: list[tuple[str, str]] = []
    clauses = [select.args.get("from_"), *(select.args.get("joins") or [])]
    for clause in clauses:
        table = clause.this if clause is not None else None
        if isinstance(table, exp.Table):
            sources.append((table.alias_or_name.casefold(), table.name.casefold()))
    return origins, sources


def result_columns(
    names: Sequence[str],
    origins: Sequence[Origin | None],
    sources: Sequence[tuple[str, str]],
    declared: dict[str, list[tuple[str, SqlType | None]]],
) -> list[tuple[str, SqlType | None]] | None:
    """The result set's columns — name and declared type (None: typed by its values) — with
    each ``*`` expanded over ``sources``' declared columns; None when a ``*`` names a table
    whose columns are not recorded (the caller keeps the database's own names)."""
    columns: list[tuple[str, SqlType | None]] = []
    for name, origin in zip(names, origins, strict=False):
        if origin is None:
            columns.append((name, None))
            continue
        if origin.column == "*":
            chosen = [t for a, t in sources if not origin.table or a == origin.table]
            if not chosen or any(t not in declared for t in chosen):
                return None
            for table in chosen:
                columns.extend(declared[table])
            continue
        tables = (
            [t for a, t in sources if a == origin.table]
            if origin.table
            else [t for _, t in sources]
        )
        found = next(
            (
                type_
                for table in tables
                for column, type_ in declared.get(table, [])
                if column.casefold() == origin.column
            ),
            None,
        )
        columns.append((name, found))
    return columns


def typed_as(value: Typed, declared: SqlType | None) -> Typed:
    """A value the database returned, as its column's declared type returns it (as it came
    when the type is unknown or the value does not convert)."""
    if declared is None or value.value is None:
        return Typed(value.value, declared or value.type)
    try:
        return Typed(convert(value.value, value.type, declared), declared)
    except ConversionFailed:
        return value
