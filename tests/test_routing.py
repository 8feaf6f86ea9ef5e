"""Choosing a route, pure (transport/routing.py): RTE-1 (expired routes ignored), RTE-2 (the
steps, first match wins) and RTE-3 (the order among a step's routes)."""

from __future__ import annotations

import pytest

from servicebroker.catalog.routing import (
    RouteChoice,
    choose_route,
    format_tcp_address,
    parse_tcp_address,
    service_address,
)
from servicebroker.errors import CatalogError, TransportError
from servicebroker.storage.rows import RouteRow

SVC = "//x/Target"
I1 = "d8d4d268-00a3-4c62-8f91-634b89c1e315"
I2 = "69fcc80c-2239-4700-8437-1001ecddf933"
AUTO = RouteRow(1, "AutoCreatedLocal", None, None, "LOCAL", None, None)

_ids = iter(range(100, 10_000))


def route(
    name: str,
    address: str,
    *,
    service: str | None = None,
    instance: str | None = None,
    mirror: str | None = None,
    expiry: float | None = None,
    route_id: int | None = None,
) -> RouteRow:
    return RouteRow(
        route_id if route_id is not None else next(_ids),
        name,
        service,
        instance,
        address,
        mirror,
        expiry,
    )


def choose(
    routes: list[RouteRow],
    *,
    service: str = SVC,
    instance: str | None = None,
    local: tuple[str, ...] = (),
    now: float = 1000.0,
) -> RouteChoice | None:
    return choose_route(
        routes, service_name=service, broker_instance=instance, local_services=local, now=now
    )


def test_rte2_step1_service_and_instance_win_when_the_conversation_names_an_instance() -> None:
    """RTE-2 step 1."""
    routes = [
        AUTO,
        route("svc", "TCP://b:2", service=SVC),
        route("svc_i1", "TCP://a:1", service=SVC, instance=I1),
        route("svc_i2", "TCP://c:3", service=SVC, instance=I2),
    ]
    chosen = choose(routes, instance=I1.upper())
    assert chosen == RouteChoice("svc_i1", "TCP://a:1", I1, None)


def test_rte2_step2_service_without_instance_next() -> None:
    """RTE-2 step 2."""
    routes = [AUTO, route("svc_i2", "TCP://c:3", service=SVC, instance=I2)]
    routes.append(route("svc", "TCP://b:2", service=SVC))
    assert choose(routes, instance=I1) == RouteChoice("svc", "TCP://b:2", I1, None)
    # with no instance named, a route without one is preferred to one with (step 2 before 3)
    assert choose(routes) == RouteChoice("svc", "TCP://b:2", None, None)


def test_rte2_step3_no_instance_named_picks_one_instance_and_keeps_its_routes() -> None:
    """RTE-2 step 3, then RTE-3 among the instance's routes."""
    routes = [
        AUTO,
        route("i2_a", "TCP://c:3", service=SVC, instance=I2, route_id=10),
        route("i1_a", "TCP://a:1", service=SVC, instance=I1, route_id=11),
        route("i2_mirror", "TCP://d:4", service=SVC, instance=I2, mirror="TCP://e:5", route_id=12),
    ]
    chosen = choose(routes)
    # instance I2 (its first route comes first); among its routes the mirrored one (RTE-3)
    assert chosen == RouteChoice("i2_mirror", "TCP://d:4", I2, "TCP://e:5")


def test_rte2_step3_does_not_apply_when_an_instance_is_named() -> None:
    """RTE-2 step 3 only without an instance."""
    routes = [route("i2", "TCP://c:3", service=SVC, instance=I2)]
    assert choose(routes, instance=I1) is None


def test_rte2_step4_routes_with_neither_service_nor_instance() -> None:
    """RTE-2 step 4."""
    forwarder = route("fwd", "TCP://dispatch:4022")
    other = route("other", "TCP://z:9", service="//other")
    assert choose([AUTO, forwarder, other]) == RouteChoice("fwd", "TCP://dispatch:4022", None)


def test_rte2_step4_auto_created_local_keeps_unknown_services_here() -> None:
    """With only AutoCreatedLocal a message to an unknown service stays local (it waits in the
    transmission queue until the service exists, QUE-3)."""
    assert choose([AUTO]) == RouteChoice("AutoCreatedLocal", "LOCAL", None)
    assert choose([AUTO], local=(SVC,)) == RouteChoice("AutoCreatedLocal", "LOCAL", None)


