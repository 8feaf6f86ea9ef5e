"""Transport security over real TLS on loopback (SEC-1): the full ENCRYPTION matrix of CREATE
ENDPOINT, and the refusals — each checked where a user sees it: the sender's
``transmission_status`` and the acceptor's Audit Broker Login log record.

Microsoft's pages this follows:

- CREATE ENDPOINT, ENCRYPTION = DISABLED | SUPPORTED | REQUIRED:
  https://learn.microsoft.com/en-us/sql/t-sql/statements/create-endpoint-transact-sql
- sys.dm_broker_connections, encryption_algorithm / encryption_algorithm_desc:
  https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-broker-connections-transact-sql
- Audit Broker Login event class (its subclasses):
  https://learn.microsoft.com/en-us/sql/relational-databases/event-classes/audit-broker-login-event-class

Transport security does not depend on the storage, so these tests run on SQLite only (the
``backend`` fixture below); tests/test_transport.py runs its security tests on both backends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from servicebroker.testing.ports import free_port
from servicebroker.testing.waiting import eventually
from servicebroker.transport.adjacent import (
    AdjacentConnection,
    ConnectionState,
    PeerHello,
    encryption_algorithm,
    negotiate_encryption,
)
from servicebroker.transport.audit import AuditBrokerLogin, LoginFailure
from servicebroker.transport.certificates import make_ca, make_self_signed, make_signed
from servicebroker.transport.framing import Frame, FrameDecoder, FrameType, encode_frame
from servicebroker.transport.tls import check_cipher
from servicebroker.transport.wire import decode_hello, encode_hello

from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    audit_record,
    catalog,
    first_status,
    receive_all,
    secure,
    shop_and_warehouse,
)

PEER_LOG = "servicebroker.transport.peer"
SETTINGS = ("DISABLED", "SUPPORTED", "REQUIRED")
MATRIX = {  # (shop's ENCRYPTION, warehouse's): encrypted, not encrypted, or refused (None)
    ("DISABLED", "DISABLED"): False,
    ("DISABLED", "SUPPORTED"): False,
    ("DISABLED", "REQUIRED"): None,
    ("SUPPORTED", "DISABLED"): False,
    ("SUPPORTED", "SUPPORTED"): True,
    ("SUPPORTED", "REQUIRED"): True,
    ("REQUIRED", "DISABLED"): None,
    ("REQUIRED", "SUPPORTED"): True,
    ("REQUIRED", "REQUIRED"): True,
}


@pytest.fixture
def backend() -> str:
    """The storage of both sites: SQLite (transport security does not touch the storage)."""
    return "sqlite"


def send_order(site: Site, body: str = "<o/>") -> uuid.UUID:
    with site.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(handle, "Order", body)
    return handle


@pytest.mark.parametrize("enc_b", SETTINGS)
@pytest.mark.parametrize("enc_a", SETTINGS)
def test_sec1_encryption_matrix_over_tls(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture, enc_a: str, enc_b: str
) -> None:
    """SEC-1, the ENCRYPTION matrix of CREATE ENDPOINT over real TLS: DISABLED "data sent over
    a connection is not encrypted"; SUPPORTED "the data is encrypted only if the opposite
    endpoint specifies either SUPPORTED or REQUIRED"; REQUIRED "to connect to this endpoint,
    another endpoint must have ENCRYPTION set to either SUPPORTED or REQUIRED". Each pair that
    may talk carries one message each way (shop → warehouse and the reply back, each on its
    own connection), with dm_broker_connections' encryption_algorithm_desc AES or NONE and a
    Login Success audit record on each acceptor; REQUIRED against DISABLED leaves the message
    waiting with the refusal as its transmission_status and a Negotiate Failure logged."""
    caplog.set_level(logging.INFO, logger=PEER_LOG)
    a, b = sites
    shop_and_warehouse(a, b, encryption=(enc_a, enc_b), route_back=True)
    send_order(a)
    expected = MATRIX[enc_a, enc_b]
    assert negotiate_encryption(enc_a, enc_b) is expected  # the pure decision agrees
    if expected is None:
        status = eventually(lambda: first_status(a.broker), "the refusal's status")
        assert status.startswith("Connection handshake failed. There is no compatible encryption")
        assert f"this endpoint's ENCRYPTION is {enc_a} and the peer's is {enc_b}" in status
        assert status.endswith(f"(TCP://127.0.0.1:{b.port})")
        record = audit_record(caplog, AuditBrokerLogin.NEGOTIATE_FAILURE)
        assert f"ENCRYPTION is {enc_b} and the peer's is {enc_a}" in record.getMessage()
        assert audit_record(caplog, AuditBrokerLogin.NEGOTIATE_FAILURE, accept=False)
        assert b.broker.views.conversation_endpoints() == []
        return

    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o/>"]
    [target] = b.broker.views.conversation_endpoints()
    with b.broker.transaction() as tx:
        tx.send(target.conversation_handle, "Receipt", b"back")
    assert [body for _, body in receive_all(a.broker, "shop_q", 1)] == [b"back"]
    want = (3, "AES") if expected else (1, "NONE")
    for site in (a, b):
        rows = site.broker.views.dm_broker_connections()
        assert {r.is_accept for r in rows} == {True, False}  # both directions
        for row in rows:
            assert row.state_desc == "LOGGED_IN"
            assert (row.encryption_algorithm, row.encryption_algorithm_desc) == want
            assert row.authentication_method == "CERTIFICATE" and row.peer_certificate
    record = audit_record(caplog, AuditBrokerLogin.LOGIN_SUCCESS)
    assert record.levelno == logging.INFO
    assert ("encrypted (AES)" if expected else "not encrypted") in record.getMessage()
    assert a.broker.transport.statistics().connections_refused == 0


class Tap:
    """A TCP relay on loopback that records what passes from the connecting side to the
    listening side (what a network observer would see); with ``tamper``, it flips one bit of
    the first occurrence of those bytes on the wire (once)."""

    def __init__(
        self, target_port: int, *, tamper: bytes | None = None, hello_encryption: str = ""
    ) -> None:
        self.port = free_port()
        self.target_port = target_port
        self.tamper = tamper
        self.tampered = False
        self.hello_encryption = hello_encryption
        self.seen = bytearray()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            for src, dst, record in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, record), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        try:
            if self.hello_encryption:
                dst.sendall(self._rewrite_hello(src))
            while data := src.recv(65536):
                if record:
                    self.seen += data
                    at = data.find(self.tamper) if self.tamper and not self.tampered else -1
                    if at >= 0:
                        self.tampered = True
                        data = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _rewrite_hello(self, src: socket.socket) -> bytes:
        """Read the HELLO frame coming from ``src`` (a byte at a time, so nothing after it)
        and return it with its ENCRYPTION replaced by ``hello_encryption``."""
        decoder = FrameDecoder()
        while True:
            data = src.recv(1)
            if not data:
                return b""
            for frame in decoder.feed(data):
                hello = decode_hello(frame.payload)
                changed = dataclasses.replace(hello, encryption=self.hello_encryption)
                return encode_frame(Frame(FrameType.HELLO, encode_hello(changed)))

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def tap_factory() -> Iterator[list[Tap]]:
    taps: list[Tap] = []
    yield taps
    for tap in taps:
        tap.close()


@pytest.mark.parametrize("encryption", ["DISABLED", "REQUIRED"])
def test_sec1_disabled_carries_data_in_the_clear_and_required_does_not(
    sites: tuple[Site, Site], tap_factory: list[Tap], encryption: str
) -> None:
    """SEC-1: with ENCRYPTION DISABLED on both endpoints "data sent over a connection is not
    encrypted" — an observer between them reads the message body — while the connection was
    still authenticated by both certificates; with REQUIRED the body never shows on the wire."""
    a, b = sites
    tap = Tap(b.port)
    tap_factory.append(tap)
    shop_and_warehouse(a, b, port=tap.port, encryption=(encryption, encryption))
    body = "<order secret='plain-text-marker-4711'/>"
    send_order(a, body)
    assert [m for _, m in receive_all(b.broker, "warehouse_q", 1)] == [body.encode()]
    [row] = [r for r in b.broker.views.dm_broker_connections() if r.is_accept]
    assert row.peer_certificate  # authenticated either way
    assert (b"plain-text-marker-4711" in bytes(tap.seen)) == (encryption == "DISABLED")


def test_sec1_disabled_connection_is_integrity_protected(
    sites: tuple[Site, Site], tap_factory: list[Tap], caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-1: an unencrypted (DISABLED) connection still protects its data's integrity: one
    bit of the message body changed on the wire is detected (the TLS record's HMAC fails), the
    connection drops, and the altered message is never delivered; the message stays in the
    sender's transmission queue and arrives intact on a new connection at its retry (NET-4)."""
    caplog.set_level(logging.INFO, logger="servicebroker.transport")
    a, b = sites
    marker = b"integrity-marker-0815"
    tap = Tap(b.port, tamper=marker)
    tap_factory.append(tap)
    shop_and_warehouse(a, b, port=tap.port, encryption=("DISABLED", "DISABLED"))
    body = b"<order n='" + marker + b"'/>"
    send_order(a, body.decode())
    eventually(lambda: tap.tampered, "the relay's changed bit")
    eventually(
        lambda: any("bad record mac" in r.getMessage() for r in list(caplog.records)),
        "the warehouse dropping the connection on the record's failed HMAC",
    )
    assert b.broker.views.conversation_endpoints() == []  # nothing delivered

    got: list[bytes] = []

    def retried() -> bool:
        a.clock.advance(1)  # NET-4: the message goes again on a new connection
        with b.broker.transaction() as tx:
            got.extend(m.message_body for m in tx.receive("warehouse_q"))
        return bool(got)

    eventually(retried, "the message's retry")
    assert got == [body]


