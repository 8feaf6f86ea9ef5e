"""The dialog's local guarantees across two broker instances (issue 12): lifetimes, DROP
SERVICE, conversation groups and RECEIVE order with each database's own priorities, activation
and poison handling on arrival, and the transmission order across destinations — two brokers
over real TCP with mutual TLS on loopback, a manual clock each (the ``sites`` fixture and
tests/transport_sites.py). Every outcome is awaited with a real-time deadline, never decided by
a sleep; a retry or a lifetime happens only when a test moves a clock."""

from __future__ import annotations

import threading

import pytest

from servicebroker import Activation, ActivationContext, TransportSettings
from servicebroker.dialogs import ERROR, parse_error_body
from servicebroker.errors import ConversationError
from servicebroker.testing.waiting import eventually

from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    catalog,
    connect,
    first_status,
    link,
    receive_all,
    secure,
)

RUSH = "//shop/Rush"
RETURNS = "//warehouse/Returns"


def error_of(site: Site, queue: str) -> tuple[int, str]:
    """The (code, description) of the one Error message that arrives on ``queue``."""
    [(kind, body)] = receive_all(site.broker, queue, 1)
    assert kind == ERROR
    return parse_error_body(body)


def test_dlg5_lifetime_expires_at_both_instances_and_a_waiting_message_goes(
    sites: tuple[Site, Site],
) -> None:
    """DLG-5 across instances: the dialog's LIFETIME travels in every message header, so the
    target endpoint made by the first message expires when the initiator's does (on each
    broker's own clock); each side then gets the Error -8489 and refuses SEND, and END
    closes each. NET-7: a message waits in the transmission queue only until its dialog's
    lifetime ends — it is then dropped, and the transport's copy is taken back at the next
    TICK-3b (a copy already sent is discarded by the target): the target never sees the dialog.
    https://learn.microsoft.com/en-us/sql/t-sql/statements/begin-dialog-conversation-transact-sql
    """
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(
            INITIATOR, TARGET, contract=CONTRACT, lifetime=60, encryption=False
        )
        tx.send(handle, "Order", "<o/>")
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o/>"]
    [initiator] = a.broker.views.conversation_endpoints()
    [target] = b.broker.views.conversation_endpoints()
    assert target.lifetime == initiator.lifetime  # the header carried it
    a.clock.advance(61)
    b.clock.advance(61)
    for site, queue in ((a, "shop_q"), (b, "warehouse_q")):
        code, text = error_of(site, queue)
        assert code == -8489 and "LIFETIME" in text
        [endpoint] = site.broker.views.conversation_endpoints()
        assert endpoint.state == "ER"
        with pytest.raises(ConversationError, match="LIFETIME"), site.broker.transaction() as tx:
            kind = "Order" if site is a else "Receipt"
            tx.send(endpoint.conversation_handle, kind, "<o/>")
        with site.broker.transaction() as tx:
            tx.end_conversation(endpoint.conversation_handle)
        assert site.broker.views.conversation_endpoints() == []

    # a message to a service the target does not have yet waits (NET-7) until the lifetime ends
    a.broker.create_service("//shop/Late", queue="shop_q")
    a.broker.create_route(
        "late", service_name="//warehouse/Late", address=f"TCP://127.0.0.1:{b.port}"
    )
    with a.broker.transaction() as tx:
        late = tx.begin_dialog(
            "//shop/Late", "//warehouse/Late", contract=CONTRACT, lifetime=30, encryption=False
        )
        tx.send(late, "Order", "<late/>")
    assert "could not be found" in eventually(lambda: first_status(a.broker), "its status")
    a.clock.advance(31)
    b.clock.advance(31)
    code, _ = error_of(a, "shop_q")
    assert code == -8489
    assert a.broker.views.transmission_queue() == []  # NET-7: it waited until the lifetime ended
    b.broker.create_service("//warehouse/Late", queue="warehouse_q", contracts=[CONTRACT])
    b.broker.grant("SEND", on="SERVICE:://warehouse/Late", to="public")
    a.clock.advance(64)  # past the NET-4 retry: the copy is gone (TICK-3b) or dropped at the target
    with a.broker.transaction() as tx:  # a later dialog to the same service: the sync point
        later = tx.begin_dialog(
            "//shop/Late", "//warehouse/Late", contract=CONTRACT, encryption=False
        )
        tx.send(later, "Order", "<later/>")
    a.clock.advance(16)  # the 95 s without traffic closed the connection (TICK-4a): TICK-3a
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<later/>"]
    assert len(b.broker.views.conversation_endpoints()) == 1  # the expired dialog never came


