"""Databases made before the one migration stream open under it: an SQLite file (recorded 1–14,
the stream's numbers already) and a PostgreSQL schema (recorded 1–11 in PostgreSQL's own old
numbering) keep their data, work, and end up recording the stream's versions and names; the old
scripts and the stream make one schema.

``tests/data/migrations_45d8593.tar.gz`` holds both backends' migration scripts as they were at
commit 45d8593, the last with two numberings (``sqlite/NNNN_*.sql``, ``postgres/NNNN_*.sql``;
made with ``git show 45d8593:src/servicebroker/storage/<backend>/migrations/<file>``), applied
here the way the runner of that commit applied them."""

from __future__ import annotations

import sqlite3
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servicebroker import Broker, StorageError
from servicebroker.storage.migrations import known_migrations
from servicebroker.storage.queries import split_statements

from .conftest import POSTGRES_URL, drop_url, new_url

OLD_SCRIPTS = Path(__file__).parent / "data" / "migrations_45d8593.tar.gz"
OLD_CREATE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
)


def old_migrations(backend: str) -> list[tuple[int, str, str]]:
    """The backend's scripts at 45d8593: (version, file name, script), by version."""
    found = []
    with tarfile.open(OLD_SCRIPTS) as archive:
        for member in archive.getmembers():
            folder, _, name = member.name.partition("/")
            if folder == backend and name.endswith(".sql"):
                data = archive.extractfile(member)
                assert data is not None
                found.append((int(name.partition("_")[0]), name, data.read().decode("utf-8")))
    return sorted(found)


def schema_of(url: str) -> str:
    """The broker schema's name in a test URL (PostgreSQL)."""
    return url.rsplit("%3D", 1)[1]


def build_old(backend: str, url: str) -> list[tuple[int, str]]:
    """Make the database at ``url`` as the code of 45d8593 made it; its records."""
    scripts = old_migrations(backend)
    if backend == "sqlite":
        with sqlite3.connect(url) as c:
            c.execute(OLD_CREATE)
            for version, name, script in scripts:
                for statement in split_statements(script, sqlite3.complete_statement):
                    c.execute(statement)
                c.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, name))
        c.close()
    else:
        import psycopg

        with psycopg.connect(url) as pg:
            pg.execute(OLD_CREATE)
            for version, name, script in scripts:
                pg.execute(script.encode())
                pg.execute("INSERT INTO schema_migrations VALUES (%s, %s)", (version, name))
    return recorded(backend, url)


def recorded(backend: str, url: str) -> list[tuple[int, str]]:
    sql = "SELECT version, name FROM schema_migrations ORDER BY version"
    if backend == "sqlite":
        with sqlite3.connect(url) as c:
            rows = c.execute(sql).fetchall()
        c.close()
    else:
        import psycopg

        with psycopg.connect(url) as pg:
            rows = pg.execute(sql).fetchall()
    return [(int(v), str(n)) for v, n in rows]


