"""Dialog security between two brokers over real TLS on loopback (SEC-2, SEC-3, SEC-4): bodies
sealed end to end with a per-conversation session key, the key wrapped for the target's
certificate, each end's first message signed; full and anonymous security; the target's SEND
check; each refusal with its transmission_status text.

Microsoft's pages this follows:

- BEGIN DIALOG … WITH ENCRYPTION = ON | OFF ("ENCRYPTION = OFF … encryption is used if a remote
  service binding is configured for the target service"; "messages exchanged with services in the
  same instance … are never encrypted"):
  https://learn.microsoft.com/en-us/sql/t-sql/statements/begin-dialog-conversation-transact-sql
- CREATE REMOTE SERVICE BINDING (USER owns the certificate of the remote service; ANONYMOUS):
  https://learn.microsoft.com/en-us/sql/t-sql/statements/create-remote-service-binding-transact-sql
- Service Broker dialog security, remote service bindings, anonymous security ("the initiating
  service acts as public in the target database"): docs/database-engine/service-broker/.
- sys.conversation_endpoints (principal_id, far_principal_id, outbound/inbound session key
  identifiers, security_timestamp).

Dialog security does not depend on the storage: SQLite only (the ``backend`` fixture below),
but for the first test, which runs on PostgreSQL too (the endpoints' key columns).
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from servicebroker import Broker
from servicebroker.testing.waiting import eventually
from servicebroker.transport import sealing
from servicebroker.transport.certificates import make_self_signed

from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    first_status,
    receive_all,
    shop_and_warehouse,
)
from .wire_tap import WireTap

ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
SECRET = "<order>the secret recipe</order>"


@pytest.fixture
def backend() -> str:
    return "sqlite"


def dialog_security(
    a: Site,
    b: Site,
    *,
    anonymous: bool = False,
    target_knows_shop: bool = True,
    grant_send_to: str | None = "shop_user",
) -> tuple[int, int | None]:
    """SEC-3: the shop binds the warehouse's service to a user owning the warehouse's
    certificate ("peer" on the shop); the warehouse has a user owning the shop's certificate
    ("peer" there) and grants it SEND on its service. Returns the two users' principal ids."""
    warehouse_user = a.broker.create_user("warehouse_user", certificate="peer")
    a.broker.create_remote_service_binding(
        "to_warehouse", to_service=TARGET, user="warehouse_user", anonymous=anonymous
    )
    shop_user = None
    if target_knows_shop:
        shop_user = b.broker.create_user("shop_user", certificate="peer")
    if grant_send_to is not None:
        b.broker.grant("SEND", on=f"SERVICE::{TARGET}", to=grant_send_to)
    return warehouse_user, shop_user


def send_orders(broker: Broker, n: int = 1, **begin: object) -> object:
    with broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, **begin)  # type: ignore[arg-type]
        for _ in range(n):
            tx.send(handle, "Order", SECRET)
    return handle


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_full_dialog_security_seals_bodies_both_ways_sec2_sec3(sites: tuple[Site, Site]) -> None:
    """SEC-2, SEC-3 (full security), on both storages: messages arrive in order, a reply comes
    back; both endpoints keep the same session key id and name each other's principal."""
    a, b = sites
    shop_and_warehouse(a, b, route_back=True)
    warehouse_user, shop_user = dialog_security(a, b)
    send_orders(a.broker, 5)
    got = receive_all(b.broker, "warehouse_q", 5)
    assert [body for _, body in got] == [SECRET.encode()] * 5
    [target] = b.broker.views.conversation_endpoints()
    with b.broker.transaction() as tx:
        tx.send(target.conversation_handle, "Receipt", b"shipped")
    assert receive_all(a.broker, "shop_q", 1) == [("Receipt", b"shipped")]
    [initiator] = a.broker.views.conversation_endpoints()
    [target] = b.broker.views.conversation_endpoints()
    assert initiator.outbound_session_key_identifier is not None
    assert initiator.outbound_session_key_identifier == target.inbound_session_key_identifier
    assert initiator.far_principal_id == warehouse_user
    assert target.far_principal_id == shop_user
    assert initiator.principal_id == target.principal_id == 1  # dbo on each side
    assert initiator.security_timestamp is not None


