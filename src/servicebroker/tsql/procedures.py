"""Stored procedures of a database (create-procedure-transact-sql.md): their definitions kept in
the database itself — the table ``servicebroker_sql_modules`` (name, definition), written and
read through the application's SQL seam (``tx.execute``), never the broker's storage — parsed
once per definition, and registered with the broker as activation procedures
(``Broker.register_procedure``), so that a queue whose ``ACTIVATION (PROCEDURE_NAME = …)`` names
one runs it (ACT-1..9) in a session of its own, acting as the queue's EXECUTE AS principal.

A procedure is found by its name without schema, without regard to case (``dbo.MyProc`` and
``myproc`` are one).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..broker import ActivationContext, Broker
from ..engine.transaction import Transaction
from ..errors import BrokerError, TSqlError
from . import nodes as n
from .tables import placeholder

__all__ = ["TABLE", "ProcedureStore", "drop_module", "read_in"]

log = logging.getLogger(__name__)

TABLE = "servicebroker_sql_modules"
"""The table, in each database, that keeps the procedures' definitions."""

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (name VARCHAR(128) PRIMARY KEY, definition TEXT NOT NULL)"
)


def _key(name: str) -> str:
    return name.split(".")[-1].strip("[]").casefold()


class ProcedureStore:
    """The procedures of one database (``broker``). ``parse`` turns a stored definition back
    into its :class:`~.nodes.CreateProcedure`; ``runner`` makes the activation procedure that
    runs one (given the procedure's name)."""

    def __init__(
        self,
        broker: Broker,
        parse: Callable[[str], n.CreateProcedure],
        runner: Callable[[str], Callable[[ActivationContext], None]],
    ) -> None:
        self._broker = broker
        self._parse = parse
        self._runner = runner
        self._lock = threading.Lock()
        self._parsed: dict[str, tuple[str, n.CreateProcedure]] = {}
        self._ready = False

    def _mark(self) -> str:
        return placeholder(self._broker)

    def _ensure(self) -> None:
        if not self._ready:
            self._broker.execute(_CREATE)
            self._ready = True

    def register_all(self) -> None:
        """Register every stored procedure with the broker (for activation in this process)."""
        self._ensure()
        for (name,) in self._broker.execute(f"SELECT name FROM {TABLE}"):
            self._broker.register_procedure(str(name), self._runner(str(name)))

    def find(self, name: str) -> Callable[[ActivationContext], None] | None:
        """What activation runs for the stored procedure ``name`` (created by any process,
        :meth:`~servicebroker.Broker.register_procedure_finder`), or None when there is none."""
        if self.get(name) is None:
            return None
        return self._runner(_key(name))

    def get(self, name: str, tx: Transaction | None = None) -> n.CreateProcedure | None:
        """The procedure ``name`` as stored now, or None; read in ``tx`` when given (the
        session's open transaction: a transaction of its own would wait for the write lock
        that one holds)."""
        self._ensure()
        key = _key(name)
        rows = read_in(
            self._broker, tx, f"SELECT definition FROM {TABLE} WHERE name = {self._mark()}", (key,)
        )
        if not rows:
            return None
        definition = str(rows[0][0])
        with self._lock:
            cached = self._parsed.get(key)
            if cached is not None and cached[0] == definition:
                return cached[1]
        procedure = self._parse(definition)
        with self._lock:
            self._parsed[key] = (definition, procedure)
        return procedure

    def names(self, tx: Transaction | None = None) -> list[str]:
        """The stored procedures' names, as their CREATE PROCEDURE wrote them (no schema);
        read in ``tx`` when given (as :meth:`get`)."""
        self._ensure()
        names = []
        for (key,) in read_in(self._broker, tx, f"SELECT name FROM {TABLE} ORDER BY name", ()):
            procedure = self.get(str(key), tx)
            if procedure is not None:
                names.append(procedure.name.split(".")[-1])
        return names

    def put(self, procedure: n.CreateProcedure) -> None:
        """CREATE / ALTER / CREATE OR ALTER PROCEDURE: store the definition and register it.

        Raises:
            TSqlError: Msg 2714, CREATE of a procedure that exists; Msg 208, ALTER of one that
                does not.
        """
        self._ensure()
        key = _key(procedure.name)
        mark = self._mark()
        with self._broker.transaction() as tx:
            exists = bool(tx.execute(f"SELECT 1 FROM {TABLE} WHERE name = {mark}", (key,)))
            if exists and procedure.mode == "CREATE":
                raise TSqlError(
                    2714,
                    f"There is already an object named '{procedure.name.split('.')[-1]}' in the "
                    f"database.",
                    line=procedure.line,
                )
            if not exists and procedure.mode == "ALTER":
                raise TSqlError(
                    208, f"Invalid object name '{procedure.name}'.", line=procedure.line
                )
            if exists:
                tx.execute(
                    f"UPDATE {TABLE} SET definition = {mark} WHERE name = {mark}",
                    (procedure.source, key),
                )
            else:
                tx.execute(
                    f"INSERT INTO {TABLE} (name, definition) VALUES ({mark}, {mark})",
                    (key, procedure.source),
                )
        with self._lock:
            self._parsed[key] = (procedure.source, procedure)
        self._broker.register_procedure(key, self._runner(key))

    def drop(self, name: str, *, if_exists: bool, line: int) -> None:
        """DROP PROCEDURE ``name``.

        Raises:
            TSqlError: Msg 3701, no such procedure (unless ``if_exists``).
        """
        self._ensure()
        key = _key(name)
        drop_module(self._broker, TABLE, "procedure", name, key, if_exists=if_exists, line=line)
        with self._lock:
            self._parsed.pop(key, None)


