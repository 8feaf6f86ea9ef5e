"""The transmitter's reading of the transmission queue (NET-1, NET-5, PRI-14, RTE-2): only new
rows are read, a row committed below the ids already read is still found, a destination's
window limits what is in memory, and large bodies travel whole — a 100 MB body included."""

from __future__ import annotations

import hashlib
import tracemalloc
import uuid
from pathlib import Path

import pytest

from servicebroker import Broker, TransportSettings
from servicebroker.storage.rows import TransportMark, TransportRow
from servicebroker.testing.ports import free_port
from servicebroker.testing.waiting import eventually
from servicebroker.transport.pending import PendingRows, Read, key_of, plan_offers

from .transport_sites import (
    INITIATOR,
    TARGET,
    Site,
    catalog,
    connect,
    first_status,
    receive_all,
    secure,
)

MB = 1024 * 1024


def row(tid: int, *, size: int = 10, priority: int = 5, service: str = TARGET) -> TransportRow:
    return TransportRow(
        tid,
        uuid.UUID(int=tid).bytes,
        1,
        service,
        INITIATOR,
        1,
        float(tid),
        0,
        1,
        "NONE",
        uuid.uuid4().bytes,
        "",
        priority,
        1e12,
        None,
        size,
        b"x" * size if size <= 16 else None,
    )


def test_only_rows_above_those_read_are_read_again() -> None:
    """The first read takes every level's oldest rows; then only the rows above the highest
    id read; nothing when nothing is new."""
    pending = PendingRows()
    first = pending.next_read(TransportMark(3, 0))
    assert first == Read(None)
    pending.learn([row(1), row(2), row(3)], first)
    assert pending.last == 3
    assert pending.next_read(TransportMark(3, 3)) is None
    assert pending.next_read(TransportMark(5, 3)) == Read(3)


def test_a_row_committed_below_the_last_id_read_makes_a_full_read() -> None:
    """PostgreSQL commits ids out of order: id 2 committed after id 3 was read shows as one
    more row at or below 3 than known, and everything is read again (it is not left for
    TICK-3b)."""
    pending = PendingRows()
    pending.learn([row(1), row(3)], Read(None))
    assert pending.next_read(TransportMark(3, 3)) == Read(None)
    pending.learn([row(1), row(2), row(3)], Read(None))
    assert pending.next_read(TransportMark(3, 3)) is None


def test_acknowledged_rows_are_forgotten_and_read_all_reads_everything() -> None:
    pending = PendingRows()
    pending.learn([row(1), row(2)], Read(None))
    pending.gone(key_of(row(1)))
    assert pending.next_read(TransportMark(2, 1)) is None  # row 1 deleted: nothing new
    pending.read_all()  # TICK-3b
    assert pending.next_read(TransportMark(2, 1)) == Read(None)
    assert pending.next_read(TransportMark(None, 0)) is None  # the queue is empty


def test_plan_keeps_each_window_and_says_which_rows_have_no_route(tmp_path: Path) -> None:
    """PRI-14 order, one route choice per (service, instance), the window in bytes (an empty
    window takes one message however large), and RTE-2 step 6's status for a row no route
    takes — given once, not again while it stands."""
    with Broker.open(f"{tmp_path}/a.db") as broker:
        broker.create_route("w", service_name=TARGET, address="TCP://127.0.0.1:4999")
        cat = broker.catalog
        rows = [row(1, size=6 * MB), row(2, size=10), row(3, size=10, service="//nowhere")]
        rows.append(row(4, size=10, priority=9))
        plan = plan_offers(
            rows,
            skip=lambda k: False,
            pending_bytes={},
            window_bytes=4 * MB,
            catalog=cat,
            now=0.0,
            aging_interval=None,
        )
        assert [(r.transmission_id, a) for r, a in plan.offers] == [(1, "TCP://127.0.0.1:4999")]
        assert plan.full_windows == {"TCP://127.0.0.1:4999"}
        ((key, status),) = plan.unrouted
        assert key == key_of(rows[2])
        assert "No route matches service '//nowhere'" in status
        broker.alter_database(honor_broker_priority=True)
        plan = plan_offers(
            [r._replace(transmission_status=status) if r is rows[2] else r for r in rows],
            skip=lambda k: k == key_of(rows[0]),
            pending_bytes={"TCP://127.0.0.1:4999": MB},
            window_bytes=4 * MB,
            catalog=broker.catalog,
            now=0.0,
            aging_interval=None,
        )
        assert [r.transmission_id for r, _ in plan.offers] == [4, 2]  # level 9 first
        assert plan.unrouted == []


