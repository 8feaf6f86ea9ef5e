"""Stream readers' conversation-group claims: RECEIVE for a reader whose batches outlive a
transaction (issue 14; the Spark streaming source is its user).

A RECEIVE locks the conversation groups it reads until its transaction ends (RCV-2, DLG-9).
A stream reader — a Spark Structured Streaming query — reads a batch in one process, hands it
to tasks in others, and only learns that the batch is done when Spark commits it, perhaps after
a crash and a restart. So the reader *claims* the groups of a batch instead: the claim is
written in the database, in the transaction that plans the batch (which holds the groups'
locks, so it never takes a group another transaction holds), and holds until the reader
acknowledges the batch. While a group is claimed, no RECEIVE, GET CONVERSATION GROUP or other
reader in any process takes it, and activation does not count its messages as work.

Batches are numbered per reader: 1, 2, 3 … :meth:`StreamClaims.plan` acknowledges every batch
up to the one the reader says it finished, then plans the next one (or returns the one already
planned, when the reader comes back after a crash before it recorded it). A batch's messages
are copied when it is planned, so reading it again gives exactly the same messages in the same
order, whatever became of the queue meanwhile. Acknowledging deletes the messages from their
queues (or marks them status 0 under RETENTION, as RECEIVE's commit does, RCV-3) and drops the
claims. A reader that shows no life for its ``claim_timeout`` (broker-clock seconds) loses its
unacknowledged batch: the claims are dropped, the messages are free for anyone, and the reader
gets :class:`~servicebroker.errors.StreamClaimError` when it comes back.

Within a batch, groups are taken in RECEIVE's order (PRI-12: priority, then the head message's
queuing order), each group's messages in RECEIVE order (SYS-2), and each group goes whole to one
*part* (one Spark task): parts are balanced by message count.
"""

from __future__ import annotations

import heapq
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..arguments import check_int
from ..catalog import CatalogSnapshot, QueueDef
from ..clock import check_seconds, to_datetime
from ..errors import BrokerError, StreamClaimError
from ..messages import Message, fast_uuid
from ..storage.base import StorageConnection
from ..storage.rows import GroupClaimRow, MessageRow, StreamReaderRow
from .context import BrokerContext
from .receive import to_messages

__all__ = [
    "CLAIM_TIMEOUT",
    "MAX_GROUPS",
    "GroupClaim",
    "StreamClaims",
    "assign_parts",
]

log = logging.getLogger(__name__)

CLAIM_TIMEOUT = 1800.0
"""Default seconds (broker clock) a stream reader may go without showing life before its
unacknowledged batch is released: half an hour, longer than a micro-batch runs and than a
driver takes to be restarted."""


MAX_GROUPS = 10_000
"""Groups in one batch at most, whatever ``max_messages`` allows: planning holds each group's
lock until it commits, and locks held at once cost more each (SQLite's open-file-description
locks are a list the kernel walks; PostgreSQL's advisory locks fill its shared lock table)."""


def _candidates(conn: StorageConnection, queue_id: int, limit: int | None) -> Iterator[bytes]:
    """The queue's unclaimed ready groups in RECEIVE's order, fetched a page at a time (a page
    twice the size of the last, from ``limit`` + 64): groups another transaction holds or with
    nothing to take do not use up what a batch may hold."""
    size = 64 + (MAX_GROUPS if limit is None else min(limit, MAX_GROUPS))
    seen = 0
    while True:
        page = conn.ready_groups(queue_id, seen + size)
        yield from page[seen:]
        if len(page) < seen + size:
            return
        seen = len(page)
        size *= 2


def assign_parts(sizes: Sequence[int], partitions: int) -> list[int]:
    """The part (0 … ``partitions`` - 1) of each group, given the groups' message counts in
    the order they were taken: each group goes to the part with the fewest messages so far
    (the lowest number on a tie), so parts are balanced and a group is never split.

    Raises:
        BrokerError: ``partitions`` is not a positive integer.
    """
    check_int(partitions, "partitions", minimum=1, maximum=65_536)
    loads = [(0, part) for part in range(partitions)]  # a heap of (messages, part)
    out = []
    for size in sizes:
        load, part = heapq.heappop(loads)
        heapq.heappush(loads, (load + size, part))
        out.append(part)
    return out


