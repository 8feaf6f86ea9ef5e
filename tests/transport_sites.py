"""The two-broker set-up of the transport's tests over real TLS on loopback: a :class:`Site` per
broker (its broker on a manual clock, a free port, a self-signed certificate), the catalog of a
shop and a warehouse, the endpoints and grants, routes both ways, and the waits and probes the
tests share. The ``sites`` and ``transport_settings`` fixtures are in ``conftest.py``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from servicebroker import Broker, ManualClock
from servicebroker.testing.waiting import eventually
from servicebroker.transport.audit import AuditBrokerLogin

T = TypeVar("T")
CONTRACT = "//orders/Contract"
INITIATOR = "//shop/Orders"
TARGET = "//warehouse/Orders"


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
        # an unsecured dialog's initiator acts as public at the target (SEC-4)
        broker.grant("SEND", on=f"SERVICE::{TARGET}", to="public")
    else:
        broker.create_queue("shop_q")
        broker.create_service(INITIATOR, queue="shop_q")


def secure(
    site: Site,
    peer: Site,
    *,
    grant: bool = True,
    encryption: str = "REQUIRED",
    listener_ip: str = "127.0.0.1",
) -> None:
    b = site.broker
    b.create_certificate(
        "me", certificate_file=str(site.cert[0]), private_key_file=str(site.cert[1])
    )
    b.create_certificate("peer", certificate_file=str(peer.cert[0]))
    b.create_endpoint(
        "sb",
        listener_port=site.port,
        listener_ip=listener_ip,
        authentication_certificate="me",
        encryption=encryption,
    )
    if grant:
        b.grant_connect("sb", certificate="peer")


def shop_and_warehouse(a: Site, b: Site, **link_options: Any) -> None:
    """The shop's catalog on ``a``, the warehouse's on ``b``, then :func:`link`."""
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    link(a, b, **link_options)


def link(
    a: Site,
    b: Site,
    *,
    port: int | None = None,
    encryption: tuple[str, str] = ("REQUIRED", "REQUIRED"),
    warehouse_trusts: Site | None = None,
    warehouse_grants: bool = True,
    route_back: bool = False,
) -> None:
    """Endpoints on ``a`` and ``b`` with ``encryption`` (a's, b's), each granting the other's
    certificate — ``b`` granting ``warehouse_trusts``'s instead of a's, or none
    (``warehouse_grants=False``) — a route from ``a`` to the warehouse on ``b`` (at ``port``,
    default b's), a route back with ``route_back``; both brokers started."""
    secure(a, b, encryption=encryption[0])
    secure(b, warehouse_trusts or a, grant=warehouse_grants, encryption=encryption[1])
    a.broker.create_route(
        "warehouse", service_name=TARGET, address=f"TCP://127.0.0.1:{port or b.port}"
    )
    if route_back:
        b.broker.create_route("shop", service_name=INITIATOR, address=f"TCP://127.0.0.1:{a.port}")
    a.broker.start()
    b.broker.start()


def connect(a: Site, b: Site, *, encryption: str = "REQUIRED") -> None:
    """Shop on ``a``, warehouse on ``b``, each granting the other, routes both ways."""
    shop_and_warehouse(a, b, encryption=(encryption, encryption), route_back=True)


def first_status(broker: Broker) -> str | None:
    """The transmission_status of the first message waiting, once it has one (NET-7)."""
    rows = broker.views.transmission_queue()
    return rows[0].transmission_status if rows and rows[0].transmission_status else None


def audit_record(
    caplog: pytest.LogCaptureFixture, subclass: AuditBrokerLogin, *, accept: bool = True
) -> logging.LogRecord:
    """The first Audit Broker Login record of ``subclass`` logged by the accepting side (or
    the connecting side, ``accept=False``), once it is logged (SEC-1)."""
    side = "from" if accept else "to"

    def probe() -> logging.LogRecord | None:
        for record in list(caplog.records):
            if (
                getattr(record, "audit_broker_login", None) is subclass
                and f"for a connection {side} " in record.getMessage()
            ):
                return record
        return None

    return eventually(probe, f"an Audit Broker Login ({subclass.desc}) record")


def receive_all(broker: Broker, queue: str, n: int) -> list[tuple[str, bytes]]:
    got: list[tuple[str, bytes]] = []

    def probe() -> bool:
        with broker.transaction() as tx:
            got.extend((m.message_type_name, m.message_body) for m in tx.receive(queue, top=1000))
        return len(got) >= n

    eventually(probe, f"{n} messages on {queue}")
    return got


def trust(
    site: Site,
    peers: list[Site],
    *,
    forwarding: bool = False,
    forward_size: int | None = None,
    encryption: str = "REQUIRED",
) -> None:
    """An endpoint on ``site`` that trusts (holds the certificate of, and grants CONNECT to)
    each of ``peers`` — a forwarder's neighbours on both sides — with MESSAGE_FORWARDING
    ``forwarding`` and MESSAGE_FORWARD_SIZE ``forward_size`` megabytes (default 10)."""
    b = site.broker
    b.create_certificate(
        "me", certificate_file=str(site.cert[0]), private_key_file=str(site.cert[1])
    )
    sizes = {} if forward_size is None else {"message_forward_size": forward_size}
    b.create_endpoint(
        "sb",
        listener_port=site.port,
        listener_ip="127.0.0.1",
        authentication_certificate="me",
        encryption=encryption,
        message_forwarding=forwarding,
        **sizes,
    )
    for i, peer in enumerate(peers):
        b.create_certificate(f"peer{i}", certificate_file=str(peer.cert[0]))
        b.grant_connect("sb", certificate=f"peer{i}")


def address_of(site: Site) -> str:
    """``TCP://127.0.0.1:port`` of ``site``'s endpoint."""
    return f"TCP://127.0.0.1:{site.port}"


def through_forwarder(
    a: Site,
    f: Site,
    b: Site,
    *,
    forwarding: bool = True,
    forward_size: int | None = None,
    start_target: bool = True,
) -> None:
    """The shop on ``a``, the warehouse on ``b`` and a forwarder ``f`` between them (FWD-1):
    ``a`` routes the warehouse to ``f``; ``f`` routes the warehouse to ``b`` and the shop to
    ``a`` (a forwarder needs routes to BOTH services); ``b`` routes the shop to ``f``. Each
    trusts its neighbours; all three started (``b`` only with ``start_target``)."""
    catalog(a.broker, target=False)
    catalog(b.broker, target=True)
    trust(a, [f])
    trust(f, [a, b], forwarding=forwarding, forward_size=forward_size)
    trust(b, [f])
    a.broker.create_route("warehouse", service_name=TARGET, address=address_of(f))
    f.broker.create_route("warehouse", service_name=TARGET, address=address_of(b))
    f.broker.create_route("shop", service_name=INITIATOR, address=address_of(a))
    b.broker.create_route("shop", service_name=INITIATOR, address=address_of(f))
    for site in (a, f, b) if start_target else (a, f):
        site.broker.start()


def secure_dialogs(shop: Site, warehouse: Site) -> None:
    """Full dialog security from the shop to the warehouse (SEC-2, SEC-3), whatever lies
    between: the shop holds the warehouse's certificate, owned by ``warehouse_user``, and binds
    the warehouse's service to it; the warehouse holds the shop's, owned by ``shop_user``, who
    may SEND to its service. Each signs with its own ``me`` certificate."""
    shop.broker.create_certificate("warehouse_cert", certificate_file=str(warehouse.cert[0]))
    shop.broker.create_user("warehouse_user", certificate="warehouse_cert")
    shop.broker.create_remote_service_binding("to_wh", to_service=TARGET, user="warehouse_user")
    warehouse.broker.create_certificate("shop_cert", certificate_file=str(shop.cert[0]))
    warehouse.broker.create_user("shop_user", certificate="shop_cert")
    warehouse.broker.grant("SEND", on=f"SERVICE::{TARGET}", to="shop_user")
