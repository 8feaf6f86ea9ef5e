"""The application's own tables in T-SQL (create-table-transact-sql.md, insert-transact-sql.md,
update-transact-sql.md, delete-transact-sql.md, SELECT on them): each statement is translated by
sqlglot from T-SQL to the database underneath (SQLite or PostgreSQL) and run through the
session's broker transaction (``tx.execute``), so the application's rows commit or roll back
with the messages, as SEND and RECEIVE commit with the application's data on SQL Server.

What sqlglot would translate approximately is not run: a statement is read as sqlglot's tree,
every node checked against the constructs whose translation keeps T-SQL's meaning (comparisons,
arithmetic, ``+`` on strings as concatenation, COALESCE / ISNULL, UPPER, LOWER, ABS, the
aggregates, CASE, joins, subqueries, TOP, the column definitions), and anything else is refused
by name. Variables become parameters (their values converted as T-SQL converts them); GETDATE()
and the other clock functions read the broker's clock; ``dbo.`` and database prefixes are
dropped (a database of the instance is one schema underneath); temporary tables (``#t``) are
refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ..broker import Broker
from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .results import ResultSet
from .scope import Scope
from .table_columns import (
    COLUMNS_TABLE,
    Origin,
    declared_columns,
    forget_columns,
    origins_of,
    record_columns,
    result_columns,
    typed_as,
)
from .table_definitions import identity_key, unordered, without_clustering
from .types import BIGINT, BIT, DATETIME, INT, NVARCHAR, UNIQUEIDENTIFIER, SqlType, Typed
from .unsupported import not_supported

__all__ = [
    "REGISTRY",
    "TableSession",
    "Translation",
    "check_known",
    "create_or_drop_table",
    "db_value",
    "ensure_registry",
    "placeholder",
    "query_rows",
    "run_select",
    "table_exists",
    "typed_value",
]


class TableSession(Scope, Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    rowcount: int
    nocount: bool

    @property
    def postgres(self) -> bool: ...

    def statement_transaction(self) -> AbstractContextManager[Transaction]: ...
    def rows_elsewhere(self, select: n.SelectCore) -> list[list[Typed]] | None: ...
    def rows_of_call(self, call: n.Execute) -> list[list[Typed]]: ...
    def assign(self, name: str, value: Typed) -> None: ...
    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...
    def trigger_table(self, name: str) -> str | None: ...
    def forget_triggers(self, tx: Transaction, table: str) -> None: ...


_SAFE: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Where, exp.Join, exp.Table, exp.TableAlias, exp.Identifier,
    exp.Column, exp.Star, exp.Literal, exp.Null, exp.Boolean, exp.Placeholder, exp.EQ, exp.NEQ,
    exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Like,
    exp.Between, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.DPipe,
    exp.Alias, exp.Order, exp.Ordered, exp.Group, exp.Limit, exp.Count, exp.Sum, exp.Min,
    exp.Max, exp.Avg, exp.Coalesce, exp.Upper, exp.Lower, exp.Abs, exp.Case, exp.If,
    exp.Distinct, exp.Insert, exp.Schema, exp.Values, exp.Tuple, exp.Update, exp.Delete,
    exp.Create, exp.ColumnDef, exp.DataType, exp.DataTypeParam, exp.ColumnConstraint,
    exp.NotNullColumnConstraint, exp.PrimaryKeyColumnConstraint, exp.PrimaryKey,
    exp.UniqueColumnConstraint, exp.GeneratedAsIdentityColumnConstraint,
    exp.DefaultColumnConstraint, exp.Drop, exp.Subquery, exp.Exists, exp.Var,
    exp.Properties, exp.Reference, exp.ForeignKey, exp.Constraint, exp.WithTableHint,
    exp.Returning,
)  # fmt: skip
"""The sqlglot nodes whose translation keeps T-SQL's meaning (module docstring)."""


def db_value(value: Typed) -> object:
    """A T-SQL value as the database driver takes it."""
    v = value.value
    if isinstance(v, uuid.UUID):
        return str(v).upper()
    if isinstance(v, Decimal):
        return float(v) if not value.type.is_numeric or value.type.scale else v
    return v


