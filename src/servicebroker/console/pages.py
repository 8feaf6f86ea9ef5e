"""What each page of the console shows, read from a broker the console opened (never started):
the operations overview, the views (``broker.views``) and PEEK — plain data for the templates,
no HTTP here. Every function reads without locks and writes nothing."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..engine.operations import ConversationGroupOverview, Overview, QueueOverview, overview
from ..errors import CatalogError
from ..messages import Message
from ..views import ConversationEndpointRow, TransmissionQueueRow
from .bodies import BodyPreview, preview
from .rates import Sample
from .source import ConsoleBroker

__all__ = [
    "ConversationFilter",
    "ConversationPage",
    "MessageView",
    "QueuePage",
    "conversation_page",
    "counters",
    "endpoints",
    "queue_page",
    "sample",
]

PAGE_SIZE = 50
"""Messages per page of a queue."""

CONVERSATION_SCAN = 5000
"""Messages of each queue (and transmission-queue rows) a conversation's page looks through."""


@dataclass(frozen=True)
class MessageView:
    """A queue message with its body preview."""

    message: Message
    body: BodyPreview


@dataclass(frozen=True)
class QueuePage:
    """A queue's page: its overview row, a page of its messages (``after``: the queuing order
    the page starts after; ``next_after`` the one the next page starts after, None on the
    last page) and its conversation groups holding ready messages, each with whether a
    transaction holds it (locked) or a stream reader claims it."""

    queue: QueueOverview
    messages: list[MessageView]
    after: int
    next_after: int | None
    groups: list[ConversationGroupOverview]


@dataclass(frozen=True)
class ConversationFilter:
    """The conversations page's filters (empty string: any)."""

    state: str = ""
    service: str = ""
    contract: str = ""
    far_service: str = ""

    def matches(self, e: ConversationEndpointRow) -> bool:
        """True when ``e`` passes every filter given (state by ``state`` code or
        ``state_desc``, names exactly)."""
        return (
            (not self.state or self.state in (e.state, e.state_desc))
            and (not self.service or e.service_name == self.service)
            and (not self.contract or e.service_contract_name == self.contract)
            and (not self.far_service or e.far_service == self.far_service)
        )


@dataclass(frozen=True)
class ConversationPage:
    """One conversation: its endpoint here (``endpoint``), the far endpoint when it is in
    this database too (``far``), each end's messages on its queue (among the first
    :data:`CONVERSATION_SCAN`), and its rows in the transmission queue."""

    endpoint: ConversationEndpointRow
    far: ConversationEndpointRow | None
    messages: dict[str, list[MessageView]]
    transmission: list[TransmissionQueueRow]


def _total(counts: Mapping[str, int]) -> int:
    return sum(counts.values())


def counters(ov: Overview) -> Sample:
    """The message counters of an overview as a :class:`Sample` (its ``at`` is set by the
    sampler): per queue and in total, messages enqueued, SENT and RECEIVEd; in total, the
    messages ready and held (received, not yet committed) on every queue."""
    queues = {
        q.queue_name: {
            "enqueued": _total(q.messages_enqueued),
            "sent": _total(q.messages_sent),
            "received": _total(q.messages_received),
        }
        for q in ov.queues
    }
    totals: Counter[str] = Counter()
    for counts in queues.values():
        totals.update(counts)
    totals["ready"] = sum(q.ready_messages for q in ov.queues)
    totals["held"] = sum(q.received_messages for q in ov.queues)
    return Sample(0.0, dict(totals), queues)


def sample(broker: ConsoleBroker) -> Sample:
    """The broker's message counters now (:func:`counters` of a new overview).

    Raises:
        StorageError: the database cannot be read.
    """
    return counters(overview(broker))


def queue_page(broker: ConsoleBroker, name: str, after: int = -1) -> QueuePage:
    """The page of queue ``name``: up to :data:`PAGE_SIZE` messages with ``queuing_order``
    after ``after`` (-1: from the first), in queuing order.

    Raises:
        CatalogError: no queue is named ``name``.
        StorageError: the database cannot be read.
    """
    row = overview(broker).queue(name)
    if row is None:
        raise CatalogError(f"queue {name!r} does not exist")
    messages = broker.peek_after(name, after, top=PAGE_SIZE + 1)
    more = len(messages) > PAGE_SIZE
    messages = messages[:PAGE_SIZE]
    return QueuePage(
        row,
        [MessageView(m, preview(m.message_body, m.validation)) for m in messages],
        after,
        messages[-1].queuing_order if more and messages else None,
        broker.operations.conversation_groups(name),
    )


def endpoints(broker: ConsoleBroker, where: ConversationFilter) -> list[ConversationEndpointRow]:
    """The conversation endpoints that pass ``where``, system dialogs last.

    Raises:
        StorageError: the database cannot be read.
    """
    rows = [e for e in broker.views.conversation_endpoints() if where.matches(e)]
    return sorted(rows, key=lambda e: e.is_system)


def conversation_page(broker: ConsoleBroker, handle: uuid.UUID) -> ConversationPage | None:
    """The page of the conversation endpoint ``handle``, None when there is none.

    Raises:
        StorageError: the database cannot be read.
    """
    rows = broker.views.conversation_endpoints()
    here = next((e for e in rows if e.conversation_handle == handle), None)
    if here is None:
        return None
    far = next(
        (
            e
            for e in rows
            if e.conversation_id == here.conversation_id and e.is_initiator != here.is_initiator
        ),
        None,
    )
    handles = {here.conversation_handle} | ({far.conversation_handle} if far else set())
    messages: dict[str, list[MessageView]] = {}
    for end in (here, far):
        if end is None or not end.queue_name or end.queue_name in messages:
            continue
        mine = [
            m
            for m in broker.peek_after(end.queue_name, -1, top=CONVERSATION_SCAN)
            if m.conversation_handle in handles
        ]
        messages[end.queue_name] = [
            MessageView(m, preview(m.message_body, m.validation)) for m in mine
        ]
    waiting = [r for r in broker.views.transmission_queue() if r.conversation_handle in handles]
    return ConversationPage(here, far, messages, waiting)
