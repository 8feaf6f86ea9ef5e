"""An instance: SQL Server's unit of databases, here a folder of SQLite brokers (``name.db``,
``master.db`` among them) or a PostgreSQL server URL (each database a schema ``sb_<name>`` of
the URL's database, its T-SQL name kept as the schema's comment). Each database is a
:class:`~servicebroker.Broker`; names are matched without regard to case, as SQL Server's
default collation matches them.

``Instance.execute`` runs T-SQL (:mod:`.interpreter`) in a session of its own;
``servicebroker sqlcmd`` runs scripts through :class:`.script.Script` on a session.
"""

from __future__ import annotations

import hashlib
import re
import threading
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from ..broker import ActivationContext, Broker
from ..clock import Clock, SystemClock
from ..engine.neighbours import neighbourhoods
from ..errors import BrokerError, TSqlError
from . import nodes as n
from .build import build_batch
from .instance_link import InstanceLink
from .interpreter import Session
from .procedures import ProcedureStore, activation_principal, log_activation_error
from .queries import RowSource
from .results import Results
from .script import split_batches
from .tables import ensure_registry, placeholder
from .triggers import TriggerStore
from .types import BIT, INT, SYSNAME, UNIQUEIDENTIFIER, SqlType, Typed

__all__ = ["DATABASES_COLUMNS", "Instance"]

DATABASES_COLUMNS: tuple[tuple[str, SqlType], ...] = (
    ("name", SYSNAME),
    ("database_id", INT),
    ("service_broker_guid", UNIQUEIDENTIFIER),
    ("is_broker_enabled", BIT),
    ("is_trustworthy_on", BIT),
    ("is_honor_broker_priority_on", BIT),
)
"""The columns of ``sys.databases`` here, in order, with their types."""

_PLAIN = re.compile(r"[A-Za-z0-9_]+")


