"""The sending half of the dialog protocol for one destination (NET-2..NET-5, NET-7, PRI-18),
sans I/O: messages are offered, fragments come out when due, acknowledgements and refusals come
in, and every decision reads the ``now`` it is given.

The caller (the transmitter) offers messages in transmission order (PRI-14) while
:attr:`Outbound.pending_bytes` is below the window (``TransportSettings.window_bytes``), so a
large transmission queue is never loaded into memory at once. :meth:`Outbound.frames_due` gives
the fragments to send — never sent, or sent and due again after the NET-4 wait (4 s, doubling
to 64 s) — in offer order, message by message in blocks of ``fragments_per_block`` so a small
message goes between the fragments of a large one (PRI-18). A fragment the receiver
holds (a soft ack, NET-5) is not sent again while the connection lives; a message is removed
only when the receiver says it is committed (NET-3). Each fragment's ``time_to_live`` is what is
left of its dialog's lifetime when it is written (FWD-3: a forwarder discards it once spent).
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

from ..errors import TransportError
from .settings import TransportSettings
from .wire import Ack, Fragment, MessageHeader, Refusal

__all__ = [
    "MessageKey",
    "Outbound",
    "OutboundStatistics",
    "TransportSettings",
    "fragment_count",
]

MessageKey = tuple[bytes, bool, int]
"""A message's key: (conversation_id, is_initiator of the sending side, sequence)."""