def typed_value(value: object) -> Typed:
    """A value the database returned, with the T-SQL type it reads as."""
    if value is None:
        return Typed(None, NVARCHAR)
    if isinstance(value, bool):
        return Typed(int(value), BIT)
    if isinstance(value, int):
        return Typed(value, INT if -(2**31) <= value < 2**31 else BIGINT)
    if isinstance(value, float):
        return Typed(value, SqlType("FLOAT"))
    if isinstance(value, Decimal):
        return Typed(value, SqlType("DECIMAL", 38, max(0, -value.as_tuple().exponent)))  # type: ignore[operator]
    if isinstance(value, bytes | memoryview):
        return Typed(bytes(value), SqlType("VARBINARY"))
    if isinstance(value, uuid.UUID):
        return Typed(value, UNIQUEIDENTIFIER)
    if isinstance(value, datetime):
        return Typed(value.replace(tzinfo=None), DATETIME)
    return Typed(str(value), NVARCHAR)


@dataclass(frozen=True)
class _Template:
    """A statement's translation without its parameters' values: the SQL, where each
    parameter's value comes from (``("var", "@name")``, ``("now", "")``, ``("utc", "")``,
    ``("uuid", "")``), the column names and the tables it names."""

    sql: str
    sources: tuple[tuple[str, str], ...]
    names: tuple[str, ...]
    tables: tuple[str, ...]
    origins: tuple[Origin | None, ...]
    from_tables: tuple[tuple[str, str], ...]


_TEMPLATES: dict[tuple[str, bool, int, bool], _Template] = {}
"""Translations made, by (statement text, PostgreSQL, line): a procedure's statement is parsed,
checked and generated by sqlglot once, not each time it runs (only its variables' values
change). Bounded by :data:`_TEMPLATES_KEPT`."""

_TEMPLATES_KEPT = 2048


