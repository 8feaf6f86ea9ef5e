"""Stream readers' conversation-group claims (issue 14): what RECEIVE, GET CONVERSATION GROUP,
activation and other readers see of a claimed group, acknowledging, resuming after a crash, the
time-out, RETENTION — on both backends, without Spark (the Spark source is a thin shell over
these calls: tests/test_spark_streaming.py)."""

from __future__ import annotations

import functools
import operator
import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servicebroker import Broker, ManualClock
from servicebroker.engine.claims import assign_parts
from servicebroker.errors import BrokerError, CatalogError, ConversationError, StreamClaimError

from .conftest import Pair, make_pair


def dialogs(broker: Broker, pair: Pair, n: int, per: int = 3, prefix: str = "") -> list[uuid.UUID]:
    """``n`` dialogs of ``per`` Req messages each (``f"{prefix}{k}:{i}"``), in one transaction,
    each its own group at the target; returns the initiator handles."""
    handles = []
    with broker.transaction() as tx:
        for k in range(n):
            h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
            for i in range(per):
                tx.send(h, "Req", f"{prefix}{k}:{i}".encode())
            handles.append(h)
    return handles


def bodies(broker: Broker, reader: str, low: int, high: int) -> list[list[bytes]]:
    parts = broker.claims.parts(reader, low, high)
    return [
        [m.message_body for m in broker.claims.messages(reader, low, high, p)] for p, _ in parts
    ]


def test_a_claimed_group_is_not_received_until_acknowledged(broker: Broker, pair: Pair) -> None:
    # RCV-2 / DLG-9 across transactions: a RECEIVE takes a group no other transaction holds;
    # a stream reader's claim holds its groups until it acknowledges the batch
    # (RECEIVE, docs/t-sql/statements/receive-transact-sql.md: "the conversation group is
    # locked"; a claim is that lock kept in the database for a reader that outlives one)
    dialogs(broker, pair, 4)
    batch = broker.claims.plan("r", [pair.tq], 0, max_messages=6, partitions=2)
    assert batch == 1
    claimed = {c.conversation_group_id for c in broker.views.conversation_group_claims()}
    assert len(claimed) == 2
    assert sorted(functools.reduce(operator.iadd, bodies(broker, "r", 0, 1), [])) == [
        b"0:0",
        b"0:1",
        b"0:2",
        b"1:0",
        b"1:1",
        b"1:2",
    ]
    with broker.transaction() as tx:
        got = tx.receive(pair.tq)
        assert got and got[0].conversation_group_id not in claimed
        assert tx.get_conversation_group(pair.tq) not in claimed
        got2 = tx.receive(pair.tq)
        assert got2 and got2[0].conversation_group_id not in claimed
        assert tx.receive(pair.tq) == []  # only claimed groups are left
        by_group = tx.receive(pair.tq, conversation_group_id=next(iter(claimed)))
        assert by_group == []
    assert len(broker.peek(pair.tq)) == 6  # the claimed messages wait for the reader
    broker.claims.acknowledge("r", 1)
    assert broker.peek(pair.tq) == []
    assert broker.views.conversation_group_claims() == []


def test_a_batch_never_takes_a_group_another_transaction_holds(broker: Broker, pair: Pair) -> None:
    # RCV-2: "the query never reads a group another transaction holds"
    dialogs(broker, pair, 3)
    tx = broker.transaction()
    held = tx.receive(pair.tq)[0].conversation_group_id
    try:
        broker.claims.plan("r", [pair.tq], 0)
        claimed = {c.conversation_group_id for c in broker.views.conversation_group_claims()}
        assert held not in claimed and len(claimed) == 2
    finally:
        tx.rollback()  # the held group's messages are back (RCV-3) and unclaimed
    assert broker.claims.plan("r", [pair.tq], 1) == 2
    assert [c.conversation_group_id for c in broker.views.conversation_group_claims()] == [held]


def test_a_reader_that_restarts_gets_the_same_batch_again(broker: Broker, pair: Pair) -> None:
    # exactly once: a batch read again after a crash holds exactly the same messages, even
    # when a statement deleted the queue's copies meanwhile (END CONVERSATION, DLG-3)
    handles = dialogs(broker, pair, 3)
    first = broker.claims.plan("r", [pair.tq], 0, partitions=3)
    seen = bodies(broker, "r", 0, first)
    # the reader crashed before it recorded batch 1: it asks again from 0
    assert broker.claims.plan("r", [pair.tq], 0, partitions=3) == first
    assert bodies(broker, "r", 0, first) == seen
    with broker.transaction() as tx:  # the target ends one conversation: its messages go
        target = next(e for e in broker.views.conversation_endpoints() if not e.is_initiator)
        tx.end_conversation(target.conversation_handle)
    assert bodies(broker, "r", 0, first) == seen
    broker.claims.acknowledge("r", first)
    assert broker.peek(pair.tq) == []
    assert handles