def copy_rows(backend: str, donor: str, url: str) -> None:
    """Put every row of the broker database ``donor`` (but its ``schema_migrations``) into the
    one at ``url``: the data an old database holds, without the code that wrote it. The donor
    is migrated to the newest step, so only the tables and columns the old database has are
    copied (what later steps add is theirs to fill)."""
    if backend == "sqlite":
        with sqlite3.connect(url) as c:
            c.execute("ATTACH DATABASE ? AS donor", (donor,))
            old_tables = {
                r[0] for r in c.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")
            }
            tables = sorted(  # sqlite_sequence last: the inserts before it move it
                (
                    r[0]
                    for r in c.execute("SELECT name FROM donor.sqlite_master WHERE type = 'table'")
                    if r[0] != "schema_migrations" and r[0] in old_tables
                ),
                key=lambda name: name == "sqlite_sequence",
            )
            columns = {
                table: ", ".join(r[1] for r in c.execute(f"PRAGMA main.table_info({table})"))
                for table in tables
            }
            for _ in range(2):  # again: the triggers of the first pass fill queue_groups
                for table in tables:
                    c.execute(f"DELETE FROM main.{table}")
                    c.execute(
                        f"INSERT INTO main.{table} ({columns[table]}) "
                        f"SELECT {columns[table]} FROM donor.{table}"
                    )
            for table in tables:
                assert c.execute(
                    f"SELECT count(*) FROM (SELECT * FROM main.{table} "
                    f"EXCEPT SELECT {columns[table]} FROM donor.{table})"
                ).fetchone() == (0,), table
            c.commit()
            c.execute("DETACH DATABASE donor")
        c.close()
        return
    import psycopg

    old, new = schema_of(url), schema_of(donor)
    with psycopg.connect(POSTGRES_URL) as pg:
        pg.execute("SET session_replication_role = replica")  # no triggers, no key checks
        columns: dict[str, list[str]] = {}
        for table, column in pg.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "JOIN information_schema.tables t "
            "ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = %s AND t.table_type = 'BASE TABLE' "
            "AND c.table_name <> 'schema_migrations' ORDER BY c.table_name, c.ordinal_position",
            (old,),
        ).fetchall():
            columns.setdefault(table, []).append(column)
        donor_tables = {
            r[0]
            for r in pg.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (new,),
            )
        }
        for table in sorted(set(columns) & donor_tables):
            names = ", ".join(columns[table])
            pg.execute(f"DELETE FROM {old}.{table}")
            pg.execute(f"INSERT INTO {old}.{table} ({names}) SELECT {names} FROM {new}.{table}")
        pg.execute("SET session_replication_role = origin")
        for table, column in pg.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = %s",
            (old,),
        ).fetchall():
            sequence = pg.execute(
                "SELECT pg_get_serial_sequence(%s, %s)", (f"{old}.{table}", column)
            ).fetchone()
            if sequence is not None and sequence[0] is not None:
                pg.execute(
                    f"SELECT setval(%s, coalesce((SELECT max({column}) FROM {old}.{table}), 0) "
                    "+ 1, false)",
                    (sequence[0],),
                )


def fill(broker: Broker) -> None:
    """Catalog rows and a message waiting on a queue."""
    broker.create_message_type("Req")
    broker.create_contract("C", {"Req": "INITIATOR"})
    broker.create_queue("iq")
    broker.create_queue("tq")
    broker.create_service("I", queue="iq")
    broker.create_service("T", queue="tq", contracts=["C"])
    with broker.transaction() as tx:
        tx.send(tx.begin_dialog("I", "T", contract="C"), "Req", b"made by the old code")


@pytest.fixture
def url(empty_url: str) -> str:
    """This module's tests build old schemas: their databases start empty."""
    return empty_url


@pytest.fixture
def other_url(backend: str, tmp_path: Path) -> Iterator[str]:
    u = new_url(backend, tmp_path / "donor")
    Path(tmp_path / "donor").mkdir(exist_ok=True)
    yield u
    drop_url(u)


def stream(backend: str) -> list[tuple[int, str]]:
    return [(m.version, m.name) for m in known_migrations(f"servicebroker.storage.{backend}")]


def test_an_old_database_opens_keeps_its_data_and_records_the_stream(
    backend: str, url: str, other_url: str
) -> None:
    with Broker.open(other_url) as donor:
        fill(donor)
    before = build_old(backend, url)
    if backend == "sqlite":  # SQLite's numbers were the stream's
        assert before == stream("sqlite")[:14]
    else:  # PostgreSQL's own: principals were 0008, the stream's 0011
        assert (8, "0008_principals.sql") in before and len(before) == 11
    copy_rows(backend, other_url, url)
    with Broker.open(url) as broker:
        assert recorded(backend, url) == stream(backend)
        assert broker._storage.schema_version() == len(stream(backend))  # type: ignore[attr-defined]
        assert {"iq", "tq"} <= set(broker.catalog.queues)
        with broker.transaction() as tx:
            [kept] = tx.receive("tq")
            assert kept.message_body == b"made by the old code"
        with broker.transaction() as tx:
            tx.send(tx.begin_dialog("I", "T", contract="C"), "Req", b"sent after the upgrade")
        with broker.transaction() as tx:
            assert [m.message_body for m in tx.receive("tq")] == [b"sent after the upgrade"]
        broker.create_queue("q3")  # identities and sequences carry on from the old rows
        broker.create_service("S3", queue="q3", contracts=["C"])
    with Broker.open(url) as broker:  # once: opening again changes nothing
        assert recorded(backend, url) == stream(backend)
        assert "q3" in broker.catalog.queues


