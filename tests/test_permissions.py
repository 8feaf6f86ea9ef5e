"""SEND and RECEIVE as permissions (SEC-4), acting as a principal (``Broker.transaction(principal=)``,
``Broker.open(principal=)``, an activated procedure's EXECUTE AS), the T-SQL forms of the
principal statements, and the security views (SEC-3).

Pages: docs/t-sql/statements/grant-service-broker-permissions-transact-sql.md ("SEND: the
permission to send a message to a service"; RECEIVE on a queue), revoke-service-broker-
permissions-transact-sql.md, create-user-transact-sql.md, create-remote-service-binding-transact-
sql.md, create-queue-transact-sql.md (ACTIVATION … EXECUTE AS), grant-endpoint-permissions-
transact-sql.md; docs/relational-databases/system-catalog-views/sys-database-principals-transact-
sql.md, sys-database-permissions-transact-sql.md, sys-remote-service-bindings-transact-sql.md,
sys-conversation-endpoints-transact-sql.md.
"""

from __future__ import annotations

import logging
import threading
import uuid
from pathlib import Path

import pytest

from servicebroker import (
    Activation,
    ActivationContext,
    Broker,
    CatalogError,
    ManualClock,
    MessageValidationError,
    PermissionDeniedError,
    QueueDisabledError,
)
from servicebroker.testing.waiting import eventually
from servicebroker.transport.certificates import make_self_signed

from .conftest import Pair


def begin(broker: Broker, pair: Pair, principal: str = "dbo", **kw: object) -> uuid.UUID:
    with broker.transaction(principal=principal) as tx:
        return tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract, **kw)  # type: ignore[arg-type]


def test_send_needs_send_on_the_local_target_service(broker: Broker, pair: Pair) -> None:
    """SEC-4: a principal without SEND on the (local) target service is refused at SEND with
    PermissionDeniedError naming the permission, the service and the principal; nothing is put
    on the target queue nor on the transmission queue, and the transaction stays usable
    (grant-service-broker-permissions-transact-sql.md)."""
    broker.create_user("alice")
    handle = begin(broker, pair, "alice")  # BEGIN DIALOG alone enqueues nothing: no check
    with broker.transaction(principal="alice") as tx:
        assert tx.principal == "alice"
        with pytest.raises(PermissionDeniedError) as refused:
            tx.send(handle, "Req", b"x")
        assert str(refused.value) == (
            "The SEND permission was denied on SERVICE::'//test/Target' for principal 'alice'"
        )
        assert (refused.value.permission, refused.value.securable, refused.value.principal) == (
            "SEND",
            "SERVICE:://test/Target",
            "alice",
        )
        tx.end_conversation(handle)  # END CONVERSATION is not checked; the transaction goes on
    assert broker.peek(pair.tq) == []
    assert [m.message_type_name for m in broker.peek(pair.iq)] == []
    assert broker.views.transmission_queue() == []
    # the dialog never reached its target: its END closed it
    assert [r for r in broker.views.conversation_endpoints() if r.is_initiator] == []


def test_grant_then_send_then_revoke(broker: Broker, pair: Pair) -> None:
    """SEC-4: GRANT SEND lets the principal send; REVOKE takes it away again; a grant to
    public lets every principal send (grant-service-broker-permissions-transact-sql.md,
    revoke-service-broker-permissions-transact-sql.md)."""
    broker.create_user("alice")
    handle = begin(broker, pair, "alice")
    broker.grant("SEND", on=f"SERVICE::{pair.target}", to="alice")
    with broker.transaction(principal="alice") as tx:
        tx.send(handle, "Req", b"1")
    broker.revoke("SEND", on=f"SERVICE::{pair.target}", to="alice")
    with broker.transaction(principal="alice") as tx, pytest.raises(PermissionDeniedError):
        tx.send(handle, "Req", b"2")
    broker.grant("SEND", on=f"SERVICE::{pair.target}", to="public")
    with broker.transaction(principal="alice") as tx:
        tx.send(handle, "Req", b"3")
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"1", b"3"]


