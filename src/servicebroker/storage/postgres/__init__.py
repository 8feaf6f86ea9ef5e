"""The PostgreSQL backend (psycopg 3 and its connection pool): many processes on many hosts
share one broker database with the guarantees of the SQLite default.

Same shape as SQLite's: a RECEIVE writes nothing; every change of a transaction is written at
commit in one database transaction. Here:

- **Conversation-group locks** are session-level advisory locks
  (``pg_try_advisory_lock``), keyed by a 64-bit hash of the database, schema and group id:
  taken without waiting, so a RECEIVE never blocks on a locked group and never gets one another
  session holds; released when the transaction ends, and by the server when a session dies
  (a killed reader's group is free at once).
- **Commits are serialised** by a transaction-level advisory lock, as SQLite's single writer
  serialises them: every commit re-applies its operations to fresh rows, and ``queuing_order``
  (a sequence) is commit order. Commits are short: the work before them (RECEIVE, the
  application's processing) runs in parallel; only ``tx.execute`` holds the lock from its first
  call to the end of the transaction, as on SQLite.
- **Wake-ups** across processes: every commit sends ``NOTIFY`` on the database's channel,
  naming the wait keys it concerns (queues that got messages or had groups released, lock
  waiters; ``*`` for catalog changes); a waiting RECEIVE on one of them wakes as soon as it
  arrives (one ``LISTEN`` connection per broker), no polling of tables.
- **Activity** (waiting sessions, last empty RECEIVE, last RECEIVE: ACT-3, ACT-5b) lives in two
  unlogged tables; a waiting count belongs to a session and is ignored once that session ends.
- **Leadership**: one session per database holds the leader advisory lock; only its broker runs
  the timer and the queue monitors.

URLs are libpq's: ``postgresql://user@host:5432/dbname`` with any libpq parameter in the query
string (``?options=-csearch_path%3Dmy_schema`` puts the broker in its own schema).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ...errors import IntegrityConflict, StorageError
from ..migrations import migrate, schema_version
from ..named import NamedQueryConnection, held_best
from ..queries import load_backend_queries
from ..rows import EndpointRow

__all__ = ["PostgresActivity", "PostgresConnection", "PostgresStorage"]

_Q = load_backend_queries(__name__, "format")


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


def _configure(conn: Any) -> None:
    """Each pooled connection is in autocommit mode: transactions are explicit."""
    conn.autocommit = True


def _rows(conn: Any) -> Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]:
    """A function running one statement on the psycopg session ``conn`` and returning its rows
    (``[]`` for a statement without result)."""

    def query(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cur = conn.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []

    return query


def _flags(params: Sequence[Any]) -> list[Any]:
    """The broker's own parameters with Python bools as the integers 0/1 its schema stores
    (the application's SQL keeps its bools)."""
    return [int(p) if isinstance(p, bool) else p for p in params]


class PostgresConnection(NamedQueryConnection):
    """One broker transaction's PostgreSQL session and its group locks (see
    :class:`servicebroker.storage.base.StorageConnection` for the contract; the operations the
    backends share come from :class:`~servicebroker.storage.named.NamedQueryConnection`)."""

    def __init__(self, storage: PostgresStorage, conn: Any) -> None:
        self._integrity_errors = (_psycopg()[0].errors.IntegrityError,)
        self._storage = storage
        self._conn = conn
        self._in_write = False
        self._held: dict[bytes, int] = {}
        self._drained: dict[bytes, int] = {}
        self.poll_interval = storage.poll_interval

    # -- transaction control -------------------------------------------------------------
    @property
    def in_write(self) -> bool:
        """True between :meth:`begin_write` and the end of that database transaction."""
        return self._in_write

    def begin_write(self) -> None:
        """Start the write transaction and take the database's commit lock (a transaction-level
        advisory lock, waited for up to ``busy_timeout``).

        Raises:
            StorageError: the lock was not had in time.
        """
        if self._in_write:
            return
        psycopg, _ = _psycopg()
        self._in_write = True
        try:
            # one round trip (simple protocol; both values are this storage's own numbers)
            self._conn.execute(self._storage.begin_write_sql.encode())
        except psycopg.errors.LockNotAvailable as exc:
            self.rollback()
            raise StorageError(
                f"no write lock on {self._storage.url} within {self._storage.busy_timeout:g} s"
            ) from exc
        except BaseException:
            self.rollback()
            raise

    def commit(self, wake: Collection[int] | None = None) -> None:
        """Commit the write transaction, if any, and NOTIFY the listening brokers of the wait
        keys in ``wake`` (None: all); the group locks go in the same round trip, just after
        the commit (the transaction is over)."""
        if self._in_write:
            notify = self._storage.notify_sql(wake)
            try:
                if self._held:
                    self._conn.execute(
                        f"{notify}; COMMIT; SELECT pg_advisory_unlock_all(); {notify}".encode()
                    )
                    self._held.clear()
                    self._drained.clear()
                else:
                    self._conn.execute(f"{notify}; COMMIT".encode())
            except BaseException:
                self._safe_rollback()
                raise
            finally:
                self._in_write = False

    def rollback(self) -> None:
        """Roll the write transaction back, if any."""
        if self._in_write:
            try:
                self._safe_rollback()
            finally:
                self._in_write = False

    def _safe_rollback(self) -> None:
        if not self._conn.closed:
            self._conn.execute("ROLLBACK")

    def execute_app(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run the application's SQL (psycopg placeholders ``%s``) inside this transaction's
        write transaction.

        Raises:
            IntegrityConflict: a constraint refused the statement; the transaction must be
                rolled back.
        """
        psycopg, _ = _psycopg()
        self.begin_write()
        try:
            cur = self._conn.execute(sql, params or None)
        except psycopg.errors.IntegrityError as exc:
            raise IntegrityConflict(f"the application's SQL was refused: {exc}") from exc
        return cur.fetchall() if cur.description else []

    def executemany_app(
        self, sql: str, seq_of_params: Iterable[Sequence[Any] | dict[str, Any]]
    ) -> None:
        """Run the application's statement once per parameter set, in the write transaction."""
        psycopg, _ = _psycopg()
        self.begin_write()
        try:
            with self._conn.cursor() as cur:
                cur.executemany(sql, list(seq_of_params))
        except psycopg.errors.IntegrityError as exc:
            raise IntegrityConflict(f"the application's SQL was refused: {exc}") from exc

    def detach(self) -> Any:
        """End this connection's use — roll back, release its group locks (a broken session is
        closed instead) — and return its psycopg session, for the pool to take back."""
        try:
            self.rollback()
            self.release_locks()
        except Exception:
            self._conn.close()  # broken: the pool discards it
        return self._conn

    # -- helpers -------------------------------------------------------------------------
    def _one(self, name: str, params: Sequence[Any] = ()) -> Any:
        cur = self._conn.execute(_Q[name], _flags(params))
        row = cur.fetchone() if cur.description else None
        return None if row is None else row[0]

    def _all(self, name: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self._conn.execute(_Q[name], _flags(params)).fetchall())

    def _run(self, name: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(_Q[name], _flags(params))

    def _many(self, name: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:  # psycopg pipelines executemany: one round trip
            cur.executemany(_Q[name], [_flags(r) for r in rows])

    def _limit(self, n: int) -> int | None:
        return None if n < 0 else n  # SQLite's LIMIT -1 is PostgreSQL's LIMIT NULL

    # -- catalog -------------------------------------------------------------------------
    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One repeatable-read snapshot (unless the write transaction is open)."""
        started = not self._in_write
        if started:
            self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield
        finally:
            if started:
                self._conn.execute("COMMIT")

    # -- endpoints -----------------------------------------------------------------------
    def get_endpoint_and_lock(self, handle: bytes) -> tuple[EndpointRow | None, bool]:
        """The endpoint, and whether its group is now locked by this session: one round trip
        (the advisory-lock key is computed by the server, as :meth:`try_lock_group` does)."""
        row = self._conn.execute(
            _Q["get_endpoint_and_lock"],
            (list(self._held.values()), self._storage.lock_prefix, handle),
        ).fetchone()
        if row is None:
            return None, False
        endpoint = EndpointRow(*row[:-2])
        key, locked = int(row[-2]), bool(row[-1])
        if locked:
            self._held.setdefault(endpoint.conversation_group_id, key)
        return endpoint, locked

    def get_conversations(self, conversation_ids: Sequence[bytes]) -> list[EndpointRow]:
        """Every endpoint of the given conversations, in one query."""
        if not conversation_ids:
            return []
        return [EndpointRow(*r) for r in self._all("get_conversations", (list(conversation_ids),))]

    # -- queues --------------------------------------------------------------------------
    def finish_received(self, queuing_orders: Iterable[int], *, retain: bool) -> None:
        """Delete received messages, or mark them status 0 when the queue retains (RCV-3)."""
        self._run("retain_received" if retain else "delete_received", (list(queuing_orders),))

    # -- transmission queue --------------------------------------------------------------
    # -- conversation-group locks --------------------------------------------------------
    def try_lock_group(self, group_id: bytes) -> bool:
        """Lock a group for this transaction without waiting; False if another holds it."""
        group_id = bytes(group_id)
        if group_id in self._held:
            return True
        row = self._conn.execute(
            _Q["try_lock_group"], (self._storage.lock_prefix, group_id)
        ).fetchone()
        if row is not None and row[1]:
            self._held[group_id] = int(row[0])
            return True
        return False

    def held_groups(self) -> frozenset[bytes]:
        """The groups this transaction holds."""
        return frozenset(self._held)

    def unlock_group(self, group_id: bytes) -> None:
        """Release one group this transaction locked but did not use."""
        key = self._held.pop(bytes(group_id), None)
        if key is not None:
            self._run("advisory_unlock", (key,))  # key: as locked

    def lock_next_group(
        self,
        queue_id: int,
        skip: set[int],
        *,
        exclude_held: bool = False,
        known_locked: set[bytes] | None = None,
    ) -> bytes | None:
        """Lock the highest-priority group of the queue that has a ready message not in
        ``skip`` and that no other session holds (PRI-12, PRI-13, RCV-2, RCV-5); see the
        SQLite backend for the rules. Groups are walked through ``queue_groups_next``, each
        tried with ``pg_try_advisory_lock`` in the statement that finds it (one round trip
        per group tried): never waiting, never a group another holds."""
        best: tuple[int, int, bytes] | None = None
        if self._held and not exclude_held:
            skipped = list(skip)
            best = held_best(
                self._held,
                self._drained,
                lambda: int(self._one("arrival_watermark")),  # committed rows only
                lambda g: self._conn.execute(
                    _Q["held_group_head"], (g, queue_id, skipped)
                ).fetchone(),
                lambda after: {
                    bytes(r[0]) for r in self._all("groups_arrived_since", (after, queue_id))
                },
            )
        locked = known_locked if known_locked is not None else set()
        excluded = [*self._held, *locked]
        while True:  # the first group not excluded, tried in the same round trip
            row = self._conn.execute(
                _Q["lock_first_candidate"], (self._storage.lock_prefix, queue_id, excluded)
            ).fetchone()
            if row is None:
                return None if best is None else best[2]
            group_id, level, head_order, key, got = bytes(row[0]), row[1], row[2], row[3], row[4]
            if best is not None and best[:2] <= (-level, head_order):
                if got:
                    self._run("advisory_unlock", (key,))
                return best[2]
            if got:
                self._held[group_id] = int(key)
                return group_id
            locked.add(group_id)
            excluded.append(group_id)

    def release_locks(self, wake: Collection[int] | None = None) -> None:
        """Release every group lock this transaction holds, and wake the waiters of ``wake``
        (None: all) elsewhere."""
        self._drained.clear()
        if self._held and not self._conn.closed:
            self._held.clear()
            self._conn.execute(
                f"SELECT pg_advisory_unlock_all(); {self._storage.notify_sql(wake)}".encode()
            )
        self._held.clear()


class PostgresActivity:
    """Queue activity every process sees (ACT-3, ACT-5b): see the module docstring.

    Args:
        storage: the storage whose pool serves the activity's own session.
    """

    def __init__(self, storage: PostgresStorage) -> None:
        self._storage = storage
        self._lock = threading.Lock()
        self._conn: Any = None
        self._counts: dict[int, int] = {}
        self._tokens: dict[int, int] = {}
        self._next = 0
        self._noted: dict[tuple[str, int], float] = {}

    def _session(self) -> Any:
        """The activity session, opened again (with this process's waits published again) when
        it was lost."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            psycopg, _ = _psycopg()
            self._conn = psycopg.connect(self._storage.url, autocommit=True)
            for queue_id, count in self._counts.items():
                if count:
                    self._conn.execute(_Q["set_waiting"], (queue_id, count))
        return self._conn

    def _execute(self, name: str, params: Sequence[Any]) -> Any:
        """Run named query ``name`` on the activity session, once more on a new session if the
        old one was lost.

        Raises:
            StorageError: the server cannot be reached.
        """
        psycopg, _ = _psycopg()
        try:
            try:
                return self._session().execute(_Q[name], params)
            except psycopg.OperationalError:
                if self._conn is not None:
                    self._conn.close()
                return self._session().execute(_Q[name], params)
        except psycopg.Error as exc:
            raise StorageError(f"queue activity on {self._storage.url}: {exc}") from exc

    def begin_wait(self, queue_id: int) -> int | None:
        """Count one more session of this process waiting on the queue; returns a token."""
        with self._lock:
            self._counts[queue_id] = self._counts.get(queue_id, 0) + 1
            self._execute("set_waiting", (queue_id, self._counts[queue_id]))
            self._next += 1
            self._tokens[self._next] = queue_id
            return self._next

    def end_wait(self, token: int | None) -> None:
        """The wait of ``token`` ended."""
        if token is None:
            return
        with self._lock:
            queue_id = self._tokens.pop(token, None)
            if queue_id is None:
                return
            self._counts[queue_id] = max(0, self._counts.get(queue_id, 0) - 1)
            self._execute("set_waiting", (queue_id, self._counts[queue_id]))

    def waiting(self, queue_id: int) -> int:
        """Sessions of every live process waiting on the queue now."""
        with self._lock:
            row = self._execute("count_waiting", (queue_id,)).fetchone()
            return int(row[0]) if row else 0

    def _note(self, name: str, queue_id: int, when: float, coarse: float = 0.0) -> None:
        with self._lock:
            if self._noted.get((name, queue_id), float("-inf")) + coarse >= when:
                return
            self._noted[(name, queue_id)] = when
            self._execute(name, (queue_id, when))

    def _last(self, name: str, queue_id: int) -> float | None:
        with self._lock:
            row = self._execute(name, (queue_id,)).fetchone()
            return None if row is None or row[0] is None else float(row[0])

    def note_empty(self, queue_id: int, when: float) -> None:
        """A RECEIVE or GET CONVERSATION GROUP on the queue came back empty at ``when``."""
        self._note("note_empty", queue_id, when)

    def last_empty(self, queue_id: int) -> float | None:
        """The latest empty result on the queue from any process, or None."""
        return self._last("last_empty", queue_id)

    def note_receive(self, queue_id: int, when: float) -> None:
        """A RECEIVE ran on the queue at ``when`` (written at most once per broker-clock second
        per process: it re-arms QUEUE_ACTIVATION notifications, ACT-8, whose spacing is a
        minute, so a write per RECEIVE would only cost a round trip)."""
        self._note("note_receive", queue_id, when, coarse=1.0)

    def last_receive(self, queue_id: int) -> float | None:
        """The latest RECEIVE on the queue from any process, or None."""
        return self._last("last_receive", queue_id)

    def forget(self, queue_id: int) -> None:
        """Drop a queue's activity (DROP QUEUE)."""
        with self._lock:
            self._execute("forget_activity", (queue_id,))
            self._execute("forget_waiters", (queue_id,))
            self._noted = {k: v for k, v in self._noted.items() if k[1] != queue_id}

    def close(self) -> None:
        """Close the activity session (its waiting counts vanish with it)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class PostgresStorage:
    """A PostgreSQL database (or schema) opened for the broker.

    Args:
        url: a libpq URL, ``postgresql://…`` or ``postgres://…``.
        busy_timeout: seconds a commit waits for the commit lock (default 60).
        poll_interval: seconds the change listener waits for a notification at a time
            (default 0.5; notifications wake it at once).
        pool_size: the most sessions this process opens for transactions (default 64).

    Raises:
        StorageError: psycopg is missing, the server cannot be reached, or the schema is newer
            than this version of servicebroker knows.
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
                        f"{url!r}: no schema to create the broker in (search_path names none "
                        f"that exists)"
                    )
                self.namespace = f"{database}.{schema}".encode()
                self.database_name = str(database)
                self._migrate(conn)
        except psycopg.Error as exc:
            raise StorageError(f"cannot open the PostgreSQL broker at {url!r}: {exc}") from exc
        self.writer_key = _key(self.namespace, b"writer")
        self.lock_prefix = self.namespace.decode() + "/group/"
        """Group lock keys are hashtextextended(lock_prefix || hex(group id), 0), computed by
        the server so that reading an endpoint and locking its group is one round trip."""
        self.leader_key = _key(self.namespace, b"leader")
        self.channel = "servicebroker_" + hashlib.blake2b(self.namespace, digest_size=8).hexdigest()
        self.begin_write_sql = (
            f"BEGIN; SELECT set_config('lock_timeout', '{int(self.busy_timeout * 1000)}ms', true), "
            f"pg_advisory_xact_lock({self.writer_key})"
        )

        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            configure=_configure,
            open=True,
            name="servicebroker",
        )
        self.activity = PostgresActivity(self)
        self._leader: Any = None
        self._leading = False
        self._leader_lock = threading.Lock()

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
                where=self.url,
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def notify_sql(self, wake: Collection[int] | None) -> str:
        """``SELECT pg_notify(channel, 'token|keys')`` for the wait keys ``wake`` (``*``: all).
        Built as text (the channel, token and integer keys are this storage's own), so it can
        share a round trip with COMMIT."""
        keys = "*" if wake is None else ",".join(str(int(k)) for k in sorted(wake))
        return f"SELECT pg_notify('{self.channel}', '{self.token}|{keys}')"

    def schema_version(self) -> int:
        """The highest migration applied."""
        with self._pool.connection() as conn:
            return schema_version(_rows(conn))

    def watch_changes(self) -> Callable[[float], bool | set[int]]:
        """A function that waits up to ``timeout`` seconds for other processes' commits (a
        ``NOTIFY`` on this database's channel from a broker other than this one) and returns
        the wait keys they concern (True: all; False: none came). It returns as soon as one
        arrives: waiting statements wake at once, and only those the commit concerns. A lost
        listening session is opened again on the next call, which then wakes everyone (what
        happened meanwhile is unknown)."""
        psycopg, _ = _psycopg()
        lock = threading.Lock()
        session: list[Any] = []

        def listen() -> Any:
            conn = psycopg.connect(self.url, autocommit=True)
            conn.execute(f"LISTEN {self.channel}")
            self._listeners.append(conn)
            return conn

        session.append(listen())

        def changed(timeout: float) -> bool | set[int]:
            with lock:
                if self._closed:
                    return False
                conn = session[0]
                if conn.closed or conn.broken:
                    session[0] = listen()  # raises while the server is away: the caller waits
                    return True
                keys: set[int] = set()
                everyone = False
                notes = [*conn.notifies(timeout=timeout, stop_after=1)]
                notes += conn.notifies(timeout=0)
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
        """Hold (or try to take) this database's leader lock on a session of its own; True
        while this storage's broker is the leader. A dead leader's session ends and another
        takes over on its next try."""
        psycopg, _ = _psycopg()
        with self._leader_lock:
            if self._closed:
                return False
            try:
                if self._leader is None or self._leader.closed:
                    self._leader = psycopg.connect(self.url, autocommit=True)
                    self._leading = False
                if self._leading:
                    self._leader.execute("SELECT 1")  # still connected: still the leader
                    return True
                row = self._leader.execute(_Q["advisory_try_lock"], (self.leader_key,)).fetchone()
                self._leading = bool(row is not None and row[0])
                return self._leading
            except psycopg.Error:
                if self._leader is not None:
                    self._leader.close()
                self._leader, self._leading = None, False
                return False

    def resign(self) -> None:
        """Give leadership up: unlock the leader lock (so another storage's next
        :meth:`try_lead` has it at once, not when the server notices the session ended), then
        close its session."""
        psycopg, _ = _psycopg()
        with self._leader_lock:
            if self._leader is not None:
                if self._leading and not self._leader.closed:
                    # a lost session: the server frees the lock with it
                    with contextlib.suppress(psycopg.Error):
                        self._leader.execute(_Q["advisory_unlock"], (self.leader_key,))
                self._leader.close()
            self._leader, self._leading = None, False

    def connect(self) -> PostgresConnection:
        """A session from the pool for one broker transaction.

        Raises:
            StorageError: the storage is closed or no session came within the busy time-out.
        """
        if self._closed:
            raise StorageError(f"the storage {self.url} is closed")
        _, psycopg_pool = _psycopg()
        try:
            conn = self._pool.getconn(timeout=self.busy_timeout)
        except psycopg_pool.PoolTimeout as exc:
            raise StorageError(
                f"no PostgreSQL session free within {self.busy_timeout:g} s "
                f"(pool of {self._pool.max_size}); raise pool_size"
            ) from exc
        return PostgresConnection(self, conn)

    @contextmanager
    def connection(self) -> Iterator[PostgresConnection]:
        """A pooled session for the ``with`` block, released (rolled back, unlocked) after."""
        conn = self.connect()
        try:
            yield conn
        finally:
            self.release(conn)

    def release(self, conn: Any) -> None:
        """Roll back, release its locks and return the session to the pool."""
        assert isinstance(conn, PostgresConnection)
        self._pool.putconn(conn.detach())

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
