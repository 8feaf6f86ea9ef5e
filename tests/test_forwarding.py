"""Message forwarding (FWD-1..3, TICK-4b, PRI-11, RTE-4 through a forwarder): the pure
:class:`~servicebroker.transport.forwarding.Forwarder`, then three brokers in one process —
initiator → forwarder → target over real TCP with mutual TLS on loopback, a manual clock each
(tests/transport_sites.py ``through_forwarder``). Every outcome is awaited with a real-time
deadline, never decided by a sleep; a retry or an expiry happens only when a test moves a clock.

Microsoft: "Service Broker message forwarding"
(https://learn.microsoft.com/en-us/sql/database-engine/service-broker/service-broker-message-forwarding),
CREATE ENDPOINT's MESSAGE_FORWARDING and MESSAGE_FORWARD_SIZE
(https://learn.microsoft.com/en-us/sql/t-sql/statements/create-endpoint-transact-sql) and
sys.dm_broker_forwarded_messages
(https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-broker-forwarded-messages-transact-sql).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import cast

from servicebroker import Broker, Transaction, TransportSettings
from servicebroker.catalog.routing import RouteChooser
from servicebroker.storage.rows import RouteRow
from servicebroker.testing.waiting import eventually, poll
from servicebroker.transport import wire
from servicebroker.transport.forwarding import (
    FORWARDING_DISABLED_ERROR,
    Discard,
    Forwarder,
    Source,
    next_hop,
)
from servicebroker.transport.peer import PeerConnection
from servicebroker.transport.wire import Ack, Fragment, MessageHeader, Refusal

from .conftest import Opener
from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    address_of,
    catalog,
    first_status,
    through_forwarder,
    trust,
)

MB = 1024 * 1024
HERE = uuid.UUID(int=1)
ELSEWHERE = uuid.UUID(int=2)
SOURCE = Source(uuid.UUID(int=3), "TCP://10.0.0.3:4022")


def header(
    seq: int = 0,
    *,
    conversation: bytes = b"c" * 16,
    initiator: bool = True,
    to_service: str = TARGET,
    to_instance: uuid.UUID | None = None,
    priority: int = 5,
    hops: int = wire.DEFAULT_HOPS,
    ttl: float | None = None,
    fragments: int = 1,
) -> MessageHeader:
    return MessageHeader(
        conversation, initiator, seq, uuid.uuid4().bytes, INITIATOR, to_service, CONTRACT,
        "Order", "N", ELSEWHERE, to_instance, priority, None, 100 * fragments, fragments,
        ttl, hops,
    )  # fmt: skip


def fragment(h: MessageHeader, index: int = 0, size: int = 100) -> Fragment:
    return Fragment(h, index, b"x" * size)


# -- the pure forwarder -------------------------------------------------------------------------
def test_fwd2_held_within_message_forward_size_and_one_that_would_exceed_it_is_dropped() -> None:
    """FWD-2: forwarded fragments are held in memory within MESSAGE_FORWARD_SIZE (megabytes, in
    total over every next hop); a fragment that would exceed it is dropped and counted; passing
    fragments on frees their room."""
    fw = Forwarder(1)
    out = [
        fw.receive(fragment(header(i), size=400 * 1024), source=SOURCE, address=addr, now=0.0)
        for i, addr in enumerate(["TCP://b:1", "TCP://c:1", "TCP://b:1"])
    ]
    assert out == [None, None, Discard.SIZE]
    st = fw.statistics()
    assert (st.held_fragments, st.held_bytes, st.limit_bytes) == (2, 800 * 1024, MB)
    assert (st.received, st.dropped_size) == (3, 1)
    assert [f.header.sequence for f in fw.take("TCP://b:1", 1.0, MB)] == [0]
    assert fw.receive(fragment(header(3), size=400 * 1024), source=SOURCE, address="TCP://b:1", now=2.0) is None  # fmt: skip
    assert fw.held_bytes == 800 * 1024


def test_fwd2_fragments_pass_on_as_they_came_without_reassembly_and_copies_are_ignored() -> None:
    """FWD-2: each fragment of a message is passed on by itself as it came (no reassembly: the
    first goes before the last has arrived), with no acknowledgement of the sender's riding on
    it; a second copy of a fragment held (the sender's retry) is held once."""
    fw = Forwarder(10)
    h = header(fragments=3)
    f0 = Fragment(h, 0, b"a" * 100, acks=(Ack(b"z" * 16, False, 4),))
    fw.receive(f0, source=SOURCE, address="TCP://b:1", now=0.0)
    fw.receive(fragment(h, 0), source=SOURCE, address="TCP://b:1", now=0.5)
    [sent] = fw.take("TCP://b:1", 1.0, MB)
    assert (sent.index, sent.data, sent.acks) == (0, b"a" * 100, ())
    assert sent.header.message_id == h.message_id and sent.header.fragment_count == 3
    fw.receive(fragment(h, 2), source=SOURCE, address="TCP://b:1", now=2.0)
    assert [f.index for f in fw.take("TCP://b:1", 2.0, MB)] == [2]
    assert fw.statistics().duplicates == 1


def test_fwd3_hops_are_decremented_and_a_fragment_with_none_left_is_discarded() -> None:
    """FWD-3: a forwarder passes a fragment on with one hop less; one that arrives with no hops
    left is discarded and counted."""
    fw = Forwarder(10)
    assert fw.receive(fragment(header(0, hops=1)), source=SOURCE, address="TCP://b:1", now=0.0) is None  # fmt: skip
    assert fw.receive(fragment(header(1, hops=0)), source=SOURCE, address="TCP://b:1", now=0.0) is Discard.HOPS  # fmt: skip
    [sent] = fw.take("TCP://b:1", 0.0, MB)
    assert (sent.header.sequence, sent.header.hops_remaining) == (0, 0)
    assert fw.statistics().dropped_hops == 1


def test_fwd3_time_to_live_is_reduced_by_the_time_held_and_a_spent_one_is_discarded() -> None:
    """FWD-3: the time to live a fragment carries is reduced by the time the forwarder held
    it; a fragment whose time to live is spent on arrival, or runs out while held, is
    discarded and counted; one without a time to live has no limit but TICK-4b's."""
    fw = Forwarder(10)
    b = "TCP://b:1"
    assert fw.receive(fragment(header(0, ttl=0.0)), source=SOURCE, address=b, now=100.0) is Discard.TIME_TO_LIVE  # fmt: skip
    fw.receive(fragment(header(1, ttl=5.0)), source=SOURCE, address=b, now=100.0)
    fw.receive(fragment(header(2, ttl=None)), source=SOURCE, address=b, now=100.0)
    [sent, unlimited] = fw.take(b, 103.0, MB)
    assert (sent.header.sequence, sent.header.time_to_live) == (1, 2.0)
    assert unlimited.header.time_to_live is None
    fw.receive(fragment(header(3, ttl=5.0)), source=SOURCE, address=b, now=100.0)
    assert fw.take(b, 106.0, MB) == []
    assert fw.statistics().dropped_time_to_live == 2


def test_tick4b_cleanup_deletes_what_was_not_forwarded_within_60_seconds() -> None:
    """TICK-4b: every 5th notification the forwarder deletes each message it could not pass on
    within 60 seconds of receiving it (held in memory only, never in a queue); reverse paths
    unused for 10 minutes are forgotten (the sender's next retry teaches them again)."""
    fw = Forwarder(10)
    fw.receive(fragment(header(0)), source=SOURCE, address="TCP://b:1", now=100.0)
    fw.receive(fragment(header(1)), source=SOURCE, address="TCP://c:1", now=130.0)
    assert fw.cleanup(159.0) == 0
    assert fw.cleanup(160.0) == 1
    assert [(h.header.sequence, h.address) for h in fw.held()] == [(1, "TCP://c:1")]
    assert (fw.statistics().dropped_stale, fw.held_bytes) == (1, 100)
    assert fw.source_of(b"c" * 16, True, 200.0) == SOURCE
    fw.cleanup(799.0)
    assert fw.source_of(b"c" * 16, True, 800.0) == SOURCE
    fw.cleanup(1400.0)
    assert fw.source_of(b"c" * 16, True, 1400.0) is None


def test_fwd2_acknowledgements_and_refusals_go_back_the_way_the_fragments_came() -> None:
    """FWD-2: a forwarder never acknowledges; the final destination's acks (and NET-7
    refusals) go back to the adjacent broker the conversation side's fragments came from — a
    reply (the other side) goes back the other way; a side that never passed here is not
    relayed (this broker's own)."""
    fw = Forwarder(10)
    target = Source(uuid.UUID(int=9), "TCP://10.0.0.9:4022")
    fw.receive(fragment(header(0, initiator=True)), source=SOURCE, address="TCP://b:1", now=0.0)
    reply = header(0, initiator=False, to_service=INITIATOR)
    fw.receive(fragment(reply), source=target, address="TCP://a:1", now=0.0)
    assert fw.relay_ack(Ack(b"c" * 16, True, 0, None, ELSEWHERE), 1.0) == SOURCE
    assert fw.relay_ack(Ack(b"c" * 16, False, 0, 0), 1.0) == target
    assert fw.relay_refusal(Refusal(b"c" * 16, True, 0, "queue disabled"), 1.0) == SOURCE
    assert fw.relay_ack(Ack(b"d" * 16, True, 0), 1.0) is None
    st = fw.statistics()
    assert (st.acks_relayed, st.refusals_relayed, st.reverse_paths) == (2, 1, 2)


def test_pri11_forwarding_ignores_priorities_fragments_go_in_arrival_order() -> None:
    """PRI-11: priorities do not apply to forwarding, which always runs at level 5: a
    fragment of a priority-10 conversation that arrived after a priority-1 one goes after it,
    each passed on with its header's priority unchanged (the target applies its own, PRI-7)."""
    fw = Forwarder(10)
    for seq, priority in enumerate([1, 10, 5, 7]):
        h = header(seq, conversation=bytes([seq]) * 16, priority=priority)
        fw.receive(fragment(h), source=SOURCE, address="TCP://b:1", now=0.0)
    sent = fw.take("TCP://b:1", 0.0, MB)
    assert [(f.header.sequence, f.header.priority) for f in sent] == [(0, 1), (1, 10), (2, 5), (3, 7)]  # fmt: skip


def test_fwd1_next_hop_by_instance_local_service_and_routes() -> None:
    """FWD-1 with RTE-2/3: a fragment naming this broker instance, or no instance and a service
    of this database, is for here; otherwise the routes decide — a TCP address forwards it,
    LOCAL (AutoCreatedLocal) keeps it here (where an unknown service is refused, NET-7), no
    route gives none."""
    auto = RouteRow(1, "AutoCreatedLocal", None, None, "LOCAL", None, None)
    onward = RouteRow(2, "wh", TARGET, None, "tcp://10.0.0.2:4022", None, None)
    local = {"//here/Svc"}

    def hop(h: MessageHeader, routes: list[RouteRow]) -> str | None:
        return next_hop(h, instance=HERE, local_services=local, routes=routes, now=0.0).address

    assert hop(header(to_instance=HERE), [onward]) == "LOCAL"
    assert hop(header(to_service="//here/Svc"), []) == "LOCAL"
    assert hop(header(), [auto, onward]) == "TCP://10.0.0.2:4022"
    assert hop(header(to_instance=ELSEWHERE), [auto, onward]) == "TCP://10.0.0.2:4022"
    assert hop(header(to_service="//nowhere"), [auto, onward]) == "LOCAL"
    assert hop(header(to_service="//nowhere"), [onward]) is None
    chooser = RouteChooser([onward], local_services=local, now=0.0)
    assert next_hop(header(), instance=HERE, local_services=local, routes=chooser, now=0.0).address == "TCP://10.0.0.2:4022"  # fmt: skip


def test_fwd1_a_disabled_forwarder_refuses_naming_error_9792() -> None:
    """FWD-1: without MESSAGE_FORWARDING an incoming message for a service elsewhere is
    dropped; the refusal the sender gets (its transmission_status, NET-7) names error 9792 and
    says forwarding is disabled."""
    fw = Forwarder(10)
    refusal = fw.disabled(header(7), "sb", HERE)
    assert (refusal.sequence, refusal.is_initiator) == (7, True)
    assert str(FORWARDING_DISABLED_ERROR) in refusal.status
    assert "forwarding is disabled" in refusal.status and TARGET in refusal.status
    assert fw.statistics().refused_disabled == 1


def test_rte4_an_ack_names_the_instance_that_made_it_on_the_wire() -> None:
    """RTE-4 through a forwarder: an acknowledgement carries the broker instance that made it
    (the final destination), which the forwarder passes on unchanged; None (the peer's) too."""
    acks = [Ack(b"c" * 16, True, 3, None, ELSEWHERE), Ack(b"d" * 16, False, 0, 2)]
    assert wire.decode_acks(wire.encode_acks(acks)) == tuple(acks)
    f = Fragment(header(), 0, b"x" * 100, tuple(acks))
    assert wire.decode_fragment(wire.encode_fragment(f)) == f


# -- three brokers ------------------------------------------------------------------------------
def begin(tx: Transaction, **options: object) -> uuid.UUID:
    """BEGIN DIALOG from the shop to the warehouse (one place for the dialog options the
    transport's tests pass, e.g. dialog security)."""
    options.setdefault("encryption", False)  # forwarding alone: test_forwarding_security.py
    return tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, **options)  # type: ignore[arg-type]