class Translation:
    """One statement's text translated: the SQL, its parameters, the variables a SELECT
    assigns (in select-list order), its column names and where each comes from
    (:func:`~.table_columns.origins_of`)."""

    def __init__(
        self,
        session: TableSession,
        text: str,
        line: int,
        outer: tuple[Scope, Callable[[list[str]], set[str]]] | None = None,
        *,
        returning_rows: bool = False,
    ) -> None:
        self.session = session
        self.line = line
        self.params: list[object] = []
        self.sources: list[tuple[str, str]] = []
        self.targets: list[str] = []
        self.names: list[str] = []
        self.tables: list[str] = []
        self.origins: list[Origin | None] = []
        self.from_tables: list[tuple[str, str]] = []
        self.in_trigger = False  # it reads a trigger's inserted or deleted: not kept
        key = (text, session.postgres, line, returning_rows)
        template = _TEMPLATES.get(key) if outer is None else None
        if template is not None:
            self.sql = template.sql
            self.params = [self._value(source) for source in template.sources]
            self.names = list(template.names)
            self.tables = list(template.tables)
            self.origins = list(template.origins)
            self.from_tables = list(template.from_tables)
            return
        try:
            tree = sqlglot.parse_one(without_clustering(text), read="tsql")
        except ParseError:
            raise TSqlError(
                102,
                "Incorrect syntax in a statement on the application's tables.",
                severity=15,
                line=line,
            ) from None
        self.outer: Scope | None = None
        if outer is not None:  # a correlated subquery: its outer references become parameters
            self.outer = outer[0]
            found = list(tree.find_all(exp.Table))
            self.inner_names = {t.alias_or_name.casefold() for t in found}
            self.inner_columns = outer[1]([t.name.casefold() for t in found])
        tree = tree.transform(self._rewrite).transform(_concatenation)
        self._check(tree)
        if isinstance(tree, exp.Create) and not session.postgres:
            identity_key(tree, line)
        if isinstance(tree, exp.Select):
            self._assignments(tree)
        if isinstance(tree, exp.Insert | exp.Update | exp.Delete):
            # the rows changed, counted by the database as it changes them (whole, for the
            # inserted and deleted tables of the table's triggers)
            what = exp.Star() if returning_rows else exp.Literal.number(1)
            tree.set("returning", exp.Returning(expressions=[what]))
        if session.postgres and self.params:
            # psycopg reads % as a placeholder's start when there are parameters
            for literal in tree.find_all(exp.Literal):
                if literal.is_string and "%" in literal.name:
                    literal.replace(exp.Literal.string(literal.name.replace("%", "%%")))
        self.sql = tree.sql(dialect="postgres" if session.postgres else "sqlite")
        if not session.postgres:
            self.sql = self.sql.replace("%s", "?")
        if outer is None and not self.in_trigger:
            if len(_TEMPLATES) >= _TEMPLATES_KEPT:
                _TEMPLATES.clear()
            _TEMPLATES[key] = _Template(
                self.sql,
                tuple(self.sources),
                tuple(self.names),
                tuple(self.tables),
                tuple(self.origins),
                tuple(self.from_tables),
            )

    def _value(self, source: tuple[str, str]) -> object:
        """A parameter's value now, from where :class:`_Template` says it comes."""
        kind, name = source
        if kind == "var":
            return db_value(self.session.variable(name, self.line))
        if kind == "now":
            return self.session.now()
        if kind == "utc":
            return self.session.utc_now()
        return str(uuid.uuid4()).upper()

    def _parameter(self, kind: str, name: str = "") -> exp.Expression:
        self.sources.append((kind, name))
        self.params.append(self._value((kind, name)))
        return exp.Placeholder()

    def _rewrite(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and self.outer is not None:
            qualifier = node.table.casefold()
            if (qualifier and qualifier not in self.inner_names) or (
                not qualifier and node.name.casefold() not in self.inner_columns
            ):
                parts = tuple(p for p in (node.table, node.name) if p)
                self.params.append(db_value(self.outer.column(parts)))
                return exp.Placeholder()
        if isinstance(node, exp.Parameter):
            return self._parameter("var", "@" + node.name)
        if isinstance(node, exp.CurrentTimestamp) or (
            isinstance(node, exp.Anonymous)
            and node.name.upper() in ("GETUTCDATE", "SYSUTCDATETIME")
        ):
            return self._parameter("utc" if isinstance(node, exp.Anonymous) else "now")
        if isinstance(node, exp.Uuid):
            return self._parameter("uuid")
        if isinstance(node, exp.National):
            return exp.Literal.string(node.name)
        if isinstance(node, exp.Table):
            if node.this is not None and getattr(node.this, "args", {}).get("temporary"):
                raise not_supported("A temporary table (#name)", self.line)
            schema = node.args.get("db")
            if node.args.get("catalog") is not None or (
                schema is not None and schema.name.casefold() != "dbo"
            ):
                # another database, or a schema other than dbo: not the application's tables
                raise TSqlError(
                    208, f"Invalid object name '{node.sql(dialect='tsql')}'.", line=self.line
                )
            node.set("db", None)
            in_trigger = self.session.trigger_table(node.name) if schema is None else None
            if in_trigger is not None:  # a trigger's inserted / deleted, as the database has it
                self.in_trigger = True
                alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
                return exp.Table(this=exp.to_identifier(in_trigger), alias=alias)
            self.tables.append(node.name.casefold())
            return node
        if isinstance(node, exp.DataType) and self.session.postgres and not node.expressions:
            # T-SQL's FLOAT is float(53), a double (sqlglot reads it, and REAL, as FLOAT, which
            # PostgreSQL would make single precision); TINYINT (0 to 255) has no PostgreSQL type
            # of its own (sqlglot's UTINYINT), and BIT (0 or 1, compared with numbers) is not
            # PostgreSQL's bit string: SMALLINT holds both
            if node.this == exp.DataType.Type.FLOAT:
                return exp.DataType(this=exp.DataType.Type.DOUBLE)
            if node.this in (exp.DataType.Type.UTINYINT, exp.DataType.Type.BIT):
                return exp.DataType(this=exp.DataType.Type.SMALLINT)
        if isinstance(node, exp.PrimaryKey):  # PRIMARY KEY (a, b): the columns, no order
            return exp.PrimaryKey(expressions=[unordered(e) for e in node.expressions])
        if isinstance(node, exp.DataTypeParam) and node.name.upper() == "MAX":
            return exp.Var(this="")  # dropped below
        return node

    def _check(self, tree: exp.Expression) -> None:
        for node in tree.walk():
            if isinstance(node, exp.DataType):
                node.set(
                    "expressions",
                    [e for e in node.expressions if not (isinstance(e, exp.Var) and not e.name)],
                )
            if not isinstance(node, _SAFE):
                what = node.sql(dialect="tsql")[:40] or node.key
                raise not_supported(
                    f"{type(node).__name__.upper()} ({what}) in a statement on the application's tables",
                    self.line,
                )

    def _assignments(self, select: exp.Select) -> None:
        items = []
        for item in select.expressions:
            if isinstance(item, exp.EQ) and isinstance(item.this, exp.Placeholder):
                raise AssertionError("unreachable: an assignment's variable is read first")
            items.append(item)
        self.names = [item.alias_or_name for item in items]
        self.origins, self.from_tables = origins_of(select)


def _concatenation(node: exp.Expression) -> exp.Expression:
    """``a + b`` where either side is a string: T-SQL's concatenation, ``||`` underneath."""
    if isinstance(node, exp.Add) and (_is_text(node.this) or _is_text(node.expression)):
        return exp.DPipe(this=node.this, expression=node.expression)
    return node


def _is_text(node: exp.Expression) -> bool:
    return (
        (isinstance(node, exp.Literal) and node.is_string)
        or isinstance(node, exp.National | exp.DPipe)
        or (isinstance(node, exp.Paren) and _is_text(node.this))
    )


def _split_assignments(text: str) -> tuple[str, list[str]]:
    """``SELECT @a = x, @b = y FROM …`` as ``SELECT x, y FROM …`` and its targets (sqlglot
    reads ``@a = x`` as a comparison)."""
    tree = sqlglot.parse_one(text, read="tsql")
    if not isinstance(tree, exp.Select):
        return text, []
    targets: list[str] = []
    plain = 0
    items = []
    for item in tree.expressions:
        if isinstance(item, exp.EQ) and isinstance(item.this, exp.Parameter):
            targets.append("@" + item.this.name)
            items.append(item.expression)
        else:
            plain += 1
            items.append(item)
    if targets and plain:
        raise TSqlError(
            141,
            "A SELECT statement that assigns a value to a variable must not be combined with "
            "data-retrieval operations.",
            severity=15,
        )
    tree.set("expressions", items)
    return tree.sql(dialect="tsql"), targets


REGISTRY = "servicebroker_sql_tables"
"""The table, in each database, that lists the tables T-SQL created: the only ones T-SQL reads
and writes — never the broker's own tables, nor the database's catalogs."""


def placeholder(broker: Broker) -> str:
    """The parameter placeholder of application SQL on ``broker``: ``?`` on SQLite, ``%s`` on
    PostgreSQL (:attr:`Broker.paramstyle`)."""
    return "?" if broker.paramstyle == "qmark" else "%s"


def ensure_registry(broker: Broker) -> None:
    """Make the table of T-SQL's tables (:data:`REGISTRY`) in ``broker``'s database if it is
    missing: done once, when an instance opens the database, so that no statement pays for it."""
    broker.execute(f"CREATE TABLE IF NOT EXISTS {REGISTRY} (name VARCHAR(128) PRIMARY KEY)")
    broker.execute(COLUMNS_TABLE)


def _registered(tx: Transaction, session: TableSession, tables: list[str]) -> set[str]:
    """Which of ``tables`` T-SQL created (one query, for those names only)."""
    if not tables:
        return set()
    mark = "%s" if session.postgres else "?"
    marks = ", ".join([mark] * len(tables))
    rows = tx.execute(f"SELECT name FROM {REGISTRY} WHERE name IN ({marks})", tables)
    return {str(row[0]) for row in rows}


def table_exists(session: TableSession, parts: tuple[str, ...]) -> bool:
    """Whether ``parts`` (``[dbo.]name``) names a table T-SQL created in the session's
    database (a join that names it with a catalog view is refused, not Msg 208: :mod:`.joins`)."""
    if len(parts) > 2 or (len(parts) == 2 and parts[0].casefold() != "dbo"):
        return False
    with session.statement_transaction() as tx:
        return bool(_registered(tx, session, [parts[-1].casefold()]))


def check_known(tx: Transaction, session: TableSession, tables: list[str], line: int) -> None:
    """Msg 208 for a table of ``tables`` T-SQL did not create."""
    known = _registered(tx, session, tables)
    for table in tables:
        if table not in known:
            raise TSqlError(208, f"Invalid object name '{table}'.", line=line)


def _columns(tx: Transaction, session: TableSession, tables: list[str]) -> set[str]:
    """The column names (case-folded) of ``tables``, for a correlated subquery's references."""
    return {name.casefold() for table in tables for name in _table_columns(tx, session, table)}


def _table_columns(tx: Transaction, session: TableSession, table: str) -> list[str]:
    """The column names of the application's ``table``, in the order CREATE TABLE gave them
    (what ``SELECT *`` returns)."""
    if session.postgres:
        rows = tx.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND lower(table_name) = %s"
            " ORDER BY ordinal_position",
            (table,),
        )
    else:
        rows = tx.execute("SELECT name FROM pragma_table_info(?) ORDER BY cid", (table,))
    return [str(row[0]) for row in rows]


