"""The transmission queue (QUE-3, PRI-14..18, ``sys.transmission_queue``): where a message waits
when it cannot be put on its target queue now — the target queue is OFF, the target service does
not exist yet, or an earlier message of the same conversation side still waits — and the order
in which waiting messages leave.

Two parts:

- :class:`TransmissionQueue` works inside one commit's write transaction: it holds a message
  (:meth:`~TransmissionQueue.hold`, with its ``transmission_status``), tells whether a
  conversation side must wait behind an earlier message, and drains: messages leave in
  transmission order (effective level, then send order) to a :class:`Destination`, which puts
  them on a queue or says why it cannot yet.
- :class:`TransmissionService` is the broker-level shell: one write transaction per batch, run
  when a queue turns ON or a service is created, and on every timer tick (a periodic task).

:class:`Destination` has one implementation, the commit's delivery
(:class:`servicebroker.engine.delivery.Applier`): it puts a leaving message on a queue of this
database, or — when the conversation's route (:mod:`servicebroker.catalog.routing`) names
another instance — marks it as the transport's, a row the transport's transmitter reads
(:mod:`servicebroker.transport.pending`); the transport implements no :class:`Destination`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..catalog import CatalogCache, CatalogSnapshot
from ..catalog.priorities import AGING_INTERVAL, transmission_order
from ..clock import Clock
from ..dialogs import Arrival
from ..messages import Outgoing
from ..storage.base import Storage, StorageConnection
from ..storage.rows import EndpointRow, TransmissionRow
from .neighbours import neighbourhoods
from .statistics import StatisticsRecorder

__all__ = [
    "Committer",
    "Destination",
    "TransmissionQueue",
    "TransmissionService",
    "TransmissionStatistics",
]


class Destination(Protocol):
    """Where messages leaving the transmission queue go (one commit's view of it)."""

    def endpoint(self, handle: bytes) -> EndpointRow | None:
        """The sending endpoint as it stands in this commit, or None when it is gone."""
        ...

    def deliver_now(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> str | None:
        """Put ``out`` from ``sender`` where it goes; None when delivered (or discarded by the
        far endpoint's state, DLG-4), else why it must keep waiting (the new
        ``transmission_status``)."""
        ...


class TransmissionQueue:
    """The transmission queue inside one write transaction of ``conn``.

    Args:
        conn: a storage connection in its write transaction.
        catalog: the catalog snapshot (service names, HONOR_BROKER_PRIORITY).
        now: the broker's time, seconds (``enqueue_time`` of held messages; aging).
    """

    def __init__(self, conn: StorageConnection, catalog: CatalogSnapshot, now: float) -> None:
        self.conn = conn
        self.catalog = catalog
        self.now = now
        self._any: bool | None = None
        self._remote: list[tuple[Any, ...]] = []

    def knows_local(self, waiting: bool) -> None:
        """Whether a row waits for a queue of this database, read by the commit as it locked
        its endpoints (:meth:`StorageConnection.lock_conversations`): no query of its own."""
        self._any = waiting

    def blocks(self, sender: EndpointRow) -> bool:
        """True when a message sent earlier by ``sender``'s side of its conversation waits here:
        a later one must wait behind it, so the send order is kept (DLG-2). Only a dialog
        within this database asks (one with another instance always goes to the transport),
        so only rows waiting for a queue here count: the transport's rows, always there
        while another instance has not acknowledged, cost a local SEND no query."""
        if self._any is None:
            self._any = self.conn.transmission_exists_of(remote=False)
        return self._any and self.conn.transmission_waiting(
            sender.conversation_id, sender.is_initiator
        )

    def hold(self, sender: EndpointRow, out: Outgoing, arrival: Arrival, reason: str) -> str:
        """Keep ``out`` from ``sender`` here, for a queue of this database, with ``reason`` as
        its ``transmission_status``, at the sender endpoint's level (PRI-14); returns
        ``reason`` (QUE-3)."""
        self.conn.insert_transmissions([self._row(sender, out, arrival, reason)])
        self._any = True
        return reason

    def hold_remote(
        self, sender: EndpointRow, out: Outgoing, arrival: Arrival, to_broker_instance: str
    ) -> None:
        """Keep ``out`` from ``sender`` for the transport: it leaves for another broker
        instance (``to_broker_instance``, a GUID string; "" while not known, RTE-4) and is
        deleted when that instance acknowledges it (NET-3). Written in one batch by
        :meth:`flush` — nothing reads the transport's rows within the transaction."""
        self._remote.append(
            self._row(sender, out, arrival, "", remote=True, to_broker=to_broker_instance or None)
        )

    def _row(
        self,
        sender: EndpointRow,
        out: Outgoing,
        arrival: Arrival,
        reason: str,
        *,
        remote: bool = False,
        to_broker: str | None = None,
    ) -> tuple[Any, ...]:
        """The transmission-queue row of ``out`` (a TransmissionRow without its id): for a
        queue here, or with ``remote`` the transport's, for instance ``to_broker``."""
        return (
            sender.conversation_handle,
            sender.conversation_id,
            int(sender.is_initiator),
            sender.far_service,
            self.catalog.services_by_id[sender.service_id].name,
            sender.service_contract_id,
            self.now,
            out.sequence,
            out.message_type_id,
            out.validation,
            out.body,
            out.message_id,
            arrival.value,
            reason,
            sender.priority,
            sender.lifetime,
            int(remote),
            to_broker,
        )

    def flush(self) -> None:
        """Write the transport's rows held since the last flush, in send order, before the
        commit (NET-3: they stay until acknowledged)."""
        if self._remote:
            self.conn.insert_transmissions(self._remote)
            self._remote = []

    def drop_endpoint(self, sender: EndpointRow) -> None:
        """Drop the unsent messages of ``sender``'s side (END CONVERSATION WITH ERROR or WITH
        CLEANUP, DLG-4)."""
        side = (sender.conversation_id, int(sender.is_initiator))
        self._remote = [r for r in self._remote if (r[1], r[2]) != side]  # not written yet
        self.conn.delete_transmission_of_endpoint(sender.conversation_id, sender.is_initiator)

    def batch(
        self, limit: int, aging_interval: float | None = AGING_INTERVAL
    ) -> list[TransmissionRow]:
        """The rows that leave next, in order (PRI-14, PRI-16, PRI-18): the first ``limit`` are
        exact (each level's oldest ``limit`` rows are read through an index and merged by
        :func:`~servicebroker.catalog.priorities.transmission_order`); later ones are candidates only."""
        candidates = {row.transmission_id: row for row in self.conn.transmission_pending(limit)}
        order = transmission_order(
            ((tid, row.priority, row.enqueue_time) for tid, row in candidates.items()),
            self.now,
            honor=self.catalog.honor_broker_priority,
            aging_interval=aging_interval,
        )
        return [candidates[tid] for tid in order]

    def drain(
        self,
        destination: Destination,
        limit: int = 1000,
        aging_interval: float | None = AGING_INTERVAL,
    ) -> int:
        """Offer up to ``limit`` waiting messages to ``destination`` in transmission order
        (QUE-3; PRI-14: effective level, then send order, across every destination; PRI-16:
        level 5 for all while HONOR_BROKER_PRIORITY is OFF; PRI-18: aging by ``aging_interval``
        seconds per level). A conversation side whose message cannot leave keeps its later
        messages back. Returns how many left (delivered, or dropped because their sender is
        gone)."""
        moved = 0
        blocked: set[tuple[bytes, int]] = set()
        for row in self.batch(limit, aging_interval):
            if moved >= limit:
                break
            tid = row.transmission_id
            key = (row.conversation_id, row.is_initiator)
            if key in blocked:
                continue
            sender = destination.endpoint(row.conversation_handle)
            if not self.conn.lock_transmission(tid):
                continue  # delivered by a concurrent drain, or dropped by END meanwhile
            if sender is None:
                self.conn.delete_transmission(tid)
                moved += 1
                continue
            mt_id = row.message_type_id
            out = Outgoing(
                mt_id,
                self.catalog.message_types_by_id[mt_id].name,
                row.validation,
                row.message_body,
                row.message_id,
                row.message_sequence_number,
            )
            reason = destination.deliver_now(sender, out, Arrival(row.arrival))
            if reason is None:
                self.conn.delete_transmission(tid)
                moved += 1
            else:
                blocked.add(key)
                if reason != row.transmission_status:
                    self.conn.set_transmission_status(tid, reason)
        self._any = None
        return moved


class Committer(Destination, Protocol):
    """One commit's delivery work as :class:`TransmissionService` drives it: a
    :class:`Destination` with its transmission queue, what it woke, and a final write (the
    local side is :class:`servicebroker.engine.delivery.Applier`)."""

    transmission: TransmissionQueue
    woken_queues: set[int]
    arrived_on_empty: set[int]
    to_neighbours: bool

    @property
    def own_instance(self) -> str | None:
        """This database's broker instance (GUID text), or None."""
        ...

    def finish(self) -> None:
        """Write what the commit changed (messages, endpoints) before it commits."""
        ...

    def tally(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """(enqueued, sent) messages by (queue name, message type name)."""
        ...


@dataclass(frozen=True)
class TransmissionStatistics:
    """What the transmission service has done in this process: passes run, messages moved."""

    passes: int
    moved: int


class TransmissionService:
    """Drains the transmission queue of one broker, a write transaction per batch.

    Args:
        storage: the broker's storage.
        catalog: its catalog cache.
        clock: its clock.
        committer: makes one commit's delivery work from (connection, catalog, now) —
            :class:`servicebroker.engine.delivery.Applier`.
        committed: called after each commit with (queues that got messages, queues where a
            message arrived on an empty queue), to wake waiters and monitors (ACT-4a).
        aging_interval: PRI-18's seconds per level, None for strict priority.
        statistics: the broker's counters (messages put on queues), or None.
    """

    def __init__(
        self,
        storage: Storage,
        catalog: CatalogCache,
        clock: Clock,
        committer: Callable[[StorageConnection, CatalogSnapshot, float], Committer],
        committed: Callable[[set[int], frozenset[int]], None],
        aging_interval: float | None = AGING_INTERVAL,
        statistics: StatisticsRecorder | None = None,
    ) -> None:
        self._storage = storage
        self._statistics = statistics
        self._catalog = catalog
        self._clock = clock
        self._committer = committer
        self._committed = committed
        self.aging_interval = aging_interval
        self._lock = threading.Lock()
        self._passes = 0
        self._moved = 0

    def drain(self, batch: int = 1000) -> int:
        """Move what can leave the transmission queue, ``batch`` messages per transaction in
        transmission order, until a pass moves fewer; returns how many moved.

        Raises:
            StorageError: the database failed (what was committed stays).
        """
        total = 0
        while True:
            with self._storage.connection() as conn:
                if not conn.transmission_exists_of(remote=False):
                    return total
                conn.begin_write()
                work = self._committer(conn, self._catalog.snapshot(conn), self._clock.now())
                moved = work.transmission.drain(work, batch, self.aging_interval)
                work.finish()
                conn.commit()
            with self._lock:
                self._passes += 1
                self._moved += moved
            if self._statistics is not None:
                self._statistics.delivered(work.tally()[0])
            self._committed(work.woken_queues, frozenset(work.arrived_on_empty))
            if work.to_neighbours:  # moved to another database of the instance: carried now
                neighbourhoods.committed(work.own_instance)
            total += moved
            if moved < batch:
                return total

    def retry(self, now: float) -> None:
        """The periodic task: retry the transmission queue (QUE-3); ``now`` is unused (each
        pass reads the clock)."""
        self.drain()

    def statistics(self) -> TransmissionStatistics:
        """A snapshot of this service's counters."""
        with self._lock:
            return TransmissionStatistics(self._passes, self._moved)
