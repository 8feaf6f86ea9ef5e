"""Choosing a route for a conversation's messages (RTE-1, RTE-2, RTE-3), pure: the routing
table, the target service, the broker instance the conversation names, the services of this
database and ``now`` in; a :class:`RouteChoice` (or None: no route, the message waits, RTE-2
step 6) out. Also :func:`parse_tcp_address` for ``TCP://host:port`` addresses.

"Service Broker Routing" (docs/database-engine/service-broker): matching stops at the first
step that matches, and among the routes of that step the most specific kind of address wins.
"""

from __future__ import annotations

import ipaddress
import re
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..errors import BrokerError, CatalogError
from ..storage.rows import RouteRow

__all__ = [
    "DEFAULT_PORT",
    "LOCAL",
    "TRANSPORT",
    "RouteChoice",
    "RouteChooser",
    "choose_route",
    "format_tcp_address",
    "normalize_broker_instance",
    "parse_tcp_address",
    "service_address",
]

LOCAL = "LOCAL"
TRANSPORT = "TRANSPORT"
DEFAULT_PORT = 4022
"""The port of an address that names none (CREATE ROUTE example D, ``'TCP://dispatch.…'``)
and CREATE ENDPOINT's default LISTENER_PORT."""

_TCP = re.compile(r"^tcp://(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+)(?::([0-9]{1,5}))?$", re.IGNORECASE)
_HOST = re.compile(
    r"^[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9])?)*$"
)


def parse_tcp_address(
    address: object, *, error: type[BrokerError] = CatalogError
) -> tuple[str, int]:
    """Parse ``TCP://{dns_name | netbios_name | ip_address}[:port]`` (CREATE ROUTE's
    next_hop_address; the scheme in any case, an IPv6 address in brackets, the port 1..65535,
    :data:`DEFAULT_PORT` when none is given).

    Returns:
        ``(host, port)``; an IPv6 host without its brackets.

    Raises:
        CatalogError (or ``error``, e.g. ``TransportError``): not a string or not that form,
            naming the address.
    """
    if not isinstance(address, str):
        raise error(f"address {address!r} is not a string of the form 'TCP://host:port'")
    m = _TCP.match(address.strip())
    if m is None:
        raise error(f"address {address!r} is not of the form 'TCP://host:port'")
    host, port_text = m.group(1), m.group(2)
    if host.startswith("["):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise error(f"address {address!r}: {host!r} is not an IPv6 address") from None
    elif not _HOST.match(host):
        raise error(f"address {address!r}: {host!r} is not a host name or IP address")
    port = DEFAULT_PORT if port_text is None else int(port_text)
    if not 1 <= port <= 65535:
        raise error(f"address {address!r}: port {port} is not from 1 to 65535")
    return host, port


def format_tcp_address(host: str, port: int) -> str:
    """``TCP://host:port`` (an IPv6 host in brackets): the one spelling of an address."""
    return f"TCP://[{host}]:{port}" if ":" in host else f"TCP://{host}:{port}"


def normalize_broker_instance(value: object, *, error: type[BrokerError] = CatalogError) -> str:
    """A broker instance identifier (a ``service_broker_guid``) as canonical lower-case GUID
    text; ``value`` a GUID string in any case, with or without braces, or a ``uuid.UUID``.

    Raises:
        CatalogError (or ``error``): not a GUID, naming the value.
    """
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value.strip()))
        except ValueError:
            pass
    raise error(f"broker instance {value!r} is not a GUID (a service_broker_guid)")


def service_address(service_name: str) -> str | None:
    """The network address a service name begins with, for a TRANSPORT route (CREATE ROUTE:
    "SQL Server can successfully process service names that begin with a network address in
    a format that is valid for a next_hop_address"): ``TCP://host:port`` of a name such as
    ``TCP://host:4022/Expenses``, or None when the name holds no address."""
    head, slash, rest = service_name.partition("://")
    if not slash:
        return None
    authority = rest.split("/", 1)[0]
    try:
        host, port = parse_tcp_address(f"{head}://{authority}")
    except CatalogError:
        return None
    return format_tcp_address(host, port)


@dataclass(frozen=True)
class RouteChoice:
    """Where a conversation's messages go.

    Attributes:
        route_name: the route chosen; None for RTE-2 step 5 (no route: the broker instance
            named is a service of this database).
        address: ``"LOCAL"`` or ``"TCP://host:port"`` (a TRANSPORT route's address is the one
            the service name begins with).
        broker_instance: the route's broker instance, else the one the conversation named,
            else None (any instance: the first to acknowledge is kept, RTE-4).
        mirror_address: the route's MIRROR_ADDRESS (``TCP://host:port``) or None.
    """

    route_name: str | None
    address: str
    broker_instance: str | None
    mirror_address: str | None = None

    @property
    def is_local(self) -> bool:
        """True when the messages stay in this database (address LOCAL)."""
        return self.address == LOCAL


def _live(route: RouteRow, now: float) -> bool:
    """RTE-1: an expired route is ignored (never removed)."""
    return route.expiry is None or route.expiry > now


