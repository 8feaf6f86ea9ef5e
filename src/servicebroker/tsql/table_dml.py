"""INSERT, UPDATE and DELETE on the application's tables (insert-transact-sql.md,
update-transact-sql.md, delete-transact-sql.md), translated as :mod:`.tables` translates every
statement on them and run in the statement's transaction, and the rows their triggers see
(create-trigger-transact-sql.md, "Use the inserted and deleted tables"): each statement returns
the rows it changed, whole when the table has a trigger for it, and an UPDATE's old rows are
read just before it. Also the table statements' runner (CREATE and DROP TABLE are
:func:`.tables.create_or_drop_table`'s).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import sqlglot
from sqlglot import exp

from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .queries import RowSource
from .table_columns import declared_columns, inserted_columns, typed_as
from .table_definitions import without_clustering
from .tables import (
    TableSession,
    Translation,
    check_known,
    create_or_drop_table,
    db_value,
    typed_value,
)
from .types import NVARCHAR, SqlType, Typed
from .unsupported import not_supported

__all__ = ["TABLE_STATEMENTS", "DmlSession", "StatementRows", "run_table_statement"]


@dataclass(frozen=True)
class StatementRows:
    """What an INSERT, UPDATE or DELETE changed, for its table's triggers: ``table``
    (case-folded) and its ``columns`` as recorded; the rows as the database returned them
    (``inserted_raw``, ``deleted_raw``: every column, in order) and as the trigger's
    ``inserted`` and ``deleted`` tables read them (typed as declared); ``count`` the rows the
    statement changed; ``written`` what UPDATE (column) answers."""

    table: str
    columns: tuple[tuple[str, SqlType | None], ...]
    inserted_raw: list[tuple[Any, ...]]
    deleted_raw: list[tuple[Any, ...]]
    inserted: RowSource
    deleted: RowSource
    count: int
    written: frozenset[str] | None
    """The columns the statement wrote, case-folded (an UPDATE's SET list; none for a
    DELETE); None: every column (an INSERT)."""


class DmlSession(TableSession, Protocol):
    """What these statements need of the session beyond :class:`.tables.TableSession`: the
    triggers of a table and their firing (:class:`~.interpreter.Session`)."""

    def triggers_on(self, tx: Transaction, table: str, event: str) -> list[Any]: ...
    def fire_triggers(self, triggers: list[Any], rows: StatementRows) -> None: ...


def run_table_statement(session: DmlSession, s: n.TableStatement) -> None:
    """CREATE TABLE, DROP TABLE, INSERT, UPDATE, DELETE on the application's tables; the DML
    ones set @@ROWCOUNT and print ``(N rows affected)``, after the table's triggers for the
    verb have run in the statement's transaction."""
    if s.table and s.table[-1].startswith("#"):
        raise not_supported("A temporary table (#name)", s.line)
    if s.kind not in ("INSERT", "UPDATE", "DELETE"):
        create_or_drop_table(session, s)
        return
    _run_dml(session, s, s.table[-1].casefold(), "%s" if session.postgres else "?")


def _run_dml(session: DmlSession, s: n.TableStatement, target: str, mark: str) -> None:
    """INSERT, UPDATE or DELETE, then the table's triggers for it (their ``inserted`` and
    ``deleted`` the statement's rows as the database returned them), in one transaction."""
    found = None
    if s.kind == "INSERT":
        found = None if s.select is None else session.rows_elsewhere(s.select)
        if s.execute is not None:  # INSERT … EXEC: the procedure's result sets' rows
            found = session.rows_of_call(s.execute)
    with session.statement_transaction() as tx:
        triggers = session.triggers_on(tx, target, s.kind)
        deleted: list[tuple[Any, ...]] = []
        if s.kind == "INSERT" and found is not None:
            # INSERT … SELECT from views, queues or table variables, INSERT … EXEC
            rows = _insert_rows(session, tx, s, found, mark, returning_rows=bool(triggers))
        elif s.kind == "INSERT":
            rows = _insert(session, tx, s, mark, returning_rows=bool(triggers))
        else:
            translation = Translation(session, s.text, s.line, returning_rows=bool(triggers))
            check_known(tx, session, translation.tables, s.line)
            sql, params = translation.sql, list(translation.params)
            if triggers and s.kind == "UPDATE":
                deleted, sql, params = _before_update(session, tx, s, sql, params)
            rows = tx.execute(sql, params)
        count = len(rows)
        if triggers:
            inserted = rows if s.kind != "DELETE" else []
            if s.kind == "DELETE":
                deleted = rows
            columns = tuple(_trigger_columns(tx, mark, target, s.line))
            session.fire_triggers(
                triggers,
                StatementRows(
                    target,
                    columns,
                    inserted,
                    deleted,
                    _source(columns, inserted),
                    _source(columns, deleted),
                    count,
                    _written(s),
                ),
            )
    session.rowcount = count
    if not session.nocount:
        session.emit(count)


