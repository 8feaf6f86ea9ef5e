"""What operators read from another process (issue 15): the statistics every broker publishes
(servicebroker.engine.statistics) and the read model built on them and on storage
(servicebroker.engine.operations), on SQLite and PostgreSQL.

Microsoft's counterparts: the "SQL Server, Broker Statistics" and "Broker Activation"
performance objects (docs/relational-databases/performance-monitor/sql-server-broker-statistics-
object.md, …-broker-activation-object.md) count SENDs, RECEIVEs, enqueued messages and task
starts per instance; sys.dm_broker_queue_monitors and sys.transmission_queue are the DMVs.
"""

from __future__ import annotations

import threading

import pytest

from servicebroker import Activation, Broker, ManualClock
from servicebroker.engine.operations import QueueOverview, overview
from servicebroker.engine.statistics import (
    RETIRED,
    STALE_AFTER,
    Histogram,
    InstanceStatistics,
    QueueStatistics,
    StatisticsFormatError,
    broker_time,
    published,
    total,
)
from servicebroker.storage.rows import StatisticsRow
from servicebroker.testing.waiting import eventually
from tests.conftest import Pair, make_pair


def dialogs(broker: Broker, pair: Pair, n: int, message_type: str = "Req") -> list[object]:
    handles = []
    with broker.transaction() as tx:
        for _ in range(n):
            h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
            tx.send(h, message_type, b"x")
            handles.append(h)
    return handles


def published_queue(broker: Broker, reader: Broker, queue: str) -> QueueOverview:
    """``broker`` publishes its statistics; ``reader`` (another process) reads ``queue``."""
    broker.publish_statistics()
    q = overview(reader).queue(queue)
    assert q is not None, queue
    return q


def test_counts_per_queue_and_type_reach_another_process(
    broker: Broker, pair: Pair, url: str, clock: ManualClock
) -> None:
    """Messages enqueued, SENT and RECEIVEd are counted per queue and message type at commit
    (a rolled-back RECEIVE counts nothing), and a second broker — another process — reads them
    once published."""
    dialogs(broker, pair, 4)
    with pytest.raises(RuntimeError), broker.transaction() as tx:
        assert tx.receive(pair.tq)
        raise RuntimeError("roll back")
    with broker.transaction() as tx:
        got = tx.receive(pair.tq, top=1)
        tx.send(got[0].conversation_handle, "Resp", b"y")
    broker.publish_statistics()
    with Broker.open(url, clock=clock) as other:
        seen = overview(other)
        tq, iq = seen.queue(pair.tq), seen.queue(pair.iq)
        assert tq is not None and iq is not None
        assert tq.messages_enqueued == {"Req": 4}
        assert tq.messages_received == {"Req": 1}
        assert tq.messages_sent == {"Resp": 1}
        assert iq.messages_sent == {"Req": 4}
        assert iq.messages_enqueued == {"Resp": 1}
        assert tq.ready_messages == 3 and tq.received_messages == 0
        assert seen.totals.commits == 2 and seen.totals.rollbacks == 1
        assert seen.totals.commit_seconds.count == 2
        assert seen.totals.receive_wait_seconds.count == 2
        assert seen.dialogs_by_state == {"CONVERSING": 8}
        [mine] = [i for i in seen.instances if i.instance_id == broker.instance_id]
        assert not mine.is_running  # opened, never started


def test_a_held_group_shows_as_received_and_locked(broker: Broker, pair: Pair, url: str) -> None:
    """RCV-2: while a transaction holds a group, its messages count as received (not ready) and
    the group as locked, seen from another process; asking takes no lock."""
    dialogs(broker, pair, 3)
    with Broker.open(url) as other:
        tx = broker.transaction()
        got = tx.receive(pair.tq)
        assert len(got) == 1
        q = other.operations.overview().queue(pair.tq)
        assert q is not None
        assert (q.ready_messages, q.received_messages) == (2, 1)
        assert (q.conversation_groups, q.locked_groups) == (3, 1)
        groups = other.operations.conversation_groups(pair.tq)
        locked = [g for g in groups if g.is_locked]
        assert [g.conversation_group_id for g in locked] == [got[0].conversation_group_id]
        with other.transaction() as tx2:  # the other groups are free to take
            assert len(tx2.receive(pair.tq, top=5)) == 1
        tx.commit()
        q = other.operations.overview().queue(pair.tq)
        assert q is not None and (q.received_messages, q.locked_groups) == (0, 0)