def _instance(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return normalize_broker_instance(value)
    except CatalogError:
        return value


def _pick(
    matches: list[RouteRow],
    service_name: str,
    broker_instance: str | None,
    local_services: Collection[str],
) -> RouteChoice | None:
    """RTE-3 among the routes of one step (each list in ``route_id`` order, the first of a kind
    wins): a route with a mirror address; LOCAL when the service exists here; a network address;
    TRANSPORT when the service name begins with an address; last, LOCAL although the service
    does not exist here (its messages wait here until it does, QUE-3). None when the step's
    routes give no address (only TRANSPORT routes and a service name that is no address)."""

    def choice(route: RouteRow, address: str) -> RouteChoice:
        return RouteChoice(
            route.name,
            address,
            _instance(route.broker_instance) or broker_instance,
            route.mirror_address,
        )

    local = [r for r in matches if r.address.upper() == LOCAL]
    transport = [r for r in matches if r.address.upper() == TRANSPORT]
    network = [r for r in matches if r not in local and r not in transport]
    mirrored = [r for r in network if r.mirror_address]
    if mirrored:
        return choice(mirrored[0], _canonical(mirrored[0].address))
    if local and service_name in local_services:
        return choice(local[0], LOCAL)
    if network:
        return choice(network[0], _canonical(network[0].address))
    address = service_address(service_name)
    if transport and address is not None:
        return choice(transport[0], address)
    if local:
        return choice(local[0], LOCAL)
    return None


def _canonical(address: str) -> str:
    return format_tcp_address(*parse_tcp_address(address))


def choose_route(
    routes: Iterable[RouteRow],
    *,
    service_name: str,
    broker_instance: str | None,
    local_services: Collection[str],
    now: float,
) -> RouteChoice | None:
    """Choose the route of a conversation to ``service_name`` (RTE-2, RTE-3, RTE-1).

    The steps, the first that gives a route wins (RTE-2):

    1. with ``broker_instance`` named: routes naming the service and that instance;
    2. routes naming the service and no instance;
    3. with no instance named: routes naming the service and an instance — the instance of the
       first such route (by ``route_id``) is picked and only its routes kept;
    4. routes naming neither service nor instance (``AutoCreatedLocal``, TRANSPORT, a
       forwarder);
    5. with an instance named and a service of that name here: LOCAL, no route;
    6. otherwise None: the message waits in the transmission queue and matching is tried
       again later; a missing route is not an error.

    Among a step's routes, :func:`_pick`'s order (RTE-3). Service names are compared byte for
    byte (CREATE ROUTE: "the comparison is case sensitive"); broker instances as GUIDs.

    Args:
        routes: the routing table (``CatalogSnapshot.routes.values()``), expired ones included.
        service_name: the conversation's TO SERVICE.
        broker_instance: the broker instance it names (a GUID string), or None.
        local_services: the names of this database's services.
        now: broker-clock seconds; a route whose ``expiry`` is not after it is ignored.

    Returns:
        The :class:`RouteChoice`, or None (RTE-2 step 6).
    """
    live = sorted((r for r in routes if _live(r, now)), key=lambda r: r.route_id)
    wanted = _instance(broker_instance)
    named = [r for r in live if r.service_name == service_name]
    steps: list[list[RouteRow]] = []
    if wanted is not None:
        steps.append([r for r in named if _instance(r.broker_instance) == wanted])  # step 1
    steps.append([r for r in named if r.broker_instance is None])  # step 2
    if wanted is None:  # step 3: pick one instance, keep its routes
        with_instance = [r for r in named if r.broker_instance is not None]
        if with_instance:
            first = _instance(with_instance[0].broker_instance)
            steps.append([r for r in with_instance if _instance(r.broker_instance) == first])
    steps.append([r for r in live if r.service_name is None and r.broker_instance is None])
    for matches in steps:
        if matches:
            chosen = _pick(matches, service_name, wanted, local_services)
            if chosen is not None:
                return chosen
    if wanted is not None and service_name in local_services:  # step 5
        return RouteChoice(None, LOCAL, wanted)
    return None


class RouteChooser:
    """:func:`choose_route` over one routing table at one time, each (service, broker
    instance) chosen once: what one transmitter pass, one reclassification (TICK-3b) or one
    commit asks again and again.

    Args:
        routes: the routing table (``CatalogSnapshot.routes.values()``).
        local_services: the names of this database's services.
        now: broker-clock seconds (route expiry, RTE-1).
    """

    def __init__(self, routes: Iterable[RouteRow], *, local_services: Collection[str], now: float):
        self._routes = list(routes)
        self._local_services = local_services
        self._now = now
        self._chosen: dict[tuple[str, str | None], RouteChoice | None] = {}

    def choose(self, service_name: str, broker_instance: str | None = None) -> RouteChoice | None:
        """The route of a conversation to ``service_name`` (at ``broker_instance``, a GUID
        string, or any), as :func:`choose_route` gives it (RTE-1..3); None: no route."""
        target = (service_name, broker_instance)
        if target not in self._chosen:
            self._chosen[target] = choose_route(
                self._routes,
                service_name=service_name,
                broker_instance=broker_instance,
                local_services=self._local_services,
                now=self._now,
            )
        return self._chosen[target]
