"""Dialogs between services of one broker: BEGIN DIALOG, SEND, END CONVERSATION, MOVE
CONVERSATION, system messages (DLG-1..8, SYS-1, SYS-2)."""

from __future__ import annotations

import uuid

import pytest

from servicebroker import (
    END_DIALOG,
    ERROR,
    Broker,
    CatalogError,
    ConversationError,
    LockTimeoutError,
    ManualClock,
    MessageValidationError,
    parse_error_body,
)

from .conftest import Pair


def endpoint_states(broker: Broker) -> dict[tuple[str, bool], str]:
    return {
        (e.service_name, e.is_initiator): e.state for e in broker.views.conversation_endpoints()
    }


def test_messages_arrive_once_in_send_order(broker: Broker, pair: Pair) -> None:
    # rule DLG-2, rule PRI-12 (send order within a conversation)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        for i in range(5):
            tx.send(h, "Req", f"m{i}".encode())
    with broker.transaction() as tx:
        msgs = tx.receive(pair.tq)
    assert [m.message_body for m in msgs] == [f"m{i}".encode() for i in range(5)]
    assert [m.message_sequence_number for m in msgs] == list(range(5))
    assert {m.service_name for m in msgs} == {pair.target}
    assert {m.service_contract_name for m in msgs} == {"C"}
    with broker.transaction() as tx:
        assert tx.receive(pair.tq) == []


def test_endpoint_states_through_a_conversation(broker: Broker, pair: Pair) -> None:
    # rule DLG-8, rule PRI-3 (the target endpoint is created by the first message)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
    assert endpoint_states(broker) == {(pair.initiator, True): "SO"}
    with broker.transaction() as tx:
        tx.send(h, "Req", b"x")
    assert endpoint_states(broker) == {(pair.initiator, True): "CO", (pair.target, False): "CO"}
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.end_conversation(m.conversation_handle)
    assert endpoint_states(broker) == {(pair.initiator, True): "DI", (pair.target, False): "DO"}
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.iq)
        assert m.message_type_name == END_DIALOG and m.message_body == b""
        tx.end_conversation(h)
    assert endpoint_states(broker) == {}


def test_end_dialog_follows_pending_messages(broker: Broker, pair: Pair) -> None:
    # rule DLG-4: EndDialog comes after all that side's pending messages
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
        tx.send(h, "Req", b"2")
        tx.end_conversation(h)
    with broker.transaction() as tx:
        msgs = tx.receive(pair.tq)
    assert [m.message_type_name for m in msgs] == ["Req", "Req", END_DIALOG]


def test_send_after_end_is_refused_and_arrivals_are_discarded(broker: Broker, pair: Pair) -> None:
    # rule DLG-4
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        target = m.conversation_handle
        tx.end_conversation(target)
    with broker.transaction() as tx, pytest.raises(ConversationError, match="far side has ended"):
        tx.send(h, "Req", b"late")
    with broker.transaction() as tx, pytest.raises(ConversationError, match="already ended"):
        tx.end_conversation(target)


def test_end_with_error_sends_error_message(broker: Broker, pair: Pair) -> None:
    # rule DLG-4, rule SYS-1, rule SYS-2
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.end_conversation(m.conversation_handle, error=4711, description="cannot process")
    with broker.transaction() as tx:
        (err,) = tx.receive(pair.iq)
        assert err.message_type_name == ERROR and err.validation == "X"
        assert parse_error_body(err.message_body) == (4711, "cannot process")
        with pytest.raises(ConversationError, match="in error"):
            tx.send(h, "Req", b"2")
    with broker.transaction() as tx:
        tx.end_conversation(h)
    assert broker.views.conversation_endpoints() == []


def test_error_arguments_are_checked(broker: Broker, pair: Pair) -> None:
    # rule DLG-4
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        with pytest.raises(ConversationError, match="ERROR code must be an integer from 1"):
            tx.end_conversation(h, error=0, description="x")
        with pytest.raises(ConversationError, match="3000"):
            tx.end_conversation(h, error=1, description="x" * 3001)
        with pytest.raises(ConversationError, match="CLEANUP"):
            tx.end_conversation(h, error=1, description="x", cleanup=True)


def test_cleanup_removes_endpoint_silently(broker: Broker, pair: Pair) -> None:
    # rule DLG-4: WITH CLEANUP removes the local endpoint and its messages, far side not told
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
    target = broker.peek(pair.tq)[0].conversation_handle
    with broker.transaction() as tx:
        tx.end_conversation(target, cleanup=True)
    assert broker.peek(pair.tq) == []
    assert broker.peek(pair.iq) == []
    assert endpoint_states(broker) == {(pair.initiator, True): "CO"}


