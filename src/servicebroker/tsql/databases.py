"""The statements on an instance's databases: USE, CREATE DATABASE, DROP DATABASE, ALTER
DATABASE … SET (the Service Broker options run as DDL on the named database; TRUSTWORTHY and
the options with no effect here recorded; any other refused by name) and the Service Broker DDL
(run on the session's database, or ALTER DATABASE's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..broker import Broker
from ..ddl.run import run_ddl
from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .results import ResultSet
from .unsupported import not_supported

__all__ = ["DATABASE_STATEMENTS", "NO_EFFECT_DATABASE_OPTIONS", "DatabaseSession"]


class InstanceOfDatabases(Protocol):
    """What these statements need of the instance."""

    def database(self, name: str) -> Broker: ...
    def database_names(self) -> list[str]: ...
    def database_id(self, name: str) -> int | None: ...
    def create_database(self, name: str) -> None: ...
    def drop_database(self, name: str) -> None: ...
    def set_option(self, database: str, key: str, value: str) -> None: ...


class DatabaseSession(Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    instance: InstanceOfDatabases
    broker: Broker
    database: str
    trancount: int

    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...
    def open_transaction(self) -> Transaction | None: ...


NO_EFFECT_DATABASE_OPTIONS = frozenset(
    {
        "RECOVERY", "SINGLE_USER", "MULTI_USER", "RESTRICTED_USER", "PAGE_VERIFY",
        "READ_COMMITTED_SNAPSHOT", "ALLOW_SNAPSHOT_ISOLATION", "AUTO_CLOSE", "AUTO_SHRINK",
        "AUTO_CREATE_STATISTICS", "AUTO_UPDATE_STATISTICS", "AUTO_UPDATE_STATISTICS_ASYNC",
        "COMPATIBILITY_LEVEL", "ANSI_NULLS", "ANSI_PADDING", "ANSI_WARNINGS", "ARITHABORT",
        "QUOTED_IDENTIFIER", "CONCAT_NULL_YIELDS_NULL", "NUMERIC_ROUNDABORT",
        "RECURSIVE_TRIGGERS", "DB_CHAINING", "CURSOR_DEFAULT", "CURSOR_CLOSE_ON_COMMIT",
        "PARAMETERIZATION", "TARGET_RECOVERY_TIME", "TORN_PAGE_DETECTION", "ONLINE",
    }
)  # fmt: skip
"""ALTER DATABASE … SET options accepted and recorded with no effect here: what they tune
(recovery, statistics, session defaults the interpreter already follows) is the database
underneath's or does not exist (docs/tsql.md). TRUSTWORTHY is recorded and shown in
sys.databases; any other option is refused by name."""


def _use(session: DatabaseSession, s: n.Use) -> None:
    if session.trancount > 0:
        raise not_supported(
            "USE inside a transaction (a transaction spans one database here)", s.line
        )
    broker = session.instance.database(s.database)
    session.broker = broker
    session.database = next(
        d for d in session.instance.database_names() if d.casefold() == s.database.casefold()
    )
    session.emit(f"Changed database context to '{session.database}'.")


def _database_options(session: DatabaseSession, s: n.DatabaseOptions) -> None:
    broker = session.instance.database(s.database)
    for key, value in s.options:
        if key == "TRUSTWORTHY":
            if value not in ("ON", "OFF"):
                raise TSqlError(
                    102, f"Incorrect syntax near '{value or key}'.", severity=15, line=s.line
                )
        elif key not in NO_EFFECT_DATABASE_OPTIONS:
            raise not_supported(f"ALTER DATABASE … SET {key}", s.line)
    if s.broker is not None:
        run_ddl(broker, [s.broker])
    for key, value in s.options:
        session.instance.set_option(s.database, key, value)


def _create_database(session: DatabaseSession, s: n.CreateDatabase) -> None:
    session.instance.create_database(s.name)


def _drop_database(session: DatabaseSession, s: n.DropDatabase) -> None:
    for name in s.names:
        if s.if_exists and session.instance.database_id(name) is None:
            continue
        if name.casefold() == session.database.casefold():
            raise TSqlError(3702, f'Cannot drop database "{name}" because it is currently in use.')
        session.instance.drop_database(name)


def refuse_in_written_transaction(session: DatabaseSession, what: str, line: int) -> None:
    """DDL runs in a transaction of its own and commits at once (docs/tsql.md): inside a
    transaction that has changed the application's tables it would wait for that
    transaction's locks, so it is refused at once.

    Raises:
        TSqlError: Msg 40000, naming ``what``.
    """
    tx = session.open_transaction()
    if tx is not None and tx.writing:
        raise not_supported(
            f"{what} inside a transaction that has changed the application's tables (it would "
            f"commit on its own and wait for this transaction's locks; commit or roll back "
            f"first)",
            line,
        )


def _ddl(session: DatabaseSession, s: n.Ddl) -> None:
    statement = s.statement
    refuse_in_written_transaction(session, statement.statement, s.line)
    if statement.statement == "ALTER DATABASE":
        broker = session.instance.database(statement.name)
    else:
        broker = session.broker
    run_ddl(broker, [statement])


DATABASE_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.Use: _use,
    n.DatabaseOptions: _database_options,
    n.CreateDatabase: _create_database,
    n.DropDatabase: _drop_database,
    n.Ddl: _ddl,
}
"""The runner of each of these statements' node type."""