def test_rte2_step5_an_instance_named_and_a_local_service_is_local() -> None:
    """RTE-2 step 5."""
    assert choose([], instance=I1, local=(SVC,)) == RouteChoice(None, "LOCAL", I1)


def test_rte2_step6_no_route_is_none_not_an_error() -> None:
    """RTE-2 step 6."""
    assert choose([]) is None
    assert choose([], instance=I1) is None
    assert choose([route("other", "TCP://z:9", service="//other")]) is None


def test_rte2_the_first_step_that_matches_wins_over_later_ones() -> None:
    """RTE-2: the first step that matches wins."""
    routes = [AUTO, route("fwd", "TCP://f:1"), route("svc", "TCP://s:2", service=SVC)]
    assert choose(routes).route_name == "svc"  # type: ignore[union-attr]


def test_rte2_service_names_compare_byte_for_byte() -> None:
    """RTE-1: service names byte for byte."""
    routes = [route("svc", "TCP://s:2", service=SVC.upper())]
    assert choose(routes) is None


def test_rte3_mirror_first_then_local_then_network_then_transport() -> None:
    """RTE-3: the order among a step's routes."""
    local = route("local", "LOCAL")
    network = route("net", "TCP://n:1")
    transport = route("tr", "TRANSPORT")
    mirrored = route("mir", "TCP://p:1", mirror="TCP://m:2")
    svc = "TCP://host:4000/Svc"
    all4 = [transport, network, local, mirrored]
    assert choose(all4, service=svc, local=(svc,)).route_name == "mir"  # type: ignore[union-attr]
    assert choose(all4[:3], service=svc, local=(svc,)).route_name == "local"  # type: ignore[union-attr]
    # LOCAL only if the service exists here
    assert choose(all4[:3], service=svc).route_name == "net"  # type: ignore[union-attr]
    assert choose([transport, local], service=svc) == RouteChoice("tr", "TCP://host:4000", None)


def test_rte3_transport_uses_the_address_the_service_name_begins_with() -> None:
    """RTE-3: TRANSPORT."""
    tr = route("tr", "TRANSPORT")
    assert choose([tr], service="tcp://10.0.0.1:4022/Expenses").address == "TCP://10.0.0.1:4022"  # type: ignore[union-attr]
    # a service name that holds no address: the TRANSPORT route gives nothing, no route
    assert choose([tr], service="//x/Plain") is None
    assert service_address("//x/Plain") is None


def test_rte1_an_expired_route_is_ignored() -> None:
    """RTE-1: an expired route is ignored."""
    svc = route("svc", "TCP://s:2", service=SVC, expiry=1000.0)
    assert choose([AUTO, svc], now=999.0).route_name == "svc"  # type: ignore[union-attr]
    assert choose([AUTO, svc], now=1000.0).route_name == "AutoCreatedLocal"  # type: ignore[union-attr]


def test_parse_tcp_address_forms() -> None:
    assert parse_tcp_address("TCP://www.Adventure-Works.com:1234") == (
        "www.Adventure-Works.com",
        1234,
    )
    assert parse_tcp_address("tcp://192.168.10.2:1234") == ("192.168.10.2", 1234)
    assert parse_tcp_address("TCP://[::1]:5") == ("::1", 5)
    # CREATE ROUTE example D: no port (the Service Broker default, 4022)
    assert parse_tcp_address("TCP://dispatch.Adventure-Works.com") == (
        "dispatch.Adventure-Works.com",
        4022,
    )
    assert format_tcp_address("::1", 5) == "TCP://[::1]:5"


@pytest.mark.parametrize(
    "bad", ["LOCAL", "http://h:1", "TCP://h:0", "TCP://h:70000", "TCP://:1", "TCP://h h:1", 5]
)
def test_parse_tcp_address_refuses_naming_the_address(bad: object) -> None:
    with pytest.raises(CatalogError, match="address"):
        parse_tcp_address(bad)
    with pytest.raises(TransportError):
        parse_tcp_address(bad, error=TransportError)


def test_broker_instance_compared_as_guid() -> None:
    """RTE-2: a BROKER_INSTANCE is a GUID — braces and capitals name the same instance."""
    routes = [route("i1", "TCP://a:1", service=SVC, instance=I1)]
    assert choose(routes, instance="{" + I1.upper() + "}") == RouteChoice(
        "i1", "TCP://a:1", I1, None
    )
    assert choose(routes, instance=I2) is None