def take(broker: Broker, queue: str, n: int) -> list[tuple[uuid.UUID, str, bytes]]:
    """RECEIVE until ``n`` messages came: (conversation handle, message type, body) each."""
    got: list[tuple[uuid.UUID, str, bytes]] = []

    def probe() -> bool:
        with broker.transaction() as tx:
            got.extend(
                (m.conversation_handle, m.message_type_name, m.message_body)
                for m in tx.receive(queue, top=1000)
            )
        return len(got) >= n

    eventually(probe, f"{n} messages on {queue}")
    return got


def settled(probe: Callable[[], bool], timeout: float = 2.0) -> bool:
    """Poll ``probe`` for up to ``timeout`` real seconds; whether it became true (the caller
    goes on either way: a retry loop's step, not an outcome)."""
    return poll(probe, timeout) is not None


def nothing_on(broker: Broker, queue: str) -> bool:
    with broker.transaction() as tx:
        return tx.receive(queue) == []


def guid(site: Site) -> uuid.UUID:
    instance = site.broker.views.databases()[0].service_broker_guid
    assert instance is not None
    return instance


def test_fwd2_exactly_once_in_order_through_a_forwarder_and_replies_back(
    backend: str, open_sites: Opener
) -> None:
    """FWD-2, NET-2, RTE-4: initiator → forwarder → target. Every message arrives once and in
    order; the target's replies come back through the forwarder (which needs routes to BOTH
    services); the final destination's acknowledgements go back by the reverse path, so both
    transmission queues empty — the forwarder itself acknowledges nothing, takes nothing onto a
    queue and holds nothing at the end; the initiator pins the dialog to the TARGET's broker
    instance (the ack names it), not the forwarder's."""
    a, f, b = open_sites(3, backend)
    through_forwarder(a, f, b)
    n = 40
    with a.broker.transaction() as tx:
        handle = begin(tx)
        for i in range(n):
            tx.send(handle, "Order", f"<o n='{i}'/>")
    got = take(b.broker, "warehouse_q", n)
    assert [body for _, _, body in got] == [f"<o n='{i}'/>".encode() for i in range(n)]
    far = got[0][0]
    with b.broker.transaction() as tx:
        for i in range(5):
            tx.send(far, "Receipt", f"r{i}".encode())
    replies = take(a.broker, "shop_q", 5)
    assert [(h, body) for h, _, body in replies] == [(handle, f"r{i}".encode()) for i in range(5)]
    eventually(
        lambda: not a.broker.views.transmission_queue() and not b.broker.views.transmission_queue(),
        "both transmission queues empty (acks relayed back)",
    )
    [initiator] = a.broker.views.conversation_endpoints()
    assert initiator.far_broker_instance == str(guid(b)) != str(guid(f))
    st = f.broker.transport.forwarding_statistics()
    assert st.forwarded >= n + 5 and st.acks_relayed >= n + 5 and st.held_fragments == 0
    assert f.broker.views.conversation_endpoints() == []
    assert f.broker.views.dm_broker_forwarded_messages() == []
    assert b.broker.transport.statistics().messages_received == n
    assert a.broker.transport.statistics().messages_received == 5


