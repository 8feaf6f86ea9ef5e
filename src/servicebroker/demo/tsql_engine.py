"""The main job in T-SQL (``servicebroker demo --engine tsql``): the carriers' and airports'
activated procedures as T-SQL stored procedures, kept as ``.sql`` files a SQL Server user can
read and run there too (``demo/sql/``), created in the demo's databases and run by activation
through T-SQL sessions on the demo's own brokers.

Each of the demo's brokers is seen as an instance holding one database (:class:`BrokerDatabase`:
``flights``, or ``airports`` and ``carriers`` for two instances), so the demo keeps its URLs,
backends and transport settings. The set-up scripts make the tables (``carrier_tables.sql``,
``airport_tables.sql``) and one procedure per queue from a template with a sqlcmd scripting
variable (``carrier_activation.sql`` with ``$(Carrier)``, ``airport_activation.sql`` with
``$(Airport)``); each queue's ``ACTIVATION (PROCEDURE_NAME = …)`` names its procedure
(:func:`procedure_name`). The procedures write the same rows the Python ones write (the report
and the count checks read them the same way), and a row per receiving transaction
(``carrier_batches``, ``airport_batches``) from which the report's figures come.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..broker import ActivationContext, Broker
from ..clock import Clock
from ..errors import BrokerError, TSqlError
from ..tsql import nodes as n
from ..tsql.build import build_batch
from ..tsql.instance import DATABASES_COLUMNS
from ..tsql.interpreter import Session
from ..tsql.procedures import ProcedureStore, activation_principal, log_activation_error
from ..tsql.queries import RowSource
from ..tsql.script import Script
from ..tsql.tables import ensure_registry
from ..tsql.triggers import TriggerStore
from ..tsql.types import Typed
from ..tsql.unsupported import not_supported

if TYPE_CHECKING:
    from .procedures import DemoState

__all__ = [
    "SQL_FOLDER",
    "BrokerDatabase",
    "TSqlProcedures",
    "procedure_name",
    "run_script",
]

SQL_FOLDER = Path(__file__).with_name("sql")
"""The T-SQL of the main job: the tables' and the activated procedures' scripts."""

_ERRORS_KEPT = 20
"""Activated procedures' errors a database keeps for the report (all are logged)."""


def procedure_name(kind: str, code: str) -> str:
    """The activated procedure of queue ``{kind}_{code}`` (``"carrier"`` or ``"airport"`` and
    its code), as ACTIVATION's PROCEDURE_NAME names it: e.g. ``carrier_UA_activation``."""
    return f"{kind}_{code}_activation"


class BrokerDatabase:
    """One of the demo's brokers as a T-SQL instance of one database named ``name``: what a
    :class:`~servicebroker.tsql.Session` needs of its instance (``InstanceSeam``), with the
    database's stored procedures registered for activation on ``broker``. The databases of
    :class:`~servicebroker.tsql.Instance` are its own files or schemas; the demo's broker is
    opened by the demo (its URL, its transport settings), hence this seam.

    Args:
        broker: the open broker (its clock is the instance's).
        name: the database's name in T-SQL (``DB_NAME()``, ``sys.databases``).

    CREATE / DROP / ALTER DATABASE are refused (Msg 40000): the demo's databases are its own.
    """

    def __init__(self, broker: Broker, name: str) -> None:
        self.broker = broker
        self.name = name
        self.clock: Clock = broker.clock
        self.errors: list[TSqlError] = []
        """The first activated procedures' errors (each is also logged)."""
        self.error_count = 0
        self._lock = threading.Lock()
        ensure_registry(broker)
        self._procedures = ProcedureStore(broker, _parse_procedure, self._runner)
        self._procedures.register_all()
        self._triggers = TriggerStore(broker)
        self._triggers.ensure()

    def _check(self, name: str) -> None:
        if name.casefold() != self.name.casefold():
            raise TSqlError(
                911,
                f"Database '{name}' does not exist. Make sure that the name is entered correctly.",
            )

    def database(self, name: str) -> Broker:
        """The broker of database ``name``.

        Raises:
            TSqlError: Msg 911, not this database.
        """
        self._check(name)
        return self.broker

    def database_names(self) -> list[str]:
        """The one database's name."""
        return [self.name]

    def databases_view(self) -> RowSource:
        """``sys.databases``: the one database's row."""
        (row,) = self.broker.views.databases()
        columns = DATABASES_COLUMNS
        values = (self.name, 1, row.service_broker_guid, 1, 0, int(row.is_honor_broker_priority_on))
        return RowSource(
            columns, [{c: Typed(v, t) for (c, t), v in zip(columns, values, strict=True)}]
        )

    def database_id(self, name: str) -> int | None:
        """DB_ID(``name``): 1 for this database, else None."""
        return 1 if name.casefold() == self.name.casefold() else None

    def database_name(self, database_id: int) -> str | None:
        """DB_NAME(``database_id``): this database's name for 1, else None."""
        return self.name if database_id == 1 else None

    def create_database(self, name: str) -> None:
        """Refused: the demo's databases are its own (Msg 40000)."""
        raise not_supported("CREATE DATABASE in the demo's databases", 1)

    def drop_database(self, name: str) -> None:
        """Refused: the demo's databases are its own (Msg 40000)."""
        raise not_supported("DROP DATABASE in the demo's databases", 1)

    def set_option(self, database: str, key: str, value: str) -> None:
        """Refused: the demo's databases are its own (Msg 40000)."""
        raise not_supported("ALTER DATABASE in the demo's databases", 1)

    def procedures(self, database: str) -> ProcedureStore:
        """The stored procedures of the database.

        Raises:
            TSqlError: Msg 911, not this database.
        """
        self._check(database)
        return self._procedures

    def triggers(self, database: str) -> TriggerStore:
        """The DML triggers of the database.

        Raises:
            TSqlError: Msg 911, not this database.
        """
        self._check(database)
        return self._triggers

    def _runner(self, name: str) -> Callable[[ActivationContext], None]:
        """What activation runs for procedure ``name``: a session of its own, acting as the
        queue's EXECUTE AS principal, that EXECs it; its errors are logged and kept."""

        def activated(context: ActivationContext) -> None:
            principal = activation_principal(context.broker, context.queue_name)
            session = Session(self, self.name, principal=principal)
            try:
                session.call_procedure(name)
            except Exception:
                # an error that ends the batch (THROW in the CATCH block) leaves
                # call_procedure as the interpreter's private signal, once the error is one
                # of the session's: the procedure has ended, as on SQL Server
                if not session.results.errors:
                    raise
            finally:
                session.close()
            for error in session.results.errors:
                log_activation_error(self.name, name, error)
                with self._lock:
                    self.error_count += 1
                    if len(self.errors) < _ERRORS_KEPT:
                        self.errors.append(error)

        return activated


