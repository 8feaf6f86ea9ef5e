"""The SQLite backend: one database file in WAL mode, the embedded default.

SQLite has one writer per file, so the broker keeps its writes short: a RECEIVE writes nothing
(its conversation-group lock is an open-file-description lock, see :mod:`.locks`, and what it
received is remembered by the transaction); every change of a transaction (sends, deletions of
received messages, endpoint states, the application's rows written through ``tx.execute``) is
written at commit in one ``BEGIN IMMEDIATE`` transaction. Readers in other processes see new
messages by polling every :attr:`SqliteStorage.poll_interval` seconds (0.05 by default).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

from ...errors import IntegrityConflict, StorageError
from ..base import CatalogRows, EndpointRow, MessageRow, QueueInsert, TransmissionRow, held_best
from ..queries import load_queries, split_statements
from .activity import QueueActivity
from .locks import GroupLocks, check_platform

__all__ = ["SqliteConnection", "SqliteStorage"]

_Q = load_queries(__name__)
_SCHEMA_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
)


def _migrations() -> list[tuple[int, str, str]]:
    folder = resources.files(__name__).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text("utf-8")))
    return sorted(found)


class SqliteConnection:
    """One broker transaction's SQLite connection and its group locks (see
    :class:`servicebroker.storage.base.StorageConnection` for the contract)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        lock_path: str,
        poll_interval: float,
        writer: threading.Lock,
        busy_timeout: float,
        commits: list[int],
    ) -> None:
        self._conn = conn
        self._locks = GroupLocks(lock_path)
        self._drained: dict[bytes, int] = {}
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

    def begin_write(self) -> None:
        """Start the write transaction (``BEGIN IMMEDIATE``: takes SQLite's single write lock).

        Threads of this process first queue on an in-process lock, handed over at once when the
        writer before them ends; only other processes are waited for with SQLite's busy handler
        (up to the busy time-out), whose growing sleeps would otherwise leave the lock idle.

        Raises:
            StorageError: the write lock was not had within the busy time-out.
        """
        if self._in_write:
            return
        if not self._writer.acquire(timeout=self._busy_timeout):
            raise StorageError(
                f"no write lock on the database within {self._busy_timeout:g} s (another "
                f"transaction of this process holds it)"
            )
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._writer.release()
            raise
        self._in_write = True

    def commit(self, wake: Collection[int] | None = None) -> None:
        """Commit the write transaction, if any (``wake`` is for backends that notify; other
        processes see SQLite's commits by polling)."""
        if self._in_write:
            try:
                self._conn.execute("COMMIT")
                self._commits[0] += 1
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            finally:
                self._in_write = False
                self._writer.release()

    def rollback(self) -> None:
        """Roll the write transaction back, if any."""
        if self._in_write:
            try:
                self._conn.execute("ROLLBACK")
            finally:
                self._in_write = False
                self._writer.release()

    def execute_app(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run the application's SQL (placeholders ``?``) inside this transaction's write
        transaction.

        Raises:
            IntegrityConflict: a constraint refused the statement.
        """
        self.begin_write()
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.IntegrityError as exc:
            raise IntegrityConflict(f"the application's SQL was refused: {exc}") from exc

    def executemany_app(
        self, sql: str, seq_of_params: Iterable[Sequence[Any] | dict[str, Any]]
    ) -> None:
        """Run the application's statement once per parameter set, in the write transaction."""
        self.begin_write()
        try:
            self._conn.executemany(sql, seq_of_params)
        except sqlite3.IntegrityError as exc:
            raise IntegrityConflict(f"the application's SQL was refused: {exc}") from exc

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

    # -- catalog -------------------------------------------------------------------------
    def catalog_version(self) -> int:
        """The catalog's version number (bumped by every catalog change)."""
        return int(self._one("get_setting", ("catalog_version",)))

    def load_catalog(self) -> CatalogRows:
        """Every catalog row, read in one read transaction."""
        started = not self._in_write and not self._conn.in_transaction
        if started:
            self._conn.execute("BEGIN")
        try:
            return CatalogRows(
                version=self.catalog_version(),
                message_types=self._all("catalog_message_types"),
                contracts=self._all("catalog_contracts"),
                contract_usages=self._all("catalog_contract_usages"),
                queues=self._all("catalog_queues"),
                services=self._all("catalog_services"),
                service_contracts=self._all("catalog_service_contracts"),
                event_notifications=self._all("catalog_event_notifications"),
                broker_priorities=self._all("catalog_broker_priorities"),
                honor_broker_priority=self._one("get_setting", ("honor_broker_priority",)) == "1",
            )
        finally:
            if started:
                self._conn.execute("COMMIT")

    def catalog_write(self, name: str, params: Sequence[Any]) -> int:
        """Run the catalog statement ``name``; returns the new row id for inserts.

        Raises:
            IntegrityConflict: a constraint refused it.
        """
        try:
            cur = self._conn.execute(_Q[name], params)
        except sqlite3.IntegrityError as exc:
            raise IntegrityConflict(str(exc)) from exc
        return int(cur.lastrowid or 0)

    def catalog_count(self, name: str, params: Sequence[Any]) -> int:
        """Run the counting query ``name`` and return its number."""
        return int(self._one(name, params) or 0)

    def bump_catalog_version(self) -> None:
        """Mark the catalog changed, so every process reloads it."""
        self._conn.execute(_Q["bump_catalog_version"])

    def add_rollback(self, queue_id: int) -> int:
        """Count one more consecutive rolled-back receive on the queue (POI-1); returns it."""
        return int(self._one("add_rollback", (queue_id,)) or 0)

    def reset_rollbacks(self, queue_id: int) -> None:
        """A receive on the queue committed: the run of rollbacks is broken (POI-1)."""
        self._conn.execute(_Q["reset_rollbacks"], (queue_id,))

    def disable_queue(self, queue_id: int, now: float) -> None:
        """Turn the queue's STATUS OFF (POI-1)."""
        self._conn.execute(_Q["disable_queue"], (now, queue_id))
        self.bump_catalog_version()

    # -- endpoints -----------------------------------------------------------------------
    def get_endpoint(self, handle: bytes) -> EndpointRow | None:
        """The endpoint with this conversation handle, or None."""
        row = self._conn.execute(_Q["get_endpoint"], (handle,)).fetchone()
        return None if row is None else EndpointRow(*row)

    def get_endpoint_and_lock(self, handle: bytes) -> tuple[EndpointRow | None, bool]:
        """The endpoint, and whether its group is now locked by this transaction."""
        row = self.get_endpoint(handle)
        return row, row is not None and self._locks.try_lock(row.conversation_group_id)

    def get_far_endpoint(
        self, conversation_id: bytes, far_is_initiator: bool
    ) -> EndpointRow | None:
        """The endpoint of ``conversation_id`` on the given side, or None."""
        row = self._conn.execute(
            _Q["get_far_endpoint"], (conversation_id, int(far_is_initiator))
        ).fetchone()
        return None if row is None else EndpointRow(*row)

    def get_conversation(self, conversation_id: bytes) -> list[EndpointRow]:
        """Both endpoints of a conversation (one, or none, when the other does not exist)."""
        return [EndpointRow(*r) for r in self._all("get_conversation", (conversation_id,))]

    def get_conversations(self, conversation_ids: Sequence[bytes]) -> list[EndpointRow]:
        """Every endpoint of the given conversations (in-process: one indexed read each)."""
        rows: list[EndpointRow] = []
        for conversation_id in conversation_ids:
            rows += self.get_conversation(conversation_id)
        return rows

    def insert_endpoint(self, row: EndpointRow) -> int:
        """Insert an endpoint; returns its ``endpoint_id``."""
        return int(
            self._one(
                "insert_endpoint",
                (
                    row.conversation_handle,
                    row.conversation_id,
                    int(row.is_initiator),
                    row.service_contract_id,
                    row.conversation_group_id,
                    row.service_id,
                    row.queue_id,
                    row.far_service,
                    row.lifetime,
                    row.state,
                    row.dialog_timer,
                    row.send_sequence,
                    row.receive_sequence,
                    row.priority,
                ),
            )
        )

    def update_endpoint(self, row: EndpointRow) -> None:
        """Write an endpoint's changeable columns (group, state, timer, sequences)."""
        self.update_endpoints([row])

    def update_endpoints(self, rows: Sequence[EndpointRow]) -> None:
        """Write several endpoints' changeable columns."""
        self._conn.executemany(_Q["update_endpoint"], [_endpoint_update(r) for r in rows])

    def delete_endpoint(self, endpoint_id: int) -> None:
        """Delete one endpoint."""
        self._conn.execute(_Q["delete_endpoint"], (endpoint_id,))

    def group_queue(self, group_id: bytes) -> int | None:
        """The queue of an existing conversation group, or None if no endpoint is in it."""
        value = self._one("group_queue", (group_id,))
        return None if value is None else int(value)

    def due_timers(self, now: float, limit: int) -> list[bytes]:
        """Handles whose conversation timer is due at ``now`` (DLG-6)."""
        return [r[0] for r in self._all("due_timers", (now, limit))]

    def due_lifetimes(self, now: float, limit: int) -> list[bytes]:
        """Handles of live endpoints whose LIFETIME has passed at ``now`` (DLG-5)."""
        return [r[0] for r in self._all("due_lifetimes", (now, limit))]

    def next_due_time(self) -> float | None:
        """The earliest conversation timer or lifetime still to fire."""
        value = self._one("next_due_time")
        return None if value is None else float(value)

    def list_endpoints(self) -> list[tuple[Any, ...]]:
        """Rows for the ``conversation_endpoints`` view."""
        return self._all("list_endpoints")

    # -- queues --------------------------------------------------------------------------
    def insert_messages(self, rows: Iterable[QueueInsert]) -> None:
        """Put messages on their queues, in the given order."""
        self._conn.executemany(_Q["insert_message"], rows)

    def group_messages(self, group_id: bytes, limit: int) -> list[MessageRow]:
        """Ready messages of a group in RECEIVE order (PRI-12, SYS-2), at most ``limit``."""
        return self._all("group_messages", (group_id, limit))

    def conversation_messages(self, group_id: bytes, handle: bytes, limit: int) -> list[MessageRow]:
        """Ready messages of one conversation (in group ``group_id``) in RECEIVE order."""
        return self._all("conversation_messages", (group_id, handle, limit))

    def peek(self, queue_id: int, limit: int) -> list[MessageRow]:
        """Every row of a queue (any status), at most ``limit``."""
        return self._all("peek", (queue_id, limit))

    def peek_after(self, queue_id: int, after: int, limit: int) -> list[MessageRow]:
        """Rows of a queue with ``queuing_order > after``, in queuing order."""
        return self._all("peek_after", (queue_id, after, limit))

    def message_sequence(self) -> int:
        """The highest queuing_order ever assigned (AUTOINCREMENT's counter)."""
        return int(self._one("message_sequence") or 0)

    def queue_has_ready(self, queue_id: int) -> bool:
        """True when the queue holds a message with status 1."""
        return bool(self._one("queue_has_ready", (queue_id,)))

    def queue_counts(self) -> list[tuple[int, int, int]]:
        """(queue_id, status, count) for every queue holding messages."""
        return self._all("queue_counts")

    def finish_received(self, queuing_orders: Iterable[int], *, retain: bool) -> None:
        """Delete received messages, or mark them status 0 when the queue retains (RCV-3).

        ``queuing_orders`` come in RECEIVE order; rows go in reverse, so each group's head goes
        last and queue_groups looks up the group's next head once, not once per message."""
        orders = list(queuing_orders)[::-1]
        query = _Q["retain_received" if retain else "delete_received"]
        for start in range(0, len(orders), 10_000):
            self._conn.execute(query, (json.dumps(orders[start : start + 10_000]),))

    def delete_conversation_messages(self, group_id: bytes, handle: bytes) -> None:
        """Delete every queue row of a conversation endpoint (END CONVERSATION)."""
        self._conn.execute(_Q["delete_conversation_messages"], (group_id, handle))

    def delete_queue_messages(self, queue_id: int) -> None:
        """Delete every row of a queue (DROP QUEUE)."""
        self._conn.execute(_Q["delete_queue_messages"], (queue_id,))

    def move_conversation_messages(self, handle: bytes, old_group: bytes, group_id: bytes) -> None:
        """Move a conversation's queue rows from ``old_group`` to ``group_id`` (DLG-7)."""
        self._conn.execute(_Q["move_conversation_messages"], (group_id, old_group, handle))

    # -- transmission queue --------------------------------------------------------------
    def insert_transmission(self, row: tuple[Any, ...]) -> None:
        """Hold a message in the transmission queue (row without its id)."""
        self._conn.execute(_Q["insert_transmission"], row)

    def transmission_pending(self, limit: int) -> list[TransmissionRow]:
        """For each level 10..1, its oldest ``limit`` transmission-queue rows in send order
        (one index range each): every row the first ``limit`` to leave can come from, whatever
        the levels' ages (PRI-14, PRI-18)."""
        rows: list[TransmissionRow] = []
        for level in range(10, 0, -1):
            rows += self._all("transmission_pending_at_level", (level, limit))
        return rows

    def transmission_count(self) -> int:
        """How many rows the transmission queue holds."""
        return int(self._one("transmission_count") or 0)

    def transmission_exists(self) -> bool:
        """True when the transmission queue holds anything."""
        return bool(self._one("transmission_exists"))

    def transmission_waiting(self, conversation_id: bytes, is_initiator: bool) -> bool:
        """True when a message sent by that side of the conversation waits in the transmission
        queue (later ones must wait behind it to keep the send order)."""
        return bool(
            self._one("transmission_conversation_waiting", (conversation_id, int(is_initiator)))
        )

    def delete_transmission(self, transmission_id: int) -> None:
        """Remove a delivered or dropped transmission-queue row."""
        self._conn.execute(_Q["delete_transmission"], (transmission_id,))

    def set_transmission_status(self, transmission_id: int, status: str) -> None:
        """Record why a row is still waiting (``transmission_status``)."""
        self._conn.execute(_Q["set_transmission_status"], (status, transmission_id))

    def delete_transmission_of_endpoint(self, conversation_id: bytes, is_initiator: bool) -> None:
        """Drop the unsent messages of one side of a conversation (DLG-4 WITH ERROR/CLEANUP)."""
        self._conn.execute(
            _Q["delete_transmission_of_endpoint"], (conversation_id, int(is_initiator))
        )

    def list_transmission(self) -> list[tuple[Any, ...]]:
        """Rows for the ``transmission_queue`` view."""
        return self._all("list_transmission")

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

    def lock_next_group(
        self,
        queue_id: int,
        skip: set[int],
        *,
        exclude_held: bool = False,
        known_locked: set[bytes] | None = None,
    ) -> bytes | None:
        """Lock the highest-priority group of the queue that has a ready message not in
        ``skip`` (queuing orders this transaction already received) and is not locked by
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
            skipped = json.dumps(list(skip))
            best = held_best(
                held,
                self._drained,
                self.message_sequence,  # SQLite's counter shows committed inserts only
                lambda g: self._conn.execute(
                    _Q["held_group_head"], (g, queue_id, skipped)
                ).fetchone(),
                lambda after: {
                    bytes(r[0]) for r in self._all("groups_arrived_since", (after, queue_id))
                },
            )
        locked = known_locked if known_locked is not None else set()
        if held or locked:  # skipped inside SQLite, not row by row here
            excluded = json.dumps([bytes(g).hex().upper() for g in (*held, *locked)])
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
        self._drained.clear()


def _endpoint_update(row: EndpointRow) -> tuple[Any, ...]:
    return (
        row.conversation_group_id,
        row.state,
        row.dialog_timer,
        row.send_sequence,
        row.receive_sequence,
        row.endpoint_id,
    )


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
        self.database_name = os.path.splitext(os.path.basename(path))[0] or "servicebroker"
        self.lock_path = f"{path}-sblocks"
        self.poll_interval = poll_interval
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._writer = threading.Lock()
        self.commits = [0]
        self._idle: list[SqliteConnection] = []
        self._watchers: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._closed = False
        self._migrate()
        self.activity = QueueActivity(f"{path}-sbactivity")
        self._leader = GroupLocks(f"{path}-sbleader")

    def _raw(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StorageError(
                f"{self.path!r} is not a usable servicebroker database: {exc}"
            ) from exc
        return conn

    def _migrate(self) -> None:
        conn = self._raw()
        try:
            conn.execute(_SCHEMA_VERSION_TABLE)
            known = _migrations()
            conn.execute("BEGIN IMMEDIATE")
            try:
                applied = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
                newest = max((v for v, _, _ in known), default=0)
                if applied and max(applied) > newest:
                    raise StorageError(
                        f"database {self.path!r} has schema version {max(applied)}, newer than "
                        f"this servicebroker knows ({newest}); upgrade servicebroker"
                    )
                for version, name, script in known:
                    if version in applied:
                        continue
                    for statement in split_statements(script, sqlite3.complete_statement):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                        (version, name),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"{self.path!r} is not a usable servicebroker database: {exc}"
            ) from exc
        finally:
            conn.close()

    def schema_version(self) -> int:
        """The highest migration applied to the file."""
        conn = self._raw()
        try:
            return int(conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0])
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
        state = {
            "version": conn.execute("PRAGMA data_version").fetchone()[0],
            "own": self.commits[0],
        }
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
        """A connection from the pool (or a new one)."""
        with self._pool_lock:
            if self._closed:
                raise StorageError(f"the storage {self.url} is closed")
            if self._idle:
                return self._idle.pop()
        return SqliteConnection(
            self._raw(),
            self.lock_path,
            self.poll_interval,
            self._writer,
            self._busy_timeout,
            self.commits,
        )

    @contextmanager
    def connection(self) -> Iterator[SqliteConnection]:
        """A pooled connection for the ``with`` block, released (rolled back, unlocked) after."""
        conn = self.connect()
        try:
            yield conn
        finally:
            self.release(conn)

    def release(self, conn: Any) -> None:
        """Return a connection to the pool after rolling back and releasing its locks."""
        assert isinstance(conn, SqliteConnection)
        conn.rollback()
        conn.release_locks()
        with self._pool_lock:
            if not self._closed and len(self._idle) < 16:
                self._idle.append(conn)
                return
        conn.close()

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
