"""Two in-memory "brokers" wired through the sans-I/O transport over two FaultyLinks on a manual
clock (the fault matrix of tests/test_transport_faults.py).

The sender's store is a dict of unacknowledged messages (deleted only on a whole-message ack,
NET-3); the receiver's store keeps, per conversation side, the next expected sequence number and
the messages delivered, and "commits" a message before acknowledging it (NET-3). The connecting
side is the sender; a connection that closes for any reason is torn down on both sides and
made again after the TICK-3a suppression.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

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

ADDRESS = "TCP://receiver:4022"


@dataclass
class Result:
    """What one run measured."""

    delivered: dict[bytes, list[int]]
    bodies_ok: bool
    drained_at: float
    retransmissions: int
    fragments_sent: int
    connections: int
    duplicates_seen: int
    held: int
    link: dict[str, int] = field(default_factory=dict)


def make_messages(
    rnd: random.Random, count: int, dialogs: int, sender: uuid.UUID, receiver: uuid.UUID
) -> list[tuple[MessageHeader, bytes]]:
    """``count`` messages over ``dialogs`` dialogs, round robin, one body in ten of several
    fragments (2,000..5,000 bytes at 1,024 bytes a fragment)."""
    conversations = [uuid.UUID(int=rnd.getrandbits(128)).bytes for _ in range(dialogs)]
    sequence = dict.fromkeys(conversations, 0)
    out = []
    for i in range(count):
        conv = conversations[i % dialogs]
        size = rnd.randrange(2000, 5000) if rnd.random() < 0.1 else rnd.randrange(0, 200)
        body = rnd.randbytes(size)
        header = MessageHeader(
            conv, True, sequence[conv], uuid.UUID(int=rnd.getrandbits(128)).bytes,
            "//from", "//to", "//contract", "//type", "N", sender, receiver,
            5, None, 0, 1,
        )  # fmt: skip
        sequence[conv] += 1
        out.append((header, body))
    return out


class Pair:
    """A sender and a receiver broker over two faulty links (module docstring)."""

    def __init__(
        self,
        seed: int,
        messages: int,
        dialogs: int,
        *,
        window: int = 200,
        settings: TransportSettings | None = None,
        **faults: float,
    ) -> None:
        rnd = random.Random(seed)
        self.settings = settings or TransportSettings(fragment_size=1024)
        self.sender_id = uuid.UUID(int=rnd.getrandbits(128))
        self.receiver_id = uuid.UUID(int=rnd.getrandbits(128))
        self.to_send = make_messages(rnd, messages, dialogs, self.sender_id, self.receiver_id)
        self.originals = {(h.conversation_id, h.sequence): b for h, b in self.to_send}
        self.window = window
        self.now = 0.0
        self.outbound = Outbound(self.settings)
        self.inbound = Inbound(self.settings)
        self.destinations = Destinations(self.settings)
        self.forward = FaultyLink(seed * 2 + 1, **faults)
        self.backward = FaultyLink(seed * 2 + 2, **{k: v for k, v in faults.items() if k != "cut"})
        self.unacked: dict[MessageKey, bytes] = {}
        self.next_expected: dict[tuple[bytes, bool], int] = {}
        self.delivered: dict[bytes, list[int]] = {}
        self.bodies_ok = True
        self.duplicates_seen = 0
        self.held = 0
        self.offered = 0
        self.connections = 0
        self.sender: AdjacentConnection | None = None
        self.receiver: AdjacentConnection | None = None
        self.next_cleanup = 1.0

    # the sender's side -------------------------------------------------------------------
    def _offer(self) -> None:
        while self.offered < len(self.to_send) and self.outbound.pending_count < self.window:
            header, body = self.to_send[self.offered]
            self.unacked[(header.conversation_id, header.is_initiator, header.sequence)] = body
            self.outbound.offer(header, body, self.now)
            self.offered += 1
        if self.unacked:
            self.destinations.add(ADDRESS)

    def _connect(self) -> None:
        self.connections += 1
        self.forward.reset()
        self.backward.reset()
        self.sender = AdjacentConnection(
            self.sender_id, is_accept=False, encryption="SUPPORTED", settings=self.settings,
            now=self.now,
        )  # fmt: skip
        self.receiver = AdjacentConnection(
            self.receiver_id, is_accept=True, encryption="REQUIRED", settings=self.settings,
            now=self.now,
        )  # fmt: skip
        self.destinations.on_connecting(ADDRESS, self.now)
        self.forward.send(self.sender.start(self.now), self.now)
        self.backward.send(self.receiver.start(self.now), self.now)

    def _teardown(self) -> None:
        assert self.sender is not None
        if self.sender.login_time is not None:
            self.destinations.on_disconnected(ADDRESS, self.now)
        else:
            self.destinations.on_failed(ADDRESS, self.now, self.sender.closed_status or "failed")
        self.outbound.on_disconnect(self.now)
        self.sender = self.receiver = None
        self.forward.reset()
        self.backward.reset()

    def _on_sender_events(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, LoggedIn):
                self.destinations.on_connected(ADDRESS, self.now)
            elif isinstance(event, AckReceived):
                for key in self.outbound.on_ack(event.ack, self.now):
                    del self.unacked[key]
            elif isinstance(event, ConnectionClosed):
                self._teardown()
                return

    # the receiver's side -----------------------------------------------------------------
    def _commit(self, c: Completed) -> None:
        h = c.header
        self.delivered.setdefault(h.conversation_id, []).append(h.sequence)
        if self.originals[(h.conversation_id, h.sequence)] != c.body:
            self.bodies_ok = False
        self.next_expected[(h.conversation_id, h.is_initiator)] = h.sequence + 1
        assert self.receiver is not None
        self.receiver.queue_ack(Ack(h.conversation_id, h.is_initiator, h.sequence))

    def _on_completed(self, c: Completed) -> None:
        h = c.header
        side = (h.conversation_id, h.is_initiator)
        expected = self.next_expected.get(side, 0)
        assert self.receiver is not None
        if h.sequence < expected:  # NET-2: a duplicate is acknowledged again and discarded
            self.duplicates_seen += 1
            self.receiver.queue_ack(Ack(h.conversation_id, h.is_initiator, h.sequence))
        elif h.sequence > expected:  # out of order: it waits
            self.held += 1
            self.inbound.hold(c, self.now)
        else:
            self._commit(c)
            while (nxt := self.inbound.release(*side, self.next_expected[side])) is not None:
                self._commit(nxt)

    def _on_receiver_events(self, events: list[Event]) -> None:
        for event in events:
            assert self.receiver is not None
            if isinstance(event, PeerHello):
                self.backward.send(self.receiver.login(True, "", self.now), self.now)
            elif isinstance(event, FragmentReceived):
                for out in self.inbound.on_fragment(event.fragment, self.now):
                    if isinstance(out, Ack):
                        self.receiver.queue_ack(out)
                    elif isinstance(out, Completed):
                        self._on_completed(out)
            elif isinstance(event, ConnectionClosed):
                self._teardown()
                return

    # the loop ----------------------------------------------------------------------------
    def step(self) -> None:
        """Everything due at ``now``."""
        self._offer()
        if (
            self.sender is None
            and self.unacked
            and self.destinations.should_connect(ADDRESS, self.now)
        ):
            self._connect()
        if self.receiver is not None:
            data = self.forward.deliver(self.now)
            if data:
                self._on_receiver_events(self.receiver.receive_data(data, self.now))
            if self.receiver is not None and self.forward.ended:
                self._on_receiver_events(self.receiver.receive_eof(self.now))
        if self.sender is not None:
            data = self.backward.deliver(self.now)
            if data:
                self._on_sender_events(self.sender.receive_data(data, self.now))
        if self.sender is not None and self.sender.handshake_expired(self.now):
            self.sender.close("handshake timed out", self.now)
            self._teardown()
        if self.now >= self.next_cleanup:  # TICK-2c
            self.inbound.cleanup(self.now)
            self.next_cleanup = self.now + 1.0
        if self.sender is not None and self.sender.state is ConnectionState.LOGGED_IN:
            for fragment in self.outbound.frames_due(self.now, 256 * 1024):
                self.forward.send(self.sender.send_fragment(fragment, self.now), self.now)
        if self.receiver is not None and self.receiver.state is ConnectionState.LOGGED_IN:
            self.backward.send(self.receiver.flush_acks(self.now), self.now)
        self._offer()

    def _next_time(self) -> float:
        times = [self.next_cleanup]
        for t in (self.forward.next_delivery(), self.backward.next_delivery()):
            if t is not None:
                times.append(t)
        if self.sender is None:
            t = self.destinations.suppressed_until(ADDRESS)
            times.append(self.now if t is None else max(t, self.now))
        elif self.sender.state is not ConnectionState.LOGGED_IN:
            times.append(self.sender.connect_time + self.settings.handshake_timeout)
        else:
            if True:
                t = self.outbound.next_due(self.now)
                if t is not None:
                    times.append(t)
        return max(self.now, min(times))

    def run(self, limit: float = 1e9, *, until: float | None = None) -> Result:
        """Run until every message is acknowledged (or ``limit`` clock seconds pass: an
        assertion error), or only until the clock reaches ``until``."""
        steps = 0
        while True:
            self.step()
            if not self.unacked and self.offered == len(self.to_send):
                break
            if until is not None and self.now >= until:
                break
            nxt = self._next_time()
            if nxt == self.now:
                steps += 1
                assert steps < 100, f"no progress at {self.now}"
            else:
                steps = 0
            self.now = nxt
            assert self.now < limit, f"not drained by {limit} s: {len(self.unacked)} unacked"
        stats = self.outbound.statistics()
        fwd = self.forward.statistics()
        return Result(
            self.delivered,
            self.bodies_ok,
            self.now,
            stats.retransmissions,
            stats.fragments_sent,
            self.connections,
            self.duplicates_seen,
            self.held,
            {
                "dropped": fwd.dropped,
                "duplicated": fwd.duplicated,
                "reordered": fwd.reordered,
                "corrupted": fwd.corrupted,
                "cuts": fwd.cuts,
            },
        )