def test_a_queue_of_large_messages_is_not_read_into_memory(sites: tuple[Site, Site]) -> None:
    """NET-5: twelve 4 MB messages wait for an unreachable instance with a 4 MB window: the
    transmitter holds one of them, not the queue (the bodies are read one by one, as their
    messages go). Measured with tracemalloc across the broker's threads."""
    a, _ = sites
    a.broker.close()
    broker = Broker.open(
        a.broker.url,
        clock=a.clock,
        poll_interval=0.01,
        transport=TransportSettings(window_bytes=4 * MB),
    )
    try:
        catalog(broker, target=False)
        peer = Site(broker, a.clock, free_port(), a.cert)
        secure(peer, peer)
        broker.create_route("w", service_name=TARGET, address=f"TCP://127.0.0.1:{free_port()}")
        with broker.transaction() as tx:
            h = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract", encryption=False)
            for i in range(12):
                tx.send(h, "Order", b"<o>" + bytes([48 + i % 10]) * (4 * MB) + b"</o>")
        tracemalloc.start()
        try:
            broker.start()
            eventually(
                lambda: broker.transport.statistics().connection_failures, "a failed connection"
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 20 * MB, f"peak {peak / MB:.1f} MB while 48 MB wait"
        assert len(broker.views.transmission_queue()) == 12
        assert "Connection refused" in (first_status(broker) or "")
    finally:
        broker.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])  # 100 MB twice on disk: SQLite's files suffice
def test_a_100_mb_body_travels_whole(sites: tuple[Site, Site]) -> None:
    """NET-5: a 100 MB body goes in 256 KiB fragments and arrives whole, once."""
    a, b = sites
    connect(a, b)
    body = b"<o>" + b"0123456789abcdef" * (100 * MB // 16) + b"</o>"
    with a.broker.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract", encryption=False)
        tx.send(h, "Order", body)
    del body

    def received() -> str | None:
        with b.broker.transaction() as tx:
            got = tx.receive("warehouse_q")
            return hashlib.sha256(got[0].message_body).hexdigest() if got else None

    digest = eventually(received, "the 100 MB message", timeout=120)
    expected = hashlib.sha256(b"<o>" + b"0123456789abcdef" * (100 * MB // 16) + b"</o>")
    assert digest == expected.hexdigest()
    eventually(lambda: not a.broker.views.transmission_queue(), "the acknowledgement")


def test_tick_3b_takes_a_message_back_from_an_address_its_route_no_longer_gives(
    sites: tuple[Site, Site],
) -> None:
    """TICK-3b: a message on its way to a dead address stays there only until the
    transmitter reclassifies (every 2nd tick): after ALTER ROUTE gives the live address, it
    goes there and arrives once."""
    a, b = sites
    connect(a, b)
    a.broker.alter_route("warehouse", address=f"TCP://127.0.0.1:{free_port()}")
    with a.broker.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract", encryption=False)
        tx.send(h, "Order", b"<o>1</o>")
    eventually(lambda: "refused" in (first_status(a.broker) or ""), "the dead address's status")
    a.broker.alter_route("warehouse", address=f"TCP://127.0.0.1:{b.port}")
    a.clock.advance(10)  # the 2nd tick: TICK-3b
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o>1</o>"]
    eventually(lambda: not a.broker.views.transmission_queue(), "the acknowledgement")


def test_tick_3b_takes_back_a_message_whose_row_left_the_transmission_queue(
    sites: tuple[Site, Site],
) -> None:
    """TICK-3b: END CONVERSATION WITH CLEANUP deletes a waiting message from the transmission
    queue; the transmitter's copy (on its way to an instance not up yet) is taken back at the
    next reclassification, so the far instance never gets it — only the later dialog's."""
    a, b = sites
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    secure(a, b)
    secure(b, a)
    a.broker.create_route("warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{b.port}")
    b.broker.create_route("shop", service_name=INITIATOR, address=f"TCP://127.0.0.1:{a.port}")
    a.broker.start()
    with a.broker.transaction() as tx:
        first = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract", encryption=False)
        tx.send(first, "Order", b"<o>cleaned up</o>")
    eventually(lambda: "refused" in (first_status(a.broker) or ""), "the connection failure")
    passes = a.broker.transport.statistics().transmitter_passes
    with a.broker.transaction() as tx:
        tx.end_conversation(first, cleanup=True)
    assert not a.broker.views.transmission_queue()
    # the transmitter looks at the emptied queue before the tick (and forgets the row's id):
    # the message is taken back all the same
    eventually(
        lambda: a.broker.transport.statistics().transmitter_passes > passes,
        "a transmitter pass over the emptied queue",
    )
    a.clock.advance(10)  # TICK-3b
    b.broker.start()
    with a.broker.transaction() as tx:
        second = tx.begin_dialog(INITIATOR, TARGET, contract="//orders/Contract", encryption=False)
        tx.send(second, "Order", b"<o>later</o>")
    a.clock.advance(60)  # TICK-3a: 60 s after the failed attempt
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o>later</o>"]
    assert len(b.broker.views.conversation_endpoints()) == 1
