"""The catalog statements and catalog views as Microsoft's reference pages document them: each
test names its page (MicrosoftDocs/sql-docs) and quotes the sentence it proves."""

from __future__ import annotations

import uuid

import pytest

from servicebroker import (
    ERROR,
    Broker,
    CatalogError,
    ConversationError,
    ManualClock,
    parse_error_body,
)
from servicebroker.catalog import EVENT_NOTIFICATION_SERVICE

from .conftest import Pair, make_pair


def _states(broker: Broker) -> dict[uuid.UUID, tuple[bool, str]]:
    return {
        e.conversation_handle: (e.is_initiator, e.state)
        for e in broker.views.conversation_endpoints()
    }


def _talk(broker: Broker, pair: Pair) -> uuid.UUID:
    """A conversation with a message waiting on each side; returns the initiator's handle."""
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"one")
        tx.send(h, "Req", b"two")
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq, top=1)
        tx.send(m.conversation_handle, "Resp", b"back")
    return h


def test_drop_service_deletes_its_messages_and_sends_an_error_to_the_far_side(
    broker: Broker, pair: Pair
) -> None:
    # DROP SERVICE (docs/t-sql/statements/drop-service-transact-sql.md): "Dropping a service
    # deletes all messages for the service from the queue that the service uses. Service
    # Broker sends an error to the remote side of any open conversations that use the service."
    h = _talk(broker, pair)
    assert len(broker.peek(pair.tq)) == 1 and len(broker.peek(pair.iq)) == 1
    broker.drop_service(pair.target)
    assert pair.target not in broker.catalog.services
    assert broker.peek(pair.tq) == []  # the target's message is gone with its endpoint
    assert _states(broker) == {h: (True, "ER")}
    with broker.transaction() as tx:
        msgs = tx.receive(pair.iq)
    # the Error comes first in its conversation (SYS-2), then what was already there
    assert [m.message_type_name for m in msgs] == [ERROR, "Resp"]
    # the code and text of SQL Server's message 8470
    # (docs/relational-databases/errors-events/database-engine-events-and-errors-8000-to-8999.md)
    assert parse_error_body(msgs[0].message_body) == (-8470, "Remote service has been dropped.")
    with broker.transaction() as tx, pytest.raises(ConversationError, match="ER"):
        tx.send(h, "Req", b"after")
    with broker.transaction() as tx:
        tx.end_conversation(h)
    assert broker.views.conversation_endpoints() == []


def test_drop_service_deletes_its_retained_messages_too(broker: Broker) -> None:
    # DROP SERVICE (docs/t-sql/statements/drop-service-transact-sql.md): "Dropping a service
    # deletes all messages for the service from the queue that the service uses." — with
    # RETENTION = ON the target's received (status 0) and sent (status 3) messages included
    pair = make_pair(broker, retention=True)
    _talk(broker, pair)
    assert sorted(m.status for m in broker.peek(pair.tq)) == [0, 1, 3]
    broker.drop_service(pair.target)
    assert broker.peek(pair.tq) == []
    # the initiator keeps its retained sent messages (3), the Resp and the Error (1)
    assert sorted(m.status for m in broker.peek(pair.iq)) == [1, 1, 3, 3]


def test_drop_service_drops_its_unsent_messages(broker: Broker, pair: Pair) -> None:
    # DROP SERVICE (docs/t-sql/statements/drop-service-transact-sql.md): "Dropping a service
    # deletes all messages for the service": also those it sent that still wait in the
    # transmission queue (the target queue is OFF)
    broker.alter_queue(pair.tq, status=False)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"held")
    assert len(broker.views.transmission_queue()) == 1
    broker.drop_service(pair.initiator)
    assert broker.views.transmission_queue() == []
    assert broker.views.conversation_endpoints() == []
    broker.alter_queue(pair.tq, status=True)
    assert broker.peek(pair.tq) == []


