"""The PostgreSQL backend (psycopg 3 and its connection pool): many processes on many hosts
share one broker database with the guarantees of the SQLite default.

Same shape as SQLite's: a RECEIVE writes nothing; every change of a transaction is written at
commit in one database transaction. Here:

- **Conversation-group locks** are session-level advisory locks
  (``pg_try_advisory_lock``), keyed by a 64-bit hash of the database, schema and group id:
  taken without waiting, so a RECEIVE never blocks on a locked group and never gets one another
  session holds; released when the transaction ends, and by the server when a session dies
  (a killed reader's group is free at once).
- **Commits run in parallel**, on every session of every process: each re-applies its
  operations to fresh rows, locking what it reads (the endpoints of its conversations, in
  ``endpoint_id`` order; the ``queue_groups`` rows of the groups it touches, in (queue, group)
  order), so no two commits write the same row from stale reads, and the commits of SEND,
  RECEIVE and replies do not deadlock each other. Where two still can (the timer's and the
  transmission queue's passes lock rows one at a time; the application's own SQL), PostgreSQL
  rolls one back: :class:`~servicebroker.errors.DeadlockError` (the background passes try
  again on the next tick).
  Only catalog changes are exclusive: a transaction-level advisory lock that write transactions
  hold shared and a CREATE/ALTER/DROP holds alone.
- **Order across commits is per queue**: a commit that puts messages on a queue locks the
  queue's ``queue_positions`` row first, draws the messages' ``queuing_order`` (a sequence)
  while it holds it, and records the highest in that row. So on each queue ``queuing_order``
  is commit order, and ``last_order`` is a watermark (every committed message at most it,
  every later one above): what a RECEIVE in a transaction holding many groups, and a reader
  paging a queue by ``queuing_order``, rely on. Commits on different queues never wait for
  each other, and commits that only receive never lock a queue.
- **Wake-ups** across processes: every commit sends ``NOTIFY`` on the database's channel,
  naming the wait keys it concerns (queues that got messages or had groups released, lock
  waiters; ``*`` for catalog changes); a waiting RECEIVE on one of them wakes as soon as it
  arrives (one ``LISTEN`` connection per broker), no polling of tables.
- **Activity** (waiting sessions, last empty RECEIVE, last RECEIVE: ACT-3, ACT-5b) lives in two
  unlogged tables; a waiting count belongs to a session and is ignored once that session ends.
- **Leadership**: one session per database holds the leader advisory lock; only its broker runs
  the timer and the queue monitors.

- **Failures**: every psycopg call goes through a :class:`~.session.Session`, so a lost
  connection, a server shutting down, a full disk reach the caller as a
  :class:`~servicebroker.errors.StorageError` subclass naming the database (never its password)
  and saying whether the transaction rolled back or, lost during COMMIT, has an unknown
  outcome. A lost session is closed, never pooled again, and the pool's other idle sessions are
  checked at once; a caller waiting for a session while the server is down gets
  :class:`~servicebroker.errors.DatabaseUnavailableError` as soon as the pool fails to connect,
  not after the busy time-out.

URLs are libpq's: ``postgresql://user@host:5432/dbname`` with any libpq parameter in the query
string (``?options=-csearch_path%3Dmy_schema`` puts the broker in its own schema).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ...errors import StorageError
from ..failures import Failure, storage_failure
from ..migrations import migrate, schema_version
from ..sessions import SessionAccounting, StorageStatistics
from .activity import PostgresActivity
from .connection import PostgresConnection
from .copies import EndpointCopies
from .leader import Leadership
from .session import classify, database_label, has_rows

__all__ = ["PostgresActivity", "PostgresConnection", "PostgresStorage"]

RECONNECT_TIMEOUT = 0.5
"""Seconds the pool retries one failed connection attempt before giving it up. Kept short: the
next request starts a new attempt at once anyway, and a replacement still retrying in the
background when the server comes back would add to the one that request opens — the pool
would grow by a session with every outage."""
POOL_WAIT_SLICE = 0.25
"""Real seconds a caller waits for a pooled session between asking the server whether it takes
new sessions at all (the server is down: say so at once rather than after the busy time-out);
the server is asked at most once per slice per storage."""


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - the extra is part of dev
        raise StorageError(
            "the PostgreSQL backend needs psycopg 3: pip install 'servicebroker[postgres]'"
        ) from exc
    return psycopg, psycopg_pool


def _key(namespace: bytes, kind: bytes, value: bytes = b"") -> int:
    """A signed 64-bit advisory-lock key for ``kind``/``value`` in this broker database."""
    digest = hashlib.blake2b(namespace + b"\0" + kind + b"\0" + value, digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


_NOTIFY_KEYS_MAX = 7000
"""Characters of wait keys a NOTIFY names at most (its payload holds 8,000 bytes)."""


def _configure(conn: Any) -> None:
    """Each pooled connection is in autocommit mode (transactions are explicit) and at READ
    COMMITTED, whatever the server's or the URL's default: a statement must see what committed
    before it began — ``servicebroker_receive`` reads a group's messages after taking its lock,
    and under REPEATABLE READ it would read rows the group's last holder had deleted."""
    conn.autocommit = True
    conn.execute("SET default_transaction_isolation TO 'read committed'")