def test_fwd1_forwarding_off_drops_the_message_and_the_sender_shows_error_9792(
    open_sites: Opener,
) -> None:
    """FWD-1: a forwarder whose endpoint has MESSAGE_FORWARDING = DISABLED drops a message for a
    service elsewhere — nothing is delivered — and the sender's transmission_status names error
    9792 and says forwarding is disabled; once ALTER ENDPOINT enables it, the sender's next
    retry (NET-4) gets through, once."""
    a, f, b = open_sites(3)
    through_forwarder(a, f, b, forwarding=False)
    with a.broker.transaction() as tx:
        tx.send(begin(tx), "Order", "<o/>")
    status = eventually(lambda: first_status(a.broker), "the sender's transmission_status")
    assert "9792" in status and "forwarding is disabled" in status
    assert f.broker.transport.forwarding_statistics().refused_disabled >= 1
    assert nothing_on(b.broker, "warehouse_q")
    f.broker.alter_endpoint("sb", message_forwarding=True)
    eventually(
        lambda: f.broker.views.service_broker_endpoints()[0].is_message_forwarding_enabled,
        "forwarding enabled",
    )
    for _ in range(5):  # NET-4: the sender's retries (the forwarder reads its catalog anew
        a.clock.advance(70)  # each transmitter pass: a retry just after may still be refused)
        if settled(lambda: b.broker.transport.statistics().messages_received > 0):
            break
    assert [body for _, _, body in take(b.broker, "warehouse_q", 1)] == [b"<o/>"]
    eventually(lambda: not a.broker.views.transmission_queue(), "the message acknowledged")


