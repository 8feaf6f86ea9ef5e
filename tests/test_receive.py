"""RECEIVE, GET CONVERSATION GROUP and conversation-group locks (RCV-1..5, QUE-3, DLG-9)."""

from __future__ import annotations

import functools
import threading
import uuid

import pytest

from servicebroker import (
    Broker,
    BrokerError,
    ConversationError,
    IntegrityConflict,
    ManualClock,
    QueueDisabledError,
)
from servicebroker.storage.queries import portable_sql
from servicebroker.testing.waiting import eventually

from .conftest import Pair


def send_groups(broker: Broker, pair: Pair, groups: int, per_group: int = 1) -> list[uuid.UUID]:
    handles = []
    with broker.transaction() as tx:
        for g in range(groups):
            h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
            handles.append(h)
            for i in range(per_group):
                tx.send(h, "Req", f"{g}:{i}".encode())
    return handles


def test_receive_returns_one_group_per_call(broker: Broker, pair: Pair) -> None:
    # rule RCV-1, rule PRI-12
    send_groups(broker, pair, 3, per_group=2)
    seen = []
    with broker.transaction() as tx:
        for _ in range(3):
            msgs = tx.receive(pair.tq)
            assert len({m.conversation_group_id for m in msgs}) == 1
            assert len(msgs) == 2
            seen.append(msgs[0].conversation_group_id)
        assert tx.receive(pair.tq) == []
    assert len(set(seen)) == 3


def test_top_bounds_one_call(broker: Broker, pair: Pair) -> None:
    # rule RCV-1, rule RCV-4
    send_groups(broker, pair, 1, per_group=5)
    with broker.transaction() as tx:
        assert [m.message_body for m in tx.receive(pair.tq, top=2)] == [b"0:0", b"0:1"]
        assert [m.message_body for m in tx.receive(pair.tq, top=2)] == [b"0:2", b"0:3"]
        assert [m.message_body for m in tx.receive(pair.tq)] == [b"0:4"]
        with pytest.raises(BrokerError, match="TOP"):
            tx.receive(pair.tq, top=-1)


def test_locked_group_is_skipped_by_other_transactions(broker: Broker, pair: Pair) -> None:
    # rule RCV-2, rule DLG-9
    send_groups(broker, pair, 2)
    tx1 = broker.transaction()
    tx2 = broker.transaction()
    try:
        a = tx1.receive(pair.tq)
        b = tx2.receive(pair.tq)
        assert a and b and a[0].conversation_group_id != b[0].conversation_group_id
        assert tx2.receive(pair.tq) == []
    finally:
        tx1.commit()
        tx2.commit()


def test_messages_keep_arriving_in_a_locked_group(broker: Broker, pair: Pair) -> None:
    # rule RCV-2: a RECEIVE returns messages of groups its own transaction holds
    (h,) = send_groups(broker, pair, 1)
    with broker.transaction() as reader:
        (first,) = reader.receive(pair.tq)
        assert reader.receive(pair.tq) == []  # the group it holds has nothing left now
        with broker.transaction() as sender:
            sender.send(h, "Req", b"more")
        with broker.transaction() as other:
            assert other.receive(pair.tq) == []
        assert [m.message_body for m in reader.receive(pair.tq)] == [b"more"]
    del first


def test_rollback_returns_messages(broker: Broker, pair: Pair) -> None:
    # rule RCV-3
    send_groups(broker, pair, 1, per_group=3)
    with pytest.raises(RuntimeError), broker.transaction() as tx:
        assert len(tx.receive(pair.tq)) == 3
        raise RuntimeError("processing failed")
    with broker.transaction() as tx:
        assert [m.message_body for m in tx.receive(pair.tq)] == [b"0:0", b"0:1", b"0:2"]


def test_application_data_commits_with_the_messages(broker: Broker, pair: Pair) -> None:
    # rule RCV-3: RECEIVE and the application's own rows commit or roll back together
    broker.execute(portable_sql("CREATE TABLE results (body BLOB)", broker.paramstyle))
    send_groups(broker, pair, 1)
    with pytest.raises(RuntimeError), broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.execute(
            portable_sql("INSERT INTO results VALUES (?)", broker.paramstyle), (m.message_body,)
        )
        raise RuntimeError("after the insert")
    assert broker.execute("SELECT count(*) FROM results") == [(0,)]
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.execute(
            portable_sql("INSERT INTO results VALUES (?)", broker.paramstyle), (m.message_body,)
        )
    assert broker.execute("SELECT body FROM results") == [(b"0:0",)]
    assert broker.peek(pair.tq) == []


def test_a_refused_application_row_rolls_back_the_receive(broker: Broker, pair: Pair) -> None:
    # rule RCV-3: a constraint refusing the application's row is IntegrityConflict on every
    # backend, and the message it was processing goes back on the queue
    sql = functools.partial(portable_sql, paramstyle=broker.paramstyle)
    broker.execute(sql("CREATE TABLE seen (body BLOB PRIMARY KEY)"))
    broker.execute(sql("INSERT INTO seen VALUES (?)"), (b"0:0",))
    send_groups(broker, pair, 1)
    with pytest.raises(IntegrityConflict, match="refused"), broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.execute(sql("INSERT INTO seen VALUES (?)"), (m.message_body,))
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"0:0"]


