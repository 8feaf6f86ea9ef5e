"""DML triggers firing in a session (create-trigger-transact-sql.md, "Use the inserted and
deleted tables", update-trigger-functions-transact-sql.md): a :class:`TriggerRunner` per
session runs a table's triggers after the statement that changed it, in its transaction, and
answers what only a running trigger has — its ``inserted`` and ``deleted`` tables (read by the
interpreter, or as temporary tables in the database underneath) and UPDATE (column).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, cast

from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .queries import RowSource
from .security import procedure_context
from .table_dml import StatementRows
from .triggers import TriggerStore

__all__ = ["FiringSession", "TriggerRunner"]


class FiringSession(Protocol):
    """What a trigger's run needs of the session (:class:`~.interpreter.Session`)."""

    trancount: int
    xact_abort: bool
    rowcount: int

    @property
    def postgres(self) -> bool: ...
    @property
    def tx(self) -> Transaction: ...
    @property
    def line(self) -> int: ...

    def frame(self, procedure: str | None = None) -> AbstractContextManager[None]: ...
    def run_body(self, statements: tuple[n.Statement, ...] | list[n.Statement]) -> int: ...
    def open_transaction(self) -> Transaction | None: ...
    def rollback_all(self) -> None: ...
    def triggers_here(self) -> TriggerStore: ...


class TriggerRunner:
    """The triggers of one session: those running now (a trigger's own change to its table
    does not fire it again: RECURSIVE_TRIGGERS is OFF, SQL Server's default) and, in the one
    running, its statement's rows and the temporary tables made of them."""

    def __init__(self, session: FiringSession) -> None:
        self._session = session
        self._firing: set[str] = set()
        self._rows: StatementRows | None = None
        self._made: dict[str, str] = {}
        self.tables: dict[str, RowSource] = {}
        """``inserted`` and ``deleted`` of the trigger running ({} outside one), as the
        interpreter reads them."""

    def on(self, tx: Transaction, table: str, event: str) -> list[n.CreateTrigger]:
        """The triggers of ``table`` (case-folded) that fire for ``event`` (INSERT, UPDATE,
        DELETE), read in ``tx``, but one running now."""
        return [
            t
            for t in self._session.triggers_here().on_table(tx, table)
            if event in t.events and _key(t) not in self._firing
        ]

    def fire(self, triggers: list[n.CreateTrigger], rows: StatementRows) -> None:
        """Run each of ``triggers`` after the statement whose changes ``rows`` holds, in its
        transaction: ``inserted`` and ``deleted`` hold the statement's rows, @@ROWCOUNT is its
        count and @@TRANCOUNT at least 1 when the body starts, and XACT_ABORT is ON, so that an
        error in the body rolls the transaction back and ends the batch (in a TRY, it goes to
        the CATCH, and a transaction of the statement's own is rolled back).

        Raises:
            TSqlError: Msg 3609 (ending the batch), the trigger ended the transaction.
        """
        session = self._session
        for trigger in triggers:
            implicit = session.trancount == 0
            if implicit:
                session.trancount = 1  # the statement's own transaction, as @@TRANCOUNT shows
            try:
                with self._running(trigger, rows):
                    session.xact_abort = True
                    session.rowcount = rows.count
                    session.run_body(trigger.body)
            except BaseException:
                if implicit:
                    session.rollback_all()
                raise
            if session.trancount == 0 or session.open_transaction() is None:  # ROLLBACK
                session.rollback_all()
                error = TSqlError(
                    3609,
                    "The transaction ended in the trigger. The batch has been aborted.",
                    line=session.line,
                )
                error.ends_batch = True  # type: ignore[attr-defined]
                raise error
            if implicit:
                session.trancount = 0
        session.rowcount = rows.count

    @contextmanager
    def _running(self, trigger: n.CreateTrigger, rows: StatementRows) -> Iterator[None]:
        """``trigger`` runs: in a frame of its own (its variables, SET options and errors'
        name), as its EXECUTE AS principal, with ``rows`` as its tables; then the temporary
        tables made for it are dropped and the caller's tables are back."""
        session = self._session
        saved = (self.tables, self._rows, self._made)
        self._firing.add(_key(trigger))
        try:
            with (
                session.frame(trigger.name.split(".")[-1]),
                procedure_context(cast(Any, session), trigger.execute_as, trigger.line),
            ):
                self.tables = {"inserted": rows.inserted, "deleted": rows.deleted}
                self._rows, self._made = rows, {}
                try:
                    yield
                finally:
                    self._drop_made()
        finally:
            self._firing.discard(_key(trigger))
            self.tables, self._rows, self._made = saved

    def database_table(self, name: str) -> str | None:
        """In a trigger, the name under which the database underneath has its ``inserted`` or
        ``deleted`` table (``name``), for a statement on the application's tables that reads
        it: a temporary table, made with the trigger table's columns on first use and dropped
        when the trigger ends. None outside a trigger, and for any other name."""
        key = name.strip("[]").casefold()
        if self._rows is None or key not in ("inserted", "deleted"):
            return None
        temporary = self._made.get(key)
        if temporary is None:
            rows, session = self._rows, self._session
            temporary = f"sb_trigger_{key}_{len(self._firing)}"
            source = '"' + rows.table.replace('"', '""') + '"'
            tx = session.tx
            tx.execute(f"CREATE TEMPORARY TABLE {temporary} AS SELECT * FROM {source} WHERE 1 = 0")
            values = rows.inserted_raw if key == "inserted" else rows.deleted_raw
            if values:
                marks = ", ".join(["%s" if session.postgres else "?"] * len(values[0]))
                tx.executemany(f"INSERT INTO {temporary} VALUES ({marks})", values)
            self._made[key] = temporary
        return temporary

    def _drop_made(self) -> None:
        """Drop the temporary tables :meth:`database_table` made (gone with the transaction
        when the trigger rolled it back)."""
        tx = self._session.open_transaction()
        if tx is not None:
            for temporary in self._made.values():
                tx.execute(f"DROP TABLE {temporary}")
        self._made = {}

    def column_updated(self, column: str) -> bool:
        """UPDATE (``column``) in a trigger: True for an INSERT's, and for an UPDATE that sets
        the column (whatever the rows; none changed too), else False.

        Raises:
            TSqlError: Msg 140, outside a trigger.
        """
        if self._rows is None:
            raise TSqlError(
                140,
                "Can only use IF UPDATE within a CREATE TRIGGER statement.",
                severity=15,
                line=self._session.line,
            )
        written = self._rows.written
        return written is None or column.strip("[]").casefold() in written


def _key(trigger: n.CreateTrigger) -> str:
    return trigger.name.split(".")[-1].casefold()