def _parse_procedure(definition: str) -> n.CreateProcedure:
    """A stored definition back as its CREATE PROCEDURE node."""
    statements = build_batch(definition)
    if len(statements) != 1 or not isinstance(statements[0], n.CreateProcedure):
        raise TSqlError(2812, "A stored procedure's definition does not parse as one.")
    return statements[0]


def run_script(database: BrokerDatabase, path: Path, variables: dict[str, str]) -> None:
    """Run the sqlcmd script at ``path`` in a session on ``database``, with the scripting
    variables ``variables`` (``-v NAME=VALUE``), stopping at the first failing batch (``-b``).

    Raises:
        BrokerError: a batch failed; the message is the first error as sqlcmd prints it.
    """
    session = Session(database, database.name)
    seen = 0

    def run_batch(text: str) -> bool:
        nonlocal seen
        session.run_batch(text)
        failed = len(session.results.errors) > seen
        seen = len(session.results.errors)
        return failed

    try:
        script = Script(run_batch, dict(variables), exit_on_error=True)
        script.run_file(str(path))
    except TSqlError as exc:
        raise BrokerError(f"{path.name}: {exc.sqlcmd_text()}") from exc
    finally:
        session.close()
    if session.results.errors:
        first = session.results.errors[0]
        raise BrokerError(f"{path.name} ({variables}): {first.sqlcmd_text()}")


@dataclass
class TSqlProcedures:
    """The T-SQL side of one demo run: the databases its procedures run in."""

    airports: BrokerDatabase
    carriers: BrokerDatabase
    databases: tuple[BrokerDatabase, ...] = field(default=())

    @classmethod
    def install(cls, airport: Broker, carrier: Broker, flights: Any) -> TSqlProcedures:
        """Create the tables and one activated procedure per queue from ``demo/sql/`` (a
        carrier's per carrier, an airport's per origin airport of ``flights``, a pandas
        DataFrame): the carriers' in the carriers' broker ``carrier``, the airports' in the
        airports' ``airport`` (the same broker, one database ``flights``, for one instance).
        Call before the queues are created.

        Raises:
            BrokerError: a script failed (its first error, as sqlcmd prints it).
        """
        if carrier is not airport:
            airport_db = BrokerDatabase(airport, "airports")
            carrier_db = BrokerDatabase(carrier, "carriers")
            databases: tuple[BrokerDatabase, ...] = (airport_db, carrier_db)
        else:
            airport_db = carrier_db = BrokerDatabase(airport, "flights")
            databases = (airport_db,)
        airports = sorted(flights["origin"].unique())
        carriers = sorted(flights["carrier"].unique())
        run_script(carrier_db, SQL_FOLDER / "carrier_tables.sql", {})
        run_script(airport_db, SQL_FOLDER / "airport_tables.sql", {})
        for code in carriers:
            run_script(carrier_db, SQL_FOLDER / "carrier_activation.sql", {"Carrier": code})
        for code in airports:
            run_script(airport_db, SQL_FOLDER / "airport_activation.sql", {"Airport": code})
        return cls(airport_db, carrier_db, databases)

    def count(self, state: DemoState) -> None:
        """Put the procedures' figures in ``state`` (messages received, receiving transactions,
        timers fired), read from their tables."""
        carrier = self.carriers.broker.execute(
            "SELECT count(*), coalesce(sum(messages), 0) FROM carrier_batches"
        )[0]
        airport = self.airports.broker.execute(
            "SELECT count(*), coalesce(sum(messages), 0) FROM airport_batches"
        )[0]
        timers = self.carriers.broker.execute(
            "SELECT count(*) FROM flight_results WHERE status = 'arrival_missing'"
        )[0][0]
        state.carrier_transactions = int(carrier[0])
        state.airport_transactions = int(airport[0])
        state.received = int(carrier[1]) + int(airport[1])
        state.timers_fired = int(timers)

    def problems(self) -> list[str]:
        """What the procedures' errors say is wrong (empty when none failed)."""
        out = []
        for db in self.databases:
            if db.error_count:
                first = db.errors[0]
                out.append(
                    f"{db.error_count} errors in the T-SQL procedures of database {db.name}, "
                    f"the first: {first.sqlcmd_text()}"
                )
        return out