def test_drop_service_of_the_initiator_tells_the_target(broker: Broker, pair: Pair) -> None:
    # DROP SERVICE (docs/t-sql/statements/drop-service-transact-sql.md): "Service Broker sends
    # an error to the remote side of any open conversations that use the service."
    _talk(broker, pair)
    broker.drop_service(pair.initiator)
    assert broker.peek(pair.iq) == []
    (target,) = broker.views.conversation_endpoints()
    assert (target.is_initiator, target.state) == (False, "ER")
    with broker.transaction() as tx:
        msgs = tx.receive(pair.tq)
    assert [m.message_type_name for m in msgs] == [ERROR, "Req"]
    assert parse_error_body(msgs[0].message_body)[0] == -8470


def test_drop_contract_ends_its_conversations_with_an_error(broker: Broker, pair: Pair) -> None:
    # DROP CONTRACT (docs/t-sql/statements/drop-contract-transact-sql.md): "When you drop a
    # contract, Service Broker ends any existing conversations that use the contract with an
    # error." (A contract no service accepts: its conversation waits for a target service.)
    broker.create_contract("Lonely", {"Req": "INITIATOR"})
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, "//not/yet", contract="Lonely")
        tx.send(h, "Req", b"waiting")
    assert len(broker.views.transmission_queue()) == 1
    broker.drop_contract("Lonely")
    assert "Lonely" not in broker.catalog.contracts
    assert broker.views.transmission_queue() == []  # its unsent message is dropped
    assert _states(broker) == {h: (True, "ER")}
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.iq)
        with pytest.raises(ConversationError, match="ER"):
            tx.send(h, "Req", b"after")
        tx.end_conversation(h)
    # SQL Server's message 8487
    # (docs/relational-databases/errors-events/database-engine-events-and-errors-8000-to-8999.md)
    assert parse_error_body(m.message_body) == (
        -8487,
        "The remote service contract has been dropped.",
    )
    assert broker.views.conversation_endpoints() == []


def test_drop_contract_drops_what_waits_under_it_from_an_ended_conversation(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # DROP CONTRACT (docs/t-sql/statements/drop-contract-transact-sql.md): an endpoint already
    # in ER (its LIFETIME passed) gets no second Error, but nothing it left in the transmission
    # queue may leave under the dropped contract
    broker.create_contract("Lonely", {"Req": "INITIATOR"})
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, "//not/yet", contract="Lonely", lifetime=10)
        tx.send(h, "Req", b"waiting")
    clock.advance(11)
    broker.timer.fire_dialog_timers(clock.now())
    assert _states(broker) == {h: (True, "ER")}
    broker.drop_contract("Lonely")
    assert broker.views.transmission_queue() == []
    broker.create_service("//not/yet", queue=pair.tq)  # delivers what waited for it: nothing
    assert broker.peek(pair.tq) == []
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.iq)  # the LIFETIME's Error only
        tx.end_conversation(h)
    assert parse_error_body(m.message_body)[0] == -8489
    assert broker.views.conversation_endpoints() == []