def test_end_removes_unreceived_local_messages(broker: Broker, pair: Pair) -> None:
    # rule DLG-4
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
        tx.send(h, "Req", b"2")
    target = broker.peek(pair.tq)[0].conversation_handle
    with broker.transaction() as tx:
        tx.end_conversation(target)
    assert broker.peek(pair.tq) == []


def test_contract_and_direction_are_enforced(broker: Broker, pair: Pair) -> None:
    # rule DLG-2
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        with pytest.raises(MessageValidationError, match="not sent by the initiator"):
            tx.send(h, "Resp", b"x")
        with pytest.raises(MessageValidationError, match="system message type"):
            tx.send(h, END_DIALOG, b"")
        with pytest.raises(CatalogError, match="'Nope' does not exist"):
            tx.send(h, "Nope", b"x")
        with pytest.raises(MessageValidationError, match="not None"):
            tx.send(h, "Req", None)  # type: ignore[arg-type]
        tx.send(h, "Note", b"")  # empty body is fine (DLG-2)
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.send(m.conversation_handle, "Resp", b"ok")
        with pytest.raises(MessageValidationError, match="not sent by the target"):
            tx.send(m.conversation_handle, "Req", b"x")


def test_validation_refuses_bad_bodies(broker: Broker) -> None:
    # rule DLG-3: a failing message is refused with an error and never enqueued
    broker.create_message_type("E", validation="EMPTY")
    broker.create_message_type("X", validation="WELL_FORMED_XML")
    broker.create_message_type("J", validation="JSON")
    broker.create_contract("V", {"E": "ANY", "X": "ANY", "J": "ANY"})
    broker.create_queue("q")
    broker.create_service("S", queue="q", contracts=["V"])
    with broker.transaction() as tx:
        h = tx.begin_dialog("S", "S", contract="V")
        for mt, bad in (("E", b"x"), ("X", b"<a>"), ("J", b"{nope")):
            with pytest.raises(MessageValidationError, match=repr(mt)):
                tx.send(h, mt, bad)
        tx.send(h, "E", b"")
        tx.send(h, "X", b"<a>1</a>")
        tx.send(h, "J", b'{"a": [1]}')
    assert [m.validation for m in broker.peek("q")] == ["E", "X", "J"]


def test_send_to_several_conversations_is_all_or_nothing(broker: Broker, pair: Pair) -> None:
    # rule DLG-2
    with broker.transaction() as tx:
        a = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        b = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send([a, b], "Req", b"both")
    assert len(broker.peek(pair.tq)) == 2
    with broker.transaction() as tx:
        tx.end_conversation(b)
    with broker.transaction() as tx, pytest.raises(ConversationError):
        tx.send([a, b], "Req", b"again")
    assert len(broker.peek(pair.tq)) == 3  # 2 + EndDialog of b; nothing from the failed send


def test_unknown_handles_are_named(broker: Broker, pair: Pair) -> None:
    h = uuid.uuid4()
    with broker.transaction() as tx:
        with pytest.raises(ConversationError, match=str(h)):
            tx.send(h, "Req", b"x")
        with pytest.raises(ConversationError, match="must be a UUID"):
            tx.end_conversation("not-a-uuid")


def test_service_names_are_case_sensitive(broker: Broker, pair: Pair) -> None:
    # rule DLG-1: service names match byte for byte
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target.upper(), contract="C")
        tx.send(h, "Req", b"x")
    assert broker.peek(pair.tq) == []
    (row,) = broker.views.transmission_queue()
    assert "does not exist" in row.transmission_status


def test_related_conversation_and_group(broker: Broker, pair: Pair) -> None:
    # rule DLG-1
    group = uuid.uuid4()
    with broker.transaction() as tx:
        a = tx.begin_dialog(
            pair.initiator, pair.target, contract="C", related_conversation_group=group
        )
        b = tx.begin_dialog(pair.initiator, pair.target, contract="C", related_conversation=a)
        c = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        with pytest.raises(ConversationError, match="not both"):
            tx.begin_dialog(
                pair.initiator,
                pair.target,
                related_conversation=a,
                related_conversation_group=group,
            )
        with pytest.raises(ConversationError, match="does not exist"):
            tx.begin_dialog(pair.initiator, pair.target, related_conversation=uuid.uuid4())
    groups = {
        e.conversation_handle: e.conversation_group_id
        for e in broker.views.conversation_endpoints()
    }
    assert groups[a] == groups[b] == group
    assert groups[c] != group


def test_related_group_must_be_on_the_from_services_queue(broker: Broker, pair: Pair) -> None:
    # rule DLG-1: every conversation of a group has the FROM service as one of its ends
    group = uuid.uuid4()
    with broker.transaction() as tx:
        tx.begin_dialog(pair.initiator, pair.target, contract="C", related_conversation_group=group)
    broker.create_queue("other")
    broker.create_service("Other", queue="other")
    with broker.transaction() as tx, pytest.raises(ConversationError, match="not of FROM service"):
        tx.begin_dialog("Other", pair.target, contract="C", related_conversation_group=group)


