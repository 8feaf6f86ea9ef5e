"""The SQLite and PostgreSQL schemas have the same tables and columns (names, in order: the
types differ by dialect), so every shared named query and the storage contract mean the same on
both. A difference is mended by a new numbered migration of the one stream (shared, or the
backend's own where the dialects differ), never by editing an applied one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from servicebroker.storage import open_storage

from .conftest import drop_url, new_url

DIALECT_ONLY = {
    "sqlite": {"sqlite_sequence"},  # SQLite's own AUTOINCREMENT bookkeeping
    # queue activity (ACT-3, ACT-5b) lives in the side file <database>-sbactivity on SQLite
    "postgres": {"queue_activity", "queue_waiters", "queue_positions"},
    # queue_positions: per-queue commit order for parallel commits; SQLite's single writer
    # commits one transaction at a time, so its queuing_order is commit order already
}
"""Tables one backend has by design, with what the other keeps instead."""


def sqlite_columns(path: str) -> dict[str, list[str]]:
    """Each table of the SQLite file and its column names, in order."""
    with sqlite3.connect(path) as c:
        tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: [r[1] for r in c.execute(f"PRAGMA table_info({t})")] for t in tables}


def postgres_columns(url: str) -> dict[str, list[str]]:
    """Each base table of the broker's schema (the URL's current schema) and its column
    names, in order."""
    import psycopg

    with psycopg.connect(url) as c:
        rows = c.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "JOIN information_schema.tables t "
            "ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
            "ORDER BY c.table_name, c.ordinal_position"
        ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    return columns


def test_both_backends_have_the_same_tables_and_columns(tmp_path: Path) -> None:
    sqlite_url = new_url("sqlite", tmp_path)
    postgres_url = new_url("postgres", tmp_path)  # skipped (failed in CI) without a server
    try:
        for url in (sqlite_url, postgres_url):
            open_storage(url).close()  # creates and migrates
        sqlite = sqlite_columns(sqlite_url)
        postgres = postgres_columns(postgres_url)
    finally:
        drop_url(postgres_url)
    assert DIALECT_ONLY["sqlite"] <= set(sqlite), "a dialect-only table is gone: update the list"
    assert DIALECT_ONLY["postgres"] <= set(postgres), "a dialect-only table is gone"
    # in order too: statements such as the queue_groups triggers' INSERT … VALUES are positional
    shared_sqlite = {t: c for t, c in sqlite.items() if t not in DIALECT_ONLY["sqlite"]}
    shared_postgres = {t: c for t, c in postgres.items() if t not in DIALECT_ONLY["postgres"]}
    assert sorted(shared_sqlite) == sorted(shared_postgres), "tables differ"
    assert shared_sqlite == shared_postgres, "columns differ"


def test_a_newer_schema_is_refused_naming_both_versions(url: str) -> None:
    # the one migration runner (servicebroker.storage.migrations) on every backend
    from servicebroker import StorageError
    from servicebroker.storage.migrations import known_migrations

    storage = open_storage(url)
    newest = known_migrations(type(storage).__module__)[-1].version
    with storage.connection() as conn:
        conn.execute_app(
            "INSERT INTO schema_migrations (version, name) VALUES (999, '0999_future.sql')", ()
        )
        conn.commit()
    storage.close()
    with pytest.raises(StorageError, match=rf"schema version 999, .*\({newest}\)"):
        open_storage(url)


def test_migrations_are_numbered_once() -> None:
    from servicebroker.storage.migrations import known_migrations

    for backend in ("sqlite", "postgres"):
        versions = [m.version for m in known_migrations(f"servicebroker.storage.{backend}")]
        assert versions == list(range(1, len(versions) + 1)), backend


def test_every_backend_follows_one_stream() -> None:
    # one number and one name per step on every backend; written once where the dialects agree
    from servicebroker.storage.migrations import known_migrations

    streams = {
        backend: known_migrations(f"servicebroker.storage.{backend}")
        for backend in ("sqlite", "postgres")
    }
    names = {b: [(m.version, m.name) for m in s] for b, s in streams.items()}
    assert names["sqlite"] == names["postgres"]
    shared = {b: [m.name for m in s if m.shared] for b, s in streams.items()}
    assert shared["sqlite"] == shared["postgres"] and shared["sqlite"]