def test_anonymous_initiator_acts_as_public_at_the_target_sec3(sites: tuple[Site, Site]) -> None:
    """SEC-3: with ANONYMOUS = ON the target needs no user for the shop; the initiator acts as
    public there, so public needs SEND on the target service."""
    a, b = sites
    shop_and_warehouse(a, b, route_back=True)
    dialog_security(a, b, anonymous=True, target_knows_shop=False, grant_send_to="public")
    send_orders(a.broker, 2)
    assert len(receive_all(b.broker, "warehouse_q", 2)) == 2
    [target] = b.broker.views.conversation_endpoints()
    assert target.far_principal_id == 0  # public
    assert target.inbound_session_key_identifier is not None


def test_target_without_send_permission_answers_with_an_error_sec4(
    sites: tuple[Site, Site],
) -> None:
    """SEC-4 at the target: the initiator's principal there (the user owning its certificate)
    lacks SEND on the target service: the dialog ends with an Error naming both, sealed with
    the session key, and nothing is enqueued at the target."""
    a, b = sites
    shop_and_warehouse(a, b, route_back=True)
    b.broker.revoke("SEND", on=f"SERVICE::{TARGET}", to="public")  # transport_sites grants it
    dialog_security(a, b, grant_send_to=None)
    send_orders(a.broker, 1)
    got = receive_all(a.broker, "shop_q", 1)
    assert got[0][0] == ERROR
    text = got[0][1].decode("utf-8", "replace")
    assert "SEND permission was denied" in text and TARGET in text and "shop_user" in text
    assert b.broker.views.conversation_endpoints() == []
    with b.broker.transaction() as tx:
        assert tx.receive("warehouse_q") == []


def test_no_binding_means_the_message_waits_never_in_clear_sec2(sites: tuple[Site, Site]) -> None:
    """SEC-2, NET-7: ENCRYPTION = ON (the default) without a remote service binding: the message
    waits in the transmission queue with the status saying so; ENCRYPTION = OFF sends it
    unsecured (then public needs SEND at the target)."""
    a, b = sites
    shop_and_warehouse(a, b)
    send_orders(a.broker, 1)
    status = eventually(lambda: first_status(a.broker), "a transmission_status")
    assert "no remote service binding for the target service" in status and TARGET in status
    assert "ENCRYPTION = OFF" in status
    b.broker.grant("SEND", on=f"SERVICE::{TARGET}", to="public")
    send_orders(a.broker, 1, encryption=False)
    assert len(receive_all(b.broker, "warehouse_q", 1)) == 1
    # the unsecured one leaves a's transmission queue when b's acknowledgement arrives (late on
    # a busy machine); the secured one still waits
    eventually(lambda: len(a.broker.views.transmission_queue()) == 1, "the acknowledgement")
    (waiting,) = a.broker.views.transmission_queue()
    assert "no remote service binding" in waiting.transmission_status


def test_encryption_off_is_overridden_by_a_binding_sec2(sites: tuple[Site, Site]) -> None:
    """SEC-2: ENCRYPTION = OFF turns security off only when no remote service binding exists."""
    a, b = sites
    shop_and_warehouse(a, b)
    dialog_security(a, b)
    send_orders(a.broker, 1, encryption=False)
    receive_all(b.broker, "warehouse_q", 1)
    [target] = b.broker.views.conversation_endpoints()
    assert target.inbound_session_key_identifier is not None


def test_plaintext_never_on_the_wire_when_secured_sec2(sites: tuple[Site, Site]) -> None:
    """SEC-2: with the endpoints' ENCRYPTION DISABLED the connection carries data in clear — a
    capture of its bytes shows an unsecured dialog's body, and never a secured one's."""
    a, b = sites
    with WireTap(b.port) as tap:
        shop_and_warehouse(a, b, port=tap.port, encryption=("DISABLED", "DISABLED"))
        dialog_security(a, b)
        b.broker.grant("SEND", on=f"SERVICE::{TARGET}", to="public")
        send_orders(a.broker, 3)
        receive_all(b.broker, "warehouse_q", 3)
        assert SECRET.encode() not in tap.captured()
        a.broker.drop_remote_service_binding("to_warehouse")
        with a.broker.transaction() as tx:
            handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
            tx.send(handle, "Order", "<order>in clear</order>")
        receive_all(b.broker, "warehouse_q", 1)
        assert b"<order>in clear</order>" in tap.captured()  # the capture does see bodies