def query_rows(
    session: TableSession, core: n.SelectCore, line: int, *, outer: Scope | None = None
) -> list[list[Typed]]:
    """The rows of a SELECT on the application's tables (a subquery, EXISTS, IN); ``outer``
    the row scope of the query around it, whose columns its outer references read (a
    correlated subquery: a column that none of its tables has)."""
    with session.statement_transaction() as tx:
        translation = Translation(
            session,
            core.text,
            line,
            None if outer is None else (outer, lambda tables: _columns(tx, session, tables)),
        )
        check_known(tx, session, translation.tables, line)
        rows = tx.execute(translation.sql, translation.params)
    return [[typed_value(v) for v in row] for row in rows]


def run_select(session: TableSession, core: n.SelectCore, line: int) -> None:
    """A SELECT on the application's tables: a result set, or variables assigned from its last
    row (none when no row comes)."""
    text, targets = _split_assignments(core.text)
    translation = Translation(session, text, line)
    mark = "%s" if session.postgres else "?"
    # an expression's column is typed by its values (COUNT(*) and the like: no query for types)
    layout: list[tuple[str, SqlType | None]] | None = [(name, None) for name in translation.names]
    with session.statement_transaction() as tx:
        check_known(tx, session, translation.tables, line)
        rows = tx.execute(translation.sql, translation.params)
        if not targets and any(o is not None for o in translation.origins):
            declared = declared_columns(tx, mark, [t for _, t in translation.from_tables])
            layout = result_columns(
                translation.names, translation.origins, translation.from_tables, declared
            )
            if layout is None and len(translation.from_tables) == 1:  # unrecorded columns
                table = translation.from_tables[0][1]
                layout = [(name, None) for name in _table_columns(tx, session, table)]
    session.rowcount = len(rows)
    if targets:
        if rows:
            for target, value in zip(targets, rows[-1], strict=False):
                session.assign(target, typed_value(value))
        return
    if layout is None or len(layout) != (len(rows[0]) if rows else len(layout)):
        layout = [("", None)] * (len(rows[0]) if rows else 0)
    typed = [
        [typed_as(typed_value(v), declared) for v, (_, declared) in zip(row, layout, strict=True)]
        for row in rows
    ]
    types = [
        declared or next((r[i].type for r in typed if r[i].value is not None), NVARCHAR)
        for i, (_, declared) in enumerate(layout)
    ]
    names = [name for name, _ in layout]
    session.emit(ResultSet(list(zip(names, types, strict=True)), typed))
    if not session.nocount:
        session.emit(len(rows))