def _written(s: n.TableStatement) -> frozenset[str] | None:
    """The columns INSERT, UPDATE or DELETE ``s`` writes, case-folded (None: every one)."""
    if s.kind == "INSERT":
        return None
    if s.kind == "DELETE":
        return frozenset()
    tree = sqlglot.parse_one(without_clustering(s.text), read="tsql")
    return frozenset(
        item.this.name.casefold()
        for item in tree.expressions
        if isinstance(item, exp.EQ) and isinstance(item.this, exp.Column)
    )


def _trigger_columns(
    tx: Transaction, mark: str, table: str, line: int
) -> list[tuple[str, SqlType | None]]:
    """The recorded columns of ``table``, in CREATE TABLE's order: the columns of its
    triggers' ``inserted`` and ``deleted`` tables."""
    columns = declared_columns(tx, mark, [table]).get(table)
    if not columns:
        raise not_supported(
            f"A trigger on table '{table}', whose columns were not recorded (created before "
            f"servicebroker kept them; create it again)",
            line,
        )
    return columns


def _source(
    columns: tuple[tuple[str, SqlType | None], ...], rows: list[tuple[Any, ...]]
) -> RowSource:
    """The ``inserted`` or ``deleted`` table of a trigger: ``rows`` as the database returned
    them (every column, in order), typed as the table declared its columns."""
    typed = [
        {
            name.lower(): typed_as(typed_value(value), declared)
            for (name, declared), value in zip(columns, row, strict=False)
        }
        for row in rows
    ]
    return RowSource(tuple((name, declared or NVARCHAR) for name, declared in columns), typed)


def _before_update(
    session: TableSession, tx: Transaction, s: n.TableStatement, sql: str, params: list[object]
) -> tuple[list[tuple[Any, ...]], str, list[object]]:
    """The rows an UPDATE is about to change, read first for its triggers' ``deleted`` (in the
    statement's transaction; on PostgreSQL locked FOR UPDATE, and the UPDATE then made of
    them by ``ctid`` in place of its WHERE, so that a row another session commits meanwhile is
    in neither table), and the UPDATE's SQL and parameters to run (``sql`` and ``params``
    themselves on SQLite, where one writer at a time keeps the rows as read).

    Raises:
        TSqlError: Msg 40000, an UPDATE with FROM on a table with an UPDATE trigger
            (which rows it changes is known only as it changes them).
    """
    tree = sqlglot.parse_one(without_clustering(s.text), read="tsql")
    assert isinstance(tree, exp.Update)
    if tree.args.get("from") is not None or tree.args.get("from_") is not None:
        raise not_supported("An UPDATE with FROM on a table with an UPDATE trigger", s.line)
    select = exp.select("*").from_(tree.this.copy())
    where = tree.args.get("where")
    if where is not None:
        select.set("where", where.copy())
    before = Translation(session, select.sql(dialect="tsql"), s.line)
    if not session.postgres:  # one writer at a time: the rows cannot change in between
        return tx.execute(before.sql, before.params), sql, params
    found = tx.execute(
        before.sql.replace("SELECT *", "SELECT ctid::text, *", 1) + " FOR UPDATE", before.params
    )
    # the rows locked are the rows the WHERE chose: the UPDATE changes those, by ctid
    every = tree.copy()
    every.set("where", None)
    update = Translation(session, every.sql(dialect="tsql"), s.line, returning_rows=True)
    head, returning = update.sql.rsplit(" RETURNING ", 1)
    return (
        [row[1:] for row in found],
        f"{head} WHERE ctid = ANY(%s::tid[]) RETURNING {returning}",
        [*update.params, [row[0] for row in found]],
    )


