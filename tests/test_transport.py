"""Dialogs between two broker instances over real TCP with mutual TLS on loopback (NET, RTE,
SEC-1): each broker its own database (two SQLite files, or two PostgreSQL schemas), one
process. Every outcome is awaited with a real-time deadline, never decided by a sleep; the
brokers run on manual clocks, so no retry fires unless a test moves the clock."""

from __future__ import annotations

import logging

import pytest

from servicebroker.dialogs import parse_error_body
from servicebroker.testing.waiting import eventually
from servicebroker.transport.audit import AuditBrokerLogin

from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    audit_record,
    catalog,
    connect,
    first_status,
    link,
    receive_all,
    secure,
    shop_and_warehouse,
)


def test_dialog_between_instances_exactly_once_in_order_both_ways(sites: tuple[Site, Site]) -> None:
    """NET-2, NET-3: 300 messages arrive once and in send order; the reply and END
    CONVERSATION travel back; each side's endpoint closes and each transmission queue ends
    empty (rows deleted only on acknowledgement); RTE-4: the initiator is pinned to the
    instance that acknowledged."""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        for i in range(300):
            tx.send(handle, "Order", f"<o n='{i}'/>")
    got = receive_all(b.broker, "warehouse_q", 300)
    assert [body for _, body in got] == [f"<o n='{i}'/>".encode() for i in range(300)]
    [target] = b.broker.views.conversation_endpoints()
    assert target.far_broker_instance == str(a.broker.service_broker_guid)
    assert target.far_service == INITIATOR and target.state == "CO"
    with b.broker.transaction() as tx:
        tx.send(target.conversation_handle, "Receipt", b"done")
        tx.end_conversation(target.conversation_handle)
    back = receive_all(a.broker, "shop_q", 2)
    assert [t for t, _ in back] == [
        "Receipt",
        "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog",
    ]
    [initiator] = a.broker.views.conversation_endpoints()
    assert initiator.far_broker_instance == str(b.broker.service_broker_guid)  # RTE-4
    assert initiator.state == "DI"
    with a.broker.transaction() as tx:
        tx.end_conversation(handle)
    eventually(lambda: not a.broker.views.transmission_queue(), "shop's transmission queue empty")
    eventually(lambda: not b.broker.views.transmission_queue(), "warehouse's queue empty")
    eventually(lambda: not b.broker.views.conversation_endpoints(), "warehouse endpoint gone")
    assert a.broker.views.conversation_endpoints() == []


def test_target_checks_the_contract_and_answers_with_an_error(sites: tuple[Site, Site]) -> None:
    """Contracts are checked at the target: a dialog on a contract the target service does
    not accept ends the initiator with the broker's Error (-8408) and nothing is queued."""
    a, b = sites
    connect(a, b)
    a.broker.create_contract("//other/Contract", {"Order": "INITIATOR"})
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract="//other/Contract", encryption=False)
        tx.send(handle, "Order", "<o/>")
    [(kind, body)] = receive_all(a.broker, "shop_q", 1)
    assert kind == "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    code, text = parse_error_body(body)
    assert code == -8408 and TARGET in text
    assert [e.state for e in a.broker.views.conversation_endpoints()] == ["ER"]
    assert b.broker.views.conversation_endpoints() == []


def test_a_message_waits_while_the_target_service_is_missing(sites: tuple[Site, Site]) -> None:
    """NET-7: a message the far instance cannot take now (no such service there) waits in
    the transmission queue with a status saying why; once the service exists it is delivered
    at the next retry (NET-4, on the manual clock)."""
    a, b = sites
    catalog(a.broker, target=False)
    b.broker.create_message_type("Order", validation="WELL_FORMED_XML")
    b.broker.create_message_type("Receipt")
    b.broker.create_contract(CONTRACT, {"Order": "INITIATOR", "Receipt": "TARGET"})
    link(a, b)
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(handle, "Order", "<o/>")

    status = eventually(lambda: first_status(a.broker), "a transmission_status")
    assert "could not be found" in status and TARGET in status
    b.broker.create_queue("warehouse_q")
    b.broker.create_service(TARGET, queue="warehouse_q", contracts=[CONTRACT])
    b.broker.grant("SEND", on=f"SERVICE::{TARGET}", to="public")
    a.clock.advance(5)  # NET-4: the first retry comes after 4 s
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o/>"]