def test_fwd3_a_forwarding_loop_runs_out_of_hops(open_sites: Opener) -> None:
    """FWD-3: two forwarders whose routes send the target service to each other pass the
    message back and forth, one hop less each time, until it arrives with none left and is
    discarded: 32 forwards in all (DEFAULT_HOPS), never delivered, never acknowledged — it
    stays in the sender's transmission queue."""
    a, f, g = open_sites(3)
    catalog(a.broker, target=False)
    trust(a, [f])
    trust(f, [a, g], forwarding=True)
    trust(g, [f], forwarding=True)
    a.broker.create_route("warehouse", service_name=TARGET, address=address_of(f))
    f.broker.create_route("loop", service_name=TARGET, address=address_of(g))
    g.broker.create_route("loop", service_name=TARGET, address=address_of(f))
    for site in (a, f, g):
        site.broker.start()
    with a.broker.transaction() as tx:
        tx.send(begin(tx), "Order", "<o/>")

    def stats() -> tuple[int, int]:
        sf = f.broker.transport.forwarding_statistics()
        sg = g.broker.transport.forwarding_statistics()
        return sf.forwarded + sg.forwarded, sf.dropped_hops + sg.dropped_hops

    eventually(lambda: stats()[1] == 1, "the message out of hops")
    assert stats() == (wire.DEFAULT_HOPS, 1)
    assert len(a.broker.views.transmission_queue()) == 1