def test_send_many_is_all_or_nothing(broker: Broker, pair: Pair) -> None:
    """SEC-4: one refused conversation refuses the whole batch: nothing of it is enqueued."""
    broker.create_user("alice")
    broker.create_queue("q2")
    broker.create_service("//test/Other", queue="q2", contracts=["C"])
    broker.grant("SEND", on=f"SERVICE::{pair.target}", to="alice")
    allowed = begin(broker, pair, "alice")
    with broker.transaction(principal="alice") as tx:
        other = tx.begin_dialog(pair.initiator, "//test/Other", contract="C")
    with broker.transaction(principal="alice") as tx:
        with pytest.raises(PermissionDeniedError, match="SERVICE::'//test/Other'"):
            tx.send_many([(allowed, "Req", b"a"), (other, "Req", b"b")])
        with pytest.raises(PermissionDeniedError):
            tx.send([allowed, other], "Req", b"c")
        tx.send(allowed, "Req", b"d")
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"d"]
    assert broker.peek("q2") == []


def test_unchecked_sends(broker: Broker, pair: Pair) -> None:
    """SEC-4: only the initiator's SEND to a service of this database is checked here — a
    target's reply is sent as its service's owner, and a target service that is not in this
    database checks at its side (SEC-2): the message waits in the transmission queue."""
    broker.create_user("alice")
    broker.grant("SEND", on=f"SERVICE::{pair.target}", to="alice")
    broker.grant("RECEIVE", on=f"QUEUE::{pair.tq}", to="alice")
    handle = begin(broker, pair, "alice")
    with broker.transaction(principal="alice") as tx:
        tx.send(handle, "Req", b"q")
    with broker.transaction(principal="alice") as tx:
        (msg,) = tx.receive(pair.tq)
        tx.send(msg.conversation_handle, "Resp", b"a")  # no SEND on the initiator service
    assert [m.message_body for m in broker.peek(pair.iq)] == [b"a"]
    with broker.transaction(principal="alice") as tx:
        far = tx.begin_dialog(pair.initiator, "//elsewhere/Svc", contract="C")
        tx.send(far, "Req", b"w")
    assert [r.message_body for r in broker.views.transmission_queue()] == [b"w"]


def test_receive_needs_receive_on_the_queue(broker: Broker, pair: Pair) -> None:
    """SEC-4: RECEIVE, WAITFOR RECEIVE and GET CONVERSATION GROUP without RECEIVE on the queue
    are refused: nothing is dequeued or locked (another transaction receives the message while
    the refused one is still open); GRANT RECEIVE ON OBJECT:: allows it."""
    broker.create_user("alice")
    handle = begin(broker, pair)
    with broker.transaction() as tx:
        tx.send(handle, "Req", b"m")
    with broker.transaction(principal="alice") as refused:
        with pytest.raises(PermissionDeniedError) as err:
            refused.receive(pair.tq)
        assert (
            str(err.value)
            == "The RECEIVE permission was denied on QUEUE::'tq' for principal 'alice'"
        )
        with pytest.raises(PermissionDeniedError):
            refused.receive(pair.tq, timeout=30.0)  # refused at once, not after waiting
        with pytest.raises(PermissionDeniedError):
            refused.get_conversation_group(pair.tq)
        with broker.transaction() as other:  # the group is not locked by the refused one
            assert other.get_conversation_group(pair.tq, timeout=0.0) is not None
        assert [m.message_body for m in broker.peek(pair.tq)] == [b"m"]
    broker.grant("RECEIVE", on=f"OBJECT::{pair.tq}", to="alice")
    with broker.transaction(principal="alice") as tx:
        assert [m.message_body for m in tx.receive(pair.tq)] == [b"m"]
    assert broker.peek(pair.tq) == []


