"""Message forwarding (FWD-1..3, TICK-4b, PRI-11), sans I/O: fragments and ``now`` in, the
fragments to pass on and the paths back out.

A broker whose Service Broker endpoint has MESSAGE_FORWARDING = ENABLED passes on a message
for a service elsewhere to the next hop its routes give (:func:`next_hop`). Forwarded fragments
are held in memory only (never in a queue), within MESSAGE_FORWARD_SIZE megabytes in total; a
fragment that would exceed it is dropped (FWD-2). Fragments are passed on as they came, without
reassembly, except that each hop takes one from ``hops_remaining`` and the time held from
``time_to_live``: a fragment that arrives with no hops left, or whose time to live is spent, is
discarded (FWD-3), and TICK-4b (:meth:`Forwarder.cleanup`) deletes what could not be passed on
within 60 seconds of its arrival. Forwarding ignores priorities: every forwarded fragment goes
at level 5, in the order it arrived (PRI-11).

A forwarder never acknowledges anything itself: only the final destination does, and its
acknowledgements (and refusals, NET-7) travel back by the reverse path the forwarder learned
from each conversation side's fragments (:meth:`Forwarder.source_of`); the sender retries until
an acknowledgement comes (NET-4), so a forwarder that loses what it holds (a crash, a full
buffer) loses nothing for good, and the destination's duplicate detection (NET-2) keeps each
message exactly once.

"Service Broker message forwarding" (docs/database-engine/service-broker/
service-broker-message-forwarding.md), CREATE ENDPOINT (MESSAGE_FORWARDING,
MESSAGE_FORWARD_SIZE) and sys.dm_broker_forwarded_messages (docs/relational-databases/
system-dynamic-management-views/sys-dm-broker-forwarded-messages-transact-sql.md).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..catalog.routing import LOCAL, RouteChooser
from ..storage.rows import RouteRow
from .wire import Ack, Fragment, MessageHeader, Refusal

__all__ = [
    "FORWARDING_DISABLED_ERROR",
    "FORWARD_PRIORITY",
    "HOLD_SECONDS",
    "Discard",
    "ForwardedMessageViewRow",
    "Forwarder",
    "ForwardingStatistics",
    "HeldFragment",
    "Hop",
    "Source",
    "forwarded_messages",
    "next_hop",
]

FORWARD_PRIORITY = 5
"""The level every forwarded message goes at, whatever its conversation's priority (PRI-11)."""
HOLD_SECONDS = 60.0
"""A forwarded fragment not passed on within this many seconds of its arrival is deleted
(TICK-4b)."""
REVERSE_SECONDS = 600.0
"""A reverse path neither used nor learned again for this long is forgotten (the sender's next
retry teaches it again)."""
FORWARDING_DISABLED_ERROR = 9792
"""SQL Server's error for a message dropped because forwarding is disabled (FWD-1)."""
_MB = 1024 * 1024


class Discard(enum.Enum):
    """Why a fragment was not passed on (each is counted in :class:`ForwardingStatistics`)."""

    SIZE = "size"
    """Holding it would exceed MESSAGE_FORWARD_SIZE (FWD-2)."""
    HOPS = "hops"
    """It arrived with no hops left (FWD-3)."""
    TIME_TO_LIVE = "time to live"
    """Its time to live is spent (FWD-3)."""
    STALE = "stale"
    """Not passed on within 60 s of its arrival (TICK-4b)."""


@dataclass(frozen=True, slots=True)
class Hop:
    """Where a fragment that arrived goes (:func:`next_hop`): ``address`` ``"LOCAL"`` (this
    broker takes it: the existing path, NET-2/NET-7) or ``TCP://host:port`` (forward it);
    ``address`` None: no route here (the fragment is refused, naming the service)."""

    address: str | None

    @property
    def is_local(self) -> bool:
        """True when the message is for this broker."""
        return self.address == LOCAL


_HERE = Hop(LOCAL)