def test_where_clauses(broker: Broker, pair: Pair) -> None:
    # rule RCV-1: WHERE conversation_handle / conversation_group_id; unknown ones are errors
    send_groups(broker, pair, 3)
    target = broker.peek(pair.tq)
    with broker.transaction() as tx:
        msgs = tx.receive(pair.tq, conversation_handle=target[2].conversation_handle)
        assert [m.message_body for m in msgs] == [b"2:0"]
        msgs = tx.receive(pair.tq, conversation_group_id=target[1].conversation_group_id)
        assert [m.message_body for m in msgs] == [b"1:0"]
        with pytest.raises(ConversationError, match="not on this queue"):
            tx.receive(pair.tq, conversation_handle=uuid.uuid4())
        with pytest.raises(ConversationError, match="not on this queue"):
            tx.receive(pair.tq, conversation_group_id=uuid.uuid4())
        with pytest.raises(ConversationError, match="not both"):
            tx.receive(
                pair.tq, conversation_handle=uuid.uuid4(), conversation_group_id=uuid.uuid4()
            )


def test_get_conversation_group(broker: Broker, pair: Pair) -> None:
    # rule RCV-5, rule PRI-13
    send_groups(broker, pair, 2)
    with broker.transaction() as tx:
        g1 = tx.get_conversation_group(pair.tq)
        g2 = tx.get_conversation_group(pair.tq)
        assert g1 is not None and g2 is not None and g1 != g2
        assert tx.get_conversation_group(pair.tq) is None
        with broker.transaction() as other:
            assert other.get_conversation_group(pair.tq) is None
        msgs = tx.receive(pair.tq, conversation_group_id=g1)
        assert msgs[0].conversation_group_id == g1


def test_waiting_receive_wakes_when_a_message_commits(broker: Broker, pair: Pair) -> None:
    # rule RCV-1 (WAITFOR): no time passes on the manual clock, so only the commit wakes it
    got: list[object] = []
    started = threading.Event()

    def reader() -> None:
        with broker.transaction() as tx:
            started.set()
            got.extend(tx.receive(pair.tq, timeout=None))

    t = threading.Thread(target=reader)
    t.start()
    started.wait(5)
    send_groups(broker, pair, 1)
    t.join(10)
    assert not t.is_alive() and len(got) == 1


def test_waiting_receive_times_out_on_the_broker_clock(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule RCV-1: when the time-out expires the result is empty
    result: list[list[object]] = []
    waiting = threading.Event()

    def reader() -> None:
        with broker.transaction() as tx:
            waiting.set()
            result.append(list(tx.receive(pair.tq, timeout=30)))

    t = threading.Thread(target=reader)
    t.start()
    waiting.wait(5)
    eventually(lambda: monitors_waiting(broker, pair.tq) == 1, every=0.001)
    clock.advance(29)
    assert t.is_alive()
    clock.advance(1)
    t.join(10)
    assert result == [[]]


def monitors_waiting(broker: Broker, queue: str) -> int:
    queue_id = broker.catalog.queue(queue).queue_id
    return broker._storage.activity.waiting(queue_id)


def test_receive_on_disabled_queue_is_an_error(broker: Broker, pair: Pair) -> None:
    # rule QUE-3
    broker.alter_queue(pair.tq, status=False)
    with broker.transaction() as tx, pytest.raises(QueueDisabledError, match="'tq' is disabled"):
        tx.receive(pair.tq)


def test_turning_queue_off_ends_a_waiting_receive(broker: Broker, pair: Pair) -> None:
    # rule QUE-3
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            with broker.transaction() as tx:
                tx.receive(pair.tq, timeout=None)
        except QueueDisabledError as exc:
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    eventually(lambda: monitors_waiting(broker, pair.tq) == 1, every=0.001)
    broker.alter_queue(pair.tq, status=False)
    t.join(10)
    assert len(errors) == 1 and "disabled" in str(errors[0])


def test_messages_for_an_off_queue_wait_in_the_transmission_queue(
    broker: Broker, pair: Pair
) -> None:
    # rule QUE-3
    broker.alter_queue(pair.tq, status=False)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
        tx.send(h, "Req", b"2")
        tx.end_conversation(h)
    rows = broker.views.transmission_queue()
    assert [r.message_sequence_number for r in rows] == [0, 1, 2]
    assert rows[-1].is_end_of_dialog and "disabled" in rows[0].transmission_status
    assert broker.peek(pair.tq) == []
    broker.alter_queue(pair.tq, status=True)
    assert broker.views.transmission_queue() == []
    with broker.transaction() as tx:
        msgs = tx.receive(pair.tq)
    assert [m.message_body for m in msgs][:2] == [b"1", b"2"]


def test_messages_wait_for_a_service_created_later(broker: Broker, pair: Pair) -> None:
    # rule QUE-3 (messages wait until they can be put on the target queue)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, "//later", contract="C")
        tx.send(h, "Req", b"early")
    assert len(broker.views.transmission_queue()) == 1
    broker.create_queue("lq")
    broker.create_service("//later", queue="lq", contracts=["C"])
    assert [m.message_body for m in broker.peek("lq")] == [b"early"]


def test_used_transaction_is_refused(broker: Broker, pair: Pair) -> None:
    from servicebroker import TransactionError

    tx = broker.transaction()
    tx.commit()
    with pytest.raises(TransactionError):
        tx.receive(pair.tq)


def test_application_sql_keeps_its_own_types(broker: Broker) -> None:
    # tx.execute runs the application's SQL as written: its booleans stay booleans
    sql = functools.partial(portable_sql, paramstyle=broker.paramstyle)
    broker.execute(sql("CREATE TABLE flags (name TEXT, on_off BOOLEAN)"))
    with broker.transaction() as tx:
        tx.execute(sql("INSERT INTO flags VALUES (?, ?)"), ("a", True))
    assert [bool(v) for (v,) in broker.execute("SELECT on_off FROM flags")] == [True]
