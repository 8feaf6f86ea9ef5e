"""Poison-message handling (POI-1)."""

from __future__ import annotations

import contextlib

from servicebroker import Broker

from .conftest import Pair, make_pair


def fail_receives(broker: Broker, queue: str, times: int) -> None:
    for _ in range(times):
        tx = broker.transaction()
        assert tx.receive(queue)
        tx.rollback()


def send_one(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"poison")


def test_five_rollbacks_in_a_row_disable_the_queue(broker: Broker, pair: Pair) -> None:
    # rule POI-1
    send_one(broker, pair)
    fail_receives(broker, pair.tq, 4)
    assert broker.catalog.queue(pair.tq).status
    fail_receives(broker, pair.tq, 1)
    assert not broker.catalog.queue(pair.tq).status
    assert [name for name, _ in broker.queue_disabled_events] == [pair.tq]
    assert len(broker.peek(pair.tq)) == 1  # nothing lost


def test_a_commit_breaks_the_run(broker: Broker, pair: Pair) -> None:
    # rule POI-1: five rollbacks *in a row*
    send_one(broker, pair)
    send_one(broker, pair)
    fail_receives(broker, pair.tq, 4)
    with broker.transaction() as tx:
        assert tx.receive(pair.tq)
    fail_receives(broker, pair.tq, 4)
    assert broker.catalog.queue(pair.tq).status


def test_poison_handling_off_keeps_the_queue_on(broker: Broker) -> None:
    # rule POI-1 (only where POISON_MESSAGE_HANDLING is ON)
    pair = make_pair(broker, poison=False)
    send_one(broker, pair)
    fail_receives(broker, pair.tq, 6)
    assert broker.catalog.queue(pair.tq).status


def test_a_message_whose_sql_is_refused_five_times_disables_the_queue(
    broker: Broker, pair: Pair
) -> None:
    # rule POI-1: the application's SQL refused (IntegrityConflict) ends the transaction and
    # counts like any rollback of the application's processing
    from servicebroker import IntegrityConflict, TransactionError

    broker.execute("CREATE TABLE processed (id INTEGER PRIMARY KEY)")
    broker.execute("INSERT INTO processed VALUES (1)")
    send_one(broker, pair)
    mark = "%s" if broker.paramstyle == "format" else "?"
    for _ in range(5):
        tx = broker.transaction()
        assert tx.receive(pair.tq)
        with contextlib.suppress(IntegrityConflict):
            tx.execute(f"INSERT INTO processed VALUES ({mark})", (1,))
        try:  # the refusal ended the transaction: nothing more runs in it
            tx.receive(pair.tq)
        except TransactionError:
            pass
        else:
            raise AssertionError("the transaction went on after its statement was refused")
    assert not broker.catalog.queue(pair.tq).status
    assert len(broker.peek(pair.tq)) == 1
