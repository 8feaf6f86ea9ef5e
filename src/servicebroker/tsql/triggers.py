"""DML triggers of a database (create-trigger-transact-sql.md, drop-trigger-transact-sql.md,
"Use the inserted and deleted tables"): CREATE [OR ALTER] / ALTER / DROP TRIGGER on the
application's tables, their definitions kept in the database itself — the table
``servicebroker_sql_triggers`` (name, table, definition), written and read through the
application's SQL seam, as procedures are (:mod:`.procedures`) — and parsed once per
definition.

A trigger fires AFTER an INSERT, UPDATE or DELETE that the interpreter runs on its table (the
statement's rows in ``inserted`` and ``deleted``; :meth:`.trigger_runs.TriggerRunner.fire`),
once per statement, even when no row changed, as SQL Server's AFTER triggers do. DML that
other clients run on the database underneath does not fire them. A trigger is found by its
name without schema, without regard to case.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, cast

from ..broker import Broker
from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .build import build_batch
from .databases import refuse_in_written_transaction
from .procedures import TABLE as PROCEDURES
from .procedures import drop_module, read_in
from .tables import placeholder, table_exists

__all__ = ["TABLE", "TRIGGER_STATEMENTS", "TriggerStore"]

TABLE = "servicebroker_sql_triggers"
"""The table, in each database, that keeps the triggers' definitions: ``name`` (case-folded,
no schema), ``table_name`` (case-folded), ``definition`` (the CREATE TRIGGER batch)."""

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (name VARCHAR(128) PRIMARY KEY, "
    "table_name VARCHAR(128) NOT NULL, definition TEXT NOT NULL)"
)


def _key(name: str) -> str:
    return name.split(".")[-1].strip("[]").casefold()


def parse_trigger(definition: str) -> n.CreateTrigger:
    """A stored definition back as its CREATE TRIGGER node.

    Raises:
        TSqlError: Msg 2812, the definition is not a CREATE TRIGGER batch.
    """
    statements = build_batch(definition)
    trigger = statements[0] if len(statements) == 1 else None
    if not isinstance(trigger, n.CreateTrigger):
        raise TSqlError(2812, "A trigger's definition does not parse as one.")
    return trigger


class TriggerStore:
    """The DML triggers of one database (``broker``), their definitions parsed once each."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._lock = threading.Lock()
        self._parsed: dict[str, tuple[str, n.CreateTrigger]] = {}
        self._ready = False

    def ensure(self) -> None:
        """Make the table of definitions if the database has none (when the instance opens
        the database: never inside a session's open transaction)."""
        if not self._ready:
            self._broker.execute(_CREATE)
            self._ready = True

    def _trigger(self, key: str, definition: str) -> n.CreateTrigger:
        with self._lock:
            cached = self._parsed.get(key)
            if cached is not None and cached[0] == definition:
                return cached[1]
        trigger = parse_trigger(definition)
        with self._lock:
            self._parsed[key] = (definition, trigger)
        return trigger

    def on_table(self, tx: Transaction, table: str) -> list[n.CreateTrigger]:
        """The triggers of ``table`` (case-folded, no schema) as stored now, read in ``tx``
        (the statement's transaction), by name (SQL Server fires a table's triggers in an order
        it does not define, but first and last set by sp_settriggerorder, which is not run
        here)."""
        mark = placeholder(self._broker)
        rows = tx.execute(
            f"SELECT name, definition FROM {TABLE} WHERE table_name = {mark} ORDER BY name",
            (table,),
        )
        return [self._trigger(str(key), str(definition)) for key, definition in rows]

    def put(self, trigger: n.CreateTrigger) -> None:
        """CREATE / ALTER / CREATE OR ALTER TRIGGER: store the definition (its table checked
        by the caller).

        Raises:
            TSqlError: Msg 2714, CREATE of a trigger, or of any procedure, of that name;
                Msg 208, ALTER of a trigger that does not exist.
        """
        self.ensure()
        key = _key(trigger.name)
        table = trigger.table[-1].strip("[]").casefold()
        shown = trigger.name.split(".")[-1]
        mark = placeholder(self._broker)
        with self._broker.transaction() as tx:
            exists = bool(tx.execute(f"SELECT 1 FROM {TABLE} WHERE name = {mark}", (key,)))
            if exists and trigger.mode == "CREATE":
                raise _taken(shown, trigger.line)
            if not exists and tx.execute(f"SELECT 1 FROM {PROCEDURES} WHERE name = {mark}", (key,)):
                raise _taken(shown, trigger.line)  # one namespace of objects
            if not exists and trigger.mode == "ALTER":
                raise TSqlError(208, f"Invalid object name '{trigger.name}'.", line=trigger.line)
            if exists:
                tx.execute(
                    f"UPDATE {TABLE} SET table_name = {mark}, definition = {mark} "
                    f"WHERE name = {mark}",
                    (table, trigger.source, key),
                )
            else:
                tx.execute(
                    f"INSERT INTO {TABLE} (name, table_name, definition) "
                    f"VALUES ({mark}, {mark}, {mark})",
                    (key, table, trigger.source),
                )
        with self._lock:
            self._parsed[key] = (trigger.source, trigger)

    def exists(self, name: str, tx: Transaction | None = None) -> bool:
        """True when a trigger ``name`` is stored (CREATE PROCEDURE of that name is Msg 2714);
        read in ``tx`` when given (the session's open transaction)."""
        mark = placeholder(self._broker)
        return bool(
            read_in(self._broker, tx, f"SELECT 1 FROM {TABLE} WHERE name = {mark}", (_key(name),))
        )

    def names(self, tx: Transaction | None = None) -> list[str]:
        """The triggers' names as their CREATE TRIGGER wrote them (no schema), by name; read
        in ``tx`` when given."""
        rows = read_in(self._broker, tx, f"SELECT name, definition FROM {TABLE} ORDER BY name", ())
        return [self._trigger(str(k), str(d)).name.split(".")[-1] for k, d in rows]

    def drop(self, name: str, *, if_exists: bool, line: int) -> None:
        """DROP TRIGGER ``name``.

        Raises:
            TSqlError: Msg 3701, no such trigger (unless ``if_exists``).
        """
        self.ensure()
        key = _key(name)
        drop_module(self._broker, TABLE, "trigger", name, key, if_exists=if_exists, line=line)
        with self._lock:
            self._parsed.pop(key, None)

    def drop_table(self, tx: Transaction, table: str) -> None:
        """DROP TABLE ``table`` (case-folded) in ``tx`` (a broker transaction): its triggers go
        with it, as SQL Server drops a table's triggers with the table."""
        tx.execute(f"DELETE FROM {TABLE} WHERE table_name = {placeholder(self._broker)}", (table,))


def _taken(name: str, line: int) -> TSqlError:
    return TSqlError(2714, f"There is already an object named '{name}' in the database.", line=line)


class TriggerSession(Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    def triggers_here(self) -> TriggerStore: ...


def _create_trigger(session: TriggerSession, s: n.CreateTrigger) -> None:
    refuse_in_written_transaction(cast(Any, session), f"{s.mode} TRIGGER", s.line)
    if not table_exists(cast(Any, session), s.table):
        raise TSqlError(
            8197,
            f"The object '{'.'.join(s.table)}' does not exist or is invalid for this operation.",
            line=s.line,
        )
    session.triggers_here().put(s)


def _drop_trigger(session: TriggerSession, s: n.DropTrigger) -> None:
    refuse_in_written_transaction(cast(Any, session), "DROP TRIGGER", s.line)
    for name in s.names:
        session.triggers_here().drop(name, if_exists=s.if_exists, line=s.line)


TRIGGER_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.CreateTrigger: _create_trigger,
    n.DropTrigger: _drop_trigger,
}
"""The runner of each trigger statement's node type."""