def fragment_count(message_size: int, fragment_size: int) -> int:
    """Fragments a body of ``message_size`` bytes travels in, ``fragment_size`` bytes each
    (at least 1; NET-5)."""
    return max(1, -(-message_size // fragment_size))


@dataclass(frozen=True, slots=True)
class OutboundStatistics:
    """Counters of one :class:`Outbound`: fragments sent (first sends and retransmissions),
    fragments retransmitted, messages acknowledged (committed at the receiver), refusals
    received, body bytes sent, and messages / body bytes still pending."""

    fragments_sent: int
    retransmissions: int
    messages_acked: int
    refusals: int
    bytes_sent: int
    pending_count: int
    pending_bytes: int


@dataclass(slots=True)
class _Pending:
    header: MessageHeader
    body: bytes
    queue: list[int]
    fresh: bool
    wait: float
    soft_acked: set[int] = dataclasses.field(default_factory=set)
    inflight: set[int] = dataclasses.field(default_factory=set)
    order: int = 0
    timer: float | None = None
    status: str | None = None


class Outbound:
    """Messages on their way to one destination (a broker instance at one address).

    Args:
        settings: a :class:`TransportSettings` (fragment size, retry waits, window).
    """

    def __init__(self, settings: TransportSettings | None = None) -> None:
        self.settings = settings or TransportSettings()
        self._messages: dict[MessageKey, _Pending] = {}
        self._ready: dict[MessageKey, None] = {}
        self._ready_sorted = True
        self._offers = 0
        self._timers: list[tuple[float, int, MessageKey]] = []
        self._ticket = 0
        self._pending_bytes = 0
        self._sent = 0
        self._retransmitted = 0
        self._acked = 0
        self._refusals = 0
        self._bytes_sent = 0
        self._inflight = 0
        self._cwnd = self.settings.slow_start_fragments

    @property
    def pending_count(self) -> int:
        """Messages offered and not yet acknowledged as committed."""
        return len(self._messages)

    @property
    def pending_bytes(self) -> int:
        """Body bytes of the pending messages (compare with ``settings.window_bytes``)."""
        return self._pending_bytes

    def __contains__(self, key: object) -> bool:
        """True while message ``key`` (a :data:`MessageKey`) is pending here (NET-3)."""
        return key in self._messages

    def offer(self, header: MessageHeader, body: bytes, now: float) -> None:
        """Take message ``header``/``body`` to send, after those offered before (PRI-14).

        ``header.message_size`` and ``header.fragment_count`` are set here from ``body`` and
        the fragment size. A message whose key (conversation_id, is_initiator, sequence) is
        already pending is ignored. ``now`` is broker-clock seconds (unused for now: the
        message is due at once).

        Raises:
            TransportError: ``body`` is not bytes.
        """
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TransportError(
                f"message {header.message_id.hex()} body must be bytes, got {type(body).__name__}"
            )
        key = (header.conversation_id, header.is_initiator, header.sequence)
        if key in self._messages:
            return
        count = fragment_count(len(body), self.settings.fragment_size)
        header = dataclasses.replace(header, message_size=len(body), fragment_count=count)
        self._messages[key] = _Pending(
            header, bytes(body), list(range(count)), True, self.settings.retry_initial
        )
        self._offers += 1
        self._messages[key].order = self._offers
        self._ready[key] = None
        self._pending_bytes += len(body)

    def status(self, key: MessageKey) -> str | None:
        """The last refusal's status of pending message ``key`` (NET-7), or None."""
        pending = self._messages.get(key)
        return None if pending is None else pending.status

    def frames_due(self, now: float, max_bytes: int) -> list[Fragment]:
        """The fragments to send at ``now`` (broker-clock seconds), at most about
        ``max_bytes`` of fragment data (at least one fragment when any is due): never-sent
        fragments and the retransmissions whose NET-4 wait is over, in offer order (PRI-14;
        the first pending message of a dialog is the one its receiver waits for, so it never
        queues behind later ones), message by message in blocks of ``fragments_per_block``
        (PRI-18: a small message travels between the fragments of a large one). Acks are not
        attached (the connection does that).

        At most :attr:`send_window` fragments are in flight (sent on this connection and
        neither acknowledged nor given up by a retry): the window starts at
        ``slow_start_fragments`` on each connection, grows by one per fragment acknowledged
        (fragments a retry finds lost leave the flight), so a connection that fails early does
        not take the whole window with it each time."""
        self._fire_timers(now)
        if not self._ready_sorted:
            # in offer order: the first pending message of a dialog is the one its receiver
            # waits for (in-order delivery), so it never queues behind later ones
            self._ready = dict.fromkeys(sorted(self._ready, key=self._order))
            self._ready_sorted = True
        out: list[Fragment] = []
        budget = [max_bytes]
        queue = self._ready
        while queue and (budget[0] > 0 or not out) and self._inflight < self._cwnd:
            for key in list(queue):
                self._take_block(key, queue, out, budget, now)
                if (budget[0] <= 0 and out) or self._inflight >= self._cwnd:
                    break
        return out

    def _order(self, key: MessageKey) -> int:
        return self._messages[key].order

    @property
    def send_window(self) -> int:
        """Fragments that may be in flight now (the congestion window, see frames_due)."""
        return self._cwnd

    def _take_block(
        self,
        key: MessageKey,
        queue: dict[MessageKey, None],
        out: list[Fragment],
        budget: list[int],
        now: float,
    ) -> None:
        pending = self._messages[key]
        size = self.settings.fragment_size
        header = pending.header
        if header.lifetime is not None:  # FWD-3: what is left of the dialog's lifetime
            header = dataclasses.replace(header, time_to_live=max(0.0, header.lifetime - now))
        for _ in range(self.settings.fragments_per_block):
            if not pending.queue or (budget[0] <= 0 and out) or self._inflight >= self._cwnd:
                break
            index = pending.queue.pop(0)
            data = pending.body[index * size : (index + 1) * size]
            out.append(Fragment(header, index, data))
            budget[0] -= max(1, len(data))
            self._sent += 1
            self._bytes_sent += len(data)
            if index not in pending.inflight:
                pending.inflight.add(index)
                self._inflight += 1
            if not pending.fresh:
                self._retransmitted += 1
        if not pending.queue:
            del queue[key]
            pending.fresh = False
            self._arm(key, pending, now + pending.wait)
        elif pending.timer is None and pending.inflight:
            # a message partly sent (the window is full) retries what it sent, too
            self._arm(key, pending, now + pending.wait)

    def _arm(self, key: MessageKey, pending: _Pending, when: float) -> None:
        pending.timer = when
        self._ticket += 1
        heapq.heappush(self._timers, (when, self._ticket, key))

    def _fire_timers(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            when, _, key = heapq.heappop(self._timers)
            pending = self._messages.get(key)
            if pending is None or pending.timer != when:
                continue
            pending.timer = None
            if pending.inflight:  # lost: no longer in flight
                self._inflight -= len(pending.inflight)
                pending.inflight.clear()
            # NET-4: the wait doubles after each retry, up to retry_max
            pending.wait = min(pending.wait * 2, self.settings.retry_max)
            indices = [
                i for i in range(pending.header.fragment_count) if i not in pending.soft_acked
            ]
            if not indices:
                # every fragment is held, yet no commit came: the receiver lost them or the
                # commit's ack was lost; send them all again to be acknowledged again
                pending.soft_acked.clear()
                indices = list(range(pending.header.fragment_count))
            pending.queue = indices
            if key not in self._ready:
                self._ready[key] = None
                self._ready_sorted = False

    def next_due(self, now: float) -> float | None:
        """When :meth:`frames_due` next has something (``now`` if already), or None; a full
        send window waits for acks or the next retry."""
        if self._ready and self._inflight < self._cwnd:
            return now
        while self._timers:
            when, _, key = self._timers[0]
            pending = self._messages.get(key)
            if pending is not None and pending.timer == when:
                return max(now, when)
            heapq.heappop(self._timers)
        return None

    def on_ack(self, ack: Ack, now: float) -> list[MessageKey]:
        """Take acknowledgement ``ack`` (NET-3): a whole-message ack removes the message and
        returns its key (the caller deletes it from the transmission queue); a fragment ack
        is recorded (that fragment is not sent again while the connection lives, NET-5) and
        returns []. Acks of messages not pending (duplicates) are ignored."""
        key = (ack.conversation_id, ack.is_initiator, ack.sequence)
        pending = self._messages.get(key)
        if pending is None:
            return []
        if ack.fragment is not None:
            if 0 <= ack.fragment < pending.header.fragment_count:
                pending.soft_acked.add(ack.fragment)
                if ack.fragment in pending.inflight:
                    pending.inflight.discard(ack.fragment)
                    self._inflight -= 1
                    self._cwnd += 1
                if ack.fragment in pending.queue:
                    pending.queue.remove(ack.fragment)
            return []
        del self._messages[key]
        self._inflight -= len(pending.inflight)
        self._cwnd += max(1, len(pending.inflight))
        self._ready.pop(key, None)
        self._pending_bytes -= len(pending.body)
        self._acked += 1
        return [key]

    def withdraw(self, key: MessageKey) -> bool:
        """Take back pending message ``key`` without an acknowledgement: its route now goes
        elsewhere (TICK-3b reclassification); the caller offers it to its new destination.
        Returns whether it was pending. A copy already on the wire may still be
        acknowledged: the caller treats that ack as for a message not pending."""
        pending = self._messages.pop(key, None)
        if pending is None:
            return False
        self._inflight -= len(pending.inflight)
        self._cwnd += len(pending.inflight)
        self._ready.pop(key, None)
        self._pending_bytes -= len(pending.body)
        return True

    def on_refusal(self, refusal: Refusal, now: float) -> str:
        """Take ``refusal`` (NET-7): the message stays, its status is ``refusal.status``
        (returned, for transmission_status), its held fragments are forgotten, and it is sent
        again on the NET-4 schedule. A refusal of a message not pending changes nothing."""
        pending = self._messages.get(
            (refusal.conversation_id, refusal.is_initiator, refusal.sequence)
        )
        if pending is not None:
            pending.status = refusal.status
            pending.soft_acked.clear()
            self._refusals += 1
        return refusal.status

    def on_disconnect(self, now: float) -> None:
        """The connection ended: fragment acks are forgotten (they held only while it lived)
        and every pending message is due again at once on the next connection, its NET-4
        wait starting over."""
        self._inflight = 0
        self._cwnd = self.settings.slow_start_fragments
        for key, pending in self._messages.items():
            pending.soft_acked.clear()
            pending.inflight.clear()
            pending.timer = None
            pending.wait = self.settings.retry_initial
            pending.queue = list(range(pending.header.fragment_count))
            self._ready[key] = None
        self._ready_sorted = False
        self._timers.clear()

    def statistics(self) -> OutboundStatistics:
        """The counters so far (:class:`OutboundStatistics`)."""
        return OutboundStatistics(
            self._sent,
            self._retransmitted,
            self._acked,
            self._refusals,
            self._bytes_sent,
            len(self._messages),
            self._pending_bytes,
        )