def drop_module(
    broker: Broker, table: str, kind: str, name: str, key: str, *, if_exists: bool, line: int
) -> None:
    """DROP PROCEDURE / DROP TRIGGER: delete the row ``key`` of the stored modules' ``table``
    (``kind`` and ``name`` as the error names them), in a transaction of its own.

    Raises:
        TSqlError: Msg 3701, no such row (unless ``if_exists``).
    """
    mark = placeholder(broker)
    with broker.transaction() as tx:
        if not tx.execute(f"SELECT 1 FROM {table} WHERE name = {mark}", (key,)):
            if if_exists:
                return
            raise TSqlError(
                3701,
                f"Cannot drop the {kind} '{name}', because it does not exist or you do not have "
                f"permission.",
                severity=11,
                line=line,
            )
        tx.execute(f"DELETE FROM {table} WHERE name = {mark}", (key,))


def read_in(
    broker: Broker, tx: Transaction | None, sql: str, params: tuple[object, ...]
) -> list[tuple[object, ...]]:
    """Rows of ``sql`` read in ``tx`` (a session's open transaction: a transaction of its own
    would wait for the write lock that one may hold), or in a transaction of their own on
    ``broker``."""
    return tx.execute(sql, params) if tx is not None else broker.execute(sql, params)


def activation_principal(broker: Broker, queue_name: str) -> str | None:
    """The principal an activated procedure of ``queue_name`` acts as (EXECUTE AS: SELF and
    OWNER are dbo; a user name is that user), or None when the queue is gone."""
    for queue in broker.views.service_queues():
        if queue.name.casefold() == queue_name.casefold():
            who = queue.execute_as
            return "dbo" if who.upper() in ("SELF", "OWNER") else who
    return None


def log_activation_error(database: str, procedure: str, error: BaseException) -> None:
    """An activated procedure's error goes to the log, as SQL Server writes it to its error
    log: the procedure, the number and the message."""
    if isinstance(error, TSqlError):
        log.warning(
            "activated procedure %s in database %s: Msg %d, Level %d, State %d, Line %d: %s",
            procedure,
            database,
            error.number,
            error.severity,
            error.state,
            error.line,
            error.message,
        )
    elif isinstance(error, BrokerError):
        log.warning("activated procedure %s in database %s: %s", procedure, database, error)
    else:
        log.error(
            "activated procedure %s in database %s failed", procedure, database, exc_info=error
        )
