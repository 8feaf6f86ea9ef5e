"""Savepoints of a broker transaction: ``Transaction.save(name)`` and
``Transaction.rollback_to(name)`` (MicrosoftDocs/sql-docs,
docs/t-sql/language-elements/save-transaction-transact-sql.md and
rollback-transaction-transact-sql.md: "ROLLBACK TRANSACTION savepoint_name does not decrement
@@TRANCOUNT"; "duplicate savepoint names are allowed, but a ROLLBACK TRANSACTION using the
duplicate savepoint name rolls back only to the most recent SAVE TRANSACTION using that
savepoint name"). What a rollback to a savepoint undoes — the SENDs, BEGIN DIALOGs, ENDs,
timers and application SQL since, the RECEIVEs since (their messages back on the queue) — and
what it keeps: what came before, the transaction itself, its conversation-group locks.
"""

from __future__ import annotations

import uuid

import pytest

from servicebroker import Broker, ManualClock, TransactionError
from servicebroker.storage.queries import portable_sql

from .conftest import Pair


def bodies(broker: Broker, queue: str) -> list[bytes]:
    return [m.message_body for m in broker.peek(queue)]


def handles(broker: Broker) -> set[uuid.UUID]:
    return {e.conversation_handle for e in broker.views.conversation_endpoints()}


def test_sends_after_the_savepoint_are_undone_those_before_kept(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"before")
        tx.save("sp")
        tx.send(h, "Req", b"after")
        tx.rollback_to("sp")
        assert tx.savepoints == ("sp",)  # the savepoint stays
        tx.send(h, "Req", b"again")
    assert bodies(broker, pair.tq) == [b"before", b"again"]
    # the sequence numbers of the undone SEND are given again: no gap on the target side
    assert [m.message_sequence_number for m in broker.peek(pair.tq)] == [0, 1]


def test_dialogs_ends_and_timers_after_the_savepoint_are_undone(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    with broker.transaction() as tx:
        kept = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(kept, "Req", b"1")
    with broker.transaction() as tx:
        tx.save("sp")
        undone = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(undone, "Req", b"2")
        tx.begin_conversation_timer(kept, 5)
        tx.end_conversation(kept)
        tx.rollback_to("sp")
        tx.send(kept, "Req", b"3")  # open again: its END is undone
    assert undone not in handles(broker)
    states = {e.conversation_handle: e.state for e in broker.views.conversation_endpoints()}
    assert states[kept] == "CO"
    assert bodies(broker, pair.tq) == [b"1", b"3"]
    clock.advance(10)  # no DialogTimer comes: the timer was undone
    assert [m.message_type_name for m in broker.peek(pair.iq)] == []


def test_received_messages_go_back_and_the_group_stays_locked(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"a")
        tx.send(h, "Req", b"b")
    with broker.transaction() as tx:
        assert [m.message_body for m in tx.receive(pair.tq, top=1)] == [b"a"]
        tx.save("sp")
        assert [m.message_body for m in tx.receive(pair.tq)] == [b"b"]
        tx.rollback_to("sp")
        with broker.transaction() as other:  # the group is still this transaction's
            assert other.receive(pair.tq) == []
        assert [m.message_body for m in tx.receive(pair.tq)] == [b"b"]  # received again
        tx.rollback_to("sp")
    assert bodies(broker, pair.tq) == [b"b"]  # "a" was received before the savepoint


def test_the_applications_sql_rolls_back_to_the_savepoint(broker: Broker, pair: Pair) -> None:
    broker.execute("CREATE TABLE audit (n INTEGER)")
    insert = portable_sql("INSERT INTO audit (n) VALUES (?)", broker.paramstyle)
    with broker.transaction() as tx:
        tx.save("none_written")  # the first write comes after this savepoint
        tx.execute(insert, (1,))
        tx.save("one_written")
        tx.execute(insert, (2,))
        tx.rollback_to("one_written")
        tx.execute(insert, (3,))
        assert sorted(r[0] for r in tx.execute("SELECT n FROM audit")) == [1, 3]
        tx.rollback_to("none_written")
        assert tx.savepoints == ("none_written",)
        assert tx.execute("SELECT n FROM audit") == []
        tx.execute(insert, (4,))
    assert [r[0] for r in broker.execute("SELECT n FROM audit")] == [4]


def test_duplicate_names_unknown_names_and_nesting(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.save("x")
        tx.send(h, "Req", b"1")
        tx.save("y")
        tx.send(h, "Req", b"2")
        tx.save("x")  # the most recent "x" is the one rolled back to
        tx.send(h, "Req", b"3")
        tx.rollback_to("x")
        assert tx.savepoints == ("x", "y", "x")
        tx.rollback_to("y")  # the savepoints after "y" go
        assert tx.savepoints == ("x", "y")
        with pytest.raises(TransactionError, match="no savepoint named 'z'"):
            tx.rollback_to("z")
        tx.send(h, "Req", b"4")  # the transaction goes on
    assert bodies(broker, pair.tq) == [b"1", b"4"]


def test_a_rollback_after_the_savepoint_undoes_everything(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
        tx.save("sp")
        tx.rollback()
    assert bodies(broker, pair.tq) == [] and handles(broker) == set()
    with broker.transaction() as tx, pytest.raises(TransactionError):
        tx.rollback_to("sp")  # a new transaction has no savepoint
    with pytest.raises(TransactionError, match="already"):
        tx.save("late")
