"""One broker transaction's PostgreSQL session (:class:`PostgresConnection`): its write
transaction, the row locks that let write transactions commit in parallel, its
conversation-group advisory locks, and the storage operations on it (see the package docstring
for the design, and :class:`servicebroker.storage.base.StorageConnection` for the contract)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import psycopg

from ...errors import BrokerError, StorageError
from ..named import HeldHeads, NamedQueryConnection, endpoint_update, held_best, rows_of
from ..queries import load_backend_queries
from ..rows import EndpointRow, MessageRow, QueueInsert
from ..sessions import SessionAccounting
from .copies import EndpointCopies
from .session import Session

__all__ = ["PostgresConnection", "SessionSource"]

_Q = load_backend_queries(__package__ or "servicebroker.storage.postgres", "format")


class SessionSource(Protocol):
    """What a :class:`PostgresConnection` reads of the storage that made it."""

    database: str
    """The database as error messages name it."""
    sessions: SessionAccounting
    """Where failures are counted."""
    poll_interval: float
    """Real seconds between looks for other processes' commits while waiting."""
    begin_write_sql: tuple[str, str]
    """BEGIN, then the lock time-out and the catalog lock shared: two statements."""
    begin_exclusive_sql: tuple[str, str]
    """The same with the catalog lock exclusive (catalog changes)."""
    lock_prefix: str
    """The prefix of this database's group-lock keys."""
    copies: EndpointCopies
    """The endpoints as this process's last commits left them (``lock_conversations``)."""

    def notify_sql(self, wake: Collection[int] | None) -> str:
        """``SELECT pg_notify(…)`` for the wait keys ``wake`` (None: all)."""
        ...


def _flags(params: Sequence[Any]) -> list[Any]:
    """The broker's own parameters with Python bools as the integers 0/1 its schema stores
    (the application's SQL keeps its bools)."""
    return [int(p) if isinstance(p, bool) else p for p in params]