def test_missing_certificates_each_wait_with_their_status_sec2(
    sites: tuple[Site, Site], tmp_path: Path
) -> None:
    """SEC-2 refusals, each the sender's transmission_status: the principal that began the
    dialog owns no certificate; the binding's user owns none; the key is wrapped for a
    certificate the target does not hold; the target has no user for the shop's certificate."""
    a, b = sites
    shop_and_warehouse(a, b)
    alice_id = a.broker.create_user("alice")
    a.broker.grant("RECEIVE", on="QUEUE::shop_q", to="alice")
    a.broker.create_user("nobody")
    a.broker.create_remote_service_binding("to_warehouse", to_service=TARGET, user="nobody")
    send_orders(a.broker, 1)
    status = eventually(lambda: first_status(a.broker), "a transmission_status")
    assert "binding 'to_warehouse' names user 'nobody'" in status

    # the binding's user owns a certificate that is not the warehouse's
    stranger = make_self_signed("stranger", tmp_path / "stranger")
    a.broker.create_certificate("stranger", certificate_file=str(stranger[0]))
    a.broker.drop_remote_service_binding("to_warehouse")
    a.broker.create_user("stranger_user", certificate="stranger")
    a.broker.create_remote_service_binding("to_warehouse", to_service=TARGET, user="stranger_user")
    a.broker.drop_user("nobody")
    for site in (a, b):
        site.clock.advance(30)  # TICK-3b reads the waiting rows again
    with a.broker.transaction(principal="alice") as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(handle, "Order", SECRET)
    statuses = lambda: {r.transmission_status for r in a.broker.views.transmission_queue()}  # noqa: E731
    eventually(
        lambda: any(f"database principal (Id: {alice_id})" in s for s in statuses()),
        "alice's missing certificate status",
    )
    eventually(
        lambda: any(
            "which this database does not hold with its private key" in s for s in statuses()
        ),
        "the target's refusal of a key wrapped for another certificate",
    )
    assert b.broker.views.conversation_endpoints() == []


def test_target_without_a_user_for_the_initiator_refuses_full_security_sec3(
    sites: tuple[Site, Site],
) -> None:
    """SEC-3: full security needs a user at the target owning the initiator's certificate;
    without one the message waits at the sender with the status saying so."""
    a, b = sites
    shop_and_warehouse(a, b)
    dialog_security(a, b, target_knows_shop=False, grant_send_to="public")
    send_orders(a.broker, 1)
    status = eventually(lambda: first_status(a.broker), "a transmission_status")
    assert "No user in this database owns the initiator's certificate" in status
    assert b.broker.views.conversation_endpoints() == []


def test_expired_certificate_of_the_binding_is_refused_sec2(
    sites: tuple[Site, Site], tmp_path: Path
) -> None:
    """SEC-2: a certificate dialog security needs that has expired is refused with its status."""
    a, b = sites
    shop_and_warehouse(a, b)
    old = make_self_signed(
        "old",
        tmp_path / "old",
        days=1,
        not_before=datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),
    )
    a.broker.create_certificate("old", certificate_file=str(old[0]))
    a.broker.create_user("old_user", certificate="old")
    a.broker.create_remote_service_binding("to_warehouse", to_service=TARGET, user="old_user")
    send_orders(a.broker, 1)
    status = eventually(lambda: first_status(a.broker), "a transmission_status")
    assert "expired at 2020-01-02" in status and "'old'" in status


def test_dialogs_within_one_broker_are_never_encrypted_sec2(
    sites: tuple[Site, Site],
) -> None:
    """SEC-2: "Messages exchanged with services in the same instance are never encrypted":
    a binding and ENCRYPTION = ON change nothing for a local target."""
    a, _ = sites
    broker = a.broker
    broker.create_message_type("Order")
    broker.create_contract(CONTRACT, {"Order": "INITIATOR"})
    broker.create_queue("q")
    broker.create_service(INITIATOR, queue="q")
    broker.create_service(TARGET, queue="q", contracts=[CONTRACT])
    broker.create_user("nobody")
    broker.create_remote_service_binding("b", to_service=TARGET, user="nobody")
    send_orders(broker, 1)
    with broker.transaction() as tx:
        [m] = tx.receive("q")
    assert m.message_body == SECRET.encode()
    assert all(
        e.outbound_session_key_identifier is None for e in broker.views.conversation_endpoints()
    )