def test_contracts_and_services_a_priority_names_must_exist_and_stay(
    broker: Broker, pair: Pair
) -> None:
    # CREATE BROKER PRIORITY (docs/t-sql/statements/create-broker-priority-transact-sql.md):
    # ContractName "must specify the name of a contract in the current database";
    # LocalServiceName "must specify the name of a service in the current database"
    with pytest.raises(CatalogError, match="CONTRACT_NAME 'Nope' names no contract"):
        broker.create_broker_priority("p", contract_name="Nope")
    with pytest.raises(CatalogError, match="LOCAL_SERVICE_NAME 'Nope' names no service"):
        broker.create_broker_priority("p", local_service_name="Nope")
    # RemoteServiceName "is a literal of type nvarchar(256)": any text, the service may be remote
    broker.create_broker_priority(
        "p", contract_name="C", local_service_name=pair.target, remote_service_name="//far/away"
    )
    # ALTER BROKER PRIORITY (docs/t-sql/statements/alter-broker-priority-transact-sql.md): the
    # same rule
    with pytest.raises(CatalogError, match="names no contract"):
        broker.alter_broker_priority("p", contract_name="Nope")
    # … "SET is required and must contain at least one criterion"
    with pytest.raises(CatalogError, match="SET must contain at least one"):
        broker.alter_broker_priority("p")
    # DROP CONTRACT (docs/t-sql/statements/drop-contract-transact-sql.md): "You cannot drop a
    # contract if any services or conversation priorities refer to the contract."
    broker.create_contract("Other", {"Req": "ANY"})
    broker.create_broker_priority("q", contract_name="Other")
    with pytest.raises(CatalogError, match="cannot drop contract 'Other': broker priority"):
        broker.drop_contract("Other")
    # DROP SERVICE (docs/t-sql/statements/drop-service-transact-sql.md): "You cannot drop a
    # service if any conversation priorities refer to it."
    with pytest.raises(CatalogError, match="broker priority\\(ies\\) 'p' refer to it"):
        broker.drop_service(pair.target)
    (row,) = [r for r in broker.views.conversation_priorities() if r.name == "p"]
    # sys.conversation_priorities
    # (docs/relational-databases/system-catalog-views/sys-conversation-priorities-transact-sql.md):
    # service_contract_id and local_service_id join sys.service_contracts and sys.services
    assert row.service_contract_id == broker.catalog.contract("C").service_contract_id
    assert row.local_service_id == broker.catalog.service(pair.target).service_id
    assert (row.remote_service_name, row.priority) == ("//far/away", 5)
    broker.alter_broker_priority("p", local_service_name="ANY")
    broker.drop_service(pair.target)
    broker.drop_broker_priority("q")
    broker.drop_contract("Other")
    (row,) = broker.views.conversation_priorities()
    assert (row.local_service_id, row.local_service_name) == (None, None)


def test_built_in_objects_cannot_be_dropped(broker: Broker) -> None:
    # CREATE CONTRACT (docs/t-sql/statements/create-contract-transact-sql.md): "By default, all
    # databases contain a message type named DEFAULT. … Microsoft SQL Server also provides a
    # DEFAULT contract"; CREATE EVENT NOTIFICATION
    # (docs/t-sql/statements/create-event-notification-transact-sql.md): the initiating
    # service "already exists"
    with pytest.raises(CatalogError, match="built in"):
        broker.drop_message_type("DEFAULT")
    with pytest.raises(CatalogError, match="built in"):
        broker.drop_contract("DEFAULT")
    with pytest.raises(CatalogError, match="built in"):
        broker.drop_service(EVENT_NOTIFICATION_SERVICE)


def test_a_service_on_the_default_contract(broker: Broker) -> None:
    # CREATE SERVICE (docs/t-sql/statements/create-service-transact-sql.md): "[DEFAULT]
    # Specifies that the service may be a target for conversations that follow the DEFAULT
    # contract. … The DEFAULT contract allows both sides of the conversation to send messages of
    # message type DEFAULT. Message type DEFAULT uses validation NONE."
    broker.create_queue("q")
    broker.create_service("I", queue="q")
    broker.create_service("T", queue="q", contracts=["DEFAULT"])
    with broker.transaction() as tx:
        h = tx.begin_dialog("I", "T")
        tx.send(h, "DEFAULT", b"\x00 any bytes")
    with broker.transaction() as tx:
        (m,) = tx.receive("q")
        tx.send(m.conversation_handle, "DEFAULT", b"")
    assert (m.service_contract_name, m.validation) == ("DEFAULT", "N")
    # CREATE CONTRACT (docs/t-sql/statements/create-contract-transact-sql.md): "[ DEFAULT ]
    # Indicates that this contract supports messages of the default message type."
    broker.create_contract("Mine", {"DEFAULT": "INITIATOR"})
    (usage,) = [
        u
        for u in broker.views.service_contract_message_usages()
        if u.service_contract_name == "Mine"
    ]
    assert (usage.message_type_name, usage.is_sent_by_initiator, usage.is_sent_by_target) == (
        "DEFAULT",
        True,
        False,
    )