def _rows(conn: Any) -> Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]:
    """A function running one statement on the psycopg session ``conn`` and returning its rows
    (``[]`` for a statement without result)."""

    def query(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cur = conn.execute(sql, params)
        return list(cur.fetchall()) if has_rows(cur) else []

    return query


class PostgresStorage:
    """A PostgreSQL database (or schema) opened for the broker.

    Args:
        url: a libpq URL, ``postgresql://…`` or ``postgres://…``.
        busy_timeout: seconds a statement waits for a lock (default 60).
        poll_interval: seconds the change listener waits for a notification at a time
            (default 0.5; notifications wake it at once).
        pool_size: the most sessions this process opens for transactions (default 64).

    Raises:
        StorageError: psycopg is missing, or the schema is newer than this version of
            servicebroker knows.
        DatabaseUnavailableError: the server cannot be reached.
    """

    paramstyle = "format"
    """The placeholder style of ``tx.execute`` here: ``%s`` (psycopg)."""

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float = 60.0,
        poll_interval: float = 0.5,
        pool_size: int = 64,
    ) -> None:
        psycopg, psycopg_pool = _psycopg()
        self.url = url
        self.database = database_label(url)
        """The database as error messages name it (with its schema once known; no password)."""
        self.sessions = SessionAccounting()
        self.busy_timeout = float(busy_timeout)
        self.poll_interval = float(poll_interval)
        self.token = uuid.uuid4().hex
        self._closed = False
        self._listeners: list[Any] = []
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                database, schema = conn.execute(
                    "SELECT current_database(), current_schema()"
                ).fetchone()
                if schema is None:
                    raise StorageError(
                        f"{self.database}: no schema to create the broker in (search_path names "
                        f"none that exists)",
                        database=self.database,
                    )
                self.namespace = f"{database}.{schema}".encode()
                self.database_name = str(database)
                self.database = database_label(url, schema)
                self._migrate(conn)
        except psycopg.Error as exc:
            raise self.sessions.failed(
                storage_failure(
                    classify(exc),
                    database=self.database,
                    detail=f"cannot open the PostgreSQL broker: {exc}",
                    opening=True,
                )
            ) from exc
        self.writer_key = _key(self.namespace, b"writer")
        self.lock_prefix = self.namespace.decode() + "/group/"
        """Group lock keys are hashtextextended(lock_prefix || hex(group id), 0), computed by
        the server so that reading an endpoint and locking its group is one round trip."""
        self.copies = EndpointCopies()
        """The endpoints as this process's last commits left them: a commit over them writes
        without reading them first, checked by the server (:mod:`.copies`)."""
        self.channel = "servicebroker_" + hashlib.blake2b(self.namespace, digest_size=8).hexdigest()
        timeout = f"SELECT set_config('lock_timeout', '{int(self.busy_timeout * 1000)}ms', true)"
        self.begin_write_sql = (
            "BEGIN",
            f"{timeout}, pg_advisory_xact_lock_shared({self.writer_key})",
        )
        self.begin_exclusive_sql = ("BEGIN", f"{timeout}, pg_advisory_xact_lock({self.writer_key})")

        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            configure=_configure,
            open=True,
            name="servicebroker",
            reconnect_timeout=RECONNECT_TIMEOUT,
        )
        self._probe_lock = threading.Lock()
        self._probed_at = float("-inf")
        self._probe_problem: str | None = None
        self._suspects = 0
        self.activity = PostgresActivity(url, self.database, self.sessions)
        self._leadership = Leadership(url, _key(self.namespace, b"leader"))

    def _migrate(self, conn: Any) -> None:
        """Apply the missing migrations (:func:`~servicebroker.storage.migrations.migrate`) in
        one transaction holding this database's migration advisory lock (other processes
        opening the database wait for it).

        Raises:
            StorageError: the schema is newer than this servicebroker knows.
        """
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_key(self.namespace, b"migrations"),))
            migrate(
                __name__,
                query=_rows(conn),
                run_script=lambda script: conn.execute(script.encode()),  # several statements
                paramstyle=self.paramstyle,
                where=self.database,
            )
            conn.execute("COMMIT")
        except BaseException:
            if not conn.broken:
                conn.execute("ROLLBACK")
            raise

    def notify_sql(self, wake: Collection[int] | None) -> str:
        """``SELECT pg_notify(channel, 'token|keys')`` for the wait keys ``wake`` (``*``: all).
        Built as text (the channel, token and integer keys are this storage's own), so it can
        share a round trip with COMMIT. Keys that would pass PostgreSQL's 8,000-byte payload
        limit wake everyone instead: the NOTIFY runs after COMMIT, where it must not fail."""
        keys = "*" if wake is None else ",".join(str(int(k)) for k in sorted(wake))
        if len(keys) > _NOTIFY_KEYS_MAX:
            keys = "*"
        return f"SELECT pg_notify('{self.channel}', '{self.token}|{keys}')"

    def schema_version(self) -> int:
        """The highest migration applied.

        Raises:
            StorageError: the database failed (a subclass).
        """
        psycopg, psycopg_pool = _psycopg()
        try:
            with self._pool.connection(timeout=self.busy_timeout) as conn:
                return schema_version(_rows(conn))
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise self._failure(exc, "reading the schema version: ") from exc

    def watch_changes(self) -> Callable[[float], bool | set[int]]:
        """A function that waits up to ``timeout`` seconds for other processes' commits (a
        ``NOTIFY`` on this database's channel from a broker other than this one) and returns
        the wait keys they concern (True: all; False: none came). It returns as soon as one
        arrives: waiting statements wake at once, and only those the commit concerns. A lost
        listening session is opened again on the next call, which then wakes everyone (what
        happened meanwhile is unknown).

        Raises (the function too):
            DatabaseUnavailableError: the server cannot be reached (the caller waits and asks
                again).
        """
        psycopg, _ = _psycopg()
        lock = threading.Lock()
        session: list[Any] = []

        def listen() -> Any:
            conn = None
            try:
                conn = psycopg.connect(self.url, autocommit=True)
                conn.execute(f"LISTEN {self.channel}")
            except psycopg.Error as exc:
                if conn is not None:
                    conn.close()
                raise self._failure(exc, "listening for other processes' commits: ") from exc
            self._listeners.append(conn)
            return conn

        session.append(listen())

        def changed(timeout: float) -> bool | set[int]:
            with lock:
                if self._closed:
                    return False
                conn = session[0]
                if conn.closed or conn.broken:
                    conn.close()
                    with contextlib.suppress(ValueError):
                        self._listeners.remove(conn)
                    session[0] = listen()  # raises while the server is away: the caller waits
                    return True
                keys: set[int] = set()
                everyone = False
                try:
                    notes = [*conn.notifies(timeout=timeout, stop_after=1)]
                    notes += conn.notifies(timeout=0)
                except psycopg.Error as exc:
                    raise self._failure(exc, "listening for other processes' commits: ") from exc
                for note in notes:
                    token, _, wake = note.payload.partition("|")
                    if token == self.token:
                        continue
                    if wake == "*" or not wake:
                        everyone = True
                    else:
                        keys.update(int(k) for k in wake.split(","))
                return True if everyone else keys or False

        return changed

    def try_lead(self) -> bool:
        """Hold (or try to take) this database's leader lock; True while this storage's broker
        is the leader (see :class:`~.leader.Leadership`)."""
        return not self._closed and self._leadership.try_lead()

    def resign(self) -> None:
        """Give leadership up (another storage's next :meth:`try_lead` has it at once)."""
        self._leadership.resign()

    def _failure(self, exc: BaseException, what: str = "") -> StorageError:
        """The error for psycopg's ``exc`` on one of this storage's own sessions, counted."""
        return self.sessions.failed(
            storage_failure(classify(exc), database=self.database, detail=f"{what}{exc}")
        )

    def connect(self) -> PostgresConnection:
        """A session from the pool for one broker transaction; give it back with
        :meth:`release`.

        While it waits for a free session that this process's own transactions do not all
        hold, it asks the server for a new one (at most once per :data:`POOL_WAIT_SLICE`
        seconds per storage): a server that refuses or is down is
        :class:`DatabaseUnavailableError` then, not "no session free" after the busy time-out.

        Raises:
            StorageError: the storage is closed or no session came within the busy time-out.
            DatabaseUnavailableError: the server cannot be reached.
        """
        if self._closed:
            raise StorageError(f"the storage {self.database} is closed", database=self.database)
        _, psycopg_pool = _psycopg()
        deadline = time.monotonic() + self.busy_timeout
        while True:
            wait = min(POOL_WAIT_SLICE, max(deadline - time.monotonic(), 0.001))
            try:
                conn = self._pool.getconn(timeout=wait)
                if self._still_alive(conn):
                    break
                continue
            except psycopg_pool.PoolTimeout as exc:
                if self.sessions.in_use < self._pool.max_size:  # not exhausted by our own
                    self._check_server()
                if time.monotonic() >= deadline:
                    raise StorageError(
                        f"{self.database}: no session free within {self.busy_timeout:g} s "
                        f"(pool of {self._pool.max_size}); raise pool_size",
                        database=self.database,
                    ) from exc
            except psycopg_pool.PoolClosed as exc:
                raise StorageError(
                    f"the storage {self.database} is closed", database=self.database
                ) from exc
        self.sessions.handed_out()
        return PostgresConnection(self, conn)

    def _still_alive(self, conn: Any) -> bool:
        """After a session was found lost, the idle ones that were pooled then may be lost too
        (a server restart takes them all): each of them is tried (one empty query) as it is
        handed out, and a dead one goes back to the pool, which discards it. False for a dead
        one."""
        if self._suspects <= 0:  # the common case, read without the lock
            return True
        with self._probe_lock:
            if self._suspects <= 0:
                return True
            self._suspects -= 1
        psycopg, _ = _psycopg()
        try:
            conn.execute("")
            return True
        except psycopg.Error:
            self._pool.putconn(conn)
            return False

    def _check_server(self) -> None:
        """Raise :class:`DatabaseUnavailableError` when the server refuses a new connection
        because it is down, shutting down or starting (not when it has too many: those come
        back); asks the server at most once per :data:`POOL_WAIT_SLICE` seconds, callers in
        between get the last answer."""
        psycopg, _ = _psycopg()
        with self._probe_lock:
            now = time.monotonic()
            if now - self._probed_at >= POOL_WAIT_SLICE:
                self._probed_at = now
                self._probe_problem = None
                try:
                    psycopg.connect(self.url, autocommit=True, connect_timeout=5).close()
                except psycopg.Error as exc:
                    if classify(exc) is Failure.UNAVAILABLE and exc.sqlstate != "53300":
                        self._probe_problem = f"no new session: {exc}"
            problem = self._probe_problem
        if problem is not None:
            raise self.sessions.failed(
                storage_failure(
                    Failure.UNAVAILABLE, database=self.database, detail=problem, opening=True
                )
            )

    @contextmanager
    def connection(self) -> Iterator[PostgresConnection]:
        """A pooled session for the ``with`` block, released (rolled back, unlocked) after."""
        conn = self.connect()
        try:
            yield conn
        finally:
            self.release(conn)

    def release(self, conn: Any) -> None:
        """Take a session back: roll back, release its locks and return it to the pool (a lost
        one is closed, and the sessions idle in the pool now are tried as they are handed out:
        after a server restart they are all lost). Never raises."""
        assert isinstance(conn, PostgresConnection)
        self.sessions.given_back()
        raw = conn.detach()
        if conn.lost:
            idle = int(self._pool.get_stats().get("pool_available", 0))
            with self._probe_lock:
                self._suspects = max(self._suspects, idle)
        try:
            self._pool.putconn(raw)
        except Exception:  # the pool closed meanwhile: the session just goes
            raw.close()

    def statistics(self) -> StorageStatistics:
        """The sessions handed out and pooled (psycopg_pool's own figures for the idle and
        waiting), and the failures seen since open."""
        pool = self._pool.get_stats()
        return StorageStatistics(
            backend="postgresql",
            database=self.database,
            sessions_in_use=self.sessions.in_use,
            sessions_idle=int(pool.get("pool_available", 0)),
            max_sessions=self._pool.max_size,
            requests_waiting=int(pool.get("requests_waiting", 0)),
            failures=self.sessions.failures,
            last_failure=self.sessions.last_failure,
            commits_from_copies=self.sessions.commits_from_copies,
            copies_out_of_date=self.sessions.copies_out_of_date,
        )

    def close(self) -> None:
        """Close the pool, the listeners, the leader and activity sessions."""
        if self._closed:
            return
        self._closed = True
        self.resign()
        for listener in self._listeners:
            listener.close()
        self.activity.close()
        self._pool.close()