@dataclass(frozen=True)
class GroupClaim:
    """A row of :meth:`~servicebroker.views.Views.conversation_group_claims`: a conversation
    group claimed by a stream reader's batch.

    Attributes:
        conversation_group_id: the group.
        queue_name: its queue.
        reader: the stream reader holding it.
        batch: the reader's batch that claimed it.
        messages: the group's messages in that batch.
        claimed_at: when (broker clock, UTC).
        expires_at: when the claim is released unless the reader shows life before (broker
            clock, UTC).
    """

    conversation_group_id: object
    queue_name: str
    reader: str
    batch: int
    messages: int
    claimed_at: object
    expires_at: object


def _check_reader(reader: object) -> str:
    """``reader`` as a stream reader name.

    Raises:
        BrokerError: not a non-empty string of up to 256 characters.
    """
    if not isinstance(reader, str) or not reader.strip() or len(reader) > 256:
        raise BrokerError(
            f"stream reader name must be a non-empty string of up to 256 characters, got {reader!r}"
        )
    return reader


class StreamClaims:
    """The stream readers of one broker and their claims (see the module docstring).

    Args:
        context: the broker's shared parts (storage, clock, catalog, wake-ups).
    """

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    # -- the reader's life ---------------------------------------------------------------
    def start_offset(self, reader: str) -> int:
        """The batch a new run of ``reader`` (str) starts after: the last it acknowledged (0
        for a reader never seen).

        Raises:
            BrokerError: a bad reader name.
        """
        _check_reader(reader)
        with self._context.storage.connection() as conn:
            row = conn.stream_reader(reader)
        return 0 if row is None else row.acknowledged

    def watermark(self, queues: Sequence[str]) -> int:
        """The highest queuing order of the committed messages of ``queues`` now (0 when none
        ever came): a run that must not read what comes later passes it as ``up_to_order``.

        Raises:
            CatalogError: a queue does not exist.
        """
        context = self._context
        with context.storage.connection() as conn:
            snap = context.catalog.snapshot(conn)
            return max(
                (conn.message_sequence(snap.queue(name).queue_id) for name in queues), default=0
            )

    def plan(
        self,
        reader: str,
        queues: Sequence[str],
        after: int,
        *,
        max_messages: int | None = None,
        partitions: int = 1,
        claim_timeout: float = CLAIM_TIMEOUT,
        up_to_order: int | None = None,
    ) -> int:
        """Acknowledge ``reader``'s batches up to ``after`` (the reader finished them), then
        return its next batch: the one already planned after ``after`` if there is one (the
        reader restarted before it recorded it), else a new batch of the groups of ``queues``
        that no transaction holds and no reader claims, at most ``max_messages`` messages
        (whole groups, but at least part of one), in ``partitions`` parts. Returns ``after``
        when there is nothing to read — then, with nothing to acknowledge either, from reads
        alone, without the write lock (a polling query's idle call). A plan that writes also
        releases every reader whose claim time-out passed (the broker's timer does so each
        tick).

        Args:
            reader: the reader's stable name.
            queues: the queue names it reads (a queue turned OFF is skipped, QUE-3).
            after: the last batch the reader finished (0 at first).
            max_messages: at most this many messages in a new batch (None: all ready).
            partitions: how many parts (tasks) a new batch is split into.
            claim_timeout: seconds the reader may go without showing life before its
                unacknowledged batch is released (broker clock).
            up_to_order: take only messages whose queuing order is at most this (a
                run that drains what was there when it started); a group is cut at its
                first later message.

        Raises:
            StreamClaimError: ``after`` is older than what the reader acknowledged, or
                its batch after ``after`` was released by the time-out.
            CatalogError: a queue does not exist.
            BrokerError: a bad argument.
            StorageError: the database failed (nothing planned, nothing acknowledged).
        """
        _check_reader(reader)
        names = list(queues)
        if not names or not all(isinstance(n, str) for n in names):
            raise BrokerError(
                f"stream reader {reader!r}: give the queue names to read, got {queues!r}"
            )
        check_int(after, "after", minimum=0)
        limit = None if max_messages is None else check_int(max_messages, "max_messages", minimum=1)
        check_int(partitions, "partitions", minimum=1, maximum=65_536)
        timeout = check_seconds(claim_timeout, "claim_timeout")
        if self._idle(reader, names, after):
            return after
        now = self._context.clock.now()
        with self._writing() as (conn, woken):
            snap = self._context.catalog.snapshot(conn)
            qdefs = [snap.queue(n) for n in names]
            woken |= self._release_expired(conn, now)
            row = conn.stream_reader(reader, for_update=True) or StreamReaderRow(
                reader, ",".join(names), after, after, 0, now, timeout
            )
            self._check_resume(row, after)
            if after > row.acknowledged:
                woken |= self._acknowledge(conn, snap, reader, after)
                row = row._replace(acknowledged=after, latest=max(row.latest, after))
            row = row._replace(queues=",".join(names), renewed=now, claim_timeout=timeout)
            batch = after + 1
            # a batch planned already (the reader restarted before it recorded it) is given
            # again; else a new one
            taken = (
                []
                if row.latest > after
                else self._take(conn, [q for q in qdefs if q.status], limit, up_to_order)
            )
            if taken:
                parts = assign_parts([len(rows) for _, rows in taken], partitions)
                conn.insert_group_claims(
                    (group, rows[0].queue_id, reader, batch, now) for group, rows in taken
                )
                positions: dict[int, int] = defaultdict(int)
                copies = []
                for (_, rows), part in zip(taken, parts, strict=True):
                    for message in rows:
                        copies.append((part, positions[part], message))
                        positions[part] += 1
                conn.insert_claimed_messages(reader, batch, copies)
                row = row._replace(latest=batch)
            conn.put_stream_reader(row)
        if row.latest == after or taken:  # planning a batch is a RECEIVE to activation
            took = {rows[0].queue_id for _, rows in taken}
            for q in qdefs:
                if q.status:  # ACT-3b, ACT-4b, ACT-8: as a RECEIVE, empty or not, would
                    self._context.events.received(
                        q.queue_id, empty=q.queue_id not in took, where=False, first=True
                    )
        return row.latest

    def _idle(self, reader: str, names: Sequence[str], after: int) -> bool:
        """True when a plan would change nothing — the reader is known, has nothing to
        acknowledge or give again, and no queue has an unclaimed ready group — told from
        reads alone (a polling query's idle call takes no write lock); then each queue counts
        an empty RECEIVE, as the plan would have.

        Raises:
            StreamClaimError: as :meth:`plan`. CatalogError: an unknown queue.
        """
        context = self._context
        with context.storage.connection() as conn:
            row = conn.stream_reader(reader)
            if row is None or row.acknowledged != after or row.latest != after:
                return False
            self._check_resume(row, after)
            snap = context.catalog.snapshot(conn)
            queues = [snap.queue(n) for n in names]
            if any(q.status and conn.queue_has_ready(q.queue_id) for q in queues):
                return False
        for q in queues:
            if q.status:  # ACT-3b: an empty RECEIVE
                context.events.received(q.queue_id, empty=True, where=False, first=True)
        return True

    @contextmanager
    def _writing(self) -> Iterator[tuple[StorageConnection, set[int]]]:
        """A write transaction, committed when the block ends (rolled back if it raises), its
        group locks released; the queue ids the block adds to the set are woken after it."""
        woken: set[int] = set()
        with self._context.storage.connection() as conn:
            conn.begin_write()
            try:
                yield conn, woken
                conn.commit(woken)
            except BaseException:
                conn.rollback()
                raise
            finally:
                conn.release_locks()
        if woken:
            self._context.events.committed(woken, set())

    @staticmethod
    def _check_resume(row: StreamReaderRow, after: int) -> None:
        """Raise unless ``row``'s reader may go on from batch ``after``.

        Raises:
            StreamClaimError: its unacknowledged batch was released by the time-out (others
                may have received those messages: the reader must not read or acknowledge
                them, now or ever), or ``after`` is older than what it acknowledged.
        """
        if row.released > row.acknowledged:
            raise StreamClaimError(
                f"stream reader {row.reader!r}: batch {row.released} was released after its "
                f"claim time-out ({row.claim_timeout:g} s without a sign of life); its messages "
                f"may have been received by others. Start the query from a new checkpoint (or "
                f"give it a new reader name)"
            )
        if after < row.acknowledged:
            raise StreamClaimError(
                f"stream reader {row.reader!r} resumes after batch {after}, but it acknowledged "
                f"batch {row.acknowledged} already (those messages left the queue): a reader "
                f"name belongs to one checkpoint; give this query a new reader name"
            )

    def _take(
        self,
        conn: StorageConnection,
        queues: Sequence[QueueDef],
        limit: int | None,
        up_to_order: int | None,
    ) -> list[tuple[bytes, list[MessageRow]]]:
        """Lock and read the groups of a new batch, round robin over ``queues``."""
        remaining = limit
        taken: list[tuple[bytes, list[MessageRow]]] = []
        pending = {q.queue_id: _candidates(conn, q.queue_id, limit) for q in queues}
        considered: set[bytes] = set()
        while pending and (remaining is None or remaining > 0) and len(taken) < MAX_GROUPS:
            for queue_id, groups in list(pending.items()):
                if (remaining is not None and remaining <= 0) or len(taken) >= MAX_GROUPS:
                    break
                group = next(groups, None)
                if group is None:
                    del pending[queue_id]
                    continue
                if group in considered:  # a later page may list a group again
                    continue
                considered.add(group)
                if not conn.try_lock_group(group):
                    continue  # another transaction holds it: never read a held group
                rows = conn.group_messages(group, -1 if remaining is None else remaining + 1)
                if up_to_order is not None:
                    cut = next(
                        (i for i, r in enumerate(rows) if r.queuing_order > up_to_order), None
                    )
                    rows = rows if cut is None else rows[:cut]
                if not rows:
                    continue
                if remaining is not None and len(rows) > remaining:
                    if taken:  # the batch is full: this group waits for the next one
                        return taken
                    rows = rows[:remaining]
                taken.append((group, rows))
                if remaining is not None:
                    remaining -= len(rows)
        return taken

    def acknowledge(self, reader: str, up_to: int) -> None:
        """Acknowledge ``reader``'s batches up to ``up_to`` (a batch number): their messages
        leave their queues (status 0 under RETENTION, RCV-3) and their groups' claims end — the
        COMMIT of a RECEIVE that ends its group locks (RCV-2, DLG-9). Nothing for batches
        acknowledged already.

        Raises:
            StreamClaimError: a batch up to ``up_to`` was released by the time-out.
            StorageError: the database failed (nothing acknowledged).
        """
        _check_reader(reader)
        check_int(up_to, "up_to", minimum=0)
        with self._context.storage.connection() as conn:
            row = conn.stream_reader(reader)
        if row is None or up_to <= row.acknowledged:
            return
        with self._writing() as (conn, woken):
            row = conn.stream_reader(reader, for_update=True)
            if row is None or up_to <= row.acknowledged:
                return
            self._check_resume(row, row.acknowledged)
            snap = self._context.catalog.snapshot(conn)
            woken |= self._acknowledge(conn, snap, reader, up_to)
            conn.put_stream_reader(
                row._replace(
                    acknowledged=up_to,
                    latest=max(row.latest, up_to),
                    renewed=self._context.clock.now(),
                )
            )

    @staticmethod
    def _acknowledge(
        conn: StorageConnection, snap: CatalogSnapshot, reader: str, up_to: int
    ) -> set[int]:
        """In the write transaction: finish the messages of ``reader``'s batches up to
        ``up_to`` as RECEIVE's commit does (RCV-3) and drop their claims; the queues touched."""
        by_queue: dict[int, list[int]] = defaultdict(list)
        for queue_id, order in conn.claimed_orders(reader, up_to):
            by_queue[queue_id].append(order)
        for queue_id, orders in by_queue.items():
            queue = snap.queues_by_id.get(queue_id)
            conn.finish_received(orders, retain=bool(queue and queue.retention), removed=None)
        conn.drop_claims(reader, up_to)
        return set(by_queue)

    def release_expired(self, now: float) -> list[str]:
        """Release the unacknowledged batch of every reader whose claim time-out passed at
        ``now`` (broker clock): its claims end and its messages are ready for anyone again.
        Returns the readers released. Run by the broker's timer each tick."""
        with self._context.storage.connection() as conn:
            if not conn.expired_stream_readers(now):
                return []
        released: list[str] = []
        with self._writing() as (conn, woken):
            woken |= self._release_expired(conn, now, released)
        return released

    @staticmethod
    def _release_expired(
        conn: StorageConnection, now: float, released: list[str] | None = None
    ) -> set[int]:
        """In the write transaction: release every expired reader (checked again under its
        row's lock); the queues of the claims it dropped."""
        woken: set[int] = set()
        for name in conn.expired_stream_readers(now):
            row = conn.stream_reader(name, for_update=True)
            if (
                row is None
                or row.latest <= row.acknowledged
                or row.renewed + row.claim_timeout > now
            ):
                continue
            woken |= {q for q, _ in conn.claimed_orders(name, row.latest)}
            conn.drop_claims(name, row.latest)
            conn.put_stream_reader(row._replace(released=row.latest))
            if released is not None:
                released.append(name)
            log.warning(
                "stream reader %r showed no life for %g s: its batch %d was released (its "
                "messages are ready for any reader again)",
                name,
                row.claim_timeout,
                row.latest,
            )
        return woken

    def renew(self, reader: str) -> None:
        """Note a sign of life of ``reader`` now (broker clock): its claim time-out starts
        again; nothing for a reader never seen.

        Raises:
            StorageError: the database failed.
        """
        with self._writing() as (conn, _):
            conn.renew_stream_reader(reader, self._context.clock.now())

    # -- reading a batch -----------------------------------------------------------------
    def parts(self, reader: str, low: int, high: int) -> list[tuple[int, int]]:
        """The parts of ``reader``'s batches after ``low`` up to ``high`` (batch numbers) that
        have messages: (part, messages) pairs, by part.

        Raises:
            StreamClaimError: one of those batches was released by the time-out.
        """
        with self._context.storage.connection() as conn:
            row = conn.stream_reader(reader)
            if row is not None and high > low:
                self._check_resume(row, row.acknowledged)
            counts: dict[int, int] = defaultdict(int)
            for _, part, n in conn.claimed_counts(reader, low, high):
                counts[part] += n
        return sorted(counts.items())

    def messages(self, reader: str, low: int, high: int, part: int) -> list[Message]:
        """The messages of part ``part`` of ``reader``'s batches after ``low`` up to ``high``,
        in order: by batch, then group by group as taken, each group in RECEIVE order.

        Raises:
            StreamClaimError: the reader's batch was released by the time-out (its copies are
                gone: reading nothing would look like an empty batch).
        """
        context = self._context
        with context.storage.connection() as conn:
            row = conn.stream_reader(reader)
            if row is not None:
                self._check_resume(row, row.acknowledged)
            snap = context.catalog.snapshot(conn)
            rows = conn.claimed_messages(reader, low, high, part)
        return to_messages(snap, rows, None)

    # -- views ---------------------------------------------------------------------------
    def claims(self) -> list[GroupClaim]:
        """Every claimed group (see :class:`GroupClaim`): the view
        ``conversation_group_claims`` (issue 14; RCV-2's locks, held across transactions)."""
        context = self._context
        with context.storage.connection() as conn:
            snap = context.catalog.snapshot(conn)
            rows: list[GroupClaimRow] = conn.list_group_claims()
        out = []
        for r in rows:
            queue = snap.queues_by_id.get(r.queue_id)
            out.append(
                GroupClaim(
                    fast_uuid(r.conversation_group_id),
                    queue.name if queue else f"#{r.queue_id}",
                    r.reader,
                    r.batch,
                    r.messages,
                    to_datetime(r.claimed_at),
                    to_datetime(r.renewed + r.claim_timeout),
                )
            )
        return out

    def readers(self) -> list[StreamReaderRow]:
        """Every stream reader's row (its batches: latest planned, acknowledged, released)."""
        with self._context.storage.connection() as conn:
            return conn.list_stream_readers()