def test_target_side_starts_a_new_group_per_dialog(broker: Broker, pair: Pair) -> None:
    # rule DLG-1: groups are per side
    group = uuid.uuid4()
    with broker.transaction() as tx:
        for _ in range(3):
            h = tx.begin_dialog(
                pair.initiator, pair.target, contract="C", related_conversation_group=group
            )
            tx.send(h, "Req", b"x")
    target_groups = {m.conversation_group_id for m in broker.peek(pair.tq)}
    assert len(target_groups) == 3 and group not in target_groups


def test_move_conversation(broker: Broker, pair: Pair) -> None:
    # rule DLG-7
    with broker.transaction() as tx:
        a = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        b = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send([a, b], "Req", b"x")
    tmsgs = broker.peek(pair.tq)
    ta, tb = tmsgs[0], tmsgs[1]
    with broker.transaction() as tx:
        tx.move_conversation(tb.conversation_handle, ta.conversation_group_id)
    assert {m.conversation_group_id for m in broker.peek(pair.tq)} == {ta.conversation_group_id}
    with broker.transaction() as tx:
        assert len(tx.receive(pair.tq)) == 2
    broker.create_queue("other")
    broker.create_service("Other", queue="other")
    with broker.transaction() as tx:
        o = tx.begin_dialog("Other", pair.target, contract="C")
    with broker.transaction() as tx:
        with pytest.raises(ConversationError, match="another queue"):
            tx.move_conversation(a, broker_group(broker, o))
        with pytest.raises(ConversationError, match="does not exist"):
            tx.move_conversation(a, uuid.uuid4())


def broker_group(broker: Broker, handle: uuid.UUID) -> uuid.UUID:
    for e in broker.views.conversation_endpoints():
        if e.conversation_handle == handle:
            return e.conversation_group_id
    raise AssertionError("no endpoint")


def test_target_must_accept_the_contract(broker: Broker, pair: Pair) -> None:
    # rule DLG-1: the target service names the contracts it accepts
    broker.create_queue("q2")
    broker.create_service("NoContracts", queue="q2")
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, "NoContracts", contract="C")
        tx.send(h, "Req", b"x")
    (m,) = broker.peek(pair.iq)
    assert m.message_type_name == ERROR
    assert "does not support contract" in parse_error_body(m.message_body)[1]


def test_retention_keeps_sent_and_received_until_end(broker: Broker) -> None:
    # rule RCV-3, rule QUE-2 (status 0 retained received, 3 retained sent)
    from .conftest import make_pair

    p = make_pair(broker, retention=True)
    with broker.transaction() as tx:
        h = tx.begin_dialog(p.initiator, p.target, contract="C")
        tx.send(h, "Req", b"x")
    assert [m.status for m in broker.peek(p.iq)] == [3]
    with broker.transaction() as tx:
        (m,) = tx.receive(p.tq)
    assert [r.status for r in broker.peek(p.tq)] == [0]
    with broker.transaction() as tx:
        assert tx.receive(p.tq) == []
        tx.end_conversation(m.conversation_handle)
    assert broker.peek(p.tq) == []


def test_every_endpoint_has_level_5_without_priorities(broker: Broker, pair: Pair) -> None:
    # rule PRI-10: with no conversation priority, every endpoint (and so every message) is at 5
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"x")
    assert {e.priority for e in broker.views.conversation_endpoints()} == {5}
    assert [m.priority for m in broker.peek(pair.tq)] == [5]


def test_sends_after_the_target_refused_the_contract_still_commit(broker: Broker) -> None:
    # rule DLG-2, rule SYS-2: the first message is refused at commit (the initiator goes to ER
    # with an Error); a later SEND of the same transaction must not fail the commit
    broker.create_queue("iq2")
    broker.create_queue("tq2")
    broker.create_contract("Other", {"DEFAULT": "ANY"})
    broker.create_service("I2", queue="iq2")
    broker.create_service("T2", queue="tq2", contracts=["DEFAULT"])
    broker.execute("CREATE TABLE audit (note TEXT)")
    with broker.transaction() as tx:
        h = tx.begin_dialog("I2", "T2", contract="Other")
        tx.send(h, "DEFAULT", b"one")
        tx.send(h, "DEFAULT", b"two")
        tx.execute("INSERT INTO audit VALUES ('kept')")
    assert broker.execute("SELECT note FROM audit") == [("kept",)]
    (endpoint,) = broker.views.conversation_endpoints()
    assert endpoint.state == "ER"
    with broker.transaction() as tx:
        got = tx.receive("iq2")
    assert got and {m.message_type_name for m in got} == {ERROR}  # one per refused message