def test_a_closed_broker_adds_its_counts_to_retired_and_totals_never_go_down(
    url: str, clock: ManualClock
) -> None:
    """A broker that closes adds its counters to the one 'retired' row and deletes its own, in
    one transaction: the totals stay what they were; two that close add up."""
    with Broker.open(url, clock=clock) as reader:
        pair = make_pair(reader)
        for n in (3, 2):
            worker = Broker.open(url, clock=clock)
            worker.start()
            dialogs(worker, pair, n)
            worker.publish_statistics()
            before = overview(reader).totals
            worker.close()
            ids = {r.instance_id for r in reader.views.dm_broker_statistics()}
            assert worker.instance_id not in ids and RETIRED in ids
            after = overview(reader).totals
            assert (
                after.queues[pair.tq].messages_enqueued == before.queues[pair.tq].messages_enqueued
            )
            assert after.commits == before.commits
        assert overview(reader).totals.queues[pair.tq].messages_enqueued == {"Req": 5}


def test_a_broker_never_started_publishes_what_it_counted_at_close(
    url: str, clock: ManualClock
) -> None:
    """A broker used as a library (never started) still adds its counts at close, whatever it
    counted: here only messages the transmission queue delivered when the queue was turned ON."""
    with Broker.open(url, clock=clock) as reader:
        pair = make_pair(reader)
        reader.alter_queue(pair.tq, status=False)
        dialogs(reader, pair, 2)
        with Broker.open(url, clock=clock) as admin:
            admin.alter_queue(pair.tq, status=True)  # delivers the two waiting messages
        retired = [r for r in reader.views.dm_broker_statistics() if r.instance_id == RETIRED]
        assert retired and retired[0].queues[pair.tq].messages_enqueued == {"Req": 2}


def test_activation_starts_outlive_activation_off_and_the_lead(
    url: str, clock: ManualClock
) -> None:
    """ACT-7: the starts a broker published are kept when the queue's activation is turned OFF
    and when the broker stops leading: a counter never goes down."""

    def reader(ctx: object) -> None:
        pass

    with Broker.open(url, clock=clock) as broker:
        pair = make_pair(broker)
        broker.alter_queue(pair.tq, activation=Activation(reader, max_queue_readers=1))
        broker.start()
        try:
            dialogs(broker, pair, 1)

            def starts() -> int:
                return published_queue(broker, broker, pair.tq).activation_starts

            eventually(lambda: starts() >= 1, "an activation start is published")
            broker.alter_queue(pair.tq, activation=Activation(reader, status=False))
            assert starts() >= 1
        finally:
            broker.stop()
        q = overview(broker).queue(pair.tq)
        assert q is not None and q.activation_starts >= 1


def test_the_leader_publishes_its_monitors_and_readers(url: str, clock: ManualClock) -> None:
    """ACT-2, ACT-7: the leading broker publishes each queue monitor's state, the readers it
    runs and how many it started; a console in another process reads them."""
    release = threading.Event()
    entered = threading.Event()

    def reader(ctx: object) -> None:
        entered.set()
        release.wait(10)

    with Broker.open(url, clock=clock) as broker:
        pair = make_pair(broker)
        broker.alter_queue(pair.tq, activation=Activation(reader, max_queue_readers=1))
        broker.start()
        try:
            dialogs(broker, pair, 1)
            assert entered.wait(10)
            with Broker.open(url, clock=clock) as console:

                def readers() -> int:
                    return published_queue(broker, console, pair.tq).readers_running

                eventually(lambda: readers() == 1, "the reader is published as running")
                q = overview(console).queue(pair.tq)
                assert q is not None
                assert q.activation_starts == 1 and q.peak_readers == 1
                assert q.monitor_state in ("RECEIVES_OCCURRING", "NOTIFIED")
                assert overview(console).totals.is_leader
        finally:
            release.set()
            broker.stop()


def test_poison_events_and_a_disabled_queue(broker: Broker, pair: Pair) -> None:
    """POI-1: five rollbacks in a row turn the queue OFF; the overview shows it OFF with one
    poison event."""
    dialogs(broker, pair, 1)
    for _ in range(5):
        with pytest.raises(RuntimeError), broker.transaction() as tx:
            assert tx.receive(pair.tq)
            raise RuntimeError("poison")
    q = overview(broker).queue(pair.tq)
    assert q is not None and not q.is_receive_enabled
    assert published_queue(broker, broker, pair.tq).poison_events == 1