def test_sec1_a_hello_altered_to_downgrade_supported_fails_the_login(
    sites: tuple[Site, Site], tap_factory: list[Tap], caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-1: the HELLOs travel in the clear; an attacker between two SUPPORTED endpoints who
    rewrites both to say DISABLED (so that the matrix says "not encrypted") does not get the
    data in the clear: each side offers the cipher suites of its own setting, the protected
    TLS negotiation still picks AES, and the login fails as a Negotiate Failure naming the
    cipher — the message waits, and its body never crosses the wire."""
    caplog.set_level(logging.INFO, logger=PEER_LOG)
    a, b = sites
    tap = Tap(b.port, hello_encryption="DISABLED")
    tap_factory.append(tap)
    shop_and_warehouse(a, b, port=tap.port, encryption=("SUPPORTED", "SUPPORTED"))
    send_order(a, "<order secret='downgrade-marker-31337'/>")

    status = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert status.startswith("Connection handshake failed. The TLS handshake chose the cipher")
    assert "AES" in status and "but the connection is not to be encrypted" in status
    record = audit_record(caplog, AuditBrokerLogin.NEGOTIATE_FAILURE)
    assert "not to be encrypted" in record.getMessage()
    assert b"downgrade-marker-31337" not in bytes(tap.seen)
    assert b.broker.views.conversation_endpoints() == []


def raw_hello_then_tls_without_certificate(port: int) -> tuple[bytes, bytes, str]:
    """Connect to ``port`` as a peer would, send a HELLO, read the acceptor's HELLO, then run
    a TLS handshake presenting no certificate and read what comes. Returns the bytes received
    before TLS, the application bytes received over TLS, and how the TLS part ended."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    me = AdjacentConnection(uuid.uuid4(), is_accept=False, encryption="REQUIRED", now=0.0)
    sock.sendall(me.start(0.0))
    before = bytearray()
    while me.state is not ConnectionState.CONNECTED:
        data = sock.recv(1)
        assert data, "the acceptor closed before its HELLO"
        before += data
        events = me.receive_data(data, 0.0)
        assert all(isinstance(e, PeerHello) for e in events), events
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    after = bytearray()
    try:
        tls = ctx.wrap_socket(sock)
        while data := tls.recv(65536):
            after += data
        ending = "closed"
    except OSError as exc:
        ending = f"{type(exc).__name__}: {exc}"
    finally:
        sock.close()
    return bytes(before), bytes(after), ending


def test_sec1_a_peer_without_a_client_certificate_gets_nothing(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-1: a client that sends its HELLO, then runs TLS with no certificate, receives the
    acceptor's HELLO (sent before authentication) and nothing more — no LOGIN, no frame —
    and the acceptor logs an Audit Broker Login Authentication Failure saying no certificate
    was presented."""
    caplog.set_level(logging.INFO, logger=PEER_LOG)
    a, b = sites
    catalog(b.broker, target=True)
    secure(b, a)
    b.broker.start()
    eventually(lambda: b.broker.transport.statistics().running, "the warehouse's transport")
    before, after, ending = raw_hello_then_tls_without_certificate(b.port)
    assert after == b"", f"got {after!r} over TLS (then {ending})"
    # the bytes before TLS are exactly one HELLO frame
    check = AdjacentConnection(uuid.uuid4(), is_accept=False, encryption="REQUIRED", now=0.0)
    check.start(0.0)
    assert [type(e) for e in check.receive_data(before, 0.0)] == [PeerHello]
    record = audit_record(caplog, AuditBrokerLogin.AUTHENTICATION_FAILURE)
    assert "Connection handshake failed. The peer presented no certificate" in record.getMessage()
    assert b.broker.transport.statistics().connections_refused >= 1
    assert b.broker.views.dm_broker_connections() == []


def test_sec1_a_certificate_from_another_ca_is_refused(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """SEC-1: the warehouse granted CONNECT to the certificate of CA1 (admitting what CA1
    signed); the shop presents a certificate signed by CA2: the handshake fails, the shop's
    message waits with the refusal as its transmission_status, and the warehouse logs an
    Audit Broker Login Authorization Failure naming the missing issuer."""
    caplog.set_level(logging.INFO, logger=PEER_LOG)
    a, b = sites
    ca1 = make_ca("ca1", tmp_path / "ca1")
    ca2 = make_ca("ca2", tmp_path / "ca2")
    a.cert = make_signed("shop", tmp_path / "shop", ca2[0], ca2[1])
    shop_and_warehouse(
        a, b, warehouse_trusts=Site(a.broker, a.clock, a.port, ca1)
    )  # the warehouse grants CA1's certificate
    send_order(a)

    status = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert status == (
        "Connection handshake failed. The certificate used by this endpoint was refused by the "
        "peer: it is not granted CONNECT on the peer's endpoint. (TLS alert: unknown ca) "
        f"(TCP://127.0.0.1:{b.port})"
    )
    record = audit_record(caplog, AuditBrokerLogin.AUTHORIZATION_FAILURE)
    assert (
        "The certificate used by the peer is invalid due to the following reason: Certificate "
        "not granted CONNECT on this endpoint (unable to get local issuer certificate)."
        in record.getMessage()
    )
    assert b.broker.views.conversation_endpoints() == []


def test_sec1_a_certificate_signed_by_a_granted_ca_is_accepted(
    sites: tuple[Site, Site], tmp_path: Path
) -> None:
    """SEC-1, the counterpart: a certificate signed by the CA whose certificate the warehouse
    granted is admitted (the granted CA is a trust anchor)."""
    a, b = sites
    ca1 = make_ca("ca1", tmp_path / "ca1")
    a.cert = make_signed("shop", tmp_path / "shop", ca1[0], ca1[1])
    shop_and_warehouse(
        a, b, warehouse_trusts=Site(a.broker, a.clock, a.port, ca1)
    )  # the warehouse grants CA1's certificate
    send_order(a)
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o/>"]


def expired_pair(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate valid for one day, ten days ago (expired 9 days ago)."""
    ten_days_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=10)
    return make_self_signed(name, directory, days=1, not_before=ten_days_ago)


def test_sec1_an_expired_certificate_is_refused(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """SEC-1: the shop's certificate expired (the warehouse granted it): the warehouse refuses
    it — Audit Broker Login Authentication Failure, "The certificate used by the peer is
    invalid due to the following reason: Certificate expired." — and the shop's message waits
    with the refusal as its transmission_status."""
    caplog.set_level(logging.INFO, logger=PEER_LOG)
    a, b = sites
    a.cert = expired_pair(tmp_path / "old", "shop")
    shop_and_warehouse(a, b)
    send_order(a)

    status = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert status == (
        "Connection handshake failed. The certificate used by this endpoint was refused by the "
        "peer: Certificate expired. (TLS alert: certificate expired) "
        f"(TCP://127.0.0.1:{b.port})"
    )
    record = audit_record(caplog, AuditBrokerLogin.AUTHENTICATION_FAILURE)
    assert (
        "Connection handshake failed. The certificate used by the peer is invalid due to the "
        "following reason: Certificate expired." in record.getMessage()
    )
    assert b.broker.views.conversation_endpoints() == []


def test_sec1_the_sender_refuses_a_receiver_whose_certificate_expired(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """SEC-1, the other way: the warehouse's own certificate expired (the shop granted it):
    the shop refuses it in the handshake and its message's transmission_status says "The
    certificate used by the peer is invalid due to the following reason: Certificate
    expired."; the shop logs the Authentication Failure for its connection to the warehouse."""
    caplog.set_level(logging.INFO, logger=PEER_LOG)
    a, b = sites
    b.cert = expired_pair(tmp_path / "old", "warehouse")
    shop_and_warehouse(a, b)
    send_order(a)

    status = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert status == (
        "Connection handshake failed. The certificate used by the peer is invalid due to the "
        f"following reason: Certificate expired. (TCP://127.0.0.1:{b.port})"
    )
    record = audit_record(caplog, AuditBrokerLogin.AUTHENTICATION_FAILURE, accept=False)
    assert status in record.getMessage()
    record = audit_record(caplog, AuditBrokerLogin.AUTHENTICATION_FAILURE)
    assert (
        "The certificate used by this endpoint was refused by the peer: Certificate expired. "
        "(TLS alert: certificate expired)" in record.getMessage()
    )
    assert b.broker.views.conversation_endpoints() == []


@pytest.mark.parametrize(
    ("encrypted", "columns"), [(True, (3, "AES")), (False, (1, "NONE")), (None, (0, "NONE"))]
)
def test_sec1_dm_broker_connections_encryption_columns(
    encrypted: bool | None, columns: tuple[int, str]
) -> None:
    """SEC-1, sys.dm_broker_connections: an encrypted connection shows encryption_algorithm 3
    "AES"; one the matrix leaves unencrypted 1 ("SIGNING ONLY": every record is still
    authenticated) with the desc of DISABLED, "NONE"; before the HELLOs 0 "NONE"."""
    assert encryption_algorithm(encrypted) == columns


def test_sec1_audit_broker_login_subclasses_are_microsofts() -> None:
    """SEC-1: the Audit Broker Login subclasses, ids and names as the event class page lists
    them."""
    assert [(s.value, s.desc) for s in AuditBrokerLogin] == [
        (1, "Login Success"),
        (2, "Login Protocol Error"),
        (3, "Message Format Error"),
        (4, "Negotiate Failure"),
        (5, "Authentication Failure"),
        (6, "Authorization Failure"),
    ]


def test_sec1_a_peer_speaking_another_protocol_is_a_message_format_error(
    sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-1: bytes that are not this protocol's HELLO (an HTTP request on the port) get
    nothing back, and the acceptor logs an Audit Broker Login Message Format Error."""
    caplog.set_level(logging.INFO, logger=PEER_LOG)
    a, b = sites
    secure(b, a)
    b.broker.start()
    eventually(lambda: b.broker.transport.statistics().running, "the warehouse's transport")
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        got = bytearray()
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                got += data
    assert got == b""
    record = audit_record(caplog, AuditBrokerLogin.MESSAGE_FORMAT_ERROR)
    assert record.getMessage().startswith(
        "Audit Broker Login (Message Format Error): login failed for a connection from TCP://"
    )


def test_sec1_a_cipher_the_matrix_did_not_choose_fails_the_login(tmp_path: Path) -> None:
    """SEC-1: the shell checks that the TLS handshake chose what the ENCRYPTION matrix said —
    an AES connection where the matrix said "not encrypted" (or the reverse) fails the login as
    a Negotiate Failure naming the cipher."""
    cert, key = make_self_signed("x", tmp_path)
    contexts = []
    for purpose in (ssl.PROTOCOL_TLS_SERVER, ssl.PROTOCOL_TLS_CLIENT):
        ctx = ssl.SSLContext(purpose)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(cert, key)
        contexts.append(ctx)
    left, right = socket.socketpair()
    server = threading.Thread(
        target=lambda: contexts[0].wrap_socket(right, server_side=True).close(), daemon=True
    )
    server.start()
    with contexts[1].wrap_socket(left) as tls:
        check_cipher(tls, encrypt=True, address="TCP://peer:1")  # AES where AES was said
        with pytest.raises(LoginFailure) as caught:
            check_cipher(tls, encrypt=False, address="TCP://peer:1")
    server.join(10)
    assert caught.value.subclass is AuditBrokerLogin.NEGOTIATE_FAILURE
    assert str(caught.value).startswith("Connection handshake failed. The TLS handshake chose")
    assert "not to be encrypted (TCP://peer:1)" in str(caught.value)