class Instance:
    """A set of named databases, each a broker (module docstring). Open one with
    :meth:`open`; close it with :meth:`close` (or ``with``).

    Not for use by several threads at once on one session; the brokers themselves are
    thread-safe.
    """

    def __init__(self, location: str, *, clock: Clock | None = None) -> None:
        self.location = location
        self.clock: Clock = clock or SystemClock()
        self._postgres = location.startswith(("postgresql://", "postgres://"))
        self._prefix = "sb_"
        self._server = location
        if self._postgres:
            self._server, self._prefix = _instance_prefix(location)
        named = self._prefix[len("sb_") : -1]
        self._comment = (
            f"servicebroker instance {named} database " if named else "servicebroker database "
        )
        self._brokers: dict[str, Broker] = {}
        self._procedures: dict[str, ProcedureStore] = {}
        self._triggers: dict[str, TriggerStore] = {}
        self._lock = threading.RLock()
        self._started = False
        if not self._postgres:
            Path(location).mkdir(parents=True, exist_ok=True)
        self.link = InstanceLink(self)
        """Dialogs between the instance's databases (:mod:`.instance_link`)."""
        if self._find("master") is None:
            self.create_database("master")
        neighbourhoods.join(self.link)

    @classmethod
    def open(cls, location: str, *, clock: Clock | None = None) -> Instance:
        """The instance at ``location``: a folder (made when missing) or a PostgreSQL URL
        (``postgresql://user@host/dbname``). ``master`` is created on first use.

        Raises:
            BrokerError: ``location`` is not a string, or the folder cannot be made.
            StorageError: the PostgreSQL server cannot be reached.
        """
        if not isinstance(location, str) or not location:
            raise BrokerError(f"an instance is a folder or a PostgreSQL URL, got {location!r}")
        try:
            return cls(location, clock=clock)
        except OSError as exc:
            raise BrokerError(f"instance folder {location!r} cannot be used: {exc}") from None

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- databases --------------------------------------------------------------------------
    def _schema_for(self, name: str) -> str:
        if _PLAIN.fullmatch(name) and len(self._prefix) + len(name) <= 63:
            return self._prefix + name.casefold()
        return self._prefix + "x" + hashlib.sha1(name.casefold().encode()).hexdigest()[:24]

    def _postgres_url(self, schema: str) -> str:
        sep = "&" if "?" in self._server else "?"
        return f"{self._server}{sep}options=" + urllib.parse.quote(f"-csearch_path={schema}")

    def _find(self, name: str) -> str | None:
        """The stored name of database ``name`` (its case as created), or None."""
        return next((d for d in self.database_names() if d.casefold() == name.casefold()), None)

    def database_names(self) -> list[str]:
        """The names of the instance's databases, as created, ``master`` first."""
        if self._postgres:
            import psycopg

            with psycopg.connect(self._server, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace "
                    "WHERE starts_with(nspname, %s) "
                    "AND starts_with(obj_description(oid, 'pg_namespace'), %s)",
                    (self._prefix, self._comment),
                ).fetchall()
            names = [str(r[0])[len(self._comment) :] for r in rows]
        else:
            names = [p.stem for p in Path(self.location).glob("*.db") if p.is_file()]
        return sorted(names, key=lambda d: (d.casefold() != "master", d.casefold()))

    def url_of(self, name: str) -> str:
        """The storage URL of database ``name`` (what ``servicebroker status --url`` takes).

        Raises:
            TSqlError: Msg 911, no such database.
        """
        found = self._find(name)
        if found is None:
            raise _no_database(name)
        return self._url(found)

    def _url(self, stored: str) -> str:
        if self._postgres:
            return self._postgres_url(self._schema_for(stored))
        return str(Path(self.location) / f"{stored}.db")

    def database(self, name: str) -> Broker:
        """The broker of database ``name`` (opened once, kept until :meth:`close`).

        Raises:
            TSqlError: Msg 911, no such database.
        """
        with self._lock:
            key = name.casefold()
            broker = self._brokers.get(key)
            if broker is None:
                stored = self._find(name) or name
                broker = Broker.open(self.url_of(name), clock=self.clock)
                self._brokers[key] = broker
                store = ProcedureStore(broker, _parse_procedure, self._runner(stored))
                self._procedures[key] = store
                triggers = TriggerStore(broker)
                triggers.ensure()
                self._triggers[key] = triggers
                store.register_all()
                broker.register_procedure_finder(store.find)  # created later, anywhere
                ensure_registry(broker)
                self.link.attach(stored, broker)
                if self._started:
                    broker.start()
            return broker

    def is_open(self, name: str) -> bool:
        """True when database ``name``'s broker is open in this instance (:meth:`database`)."""
        with self._lock:
            return name.casefold() in self._brokers

    def procedures(self, database: str) -> ProcedureStore:
        """The stored procedures of ``database``.

        Raises:
            TSqlError: Msg 911, no such database.
        """
        self.database(database)
        with self._lock:
            return self._procedures[database.casefold()]

    def triggers(self, database: str) -> TriggerStore:
        """The DML triggers of ``database``.

        Raises:
            TSqlError: Msg 911, no such database.
        """
        self.database(database)
        with self._lock:
            return self._triggers[database.casefold()]

    def _runner(self, database: str) -> Callable[[str], Callable[[ActivationContext], None]]:
        """What activation runs for a T-SQL procedure of ``database``: a session of its own,
        acting as the queue's EXECUTE AS principal, that EXECs it."""

        def runner(name: str) -> Callable[[ActivationContext], None]:
            def activated(context: ActivationContext) -> None:
                principal = activation_principal(context.broker, context.queue_name)
                session = Session(self, database, principal=principal)
                try:
                    session.call_procedure(name)
                finally:
                    session.close()
                errors = session.results.errors
                if errors:  # named as CREATE PROCEDURE wrote it, not by its case-folded key
                    stored = self.procedures(database).get(name)
                    declared = stored.name if stored is not None else name
                    for error in errors:
                        log_activation_error(database, declared, error)

            return activated

        return runner

    def create_database(self, name: str) -> None:
        """CREATE DATABASE ``name``: a new, empty broker.

        Raises:
            TSqlError: Msg 1801, the database exists; Msg 102, a bad name.
        """
        if not name or len(name) > 128 or any(c in name for c in '/\\:*?"<>|\0'):
            raise TSqlError(102, f"Incorrect syntax near '{name}'.", severity=15)
        if self._find(name) is not None:
            raise TSqlError(
                1801, f"Database '{name}' already exists. Choose a different database name."
            )
        if self._postgres:
            import psycopg
            from psycopg import sql

            schema = self._schema_for(name)
            with psycopg.connect(self._server, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
                conn.execute(
                    sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                        sql.Identifier(schema), sql.Literal(self._comment + name)
                    )
                )
        Broker.open(self._url(name), clock=self.clock).close()
        self.link.forget()

    def drop_database(self, name: str) -> None:
        """DROP DATABASE ``name``: its broker closed and its storage removed.

        Raises:
            TSqlError: Msg 3701, no such database; Msg 3702, ``master``.
        """
        found = self._find(name)
        if found is None:
            raise TSqlError(
                3701,
                f"Cannot drop the database '{name}', because it does not exist or you do not "
                f"have permission.",
                severity=11,
            )
        if found.casefold() == "master":
            raise TSqlError(
                3708, "Cannot drop the database 'master' because it is a system database."
            )
        with self._lock:
            broker = self._brokers.pop(found.casefold(), None)
            self._procedures.pop(found.casefold(), None)
            self._triggers.pop(found.casefold(), None)
        if broker is not None:
            broker.close()
        self.link.forget()
        if self._postgres:
            import psycopg
            from psycopg import sql

            with psycopg.connect(self._server, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA {} CASCADE").format(
                        sql.Identifier(self._schema_for(found))
                    )
                )
            return
        base = Path(self.location) / f"{found}.db"
        for path in Path(self.location).glob(f"{found}.db*"):
            if path == base or path.name.startswith(base.name + "-"):
                path.unlink(missing_ok=True)

    def databases_view(self) -> RowSource:
        """``sys.databases``: name, database_id, service_broker_guid, is_broker_enabled,
        is_trustworthy_on, is_honor_broker_priority_on, one row per database."""
        columns = DATABASES_COLUMNS
        rows = []
        for number, name in enumerate(self.database_names(), start=1):
            (row,) = self.database(name).views.databases()
            rows.append(
                {
                    "name": Typed(name, SYSNAME),
                    "database_id": Typed(number, INT),
                    "service_broker_guid": Typed(row.service_broker_guid, UNIQUEIDENTIFIER),
                    "is_broker_enabled": Typed(int(row.is_broker_enabled), BIT),
                    "is_trustworthy_on": Typed(int(self.option(name, "TRUSTWORTHY") == "ON"), BIT),
                    "is_honor_broker_priority_on": Typed(int(row.is_honor_broker_priority_on), BIT),
                }
            )
        return RowSource(columns, rows)

    def set_option(self, database: str, key: str, value: str) -> None:
        """Record ALTER DATABASE … SET ``key`` ``value`` (TRUSTWORTHY ON, …) for ``database``,
        in the database itself (table ``servicebroker_database_options``).

        Raises:
            TSqlError: Msg 911, no such database.
        """
        broker = self.database(database)
        mark = placeholder(broker)
        with broker.transaction() as tx:
            tx.execute(_OPTIONS_TABLE)
            tx.execute(f"DELETE FROM servicebroker_database_options WHERE name = {mark}", (key,))
            tx.execute(
                f"INSERT INTO servicebroker_database_options (name, value) VALUES ({mark}, {mark})",
                (key, value),
            )

    def option(self, database: str, key: str) -> str | None:
        """The value :meth:`set_option` recorded for ``key`` in ``database``, or None."""
        broker = self.database(database)
        mark = placeholder(broker)
        with broker.transaction() as tx:
            tx.execute(_OPTIONS_TABLE)
            rows = tx.execute(
                f"SELECT value FROM servicebroker_database_options WHERE name = {mark}", (key,)
            )
        return str(rows[0][0]) if rows else None

    def database_id(self, name: str) -> int | None:
        """DB_ID(name): the database's place in :meth:`database_names` (master is 1)."""
        for number, found in enumerate(self.database_names(), start=1):
            if found.casefold() == name.casefold():
                return number
        return None

    def database_name(self, database_id: int) -> str | None:
        """DB_NAME(id)."""
        names = self.database_names()
        return names[database_id - 1] if 1 <= database_id <= len(names) else None

    # -- background work and T-SQL ----------------------------------------------------------
    def start(self) -> None:
        """Start every open database's background work (timer, activation) and each database
        opened later (``servicebroker serve -S``; a running ``sqlcmd``)."""
        with self._lock:
            self._started = True
            brokers = list(self._brokers.values())
        for broker in brokers:  # not under the lock: a first tick may open databases
            broker.start()

    def execute(self, text: str, *, database: str = "master") -> Results:
        """Run T-SQL ``text`` (batches split at GO lines) in a new session on ``database``;
        return its :class:`~servicebroker.tsql.interpreter.Results` (result sets, messages,
        row counts). A transaction left open at the end is rolled back.

        Raises:
            TSqlError: the first error the batches raise that SQL Server would raise to the
                client (after running what SQL Server runs: a statement's error lets its batch
                go on, a batch-aborting one ends the batch; the next batches run, as sqlcmd
                runs them). ``error.results`` holds what ran.
        """
        if not isinstance(text, str):
            raise BrokerError(f"T-SQL text must be a string, got {type(text).__name__}")
        session = Session(self, database)
        try:
            for batch, _line in split_batches(text):
                session.run_batch(batch)
        finally:
            session.close()
        results = session.results
        if results.errors:
            error = results.errors[0]
            error.results = results  # type: ignore[attr-defined]
            raise error
        return results

    def close(self) -> None:
        """Stop and close every broker of the instance."""
        neighbourhoods.leave(self.link)
        with self._lock:
            brokers = list(self._brokers.values())
            self._brokers.clear()
            self._procedures.clear()
            self._triggers.clear()
        for broker in brokers:
            broker.close()

    def __repr__(self) -> str:
        return f"Instance({self.location!r})"


