"""The one schema migration runner of every backend.

A backend keeps its schema as numbered scripts ``NNNN_name.sql`` in the ``migrations`` folder of
its package (``0001_initial.sql``, ``0002_…``); an applied script is never edited, a change is a
new number. :func:`migrate` applies the scripts a database lacks, in order, and records each in
its ``schema_migrations`` table (``version``, ``name``). The backend gives only how it runs a
statement and a script, and opens the transaction and takes the lock that keep two processes
from migrating at once (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-level advisory
lock); the runner works inside them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..errors import StorageError
from .queries import portable_sql

__all__ = ["Migration", "known_migrations", "migrate", "schema_version"]

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one statement with positional parameters and returns its rows (``[]`` when it has
none)."""

_CREATE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
)
_APPLIED = "SELECT version FROM schema_migrations"
_RECORD = "INSERT INTO schema_migrations (version, name) VALUES (?, ?)"
_NEWEST = "SELECT max(version) FROM schema_migrations"


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration script: its ``version`` (the file name's number), the file ``name`` and
    the SQL ``script``."""

    version: int
    name: str
    script: str


def known_migrations(package: str) -> list[Migration]:
    """The migrations in the ``migrations`` folder of ``package``, by version.

    Raises:
        ValueError: a ``.sql`` file whose name does not start with a number and ``_``, or two
            files with one number.
    """
    found: dict[int, Migration] = {}
    for entry in resources.files(package).joinpath("migrations").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        number, underscore, _ = entry.name.partition("_")
        if not number.isdigit() or not underscore:
            raise ValueError(f"{package}: migration {entry.name!r} is not named NNNN_name.sql")
        version = int(number)
        if version in found:
            raise ValueError(
                f"{package}: migrations {found[version].name!r} and {entry.name!r} share "
                f"version {version}"
            )
        found[version] = Migration(version, entry.name, entry.read_text("utf-8"))
    return [found[v] for v in sorted(found)]


def migrate(
    package: str,
    *,
    query: Query,
    run_script: Callable[[str], None],
    paramstyle: str,
    where: str,
) -> list[Migration]:
    """Bring a database to the newest schema of ``package``, inside the caller's transaction
    and lock (the caller commits, or rolls back when this raises).

    Creates ``schema_migrations`` if missing, then applies each migration not recorded there,
    in version order, recording it.

    Args:
        package: the backend's package, whose ``migrations`` folder holds the scripts.
        query: runs one statement (``?`` placeholders already converted) on the connection.
        run_script: runs a whole migration script on the connection.
        paramstyle: the placeholders of ``query``: "qmark" or "format".
        where: the database, as named in errors (the storage's ``database``; no password).

    Returns:
        The migrations applied now (empty when the schema was current).

    Raises:
        StorageError: the database records a version newer than ``package`` knows (it was
            migrated by a newer servicebroker); both versions are named.
        ValueError: as :func:`known_migrations`.
    """
    query(_CREATE, ())
    applied = {int(row[0]) for row in query(_APPLIED, ())}
    known = known_migrations(package)
    newest = known[-1].version if known else 0
    if applied and max(applied) > newest:
        raise StorageError(
            f"{where}: schema version {max(applied)}, newer than this servicebroker knows "
            f"({newest}); upgrade servicebroker",
            database=where,
        )
    record = portable_sql(_RECORD, paramstyle)
    done = []
    for migration in known:
        if migration.version not in applied:
            run_script(migration.script)
            query(record, (migration.version, migration.name))
            done.append(migration)
    return done


def schema_version(query: Query) -> int:
    """The highest migration version recorded in the database ``query`` runs on (0: none)."""
    rows = query(_NEWEST, ())
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0