def create_or_drop_table(session: TableSession, s: n.TableStatement) -> None:
    """CREATE TABLE or DROP TABLE [IF EXISTS] (its columns' records and its triggers go with
    it): Msg 2714, a table that exists; Msg 3701, one that does not."""
    mark = "%s" if session.postgres else "?"
    target = s.table[-1].casefold()
    translation = Translation(session, s.text, s.line)
    with session.statement_transaction() as tx:
        if s.kind == "CREATE TABLE":
            if _registered(tx, session, [target]):
                raise TSqlError(
                    2714,
                    f"There is already an object named '{s.table[-1]}' in the database.",
                    line=s.line,
                )
            tx.execute(translation.sql, translation.params)
            tx.execute(f"INSERT INTO {REGISTRY} (name) VALUES ({mark})", (target,))
            tree = sqlglot.parse_one(without_clustering(s.text), read="tsql")
            record_columns(tx, mark, target, tree)
            return
        known = _registered(tx, session, translation.tables)
        dropped = [t for t in translation.tables if t in known]
        missing = [t for t in translation.tables if t not in known]
        if missing and not s.if_exists:
            raise TSqlError(
                3701,
                f"Cannot drop the table '{missing[0]}', because it does not exist or you do "
                f"not have permission.",
                severity=11,
                line=s.line,
            )
        for table in dropped:
            quoted = '"' + table.replace('"', '""') + '"'
            tx.execute(f"DROP TABLE {quoted}")
            tx.execute(f"DELETE FROM {REGISTRY} WHERE name = {mark}", (table,))
            forget_columns(tx, mark, table)
            session.forget_triggers(tx, table)
