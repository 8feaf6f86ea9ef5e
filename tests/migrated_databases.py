"""Migrated broker databases for the tests, made once per test process and handed out fresh.

Opening a broker on an empty database runs the whole migration stream: on PostgreSQL that is
about 0.3 s of the server's and client's time for the schema, and dropping the schema after the
test another 0.2 s; the suite opens some 700 of them. So a test that only needs *a new broker
database* (the ``url`` fixture) gets one that is already migrated:

- **SQLite**: a copy of a template file migrated once per process, with its own
  ``service_broker_guid`` (a fresh database's is random).
- **PostgreSQL**: a schema from this process's pool (and a T-SQL instance's ``master``, renamed
  to the instance's name for the test). A schema given back after a test is put
  back as the migration left it — every table's rows as right after the migrations (``COPY``),
  sequences at their starting values, a new ``service_broker_guid`` — in one transaction, only
  when its definition (tables, columns, functions, triggers, constraints, types) is still the
  migrated one; any other schema (a test changed it, or its rows are still locked) is dropped.

Tests that need an *empty* database (the migration tests, a schema made by an old version) use
``conftest.new_url`` as before.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servicebroker import Broker

__all__ = ["PostgresSchemas", "SqliteTemplate"]

GUID = "UPDATE broker_settings SET value = {} WHERE name = 'service_broker_guid'"

DEFINITION = """
SELECT md5(coalesce(string_agg(item, ',' ORDER BY item), '')) FROM (
    SELECT 'c:' || c.relname || ':' || c.relkind::text FROM pg_class c
     WHERE c.relnamespace = %(s)s::text::regnamespace
    UNION ALL
    SELECT 'a:' || c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod)
           || ':' || a.attnotnull::text || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE c.relnamespace = %(s)s::text::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'p:' || p.proname || ':' || md5(p.prosrc) FROM pg_proc p
     WHERE p.pronamespace = %(s)s::text::regnamespace
    UNION ALL
    SELECT 't:' || t.tgname || ':' || t.tgenabled::text || ':' || md5(pg_get_triggerdef(t.oid))
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE c.relnamespace = %(s)s::text::regnamespace
    UNION ALL
    SELECT 'k:' || conname || ':' || md5(pg_get_constraintdef(oid)) FROM pg_constraint
     WHERE connamespace = %(s)s::text::regnamespace
    UNION ALL
    SELECT 'i:' || md5(pg_get_indexdef(i.indexrelid)) FROM pg_index i
      JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = %(s)s::text::regnamespace
    UNION ALL
    SELECT 'y:' || typname FROM pg_type WHERE typnamespace = %(s)s::text::regnamespace
) AS items(item)
"""
"""One digest of everything a schema defines (not its rows): equal digests, same schema."""


class SqliteTemplate:
    """A broker SQLite file migrated once; :meth:`copy` makes a fresh broker database of it."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "template.db"
        Broker.open(str(self.path)).close()
        with sqlite3.connect(self.path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def copy(self, folder: Path, name: str = "broker.db") -> str:
        """A new migrated broker database ``folder/name`` with its own broker GUID."""
        target = folder / name
        shutil.copyfile(self.path, target)
        db = sqlite3.connect(target)
        try:
            with db:
                db.execute(GUID.format("?"), (str(uuid.uuid4()),))
        finally:
            db.close()
        return str(target)


@dataclass
class _Kind:
    """What a kind of pooled schema holds right after it is made: its definition's digest,
    each table's rows (``COPY`` text) and its sequences (name, start, last value)."""

    definition: str
    rows: dict[str, bytes]
    sequences: list[tuple[str, Any, Any]]
    free: list[str] = field(default_factory=list)


class PostgresSchemas:
    """This process's pool of migrated schemas on the test server at ``server`` (a libpq URL),
    of two kinds: a broker's (:meth:`take`) and a T-SQL instance's ``master`` (:meth:`master`).

    :meth:`give_back` puts one back as new, or drops it; :meth:`close` drops the pool."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._ours: dict[str, str] = {}  # schema -> its kind
        self._kinds: dict[str, _Kind] = {}
        self._named: dict[str, str] = {}  # a master's name while handed out -> its pool name
        self._comment = ""  # a master schema's comment, {name} for the instance's name

    def url(self, schema: str) -> str:
        sep = "&" if "?" in self.server else "?"
        return f"{self.server}{sep}options=-csearch_path%3D{schema}"

    @contextmanager
    def _session(self) -> Iterator[Any]:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            yield conn

    def take(self) -> str:
        """The URL of a migrated broker schema of this pool (made now when none is free)."""
        kind = self._kinds.get("broker")
        if kind is not None and kind.free:
            return self.url(kind.free.pop())
        schema = f"sbtest_{uuid.uuid4().hex[:12]}"
        with self._session() as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        self._ours[schema] = "broker"
        Broker.open(self.url(schema)).close()
        if kind is None:
            self._kinds["broker"] = self._remember(schema)
        return self.url(schema)

    def master(self, location: str) -> None:
        """Give the T-SQL instance at ``location`` (``…?instance=NAME``, not made yet) a
        ``master`` from this pool, as :meth:`servicebroker.Instance.open` would make it; it
        comes back with :meth:`give_back_master`."""
        from psycopg import sql

        from servicebroker import Instance

        name = location.rsplit("instance=", 1)[1]
        kind = self._kinds.get("master")
        if kind is not None and kind.free:
            schema = kind.free.pop()
        else:  # an instance of the pool's own makes its master; the pool keeps the schema
            schema = f"sbtest_{uuid.uuid4().hex[:12]}"
            maker = f"m{schema}"
            with Instance.open(location.replace(f"instance={name}", f"instance={maker}")) as made:
                # the tables a session's first statement and sys.databases make, made
                made.execute("SELECT name FROM sys.databases")
            with self._session() as conn:
                comment = conn.execute(
                    f"SELECT obj_description('sb_{maker}_master'::regnamespace, 'pg_namespace')"
                ).fetchone()[0]
                self._comment = str(comment).replace(maker, "{name}")  # as Instance writes it
                conn.execute(f"ALTER SCHEMA sb_{maker}_master RENAME TO {schema}")
            self._ours[schema] = "master"
            if kind is None:
                self._kinds["master"] = self._remember(schema)
        handed = f"sb_{name.casefold()}_master"
        with self._session() as conn:
            conn.execute(f"ALTER SCHEMA {schema} RENAME TO {handed}")
            comment = sql.Literal(self._comment.format(name=name))
            conn.execute(
                sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(handed), comment)
            )
        self._named[handed] = schema

    def give_back_master(self, location: str) -> None:
        """Take back the ``master`` :meth:`master` gave the instance at ``location`` (closed)."""
        name = location.rsplit("instance=", 1)[1]
        handed = f"sb_{name.casefold()}_master"
        schema = self._named.pop(handed, None)
        if schema is None:
            return
        try:
            with self._session() as conn:
                conn.execute(f"ALTER SCHEMA {handed} RENAME TO {schema}")
                conn.execute(f"COMMENT ON SCHEMA {schema} IS NULL")
        except Exception:  # dropped by the test (or the server went): nothing to take back
            self._ours.pop(schema, None)
            return
        self.give_back(self.url(schema))

    def _remember(self, schema: str) -> _Kind:
        """What a just-made ``schema`` holds: its definition, rows and sequences."""
        with self._session() as conn:
            definition = conn.execute(DEFINITION, {"s": schema}).fetchone()[0]
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                (schema,),
            ).fetchall()
            rows = {}
            for (table,) in tables:
                with conn.cursor().copy(f"COPY {schema}.{table} TO STDOUT") as copy:
                    rows[table] = b"".join(bytes(chunk) for chunk in copy)
            sequences = conn.execute(
                "SELECT sequencename, start_value, last_value FROM pg_sequences "
                "WHERE schemaname = %s",
                (schema,),
            ).fetchall()
        return _Kind(definition, rows, sequences)

    def give_back(self, url: str) -> None:
        """Put the schema of ``url`` (one :meth:`take` returned) back as it was made, or drop
        it when that cannot be done."""
        schema = url.rsplit("%3D", 1)[1]
        if schema not in self._ours:
            return
        kind = self._kinds[self._ours[schema]]
        try:
            with self._session() as conn:
                if conn.execute(DEFINITION, {"s": schema}).fetchone()[0] != kind.definition:
                    raise LookupError(f"schema {schema} was changed")
                self._reset(conn, schema, kind)
        except Exception:
            self._drop(schema)
            return
        kind.free.append(schema)

    def _reset(self, conn: Any, schema: str, kind: _Kind) -> None:
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '2s'")
            conn.execute("SET LOCAL session_replication_role = replica")  # no triggers, no FKs
            conn.execute("; ".join(f"DELETE FROM {schema}.{table}" for table in kind.rows))
            for table, rows in kind.rows.items():
                if rows:
                    with conn.cursor().copy(f"COPY {schema}.{table} FROM STDIN") as copy:
                        copy.write(rows)
            for name, start, last in kind.sequences:
                conn.execute(
                    "SELECT setval(%s::regclass, %s, %s)",
                    (f"{schema}.{name}", start if last is None else last, last is not None),
                )
            conn.execute(f"SET LOCAL search_path = {schema}")
            conn.execute(GUID.format("gen_random_uuid()::text"))

    def _drop(self, schema: str) -> None:
        self._ours.pop(schema, None)
        with self._session() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def close(self) -> None:
        """Drop every schema of the pool."""
        for schema in list(self._ours):
            self._drop(schema)
        self._kinds.clear()