def test_a_group_goes_whole_to_one_part_in_receive_order(broker: Broker, pair: Pair) -> None:
    # a group's messages in one task, in RECEIVE order (conversation, then sequence; SYS-2)
    with broker.transaction() as tx:
        h1 = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        for i in range(3):
            tx.send(h1, "Req", f"a{i}".encode())
    with broker.transaction() as tx:
        group = broker.views.conversation_endpoints()
        target_group = next(e.conversation_group_id for e in group if not e.is_initiator)
        h2 = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        for i in range(2):
            tx.send(h2, "Req", f"b{i}".encode())
    with broker.transaction() as tx:
        target2 = next(
            e.conversation_handle
            for e in broker.views.conversation_endpoints()
            if not e.is_initiator and e.conversation_group_id != target_group
        )
        tx.move_conversation(target2, target_group)  # both conversations in one group
    batch = broker.claims.plan("r", [pair.tq], 0, partitions=4)
    parts = bodies(broker, "r", 0, batch)
    assert parts == [[b"a0", b"a1", b"a2", b"b0", b"b1"]]


def test_max_messages_takes_whole_groups_or_the_head_of_one(broker: Broker, pair: Pair) -> None:
    # maxMessagesPerBatch: never more; whole groups while they fit, else the head of one group
    # (the rest of it stays claimed, in order, for the next batch)
    dialogs(broker, pair, 3, per=4)
    assert broker.claims.plan("r", [pair.tq], 0, max_messages=6) == 1
    assert bodies(broker, "r", 0, 1) == [[b"0:0", b"0:1", b"0:2", b"0:3"]]  # group 1 waits
    assert broker.claims.plan("r", [pair.tq], 1, max_messages=3) == 2
    assert bodies(broker, "r", 1, 2) == [[b"1:0", b"1:1", b"1:2"]]
    assert broker.claims.plan("r", [pair.tq], 2, max_messages=3) == 3
    assert bodies(broker, "r", 2, 3) == [[b"1:3"]]  # PRI-12: the older head first
    assert broker.claims.plan("r", [pair.tq], 3, max_messages=4) == 4
    assert bodies(broker, "r", 3, 4) == [[b"2:0", b"2:1", b"2:2", b"2:3"]]
    assert broker.claims.plan("r", [pair.tq], 4) == 4  # acknowledged, nothing left
    assert broker.peek(pair.tq) == []


def test_up_to_order_reads_only_what_was_there(broker: Broker, pair: Pair) -> None:
    # Trigger.AvailableNow: a run reads only what was queued when it started
    dialogs(broker, pair, 2)
    mark = broker.claims.watermark([pair.tq])
    dialogs(broker, pair, 2)
    batch = broker.claims.plan("r", [pair.tq], 0, up_to_order=mark)
    assert sum(len(p) for p in bodies(broker, "r", 0, batch)) == 6
    assert broker.claims.plan("r", [pair.tq], batch, up_to_order=mark) == batch  # drained