class PostgresConnection(NamedQueryConnection):
    """One broker transaction's PostgreSQL session and its group locks (see
    :class:`servicebroker.storage.base.StorageConnection` for the contract; the operations the
    backends share come from :class:`~servicebroker.storage.named.NamedQueryConnection`)."""

    def __init__(self, storage: SessionSource, conn: Any) -> None:
        self._storage = storage
        self._conn = Session(conn, storage.database, storage.sessions)
        self._in_write = False
        self._held: dict[bytes, int] = {}
        self._lock_unknown = False  # a RECEIVE call failed: it may have left a group locked
        self._heads: dict[int, HeldHeads] = {}  # per queue: a group's head there
        # the conversations this write transaction locked, to keep copies of at COMMIT, and
        # those whose copies it used instead of reading them (forgotten if it fails)
        self._locked_conversations: list[bytes] = []
        self._copied: list[bytes] = []
        self.poll_interval = storage.poll_interval

    # -- transaction control -------------------------------------------------------------
    @property
    def in_write(self) -> bool:
        """True between :meth:`begin_write` and the end of that database transaction."""
        return self._in_write

    @property
    def lost(self) -> bool:
        """True once the session was found lost (it is closed, never pooled again)."""
        return self._conn.lost

    def begin_write(self, *, exclusive: bool = False) -> None:
        """Start the write transaction. Write transactions run and commit in parallel: each
        holds the catalog lock (a transaction-level advisory lock) shared, a catalog change
        (``exclusive``) holds it alone; rows are locked as a commit reads them. Locks are
        waited for up to ``busy_timeout``.

        The BEGIN costs no round trip of its own: it is sent with the transaction's first
        statement that needs an answer (or with its COMMIT); so are the statements of the
        transaction whose results nobody reads (:meth:`_run`, :meth:`_many`). A lock not had
        in time or a failing write is raised by that statement.
        """
        if self._in_write:
            return
        self._in_write = True
        for sql in (
            self._storage.begin_exclusive_sql if exclusive else self._storage.begin_write_sql
        ):
            self._conn.defer(sql)  # this storage's own numbers: no parameters

    def commit(self, wake: Collection[int] | None = None) -> None:
        """Commit the write transaction, if any, and NOTIFY the listening brokers of the wait
        keys in ``wake`` (None: all) once it committed; the group locks go in the same round
        trip, after the commit (the transaction is over) and before the NOTIFY.

        Raises:
            StorageError: the server refused the commit (rolled back), or the connection was
                lost during it (``outcome`` unknown).
        """
        if self._in_write:
            notify = self._storage.notify_sql(wake)
            locked, self._locked_conversations = self._locked_conversations, []
            versions = (
                self._conn.read_later(_Q["get_conversation_versions"], (locked,))
                if locked
                else None
            )
            try:
                # NOTIFY after COMMIT, on its own: a NOTIFY inside the write transaction
                # would hold the server's one notification lock through the commit's WAL
                # flush, so that every committing session waited for the others' flushes
                if self._held or self._lock_unknown:
                    self._conn.execute_all(
                        ["COMMIT", "SELECT pg_advisory_unlock_all()", notify], commit=True
                    )
                    self._held.clear()
                    self._heads.clear()
                    self._lock_unknown = False
                else:
                    self._conn.execute_all(["COMMIT", notify], commit=True)
            except BaseException:
                self._discard()
                raise
            finally:
                self._in_write = False
            self._copied = []
            if versions is not None:
                self._storage.copies.keep(
                    locked, ((EndpointRow(*r[:-1]), int(r[-1])) for r in versions())
                )

    def rollback(self) -> None:
        """Roll the write transaction back, if any. Never raises: a session that cannot roll
        back is closed, and the server rolls back what it had open."""
        self._conn.discard_deferred()  # a read left waiting for a statement that never came
        self._forget_copies()
        if self._in_write:
            try:
                self._discard()
            finally:
                self._in_write = False

    def _forget_copies(self) -> None:
        """The write transaction ends without committing: nothing of it is kept, and the
        copies it used are dropped (they may be what failed: the next commit reads those
        rows)."""
        self._locked_conversations = []
        if self._copied:
            self._storage.copies.forget(self._copied)
            self._copied = []

    def _discard(self) -> None:
        self._forget_copies()
        self._conn.discard_deferred()
        if self._conn.lost or self._conn.closed:
            # a server that comes back (restarted, failed over, restored) may have lost
            # commits and hand out their transaction ids, hence row versions, again
            self._storage.copies.clear()
            return
        try:
            self._conn.rollback()
        except StorageError:
            self._conn.close()

    def execute_app(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run the application's SQL (psycopg placeholders ``%s``) inside this transaction's
        write transaction.

        Raises:
            IntegrityConflict: a constraint refused the statement; the transaction must be
                rolled back.
            StorageError: the statement failed (bad SQL, or the database underneath).
            BrokerError: psycopg refused the parameters before sending the statement (their
                number, a type it cannot adapt): nothing ran, the transaction goes on.
        """
        self.begin_write()
        try:
            cur = self._conn.execute(sql, params or None)
        except StorageError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.ProgrammingError) and cause.sqlstate is None:
                raise BrokerError(
                    f"tx.execute: the database driver refused the statement's parameters before "
                    f"sending it ({cause})"
                ) from None
            raise
        return cur.fetchall()

    def executemany_app(
        self, sql: str, seq_of_params: Iterable[Sequence[Any] | dict[str, Any]]
    ) -> None:
        """Run the application's statement once per parameter set, in the write transaction."""
        self.begin_write()
        self._conn.executemany(sql, seq_of_params)

    def detach(self) -> Any:
        """End this connection's use — roll back, release its group locks (a lost session is
        closed instead: the server frees its locks) — and return its psycopg session, for the
        pool to take back. Never raises."""
        self.rollback()
        try:
            self.release_locks()
        except StorageError:
            self._conn.close()
        if self._conn.lost:
            self._storage.copies.clear()  # as in _discard
            if not self._conn.closed:
                self._conn.close()
        return self._conn.raw

    # -- helpers -------------------------------------------------------------------------
    def _one(self, name: str, params: Sequence[Any] = ()) -> Any:
        cur = self._conn.execute(_Q[name], _flags(params))
        row = cur.fetchone()
        return None if row is None else row[0]

    def _all(self, name: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self._conn.execute(_Q[name], _flags(params)).fetchall())

    def _run(self, name: str, params: Sequence[Any] = ()) -> None:
        if self._in_write:  # nobody reads its result: sent with the next statement
            self._conn.defer(_Q[name], _flags(params))
        else:
            self._conn.execute(_Q[name], _flags(params))

    def _many(self, name: str, rows: Iterable[Sequence[Any]]) -> None:
        if self._in_write:
            for r in rows:
                self._conn.defer(_Q[name], _flags(r))
        else:
            self._conn.executemany(_Q[name], [_flags(r) for r in rows])

    def _unlock_key(self, key: int) -> None:
        """Release one advisory lock now (never deferred: a rollback discards what is)."""
        self._conn.execute(_Q["advisory_unlock"], (key,))

    def _reading(self, name: str, for_update: bool) -> str:
        """Commits run in parallel here: a commit's reads lock their rows (the ``_locked``
        form of the query) until its write transaction ends."""
        return f"{name}_locked" if for_update else name

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
        except BaseException:
            if started:
                self._discard()
            raise
        if started:
            self._conn.execute("COMMIT")

    def catalog_version_later(self) -> Callable[[], int]:
        """The catalog version, read in the round trip of the next statement (see the
        contract)."""
        rows = self._conn.read_later(_Q["get_setting"], ("catalog_version",))
        return lambda: int(rows()[0][0])

    # -- endpoints -----------------------------------------------------------------------
    def get_endpoint_and_lock(self, handle: bytes) -> tuple[EndpointRow | None, bool]:
        """The endpoint, and whether its group is now locked by this session: one round trip
        (the advisory-lock key is computed by the server, as :meth:`try_lock_group` does). A
        session's advisory locks stack, so a group it held already is unlocked once more at
        once (a second round trip, only then): the statement does not carry the list of held
        locks, which made a transaction touching n conversations cost n² on the server."""
        row = self._conn.execute(
            _Q["get_endpoint_and_lock"], (self._storage.lock_prefix, handle)
        ).fetchone()
        if row is None:
            return None, False
        endpoint = EndpointRow(*row[:-2])
        key, locked = int(row[-2]), bool(row[-1])
        if locked:
            if endpoint.conversation_group_id in self._held:
                self._unlock_key(key)  # the lock stacked on the one held
            else:
                self._held[endpoint.conversation_group_id] = key
        return endpoint, locked

    def get_endpoints_and_lock(self, handles: Sequence[bytes]) -> list[tuple[EndpointRow, bool]]:
        """The endpoints, each with whether its group is now locked by this session: one
        round trip for all of them, each group's lock tried once."""
        pairs = []
        for row in self._conn.execute(
            _Q["get_endpoints_and_lock"],
            (self._storage.lock_prefix, list(handles), list(self._held.values())),
        ).fetchall():
            endpoint = EndpointRow(*row[:-2])
            if row[-1]:
                self._held.setdefault(endpoint.conversation_group_id, int(row[-2]))
            pairs.append((endpoint, bool(row[-1])))
        return pairs

    def get_conversations(
        self, conversation_ids: Sequence[bytes], *, for_update: bool = False
    ) -> list[EndpointRow]:
        """Every endpoint of the given conversations, in one query; ``for_update``: locked
        (``FOR UPDATE``, in ``endpoint_id`` order, so commits never deadlock on them)."""
        if not conversation_ids:
            return []
        name = self._reading("get_conversations", for_update)
        return [EndpointRow(*r) for r in self._all(name, (list(conversation_ids),))]

    def lock_conversations(
        self, conversation_ids: Sequence[bytes], *, cached: bool = False
    ) -> tuple[list[EndpointRow], bool]:
        """The conversations' endpoints locked (``FOR UPDATE``, in ``endpoint_id`` order) and
        whether a local transmission row waits, read after them: one pipeline, with whatever
        was deferred (the BEGIN).

        ``cached`` and every conversation's copy kept (:mod:`.copies`): no round trip — the
        copies are returned, no local transmission row assumed, and
        ``servicebroker_lock_unchanged`` deferred to lock the rows and raise SB002
        (:class:`~servicebroker.storage.failures.CopiesChanged`) with the transaction's next
        statement if that was wrong. Either way the conversations are read again, with their
        row versions, in COMMIT's round trip, and kept."""
        ids = list(conversation_ids)
        self._locked_conversations.extend(ids)
        copies = self._storage.copies
        kept = copies.get_all(ids) if cached and not copies.local_waiting else None
        if kept is not None:
            self._copied.extend(ids)
            self._storage.sessions.wrote_from_copies()
            endpoint_ids = [row.endpoint_id for c in kept for row in c.rows]
            versions = [v for c in kept for v in c.versions]
            self._conn.defer(_Q["lock_unchanged"], (ids, endpoint_ids, versions))
            return [row for c in kept for row in c.working_rows()], False
        endpoints, waiting = self._conn.execute_reads(
            [
                (_Q["get_conversations_locked"], (list(conversation_ids),)),
                (_Q["transmission_exists_of"], (0,)),
            ]
        )
        copies.local_waiting = bool(waiting[0][0])
        return [EndpointRow(*r) for r in endpoints], copies.local_waiting

    def update_endpoints(self, rows: Sequence[EndpointRow]) -> None:
        """Write the endpoints' changeable columns in one statement (arrays, one element per
        endpoint), not one per endpoint: a commit over 64 conversations writes 128 rows."""
        if not rows:
            return
        last = {row.endpoint_id: row for row in rows}.values()  # as one by one: the last wins
        columns = [list(column) for column in zip(*map(endpoint_update, last), strict=True)]
        self._run("update_endpoints", (columns[-1], *columns[:-1]))

    # -- queues --------------------------------------------------------------------------
    def lock_queues(self, queue_ids: Collection[int]) -> None:
        """Lock the queues' positions (their ``queue_positions`` rows, in queue order) for the
        rest of the write transaction, before it touches any group: see the contract."""
        if queue_ids:
            self._run("lock_queue_positions", (sorted({int(q) for q in queue_ids}),))

    def insert_messages(self, rows: Iterable[QueueInsert]) -> None:
        """Put messages on their queues in one statement, in the given order: the queues'
        positions locked first, then their groups' ``queue_groups`` rows in (queue, group)
        order — the order every commit locks groups in; each queue's watermark moves to its
        highest new queuing order."""
        columns = [list(column) for column in zip(*rows, strict=True)]
        if not columns:
            return
        queues = sorted(set(columns[0]))
        self._run("insert_messages", (*columns, queues, columns[3], columns[0]))

    def finish_received(
        self, queuing_orders: Iterable[int], *, retain: bool, removed: str | None
    ) -> None:
        """Delete received messages, or mark them status 0 when the queue retains (RCV-3):
        servicebroker_finish_received (migration 18), deferred to the commit's round trip;
        their groups' rows in ``queue_groups`` are locked first, in (queue, group) order. Rows
        missing: the server raises SQLSTATE SB001 with ``removed``, a ConversationError."""
        self._run("finish_received", (list(queuing_orders), retain, removed))

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

    def locked_groups(self, group_ids: Collection[bytes]) -> frozenset[bytes]:
        """Those of ``group_ids`` whose advisory lock a session holds (``pg_locks``)."""
        ids = [bytes(g) for g in group_ids]
        if not ids:
            return frozenset()
        rows = self._conn.execute(_Q["locked_groups"], (self._storage.lock_prefix, ids)).fetchall()
        return frozenset(bytes(r[0]) for r in rows)

    def unlock_group(self, group_id: bytes) -> None:
        """Release one group this transaction locked but did not use."""
        key = self._held.pop(bytes(group_id), None)
        if key is not None:
            self._unlock_key(key)  # key: as locked

    def lock_next_group(
        self,
        queue_id: int,
        skip: Mapping[bytes, Collection[int]],
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
            best = held_best(
                self._held,
                self._heads.setdefault(queue_id, {}),
                lambda: self.message_sequence(queue_id),  # the queue's commit order
                lambda g: self._conn.execute(
                    _Q["held_group_head"], (g, queue_id, list(skip.get(g, ())))
                ).fetchone(),
                lambda after: {
                    bytes(r[0]) for r in self._all("groups_arrived_since", (after, queue_id))
                },
                skip,
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
                    self._unlock_key(key)
                return best[2]
            if got:
                self._held[group_id] = int(key)
                return group_id
            locked.add(group_id)
            excluded.append(group_id)

    def receive_first_group(
        self,
        queue_id: int,
        limit: int,
        *,
        known_locked: set[bytes],
        catalog_version: int | None = None,
    ) -> list[MessageRow] | None:
        """One call of the server function ``servicebroker_receive`` (migration 17): it checks
        the catalog version, finds the group, takes its advisory lock and reads its messages
        with a snapshot taken after the lock was had; see the contract. Its first rows are
        headers (no message): the last one gives the stored catalog version, the lock key held
        (None: none) and the groups found held by others."""
        if self._held:  # the contract's precondition; the general path otherwise
            if catalog_version is not None and self.catalog_version() != catalog_version:
                return None
            group = self.lock_next_group(queue_id, {}, known_locked=known_locked)
            return [] if group is None else self.group_messages(group, limit)
        try:
            rows = self._conn.execute(
                _Q["receive_first_group"],
                (
                    self._storage.lock_prefix,
                    queue_id,
                    list(known_locked),
                    self._limit(limit),
                    catalog_version,
                ),
                binary=True,  # the bodies as bytes, not hex text
            ).fetchall()
        except StorageError:
            self._lock_unknown = True  # failed after its lock? release_locks frees them all
            raise
        messages = [r[3:] for r in rows if r[3] is not None]
        header = next((r[:3] for r in reversed(rows) if r[3] is None), None)
        if header is None or (header[1] is not None and not messages):
            # not the function's answer: the session was ended under the call
            self._lock_unknown = True
            raise StorageError(
                f"{self._storage.database}: RECEIVE got no answer from servicebroker_receive "
                f"(its session was ended while it ran); the transaction was rolled back",
                database=self._storage.database,
            )
        stored, key, busy = header
        if catalog_version is not None and int(stored) != catalog_version:
            return None
        known_locked.update(bytes(g) for g in busy)
        if key is None:
            return []
        self._held[bytes(messages[0][3])] = int(key)
        return rows_of(MessageRow, messages)

    def release_locks(self, wake: Collection[int] | None = None) -> None:
        """Release every group lock this transaction holds, and wake the waiters of ``wake``
        (None: all) elsewhere. A session that cannot unlock is closed (the server frees its
        locks with it), so it never goes back to the pool holding groups.

        Raises:
            StorageError: the unlock failed (the session is closed by then).
        """
        self._heads.clear()
        if (self._held or self._lock_unknown) and not self._conn.closed and not self._conn.lost:
            self._held.clear()
            self._lock_unknown = False
            try:
                self._conn.execute_all(
                    ["SELECT pg_advisory_unlock_all()", self._storage.notify_sql(wake)]
                )
            except StorageError:
                self._conn.close()
                raise
        self._held.clear()
