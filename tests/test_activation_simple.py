"""Activation in its first, simple form (ACT-7): start the procedure when messages arrive, up
to MAX_QUEUE_READERS; the views list monitors and running procedures (ACT-2)."""

from __future__ import annotations

import threading

from servicebroker import Activation, ActivationContext, Broker, ManualClock

from .conftest import Pair, make_pair


def test_activation_starts_a_reader_that_drains_the_queue(
    broker: Broker, clock: ManualClock
) -> None:
    # rule ACT-7
    pair = make_pair(broker)
    seen: list[bytes] = []
    done = threading.Event()

    def reader(ctx: ActivationContext) -> None:
        assert ctx.queue_name == pair.tq
        while True:
            with ctx.broker.transaction() as tx:
                msgs = tx.receive(ctx.queue_name, timeout=5)
                if not msgs:
                    done.set()
                    return
                seen.extend(m.message_body for m in msgs)
                for h in {m.conversation_handle for m in msgs}:
                    tx.end_conversation(h)

    broker.alter_queue(pair.tq, activation=Activation(reader, max_queue_readers=3))
    broker.start()
    with broker.transaction() as tx:
        for i in range(4):
            h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
            tx.send(h, "Req", f"{i}".encode())
    _until(lambda: len(seen) == 4)
    # rule ACT-2: the queue with activation ON has a monitor, listed in dm_broker_queue_monitors
    (monitor,) = [m for m in broker.views.dm_broker_queue_monitors() if m.queue_name == pair.tq]
    assert 1 <= monitor.peak_running_tasks <= 3

    def all_waiting() -> bool:
        (m,) = [m for m in broker.views.dm_broker_queue_monitors() if m.queue_name == pair.tq]
        return m.tasks_waiting == m.running_tasks

    _until(all_waiting)
    clock.advance(5)
    assert done.wait(10)
    _until(lambda: broker.views.dm_broker_activated_tasks() == [])
    assert sorted(seen) == [b"0", b"1", b"2", b"3"]


def test_no_more_readers_than_max_queue_readers(broker: Broker, clock: ManualClock) -> None:
    # rule ACT-7
    pair = make_pair(broker)
    release = threading.Event()
    running = []

    def slow(ctx: ActivationContext) -> None:
        with ctx.broker.transaction() as tx:
            if tx.receive(ctx.queue_name):
                running.append(1)
                release.wait(10)

    broker.alter_queue(pair.tq, activation=Activation(slow, max_queue_readers=2))
    broker.start()
    for _ in range(5):
        with broker.transaction() as tx:
            h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
            tx.send(h, "Req", b"x")
    _until(lambda: len(running) == 2)
    tasks = broker.views.dm_broker_activated_tasks()
    assert len(tasks) == 2 and {t.queue_name for t in tasks} == {pair.tq}
    release.set()
    _until(lambda: broker.peek(pair.tq) == [])
    (monitor,) = [m for m in broker.views.dm_broker_queue_monitors() if m.queue_name == pair.tq]
    assert monitor.peak_running_tasks == 2


def test_activation_off_starts_nothing(broker: Broker, pair: Pair) -> None:
    # rule ACT-7 (STATUS = OFF); rule ACT-2 (a monitor only for queues with activation ON)
    started = []
    broker.alter_queue(pair.tq, activation=Activation(lambda ctx: started.append(1), status=False))
    broker.start()
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"x")
    broker.activation.check()
    assert started == []
    assert broker.views.dm_broker_queue_monitors() == []


def _until(cond: object, limit: float = 10.0) -> None:
    import time

    end = time.monotonic() + limit
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.002)