def next_hop(
    header: MessageHeader,
    *,
    instance: uuid.UUID,
    local_services: Collection[str],
    routes: RouteChooser | Iterable[RouteRow],
    now: float,
) -> Hop:
    """Whether a fragment that arrived is for this broker or passes on (FWD-1, RTE-2/3): its
    ``to_broker_instance`` is this broker's ``instance`` → here; None with a ``to_service`` of
    this database → here; otherwise the route this broker's routing table gives for
    (to_service, to_broker_instance): LOCAL → here (an unknown service is refused there, as
    ever), a TCP address → forward to it, none → ``Hop(None)``.

    Args:
        header: the fragment's header.
        instance: this broker's service_broker_guid.
        local_services: the names of this database's services.
        routes: the routing table (rows, expired ones included) or a :class:`RouteChooser`
            over it (one per pass, so each target is chosen once).
        now: broker-clock seconds (route expiry, RTE-1).
    """
    target = header.to_broker_instance
    if target == instance or (target is None and header.to_service in local_services):
        return _HERE
    chooser = (
        routes
        if isinstance(routes, RouteChooser)
        else RouteChooser(routes, local_services=local_services, now=now)
    )
    choice = chooser.choose(header.to_service, None if target is None else str(target))
    if choice is None:
        return Hop(None)
    return _HERE if choice.is_local else Hop(choice.address)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a conversation side's fragments came from: the adjacent broker ``instance`` (its
    HELLO's service_broker_guid) at ``address``; acknowledgements and refusals for that side's
    messages go back to it."""

    instance: uuid.UUID | None
    address: str


@dataclass(frozen=True, slots=True)
class HeldFragment:
    """One fragment a forwarder holds (a row of dm_broker_forwarded_messages): its ``header``
    (as it arrived), ``index``, the ``address`` of the next hop, when it was ``received``
    (broker-clock seconds) and its data's ``size`` in bytes."""

    header: MessageHeader
    index: int
    address: str
    received: float
    size: int


@dataclass(frozen=True)
class ForwardingStatistics:
    """What a :class:`Forwarder` holds and has done.

    Attributes:
        held_fragments / held_bytes: fragments held now and their data bytes.
        limit_bytes: MESSAGE_FORWARD_SIZE in bytes.
        received: fragments taken to forward; duplicates: copies of fragments held, ignored.
        forwarded: fragments passed on to their next hop.
        dropped_size / dropped_hops / dropped_time_to_live / dropped_stale: fragments discarded
            (FWD-2 size, FWD-3 hops and time to live, TICK-4b).
        refused_disabled: fragments dropped because forwarding is disabled (FWD-1, 9792).
        refused_no_route: fragments dropped for want of a route here.
        acks_relayed / refusals_relayed: acknowledgements and refusals passed back.
        reverse_paths: conversation sides whose way back is known.
    """

    held_fragments: int
    held_bytes: int
    limit_bytes: int
    received: int
    duplicates: int
    forwarded: int
    dropped_size: int
    dropped_hops: int
    dropped_time_to_live: int
    dropped_stale: int
    refused_disabled: int
    refused_no_route: int
    acks_relayed: int
    refusals_relayed: int
    reverse_paths: int


_Key = tuple[bytes, bool, int, int]  # conversation, side, sequence, fragment index
_Side = tuple[bytes, bool]