def test_drop_service_at_the_target_instance_sends_the_far_side_error_8470(
    sites: tuple[Site, Site],
) -> None:
    """DROP SERVICE on the target's broker: its endpoints and messages are deleted there and
    the initiator on the other instance gets the Error -8470 "Remote service has been
    dropped." first on its queue (SYS-2) through the transport (NET-2: unsequenced, kept in
    the transmission queue until acknowledged), goes to ER, and its END closes it; nothing is
    left in either transmission queue.
    https://learn.microsoft.com/en-us/sql/t-sql/statements/drop-service-transact-sql"""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(handle, "Order", "<o n='1'/>")
        tx.send(handle, "Order", "<o n='2'/>")
    eventually(lambda: len(b.broker.peek("warehouse_q")) == 2, "both orders at the warehouse")
    b.broker.drop_service(TARGET)
    assert b.broker.views.conversation_endpoints() == []
    assert b.broker.peek("warehouse_q") == []
    code, text = error_of(a, "shop_q")
    assert (code, text) == (-8470, "Remote service has been dropped.")
    [initiator] = a.broker.views.conversation_endpoints()
    assert initiator.state == "ER"
    with a.broker.transaction() as tx:
        tx.end_conversation(handle)
    assert a.broker.views.conversation_endpoints() == []
    eventually(lambda: not b.broker.views.transmission_queue(), "the Error acknowledged")
    assert a.broker.views.transmission_queue() == []
    assert b.broker.transport.statistics().acknowledged >= 1


def test_each_instance_keeps_its_own_conversation_groups(sites: tuple[Site, Site]) -> None:
    """DLG-1, DLG-7, PRI-12 across instances: two dialogs the initiator began in one
    conversation group (RELATED_CONVERSATION) arrive at the target in two groups of the
    target's own, and a MOVE CONVERSATION there changes nothing at the initiator: each
    RECEIVE returns one group of its own side."""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        first = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        second = tx.begin_dialog(
            INITIATOR, TARGET, contract=CONTRACT, related_conversation=first, encryption=False
        )
        tx.send(first, "Order", "<o n='1'/>")
        tx.send(second, "Order", "<o n='2'/>")
    [group_a] = {e.conversation_group_id for e in a.broker.views.conversation_endpoints()}
    eventually(lambda: len(b.broker.peek("warehouse_q")) == 2, "both orders at the warehouse")
    targets = b.broker.views.conversation_endpoints()
    assert len({e.conversation_group_id for e in targets}) == 2
    assert group_a not in {e.conversation_group_id for e in targets}
    for _ in range(2):
        with b.broker.transaction() as tx:
            assert len(tx.receive("warehouse_q", top=10)) == 1  # PRI-12: one group per RECEIVE
    with b.broker.transaction() as tx:
        tx.move_conversation(targets[1].conversation_handle, targets[0].conversation_group_id)
        for e in targets:
            tx.send(e.conversation_handle, "Receipt", b"r")
    assert {e.conversation_group_id for e in b.broker.views.conversation_endpoints()} == {
        targets[0].conversation_group_id
    }
    eventually(lambda: len(a.broker.peek("shop_q")) == 2, "both receipts at the shop")
    assert {e.conversation_group_id for e in a.broker.views.conversation_endpoints()} == {group_a}
    with a.broker.transaction() as tx:
        got = tx.receive("shop_q", top=10)
    assert len(got) == 2 and {m.conversation_group_id for m in got} == {group_a}


def test_pri7_each_instance_receives_by_its_own_broker_priorities(
    sites: tuple[Site, Site],
) -> None:
    """PRI-7, PRI-8, PRI-12: a level never travels; each end's level comes from its own
    database's broker priorities. The shop ranks Orders 9 and Rush 2, the warehouse ranks
    them 3 and 8: the warehouse receives Rush first, the shop receives the Orders reply
    first."""
    a, b = sites
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    a.broker.create_service(RUSH, queue="shop_q")
    for name in (INITIATOR, RUSH):
        b.broker.create_route(name, service_name=name, address=f"TCP://127.0.0.1:{a.port}")
    a.broker.create_broker_priority("orders", local_service_name=INITIATOR, priority_level=9)
    a.broker.create_broker_priority("rush", local_service_name=RUSH, priority_level=2)
    b.broker.create_broker_priority("orders", remote_service_name=INITIATOR, priority_level=3)
    b.broker.create_broker_priority("rush", remote_service_name=RUSH, priority_level=8)
    link(a, b)
    with a.broker.transaction() as tx:
        orders = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        rush = tx.begin_dialog(RUSH, TARGET, contract=CONTRACT, encryption=False)
        for h, name in ((orders, "orders"), (rush, "rush"), (orders, "orders"), (rush, "rush")):
            tx.send(h, "Order", f"<{name}/>")
    levels_a = {e.service_name: e.priority for e in a.broker.views.conversation_endpoints()}
    assert levels_a == {INITIATOR: 9, RUSH: 2}
    eventually(lambda: len(b.broker.peek("warehouse_q")) == 4, "the four orders")
    levels_b = {e.far_service: e.priority for e in b.broker.views.conversation_endpoints()}
    assert levels_b == {INITIATOR: 3, RUSH: 8}
    taken = []
    for _ in range(2):
        with b.broker.transaction() as tx:
            got = tx.receive("warehouse_q", top=10)
            taken.append([(m.priority, m.message_body) for m in got])
            tx.send(got[0].conversation_handle, "Receipt", got[0].message_body)
    assert taken == [[(8, b"<rush/>")] * 2, [(3, b"<orders/>")] * 2]
    eventually(lambda: len(a.broker.peek("shop_q")) == 2, "the two receipts")
    with a.broker.transaction() as tx:
        first = tx.receive("shop_q", top=10)
    assert [(m.priority, m.message_body) for m in first] == [(9, b"<orders/>")]


