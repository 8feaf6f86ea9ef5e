"""Activation exactly as documented (ACT-1..9, TICK-2a), on a ManualClock: the decisions as pure
functions, then scenarios with real procedures whose "processing" takes simulated seconds."""

from __future__ import annotations

import threading

import pytest

from servicebroker import Activation, Broker, ManualClock
from servicebroker.activation.monitor import (
    MonitorInputs,
    Reason,
    Trigger,
    activation_necessary,
    internal_activation_occurs,
    monitor_state,
)
from servicebroker.testing import SimulatedWork
from servicebroker.testing.waiting import eventually

from .conftest import Pair, make_pair

NOW = 1_000.0


def inputs(**kw: object) -> MonitorInputs:
    base: dict[str, object] = dict(
        has_unread=True,
        arrived_on_empty=False,
        running=1,
        waiting=0,
        last_empty_rowset_time=None,
        now=NOW,
        window=5.0,
    )
    base.update(kw)
    return MonitorInputs(**base)  # type: ignore[arg-type]


# -- the decisions, as pure functions -------------------------------------------------------


def test_5a_new_message_on_an_idle_queue() -> None:
    # rule ACT-5a, rule ACT-1 (necessary, then occurs)
    m = inputs(arrived_on_empty=True, running=0, last_empty_rowset_time=NOW - 1)
    assert activation_necessary(Trigger.MESSAGE_ARRIVED, m) is Reason.NEW_WORK
    assert (
        activation_necessary(
            Trigger.MESSAGE_ARRIVED,
            inputs(arrived_on_empty=True, running=1, last_empty_rowset_time=NOW - 1),
        )
        is None
    )
    assert activation_necessary(Trigger.TICK, m) is None  # 5a needs the arrival itself


def test_5b_messages_accumulate() -> None:
    # rule ACT-5b, rule ACT-3
    assert activation_necessary(Trigger.TICK, inputs()) is Reason.ACCUMULATING
    assert (
        activation_necessary(Trigger.TICK, inputs(waiting=1)) is None
    )  # a reader waits: it will take them
    assert activation_necessary(Trigger.TICK, inputs(has_unread=False)) is None
    assert activation_necessary(Trigger.TICK, inputs(last_empty_rowset_time=NOW - 4.9)) is None
    assert (
        activation_necessary(Trigger.TICK, inputs(last_empty_rowset_time=NOW - 5.0))
        is Reason.ACCUMULATING
    )


def test_activation_occurs_below_max_readers_one_per_interval() -> None:
    # rule ACT-7, rule ACT-9
    def occurs(reason: Reason = Reason.ACCUMULATING, **kw: object) -> bool:
        args: dict[str, object] = dict(
            running=1,
            max_queue_readers=3,
            suppressed=False,
            last_activated=NOW - 5,
            now=NOW,
            interval=5.0,
        )
        args.update(kw)
        return internal_activation_occurs(reason, **args)  # type: ignore[arg-type]

    assert occurs()
    assert not occurs(running=3)
    assert not occurs(suppressed=True)
    assert not occurs(last_activated=NOW - 1)
    assert occurs(Reason.NEW_WORK, running=0, last_activated=NOW - 1)
    # rule ACT-6, rule TICK-2a: with readers running, a 5b reader is added at a timer
    # notification only — never at the RECEIVE that takes a group being handed over
    assert not occurs(at_tick=False)
    assert occurs(at_tick=False, running=0)
    assert not occurs(Reason.NEW_WORK, running=0, max_queue_readers=0)


def test_monitor_states() -> None:
    # rule ACT-2 (the dm_broker_queue_monitors state column)
    assert monitor_state(running=0, has_unread=False, received_since_activation=False) == "INACTIVE"
    assert monitor_state(running=1, has_unread=True, received_since_activation=False) == "NOTIFIED"
    assert (
        monitor_state(running=1, has_unread=True, received_since_activation=True)
        == "RECEIVES_OCCURRING"
    )


# -- scenarios with procedures ----------------------------------------------------------------