class Forwarder:
    """The fragments one broker holds to forward, by next-hop address, and the reverse paths.

    Args:
        forward_size_mb: MESSAGE_FORWARD_SIZE, megabytes held at most in total (FWD-2).
        hold_seconds: TICK-4b's limit (60 s).
    """

    def __init__(self, forward_size_mb: int = 10, *, hold_seconds: float = HOLD_SECONDS) -> None:
        self.limit_bytes = forward_size_mb * _MB
        self.hold_seconds = hold_seconds
        self._held: dict[str, dict[_Key, HeldFragment]] = {}
        self._data: dict[_Key, Fragment] = {}
        self._bytes = 0
        self._reverse: dict[_Side, tuple[Source, float]] = {}
        self._counts = dict.fromkeys(
            (
                "received",
                "duplicates",
                "forwarded",
                *(d.name for d in Discard),
                "disabled",
                "no_route",
                "acks",
                "refusals",
            ),
            0,
        )

    def set_limit(self, forward_size_mb: int) -> None:
        """MESSAGE_FORWARD_SIZE changed (ALTER ENDPOINT): hold at most that many megabytes;
        what is held already stays."""
        self.limit_bytes = forward_size_mb * _MB

    @property
    def held_bytes(self) -> int:
        """Data bytes of the fragments held."""
        return self._bytes

    def addresses(self) -> list[str]:
        """The next-hop addresses that have fragments waiting, sorted."""
        return sorted(a for a, held in self._held.items() if held)

    def receive(
        self, fragment: Fragment, *, source: Source, address: str, now: float
    ) -> Discard | None:
        """Take ``fragment``, which arrived from ``source`` at ``now`` (broker-clock seconds),
        to pass on to ``address``: held (None), or discarded saying why — no hops left or a
        spent time to live (FWD-3), or MESSAGE_FORWARD_SIZE full (FWD-2). The way back for its
        conversation side is learned even when it is discarded (acks of copies that got
        through still go back). A copy of a fragment held is ignored (None)."""
        h = fragment.header
        self._reverse[(h.conversation_id, h.is_initiator)] = (source, now)
        self._counts["received"] += 1
        if h.hops_remaining <= 0:
            return self._discard(Discard.HOPS)
        if h.time_to_live is not None and h.time_to_live <= 0:
            return self._discard(Discard.TIME_TO_LIVE)
        key = (h.conversation_id, h.is_initiator, h.sequence, fragment.index)
        if key in self._data:
            self._counts["duplicates"] += 1
            return None
        size = len(fragment.data)
        if self._bytes + size > self.limit_bytes:
            return self._discard(Discard.SIZE)
        self._held.setdefault(address, {})[key] = HeldFragment(
            h, fragment.index, address, now, size
        )
        self._data[key] = fragment
        self._bytes += size
        return None

    def _discard(self, why: Discard) -> Discard:
        self._counts[why.name] += 1
        return why

    def _remove(self, address: str, key: _Key) -> tuple[HeldFragment, Fragment]:
        held = self._held[address].pop(key)
        self._bytes -= held.size
        return held, self._data.pop(key)

    def take(self, address: str, now: float, max_bytes: int) -> list[Fragment]:
        """The fragments to pass on to ``address`` at ``now``, in the order they arrived
        (PRI-11: level 5 for all, the conversation's priority aside), about ``max_bytes`` of
        data at most (at least one): each as it came, with one hop less and its time to live
        less the time held, and no acknowledgements of the sender's (the connection adds its
        own, NET-3). They leave the forwarder's memory; one whose time to live ran out while
        held is discarded instead (FWD-3)."""
        held = self._held.get(address)
        out: list[Fragment] = []
        budget = max_bytes
        while held and (budget > 0 or not out):
            key = next(iter(held))
            item, fragment = self._remove(address, key)
            h = item.header
            ttl = None if h.time_to_live is None else h.time_to_live - (now - item.received)
            if ttl is not None and ttl <= 0:
                self._discard(Discard.TIME_TO_LIVE)
                continue
            header = dataclasses.replace(h, hops_remaining=h.hops_remaining - 1, time_to_live=ttl)
            out.append(Fragment(header, fragment.index, fragment.data))
            budget -= max(1, item.size)
            self._counts["forwarded"] += 1
        return out

    def cleanup(self, now: float) -> int:
        """TICK-4b at ``now``: delete every fragment received more than ``hold_seconds`` ago
        and not yet passed on, and forget reverse paths unused for 10 minutes; returns how
        many fragments were deleted."""
        limit = now - self.hold_seconds
        dropped = 0
        for address, held in self._held.items():
            for key in [k for k, item in held.items() if item.received <= limit]:
                self._remove(address, key)
                dropped += 1
        self._counts[Discard.STALE.name] += dropped
        old = now - REVERSE_SECONDS
        for side in [s for s, (_, seen) in self._reverse.items() if seen <= old]:
            del self._reverse[side]
        return dropped

    def source_of(self, conversation_id: bytes, is_initiator: bool, now: float) -> Source | None:
        """The adjacent broker the messages of that conversation side came from (the way back
        for their acknowledgements and refusals), or None when none passed here."""
        entry = self._reverse.get((conversation_id, is_initiator))
        if entry is None:
            return None
        self._reverse[(conversation_id, is_initiator)] = (entry[0], now)
        return entry[0]

    def relay_ack(self, ack: Ack, now: float) -> Source | None:
        """Where acknowledgement ``ack`` of the final destination goes back to (counted), or
        None when its conversation side never passed here (it is this broker's own)."""
        source = self.source_of(ack.conversation_id, ack.is_initiator, now)
        if source is not None:
            self._counts["acks"] += 1
        return source

    def relay_refusal(self, refusal: Refusal, now: float) -> Source | None:
        """Where ``refusal`` (NET-7) goes back to (counted), or None (this broker's own)."""
        source = self.source_of(refusal.conversation_id, refusal.is_initiator, now)
        if source is not None:
            self._counts["refusals"] += 1
        return source

    def disabled(self, header: MessageHeader, endpoint: str, instance: uuid.UUID) -> Refusal:
        """FWD-1: a message for a service elsewhere arrived at broker ``instance``, whose
        endpoint ``endpoint`` does not forward: it is dropped (counted); the :class:`Refusal`
        for the sender says why, naming error 9792, so its transmission_status shows it
        (NET-7)."""
        self._counts["disabled"] += 1
        return Refusal(
            header.conversation_id,
            header.is_initiator,
            header.sequence,
            f"Error {FORWARDING_DISABLED_ERROR}: the message for service {header.to_service!r} "
            f"was dropped at broker instance {instance}: message forwarding is disabled on its "
            f"endpoint {endpoint!r} (MESSAGE_FORWARDING = DISABLED).",
        )

    def no_route(self, header: MessageHeader, instance: uuid.UUID) -> Refusal:
        """A message to forward for which broker ``instance`` has no route (RTE-2 step 6):
        dropped (counted); the :class:`Refusal` for the sender names the service."""
        self._counts["no_route"] += 1
        return Refusal(
            header.conversation_id,
            header.is_initiator,
            header.sequence,
            f"The forwarding broker instance {instance} has no route to service "
            f"{header.to_service!r}"
            + (
                f" at broker instance {header.to_broker_instance}."
                if header.to_broker_instance is not None
                else "."
            ),
        )

    def held(self) -> list[HeldFragment]:
        """Every fragment held, by next-hop address, each address's in arrival order (the
        rows of dm_broker_forwarded_messages)."""
        return [item for address in sorted(self._held) for item in self._held[address].values()]

    def statistics(self) -> ForwardingStatistics:
        """The counters and what is held now (:class:`ForwardingStatistics`)."""
        c = self._counts
        return ForwardingStatistics(
            len(self._data),
            self._bytes,
            self.limit_bytes,
            c["received"],
            c["duplicates"],
            c["forwarded"],
            c[Discard.SIZE.name],
            c[Discard.HOPS.name],
            c[Discard.TIME_TO_LIVE.name],
            c[Discard.STALE.name],
            c["disabled"],
            c["no_route"],
            c["acks"],
            c["refusals"],
            len(self._reverse),
        )