def _instance_prefix(location: str) -> tuple[str, str]:
    """A PostgreSQL instance URL without its ``instance=NAME`` parameter, and the schema prefix
    of its databases (``sb_`` alone, or ``sb_NAME_`` for a named instance: several instances
    share one PostgreSQL database so)."""
    parts = urllib.parse.urlsplit(location)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    names = [v for k, v in query if k == "instance"]
    rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "instance"])
    server = urllib.parse.urlunsplit(parts._replace(query=rest))
    if not names:
        return server, "sb_"
    name = names[-1]
    if not _PLAIN.fullmatch(name) or len(name) > 30:
        raise BrokerError(
            f"instance={name!r}: an instance name is letters, digits and _ (30 at most)"
        )
    return server, f"sb_{name.casefold()}_"


_OPTIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS servicebroker_database_options "
    "(name VARCHAR(128) PRIMARY KEY, value VARCHAR(128) NOT NULL)"
)


def _parse_procedure(definition: str) -> n.CreateProcedure:
    """A stored definition back as its CREATE PROCEDURE node."""
    statements = build_batch(definition)
    procedure = statements[0] if len(statements) == 1 else None
    if not isinstance(procedure, n.CreateProcedure):
        raise TSqlError(2812, "A stored procedure's definition does not parse as one.")
    return procedure


def _no_database(name: str) -> TSqlError:
    return TSqlError(
        911,
        f"Database '{name}' does not exist. Make sure that the name is entered correctly.",
    )