def test_acting_principals(url: str, clock: ManualClock, pair: Pair, broker: Broker) -> None:
    """SEC-4: Broker.open(url, principal=) makes a user the default principal of a broker's
    transactions; dbo, the default, may do everything; an unknown principal or a role is
    refused with CatalogError naming it."""
    broker.create_user("alice")
    handle = begin(broker, pair)
    with broker.transaction() as tx:
        assert tx.principal == "dbo"
        tx.send(handle, "Req", b"dbo")
    as_alice = Broker.open(url, clock=clock, principal="alice", poll_interval=0.01)
    try:
        assert as_alice.principal == "alice"
        with as_alice.transaction() as tx:
            assert tx.principal == "alice"
            with pytest.raises(PermissionDeniedError, match="principal 'alice'"):
                tx.send(handle, "Req", b"alice")
        with as_alice.transaction(principal="dbo") as tx:
            tx.send(handle, "Req", b"dbo again")
    finally:
        as_alice.close()
    with pytest.raises(CatalogError, match="database principal 'ghost' does not exist"):
        broker.transaction(principal="ghost")
    with pytest.raises(CatalogError, match="'public' is a role"):
        broker.transaction(principal="public")
    with pytest.raises(CatalogError, match="database principal 'ghost' does not exist"):
        Broker.open(url, clock=clock, principal="ghost")
    assert len(broker.peek(pair.tq)) == 2


def test_begin_dialog_records_principal_and_encryption(broker: Broker, pair: Pair) -> None:
    """SEC-2 columns: BEGIN DIALOG … WITH ENCRYPTION = ON | OFF (default ON) is stored on the
    initiator's endpoint with the principal that began it; sys.conversation_endpoints shows
    principal_id, far_principal_id, the session key identifiers and security_timestamp
    (sys-conversation-endpoints-transact-sql.md). Within one broker nothing is encrypted."""
    alice = broker.create_user("alice")
    on = begin(broker, pair, "alice")
    off = begin(broker, pair, encryption=False)
    rows = {r.conversation_handle: r for r in broker.views.conversation_endpoints()}
    assert (rows[on].principal_id, rows[on].encryption_requested) == (alice, True)
    assert (rows[off].principal_id, rows[off].encryption_requested) == (1, False)
    assert rows[on].far_principal_id is None
    assert rows[on].outbound_session_key_identifier is None
    assert rows[on].inbound_session_key_identifier is None
    assert rows[on].security_timestamp is None
    with broker.transaction() as tx, pytest.raises(Exception, match="ENCRYPTION"):
        tx.begin_dialog(pair.initiator, pair.target, contract="C", encryption="ON")  # type: ignore[arg-type]


def until_activated(clock: ManualClock, done: threading.Event, what: str) -> None:
    """Move the broker clock a timer tick (5 s: ACT-5b's next start) at a time until ``done``
    is set; fail after about 40 ticks (10 s)."""

    def tick() -> bool:
        if done.wait(0.25):
            return True
        clock.advance(5.0)
        return False

    eventually(tick, what, timeout=10.0, every=0.0)