def test_an_absent_reader_is_released_after_its_time_out(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # "a claim whose query never comes back is released after a documented time-out"
    dialogs(broker, pair, 2)
    broker.claims.plan("gone", [pair.tq], 0, claim_timeout=60)
    clock.advance(59)
    broker.timer.run_due(clock.now())
    assert len(broker.views.conversation_group_claims()) == 2
    clock.advance(1)
    broker.timer.run_due(clock.now())  # TICK: the broker's timer releases it
    assert broker.views.conversation_group_claims() == []
    with broker.transaction() as tx:
        assert tx.receive(pair.tq)
    with pytest.raises(StreamClaimError, match=r"stream reader 'gone': batch 1 was released"):
        broker.claims.plan("gone", [pair.tq], 0)


def test_acknowledging_under_retention_keeps_messages_with_status_0(
    url: str, clock: ManualClock
) -> None:
    # RCV-3 / QUE-1: RETENTION = ON keeps received messages with status 0 until the
    # conversation ends (CREATE QUEUE, docs/t-sql/statements/create-queue-transact-sql.md)
    with Broker.open(url, clock=clock) as broker:
        pair = make_pair(broker, retention=True)
        dialogs(broker, pair, 1)
        broker.claims.plan("r", [pair.tq], 0)
        broker.claims.acknowledge("r", 1)
        assert {m.status for m in broker.peek(pair.tq)} == {0}


def test_bad_arguments_name_what_is_wrong(broker: Broker, pair: Pair) -> None:
    with pytest.raises(CatalogError, match="nope"):
        broker.claims.plan("r", ["nope"], 0)
    with pytest.raises(BrokerError, match="max_messages"):
        broker.claims.plan("r", [pair.tq], 0, max_messages=0)
    with pytest.raises(BrokerError, match="stream reader name"):
        broker.claims.plan("", [pair.tq], 0)
    dialogs(broker, pair, 1)
    broker.claims.plan("r", [pair.tq], 0)
    broker.claims.plan("r", [pair.tq], 1)
    with pytest.raises(StreamClaimError, match="acknowledged batch 1 already"):
        broker.claims.plan("r", [pair.tq], 0)


def test_assign_parts_balances_by_messages() -> None:
    assert assign_parts([5, 1, 1, 1, 1, 1], 2) == [0, 1, 1, 1, 1, 1]
    assert assign_parts([3, 3, 2, 2], 2) == [0, 1, 0, 1]
    assert assign_parts([], 3) == []


def test_senders_committing_out_of_order_are_never_skipped(broker: Broker, pair: Pair) -> None:
    # offsets with concurrent committing senders: a message whose transaction commits after a
    # later-numbered one is never skipped (a batch is the unclaimed ready groups, not a position)
    start = threading.Barrier(4)
    sent: list[bytes] = []
    lock = threading.Lock()

    def sender(n: int) -> None:
        start.wait()
        for k in range(15):
            with broker.transaction() as tx:
                h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
                body = f"s{n}-{k}".encode()
                tx.send(h, "Req", body)
            with lock:
                sent.append(body)

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    got: list[bytes] = []
    batch = 0
    while True:
        alive = any(t.is_alive() for t in threads)
        nxt = broker.claims.plan("r", [pair.tq], batch, partitions=2)
        if nxt > batch:
            got += functools.reduce(operator.iadd, bodies(broker, "r", batch, nxt), [])
            batch = nxt
        elif not alive:
            break
    for t in threads:
        t.join()
    broker.claims.acknowledge("r", batch)
    assert sorted(got) == sorted(sent) and len(got) == 60


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.sampled_from(
            ["plan_a", "plan_b", "ack_a", "ack_b", "receive", "commit", "rollback", "send"]
        ),
        min_size=5,
        max_size=30,
    )
)
def test_no_group_is_ever_held_by_two_readers_or_a_transaction(
    broker: Broker, pair: Pair, steps: list[str]
) -> None:
    # the claim rule, checked after every step: a group is held by at most one of — reader a's
    # unacknowledged batch, reader b's, an open RECEIVE transaction
    broker.alter_queue(pair.tq, poison_message_handling=False)  # rollbacks are steps here
    dialogs(broker, pair, 6, per=2)
    after = {"a": broker.claims.start_offset("a"), "b": broker.claims.start_offset("b")}
    planned = dict(after)
    tx = None
    received: set[uuid.UUID] = set()
    try:
        for step in steps:
            if step.startswith("plan_"):
                r = step[-1]
                planned[r] = broker.claims.plan(r, [pair.tq], after[r], max_messages=3)
                after[r] = planned[r] if planned[r] == after[r] else after[r]
            elif step.startswith("ack_"):
                r = step[-1]
                broker.claims.acknowledge(r, planned[r])
                after[r] = planned[r]
            elif step == "receive":
                tx = tx or broker.transaction()
                received |= {m.conversation_group_id for m in tx.receive(pair.tq, top=2)}
            elif step in ("commit", "rollback") and tx is not None:
                tx.commit() if step == "commit" else tx.rollback()
                tx, received = None, set()
            elif step == "send":
                dialogs(broker, pair, 1, per=2)
            claims = broker.views.conversation_group_claims()
            by_group: dict[uuid.UUID, set[str]] = {}
            for c in claims:
                by_group.setdefault(c.conversation_group_id, set()).add(c.reader)
            assert all(len(readers) == 1 for readers in by_group.values())
            assert not received & set(by_group), "a transaction holds a claimed group"
            for r in ("a", "b"):
                mine = {c.conversation_group_id for c in claims if c.reader == r}
                ids = (
                    {
                        m.conversation_group_id
                        for m in broker.claims.messages(r, after[r], planned[r], 0)
                    }
                    if planned[r] > after[r]
                    else set()
                )
                assert ids <= mine
    finally:
        if tx is not None:
            tx.rollback()