def test_a_peer_whose_certificate_is_not_granted_gets_nothing(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-1: the warehouse has the shop's certificate but granted it no CONNECT: the
    connection is refused, the shop's message waits with the handshake's failure as its
    transmission_status, nothing reaches the warehouse, and the warehouse logs an Audit Broker
    Login event of subclass Authorization Failure ("the public key delivered … does not
    correspond to a certificate in the database",
    https://learn.microsoft.com/en-us/sql/relational-databases/event-classes/audit-broker-login-event-class)."""
    caplog.set_level(logging.INFO, logger="servicebroker.transport.peer")
    a, b = sites
    shop_and_warehouse(a, b, warehouse_grants=False)
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(handle, "Order", "<o/>")

    status = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert status == (
        "Connection handshake failed. The certificate used by this endpoint was refused by the "
        "peer: it is not granted CONNECT on the peer's endpoint. (TLS alert: unknown ca) "
        f"(TCP://127.0.0.1:{b.port})"
    )
    record = audit_record(caplog, AuditBrokerLogin.AUTHORIZATION_FAILURE)
    assert record.levelno == logging.WARNING
    assert (
        "The certificate used by the peer is invalid due to the following reason: Certificate "
        "not granted CONNECT on this endpoint (self-signed certificate)." in record.getMessage()
    )
    assert b.broker.views.conversation_endpoints() == []
    assert b.broker.transport.statistics().connections_refused >= 1


def test_required_against_disabled_is_refused(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-1: ENCRYPTION REQUIRED and DISABLED cannot talk ("to connect to this endpoint,
    another endpoint must have ENCRYPTION set to either SUPPORTED or REQUIRED",
    https://learn.microsoft.com/en-us/sql/t-sql/statements/create-endpoint-transact-sql); the
    status says so and the acceptor logs an Audit Broker Login Negotiate Failure."""
    caplog.set_level(logging.INFO, logger="servicebroker.transport.peer")
    a, b = sites
    shop_and_warehouse(a, b, encryption=("REQUIRED", "DISABLED"))
    with a.broker.transaction() as tx:
        tx.send(
            tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False), "Order", "<o/>"
        )

    text = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert text == (
        "Connection handshake failed. There is no compatible encryption: this endpoint's "
        "ENCRYPTION is REQUIRED and the peer's is DISABLED (REQUIRED and DISABLED cannot talk, "
        f"SEC-1) (TCP://127.0.0.1:{b.port})"
    )
    record = audit_record(caplog, AuditBrokerLogin.NEGOTIATE_FAILURE)
    assert "this endpoint's ENCRYPTION is DISABLED and the peer's is REQUIRED" in (
        record.getMessage()
    )
    assert b.broker.views.conversation_endpoints() == []


def test_an_unreadable_private_key_fails_the_start_and_tick_4c_retries_it(
    sites: tuple[Site, Site],
) -> None:
    """TICK-4c: the endpoint's private key file cannot be read at start: the transport does
    not start and says why; once the file is back, the periodic task starts it."""
    a, b = sites
    secure(a, b)
    key = a.cert[1]
    saved = key.read_bytes()
    key.write_bytes(b"not a key")
    a.broker.start()
    stats = a.broker.transport.statistics()
    assert not stats.running and stats.start_status and str(key) in stats.start_status
    key.write_bytes(saved)
    a.clock.advance(25)  # every 5th notification of the 5-second timer
    eventually(lambda: a.broker.transport.statistics().running, "the transport's start")


def test_a_connection_closed_by_this_side_is_made_again_for_the_next_message(
    sites: tuple[Site, Site],
) -> None:
    """TICK-4a, TICK-3a: the shop closes its connection after 90 s without traffic; the
    connection leaves the shop's connections, and the next message opens a new one once the
    15 s suppression after a disconnection is over (a connection this side closed, or whose
    write failed, is torn down like one the peer closed)."""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(handle, "Order", "<o n='1'/>")
    receive_all(b.broker, "warehouse_q", 1)
    eventually(lambda: not a.broker.views.transmission_queue(), "the first message acknowledged")
    a.clock.advance(91)
    a.broker.transport.close_idle(a.clock.now())
    eventually(lambda: not a.broker.transport.connections(), "the idle connection torn down")
    with a.broker.transaction() as tx:
        tx.send(handle, "Order", "<o n='2'/>")
    a.clock.advance(16)
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o n='2'/>"]
