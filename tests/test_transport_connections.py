"""The connection shell (servicebroker.transport.peer) over real TLS on loopback: what a broker
says when it closes a connection on a bad frame (NET-6)."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import uuid

import pytest

from servicebroker import TransportSettings
from servicebroker.testing.waiting import eventually
from servicebroker.transport.adjacent import AckReceived, AdjacentConnection, PeerHello
from servicebroker.transport.peer import connect as connect_to
from servicebroker.transport.tls import security_from_catalog
from servicebroker.transport.wire import Ack

from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    catalog,
    connect,
    receive_all,
    secure,
)


def test_a_bad_frame_closes_the_connection_and_the_peer_is_told_why(
    sites: tuple[Site, Site],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """NET-6: bytes that are no frame close the connection; the closing side still writes
    its last frames (the acks still pending and a CLOSE with the reason), so the sender's log
    names the receiver's reason, and the messages flow again on a new connection."""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract", encryption=False)
        tx.send(h, "Order", b"<o>1</o>")
    assert receive_all(b.broker, "warehouse_q", 1)
    (outgoing,) = [c for c in a.broker.transport.connections() if not c.adjacent.is_accept]
    caplog.set_level(logging.INFO, logger="servicebroker.transport")
    with contextlib.suppress(OSError):  # the receiver may close before the write returns
        outgoing.sock.sendall(b"this is not a frame")
    eventually(
        lambda: any(
            f"connection with TCP://127.0.0.1:{b.port} closed: not a servicebroker frame"
            in r.getMessage()
            for r in caplog.records
        ),
        "the sender's log of the receiver's reason",
    )
    a.clock.advance(20)  # TICK-3a: 15 s after a disconnection
    with a.broker.transaction() as tx:
        tx.send(h, "Order", b"<o>2</o>")
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o>2</o>"]


def test_a_broker_stopped_and_started_again_listens_and_sends(
    sites: tuple[Site, Site],
) -> None:
    """Stopped and started again three times in a row: one listener thread, no failed start,
    and the messages flow again (stop() waits for the transport's threads to end, so a start
    right after runs them on the new socket)."""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract", encryption=False)
        tx.send(h, "Order", b"<o>1</o>")
    assert receive_all(b.broker, "warehouse_q", 1)
    for _ in range(3):
        b.broker.stop()
        b.broker.start()
    names = [t.name for t in b.broker.views.dm_broker_background_threads()]
    assert names.count("transport listener") == 1
    assert b.broker.transport.statistics().start_status is None
    a.clock.advance(20)  # TICK-3a: 15 s after the disconnection
    with a.broker.transaction() as tx:
        tx.send(h, "Order", b"<o>2</o>")
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o>2</o>"]


@pytest.mark.parametrize("backend", ["sqlite"])  # the handshake does not touch the storage
def test_frames_the_peer_sends_right_behind_its_login_are_taken(
    sites: tuple[Site, Site],
) -> None:
    """NET-3: an acceptor may write its LOGIN and the next frames in one go (here an ACK);
    the connecting side reads them in the same read as the LOGIN and hands them on to the
    connection's reader — none is lost to the handshake. The acceptor is played by hand:
    HELLO in the clear, TLS with the warehouse's certificate, LOGIN and ACK in one write."""
    a, b = sites
    catalog(a.broker, target=False)
    secure(a, b)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*b.cert)
    server.load_verify_locations(a.cert[0])
    server.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    ack = Ack(uuid.UUID(int=7).bytes, True, 3)

    def acceptor() -> None:
        raw, _ = listener.accept()
        adjacent = AdjacentConnection(uuid.uuid4(), is_accept=True, encryption="REQUIRED", now=0)
        while not any(isinstance(e, PeerHello) for e in adjacent.receive_data(raw.recv(1), 0)):
            pass
        raw.sendall(adjacent.start(0))
        with server.wrap_socket(raw, server_side=True) as tls:
            adjacent.queue_ack(ack)
            tls.sendall(adjacent.login(True, "", 0) + adjacent.flush_acks(0))
            tls.recv(1)  # until the connecting side closes

    thread = threading.Thread(target=acceptor, daemon=True)
    thread.start()
    security = security_from_catalog(a.broker.catalog)
    address = f"TCP://127.0.0.1:{listener.getsockname()[1]}"
    conn = connect_to(address, uuid.uuid4(), security, TransportSettings(), a.clock)
    events: list[object] = []
    reader = threading.Thread(target=conn.read, args=(lambda c, e: events.extend(e),))
    reader.start()
    eventually(lambda: AckReceived(ack) in events, "the ACK written behind the LOGIN")
    conn.close("done")
    reader.join(5)
    listener.close()


def test_the_sending_broker_stopped_and_started_again_connects_at_once(
    sites: tuple[Site, Site],
) -> None:
    """TICK-3a: a broker stopped while connected and started again connects to its
    destination at once, as on its first start (no suppression carried across the restart),
    and its next message arrives without the clock moving."""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
        tx.send(h, "Order", b"<o>1</o>")
    assert receive_all(b.broker, "warehouse_q", 1)
    a.broker.stop()
    a.broker.start()
    with a.broker.transaction() as tx:
        tx.send(h, "Order", b"<o>2</o>")
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o>2</o>"]