def send(broker: Broker, pair: Pair, conversations: int, per_conversation: int) -> None:
    with broker.transaction() as tx:
        for c in range(conversations):
            h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
            for i in range(per_conversation):
                tx.send(h, "Req", f"{c}:{i}".encode())


def activated(
    broker: Broker, clock: ManualClock, *, max_queue_readers: int
) -> tuple[Pair, SimulatedWork]:
    """The test pair, with the target queue activating a procedure that takes 10 messages per
    RECEIVE, holds the group 1 simulated second, and exits after 2 s without messages. The
    clock then stands half a second past the broker's start, so that work ends between the
    ticks; run it in half-second steps (see :meth:`SimulatedWork.run`)."""
    pair = make_pair(broker)
    clock.advance(0.5)
    sim = SimulatedWork(broker, clock, pair.tq)
    procedure = sim.procedure(top=10, seconds=1, wait=2)
    broker.alter_queue(
        pair.tq, activation=Activation(procedure, max_queue_readers=max_queue_readers)
    )
    return pair, sim


@pytest.fixture
def started(broker: Broker) -> Broker:
    broker.start()
    return broker


def test_one_conversation_is_served_by_two_readers_at_most(
    started: Broker, clock: ManualClock
) -> None:
    # rule ACT-6, rule ACT-5b, rule ACT-3 (tasks_waiting)
    broker = started
    pair, sim = activated(broker, clock, max_queue_readers=10)
    send(broker, pair, conversations=1, per_conversation=1000)
    sim.run(120, step=0.5)
    assert max(r for r, _ in sim.samples) == 2
    assert (2, 1) in sim.samples  # the second reader waits in RECEIVE and shows in tasks_waiting
    assert broker.peek(pair.tq) == []
    assert sim.samples[-1][0] == 0  # both exited once the queue stayed empty for their wait


def test_readers_climb_one_per_tick_to_max_queue_readers(
    started: Broker, clock: ManualClock
) -> None:
    # rule ACT-7, rule ACT-5b, rule TICK-2a
    broker = started
    pair, sim = activated(broker, clock, max_queue_readers=10)
    send(broker, pair, conversations=50, per_conversation=100)
    sim.run(120, step=0.5)
    assert max(r for r, _ in sim.samples) == 10
    gaps = [b - a for a, b in zip(sim.starts, sim.starts[1:], strict=False)]
    assert min(gaps) >= 5.0  # one more per tick at most
    assert broker.peek(pair.tq) == []
    assert sim.samples[-1][0] == 0


def test_one_message_on_an_idle_queue_starts_one_reader_at_once(
    started: Broker, clock: ManualClock
) -> None:
    # rule ACT-5a, rule ACT-4a
    broker = started
    pair, sim = activated(broker, clock, max_queue_readers=5)
    send(broker, pair, conversations=1, per_conversation=1)
    sim.settle()  # no clock move: no tick
    assert sim.starts == [clock.now()]
    assert broker.views.dm_broker_activated_tasks()[0].queue_name == pair.tq
    # sys.dm_broker_activated_tasks (docs/relational-databases/system-dynamic-management-views/
    # sys-dm-broker-activated-tasks-transact-sql.md): execute_as, "ID of the user that this task
    # runs as" — here the EXECUTE AS name of the queue's ACTIVATION clause (default SELF)
    assert broker.views.dm_broker_activated_tasks()[0].execute_as == "SELF"


def one_useless_run(broker: Broker, clock: ManualClock) -> tuple[Pair, list[float]]:
    """The pair with a procedure that never receives, started once by one message; returns
    the pair and the broker times at which the procedure was called."""
    pair = make_pair(broker)
    calls: list[float] = []
    procedure = Activation(lambda ctx: calls.append(clock.now()), max_queue_readers=3)
    broker.alter_queue(pair.tq, activation=procedure)
    send(broker, pair, conversations=1, per_conversation=1)
    eventually(
        lambda: len(calls) == 1 and not broker.views.dm_broker_activated_tasks(), every=0.002
    )
    return pair, calls


