"""Dialogs between two broker instances over real TCP with mutual TLS on loopback (NET, RTE,
SEC-1): each broker its own database (two SQLite files, or two PostgreSQL schemas), one
process. Every outcome is awaited with a real-time deadline, never decided by a sleep; the
brokers run on manual clocks, so no retry fires unless a test moves the clock."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from servicebroker import Broker, ManualClock
from servicebroker.dialogs import parse_error_body
from servicebroker.transport.certificates import make_self_signed

from .conftest import START, drop_url, new_url

T = TypeVar("T")
CONTRACT = "//orders/Contract"
INITIATOR = "//shop/Orders"
TARGET = "//warehouse/Orders"


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 20.0) -> T:
    """Wait (real time, polling) until ``probe`` returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Site:
    broker: Broker
    clock: ManualClock
    port: int
    cert: tuple[Path, Path]


def catalog(broker: Broker, *, target: bool) -> None:
    broker.create_message_type("Order", validation="WELL_FORMED_XML")
    broker.create_message_type("Receipt")
    broker.create_contract(CONTRACT, {"Order": "INITIATOR", "Receipt": "TARGET"})
    if target:
        broker.create_queue("warehouse_q")
        broker.create_service(TARGET, queue="warehouse_q", contracts=[CONTRACT])
    else:
        broker.create_queue("shop_q")
        broker.create_service(INITIATOR, queue="shop_q")


def secure(site: Site, peer: Site, *, grant: bool = True, encryption: str = "REQUIRED") -> None:
    b = site.broker
    b.create_certificate(
        "me", certificate_file=str(site.cert[0]), private_key_file=str(site.cert[1])
    )
    b.create_certificate("peer", certificate_file=str(peer.cert[0]))
    b.create_endpoint(
        "sb", listener_port=site.port, authentication_certificate="me", encryption=encryption
    )
    if grant:
        b.grant_connect("sb", certificate="peer")


@pytest.fixture
def sites(backend: str, tmp_path: Path) -> Iterator[tuple[Site, Site]]:
    urls = [new_url(backend, tmp_path / "a"), new_url(backend, tmp_path / "b")]
    made = []
    for i, u in enumerate(urls):
        (tmp_path / "ab"[i]).mkdir(exist_ok=True)
        clock = ManualClock(START)
        made.append(
            Site(
                Broker.open(u, clock=clock, poll_interval=0.01),
                clock,
                free_port(),
                make_self_signed("ab"[i], tmp_path / "ab"[i]),
            )
        )
    yield made[0], made[1]
    for site in made:
        site.broker.close()
    for u in urls:
        drop_url(u)


def connect(a: Site, b: Site, **options: object) -> None:
    """Shop on ``a``, warehouse on ``b``, each granting the other, routes both ways."""
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    secure(a, b, **options)  # type: ignore[arg-type]
    secure(b, a, **options)  # type: ignore[arg-type]
    a.broker.create_route("warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{b.port}")
    b.broker.create_route("shop", service_name=INITIATOR, address=f"TCP://127.0.0.1:{a.port}")
    a.broker.start()
    b.broker.start()


def first_status(broker: Broker) -> str | None:
    """The transmission_status of the first message waiting, once it has one (NET-7)."""
    rows = broker.views.transmission_queue()
    return rows[0].transmission_status if rows and rows[0].transmission_status else None


def receive_all(broker: Broker, queue: str, n: int) -> list[tuple[str, bytes]]:
    got: list[tuple[str, bytes]] = []

    def probe() -> bool:
        with broker.transaction() as tx:
            got.extend((m.message_type_name, m.message_body) for m in tx.receive(queue, top=1000))
        return len(got) >= n

    eventually(probe, f"{n} messages on {queue}")
    return got


def test_dialog_between_instances_exactly_once_in_order_both_ways(sites: tuple[Site, Site]) -> None:
    """NET-2, NET-3: 300 messages arrive once and in send order; the reply and END
    CONVERSATION travel back; each side's endpoint closes and each transmission queue ends
    empty (rows deleted only on acknowledgement); RTE-4: the initiator is pinned to the
    instance that acknowledged."""
    a, b = sites
    connect(a, b)
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
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
        handle = tx.begin_dialog(INITIATOR, TARGET, contract="//other/Contract")
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
    secure(a, b)
    secure(b, a)
    a.broker.create_route("warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{b.port}")
    a.broker.start()
    b.broker.start()
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(handle, "Order", "<o/>")

    status = eventually(lambda: first_status(a.broker), "a transmission_status")
    assert "could not be found" in status and TARGET in status
    b.broker.create_queue("warehouse_q")
    b.broker.create_service(TARGET, queue="warehouse_q", contracts=[CONTRACT])
    a.clock.advance(5)  # NET-4: the first retry comes after 4 s
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [b"<o/>"]


def test_a_peer_whose_certificate_is_not_granted_gets_nothing(sites: tuple[Site, Site]) -> None:
    """SEC-1: the warehouse has the shop's certificate but granted it no CONNECT: the
    connection is refused, the shop's message waits with the handshake's failure as its
    transmission_status, and nothing reaches the warehouse."""
    a, b = sites
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    secure(a, b)
    secure(b, a, grant=False)
    a.broker.create_route("warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{b.port}")
    a.broker.start()
    b.broker.start()
    with a.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(handle, "Order", "<o/>")

    assert "handshake failed" in eventually(lambda: first_status(a.broker), "the refusal's status")
    assert b.broker.views.conversation_endpoints() == []
    assert b.broker.transport.statistics().connections_refused >= 1


def test_required_against_disabled_is_refused(sites: tuple[Site, Site]) -> None:
    """SEC-1: ENCRYPTION REQUIRED and DISABLED cannot talk; the status says so."""
    a, b = sites
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    secure(a, b)
    secure(b, a, encryption="DISABLED")
    a.broker.create_route("warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{b.port}")
    a.broker.start()
    b.broker.start()
    with a.broker.transaction() as tx:
        tx.send(tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT), "Order", "<o/>")

    text = eventually(lambda: first_status(a.broker), "the refusal's status")
    assert "REQUIRED" in text and "DISABLED" in text


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
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
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