def test_a_queue_created_off_neither_receives_nor_enqueues(broker: Broker) -> None:
    # CREATE QUEUE (docs/t-sql/statements/create-queue-transact-sql.md): "When the queue is
    # unavailable, no messages can be added to the queue or removed from the queue." —
    # sys.service_queues
    # (docs/relational-databases/system-catalog-views/sys-service-queues-transact-sql.md):
    # is_receive_enabled "1 = Receive is enabled", is_enqueue_enabled "1 = Enqueue is enabled"
    broker.create_queue("off", status=False)
    broker.create_queue("on")
    rows = {r.name: r for r in broker.views.service_queues()}
    assert (rows["off"].is_receive_enabled, rows["off"].is_enqueue_enabled) == (False, False)
    assert (rows["on"].is_receive_enabled, rows["on"].is_enqueue_enabled) == (True, True)
    broker.alter_queue("off", status=True)
    (row,) = [r for r in broker.views.service_queues() if r.name == "off"]
    assert (row.is_receive_enabled, row.is_enqueue_enabled) == (True, True)


def test_the_catalog_views(broker: Broker, pair: Pair) -> None:
    cat = broker.catalog
    c_id = cat.contract("C").service_contract_id
    target = cat.service(pair.target)
    # sys.service_message_types
    # (docs/relational-databases/system-catalog-views/sys-service-message-types-transact-sql.md):
    # validation "N = None, X = XML, E = Empty", validation_desc "NONE, XML, EMPTY"
    broker.create_message_type("X", validation="WELL_FORMED_XML")
    types = {r.name: r for r in broker.views.service_message_types()}
    assert (types["DEFAULT"].validation, types["DEFAULT"].validation_desc) == ("N", "NONE")
    assert (types["X"].validation, types["X"].validation_desc) == ("X", "XML")
    assert (types[ERROR].validation, types[ERROR].validation_desc) == ("X", "XML")
    assert types["Req"].principal_id is None and types["Req"].xml_collection_id is None
    # sys.service_contracts
    # (docs/relational-databases/system-catalog-views/sys-service-contracts-transact-sql.md):
    # "a row for each contract in the database"
    contracts = {r.name: r.service_contract_id for r in broker.views.service_contracts()}
    assert contracts["C"] == c_id and "DEFAULT" in contracts
    # sys.service_contract_message_usages
    # (docs/relational-databases/system-catalog-views/sys-service-contract-message-usages-transact-sql.md):
    # "a row per (contract, message type) pair", is_sent_by_initiator / is_sent_by_target
    usages = {
        r.message_type_name: (r.is_sent_by_initiator, r.is_sent_by_target)
        for r in broker.views.service_contract_message_usages()
        if r.service_contract_id == c_id
    }
    assert usages == {"Req": (True, False), "Resp": (False, True), "Note": (True, True)}
    (default,) = [
        r
        for r in broker.views.service_contract_message_usages()
        if r.service_contract_name == "DEFAULT"
    ]
    assert (default.message_type_name, default.is_sent_by_initiator, default.is_sent_by_target) == (
        "DEFAULT",
        True,
        True,
    )
    # sys.services (docs/relational-databases/system-catalog-views/sys-services-transact-sql.md):
    # service_queue_id "Object id for the queue that this service uses"
    services = {r.name: r for r in broker.views.services()}
    assert services[pair.target].service_id == target.service_id
    assert services[pair.target].service_queue_id == cat.queue(pair.tq).queue_id
    assert services[pair.target].service_queue_name == pair.tq
    assert EVENT_NOTIFICATION_SERVICE in services
    # sys.service_contract_usages
    # (docs/relational-databases/system-catalog-views/sys-service-contract-usages-transact-sql.md):
    # "a row per (service, contract) pair"; a service that only initiates has none
    pairs = {
        (r.service_name, r.service_contract_name) for r in broker.views.service_contract_usages()
    }
    assert (pair.target, "C") in pairs
    assert not any(name == pair.initiator for name, _ in pairs)
    # sys.service_queue_usages
    # (docs/relational-databases/system-catalog-views/sys-service-queue-usages-transact-sql.md):
    # "A service can only be associated with one queue. A queue can be associated with multiple
    # services."
    broker.create_service("//second", queue=pair.tq)
    on_tq = {
        r.service_name
        for r in broker.views.service_queue_usages()
        if r.service_queue_name == pair.tq
    }
    assert on_tq == {pair.target, "//second"}
    # the views follow the catalog
    broker.drop_service("//second")
    assert "//second" not in {r.name for r in broker.views.services()}


