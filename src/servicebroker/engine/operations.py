"""What an operator sees: one read of a broker database across every process using it — each
queue's messages by state, its conversation groups and which are locked, its activation, the
transmission queue, the dialogs by state, and the statistics every broker publishes
(:mod:`.statistics`). The web console, the Prometheus exporter and ``servicebroker diagnose``
are built on it.

It only reads: no group is locked, nothing is written, and a broker opened just to look (never
started) publishes nothing. Run it in a process of its own (``servicebroker console``,
``servicebroker metrics``): the brokers doing the work pay nothing for it but the reads.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..clock import to_datetime
from ..dialogs import STATE_DESC
from ..storage.rows import StatisticsRow
from .context import BrokerContext
from .statistics import InstanceStatistics, QueueStatistics, broker_time, read_published, total

__all__ = ["ConversationGroupOverview", "Operations", "Overview", "QueueOverview", "overview"]


@dataclass(frozen=True)
class QueueOverview:
    """One queue as an operator sees it.

    Attributes:
        queue_name, queue_id: the queue.
        is_receive_enabled: STATUS = ON (a queue turned OFF by poison handling is False).
        is_activation_enabled, activation_procedure, max_readers: its ACTIVATION clause.
        is_poison_message_handling_enabled: POISON_MESSAGE_HANDLING (STATUS = ON).
        ready_messages: ready messages (status 1) in groups no transaction holds or claims.
        received_messages: ready messages in groups a transaction holds: received (or locked
            by GET CONVERSATION GROUP) and not yet committed.
        claimed_messages: ready messages in groups a stream reader claims (Spark batches not
            yet committed).
        retained_messages: messages kept by RETENTION (status 0 and 3).
        conversation_groups: groups holding ready messages.
        locked_groups: of those, the ones a transaction holds (RCV-2).
        claimed_groups: of those, the ones a stream reader claims.
        monitor_state: the queue monitor's state in the leading broker (``INACTIVE``,
            ``NOTIFIED``, ``RECEIVES_OCCURRING``; ACT-3), None when no started broker
            monitors the queue.
        tasks_waiting: sessions waiting in RECEIVE on it, as the monitor last saw them.
        readers_running: activated procedures running now (ACT-7).
        peak_readers: the most that ran at once.
        activation_starts: procedures started or notifications raised, all processes.
        poison_events: times poison handling turned it OFF, all processes (POI-1).
        messages_enqueued, messages_sent, messages_received: by message type name, over all
            processes since statistics began: put on this queue; SENT by services on this
            queue; RECEIVEd from it in committed transactions.
    """

    queue_name: str
    queue_id: int
    is_receive_enabled: bool
    is_activation_enabled: bool
    activation_procedure: str | None
    max_readers: int
    is_poison_message_handling_enabled: bool
    ready_messages: int
    received_messages: int
    claimed_messages: int
    retained_messages: int
    conversation_groups: int
    locked_groups: int
    claimed_groups: int
    monitor_state: str | None
    tasks_waiting: int
    readers_running: int
    peak_readers: int
    activation_starts: int
    poison_events: int
    messages_enqueued: dict[str, int]
    messages_sent: dict[str, int]
    messages_received: dict[str, int]


@dataclass(frozen=True)
class ConversationGroupOverview:
    """A conversation group holding ready messages: its queue, how many, and whether a
    transaction holds it (``is_locked``) or a stream reader claims it (``is_claimed``)."""

    conversation_group_id: uuid.UUID
    queue_name: str
    ready_messages: int
    is_locked: bool
    is_claimed: bool


@dataclass(frozen=True)
class Overview:
    """The whole database at ``taken_at`` (UTC, on the brokers' clock: the freshest running
    broker's last reading plus the real time since, else the reader's own clock).

    Attributes:
        database: the database as messages name it.
        queues: every queue, by name.
        transmission_count: messages in the transmission queue (QUE-3).
        transmission_oldest: the oldest one's enqueue time, or None.
        transmission_by_status: messages by ``transmission_status`` ("" before a first try).
        dialogs_by_state: conversation endpoints by ``state_desc`` (``CONVERSING``, …).
        instances: what each broker object published (``views.dm_broker_statistics()``).
        totals: their sum (:func:`servicebroker.engine.statistics.total`).
    """

    taken_at: datetime
    database: str
    queues: list[QueueOverview]
    transmission_count: int
    transmission_oldest: datetime | None
    transmission_by_status: dict[str, int]
    dialogs_by_state: dict[str, int]
    instances: list[InstanceStatistics]
    totals: InstanceStatistics

    def queue(self, name: str) -> QueueOverview | None:
        """The queue named ``name``, or None."""
        return next((q for q in self.queues if q.queue_name == name), None)


class Operations:
    """The operator's read model of one broker (``broker.operations``).

    Args:
        context: the broker's shared parts (storage, catalog, clock).
        database: the database as messages name it.
    """

    def __init__(self, context: BrokerContext, database: str) -> None:
        self._context = context
        self._database = database

    def now(self) -> datetime:
        """The brokers' time now (UTC), as :attr:`Overview.taken_at` reads it, from the
        published statistics alone (a cheap read for pages that show ages)."""
        with self._context.storage.connection() as conn:
            rows = conn.list_statistics()
        return self._published(rows)[1]

    def _published(self, rows: list[StatisticsRow]) -> tuple[list[InstanceStatistics], datetime]:
        """The published statistics of ``rows`` read now, and the brokers' time: the
        freshest running broker's reading plus the real time since (liveness is real time,
        whatever the brokers' clock), else this broker's clock."""
        wall_now = time.time()
        instances = read_published(rows, wall_now)
        now = broker_time(instances, wall_now)
        seconds = self._context.clock.now() if now is None else now
        return instances, to_datetime(seconds) or datetime.max

    def conversation_groups(self, queue: str | None = None) -> list[ConversationGroupOverview]:
        """The conversation groups holding ready messages (of ``queue`` only, if given), by
        queue then group id, with whether each is locked or claimed.

        Raises:
            CatalogError: an unknown queue.
        """
        context = self._context
        with context.storage.connection() as conn:
            snap = context.catalog.snapshot(conn)
            only = None if queue is None else snap.queue(queue).queue_id
            rows = [r for r in conn.ready_group_counts() if only in (None, r.queue_id)]
            locked = conn.locked_groups([r.conversation_group_id for r in rows])
            claimed = {c.conversation_group_id for c in conn.list_group_claims()}
        out = [
            ConversationGroupOverview(
                uuid.UUID(bytes=r.conversation_group_id),
                q.name if (q := snap.queues_by_id.get(r.queue_id)) else f"#{r.queue_id}",
                r.messages,
                r.conversation_group_id in locked,
                r.conversation_group_id in claimed,
            )
            for r in rows
        ]
        return sorted(out, key=lambda g: (g.queue_name, str(g.conversation_group_id)))

    def overview(self) -> Overview:
        """Read everything an operator's first page shows (see :class:`Overview`)."""
        context = self._context
        with context.storage.connection() as conn:
            snap = context.catalog.snapshot(conn, fresh=True)
            counts = conn.queue_counts()
            groups = conn.ready_group_counts()
            locked = conn.locked_groups([g.conversation_group_id for g in groups])
            claimed = {c.conversation_group_id for c in conn.list_group_claims()}
            states = conn.endpoint_state_counts()
            transmission = conn.transmission_summary()
            rows = conn.list_statistics()
        instances, taken_at = self._published(rows)
        totals = total(instances)
        retained: Counter[int] = Counter()
        for c in counts:
            if c.status in (0, 3):
                retained[c.queue_id] += c.messages
        ready: Counter[int] = Counter()
        received: Counter[int] = Counter()
        in_claims: Counter[int] = Counter()
        n_claimed: Counter[int] = Counter()
        n_locked: Counter[int] = Counter()
        n_groups: Counter[int] = Counter()
        for g in groups:
            n_groups[g.queue_id] += 1
            if g.conversation_group_id in claimed:
                in_claims[g.queue_id] += g.messages
                n_claimed[g.queue_id] += 1
            elif g.conversation_group_id in locked:
                received[g.queue_id] += g.messages
                n_locked[g.queue_id] += 1
            else:
                ready[g.queue_id] += g.messages
        queues = []
        for q in sorted(snap.queues_by_id.values(), key=lambda q: q.name):
            s = totals.queues.get(q.name, QueueStatistics())
            queues.append(
                QueueOverview(
                    q.name,
                    q.queue_id,
                    bool(q.status),
                    bool(q.activation_enabled),
                    q.activation_procedure,
                    q.max_queue_readers,
                    bool(q.poison_message_handling),
                    ready[q.queue_id],
                    received[q.queue_id],
                    in_claims[q.queue_id],
                    retained[q.queue_id],
                    n_groups[q.queue_id],
                    n_locked[q.queue_id],
                    n_claimed[q.queue_id],
                    s.monitor_state,
                    s.tasks_waiting,
                    s.readers_running,
                    s.peak_readers,
                    s.activation_starts,
                    s.poison_events,
                    dict(s.messages_enqueued),
                    dict(s.messages_sent),
                    dict(s.messages_received),
                )
            )
        oldest = min((t.oldest for t in transmission), default=None)
        by_status: Counter[str] = Counter()
        for t in transmission:
            by_status[t.transmission_status or ""] += t.messages
        return Overview(
            taken_at=taken_at,
            database=self._database,
            queues=queues,
            transmission_count=sum(t.messages for t in transmission),
            transmission_oldest=to_datetime(oldest),
            transmission_by_status=dict(by_status),
            dialogs_by_state={STATE_DESC.get(state, state): n for state, n in sorted(states)},
            instances=instances,
            totals=totals,
        )


class _Observable(Protocol):
    @property
    def operations(self) -> Operations: ...


def overview(broker: _Observable) -> Overview:
    """``broker.operations.overview()``: the operator's view of a
    :class:`~servicebroker.broker.Broker`'s database."""
    return broker.operations.overview()