def test_a_message_waiting_in_the_transmission_queue(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    """QUE-3: a message for a queue that is OFF waits in the transmission queue; the overview
    gives the count, the oldest and the status."""
    broker.alter_queue(pair.tq, status=False)
    dialogs(broker, pair, 2)
    seen = overview(broker)
    assert seen.transmission_count == 2
    assert seen.transmission_oldest is not None
    assert sum(seen.transmission_by_status.values()) == 2
    assert any("disabled" in status for status in seen.transmission_by_status)


def test_the_timer_ticks_are_published(broker: Broker, pair: Pair, clock: ManualClock) -> None:
    """TICK-1: the leader counts the 5-second notifications; they are published."""
    broker.start()
    try:
        clock.advance(15)

        def ticks() -> int:
            broker.publish_statistics()
            return overview(broker).totals.timer_ticks

        eventually(lambda: ticks() >= 3, "three ticks published")
    finally:
        broker.stop()


def test_histograms_and_snapshots_round_trip() -> None:
    """A histogram counts each observation in its bucket; snapshots survive JSON; sums add
    counters and keep only running instances' live figures."""
    h = Histogram().observe(0.0004).observe(0.2).observe(100.0)
    assert h.count == 3 and h.counts[0] == 1 and h.counts[-1] == 1
    assert h.quantile(0.5) == 0.25 and h.quantile(1.0) == float("inf")
    assert Histogram().quantile(0.5) is None
    running = InstanceStatistics(
        "a",
        is_running=True,
        commits=2,
        commit_seconds=h,
        queues={"q": QueueStatistics({"T": 2}, readers_running=1, monitor_state="NOTIFIED")},
    )
    gone = InstanceStatistics(
        "b", commits=3, queues={"q": QueueStatistics({"T": 5}, readers_running=4)}
    )
    assert InstanceStatistics.from_json(running.to_json()) == running
    both = total([running, gone])
    assert both.commits == 5 and both.commit_seconds == h
    assert both.queues["q"].messages_enqueued == {"T": 7}
    assert both.queues["q"].readers_running == 1
    assert both.queues["q"].monitor_state == "NOTIFIED"
    for bad in ("[1]", "{", '{"instance_id": "x", "queues": {"q": 5}}'):
        with pytest.raises(StatisticsFormatError, match="not a broker statistics snapshot"):
            InstanceStatistics.from_json(bad)


def test_a_damaged_row_is_left_out_not_fatal(broker: Broker, pair: Pair) -> None:
    """A row this version cannot read (another version's, or damaged) is logged and left out:
    the views, the overview and the other rows still read."""
    dialogs(broker, pair, 1)
    broker.publish_statistics()
    p = "?" if broker.paramstyle == "qmark" else "%s"
    broker.execute(
        f"INSERT INTO broker_statistics (instance_id, process, updated, state, snapshot) "
        f"VALUES ({p}, {p}, {p}, {p}, {p})",
        ("damaged", "h:1", 0.0, "running", "{not json"),
    )
    ids = [i.instance_id for i in broker.views.dm_broker_statistics()]
    assert ids == [broker.instance_id]
    q = overview(broker).queue(pair.tq)
    assert q is not None and q.messages_enqueued == {"Req": 1}


def test_a_silent_process_stops_counting_as_running() -> None:
    """Liveness is real time (the row's publication time), whatever the broker's clock: a row
    not published again within STALE_AFTER seconds is read as not running, its live figures
    drop out of the sums, and the brokers' time is the freshest running one's reading plus the
    real time since."""
    snapshot = InstanceStatistics(
        "a",
        updated=5.0,  # a ManualClock's reading
        queues={"q": QueueStatistics({"T": 1}, readers_running=2, monitor_state="NOTIFIED")},
    )
    row = StatisticsRow("a", "host:1", 1000.0, "running", snapshot.to_json())
    fresh = published(row, 1004.0)
    assert fresh.is_running and fresh.published == 1000.0
    assert broker_time([fresh], 1004.0) == 9.0
    stale = published(row, 1000.0 + STALE_AFTER + 1)
    assert not stale.is_running
    assert broker_time([stale], 2000.0) is None
    summed = total([stale]).queues["q"]
    assert summed.readers_running == 0 and summed.monitor_state is None
    assert summed.messages_enqueued == {"T": 1}


def test_timer_ticks_are_counted_once_across_leaders(url: str, clock: ManualClock) -> None:
    """TICK-1: a broker that takes the lead does not count again the notifications its
    predecessor counted; the published sum counts each 5-second notification once."""
    with Broker.open(url, clock=clock) as a, Broker.open(url, clock=clock) as b:
        a.start()
        b.start()
        try:
            assert a.is_leader and not b.is_leader
            clock.advance(10)
            eventually(lambda: a.timer.statistics().ticks == 2, "the first leader ticks twice")
            a.stop()
            eventually(lambda: b.is_leader, "the second broker takes the lead")
            clock.advance(5)
            eventually(lambda: b.timer.statistics().ticks == 1, "one tick of its own")
            a.publish_statistics()
            b.publish_statistics()
            assert overview(b).totals.timer_ticks == 3
        finally:
            b.stop()
