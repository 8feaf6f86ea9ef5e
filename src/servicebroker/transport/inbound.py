"""The receiving half of the dialog protocol: the message dispatcher (TICK-2c, NET-2, NET-5),
sans I/O.

:meth:`Inbound.on_fragment` reassembles each message from its fragments (NET-5: a message not
complete cannot be received) and says which fragments it holds (soft acks, good while the
connection lives); a whole message comes out as :class:`Completed` for the storage side, which
knows each conversation side's next expected sequence number: it commits the message to the
target queue and acknowledges it (NET-3), or — out of order — gives it back with
:meth:`Inbound.hold` until :meth:`Inbound.release` after the missing one is committed.
:meth:`Inbound.cleanup` is TICK-2c: it drops every held (out-of-order) message and every message
in progress older than ``stale_after`` (10 s); the senders retry them (NET-4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .settings import TransportSettings
from .wire import Ack, Fragment, MessageHeader

__all__ = ["Completed", "Dropped", "Inbound", "InboundStatistics"]

_Key = tuple[bytes, bool, int]


@dataclass(frozen=True, slots=True)
class Completed:
    """A whole message: its ``header`` and ``body`` (bytes), reassembled at ``arrived``
    (broker-clock seconds). Not yet acknowledged: the storage side acks it after its commit."""

    header: MessageHeader
    body: bytes
    arrived: float = 0.0

    @property
    def key(self) -> tuple[bytes, bool, int]:
        """(conversation_id, is_initiator of the sender, sequence)."""
        return (self.header.conversation_id, self.header.is_initiator, self.header.sequence)


@dataclass(frozen=True, slots=True)
class Dropped:
    """A message in progress the dispatcher dropped (``reason`` says why: over the memory
    limit, stale, or inconsistent fragments); its sender sends it again (NET-4)."""

    conversation_id: bytes
    is_initiator: bool
    sequence: int
    reason: str


@dataclass(frozen=True, slots=True)
class InboundStatistics:
    """Counters of one :class:`Inbound`: fragments received, duplicate fragments, messages
    completed, messages dropped (memory limit, TICK-2c, inconsistent), held messages and bytes
    of messages in progress now."""

    fragments_received: int
    duplicate_fragments: int
    messages_completed: int
    messages_dropped: int
    held: int
    buffered_bytes: int


@dataclass(slots=True)
class _Partial:
    header: MessageHeader
    started: float
    parts: dict[int, bytes] = field(default_factory=dict)
    size: int = 0


class Inbound:
    """The dispatcher of one broker instance (or one connection; it holds no storage).

    Args:
        settings: a :class:`TransportSettings` (``reassembly_bytes``, ``stale_after``).
    """

    def __init__(self, settings: TransportSettings | None = None) -> None:
        self.settings = settings or TransportSettings()
        self._partials: dict[_Key, _Partial] = {}
        self._held: dict[_Key, tuple[Completed, float]] = {}
        self._buffered = 0
        self._received = 0
        self._duplicates = 0
        self._completed = 0
        self._dropped = 0

    @property
    def buffered_bytes(self) -> int:
        """Fragment bytes of the messages in progress."""
        return self._buffered

    @property
    def held_count(self) -> int:
        """Out-of-order messages held (:meth:`hold`)."""
        return len(self._held)

    def on_fragment(self, fragment: Fragment, now: float) -> list[Completed | Ack | Dropped]:
        """Take ``fragment`` at ``now`` (broker-clock seconds).

        Returns, in order: a fragment ack (``Ack(..., fragment=index)``) when the message has
        more than one fragment (also for a duplicate of a fragment held: NET-5); a
        :class:`Dropped` for each message dropped to stay within ``reassembly_bytes`` or whose
        fragments disagree; and :class:`Completed` when this fragment completes its message
        (NET-5). A single-fragment message completes at once and gets no fragment ack (its
        ack comes after the commit, NET-3).
        """
        self._received += 1
        h = fragment.header
        key = (h.conversation_id, h.is_initiator, h.sequence)
        out: list[Completed | Ack | Dropped] = []
        if h.fragment_count == 1:
            if len(fragment.data) != h.message_size:
                self._dropped += 1
                out.append(
                    Dropped(
                        *key, f"body of {len(fragment.data)} bytes, header says {h.message_size}"
                    )
                )
                return out
            self._completed += 1
            out.append(Completed(h, bytes(fragment.data), now))
            return out
        partial = self._partials.get(key)
        if partial is not None and (
            partial.header.message_id != h.message_id
            or partial.header.fragment_count != h.fragment_count
            or partial.header.message_size != h.message_size
        ):
            out.append(self._drop(key, "another message with the same sequence number arrived"))
            partial = None
        if partial is None:
            partial = self._partials[key] = _Partial(h, now)
        out.append(Ack(h.conversation_id, h.is_initiator, h.sequence, fragment.index))
        if fragment.index in partial.parts:
            self._duplicates += 1
            return out
        partial.parts[fragment.index] = bytes(fragment.data)
        partial.size += len(fragment.data)
        self._buffered += len(fragment.data)
        if len(partial.parts) == h.fragment_count:
            del self._partials[key]
            self._buffered -= partial.size
            body = b"".join(partial.parts[i] for i in range(h.fragment_count))
            if len(body) != h.message_size:
                self._dropped += 1
                out.append(
                    Dropped(*key, f"body of {len(body)} bytes, header says {h.message_size}")
                )
            else:
                self._completed += 1
                out.append(Completed(h, body, now))
            return out
        while self._buffered > self.settings.reassembly_bytes and len(self._partials) > 1:
            oldest = next(k for k in self._partials if k != key)
            out.append(
                self._drop(
                    oldest,
                    f"messages in progress hold {self._buffered} bytes, beyond "
                    f"reassembly_bytes {self.settings.reassembly_bytes}",
                )
            )
        return out

    def _drop(self, key: _Key, reason: str) -> Dropped:
        partial = self._partials.pop(key)
        self._buffered -= partial.size
        self._dropped += 1
        return Dropped(*key, reason)

    def hold(self, completed: Completed, now: float) -> None:
        """Keep ``completed``, which arrived out of order, until :meth:`release` or TICK-2c
        (:meth:`cleanup`). A second copy replaces the first."""
        self._held[completed.key] = (completed, now)

    def release(
        self, conversation_id: bytes, is_initiator: bool, sequence: int
    ) -> Completed | None:
        """The held message ``sequence`` of that conversation side, taken out of the buffer
        (the storage side calls this after committing ``sequence - 1``), or None."""
        entry = self._held.pop((conversation_id, is_initiator, sequence), None)
        return None if entry is None else entry[0]

    def cleanup(self, now: float) -> int:
        """TICK-2c at ``now``: drop every held (out-of-order) message and every message in
        progress that began more than ``stale_after`` seconds ago; return how many."""
        dropped = len(self._held)
        self._dropped += dropped
        self._held.clear()
        limit = now - self.settings.stale_after
        for key in [k for k, p in self._partials.items() if p.started <= limit]:
            self._drop(key, "stale")
            dropped += 1
        return dropped

    def statistics(self) -> InboundStatistics:
        """The counters so far (:class:`InboundStatistics`)."""
        return InboundStatistics(
            self._received,
            self._duplicates,
            self._completed,
            self._dropped,
            len(self._held),
            self._buffered,
        )