def test_an_old_database_newer_than_the_code_is_still_refused(backend: str, url: str) -> None:
    before = build_old(backend, url)
    future = "INSERT INTO schema_migrations (version, name) VALUES (999, '0999_future.sql')"
    if backend == "sqlite":
        with sqlite3.connect(url) as c:
            c.execute(future)
        c.close()
    else:
        import psycopg

        with psycopg.connect(url) as pg:
            pg.execute(future)
    newest = len(stream(backend))
    with pytest.raises(StorageError, match=rf"schema version 999, .*\({newest}\)"):
        Broker.open(url)
    assert recorded(backend, url) == [*before, (999, "0999_future.sql")]  # rolled back


def described_schema(backend: str, url: str) -> dict[str, Any]:
    """Everything of the database's schema but ``schema_migrations``' rows: each table's columns
    with types, defaults, nullability and keys, the indexes, triggers and sequences."""
    if backend == "sqlite":
        with sqlite3.connect(url) as c:
            objects = c.execute(
                "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                "ORDER BY type, name"
            ).fetchall()
            columns = {
                name: c.execute(f"PRAGMA table_xinfo({name})").fetchall()
                for kind, name, _ in objects
                if kind == "table"
            }
            indexes = {
                name: c.execute(f"PRAGMA index_xinfo({name})").fetchall()
                for kind, name, _ in objects
                if kind == "index"
            }
            keys = {
                name: c.execute(f"PRAGMA foreign_key_list({name})").fetchall()
                for kind, name, _ in objects
                if kind == "table"
            }
        c.close()
        return {"objects": objects, "columns": columns, "indexes": indexes, "keys": keys}
    import psycopg

    with psycopg.connect(url) as pg:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return pg.execute(sql).fetchall()

        return {
            "columns": rows(
                "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, "
                "column_default, is_identity, identity_start FROM information_schema.columns "
                "WHERE table_schema = current_schema() ORDER BY 1, 3"
            ),
            "indexes": rows(
                "SELECT tablename, indexname, regexp_replace(indexdef, ' ON \\S+\\.', ' ON ') "
                "FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2"
            ),
            "constraints": rows(
                "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
                "FROM pg_constraint WHERE connamespace = current_schema()::regnamespace "
                "ORDER BY 1, 2"
            ),
            "triggers": rows(
                "SELECT event_object_table, trigger_name, event_manipulation, action_statement "
                "FROM information_schema.triggers WHERE trigger_schema = current_schema() "
                "ORDER BY 1, 2, 3"
            ),
            "functions": rows(
                "SELECT proname, prosrc FROM pg_proc "
                "WHERE pronamespace = current_schema()::regnamespace ORDER BY 1"
            ),
            "sequences": rows(
                "SELECT sequence_name, data_type, start_value FROM information_schema.sequences "
                "WHERE sequence_schema = current_schema() ORDER BY 1"
            ),
        }


def test_the_old_scripts_and_the_stream_make_one_schema(
    backend: str, url: str, other_url: str
) -> None:
    build_old(backend, url)
    Broker.open(url).close()  # the stream's steps the old scripts did not have (0016 on)
    Broker.open(other_url).close()  # the stream, from nothing
    assert described_schema(backend, other_url) == described_schema(backend, url)