@pytest.mark.parametrize("backend", ["postgres"])  # SQLite commits one writer at a time
def test_a_message_committed_after_a_later_one_is_read_next(url: str, clock: ManualClock) -> None:
    # PostgreSQL: senders commit concurrently. The broker numbers a message as its transaction
    # commits, under its queue's position lock (docs/postgres.md), but a reader of two queues
    # still sees commits of one queue land between those of the other; a batch is the unclaimed
    # ready groups, not a position, so the message sent first and committed last comes next.
    with Broker.open(url, clock=clock) as broker:
        pair = make_pair(broker)
        broker.create_queue("tq2")
        broker.create_service("//test/Target2", queue="tq2", contracts=["C"])
        slow = broker.transaction()
        h = slow.begin_dialog(pair.initiator, pair.target, contract="C")
        slow.send(h, "Req", b"first numbered")  # numbered now, committed last
        done = threading.Event()

        def fast() -> None:
            with broker.transaction() as tx:
                h2 = tx.begin_dialog(pair.initiator, "//test/Target2", contract="C")
                tx.send(h2, "Req", b"second numbered")
            done.set()

        t = threading.Thread(target=fast)
        t.start()
        assert done.wait(30)
        first = broker.claims.plan("r", [pair.tq, "tq2"], 0)
        (read_first,) = broker.claims.messages("r", 0, first, 0)
        assert read_first.message_body == b"second numbered"
        slow.commit()
        t.join()
        second = broker.claims.plan("r", [pair.tq, "tq2"], first)
        (read_second,) = broker.claims.messages("r", first, second, 0)
        assert read_second.message_body == b"first numbered"


@pytest.mark.parametrize("drain_with", ["receive", "claims"])
def test_a_batch_re_arms_external_activation_as_a_receive_does(
    url: str, clock: ManualClock, drain_with: str
) -> None:
    # ACT-8: QUEUE_ACTIVATION is raised again once a reader has received from the queue; a
    # stream reader planning a batch counts as that RECEIVE (so an externally activated Spark
    # job is launched again for new work without waiting for the response time-out)
    post = "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"
    with Broker.open(url, clock=clock, poll_interval=0.01) as broker:
        pair = make_pair(broker)
        broker.create_queue("notify_q")
        broker.create_service("//act", queue="notify_q", contracts=[post])
        broker.create_event_notification(
            "ea", queue=pair.tq, event="QUEUE_ACTIVATION", to_service="//act"
        )
        broker.start()
        try:

            def notes() -> int:
                broker.tasks.drain()
                return sum(b"QUEUE_ACTIVATION" in m.message_body for m in broker.peek("notify_q"))

            dialogs(broker, pair, 1, per=1)
            assert notes() == 1
            if drain_with == "receive":
                with broker.transaction() as tx:
                    assert tx.receive(pair.tq)
            else:
                broker.claims.acknowledge("r", broker.claims.plan("r", [pair.tq], 0))
            assert broker.peek(pair.tq) == []
            clock.advance(5)
            dialogs(broker, pair, 1, per=1)
            assert notes() == 2
        finally:
            broker.stop()


