"""The connection shell (servicebroker.transport.peer) over real TLS on loopback: what a broker
says when it closes a connection on a bad frame (NET-6)."""

from __future__ import annotations

import contextlib
import logging

import pytest

from .transport_sites import (
    INITIATOR,
    TARGET,
    Site,
    connect,
    eventually,
    receive_all,
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
        h = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract")
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
        h = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract")
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