def test_fwd3_a_fragment_whose_time_to_live_ran_out_at_the_forwarder_is_discarded(
    open_sites: Opener,
) -> None:
    """FWD-3: a message carries what is left of its dialog's lifetime as its time to live; the
    forwarder holds it while the next hop is unreachable, and passes it on only if its time
    has not run out meanwhile — here it has (31 s held of 30), so it is discarded; the
    sender's retry carries a fresh time to live and is delivered."""
    a, f, b = open_sites(3)
    through_forwarder(a, f, b, start_target=False)
    with a.broker.transaction() as tx:
        tx.send(begin(tx, lifetime=30), "Order", "<o/>")
    [row] = eventually(f.broker.views.dm_broker_forwarded_messages, "the fragment held")
    assert row.time_to_live is not None and 29 < row.time_to_live <= 30
    b.broker.start()
    f.clock.advance(31)  # then the forwarder connects (its suppression is over)
    eventually(
        lambda: f.broker.transport.forwarding_statistics().dropped_time_to_live == 1,
        "the spent fragment discarded",
    )
    assert nothing_on(b.broker, "warehouse_q")
    a.clock.advance(5)  # NET-4: sent again, with 25 s to live
    assert [body for _, _, body in take(b.broker, "warehouse_q", 1)] == [b"<o/>"]