def test_procedure_that_exits_without_receiving_is_not_restarted(
    started: Broker, clock: ManualClock
) -> None:
    # rule ACT-9
    broker = started
    pair, calls = one_useless_run(broker, clock)
    clock.advance(30)  # six ticks with unread messages: not re-activated
    broker.tasks.drain()  # any launch decided during those ticks has been made
    (m,) = broker.views.dm_broker_queue_monitors()
    assert m.running_tasks == 0  # decisions reserve a reader synchronously: none was
    assert len(calls) == 1
    # the work is still there, unread, and the monitor stays idle over it: suppressed, not empty
    assert [msg.status for msg in broker.peek(pair.tq)] == [1]
    (m,) = broker.views.dm_broker_queue_monitors()
    assert (m.state, m.running_tasks, m.peak_running_tasks) == ("INACTIVE", 0, 1)
    broker.alter_queue(
        pair.tq, activation=Activation(lambda ctx: calls.append(clock.now()), max_queue_readers=3)
    )
    eventually(
        lambda: len(calls) == 2, every=0.002
    )  # ALTER QUEUE lets the monitor try again (ACT-4e)


def test_a_rollback_makes_the_monitor_check_at_once(
    broker: Broker, pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rule ACT-4c
    checks: list[tuple[Trigger, frozenset[int] | None]] = []
    real = broker.activation.check

    def spy(
        queue_ids: set[int] | None = None,
        trigger: Trigger = Trigger.TICK,
        arrived_on_empty: frozenset[int] = frozenset(),
    ) -> None:
        checks.append((trigger, None if queue_ids is None else frozenset(queue_ids)))
        real(queue_ids, trigger, arrived_on_empty)

    monkeypatch.setattr(broker.activation, "check", spy)
    broker.activation.enabled = True
    send(broker, pair, 1, 1)
    tq = broker.catalog.queue(pair.tq).queue_id
    assert (Trigger.MESSAGE_ARRIVED, frozenset({tq})) in checks  # rule ACT-4a
    with pytest.raises(RuntimeError), broker.transaction() as tx:
        tx.receive(pair.tq)
        assert checks[-1] == (Trigger.RECEIVE, frozenset({tq}))  # rule ACT-4b
        raise RuntimeError("roll back")
    assert checks[-1] == (Trigger.ROLLBACK, frozenset({tq}))


def test_waiting_in_another_process_counts(url: str, broker: Broker, pair: Pair) -> None:
    # rule ACT-3: waits are seen from every process
    import multiprocessing as mp

    from . import proc_workers

    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=proc_workers.wait_in_receive, args=(url, pair.tq, ready))
    p.start()
    try:
        assert ready.wait(60)
        tq = broker.catalog.queue(pair.tq).queue_id
        eventually(lambda: broker._storage.activity.waiting(tq) == 1, timeout=30, every=0.002)
    finally:
        p.kill()
        p.join(30)
    eventually(
        lambda: broker._storage.activity.waiting(tq) == 0, every=0.002
    )  # a dead process's wait vanishes


# -- external activation and event notifications ----------------------------------------------

NOTIFY = "//test/Activator"


def notifications(broker: Broker) -> list[dict[str, str]]:
    import xml.etree.ElementTree as ET

    broker.tasks.drain()  # notifications are sent by the task handlers
    out = []
    for m in broker.peek("notify_q"):
        assert (
            m.message_type_name
            == "http://schemas.microsoft.com/SQL/Notifications/EventNotification"
        )
        assert (
            m.service_contract_name
            == "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"
        )
        root = ET.fromstring(m.message_body)
        assert root.tag == "EVENT_INSTANCE"
        out.append(
            {child.tag: child.text or "" for child in root} | {"handle": str(m.conversation_handle)}
        )
    return out


def add_activator_service(broker: Broker) -> None:
    broker.create_queue("notify_q")
    broker.create_service(
        NOTIFY,
        queue="notify_q",
        contracts=["http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"],
    )


