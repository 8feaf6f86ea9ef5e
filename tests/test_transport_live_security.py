"""SEC-1 on a running transport: the endpoint's trust list and ENCRYPTION are read again when
the catalog changes, not only at ``broker.start()``: a GRANT CONNECT made after the start admits
the peer, an ALTER ENDPOINT … ENCRYPTION takes effect for the next connection, and a REVOKE
CONNECT (or a dropped login) closes the connections it no longer allows. Two brokers over real
TLS on loopback, each on a manual clock (the ``sites`` fixture, SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from servicebroker import Broker
from servicebroker.testing.waiting import eventually
from servicebroker.transport.certificates import (
    granted_by,
    load_certificate_file,
    make_ca,
    make_self_signed,
    make_signed,
)

from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    connect,
    first_status,
    receive_all,
    shop_and_warehouse,
)


@pytest.fixture
def backend() -> str:
    return "sqlite"


def send_order(broker: Broker, body: bytes = b"<o>1</o>") -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(h, "Order", body)


def test_connect_granted_after_the_start_admits_the_peer_without_a_restart_sec1(
    sites: tuple[Site, Site],
) -> None:
    """SEC-1: the warehouse starts without granting the shop's certificate CONNECT, so the
    shop's message waits with the handshake's failure; GRANT CONNECT on the running warehouse
    admits the shop's next connection (after TICK-3a's 60 s suppression) and the message
    arrives — no restart."""
    a, b = sites
    shop_and_warehouse(a, b, warehouse_grants=False)
    send_order(a.broker)
    status = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert "not granted CONNECT" in status
    b.broker.grant_connect("sb", certificate="peer")
    a.clock.advance(61)  # TICK-3a: 60 s after a failure
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o>1</o>"]


def test_alter_endpoint_encryption_takes_effect_on_a_running_broker_sec1(
    sites: tuple[Site, Site],
) -> None:
    """SEC-1: the shop's REQUIRED against the warehouse's DISABLED is refused; ALTER ENDPOINT
    … ENCRYPTION = SUPPORTED on the running warehouse makes the next connection encrypted and
    the message arrives."""
    a, b = sites
    shop_and_warehouse(a, b, encryption=("REQUIRED", "DISABLED"))
    send_order(a.broker)
    status = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert "no compatible encryption" in status
    b.broker.alter_endpoint("sb", encryption="SUPPORTED")
    a.clock.advance(61)  # TICK-3a: 60 s after a failure
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o>1</o>"]
    [row] = [r for r in b.broker.views.dm_broker_connections() if r.encryption_algorithm == 3]
    assert row.encryption_algorithm_desc == "AES"


@pytest.mark.parametrize("how", ["revoke", "drop login"])
def test_revoke_connect_closes_the_live_connection_sec1(sites: tuple[Site, Site], how: str) -> None:
    """SEC-1: REVOKE CONNECT (or DROP LOGIN) on the running warehouse closes the shop's live
    connection; the shop's next connection is refused (not granted), so its next message
    waits with that status and never arrives."""
    a, b = sites
    connect(a, b)
    send_order(a.broker)
    assert len(receive_all(b.broker, "warehouse_q", 1)) == 1
    assert b.broker.transport.connections()  # the shop's connection, accepted
    if how == "revoke":
        b.broker.revoke("CONNECT", on="ENDPOINT::sb", to="peer_login")
    else:
        b.broker.drop_login("peer_login")
    eventually(lambda: not b.broker.transport.connections(), "the connection closed")
    eventually(
        lambda: not [c for c in a.broker.transport.connections() if c.open],
        "the shop's side closed",
    )
    send_order(a.broker, b"<o>2</o>")

    def retried() -> str | None:
        # TICK-3a: 15 s after a disconnection — counted from when the shop's transmitter saw
        # it, which may be after a first advance: time goes on until the retry is refused
        a.clock.advance(20)
        return first_status(a.broker)

    status = eventually(retried, "the refusal's status", every=0.2)
    assert "not granted CONNECT" in status
    with b.broker.transaction() as tx:
        assert tx.receive("warehouse_q") == []


def test_granted_by_admits_a_granted_certificate_or_one_a_granted_ca_signed(
    tmp_path: Path,
) -> None:
    """SEC-1 (what a connection's peer certificate is checked against once the grants
    change): the certificate itself granted, or its CA's; nothing else."""
    own = make_self_signed("own", tmp_path / "own")
    other = make_self_signed("other", tmp_path / "other")
    ca = make_ca("ca", tmp_path / "ca")
    signed = make_signed("leaf", tmp_path / "leaf", *ca)

    def der(path: Path) -> bytes:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        return cert.public_bytes(serialization.Encoding.DER)

    def pem(path: Path) -> str:
        return load_certificate_file(path).pem

    assert granted_by(der(own[0]), (pem(own[0]),))
    assert not granted_by(der(own[0]), (pem(other[0]),))
    assert not granted_by(der(own[0]), ())
    assert granted_by(der(signed[0]), (pem(ca[0]),))
    assert not granted_by(der(signed[0]), (pem(other[0]),))