# The test moves b's clock 5 s per procedure run it waits for, more runs the slower the
# machine: past 90 s b closes the idle connection (TICK-4a) and a, whose clock stands still,
# keeps the destination suppressed (TICK-3a) and never sends the second message.
@pytest.mark.parametrize("transport_settings", [TransportSettings(idle_after=10**6)])
def test_activation_and_poison_at_the_target_instance(sites: tuple[Site, Site]) -> None:
    """ACT-5a, ACT-7: a message arriving by the transport on the target's idle queue starts
    its activation procedure at once. POI-1: the procedure's transaction rolls back 5 times
    in a row and the target queue is disabled; NET-7, QUE-3: the initiator's next message then
    waits in its transmission queue with a status naming the disabled queue, and is delivered
    (NET-4, at the next retry) once the queue is enabled again.
    https://learn.microsoft.com/en-us/sql/relational-databases/service-broker/service-broker-activation
    https://learn.microsoft.com/en-us/sql/relational-databases/service-broker/remove-poison-messages
    """
    a, b = sites
    connect(a, b)
    poisoned = threading.Event()
    poisoned.set()
    calls: list[bool] = []
    taken: list[bytes] = []

    def procedure(ctx: ActivationContext) -> None:
        calls.append(poisoned.is_set())
        with ctx.broker.transaction() as tx:
            got = tx.receive(ctx.queue_name, top=10)
            if got and poisoned.is_set():
                raise RuntimeError("poison")
            taken.extend(m.message_body for m in got)

    b.broker.alter_queue("warehouse_q", activation=Activation(procedure, max_queue_readers=1))
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(handle, "Order", "<o n='1'/>")
    eventually(lambda: calls, "the activated procedure")  # no clock move: ACT-5a

    def disabled() -> bool:
        """The queue is OFF; else, with no procedure running, the next tick (ACT-5b, TICK-1)
        starts it again."""
        if not b.broker.catalog.queue("warehouse_q").status:
            return True
        if not b.broker.views.dm_broker_activated_tasks():
            b.clock.advance(5)
        return False

    eventually(disabled, "the queue disabled by 5 rollbacks")
    events = eventually(lambda: b.broker.queue_disabled_events, "BROKER_QUEUE_DISABLED")
    assert len(calls) >= 5 and [name for name, _ in events] == ["warehouse_q"]
    assert len(b.broker.peek("warehouse_q")) == 1  # nothing lost
    with a.broker.transaction() as tx:
        tx.send(handle, "Order", "<o n='2'/>")
    status = eventually(lambda: first_status(a.broker), "the second message's status")
    assert "warehouse_q" in status and "disabled" in status
    poisoned.clear()
    b.broker.alter_queue("warehouse_q", status=True)
    b.clock.advance(5)  # ACT-5b: unread messages on the next tick start the procedure
    eventually(lambda: taken, "the first message processed")
    a.clock.advance(5)  # NET-4: the first retry comes after 4 s
    eventually(lambda: len(taken) == 2, "the second message processed")
    assert taken == [b"<o n='1'/>", b"<o n='2'/>"]
    eventually(lambda: not a.broker.views.transmission_queue(), "the shop's queue empty")