def test_queue_activation_notifications_are_spaced_by_the_timeout(
    started: Broker, clock: ManualClock
) -> None:
    # rule ACT-8, rule EVT-1, rule ACT-2 (a monitor for a queue with a QUEUE_ACTIVATION notification)
    # sys.dm_broker_queue_monitors (docs/relational-databases/system-dynamic-management-views/
    # sys-dm-broker-queue-monitors-transact-sql.md): "Returns a row for each queue monitor …
    # A queue monitor manages activation for a queue"; state "INACTIVE | NOTIFIED | …"
    broker = started
    pair = make_pair(broker)
    add_activator_service(broker)
    broker.create_event_notification(
        "ea", queue=pair.tq, event="QUEUE_ACTIVATION", to_service=NOTIFY
    )
    assert [m.queue_name for m in broker.views.dm_broker_queue_monitors()] == [pair.tq]
    send(broker, pair, conversations=3, per_conversation=1)
    first = notifications(broker)
    assert len(first) == 1  # at once: a message arrived on an idle queue (ACT-5a)
    assert first[0]["EventType"] == "QUEUE_ACTIVATION" and first[0]["ObjectName"] == pair.tq
    expected_name = "broker" if broker.paramstyle == "qmark" else "postgres"
    assert first[0]["DatabaseName"] == expected_name and first[0]["ObjectType"] == "QUEUE"
    (m,) = broker.views.dm_broker_queue_monitors()
    assert m.state == "NOTIFIED"
    clock.advance(
        55
    )  # eleven ticks, activation still necessary: no notification within the time-out
    assert len(notifications(broker)) == 1
    clock.advance(5)  # the time-out expired: another one
    assert len(notifications(broker)) == 2
    with (
        broker.transaction() as tx
    ):  # an external reader RECEIVEs: that re-arms at once (next tick)
        assert tx.receive(pair.tq)
    clock.advance(5)
    got = notifications(broker)
    assert len(got) == 3
    assert len({n["handle"] for n in got}) == 1  # one dialog per registration


def test_poison_raises_broker_queue_disabled(broker: Broker, pair: Pair) -> None:
    # rule POI-1, rule EVT-1
    add_activator_service(broker)
    broker.create_event_notification(
        "pd", queue=pair.tq, event="BROKER_QUEUE_DISABLED", to_service=NOTIFY
    )
    send(broker, pair, 1, 1)
    for _ in range(5):
        tx = broker.transaction()
        assert tx.receive(pair.tq)
        tx.rollback()
    (n,) = notifications(broker)
    assert n["EventType"] == "BROKER_QUEUE_DISABLED" and n["ObjectName"] == pair.tq


def test_event_notification_arguments(broker: Broker, pair: Pair) -> None:
    # rule EVT-1
    from servicebroker import CatalogError

    with pytest.raises(CatalogError, match="QUEUE_ACTIVATION, BROKER_QUEUE_DISABLED"):
        broker.create_event_notification("x", queue=pair.tq, event="QUEUE_FULL", to_service=NOTIFY)
    with pytest.raises(CatalogError, match="queue 'nope' does not exist"):
        broker.create_event_notification(
            "x", queue="nope", event="QUEUE_ACTIVATION", to_service=NOTIFY
        )
    broker.create_event_notification(
        "x", queue=pair.tq, event="QUEUE_ACTIVATION", to_service=NOTIFY
    )
    with pytest.raises(CatalogError, match="already exists"):
        broker.create_event_notification(
            "x", queue=pair.tq, event="QUEUE_ACTIVATION", to_service=NOTIFY
        )
    broker.drop_event_notification("x")
    with pytest.raises(CatalogError, match="does not exist"):
        broker.drop_event_notification("x")


