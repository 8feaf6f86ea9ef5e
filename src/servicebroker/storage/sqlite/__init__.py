"""The SQLite backend: one database file in WAL mode, the embedded default.

SQLite has one writer per file, so the broker keeps its writes short: a RECEIVE writes nothing
(its conversation-group lock is an open-file-description lock, see :mod:`.locks`, and what it
received is remembered by the transaction); every change of a transaction (sends, deletions of
received messages, endpoint states, the application's rows written through ``tx.execute``) is
written at commit in one ``BEGIN IMMEDIATE`` transaction. Readers in other processes see new
messages by polling every :attr:`SqliteStorage.poll_interval` seconds (0.05 by default).

Every ``sqlite3`` call goes through a :class:`~.session.Session`, so a full disk, an I/O error or
a read-only file reaches the caller as a :class:`~servicebroker.errors.StorageError` subclass
naming the file; a connection that met an I/O error is closed, never pooled again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ...errors import BrokerError, ConversationError, StorageError
from ..migrations import migrate, schema_version
from ..named import HeldHeads, NamedQueryConnection, held_best
from ..queries import load_backend_queries, split_statements
from ..rows import EndpointRow, MessageRow
from ..sessions import SessionAccounting, StorageStatistics
from .activity import QueueActivity
from .locks import GroupLocks, check_platform
from .session import Session

__all__ = ["SqliteConnection", "SqliteStorage"]

_Q = load_backend_queries(__name__, "qmark")
_IN_MAX = 256


@functools.cache
def _in_list(name: str, size: int) -> str:
    """Named query ``name`` with its ``(?*)`` list of ``size`` placeholders."""
    return _Q[name].replace("(?*)", "(" + ", ".join("?" * size) + ")")


def _in_chunks(values: Sequence[Any]) -> Iterator[tuple[int, list[Any]]]:
    """``values`` in chunks of at most ``_IN_MAX``, each padded (with its last value: an IN
    list ignores repeats) to a power of two, so that few statements are prepared: ``(size,
    chunk)`` pairs."""
    for start in range(0, len(values), _IN_MAX):
        chunk = list(values[start : start + _IN_MAX])
        size = 1 << (len(chunk) - 1).bit_length()
        yield size, chunk + chunk[-1:] * (size - len(chunk))


class SqliteConnection(NamedQueryConnection):
    """One broker transaction's SQLite connection and its group locks (see
    :class:`servicebroker.storage.base.StorageConnection` for the contract; the operations the
    backends share come from :class:`~servicebroker.storage.named.NamedQueryConnection`)."""

    def __init__(
        self,
        conn: Session,
        lock_path: str,
        poll_interval: float,
        writer: threading.Lock,
        busy_timeout: float,
        commits: list[int],
    ) -> None:
        self._conn = conn
        self._locks = GroupLocks(lock_path, conn.database)
        self._heads: dict[int, HeldHeads] = {}  # per queue: a group's head there
        self._hexes: dict[bytes, str] = {}  # a held or locked group's id as hex, for SQL
        self._in_write = False
        self._writer = writer
        self._busy_timeout = busy_timeout
        self._commits = commits
        self.poll_interval = poll_interval

    # -- transaction control -------------------------------------------------------------
    @property
    def in_write(self) -> bool:
        """True between :meth:`begin_write` and the end of that database transaction."""
        return self._in_write

    @property
    def broken(self) -> bool:
        """True once the connection met an I/O error: it is closed on release, never pooled."""
        return self._conn.broken

    def begin_write(self, *, exclusive: bool = False) -> None:
        """Start the write transaction (``BEGIN IMMEDIATE``: takes SQLite's single write lock,
        so every write transaction is ``exclusive`` here).

        Threads of this process first queue on an in-process lock, handed over at once when the
        writer before them ends; only other processes are waited for with SQLite's busy handler
        (up to the busy time-out), whose growing sleeps would otherwise leave the lock idle.

        Raises:
            StorageError: the write lock was not had within the busy time-out, or the
                database failed (a subclass, see :mod:`.session`).
        """
        if self._in_write:
            return
        if not self._writer.acquire(timeout=self._busy_timeout):
            raise StorageError(
                f"{self._conn.database}: no write lock within {self._busy_timeout:g} s (another "
                f"transaction of this process holds it)",
                database=self._conn.database,
            )
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._writer.release()
            raise
        self._in_write = True

    def commit(self, wake: Collection[int] | None = None) -> None:
        """Commit the write transaction, if any (``wake`` is for backends that notify; other
        processes see SQLite's commits by polling).

        Raises:
            StorageError: the commit failed and was rolled back, or (an I/O error during
                COMMIT) its outcome is unknown: see the error's ``outcome``.
        """
        if self._in_write:
            try:
                self._conn.commit()
                self._commits[0] += 1
            except BaseException:
                self._discard()
                raise
            finally:
                self._in_write = False
                self._writer.release()

    def rollback(self) -> None:
        """Roll the write transaction back, if any. Never raises: a ROLLBACK that fails marks
        the connection broken, and closing it on release discards the changes."""
        if self._in_write:
            try:
                self._discard()
            finally:
                self._in_write = False
                self._writer.release()

    def _discard(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except StorageError:
                self._conn.broken = True

    def execute_app(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run the application's SQL (placeholders ``?``) inside this transaction's write
        transaction.

        Raises:
            IntegrityConflict: a constraint refused the statement.
            StorageError: the statement failed (bad SQL, or the database underneath).
            BrokerError: the driver refused the parameters before the statement ran (their
                number, a type it cannot bind): nothing ran, the transaction goes on.
        """
        self.begin_write()
        try:
            return self._conn.execute(sql, params).fetchall()
        except StorageError as exc:
            if isinstance(exc.__cause__, (sqlite3.ProgrammingError, sqlite3.InterfaceError)):
                raise BrokerError(
                    f"tx.execute: the database driver refused the statement's parameters before "
                    f"it ran ({exc.__cause__})"
                ) from None
            raise

    def executemany_app(
        self, sql: str, seq_of_params: Iterable[Sequence[Any] | dict[str, Any]]
    ) -> None:
        """Run the application's statement once per parameter set, in the write transaction."""
        self.begin_write()
        self._conn.executemany(sql, seq_of_params)

    def close(self) -> None:
        """Release locks and close the SQLite connection."""
        self._locks.close()
        self._conn.close()

    # -- helpers -------------------------------------------------------------------------
    def _one(self, name: str, params: Sequence[Any] = ()) -> Any:
        row = self._conn.execute(_Q[name], params).fetchone()
        return None if row is None else row[0]

    def _all(self, name: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._conn.execute(_Q[name], params).fetchall()

    def _run(self, name: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(_Q[name], params)

    def _many(self, name: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(_Q[name], rows)

    # -- catalog -------------------------------------------------------------------------
    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction (unless the write transaction is open)."""
        started = not self._in_write and not self._conn.in_transaction
        if started:
            self._conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            if started:
                self._discard()
            raise
        if started:
            self._conn.execute("COMMIT")

    # -- endpoints -----------------------------------------------------------------------
    def get_endpoint_and_lock(self, handle: bytes) -> tuple[EndpointRow | None, bool]:
        """The endpoint, and whether its group is now locked by this transaction."""
        row = self.get_endpoint(handle)
        return row, row is not None and self._locks.try_lock(row.conversation_group_id)

    def get_endpoints(self, handles: Sequence[bytes]) -> list[EndpointRow]:
        """The endpoints with these handles, one statement per 256 of them."""
        return self._endpoints_in("get_endpoints", handles)

    def get_endpoints_and_lock(self, handles: Sequence[bytes]) -> list[tuple[EndpointRow, bool]]:
        """The endpoints (one statement per 256), each with whether its group is now locked
        by this transaction."""
        try_lock = self._locks.try_lock
        return [(row, try_lock(row.conversation_group_id)) for row in self.get_endpoints(handles)]

    def get_conversations(
        self, conversation_ids: Sequence[bytes], *, for_update: bool = False
    ) -> list[EndpointRow]:
        """Every endpoint of the given conversations, one statement per 256 of them;
        ``for_update`` changes nothing: the single writer holds the database already."""
        return self._endpoints_in("get_conversations", conversation_ids)

    def lock_conversations(
        self, conversation_ids: Sequence[bytes], *, cached: bool = False
    ) -> tuple[list[EndpointRow], bool]:
        """:meth:`get_conversations`, then :meth:`transmission_exists_of` (not remote):
        always read (``cached`` is PostgreSQL's; a read here costs no round trip)."""
        rows = self.get_conversations(conversation_ids, for_update=True)
        return rows, self.transmission_exists_of(remote=False)

    def _endpoints_in(self, name: str, keys: Sequence[bytes]) -> list[EndpointRow]:
        return [
            EndpointRow(*row)
            for size, chunk in _in_chunks(keys)
            for row in self._conn.execute(_in_list(name, size), chunk).fetchall()
        ]

    # -- queues --------------------------------------------------------------------------
    def message_sequence(self, queue_id: int) -> int:
        """The queue's watermark: one counter serves every queue here, since the single
        writer commits one transaction at a time (every queue's order is commit order)."""
        return int(self._one("message_sequence") or 0)

    def lock_queues(self, queue_ids: Collection[int]) -> None:
        """Nothing: the write transaction holds SQLite's single write lock already."""

    def finish_received(
        self, queuing_orders: Iterable[int], *, retain: bool, removed: str | None
    ) -> None:
        """Delete received messages, or mark them status 0 when the queue retains (RCV-3);
        ConversationError(``removed``) when some were not there.

        ``queuing_orders`` come in RECEIVE order; rows go in reverse, so each group's head goes
        last and queue_groups looks up the group's next head once, not once per message."""
        orders = list(queuing_orders)[::-1]
        query = _Q["retain_received" if retain else "delete_received"]
        ended = 0
        for start in range(0, len(orders), 10_000):
            ended += self._conn.execute(
                query, (json.dumps(orders[start : start + 10_000]),)
            ).rowcount
        if removed is not None and ended < len(orders):
            raise ConversationError(removed)

    # -- transmission queue --------------------------------------------------------------
    # -- conversation-group locks --------------------------------------------------------
    def try_lock_group(self, group_id: bytes) -> bool:
        """Lock a group for this transaction without waiting; False if another holds it."""
        return self._locks.try_lock(group_id)

    def held_groups(self) -> frozenset[bytes]:
        """The groups this transaction holds."""
        return frozenset(self._locks.held)

    def unlock_group(self, group_id: bytes) -> None:
        """Release one group this transaction locked but did not use."""
        self._locks.unlock(group_id)

    def locked_groups(self, group_ids: Collection[bytes]) -> frozenset[bytes]:
        """Those of ``group_ids`` a transaction holds (the lock file asked, nothing taken)."""
        return self._locks.others_hold(group_ids)

    def receive_first_group(
        self,
        queue_id: int,
        limit: int,
        *,
        known_locked: set[bytes],
        catalog_version: int | None = None,
    ) -> list[MessageRow] | None:
        """:meth:`lock_next_group`, then :meth:`group_messages` (see the contract): in this
        process, SQLite's statements cost no round trip."""
        if catalog_version is not None and self.catalog_version() != catalog_version:
            return None
        for _ in range(8):
            group = self.lock_next_group(queue_id, {}, known_locked=known_locked)
            if group is None:
                return []
            rows = self.group_messages(group, limit)
            if rows:
                return rows
            self.unlock_group(group)  # read before its last holder committed: empty now
        return []

    def lock_next_group(
        self,
        queue_id: int,
        skip: Mapping[bytes, Collection[int]],
        *,
        exclude_held: bool = False,
        known_locked: set[bytes] | None = None,
    ) -> bytes | None:
        """Lock the highest-priority group of the queue that has a ready message not in
        ``skip`` (per group, the queuing orders this transaction received from it) and is not
        locked by
        another transaction; a group this transaction holds qualifies (RCV-2, PRI-12, PRI-13)
        unless ``exclude_held`` (GET CONVERSATION GROUP, RCV-5). Groups found locked by others are
        added to ``known_locked`` and skipped without asking again. Returns the group id, or None.

        Groups are walked through ``queue_groups_next`` (level, then the queuing order of the
        message RECEIVE would return first), one index entry per group, never the messages of
        groups others hold. A group this transaction holds is ranked by what it has left once
        ``skip`` is taken out (PRI-9)."""
        held = self._locks.held
        best: tuple[int, int, bytes] | None = None  # (-level, head order, group) of a held group
        if held and not exclude_held:

            def head_of(group: bytes) -> Any:
                taken = json.dumps(list(skip.get(group, ())))
                return self._conn.execute(
                    _Q["held_group_head"], (group, queue_id, taken)
                ).fetchone()

            best = held_best(
                held,
                self._heads.setdefault(queue_id, {}),
                lambda: self.message_sequence(queue_id),  # committed inserts only
                head_of,
                lambda after: {
                    bytes(r[0]) for r in self._all("groups_arrived_since", (after, queue_id))
                },
                skip,
            )
        locked = known_locked if known_locked is not None else set()
        if held or locked:  # skipped inside SQLite, not row by row here
            hexes = self._hexes
            excluded = json.dumps(
                [
                    hexes.get(g) or hexes.setdefault(g, bytes(g).hex().upper())
                    for g in (*held, *locked)
                ]
            )
            cur = self._conn.execute(_Q["candidate_groups_excluding"], (queue_id, excluded))
        else:
            cur = self._conn.execute(_Q["candidate_groups"], (queue_id,))
        try:
            for group_id, level, head_order in cur:
                if best is not None and best[:2] <= (-level, head_order):
                    return best[2]
                if group_id in locked or group_id in held:
                    continue
                if self._locks.try_lock(group_id):
                    return bytes(group_id)
                locked.add(group_id)
            return None if best is None else best[2]
        finally:
            cur.close()

    def release_locks(self, wake: Collection[int] | None = None) -> None:
        """Release every group lock this transaction holds (``wake``: as for :meth:`commit`)."""
        self._locks.release_all()
        self._heads.clear()
        self._hexes.clear()


class SqliteStorage:
    """An SQLite database file opened for the broker.

    Args:
        path: the database file (created if missing).
        synchronous: SQLite's ``synchronous`` setting, ``"FULL"`` (default: a committed
            transaction survives power loss) or ``"NORMAL"``.
        busy_timeout: seconds a writer waits for SQLite's write lock (default 60).
        poll_interval: real seconds between checks for changes made by other processes
            (default 0.05).

    Raises:
        StorageError: the platform lacks the lock primitive, or the file's schema is newer than
            this version of servicebroker knows.
    """

    paramstyle = "qmark"
    """The placeholder style of ``tx.execute`` here: ``?`` (sqlite3)."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "FULL",
        busy_timeout: float = 60.0,
        poll_interval: float = 0.05,
    ) -> None:
        check_platform()
        if synchronous not in ("FULL", "NORMAL", "OFF", "EXTRA"):
            raise StorageError(f"unknown SQLite synchronous setting {synchronous!r}")
        self.path = path
        self.url = f"sqlite:///{path}"
        self.database = f"SQLite database {path}"
        """The database as error messages name it."""
        self.sessions = SessionAccounting()
        self.database_name = os.path.splitext(os.path.basename(path))[0] or "servicebroker"
        self.lock_path = f"{path}-sblocks"
        self.poll_interval = poll_interval
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._writer = threading.Lock()
        self.commits = [0]
        self._idle: list[SqliteConnection] = []
        self._watchers: list[Session] = []
        self._pool_lock = threading.Lock()
        self._closed = False
        self._migrate()
        self.activity = QueueActivity(f"{path}-sbactivity", self.database)
        self._leader = GroupLocks(f"{path}-sbleader", self.database)

    def _raw(self) -> Session:
        """A new connection, configured (WAL, ``synchronous``, foreign keys).

        Raises:
            StorageError: the file cannot be opened or is not an SQLite database (a subclass
                for a full disk or an I/O error).
        """
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise Session.opening_failure(exc, self.database, self.sessions) from exc
        session = Session(conn, self.database, self.sessions)
        try:
            session.execute("PRAGMA journal_mode=WAL")
            session.execute(f"PRAGMA synchronous={self._synchronous}")
            session.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            session.close()
            raise
        return session

    def _migrate(self) -> None:
        """Apply the missing migrations (:func:`~servicebroker.storage.migrations.migrate`) in
        one ``BEGIN IMMEDIATE`` transaction: SQLite's write lock keeps other processes out.

        Raises:
            StorageError: the file is not an SQLite database, or its schema is newer.
        """
        conn = self._raw()

        def run_script(script: str) -> None:
            for statement in split_statements(script, sqlite3.complete_statement):
                conn.execute(statement)

        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                migrate(
                    __name__,
                    query=lambda sql, params: conn.execute(sql, params).fetchall(),
                    run_script=run_script,
                    paramstyle=self.paramstyle,
                    where=self.database,
                )
                conn.commit()
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(StorageError):
                        conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def schema_version(self) -> int:
        """The highest migration applied to the file."""
        conn = self._raw()
        try:
            return schema_version(lambda sql, params: conn.execute(sql, params).fetchall())
        finally:
            conn.close()

    def try_lead(self) -> bool:
        """Hold (or try to take) this database's leader lock (an open-file-description lock on
        ``<db>-sbleader``); True while this storage's broker is the leader. The kernel frees it
        when the leader's process dies, and another takes over on its next try."""
        with self._pool_lock:
            return not self._closed and self._leader.try_lock(b"leader")

    def resign(self) -> None:
        """Give leadership up."""
        with self._pool_lock:
            self._leader.release_all()

    def watch_changes(self) -> Callable[[float], bool | set[int]]:
        """A function that waits ``timeout`` seconds, then tells whether another process
        (probably) committed since its last call.

        It reads SQLite's ``PRAGMA data_version`` on a connection of its own. A change while this
        storage committed nothing itself is another process's: True. A change while this process
        committed too is ambiguous (its own commits already woke the right waiters): True at most
        once per 10 poll intervals, so another process's messages are still seen within that.
        Used by one poller thread.
        """
        conn = self._raw()
        lock = threading.Lock()
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
        except StorageError:
            conn.close()
            raise
        state = {"version": version, "own": self.commits[0]}
        last_ambiguous = [time.monotonic()]
        self._watchers.append(conn)

        def changed(timeout: float) -> bool:
            time.sleep(timeout)
            with lock:
                if self._closed:
                    return False
                own = self.commits[0]
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                moved = version != state["version"]
                ours = own != state["own"]
                state["version"], state["own"] = version, own
                if not moved:
                    return False
                if not ours:
                    return True
                now = time.monotonic()
                if now - last_ambiguous[0] >= 10 * self.poll_interval:
                    last_ambiguous[0] = now
                    return True
                return False

        return changed

    def connect(self) -> SqliteConnection:
        """A connection from the pool (or a new one); give it back with :meth:`release`.

        Raises:
            StorageError: the storage is closed, or a new connection cannot be opened.
        """
        with self._pool_lock:
            if self._closed:
                raise StorageError(f"the storage {self.url} is closed", database=self.database)
            if self._idle:
                self.sessions.handed_out()
                return self._idle.pop()
        conn = SqliteConnection(
            self._raw(),
            self.lock_path,
            self.poll_interval,
            self._writer,
            self._busy_timeout,
            self.commits,
        )
        self.sessions.handed_out()
        return conn

    @contextmanager
    def connection(self) -> Iterator[SqliteConnection]:
        """A pooled connection for the ``with`` block, released (rolled back, unlocked) after."""
        conn = self.connect()
        try:
            yield conn
        finally:
            self.release(conn)

    def release(self, conn: Any) -> None:
        """Take a connection back: roll back, release its group locks and pool it — or close
        it when it met an I/O error. Never raises."""
        assert isinstance(conn, SqliteConnection)
        self.sessions.given_back()
        conn.rollback()
        conn.release_locks()
        with self._pool_lock:
            if not self._closed and not conn.broken and len(self._idle) < 16:
                self._idle.append(conn)
                return
        conn.close()

    def statistics(self) -> StorageStatistics:
        """The connections handed out and pooled, and the failures seen since open."""
        with self._pool_lock:
            idle = len(self._idle)
        return StorageStatistics(
            backend="sqlite",
            database=self.database,
            sessions_in_use=self.sessions.in_use,
            sessions_idle=idle,
            max_sessions=None,
            requests_waiting=0,
            failures=self.sessions.failures,
            last_failure=self.sessions.last_failure,
            commits_from_copies=self.sessions.commits_from_copies,
            copies_out_of_date=self.sessions.copies_out_of_date,
        )

    def close(self) -> None:
        """Close every pooled connection."""
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for watcher in self._watchers:
            watcher.close()
        self.activity.close()
        self._leader.close()