def test_a_released_reader_can_neither_acknowledge_nor_read_nor_plan(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # a batch released by the time-out may have been received by others: its reader, back
    # after Spark committed it, must fail loudly rather than plan those messages again
    dialogs(broker, pair, 2)
    broker.claims.plan("r", [pair.tq], 0, claim_timeout=60)
    clock.advance(61)
    broker.timer.run_due(clock.now())
    for attempt in (
        lambda: broker.claims.acknowledge("r", 1),
        lambda: broker.claims.plan("r", [pair.tq], 1),
        lambda: broker.claims.messages("r", 0, 1, 0),
        lambda: broker.claims.parts("r", 0, 1),
    ):
        with pytest.raises(StreamClaimError, match="batch 1 was released"):
            attempt()
    assert len(broker.peek(pair.tq)) == 6  # nothing acknowledged: ready for anyone


def test_move_conversation_refuses_a_claimed_group(broker: Broker, pair: Pair) -> None:
    # DLG-7 MOVE CONVERSATION would take a claimed conversation's messages out of the claim
    # (docs/t-sql/statements/move-conversation-transact-sql.md: it locks both groups)
    dialogs(broker, pair, 2)
    broker.claims.plan("r", [pair.tq], 0, max_messages=3)
    (claimed,) = {c.conversation_group_id for c in broker.views.conversation_group_claims()}
    targets = [e for e in broker.views.conversation_endpoints() if not e.is_initiator]
    mine = next(e for e in targets if e.conversation_group_id == claimed)
    other = next(e for e in targets if e.conversation_group_id != claimed)
    with broker.transaction() as tx:
        with pytest.raises(ConversationError, match="is claimed by a stream reader"):
            tx.move_conversation(mine.conversation_handle, other.conversation_group_id)
        with pytest.raises(ConversationError, match="is claimed by a stream reader"):
            tx.move_conversation(other.conversation_handle, claimed)
        assert tx.receive(pair.tq)  # the refused statements left no lock behind


def test_a_transaction_holding_a_claimed_group_still_receives_the_others(
    broker: Broker, pair: Pair
) -> None:
    # RCV-2: a group this transaction holds comes first — unless it is claimed (issue 14)
    handles = dialogs(broker, pair, 2)
    broker.claims.plan("r", [pair.tq], 0, max_messages=3)
    claimed = {c.conversation_group_id for c in broker.views.conversation_group_claims()}
    with broker.transaction() as tx:
        for e in broker.views.conversation_endpoints():
            if not e.is_initiator and e.conversation_group_id in claimed:
                tx.send(e.conversation_handle, "Resp", b"reply")  # holds the claimed group
        got = tx.receive(pair.tq)
        assert got and got[0].conversation_group_id not in claimed
        (held,) = claimed
        assert tx.receive(pair.tq, conversation_group_id=held) == []
    assert handles


def test_a_receive_where_that_finds_a_claimed_group_keeps_no_lock(
    broker: Broker, pair: Pair
) -> None:
    # a RECEIVE … WHERE on a claimed group returns nothing and gives its lock back, so the
    # statements that end the claim (the stream's sink) are never blocked by it
    dialogs(broker, pair, 1)
    broker.claims.plan("r", [pair.tq], 0)
    (claim,) = broker.views.conversation_group_claims()
    target = next(e for e in broker.views.conversation_endpoints() if not e.is_initiator)
    waiting = broker.transaction()
    try:
        assert waiting.receive(pair.tq, conversation_handle=target.conversation_handle) == []
        assert waiting.receive(pair.tq, conversation_group_id=claim.conversation_group_id) == []
        with broker.transaction() as sink:  # would wait lock_timeout if the group were held
            sink.send(target.conversation_handle, "Resp", b"reply")
            sink.end_conversation(target.conversation_handle)
    finally:
        waiting.rollback()


def test_groups_held_elsewhere_do_not_use_up_a_batch(broker: Broker, pair: Pair) -> None:
    # maxMessagesPerBatch counts messages taken, not groups looked at: groups another
    # transaction holds are passed over and the batch is filled from the next ones
    dialogs(broker, pair, 3, per=1)
    tx = broker.transaction()
    try:
        held = {tx.receive(pair.tq)[0].conversation_group_id for _ in range(2)}
        batch = broker.claims.plan("r", [pair.tq], 0, max_messages=2)
        assert batch == 1
        (claim,) = broker.views.conversation_group_claims()
        assert claim.conversation_group_id not in held
    finally:
        tx.rollback()


def test_an_idle_poll_takes_no_write_lock_and_counts_as_an_empty_receive(
    broker: Broker, pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a processing-time query asks for the latest offset every trigger: with nothing to read
    # and nothing to acknowledge, planning reads only (no write transaction beside the senders)
    dialogs(broker, pair, 1)
    batch = broker.claims.plan("r", [pair.tq], 0)
    broker.claims.acknowledge("r", batch)
    empties: list[int] = []
    received = broker._context.events.received  # type: ignore[attr-defined]

    def note(queue_id: int, *, empty: bool, where: bool, first: bool) -> None:
        if empty:
            empties.append(queue_id)
        received(queue_id, empty=empty, where=where, first=first)

    def no_write() -> None:
        raise AssertionError("an idle plan opened a write transaction")

    monkeypatch.setattr(broker._context.events, "received", note)  # type: ignore[attr-defined]
    monkeypatch.setattr(broker.claims, "_writing", no_write)
    assert broker.claims.plan("r", [pair.tq], batch) == batch
    assert len(empties) == 1  # ACT-3b: as an empty RECEIVE
    monkeypatch.undo()
    dialogs(broker, pair, 1)
    assert broker.claims.plan("r", [pair.tq], batch) == batch + 1  # new work: a real plan