def test_external_notification_due_is_a_pure_rule() -> None:
    # rule ACT-8
    from servicebroker.activation.monitor import external_notification_due

    assert external_notification_due(last_notified=None, last_receive=None, now=100, timeout=60)
    assert not external_notification_due(last_notified=90, last_receive=None, now=100, timeout=60)
    assert external_notification_due(last_notified=90, last_receive=95, now=100, timeout=60)
    assert not external_notification_due(last_notified=90, last_receive=90, now=100, timeout=60)
    assert external_notification_due(
        last_notified=90, last_receive=None, now=100, timeout=60, rearmed=True
    )
    assert external_notification_due(last_notified=30, last_receive=None, now=90, timeout=60)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_task_handlers_run_and_a_dead_one_is_restarted_on_the_next_tick(
    started: Broker, clock: ManualClock
) -> None:
    # rule TICK-2b: 2 x CPUs handlers, started with the broker, always running, restarted on failure
    import os

    broker = started
    rows = broker.views.dm_broker_task_handlers()
    assert len(rows) == 2 * (os.cpu_count() or 1)
    assert {r.state for r in rows} <= {"IDLE", "RUNNING"}
    ran = threading.Event()
    broker.tasks.submit(ran.set)
    assert ran.wait(10)

    def die() -> None:
        raise SystemExit("handler dies")

    broker.tasks.submit(die)
    eventually(
        lambda: any(r.state == "STOPPED" for r in broker.views.dm_broker_task_handlers()),
        every=0.002,
    )
    clock.advance(5)  # one timer notification
    rows = broker.views.dm_broker_task_handlers()
    assert all(r.state != "STOPPED" for r in rows)
    assert sum(r.restarts for r in rows) == 1


def test_empty_receives_are_seen_by_another_broker_on_the_database(
    url: str, broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule ACT-3b: when a RECEIVE without WHERE last returned nothing, from any process
    broker.alter_queue(pair.tq, activation=Activation("json:dumps", status=True))
    with Broker.open(url, clock=clock) as other, other.transaction() as tx:
        assert tx.receive(pair.tq) == []
    (m,) = [m for m in broker.views.dm_broker_queue_monitors() if m.queue_name == pair.tq]
    assert m.last_empty_rowset_time is not None
    assert m.last_empty_rowset_time.timestamp() == clock.now()


def test_new_work_on_a_busy_queue_lifts_the_suppression(
    started: Broker, clock: ManualClock
) -> None:
    # rule ACT-9: "until ... new work proves it useful" — a new message, even on a queue that
    # still holds unread ones (a monitor must never stay silent while work keeps arriving)
    broker = started
    pair, calls = one_useless_run(broker, clock)
    clock.advance(10)
    assert len(calls) == 1  # suppressed: the unread message alone does not restart it
    send(broker, pair, conversations=1, per_conversation=1)  # the queue was not empty
    eventually(lambda: len(calls) >= 2, every=0.002)  # restarted at once, with no clock move


def test_a_procedure_that_exits_while_the_database_fails_leaves_no_task_behind(
    started: Broker, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rule ACT-9, rule TICK-2a: an activated procedure returns just as the database goes away
    # (the queue's last message and the ACT-4d check cannot be read): its thread ends without
    # an unhandled exception, its task is gone, and the monitor, not suppressed over work it
    # could not see, starts a reader again at the next tick once the database is back
    from servicebroker import DatabaseUnavailableError

    broker = started
    unhandled: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: unhandled.append(args.exc_value))
    away = threading.Event()
    storage = broker._storage  # type: ignore[attr-defined]
    real = storage.connection

    def connection(*args: object, **kwargs: object) -> object:
        if away.is_set():
            raise DatabaseUnavailableError("the database is away (test)", database="test")
        return real(*args, **kwargs)

    monkeypatch.setattr(storage, "connection", connection)
    pair = make_pair(broker)
    calls: list[float] = []

    def procedure(ctx: object) -> None:  # receives nothing; the database goes as it returns
        calls.append(clock.now())
        if len(calls) == 1:
            away.set()

    broker.alter_queue(pair.tq, activation=Activation(procedure, max_queue_readers=1))
    send(broker, pair, conversations=1, per_conversation=1)
    eventually(lambda: calls and not broker.views.dm_broker_activated_tasks(), every=0.002)
    away.clear()
    assert unhandled == []
    assert [m.status for m in broker.peek(pair.tq)] == [1]  # the work is still there
    clock.advance(5)  # a tick later (one activation per interval), the monitor starts one
    eventually(lambda: len(calls) == 2, every=0.002)