def _name(name: str) -> str:
    """``name`` as a statement writes it: bare when it can be (so that PostgreSQL folds its
    case, as it folded the CREATE TABLE's), else bracketed."""
    return (
        name
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
        else "[" + name.replace("]", "]]") + "]"
    )


def _columns_mismatch(line: int) -> TSqlError:
    return TSqlError(
        213, "Column name or number of supplied values does not match table definition.", line=line
    )


def _insert(
    session: TableSession,
    tx: Transaction,
    s: n.TableStatement,
    mark: str,
    *,
    returning_rows: bool = False,
) -> list[tuple[Any, ...]]:
    """INSERT … VALUES, or … SELECT from the application's tables, translated. Without a
    column list it names the table's columns but its identity one (insert-transact-sql.md:
    the database underneath would want a value for every column). Returns a row per row
    inserted (``returning_rows``: the row whole)."""
    translation = Translation(session, s.text, s.line, returning_rows=returning_rows)
    check_known(tx, session, translation.tables, s.line)
    columns = None if s.columns is not None else inserted_columns(tx, mark, s.table[-1].casefold())
    if columns is not None:
        text, widths = _with_columns(s.text, tuple(columns))
        if widths - {len(columns)}:
            raise _columns_mismatch(s.line)
        translation = Translation(session, text, s.line, returning_rows=returning_rows)
    return tx.execute(translation.sql, translation.params)


@lru_cache(maxsize=512)
def _with_columns(text: str, columns: tuple[str, ...]) -> tuple[str, frozenset[int]]:
    """An INSERT's ``text`` with the column list ``columns``, and the widths of the rows it
    gives (of each VALUES row, or of its SELECT's list; none for ``SELECT *``): parsed once
    per statement and table, not each time a procedure runs it."""
    tree = sqlglot.parse_one(text, read="tsql")
    given = tree.expression
    widths = (
        {len(row.expressions) for row in given.expressions}
        if isinstance(given, exp.Values)
        else {len(given.expressions)}
        if isinstance(given, exp.Select) and not given.is_star
        else set()
    )
    tree.set(
        "this", exp.Schema(this=tree.this, expressions=[exp.to_identifier(c) for c in columns])
    )
    return tree.sql(dialect="tsql"), frozenset(widths)


def _insert_rows(
    session: TableSession,
    tx: Transaction,
    s: n.TableStatement,
    rows: list[list[Typed]],
    mark: str,
    *,
    returning_rows: bool = False,
) -> list[tuple[Any, ...]]:
    """INSERT INTO a table (columns) the ``rows`` its SELECT gave when the interpreter ran it
    (insert-transact-sql.md: ``INSERT … SELECT`` from a table variable, a view, a queue).
    Returns a row per row inserted (``returning_rows``: the row whole, as stored)."""
    if s.columns is not None and rows and len(rows[0]) != len(s.columns):
        number = 120 if len(rows[0]) < len(s.columns) else 121
        raise TSqlError(
            number,
            f"The select list for the INSERT statement contains "
            f"{'fewer' if number == 120 else 'more'} items than the insert list. The number of "
            "SELECT values must match the number of INSERT columns.",
            severity=15,
            line=s.line,
        )
    table = s.table[-1].casefold()
    check_known(tx, session, [table], s.line)
    names = s.columns
    if names is None:
        recorded = inserted_columns(tx, mark, table)
        names = None if recorded is None else tuple(recorded)
        if names is not None and rows and len(rows[0]) != len(names):
            raise _columns_mismatch(s.line)
    target = ".".join(_name(part) for part in s.table)
    columns = "" if names is None else "(" + ", ".join(_name(c) for c in names) + ")"
    width = len(rows[0]) if rows else 1
    text = f"INSERT INTO {target} {columns} VALUES ({', '.join(['?'] * width)})"
    translation = Translation(session, text, s.line, returning_rows=returning_rows)
    stored: list[tuple[Any, ...]] = []
    for row in rows:
        stored.extend(tx.execute(translation.sql, [db_value(value) for value in row]))
    return stored


TABLE_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.TableStatement: run_table_statement,
}
"""The runner of the table statements' node type."""