def test_a_session_key_altered_in_storage_delivers_nothing_sec2(sites: tuple[Site, Site]) -> None:
    """SEC-2 (bad actors, storage): the target's stored session key altered — every message
    of the dialog then fails its integrity check there: refused, counted, never delivered
    (no garbage reaches the queue); with the key put back, the sender's copy arrives."""
    a, b = sites
    shop_and_warehouse(a, b)
    dialog_security(a, b)
    handle = send_orders(a.broker, 1)
    receive_all(b.broker, "warehouse_q", 1)
    [(key,)] = b.broker.execute("SELECT session_key FROM conversation_endpoints")
    b.broker.execute("UPDATE conversation_endpoints SET session_key = ?", (bytes(32),))
    with a.broker.transaction() as tx:
        tx.send(handle, "Order", "<order>second</order>")
    status = eventually(lambda: first_status(a.broker), "the sender's transmission_status")
    assert "fails its integrity check" in status
    assert b.broker.transport.statistics().rejected >= 1
    with b.broker.transaction() as tx:
        assert tx.receive("warehouse_q") == []
    b.broker.execute("UPDATE conversation_endpoints SET session_key = ?", (key,))
    a.clock.advance(70)  # NET-4: the retry
    assert receive_all(b.broker, "warehouse_q", 1) == [("Order", b"<order>second</order>")]


def test_the_key_cache_overflowing_never_sends_a_message_unsealed_sec2(
    sites: tuple[Site, Site], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SEC-2: the transmitter keeps each dialog side's key once read and forgets them all when
    it keeps too many; a message of a secured dialog is sealed whatever the cache held (the
    full-year demo once sent one unsealed right after the cache was cleared: the target
    refused it forever). Here the cache holds one side, so it overflows at every pass."""
    monkeypatch.setattr(sealing, "_CACHE_LIMIT", 1)
    a, b = sites
    shop_and_warehouse(a, b)
    dialog_security(a, b)
    handles: list[object] = []
    for round_ in range(4):  # each pass: the dialogs known so far, and one new
        with a.broker.transaction() as tx:
            handles.append(tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT))
            for h in handles:
                tx.send(h, "Order", f"<o round='{round_}'/>")  # type: ignore[arg-type]
        receive_all(b.broker, "warehouse_q", len(handles))
    assert b.broker.transport.statistics().rejected == 0
    assert a.broker.transport.statistics().sealed >= 10


def test_an_end_sent_after_its_endpoint_closed_is_sealed_with_the_remembered_key_sec2(
    sites: tuple[Site, Site], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SEC-2, NET-3: the shop's endpoint closes (both sides ended) while its own END still waits
    in the transmission queue (the warehouse is down): the END leaves sealed with the key the
    closed dialog is remembered with, and the warehouse takes it. (The full-year demo through a
    forwarder once sent such ENDs unsealed, and the target refused them for good.) The key cache
    is emptied at every pass here, so the key must come from storage."""
    monkeypatch.setattr(sealing, "_CACHE_LIMIT", 0)
    a, b = sites
    shop_and_warehouse(a, b, route_back=True)
    dialog_security(a, b)
    handle = send_orders(a.broker, 1)
    receive_all(b.broker, "warehouse_q", 1)
    [target] = b.broker.views.conversation_endpoints()
    with b.broker.transaction() as tx:
        tx.end_conversation(target.conversation_handle)
    receive_all(a.broker, "shop_q", 1)  # the warehouse's EndDialog
    b.broker.stop()
    with a.broker.transaction() as tx:
        tx.end_conversation(handle)  # CD at once: the endpoint goes, its END waits
    assert a.broker.views.conversation_endpoints() == []
    assert len(a.broker.views.transmission_queue()) == 1
    b.broker.start()
    for site in (a, b):
        site.clock.advance(70)  # NET-4 / TICK-3a: the shop tries again
    eventually(lambda: not a.broker.views.transmission_queue(), "the END acknowledged")
    eventually(lambda: not b.broker.views.conversation_endpoints(), "the warehouse side closed")
    assert b.broker.transport.statistics().rejected == 0