def test_pri14_to_16_transmission_order_by_level_with_aging_across_destinations(
    sites: tuple[Site, Site],
) -> None:
    """PRI-14, PRI-15, PRI-16 (HONOR_BROKER_PRIORITY ON), PRI-18 (aging) across instances:
    the shop's transport rows leave by level, then send order, to each destination — two
    connections to the warehouse (two addresses, each with its own service) — and a level-1
    message that has waited 100 s (aging, one level per 10 s) goes first; with
    HONOR_BROKER_PRIORITY OFF they leave in send order. The order shows in each target
    queue's queuing_order.
    https://learn.microsoft.com/en-us/sql/t-sql/statements/create-broker-priority-transact-sql
    """
    a, b = sites
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    a.broker.create_service(RUSH, queue="shop_q")
    b.broker.create_queue("returns_q")
    b.broker.create_service(RETURNS, queue="returns_q", contracts=[CONTRACT])
    b.broker.grant("SEND", on=f"SERVICE::{RETURNS}", to="public")
    a.broker.create_broker_priority("slow", local_service_name=INITIATOR, priority_level=1)
    a.broker.create_broker_priority("rush", local_service_name=RUSH, priority_level=10)
    a.broker.alter_database(honor_broker_priority=True)
    secure(a, b)
    secure(b, a, listener_ip="ALL")
    a.broker.create_route("warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{b.port}")
    a.broker.create_route("returns", service_name=RETURNS, address=f"TCP://127.0.0.2:{b.port}")
    b.broker.start()

    def send(service: str, to: str, *bodies: str) -> None:
        with a.broker.transaction() as tx:
            h = tx.begin_dialog(service, to, contract=CONTRACT, encryption=False)
            for body in bodies:
                tx.send(h, "Order", body)

    send(INITIATOR, TARGET, "<old/>")
    a.clock.advance(100)  # PRI-18: 100 s of waiting lift level 1 by 10 levels
    send(INITIATOR, TARGET, "<low n='1'/>", "<low n='2'/>")
    send(INITIATOR, RETURNS, "<low n='1'/>", "<low n='2'/>")
    send(RUSH, TARGET, "<rush n='1'/>", "<rush n='2'/>")
    send(RUSH, RETURNS, "<rush n='1'/>", "<rush n='2'/>")
    a.broker.start()  # the transmitter finds every row waiting

    def arrived(queue: str, n: int) -> list[bytes]:
        eventually(lambda: len(b.broker.peek(queue)) == n, f"{n} messages on {queue}")
        rows = sorted(b.broker.peek(queue), key=lambda m: m.queuing_order)
        return [m.message_body for m in rows]

    rush, low = [b"<rush n='1'/>", b"<rush n='2'/>"], [b"<low n='1'/>", b"<low n='2'/>"]
    assert arrived("warehouse_q", 5) == [b"<old/>", *rush, *low]
    assert arrived("returns_q", 4) == [*rush, *low]
    assert len({c.address for c in a.broker.transport.connections()}) == 2

    # PRI-16: with HONOR_BROKER_PRIORITY OFF every row leaves at level 5, in send order (one
    # commit, so the transmitter finds the four rows together)
    a.broker.alter_database(honor_broker_priority=False)
    with a.broker.transaction() as tx:
        slow = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        fast = tx.begin_dialog(RUSH, TARGET, contract=CONTRACT, encryption=False)
        for h, body in ((slow, low[0]), (slow, low[1]), (fast, rush[0]), (fast, rush[1])):
            tx.send(h, "Order", body)
    assert arrived("warehouse_q", 9)[5:] == [*low, *rush]


@pytest.mark.parametrize(
    "transport_settings",
    [TransportSettings(fragment_size=1024, fragments_per_block=4, slow_start_fragments=64)],
)
def test_pri18_a_small_low_level_message_travels_between_blocks_of_a_large_one(
    sites: tuple[Site, Site],
) -> None:
    """PRI-18 across instances: fragments travel in blocks (``fragments_per_block``), so a
    small level-1 message sent after a large level-10 one (40 fragments) is committed at
    the target before the large one is complete; the large body arrives whole (NET-5)."""
    a, b = sites
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    a.broker.create_service(RUSH, queue="shop_q")
    a.broker.create_broker_priority("slow", local_service_name=INITIATOR, priority_level=1)
    a.broker.create_broker_priority("rush", local_service_name=RUSH, priority_level=10)
    a.broker.alter_database(honor_broker_priority=True)
    secure(a, b)
    secure(b, a)
    a.broker.create_route("warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{b.port}")
    b.broker.start()
    large = "<big>" + "x" * (40 * 1024 - 11) + "</big>"
    with a.broker.transaction() as tx:
        tx.send(
            tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False),
            "Order",
            "<small/>",
        )
        tx.send(tx.begin_dialog(RUSH, TARGET, contract=CONTRACT, encryption=False), "Order", large)
    a.broker.start()
    eventually(lambda: len(b.broker.peek("warehouse_q")) == 2, "both messages")
    rows = sorted(b.broker.peek("warehouse_q"), key=lambda m: m.queuing_order)
    assert [m.message_body for m in rows] == [b"<small/>", large.encode()]
