"""Two in-memory "brokers" wired through the sans-I/O transport over two FaultyLinks on a
ManualClock (the fault matrix of tests/test_transport_faults.py).

Each broker is a :class:`Node`: an Outbound, an Inbound, a fake sender store (a dict of its
unacknowledged messages, deleted only on a whole-message ack, NET-3) and a fake receiver store
(per conversation side the next expected sequence number and the messages delivered, "committing"
before acknowledging, NET-3). Broker A (the initiators) connects and sends most messages; broker
B (the targets) answers on the same dialogs over the same connection, so acknowledgements ride
on return traffic both ways (NET-3). A connection that closes for any reason is torn down on both
sides and made again after the TICK-3a suppression.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from servicebroker.clock import ManualClock
from servicebroker.testing.link import FaultyLink
from servicebroker.transport.adjacent import (
    AckReceived,
    AdjacentConnection,
    ConnectionClosed,
    ConnectionState,
    Event,
    FragmentReceived,
    LoggedIn,
    PeerHello,
)
from servicebroker.transport.destinations import Destinations
from servicebroker.transport.inbound import Completed, Inbound
from servicebroker.transport.outbound import MessageKey, Outbound
from servicebroker.transport.settings import TransportSettings
from servicebroker.transport.wire import Ack, MessageHeader

ADDRESS = "TCP://b:4022"


@dataclass
class Result:
    """What one run measured. ``delivered`` maps (conversation_id, sender is_initiator) to the
    sequence numbers delivered, in delivery order."""

    delivered: dict[tuple[bytes, bool], list[int]]
    expected: dict[tuple[bytes, bool], list[int]]
    bodies_ok: bool
    drained_at: float
    retransmissions: int
    fragments_sent: int
    connections: int
    duplicates_seen: int
    held: int
    link: dict[str, int] = field(default_factory=dict)

    @property
    def exactly_once_in_order(self) -> bool:
        """Every message delivered exactly once, in order, per dialog side (NET-2)."""
        return self.delivered == self.expected


def make_messages(
    rnd: random.Random,
    count: int,
    conversations: list[bytes],
    is_initiator: bool,
    sender: uuid.UUID,
    receiver: uuid.UUID,
) -> list[tuple[MessageHeader, bytes]]:
    """``count`` messages over the conversations, round robin, one body in ten of several
    fragments (2,000..5,000 bytes at 1,024 bytes a fragment)."""
    sequence = dict.fromkeys(conversations, 0)
    out = []
    for i in range(count):
        conv = conversations[i % len(conversations)]
        size = rnd.randrange(2000, 5000) if rnd.random() < 0.1 else rnd.randrange(0, 200)
        header = MessageHeader(
            conv, is_initiator, sequence[conv], uuid.UUID(int=rnd.getrandbits(128)).bytes,
            "//from", "//to", "//contract", "//type", "N", sender, receiver, 5, None, 0, 1,
        )  # fmt: skip
        sequence[conv] += 1
        out.append((header, rnd.randbytes(size)))
    return out


class Node:
    """One broker: its transport state and its fake stores (module docstring)."""

    def __init__(
        self,
        instance: uuid.UUID,
        settings: TransportSettings,
        to_send: list[tuple[MessageHeader, bytes]],
        link_out: FaultyLink,
        window: int,
    ) -> None:
        self.instance = instance
        self.to_send = to_send
        self.link_out = link_out
        self.window = window
        self.outbound = Outbound(settings)
        self.inbound = Inbound(settings)
        self.conn: AdjacentConnection | None = None
        self.unacked: dict[MessageKey, bytes] = {}
        self.offered = 0
        self.next_expected: dict[tuple[bytes, bool], int] = {}
        self.delivered: dict[tuple[bytes, bool], list[int]] = {}
        self.bodies: dict[tuple[bytes, bool, int], bytes] = {}
        self.duplicates_seen = 0
        self.held = 0
        self.logged_in_at: float | None = None

    @property
    def drained(self) -> bool:
        return not self.unacked and self.offered == len(self.to_send)

    def offer(self, now: float) -> None:
        while self.offered < len(self.to_send) and self.outbound.pending_count < self.window:
            header, body = self.to_send[self.offered]
            self.unacked[(header.conversation_id, header.is_initiator, header.sequence)] = body
            self.outbound.offer(header, body, now)
            self.offered += 1

    def _commit(self, c: Completed) -> None:
        h = c.header
        side = (h.conversation_id, h.is_initiator)
        self.delivered.setdefault(side, []).append(h.sequence)
        self.bodies[c.key] = c.body
        self.next_expected[side] = h.sequence + 1
        assert self.conn is not None
        self.conn.queue_ack(Ack(h.conversation_id, h.is_initiator, h.sequence))

    def _on_completed(self, c: Completed, now: float) -> None:
        h = c.header
        side = (h.conversation_id, h.is_initiator)
        expected = self.next_expected.get(side, 0)
        assert self.conn is not None
        if h.sequence < expected:  # NET-2: a duplicate is acknowledged again and discarded
            self.duplicates_seen += 1
            self.conn.queue_ack(Ack(h.conversation_id, h.is_initiator, h.sequence))
        elif h.sequence > expected:  # out of order: it waits
            self.held += 1
            self.inbound.hold(c, now)
        else:
            self._commit(c)
            while (nxt := self.inbound.release(*side, self.next_expected[side])) is not None:
                self._commit(nxt)

    def on_events(self, events: list[Event], now: float) -> str | None:
        """Handle ``events``; the status if the connection closed."""
        for event in events:
            assert self.conn is not None
            if isinstance(event, PeerHello) and self.conn.is_accept:
                self.link_out.send(self.conn.login(True, "", now), now)
            elif isinstance(event, LoggedIn):
                self.logged_in_at = now
            elif isinstance(event, AckReceived):
                for key in self.outbound.on_ack(event.ack, now):
                    del self.unacked[key]
            elif isinstance(event, FragmentReceived):
                for out in self.inbound.on_fragment(event.fragment, now):
                    if isinstance(out, Ack):
                        self.conn.queue_ack(out)
                    elif isinstance(out, Completed):
                        self._on_completed(out, now)
            elif isinstance(event, ConnectionClosed):
                return event.status
        return None

    def send(self, now: float) -> None:
        """Fragments due, with acks riding along (NET-3), then the acks still pending."""
        if self.conn is None or self.conn.state is not ConnectionState.LOGGED_IN:
            return
        for fragment in self.outbound.frames_due(now, 256 * 1024):
            self.link_out.send(self.conn.send_fragment(fragment, now), now)
        self.link_out.send(self.conn.flush_acks(now), now)


class Pair:
    """Broker A (connecting, the initiators) and broker B (accepting, the targets) over two
    faulty links (module docstring). ``replies`` is B's messages per A's message."""

    def __init__(
        self,
        seed: int,
        messages: int,
        dialogs: int,
        *,
        replies: float = 0.25,
        window: int = 200,
        settings: TransportSettings | None = None,
        **faults: float,
    ) -> None:
        rnd = random.Random(seed)
        self.settings = settings or TransportSettings(fragment_size=1024)
        self.clock = ManualClock(start=0.0)
        a_id, b_id = uuid.UUID(int=rnd.getrandbits(128)), uuid.UUID(int=rnd.getrandbits(128))
        conversations = [uuid.UUID(int=rnd.getrandbits(128)).bytes for _ in range(dialogs)]
        to_b = make_messages(rnd, messages, conversations, True, a_id, b_id)
        to_a = make_messages(rnd, int(messages * replies), conversations, False, b_id, a_id)
        self.forward = FaultyLink(seed * 2 + 1, **faults)
        self.backward = FaultyLink(seed * 2 + 2, **{k: v for k, v in faults.items() if k != "cut"})
        self.a = Node(a_id, self.settings, to_b, self.forward, window)
        self.b = Node(b_id, self.settings, to_a, self.backward, window)
        self.expected: dict[tuple[bytes, bool], list[int]] = {}
        self.originals: dict[tuple[bytes, bool, int], bytes] = {}
        for header, body in to_b + to_a:
            side = (header.conversation_id, header.is_initiator)
            self.expected.setdefault(side, []).append(header.sequence)
            self.originals[(*side, header.sequence)] = body
        self.destinations = Destinations(self.settings)
        self.connections = 0
        self.next_cleanup = 1.0
        self.closing_until: float | None = None

    @property
    def now(self) -> float:
        return self.clock.now()

    def _connect(self, now: float) -> None:
        self.connections += 1
        self.forward.reset()
        self.backward.reset()
        self.a.conn = AdjacentConnection(
            self.a.instance,
            is_accept=False,
            encryption="SUPPORTED",
            settings=self.settings,
            now=now,
        )
        self.b.conn = AdjacentConnection(
            self.b.instance, is_accept=True, encryption="REQUIRED", settings=self.settings, now=now
        )
        self.destinations.on_connecting(ADDRESS, now)
        self.forward.send(self.a.conn.start(now), now)
        self.backward.send(self.b.conn.start(now), now)

    def _teardown(self, now: float) -> None:
        assert self.a.conn is not None
        if self.a.conn.login_time is not None:
            self.destinations.on_disconnected(ADDRESS, now)
        else:
            self.destinations.on_failed(ADDRESS, now, self.a.conn.closed_status or "failed")
        for node in (self.a, self.b):
            node.outbound.on_disconnect(now)
            node.conn = None
        self.forward.reset()
        self.backward.reset()
        self.closing_until = None

    def step(self) -> None:
        """Everything due at ``now``."""
        now = self.now
        for node in (self.a, self.b):
            node.offer(now)
        pending = self.a.unacked or self.b.unacked
        if self.a.conn is None and pending and self.destinations.should_connect(ADDRESS, now):
            self._connect(now)
        for node, peer, link in ((self.b, self.a, self.forward), (self.a, self.b, self.backward)):
            if node.conn is None:
                continue
            data = link.deliver(now)
            closed = node.on_events(node.conn.receive_data(data, now), now) if data else None
            if closed is None and link.ended:
                closed = node.on_events(node.conn.receive_eof(now), now)
            if closed is not None:
                # the acks of what this side committed, and CLOSE, still go to the peer
                node.link_out.send(node.conn.goodbye(now), now)
                self.closing_until = now + 1.0 if self.closing_until is None else self.closing_until
            assert peer.conn is not None
            if node.conn.state is ConnectionState.CLOSED and (
                peer.conn.state is ConnectionState.CLOSED
                or now >= (self.closing_until or now + 1.0)
            ):
                self._teardown(now)
                break
        if self.a.logged_in_at is not None:
            self.destinations.on_connected(ADDRESS, self.a.logged_in_at)
            self.a.logged_in_at = None
        if self.a.conn is not None and self.a.conn.handshake_expired(now):
            self.a.conn.close("handshake timed out", now)
            self._teardown(now)
        if now >= self.next_cleanup:  # TICK-2c
            self.a.inbound.cleanup(now)
            self.b.inbound.cleanup(now)
            self.next_cleanup = now + 1.0
        for node in (self.a, self.b):
            node.send(now)
            node.offer(now)

    def _next_time(self) -> float:
        now = self.now
        times = [self.next_cleanup]
        for t in (self.forward.next_delivery(), self.backward.next_delivery()):
            if t is not None:
                times.append(t)
        conn = self.a.conn
        if self.closing_until is not None:
            times.append(self.closing_until)
        if conn is None:
            t = self.destinations.suppressed_until(ADDRESS)
            times.append(now if t is None else max(t, now))
        elif conn.state not in (ConnectionState.LOGGED_IN, ConnectionState.CLOSED):
            times.append(conn.connect_time + self.settings.handshake_timeout)
        else:
            for node in (self.a, self.b):
                t = node.outbound.next_due(now)
                if t is not None and node.conn and node.conn.state is ConnectionState.LOGGED_IN:
                    times.append(t)
        return max(now, min(times))

    def run(self, limit: float = 1e9, *, until: float | None = None) -> Result:
        """Run until every message both ways is acknowledged (``limit`` clock seconds at most:
        an assertion error), or only until the clock reaches ``until``."""
        steps = 0
        while True:
            self.step()
            if self.a.drained and self.b.drained:
                break
            if until is not None and self.now >= until:
                break
            nxt = self._next_time()
            if nxt == self.now:
                steps += 1
                assert steps < 100, f"no progress at {self.now}"
            else:
                steps = 0
            self.clock.set(nxt)
            assert self.now < limit, f"not drained by {limit} s"
        delivered = {**self.b.delivered, **self.a.delivered}
        bodies = {**self.b.bodies, **self.a.bodies}
        fwd = self.forward.statistics()
        stats = [node.outbound.statistics() for node in (self.a, self.b)]
        return Result(
            delivered,
            self.expected,
            bodies == {k: v for k, v in self.originals.items() if k in bodies},
            self.now,
            sum(s.retransmissions for s in stats),
            sum(s.fragments_sent for s in stats),
            self.connections,
            self.a.duplicates_seen + self.b.duplicates_seen,
            self.a.held + self.b.held,
            {
                "dropped": fwd.dropped,
                "duplicated": fwd.duplicated,
                "reordered": fwd.reordered,
                "corrupted": fwd.corrupted,
                "cuts": fwd.cuts,
            },
        )
