"""The conversation statements and their views as Microsoft's reference documents them (issue
11): each test names the page and quotes the sentence it proves. Both backends."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from servicebroker import (
    DIALOG_TIMER,
    ERROR,
    Broker,
    ConversationError,
    ManualClock,
    MessageValidationError,
    QueueDisabledError,
    parse_error_body,
)
from servicebroker.catalog import EVENT_NOTIFICATION_SERVICE, POST_EVENT_NOTIFICATION
from servicebroker.views import ConversationEndpointRow

from .conftest import START, Pair
from .test_activation import NOTIFY, add_activator_service, notifications


def endpoints(broker: Broker) -> dict[uuid.UUID, ConversationEndpointRow]:
    return {e.conversation_handle: e for e in broker.views.conversation_endpoints()}


def converse(broker: Broker, pair: Pair, requests: int = 2) -> tuple[uuid.UUID, uuid.UUID]:
    """A dialog with ``requests`` Req messages received by the target; (initiator, target)."""
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        for _ in range(requests):
            tx.send(h, "Req", b"")
    with broker.transaction() as tx:
        got = tx.receive(pair.tq)
    assert len(got) == requests
    return h, got[0].conversation_handle


# -- sys.conversation_endpoints -------------------------------------------------------------
def test_send_and_receive_sequences_count_the_messages(broker: Broker, pair: Pair) -> None:
    # rule DLG-8
    # sys.conversation_endpoints (docs/relational-databases/system-catalog-views/
    # sys-conversation-endpoints-transact-sql.md): "send_sequence: Next message number in the
    # send sequence", "receive_sequence: Next message number expected in message receive
    # sequence" (it stayed 0 however many messages arrived)
    h, t = converse(broker, pair, requests=3)
    rows = endpoints(broker)
    assert (rows[h].send_sequence, rows[h].receive_sequence) == (3, 0)
    assert (rows[t].send_sequence, rows[t].receive_sequence) == (0, 3)
    with broker.transaction() as tx:
        tx.send(t, "Resp", b"")
    rows = endpoints(broker)
    assert (rows[h].send_sequence, rows[h].receive_sequence) == (3, 1)
    assert (rows[t].send_sequence, rows[t].receive_sequence) == (1, 3)
    # a message waiting in the transmission queue has not arrived yet
    broker.alter_queue(pair.iq, status=False)
    with broker.transaction() as tx:
        tx.send(t, "Resp", b"")
    assert endpoints(broker)[h].receive_sequence == 1
    broker.alter_queue(pair.iq, status=True)
    assert endpoints(broker)[h].receive_sequence == 2


def test_end_dialog_sequence_is_the_number_of_the_end_message(broker: Broker, pair: Pair) -> None:
    # rule DLG-8
    # sys.conversation_endpoints: "end_dialog_sequence: The sequence number of the End Dialog
    # message" — -1 while the dialog has not ended, on both endpoints
    h, t = converse(broker, pair, requests=2)
    assert {e.end_dialog_sequence for e in endpoints(broker).values()} == {-1}
    with broker.transaction() as tx:
        tx.send(t, "Resp", b"")
        tx.end_conversation(t)  # the target's EndDialog is its message number 1
    rows = endpoints(broker)
    assert (rows[t].state, rows[t].end_dialog_sequence, rows[t].send_sequence) == ("DO", 1, 2)
    assert (rows[h].state, rows[h].end_dialog_sequence, rows[h].receive_sequence) == ("DI", 1, 2)


def test_end_dialog_sequence_of_an_error(broker: Broker, pair: Pair) -> None:
    # END CONVERSATION (docs/t-sql/statements/end-conversation-transact-sql.md): "If the
    # conversation ends with an error ... Service Broker sends a message of type .../Error to
    # the remote service": that message ends the dialog, its number is end_dialog_sequence
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        tx.end_conversation(h, error=7, description="no")
    rows = endpoints(broker)
    assert (rows[h].state, rows[h].end_dialog_sequence) == ("CD", 1)
    assert (rows[t].state, rows[t].end_dialog_sequence, rows[t].receive_sequence) == ("ER", 1, 2)


def test_endpoint_columns_of_a_single_database(broker: Broker, pair: Pair) -> None:
    # sys.conversation_endpoints: "far_service: Name of the service on the remote side",
    # "far_broker_instance: The broker instance for the remote side of the conversation.
    # NULLABLE." (this database's service_broker_guid: both ends are here), "receive_sequence_frag: Next message
    # fragment number expected" (0: messages arrive whole), "is_system: 1 if this is a system
    # dialog"
    h, t = converse(broker, pair, requests=1)
    rows = endpoints(broker)
    assert (rows[h].far_service, rows[t].far_service) == (pair.target, pair.initiator)
    for row in rows.values():
        assert row.far_broker_instance == str(broker.service_broker_guid)
        assert row.receive_sequence_frag == 0
        assert row.is_system is False


def test_event_notification_dialogs_are_system_dialogs(broker: Broker, pair: Pair) -> None:
    # sys.conversation_endpoints: "is_system: 1 if this is a system dialog"; sys.conversation_groups
    # (docs/relational-databases/system-catalog-views/sys-conversation-groups-transact-sql.md):
    # "is_system: Indicates whether this is a system instance or not"
    add_activator_service(broker)
    broker.create_event_notification(
        "disabled", queue=pair.tq, event="BROKER_QUEUE_DISABLED", to_service=NOTIFY
    )
    converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"")
    for _ in range(5):  # POI-1: the fifth rollback in a row disables the queue
        tx = broker.transaction()
        assert tx.receive(pair.tq)
        tx.rollback()
    assert notifications(broker)
    rows = broker.views.conversation_endpoints()
    system = [e for e in rows if e.is_system]
    assert system and all(e.service_contract_name == POST_EVENT_NOTIFICATION for e in system)
    assert all(e.service_contract_name == "C" for e in rows if not e.is_system)
    groups = {g.service_name: g for g in broker.views.conversation_groups()}
    assert groups[EVENT_NOTIFICATION_SERVICE].is_system is True
    assert groups[pair.initiator].is_system is False


# -- queue rows -----------------------------------------------------------------------------
def test_message_enqueue_time_is_when_the_message_entered_the_queue(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule QUE-2
    # CREATE QUEUE (docs/t-sql/statements/create-queue-transact-sql.md), the queue columns:
    # "message_enqueue_time: Time at which the message entered the queue"
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
    clock.advance(30)
    broker.alter_queue(pair.tq, status=False)  # the next one waits in the transmission queue
    with broker.transaction() as tx:
        tx.send(h, "Req", b"2")
    clock.advance(30)
    broker.alter_queue(pair.tq, status=True)
    first = datetime.fromtimestamp(START, tz=UTC)
    later = datetime.fromtimestamp(START + 60, tz=UTC)
    assert [m.message_enqueue_time for m in broker.peek(pair.tq)] == [first, later]
    clock.advance(30)
    with broker.transaction() as tx:
        got = tx.receive(pair.tq)
    assert [(m.message_body, m.message_enqueue_time) for m in got] == [
        (b"1", first),
        (b"2", later),
    ]


# -- sys.conversation_groups ----------------------------------------------------------------
def test_conversation_groups_view(broker: Broker, pair: Pair) -> None:
    # rule DLG-8
    # sys.conversation_groups: "conversation_group_id: Identifier for the conversation group",
    # "service_id: Identifier of the service for conversations in this group"
    group = uuid.uuid4()
    with broker.transaction() as tx:
        h = tx.begin_dialog(
            pair.initiator, pair.target, contract="C", related_conversation_group=group
        )
        tx.send(h, "Req", b"")
    rows = {g.conversation_group_id: g for g in broker.views.conversation_groups()}
    mine = rows[group]
    initiator = broker.catalog.services[pair.initiator]
    assert (mine.service_id, mine.service_name, mine.queue_name) == (
        initiator.service_id,
        pair.initiator,
        pair.iq,
    )
    (target_group,) = [g for g in rows.values() if g.conversation_group_id != group]
    assert (target_group.service_name, target_group.queue_name) == (pair.target, pair.tq)
    assert (
        target_group.conversation_group_id
        == endpoints(broker)[broker.peek(pair.tq)[0].conversation_handle].conversation_group_id
    )
    # a group lives as long as a conversation is in it
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.end_conversation(m.conversation_handle)
    with broker.transaction() as tx:
        tx.receive(pair.iq)
        tx.end_conversation(h)
    assert broker.views.conversation_groups() == []


# -- BEGIN DIALOG ---------------------------------------------------------------------------
def test_a_group_holds_conversations_of_the_from_service_only(broker: Broker, pair: Pair) -> None:
    # rule DLG-1
    # BEGIN DIALOG CONVERSATION (docs/t-sql/statements/begin-dialog-conversation-transact-sql.md):
    # "All conversations in a conversation group must have the service specified in the FROM
    # clause as either the initiator or the target of the conversation." — here with a second
    # service on the same queue, which the queue check let through
    broker.create_service("//test/Second", queue=pair.iq)
    h, _ = converse(broker, pair, requests=1)
    group = endpoints(broker)[h].conversation_group_id
    with broker.transaction() as tx:
        with pytest.raises(
            ConversationError, match=r"RELATED_CONVERSATION: .* not of FROM service '//test/Second'"
        ):
            tx.begin_dialog("//test/Second", pair.target, contract="C", related_conversation=h)
        with pytest.raises(ConversationError, match=r"_GROUP: .* not of FROM service '//test/Se"):
            tx.begin_dialog(
                "//test/Second", pair.target, contract="C", related_conversation_group=group
            )
        # ... while the FROM service of the group may join it
        joined = tx.begin_dialog(
            pair.initiator, pair.target, contract="C", related_conversation_group=group
        )
    assert endpoints(broker)[joined].conversation_group_id == group


def test_a_group_a_conversation_was_moved_into_is_checked_again(broker: Broker, pair: Pair) -> None:
    # rule DLG-1, rule DLG-7: the check of BEGIN DIALOG's FROM service against a group is made
    # once per group in a transaction, and again after MOVE CONVERSATION put another service's
    # conversation in it (MOVE CONVERSATION, docs/t-sql/statements/move-conversation-
    # transact-sql.md, asks only that both groups be on one queue)
    broker.create_service("//test/Second", queue=pair.iq)
    with broker.transaction() as tx:
        first = tx.begin_dialog(pair.initiator, pair.target, contract="C")
    group = endpoints(broker)[first].conversation_group_id
    with broker.transaction() as tx:
        tx.begin_dialog(pair.initiator, pair.target, contract="C", related_conversation_group=group)
        second = tx.begin_dialog("//test/Second", pair.target, contract="C")
        tx.move_conversation(second, group)
        with pytest.raises(ConversationError, match=r"holds conversations of service '//test/Se"):
            tx.begin_dialog(
                pair.initiator, pair.target, contract="C", related_conversation_group=group
            )


def test_a_refused_related_group_is_not_kept_locked(broker: Broker, pair: Pair) -> None:
    # rule DLG-1, rule DLG-9
    # BEGIN DIALOG CONVERSATION: "The BEGIN DIALOG CONVERSATION command locks the conversation
    # group that contains the dialog_handle returned" — a refused one returns none and keeps
    # no lock
    broker.create_service("//test/Second", queue=pair.iq)
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        tx.send(t, "Resp", b"reply")
    group = endpoints(broker)[h].conversation_group_id
    with broker.transaction() as held:
        with pytest.raises(ConversationError):
            held.begin_dialog(
                "//test/Second", pair.target, contract="C", related_conversation_group=group
            )
        with broker.transaction() as other:
            got = other.receive(pair.iq, conversation_group_id=group, timeout=0)
            assert [m.message_body for m in got] == [b"reply"]


# -- END CONVERSATION -----------------------------------------------------------------------
def test_cleanup_removes_a_closed_endpoint_left_behind(broker: Broker, pair: Pair) -> None:
    # rule DLG-4
    # END CONVERSATION: "A member of the sysadmin fixed server role or a member of the db_owner
    # fixed database role may use the WITH CLEANUP to remove the metadata for a conversation
    # that has already completed." — the target ended WITH ERROR (CD) and the initiator never
    # ends its side (ER): the closed endpoint stays until WITH CLEANUP removes it
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        tx.end_conversation(t, error=1, description="gone")
    assert endpoints(broker)[t].state == "CD"
    with broker.transaction() as tx:
        tx.end_conversation(t, cleanup=True)
    rows = endpoints(broker)
    assert t not in rows and rows[h].state == "ER"
    # a plain END of a closed endpoint is still refused: its handle "is no longer valid"
    with broker.transaction() as tx, pytest.raises(ConversationError, match="does not exist"):
        tx.end_conversation(t)


def test_a_handle_is_no_longer_valid_after_end(broker: Broker, pair: Pair) -> None:
    # rule DLG-4
    # END CONVERSATION: "After a conversation ends, a Transact-SQL SEND statement that
    # specifies the conversation handle causes a Transact-SQL error." and "although the
    # conversation handle for the conversation is no longer valid, the endpoint for the
    # conversation remains active until ... the remote service acknowledges"
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        tx.end_conversation(t)
    assert endpoints(broker)[t].state == "DO"
    with broker.transaction() as tx, pytest.raises(ConversationError, match="this side has ended"):
        tx.send(t, "Resp", b"")
    with broker.transaction() as tx, pytest.raises(ConversationError, match="already ended"):
        tx.end_conversation(t)
    with broker.transaction() as tx, pytest.raises(ConversationError, match="far side has ended"):
        tx.send(h, "Req", b"")


def test_messages_received_then_ended_in_one_transaction_are_gone(
    broker: Broker, pair: Pair
) -> None:
    # END CONVERSATION: "When a conversation ends, Service Broker removes all messages for the
    # conversation from the service queue." — with RETENTION the received ones too
    broker.alter_queue(pair.tq, retention=True)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"1")
        tx.send(h, "Req", b"2")
    with broker.transaction() as tx:
        (first,) = tx.receive(pair.tq, top=1)
        tx.end_conversation(first.conversation_handle)
    assert broker.peek(pair.tq) == []


# -- BEGIN CONVERSATION TIMER ---------------------------------------------------------------
def test_timer_fires_while_this_side_has_not_ended(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule DLG-6
    # BEGIN CONVERSATION TIMER (docs/t-sql/statements/begin-conversation-timer-transact-sql.md):
    # "If the dialog is still open after 60 seconds, the application receives a time-out
    # message on the queue for that dialog." — open on this side: the far side's END (DI) does
    # not stop it; this side's END does
    broker.start()
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        tx.end_conversation(t)
    with broker.transaction() as tx:
        tx.begin_conversation_timer(h, 60)
    clock.advance(60)
    assert [m.message_type_name for m in broker.peek(pair.iq)][-1] == DIALOG_TIMER
    with broker.transaction() as tx:
        tx.begin_conversation_timer(h, 60)
        tx.end_conversation(h)
    clock.advance(60)
    assert broker.peek(pair.iq) == []
    with broker.transaction() as tx, pytest.raises(ConversationError):
        tx.begin_conversation_timer(h, 60)


# -- GET CONVERSATION GROUP / MOVE CONVERSATION ---------------------------------------------
def test_get_conversation_group_returns_none_when_no_group_is_available(
    broker: Broker, pair: Pair
) -> None:
    # rule RCV-5
    # GET CONVERSATION GROUP (docs/t-sql/statements/get-conversation-group-transact-sql.md):
    # "If no conversation group is available, the statement returns NULL as the conversation
    # group identifier." — nor is one available while another transaction holds it
    with broker.transaction() as tx:
        assert tx.get_conversation_group(pair.tq) is None
    converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        tx.send(tx.begin_dialog(pair.initiator, pair.target, contract="C"), "Req", b"")
    with broker.transaction() as held:
        group = held.get_conversation_group(pair.tq)
        assert group is not None
        with broker.transaction() as other:
            assert other.get_conversation_group(pair.tq) is None


def test_move_only_between_groups_of_one_queue(broker: Broker, pair: Pair) -> None:
    # rule DLG-7
    # MOVE CONVERSATION (docs/t-sql/statements/move-conversation-transact-sql.md): "Dialogs can
    # be only be redirected between conversation groups that are associated with the same
    # queue." — a group that does not exist is associated with no queue
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx, pytest.raises(ConversationError, match="does not exist"):
        tx.move_conversation(h, uuid.uuid4())
    target_group = endpoints(broker)[t].conversation_group_id
    with broker.transaction() as tx, pytest.raises(ConversationError, match="another queue"):
        tx.move_conversation(h, target_group)


# -- sys.transmission_queue -----------------------------------------------------------------
def test_transmission_queue_columns(broker: Broker, pair: Pair, clock: ManualClock) -> None:
    # rule QUE-3
    # sys.transmission_queue (docs/relational-databases/system-catalog-views/
    # sys-transmission-queue-transact-sql.md): "enqueue_time: Time at which the message entered
    # the queue", "to_broker_instance: Identifier of the broker that hosts the service that
    # this message is to. NULLABLE." (None: this database); SEND: "If a condition prevents a
    # local message from being put directly in the target service queue, it can be stored in
    # the transmission queue until the condition is resolved."
    broker.alter_queue(pair.tq, status=False)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"held")
    (row,) = broker.views.transmission_queue()
    assert row.enqueue_time == datetime.fromtimestamp(START, tz=UTC)
    assert row.to_broker_instance is None
    assert (row.to_service_name, row.from_service_name) == (pair.target, pair.initiator)
    assert (row.message_sequence_number, row.is_conversation_error) == (0, False)


# -- behaviours that already matched, each named by its page --------------------------------
def test_begin_dialog_defaults(broker: Broker, pair: Pair, clock: ManualClock) -> None:
    # rule DLG-1
    # BEGIN DIALOG CONVERSATION: "When this clause is omitted, the conversation follows the
    # contract named DEFAULT." and "When no LIFETIME clause is specified, the dialog lifetime is
    # the maximum value of the int data type." and "If the target service does not accept new
    # conversations on the contract specified, Service Broker returns an error message on the
    # conversation."
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target)
        tx.send(h, "DEFAULT", b"")
    row = endpoints(broker)[h]
    assert row.service_contract_name == "DEFAULT" and row.state == "ER"
    assert row.lifetime is not None
    assert row.lifetime.timestamp() >= clock.now() + 2**31 - 1 or row.lifetime.year == 9999
    (m,) = broker.peek(pair.iq)
    assert m.message_type_name == ERROR
    assert "does not support contract 'DEFAULT'" in parse_error_body(m.message_body)[1]


def test_send_checks_the_contract_for_the_sending_side(broker: Broker, pair: Pair) -> None:
    # rule DLG-2
    # SEND (docs/t-sql/statements/send-transact-sql.md): "These contracts must allow the message
    # type to be sent from this side of the conversation." and "If this clause is omitted, the
    # message is of the message type DEFAULT." and "The expression cannot be NULL."
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        with pytest.raises(MessageValidationError, match="not sent by the initiator"):
            tx.send(h, "Resp", b"")
        with pytest.raises(MessageValidationError, match="not sent by the target"):
            tx.send(t, "Req", b"")
        with pytest.raises(MessageValidationError, match="'DEFAULT' is not sent"):
            tx.send(h)
        with pytest.raises(MessageValidationError, match="not None"):
            tx.send(h, "Note", None)  # type: ignore[arg-type]
        tx.send(h, "Note", b"")
        tx.send(t, "Note", b"")


def test_send_on_several_conversations_is_atomic(broker: Broker, pair: Pair) -> None:
    # rule DLG-2
    # SEND: "SEND is an atomic statement, that is, if a SEND statement sending a message on
    # multiple conversations fails, e.g. because a conversation is in an errored state, no
    # messages will be stored in the transmission queue or put in any target service queue."
    h, t = converse(broker, pair, requests=1)
    with broker.transaction() as tx:
        tx.end_conversation(t, error=3, description="broken")  # h is now in ER
    with broker.transaction() as tx:
        fine = tx.begin_dialog(pair.initiator, pair.target, contract="C")
    with broker.transaction() as tx, pytest.raises(ConversationError, match="in error"):
        tx.send([fine, h], "Req", b"all or nothing")
    assert [m.message_body for m in broker.peek(pair.tq)] == []
    assert broker.views.transmission_queue() == []


def test_receive_where_and_queue_errors(broker: Broker, pair: Pair) -> None:
    # rule RCV-1, rule QUE-3
    # RECEIVE (docs/t-sql/statements/receive-transact-sql.md): "If the conversation handle or
    # conversation group identifier specified in the WHERE clause does not exist, or is not
    # associated with the specified queue, the RECEIVE statement returns an error." and "If the
    # queue specified in the RECEIVE statement has the queue status set to OFF, the statement
    # fails with a Transact-SQL error."
    h, _ = converse(broker, pair, requests=1)
    group = endpoints(broker)[h].conversation_group_id
    with broker.transaction() as tx:
        with pytest.raises(ConversationError, match="not on this queue"):
            tx.receive(pair.tq, conversation_handle=uuid.uuid4())
        with pytest.raises(ConversationError, match="not on this queue"):
            tx.receive(pair.tq, conversation_handle=h)  # the initiator's side is on iq
        with pytest.raises(ConversationError, match="not on this queue"):
            tx.receive(pair.tq, conversation_group_id=group)
        assert tx.receive(pair.iq, conversation_handle=h) == []
    broker.alter_queue(pair.tq, status=False)
    with broker.transaction() as tx, pytest.raises(QueueDisabledError, match="STATUS = OFF"):
        tx.receive(pair.tq)


def test_receive_returns_one_group_conversation_by_conversation(broker: Broker, pair: Pair) -> None:
    # rule RCV-1
    # RECEIVE: "All messages that are returned by a RECEIVE statement belong the same
    # conversation group." and "the RECEIVE statement returns all messages from one
    # conversation before it returns messages for any other conversation" and "For a given
    # conversation, a RECEIVE statement returns messages in ascending message_sequence_number
    # order." and TOP: "Specifies the maximum number of messages to be returned."
    with broker.transaction() as tx:
        a = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        b = tx.begin_dialog(pair.initiator, pair.target, contract="C", related_conversation=a)
        other = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send([a, b, other], "Req", b"")
    replies = {}
    for _ in range(3):
        with broker.transaction() as tx:
            (m,) = tx.receive(pair.tq)
            replies[m.conversation_handle] = m
    for i in range(3):  # replies interleaved across the conversations, one commit each
        for m in replies.values():
            with broker.transaction() as tx:
                tx.send(m.conversation_handle, "Resp", str(i).encode())
    group = endpoints(broker)[a].conversation_group_id
    with broker.transaction() as tx:
        first = tx.receive(pair.iq, top=2)
        rest = tx.receive(pair.iq, conversation_group_id=group)
    assert len(first) == 2
    got = first + rest if first[0].conversation_group_id == group else rest
    assert {m.conversation_group_id for m in got} == {group}
    handles = [m.conversation_handle for m in got]
    assert len(handles) == 6 and handles[:3] == [handles[0]] * 3 and handles[3:] == [handles[3]] * 3
    assert {handles[0], handles[3]} == {a, b}
    assert [m.message_body for m in got] == [b"0", b"1", b"2"] * 2