@dataclass(frozen=True)
class ForwardedMessageViewRow:
    """A row of ``sys.dm_broker_forwarded_messages`` (FWD-2): one fragment this broker holds to
    forward. ``is_initiator`` is True when the message comes from the initiator;
    ``adjacent_broker_address`` the next hop it goes to (``TCP://host:port``);
    ``time_to_live`` the seconds it had left when it arrived (None: no limit but TICK-4b's
    60 s) and ``time_consumed`` the seconds it has been held — seconds as floats here, int in
    SQL Server.
    https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/
    sys-dm-broker-forwarded-messages-transact-sql"""

    conversation_id: uuid.UUID
    is_initiator: bool
    to_service_name: str
    to_broker_instance: str | None
    from_service_name: str
    from_broker_instance: str
    adjacent_broker_address: str
    message_sequence_number: int
    message_fragment_number: int
    hops_remaining: int
    time_to_live: float | None
    time_consumed: float
    message_id: uuid.UUID


def forwarded_messages(held: Iterable[HeldFragment], now: float) -> list[ForwardedMessageViewRow]:
    """``sys.dm_broker_forwarded_messages`` of the fragments ``held`` (as the forwarder gives
    them) at ``now`` (broker-clock seconds)."""
    return [
        ForwardedMessageViewRow(
            uuid.UUID(bytes=f.header.conversation_id),
            f.header.is_initiator,
            f.header.to_service,
            None if f.header.to_broker_instance is None else str(f.header.to_broker_instance),
            f.header.from_service,
            str(f.header.from_broker_instance),
            f.address,
            f.header.sequence,
            f.index,
            f.header.hops_remaining,
            f.header.time_to_live,
            max(0.0, now - f.received),
            uuid.UUID(bytes=f.header.message_id),
        )
        for f in held
    ]
