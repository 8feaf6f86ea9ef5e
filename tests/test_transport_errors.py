"""A message answered with an Error never comes back (NET-2, SEC-4): once the target refused a
dialog's message with an Error (-229: the initiator's principal may not SEND), the initiator,
in ER with its transmission queue empty, sends nothing of that dialog again, and the target
answers any later copy with the Error again and never enqueues it — also after a GRANT SEND.
Two brokers over real TLS on loopback, each on a manual clock (SQLite)."""

from __future__ import annotations

import threading
import uuid
from functools import partial

import pytest

from servicebroker import Broker, TransportSettings
from servicebroker.dialogs import ERROR, parse_error_body
from servicebroker.testing.waiting import eventually
from servicebroker.transport.adjacent import AckReceived, Event, FragmentReceived
from servicebroker.transport.arrival import SEND_PERMISSION_REFUSED_CODE
from servicebroker.transport.peer import PeerConnection
from servicebroker.transport.peer import connect as connect_to
from servicebroker.transport.tls import security_from_catalog
from servicebroker.transport.transmitter import send_fragment
from servicebroker.transport.wire import Fragment, MessageHeader

from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    connect,
    receive_all,
    shop_and_warehouse,
)

FAST_RETRIES = TransportSettings(retry_initial=1.0, retry_max=1.0)


@pytest.fixture
def backend() -> str:
    return "sqlite"


def begin_and_send(broker: Broker, body: bytes, **begin: object) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, **begin)  # type: ignore[arg-type]
        tx.send(h, "Order", body)


def anonymous_security(a: Site, b: Site) -> None:
    """SEC-3 with ANONYMOUS = ON: the shop binds the warehouse's service; the initiator acts
    as public at the warehouse."""
    a.broker.create_user("warehouse_user", certificate="peer")
    a.broker.create_remote_service_binding(
        "to_warehouse", to_service=TARGET, user="warehouse_user", anonymous=True
    )


@pytest.mark.parametrize("transport_settings", [FAST_RETRIES])
@pytest.mark.parametrize("security", ["none", "anonymous"])
def test_a_message_answered_with_an_error_is_never_sent_again_nor_enqueued(
    sites: tuple[Site, Site], security: str
) -> None:
    """NET-2, SEC-4: public may not SEND on the warehouse's service, so the shop's order is
    answered with Error -229 and the shop's endpoint is in ER with nothing left to send. A
    GRANT SEND at the warehouse then changes nothing for that dialog: the clock moves through
    the shop's retry times (1 s) and a marker on a new dialog goes after each step — it
    travels behind any resend of the order on the same connection — yet the warehouse gets
    only the markers, and its count of refusals stays at the one Error."""
    a, b = sites
    connect(a, b)
    begin: dict[str, object] = {"encryption": False}
    if security == "anonymous":
        anonymous_security(a, b)
        begin = {}
    b.broker.revoke("SEND", on=f"SERVICE::{TARGET}", to="public")
    begin_and_send(a.broker, b"<o>refused</o>", **begin)
    [(kind, body)] = receive_all(a.broker, "shop_q", 1)
    assert kind == ERROR
    assert parse_error_body(body)[0] == SEND_PERMISSION_REFUSED_CODE
    assert a.broker.views.transmission_queue() == []
    [initiator] = a.broker.views.conversation_endpoints()
    assert initiator.state == "ER"
    # one refusal, or more when a copy was resent before the Error came back (a slow machine):
    # what matters is that the count climbs no more once the Error has been taken. A copy sent
    # before then may still be on its way (the warehouse refuses it again, GRANT or not): a
    # first marker, sent now, arrives behind it, so the count read after it is the final one
    b.broker.grant("SEND", on=f"SERVICE::{TARGET}", to="public")
    first = b"<o>first marker</o>"
    begin_and_send(a.broker, first, **begin)
    assert [body for _, body in receive_all(b.broker, "warehouse_q", 1)] == [first]
    refused = b.broker.transport.statistics().refused
    assert refused >= 1
    for i in range(3):  # 4.5 s in all: no timer tick (TICK-3b) on the shop's clock yet
        a.clock.advance(1.5)
        marker = f"<o>marker {i}</o>".encode()
        begin_and_send(a.broker, marker, **begin)
        got = receive_all(b.broker, "warehouse_q", 1)
        assert [body for _, body in got] == [marker]
        assert b.broker.transport.statistics().refused == refused


def test_the_target_answers_a_later_copy_of_a_refused_message_with_the_error(
    sites: tuple[Site, Site],
) -> None:
    """NET-2, SEC-4 at the target: a peer sends the first message of a dialog whose initiator
    may not SEND and gets Error -229; after a GRANT SEND the same message again (a resend)
    gets the Error again — no acknowledgement — and nothing is enqueued."""
    a, b = sites
    shop_and_warehouse(a, b)
    b.broker.revoke("SEND", on=f"SERVICE::{TARGET}", to="public")
    instance = uuid.uuid4()
    body = b"<o>refused</o>"
    header = MessageHeader(
        conversation_id=uuid.uuid4().bytes,
        is_initiator=True,
        sequence=0,
        message_id=uuid.uuid4().bytes,
        from_service=INITIATOR,
        to_service=TARGET,
        contract=CONTRACT,
        message_type="Order",
        validation="X",
        from_broker_instance=instance,
        to_broker_instance=None,
        priority=5,
        lifetime=None,
        message_size=len(body),
        fragment_count=1,
    )
    security = security_from_catalog(a.broker.catalog)  # the shop's certificate: granted
    address = f"TCP://127.0.0.1:{b.port}"
    conn = connect_to(address, instance, security, FAST_RETRIES, a.clock)
    events: list[Event] = []
    lock = threading.Lock()

    def keep(_: PeerConnection, got: list[Event]) -> None:
        with lock:
            events.extend(got)

    def answers() -> list[str]:
        with lock:
            out = []
            for e in events:
                if isinstance(e, FragmentReceived) and e.fragment.header.message_type == ERROR:
                    out.append("error")
                elif isinstance(e, AckReceived) and e.ack.fragment is None:
                    out.append("ack")
                elif isinstance(e, FragmentReceived):
                    for ack in e.fragment.acks:
                        out.append("ack" if ack.fragment is None else "fragment ack")
            return out

    reader = threading.Thread(target=conn.read, args=(keep,), daemon=True)
    reader.start()
    try:
        assert conn.send(partial(send_fragment, Fragment(header, 0, body)))
        assert eventually(answers, "the Error") == ["error"]
        b.broker.grant("SEND", on=f"SERVICE::{TARGET}", to="public")
        assert conn.send(partial(send_fragment, Fragment(header, 0, body)))
        assert eventually(lambda: answers()[1:], "the answer to the copy") == ["error"]
        assert b.broker.transport.statistics().refused == 2
        with b.broker.transaction() as tx:
            assert tx.receive("warehouse_q") == []
        assert b.broker.views.conversation_endpoints() == []
    finally:
        conn.close("done")
        reader.join(5)
