"""Time-driven behaviour on the broker's clock: conversation timers (DLG-6), lifetimes (DLG-5),
the 5-second notification counter (TICK-1) — all on a ManualClock, no real waiting."""

from __future__ import annotations

import pytest

from servicebroker import (
    DIALOG_TIMER,
    ERROR,
    Broker,
    BrokerError,
    ConversationError,
    ManualClock,
    parse_error_body,
)
from servicebroker.engine.timer import PeriodicTasks

from .conftest import Pair


def test_conversation_timer_fires_on_the_local_queue(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule DLG-6
    broker.start()
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"x")
        tx.begin_conversation_timer(h, 90)
    clock.advance(89)
    assert broker.peek(pair.iq) == []
    clock.advance(1)
    (m,) = broker.peek(pair.iq)
    assert m.message_type_name == DIALOG_TIMER and m.conversation_handle == h
    assert [x.message_type_name for x in broker.peek(pair.tq)] == [
        "Req"
    ]  # never sent to the far side


def test_setting_the_timer_again_replaces_it(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule DLG-6: one timer per side per conversation
    broker.start()
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.begin_conversation_timer(h, 10)
    with broker.transaction() as tx:
        tx.begin_conversation_timer(h, 100)
    clock.advance(50)
    assert broker.peek(pair.iq) == []
    clock.advance(50)
    assert [m.message_type_name for m in broker.peek(pair.iq)] == [DIALOG_TIMER]
    clock.advance(500)
    assert len(broker.peek(pair.iq)) == 1


def test_timer_message_is_received_first(broker: Broker, pair: Pair, clock: ManualClock) -> None:
    # rule SYS-2: a DialogTimer message comes before any other of its conversation
    broker.start()
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"x")
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.send(m.conversation_handle, "Resp", b"r1")
        tx.begin_conversation_timer(m.conversation_handle, 5)
    with broker.transaction() as tx:
        tx.begin_conversation_timer(h, 5)
    clock.advance(5)
    with broker.transaction() as tx:
        assert [x.message_type_name for x in tx.receive(pair.iq)] == [DIALOG_TIMER, "Resp"]


def test_timer_can_be_fired_without_background_threads(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule DLG-6: the timer step is a plain method of `now`
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.begin_conversation_timer(h, 1)
    clock.advance(2)
    assert broker.peek(pair.iq) == []
    assert broker.timer.fire_dialog_timers(clock.now()) == 1
    assert [m.message_type_name for m in broker.peek(pair.iq)] == [DIALOG_TIMER]


def test_timer_arguments(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        with pytest.raises(BrokerError, match="TIMEOUT"):
            tx.begin_conversation_timer(h, -1)
        tx.end_conversation(h)


def test_lifetime_expiry_errors_both_sides(broker: Broker, pair: Pair, clock: ManualClock) -> None:
    # rule DLG-5: each side receives an Error; no new message is accepted; never ended by itself
    broker.start()
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C", lifetime=60)
        tx.send(h, "Req", b"x")
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
    target = m.conversation_handle
    clock.advance(61)
    states = {e.is_initiator: e.state for e in broker.views.conversation_endpoints()}
    assert states == {True: "ER", False: "ER"}
    for queue in (pair.iq, pair.tq):
        (err,) = broker.peek(queue)
        assert err.message_type_name == ERROR
        assert parse_error_body(err.message_body)[0] == -8489
    with broker.transaction() as tx, pytest.raises(ConversationError, match="in error"):
        tx.send(h, "Req", b"late")
    with broker.transaction() as tx:
        tx.end_conversation(h)
        tx.end_conversation(target)
    assert broker.views.conversation_endpoints() == []


def test_send_after_lifetime_passed_is_refused_before_the_timer_runs(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule DLG-5
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C", lifetime=10)
    clock.advance(11)
    with broker.transaction() as tx, pytest.raises(ConversationError, match="LIFETIME"):
        tx.send(h, "Req", b"x")


def test_lifetime_must_be_positive(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx, pytest.raises(BrokerError, match="LIFETIME"):
        tx.begin_dialog(pair.initiator, pair.target, contract="C", lifetime=0)


def test_tick_counting_and_periodic_registry() -> None:
    # rule TICK-1: a notification every 5 seconds, counted; work at multiples of the interval
    ran: list[tuple[str, float]] = []
    tasks = PeriodicTasks(5.0)
    tasks.register("every", 1, lambda now: ran.append(("every", now)))
    tasks.register("second", 2, lambda now: ran.append(("second", now)))
    tasks.register("fifth", 5, lambda now: ran.append(("fifth", now)))
    assert tasks.due_ticks(0.0, 4.9) == 0
    assert tasks.tick_to(tasks.due_ticks(0.0, 5.0), 5.0) == ["every"]
    assert tasks.tick_to(tasks.due_ticks(0.0, 10.0), 10.0) == ["every", "second"]
    assert tasks.tick_to(tasks.due_ticks(0.0, 25.0), 25.0) == ["every", "second", "fifth"]
    assert tasks.ticks == 5


def test_background_timer_counts_ticks(broker: Broker, clock: ManualClock) -> None:
    # rule TICK-1
    broker.start()
    clock.advance(14.9)
    assert broker.timer.statistics().ticks == 2
    clock.advance(0.1)
    assert broker.timer.statistics().ticks == 3