def test_fwd2_message_forward_size_exceeded_the_view_and_tick4b(open_sites: Opener) -> None:
    """FWD-2, TICK-4b, sys.dm_broker_forwarded_messages: with the next hop unreachable the
    forwarder holds fragments up to MESSAGE_FORWARD_SIZE (1 MB here) and drops the rest; the
    view shows one row per fragment held (conversation, sides, services, instances, next hop,
    sequence and fragment numbers, hops, time to live and time held, message id); TICK-4b
    deletes them 60 s after their arrival; once the target is up the sender's retries deliver
    the message whole, once."""
    sender = TransportSettings(slow_start_fragments=8)
    forwarder = TransportSettings(suppress_after_failure=100.0)  # no attempt till b is up
    a, f, b = open_sites(3, settings={0: sender, 1: forwarder})
    through_forwarder(a, f, b, forward_size=1, start_target=False)
    body = "<o>" + "x" * (2 * MB) + "</o>"
    with a.broker.transaction() as tx:
        handle = begin(tx)
        tx.send(handle, "Order", body)
    eventually(
        lambda: f.broker.transport.forwarding_statistics().dropped_size == 4,
        "4 fragments dropped over MESSAGE_FORWARD_SIZE",
    )
    st = f.broker.transport.forwarding_statistics()
    assert (st.held_fragments, st.held_bytes, st.limit_bytes) == (4, MB, MB)
    f.clock.advance(2)
    rows = f.broker.views.dm_broker_forwarded_messages()
    [initiator] = a.broker.views.conversation_endpoints()
    assert [r.message_fragment_number for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert (r.conversation_id, r.is_initiator, r.message_sequence_number) == (
            initiator.conversation_id,
            True,
            0,
        )
        assert (r.to_service_name, r.from_service_name) == (TARGET, INITIATOR)
        assert (r.to_broker_instance, r.from_broker_instance) == (None, str(guid(a)))
        assert (r.adjacent_broker_address, r.hops_remaining) == (address_of(b), 32)
        assert r.time_to_live is not None and r.time_consumed == 2.0
    assert len({r.message_id for r in rows}) == 1
    f.clock.advance(90)  # TICK-4b (every 5th notification): 60 s passed
    eventually(lambda: not f.broker.views.dm_broker_forwarded_messages(), "TICK-4b")
    assert f.broker.transport.forwarding_statistics().dropped_stale == 4
    b.broker.start()
    f.clock.advance(10)  # the failed attempt's suppression is over (TICK-3a)
    for _ in range(8):  # NET-4: the sender's retries, until all of it got through
        if a.broker.views.transmission_queue_count() == 0:
            break
        before = f.broker.transport.forwarding_statistics().forwarded
        a.clock.advance(70)
        eventually(
            lambda before=before: (
                f.broker.transport.forwarding_statistics().forwarded > before
                or a.broker.views.transmission_queue_count() == 0
            ),
            "a retry passed on",
        )
        settled(lambda: a.broker.views.transmission_queue_count() == 0)
    [(_, _, got)] = take(b.broker, "warehouse_q", 1)
    assert got == body.encode()
    eventually(lambda: a.broker.views.transmission_queue_count() == 0, "the message acknowledged")


def test_net2_a_batch_is_taken_in_sequence_order_per_conversation_side() -> None:
    """NET-2 (in order, exactly once): through a forwarder a dialog's message can complete at the
    target just before its predecessor, both in one batch of the dispatcher; the batch is taken
    with each conversation side's messages in sequence order, in the places that side's
    messages had (other sides keep theirs), so the later one is taken right after its
    predecessor in the same commit instead of held until TICK-2c deletes it."""
    from servicebroker.transport.inbound import Completed
    from servicebroker.transport.receiving import in_sequence

    conn = cast(PeerConnection, object())
    d1, d2 = b"1" * 16, b"2" * 16
    order = [(d1, True, 4), (d2, True, 7), (d1, True, 3), (d1, False, 0), (d2, True, 6)]
    inbox = [
        (conn, Completed(header(seq, conversation=c, initiator=side), b""))
        for c, side, seq in order
    ]
    taken = [(e[1].header.conversation_id, e[1].header.is_initiator, e[1].header.sequence) for e in in_sequence(inbox)]  # fmt: skip
    assert taken == [(d1, True, 3), (d2, True, 6), (d1, True, 4), (d1, False, 0), (d2, True, 7)]