def test_event_notification_broker_instance(broker: Broker) -> None:
    # CREATE EVENT NOTIFICATION (docs/t-sql/statements/create-event-notification-transact-sql.md):
    # "Use 'current database' to specify the service broker instance in the current database.
    # 'current database' is a case-insensitive string literal."
    broker.create_queue("q")
    broker.create_event_notification(
        "n1",
        queue="q",
        event="QUEUE_ACTIVATION",
        to_service="//s",
        broker_instance="Current Database",
    )
    with pytest.raises(CatalogError, match=r"broker instance '8140a771-.*' is not served"):
        broker.create_event_notification(
            "n2",
            queue="q",
            event="QUEUE_ACTIVATION",
            to_service="//s",
            broker_instance="8140a771-3c4b-4479-8ac0-81008ab17984",
        )
    assert set(broker.catalog.event_notifications) == {"n1"}
    # sys.event_notifications
    # (docs/relational-databases/system-catalog-views/sys-event-notifications-transact-sql.md):
    # parent_class "1 = Object or Column", parent_id "Non-zero ID of the parent object",
    # service_name "Name of the target service to which the notification is sent"
    (row,) = broker.views.event_notifications()
    assert (row.name, row.parent_class, row.parent_class_desc) == ("n1", 1, "OBJECT_OR_COLUMN")
    assert (row.parent_id, row.queue_name) == (broker.catalog.queue("q").queue_id, "q")
    assert (row.event_type, row.service_name, row.broker_instance) == (
        "QUEUE_ACTIVATION",
        "//s",
        "current database",
    )
    # DROP EVENT NOTIFICATION (docs/t-sql/statements/drop-event-notification-transact-sql.md):
    # "QUEUE must be specified if it was specified when the event notification was created."
    broker.create_queue("other")
    with pytest.raises(CatalogError, match="'n1' is not on queue 'other'"):
        broker.drop_event_notification("n1", queue="other")
    broker.drop_event_notification("n1", queue="q")
    assert broker.views.event_notifications() == []


def test_a_transaction_using_a_dropped_service_does_not_commit_half(
    broker: Broker, pair: Pair
) -> None:
    # DROP SERVICE (docs/t-sql/statements/drop-service-transact-sql.md) removes the service's
    # conversations; a transaction that used one meanwhile — SENT on it, RECEIVED from it or
    # began a dialog from the service — is refused at commit and rolled back whole (SQL Server's
    # DROP would have waited on its locks): no message is lost while commit says it is done,
    # no endpoint is left on a dropped service, the application's rows do not commit alone
    broker.execute("CREATE TABLE app_rows (x INTEGER)")
    h = _talk(broker, pair)
    sending = broker.transaction()
    sending.send(h, "Req", b"three")
    beginning = broker.transaction()
    new = beginning.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
    beginning.send(new, "Req", b"new")
    broker.drop_service(pair.initiator)
    sending.execute("INSERT INTO app_rows (x) VALUES (1)")  # (on SQLite: the write lock, now)
    with pytest.raises(ConversationError, match=rf"conversation {h} was removed while"):
        sending.commit()
    with pytest.raises(ConversationError, match=r"its FROM service was dropped"):
        beginning.commit()
    assert broker.execute("SELECT x FROM app_rows") == []
    assert {e.service_name for e in broker.views.conversation_endpoints()} == {pair.target}
    # the target got the dropped service's Error, and not the SEND that was refused
    got = [(m.message_type_name, m.message_body) for m in broker.peek(pair.tq)]
    assert [t for t, _ in got].count(ERROR) == 1 and ("Req", b"three") not in got