def test_activated_procedure_runs_as_execute_as(
    broker: Broker, pair: Pair, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-4 with ACTIVATION (EXECUTE AS 'user') (create-queue-transact-sql.md): the
    transactions the procedure opens act as that user; without RECEIVE on the queue its
    RECEIVE is refused (the task's failure is logged) and the message stays; once granted, it
    is received. EXECUTE AS SELF / OWNER run as dbo."""
    broker.create_user("worker")
    seen: list[tuple[str, object]] = []
    done = threading.Event()

    def procedure(ctx: ActivationContext) -> None:
        with ctx.broker.transaction() as tx:
            try:
                got = tx.receive(ctx.queue_name)
            except PermissionDeniedError as exc:
                seen.append((tx.principal, str(exc)))
                raise
            seen.append((tx.principal, [m.message_body for m in got]))
        done.set()

    broker.alter_queue(pair.tq, activation=Activation(procedure, execute_as="worker"))
    broker.start()
    handle = begin(broker, pair)
    with caplog.at_level(logging.ERROR), broker.transaction() as tx:
        tx.send(handle, "Req", b"first")
    eventually(lambda: seen, "the procedure's refused RECEIVE")
    assert seen[0] == (
        "worker",
        "The RECEIVE permission was denied on QUEUE::'tq' for principal 'worker'",
    )
    eventually(lambda: "failed" in caplog.text, "the logged failure")
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"first"]
    broker.grant("RECEIVE", on=f"QUEUE::{pair.tq}", to="worker")
    with broker.transaction() as tx:
        tx.send(handle, "Req", b"second")
    until_activated(clock, done, "the granted procedure's RECEIVE")
    assert ("worker", [b"first", b"second"]) in seen
    seen.clear()
    broker.alter_queue(pair.tq, activation=Activation(procedure, execute_as="OWNER"))
    done.clear()
    with broker.transaction() as tx:
        tx.send(handle, "Req", b"third")
    until_activated(clock, done, "the OWNER procedure")
    assert ("dbo", [b"third"]) in seen


def test_ddl_forms_and_views(broker: Broker, pair: Pair, tmp_path: Path) -> None:
    """SEC-3, SEC-4 in T-SQL: CREATE USER … WITHOUT LOGIN / FROM CERTIFICATE, CREATE CERTIFICATE
    … AUTHORIZATION, CREATE REMOTE SERVICE BINDING, GRANT / REVOKE SEND ON SERVICE::,
    RECEIVE ON [queue] and ON OBJECT::, DROP …; the views sys.database_principals,
    sys.database_permissions, sys.remote_service_bindings and sys.certificates' principal_id
    (create-user-transact-sql.md, create-remote-service-binding-transact-sql.md,
    grant-service-broker-permissions-transact-sql.md)."""
    pem, _ = make_self_signed("peer", tmp_path / "a")
    pem2, _ = make_self_signed("mine", tmp_path / "b")
    broker.execute_ddl(
        f"""
        CREATE CERTIFICATE PeerCert FROM FILE = '{pem}';
        CREATE USER alice WITHOUT LOGIN;
        CREATE USER [peer] FROM CERTIFICATE PeerCert;
        CREATE CERTIFICATE AliceCert AUTHORIZATION alice FROM FILE = '{pem2}';
        CREATE REMOTE SERVICE BINDING [PeerBinding]
            TO SERVICE '//peer/Svc' WITH USER = [peer], ANONYMOUS = ON;
        GRANT SEND ON SERVICE::[//test/Target] TO alice, public;
        GRANT RECEIVE ON [tq] TO alice;
        GRANT RECEIVE ON OBJECT::[dbo].[iq] TO peer;
        """
    )
    principals = {p.name: p for p in broker.views.database_principals()}
    assert [(p.principal_id, p.type, p.type_desc) for p in principals.values()] == [
        (0, "R", "DATABASE_ROLE"),
        (1, "S", "SQL_USER"),
        (5, "S", "SQL_USER"),
        (6, "S", "SQL_USER"),
    ]
    assert principals["peer"].certificate_names == ("PeerCert",)
    assert principals["alice"].certificate_names == ("AliceCert",)
    assert principals["dbo"].authentication_type_desc == "INSTANCE"
    certs = {c.name: c.principal_id for c in broker.views.certificates()}
    assert certs == {"PeerCert": 6, "AliceCert": 5}
    perms = [
        (
            p.class_,
            p.class_desc,
            p.type,
            p.permission_name,
            p.state_desc,
            p.securable,
            p.grantee_name,
        )
        for p in broker.views.database_permissions()
    ]
    assert perms == [
        (1, "OBJECT_OR_COLUMN", "RC", "RECEIVE", "GRANT", "QUEUE::iq", "peer"),
        (1, "OBJECT_OR_COLUMN", "RC", "RECEIVE", "GRANT", "QUEUE::tq", "alice"),
        (17, "SERVICE", "SN", "SEND", "GRANT", "SERVICE:://test/Target", "public"),
        (17, "SERVICE", "SN", "SEND", "GRANT", "SERVICE:://test/Target", "alice"),
    ]
    (binding,) = broker.views.remote_service_bindings()
    assert (
        binding.name,
        binding.principal_id,
        binding.remote_service_name,
        binding.service_contract_id,
        binding.remote_principal_id,
        binding.remote_principal_name,
        binding.is_anonymous_on,
    ) == ("PeerBinding", 1, "//peer/Svc", 0, 6, "peer", True)
    broker.execute_ddl(
        """
        REVOKE SEND ON SERVICE::[//test/Target] FROM public;
        REVOKE RECEIVE ON OBJECT::tq FROM alice;
        REVOKE RECEIVE ON iq TO peer;
        DROP REMOTE SERVICE BINDING PeerBinding;
        DROP CERTIFICATE PeerCert;
        DROP USER peer;
        """
    )
    assert [p.grantee_name for p in broker.views.database_permissions()] == ["alice"]
    assert broker.views.remote_service_bindings() == []
    assert [p.name for p in broker.views.database_principals()] == ["public", "dbo", "alice"]
    with pytest.raises(CatalogError, match=r"DROP USER at line 1.*'alice': it owns certificate"):
        broker.execute_ddl("DROP USER alice")
    with pytest.raises(CatalogError, match="WITH USER = … is required"):
        broker.execute_ddl("CREATE REMOTE SERVICE BINDING b TO SERVICE '//x' WITH ANONYMOUS = ON")
    with pytest.raises(CatalogError, match="a QUEUE takes RECEIVE"):
        broker.execute_ddl("GRANT SEND ON tq TO alice")


def test_connect_on_endpoint(broker: Broker, tmp_path: Path) -> None:
    """SEC-1 via GRANT / REVOKE: CONNECT ON ENDPOINT:: is granted to and revoked from a LOGIN
    (grant-endpoint-permissions-transact-sql.md), through grant() / revoke() and T-SQL."""
    pem, key = make_self_signed("ep", tmp_path / "c")
    broker.create_certificate("EpCert", certificate_file=pem, private_key_file=key)
    broker.create_endpoint(
        "ep", listener_port=0, authentication_certificate="EpCert", state="STOPPED"
    )
    broker.create_login("peer_login", certificate="EpCert")
    login_id = broker.catalog.logins["peer_login"].login_id
    broker.grant("CONNECT", on="ENDPOINT::ep", to="peer_login")
    assert broker.catalog.endpoint_grants == {login_id}
    broker.revoke("CONNECT", on="ENDPOINT::ep", to="peer_login")
    assert broker.catalog.endpoint_grants == frozenset()
    broker.execute_ddl("GRANT CONNECT ON ENDPOINT::ep TO peer_login")
    assert broker.catalog.endpoint_grants == {login_id}
    broker.execute_ddl("REVOKE CONNECT ON ENDPOINT::ep FROM peer_login")
    assert broker.catalog.endpoint_grants == frozenset()
    with pytest.raises(CatalogError, match="login 'alice' does not exist"):
        broker.revoke("CONNECT", on="ENDPOINT::ep", to="alice")


def test_a_grant_or_revoke_is_honoured_by_the_next_transaction_of_another_broker(
    url: str, clock: ManualClock, pair: Pair, broker: Broker
) -> None:
    """SEC-4 across brokers on one database: a REVOKE (or GRANT) committed by one broker is
    honoured by every transaction another broker begins after it, whatever that broker's poll
    interval (revoke-service-broker-permissions-transact-sql.md: the permission is gone once
    the REVOKE commits)."""
    broker.create_user("alice")
    broker.grant("SEND", on=f"SERVICE::{pair.target}", to="alice")
    handle = begin(broker, pair, "alice")
    other = Broker.open(url, clock=clock, principal="alice", poll_interval=3600.0)
    try:
        with other.transaction() as tx:  # the other broker has read the catalog
            tx.send(handle, "Req", b"granted")
        broker.revoke("SEND", on=f"SERVICE::{pair.target}", to="alice")
        with other.transaction() as tx, pytest.raises(PermissionDeniedError):
            tx.send(handle, "Req", b"revoked")
        broker.grant("SEND", on=f"SERVICE::{pair.target}", to="alice")
        with other.transaction() as tx:
            tx.send(handle, "Req", b"granted again")
    finally:
        other.close()
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"granted", b"granted again"]


def test_a_receive_sees_every_catalog_change_another_broker_committed_before_it(
    url: str, clock: ManualClock, pair: Pair, broker: Broker
) -> None:
    """SEC-4 and QUE-3 across brokers, for RECEIVE, which checks the stored catalog version in
    its own storage call (on PostgreSQL one round trip with the RECEIVE) rather than reading
    it first: a REVOKE, a GRANT, a queue disabled, a queue made, a queue dropped and made again
    by another broker are all honoured by the next transaction's RECEIVE, whatever the
    receiving broker's poll interval."""
    broker.create_user("alice")
    broker.grant("RECEIVE", on=f"QUEUE::{pair.tq}", to="alice")
    for _ in range(2):  # two dialogs, two groups: one RECEIVE takes one message
        with broker.transaction() as tx:
            tx.send(begin(broker, pair), "Req", b"x")
    other = Broker.open(url, clock=clock, principal="alice", poll_interval=3600.0)
    try:
        with other.transaction() as tx:  # the other broker has read the catalog
            assert len(tx.receive(pair.tq)) == 1
        broker.revoke("RECEIVE", on=f"QUEUE::{pair.tq}", to="alice")
        with other.transaction() as tx, pytest.raises(PermissionDeniedError):
            tx.receive(pair.tq)
        broker.grant("RECEIVE", on=f"QUEUE::{pair.tq}", to="alice")
        broker.alter_queue(pair.tq, status=False)
        with other.transaction() as tx, pytest.raises(QueueDisabledError, match="STATUS = OFF"):
            tx.receive(pair.tq)
        broker.alter_queue(pair.tq, status=True)
        broker.create_queue("later_q")
        broker.grant("RECEIVE", on="QUEUE::later_q", to="alice")
        with other.transaction() as tx:
            assert tx.receive("later_q") == []  # made after the other broker read the catalog
        broker.drop_queue("later_q")
        broker.create_queue("later_q")  # the same name, another queue
        broker.grant("RECEIVE", on="QUEUE::later_q", to="alice")
        broker.create_service("later_s", queue="later_q", contracts=[pair.contract])
        with broker.transaction() as tx:
            h = tx.begin_dialog(pair.initiator, "later_s", contract=pair.contract)
            tx.send(h, "Req", b"to the new queue")
        with other.transaction() as tx:
            got = tx.receive("later_q")
        assert [m.message_body for m in got] == [b"to the new queue"]
        assert [m.queue_name for m in got] == ["later_q"]
        with other.transaction() as tx:
            assert [m.message_body for m in tx.receive(pair.tq)] == [b"x"]  # the second one
    finally:
        other.close()


def test_a_send_sees_every_catalog_change_another_broker_committed_before_it(
    url: str, clock: ManualClock, pair: Pair, broker: Broker
) -> None:
    """SEND (and send_many) check the stored catalog version with their storage call (on
    PostgreSQL in the round trip that reads the endpoint and locks its group) rather than
    reading it first: a message type and contract made by another broker are usable by the
    next transaction's first SEND, whatever the sending broker's poll interval (a REVOKE
    refusing the first SEND of the next transaction: test_a_grant_or_revoke_is_honoured_by_the_
    next_transaction_of_another_broker)."""
    other = Broker.open(url, clock=clock, poll_interval=3600.0)
    try:
        with other.transaction() as tx:  # the other broker has read the catalog
            assert tx.receive(pair.tq) == []
        broker.create_message_type("Later")
        broker.create_contract("LaterC", {"Later": "INITIATOR"})
        broker.create_service("later_s", queue=pair.tq, contracts=["LaterC"])
        with broker.transaction() as tx:
            handles = [tx.begin_dialog(pair.initiator, "later_s", contract="LaterC") for _ in "ab"]
        with other.transaction() as tx:
            tx.send(handles[0], "Later", b"one")
        broker.create_message_type("Later2")
        with other.transaction() as tx, pytest.raises(MessageValidationError, match="Later2"):
            tx.send(handles[1], "Later2", b"refused")  # not in the contract
        broker.create_message_type("Later3")
        broker.create_contract("LaterC3", {"Later3": "ANY"})
        broker.alter_service("later_s", add_contracts=["LaterC3"])
        with broker.transaction() as tx:
            h3 = tx.begin_dialog(pair.initiator, "later_s", contract="LaterC3")
        with other.transaction() as tx:
            assert tx.send_many([(handles[1], "Later", b"two"), (h3, "Later3", b"three")]) == 2
    finally:
        other.close()
    assert sorted(m.message_body for m in broker.peek(pair.tq)) == [b"one", b"three", b"two"]