def test_send_many_sends_in_order_on_many_conversations(broker: Broker, pair: Pair) -> None:
    # rule DLG-2 (SEND, per conversation in send order), rule DLG-9 (SEND locks the groups)
    with broker.transaction() as tx:
        handles = [tx.begin_dialog(pair.initiator, pair.target, contract="C") for _ in range(3)]
    with broker.transaction() as tx:
        sent = tx.send_many((handles[i % 3], "Req", f"{i % 3}:{i}".encode()) for i in range(9))
        assert sent == 9
    received: dict[uuid.UUID, list[bytes]] = {}
    with broker.transaction() as tx:
        while batch := tx.receive(pair.tq):
            for m in batch:
                received.setdefault(m.conversation_handle, []).append(m.message_body)
    assert sorted(received.values()) == [
        [f"{c}:{i}".encode() for i in range(c, 9, 3)] for c in range(3)
    ]


def test_send_many_is_all_or_nothing_and_names_the_fault(broker: Broker, pair: Pair) -> None:
    # rule DLG-2, rule DLG-3: a bad message anywhere in the batch sends none of it
    unknown = uuid.uuid4()
    with broker.transaction() as tx:
        a = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        b = tx.begin_dialog(pair.initiator, pair.target, contract="C")
    with broker.transaction() as tx:
        with pytest.raises(ConversationError, match=str(unknown)):
            tx.send_many([(a, "Req", b"1"), (unknown, "Req", b"2"), (b, "Req", b"3")])
        with pytest.raises(CatalogError, match="Nope"):
            tx.send_many([(a, "Req", b"1"), (b, "Nope", b"2")])
        with pytest.raises(MessageValidationError, match=str(b)):
            tx.send_many([(a, "Req", b"1"), (b, "Resp", b"2")])  # the target's type
        tx.send_many([])
    assert broker.peek(pair.tq) == []
    with broker.transaction() as tx:
        tx.end_conversation(b)
    with broker.transaction() as tx, pytest.raises(ConversationError, match=str(b)):
        tx.send_many([(a, "Req", b"1"), (b, "Req", b"2")])
    assert broker.peek(pair.tq) == []  # (b never reached the target: its end sends nothing)


def test_a_refused_send_keeps_no_lock_it_took_and_gives_up_none_it_had(
    url: str, broker: Broker, pair: Pair
) -> None:
    # rule DLG-9: a SEND naming a closed conversation is refused; the group lock it took for
    # another conversation of that group goes with it, one the transaction held stays
    group = uuid.uuid4()
    with broker.transaction() as tx:
        h1 = tx.begin_dialog(
            pair.initiator, pair.target, contract="C", related_conversation_group=group
        )
        h2 = tx.begin_dialog(
            pair.initiator, pair.target, contract="C", related_conversation_group=group
        )
        tx.send([h1, h2], "Req", b"a")
    with broker.transaction() as tx:
        tx.end_conversation(h1, error=1, description="gone")  # h1 is closed here
    other = Broker.open(url, clock=ManualClock(), lock_timeout=0, poll_interval=0.01)
    try:
        with broker.transaction() as tx:
            with pytest.raises(ConversationError, match=str(h1)):
                tx.send([h2, h1], "Req", b"b")
            with other.transaction() as elsewhere:  # the group is free
                elsewhere.send(h2, "Req", b"elsewhere")
        with broker.transaction() as tx:
            tx.send(h2, "Req", b"c")  # the group is this transaction's now
            for refused in ([h1], [h1, h2]):
                with pytest.raises(ConversationError, match=str(h1)):
                    tx.send(refused, "Req", b"d")
                with other.transaction() as elsewhere, pytest.raises(LockTimeoutError):
                    elsewhere.send(h2, "Req", b"e")  # still held by the first transaction
    finally:
        other.close()
    bodies = [m.message_body for m in broker.peek(pair.tq) if m.message_type_name == "Req"]
    assert sorted(bodies) == [b"a", b"a", b"c", b"elsewhere"]


def test_one_send_names_a_conversation_once(broker: Broker, pair: Pair) -> None:
    # rule DLG-2; SEND (docs/t-sql/statements/send-transact-sql.md): "The same conversation
    # handle cannot be used more than once" in one SEND; nothing is sent
    with broker.transaction() as tx:
        a = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        b = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        with pytest.raises(ConversationError, match=f"{a} is named more than once"):
            tx.send([a, b, str(a)], "Req", b"twice")
        tx.send([a, b], "Req", b"once")
        tx.send_many([(a, "Req", b"again"), (a, "Req", b"and again")])  # many SENDs: fine
    assert sorted(m.message_body for m in broker.peek(pair.tq)) == [
        b"again",
        b"and again",
        b"once",
        b"once",
    ]
