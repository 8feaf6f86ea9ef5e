"""The catalog statements of the transport between broker instances — CREATE / DROP
CERTIFICATE, CREATE / ALTER / DROP ENDPOINT … FOR SERVICE_BROKER, CREATE / DROP LOGIN … FROM
CERTIFICATE, GRANT CONNECT ON ENDPOINT and CREATE / ALTER / DROP ROUTE — each a function of an
open write transaction (``conn``) and the catalog snapshot it checks against, as in
:mod:`.changes`: they validate, raise :class:`CatalogError` naming the object at fault, and write
through the storage's named catalog statements; the caller bumps the version and commits.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from ..catalog.model import SERVICE_STRING_LIMIT, CatalogSnapshot, check_name
from ..catalog.routing import (
    LOCAL,
    TRANSPORT,
    format_tcp_address,
    normalize_broker_instance,
    parse_tcp_address,
)
from ..errors import CatalogError
from ..storage.base import StorageConnection
from ..transport.certificates import CertificateInfo
from ..transport.wire import ENCRYPTION_SETTINGS

__all__ = [
    "ALGORITHMS",
    "ENDPOINT_STATES",
    "MAX_LIFETIME",
    "EndpointSettings",
    "RouteSettings",
    "alter_endpoint",
    "alter_route",
    "check_endpoint_settings",
    "check_route_settings",
    "create_certificate",
    "create_endpoint",
    "create_login",
    "create_route",
    "drop_certificate",
    "drop_endpoint",
    "drop_login",
    "drop_route",
    "grant_connect",
]

ENDPOINT_STATES = ("STARTED", "STOPPED", "DISABLED")
ALGORITHMS = ("AES", "RC4", "AES RC4", "RC4 AES")
"""CREATE ENDPOINT's ALGORITHM { AES | RC4 | AES RC4 | RC4 AES }."""
MAX_LIFETIME = 2**31 - 1
"""LIFETIME is an int: at most 2147483647 seconds."""
BROKER_CONFIGURATION = "SQL/ServiceBroker/BrokerConfiguration"


# -- certificates and logins -------------------------------------------------------------


def create_certificate(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    info: CertificateInfo,
    private_key_file: str | None,
    owner: int | None = None,
) -> None:
    """CREATE CERTIFICATE ``name`` [AUTHORIZATION user] FROM FILE … [WITH PRIVATE KEY (FILE =
    …)], the files read and checked by the caller
    (:class:`~servicebroker.ddl.network.NetworkStatements`); ``owner`` the principal_id of
    the AUTHORIZATION user (None: dbo).

    Raises:
        CatalogError: a bad or taken name.
    """
    check_name("certificate", name)
    if name in snap.certificates:
        raise CatalogError(f"certificate {name!r} already exists")
    conn.catalog_write(
        "insert_certificate",
        (
            name,
            info.pem,
            private_key_file,
            info.subject,
            info.issuer,
            info.thumbprint,
            info.cert_serial_number,
            info.start_date,
            info.expiry_date,
            owner,
        ),
    )


def drop_certificate(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP CERTIFICATE. Raises :class:`CatalogError` for an unknown name, or while the
    endpoint authenticates with it or a login is mapped to it."""
    cert = snap.certificate(name)
    endpoint = snap.service_broker_endpoint
    if endpoint is not None and endpoint.certificate_id == cert.certificate_id:
        raise CatalogError(
            f"cannot drop certificate {name!r}: endpoint {endpoint.name!r} authenticates with it"
        )
    users = sorted(
        lg.name for lg in snap.logins.values() if lg.certificate_id == cert.certificate_id
    )
    if users:
        raise CatalogError(
            f"cannot drop certificate {name!r}: login(s) {', '.join(map(repr, users))} are "
            f"mapped to it"
        )
    conn.catalog_write("delete_certificate", (cert.certificate_id,))


def create_login(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, certificate: str
) -> int:
    """CREATE LOGIN ``name`` FROM CERTIFICATE ``certificate``; returns the ``login_id``.

    Raises:
        CatalogError: a bad or taken name, an unknown certificate.
    """
    check_name("login", name)
    if name in snap.logins:
        raise CatalogError(f"login {name!r} already exists")
    cert = snap.certificate(certificate)
    return conn.catalog_write("insert_login", (name, cert.certificate_id))


def drop_login(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP LOGIN: its CONNECT permission goes with it. Raises :class:`CatalogError` for an
    unknown name."""
    conn.catalog_write("delete_login", (snap.login(name).login_id,))


def grant_connect(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    endpoint: str,
    login: str | None,
    certificate: str | None,
) -> str:
    """GRANT CONNECT ON ENDPOINT::``endpoint`` TO ``login`` (SEC-1); with ``certificate``
    instead of ``login``, the login ``<certificate>_login`` FROM CERTIFICATE is created first
    (or reused if it exists and is mapped to that certificate). Granting twice does nothing
    more. Returns the login's name.

    Raises:
        CatalogError: an unknown endpoint, login or certificate; both or neither of ``login``
            and ``certificate``; a ``<certificate>_login`` mapped to another certificate.
    """
    if (login is None) == (certificate is None):
        raise CatalogError(
            f"GRANT CONNECT ON ENDPOINT::{endpoint}: give a login or a certificate (one of them)"
        )
    endpoint_id = _endpoint(snap, endpoint)
    if certificate is not None:
        cert = snap.certificate(certificate)
        login = f"{certificate}_login"
        existing = snap.logins.get(login)
        if existing is None:
            login_id = create_login(conn, snap, login, certificate)
        elif existing.certificate_id != cert.certificate_id:
            raise CatalogError(
                f"login {login!r} exists and is mapped to another certificate than "
                f"{certificate!r}; GRANT CONNECT to a login by name instead"
            )
        else:
            login_id = existing.login_id
    else:
        login_id = snap.login(login).login_id
    if login_id not in snap.endpoint_grants:
        conn.catalog_write("insert_endpoint_grant", (endpoint_id, login_id))
    assert login is not None
    return login


# -- the Service Broker endpoint ---------------------------------------------------------


@dataclass(frozen=True)
class EndpointSettings:
    """CREATE ENDPOINT … AS TCP (…) FOR SERVICE_BROKER (…)'s settings, checked
    (:func:`check_endpoint_settings`)."""

    state: str
    listener_ip: str
    listener_port: int
    authentication_certificate: str
    encryption: str
    algorithm: str
    message_forwarding: bool
    message_forward_size: int


def _choice(name: str, label: str, value: object, allowed: tuple[str, ...]) -> str:
    text = " ".join(value.upper().split()) if isinstance(value, str) else None
    if text not in allowed:
        raise CatalogError(
            f"endpoint {name!r}: {label} must be one of {', '.join(allowed)}, got {value!r}"
        )
    return text


def check_endpoint_settings(name: str, settings: EndpointSettings) -> EndpointSettings:
    """The settings checked and normalized (upper case; LISTENER_IP ``ALL`` or an IP address).

    Raises:
        CatalogError: a bad state, address, port (0..65535; 0 lets the system choose, for
            tests), encryption, algorithm, forwarding flag or forward size (1.. megabytes),
            naming the endpoint and the value.
    """
    s = settings
    port = s.listener_port
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise CatalogError(f"endpoint {name!r}: LISTENER_PORT must be 0..65535, got {port!r}")
    ip = s.listener_ip
    if isinstance(ip, str) and ip.strip().upper() == "ALL":
        ip = "ALL"
    else:
        try:
            ip = str(ipaddress.ip_address(ip.strip() if isinstance(ip, str) else ip))
        except ValueError:
            raise CatalogError(
                f"endpoint {name!r}: LISTENER_IP must be ALL or an IPv4 / IPv6 address, "
                f"got {s.listener_ip!r}"
            ) from None
    if not isinstance(s.message_forwarding, bool):
        raise CatalogError(
            f"endpoint {name!r}: MESSAGE_FORWARDING must be True or False, "
            f"got {s.message_forwarding!r}"
        )
    size = s.message_forward_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise CatalogError(
            f"endpoint {name!r}: MESSAGE_FORWARD_SIZE must be a whole number of megabytes "
            f"above 0, got {size!r}"
        )
    check_name("AUTHENTICATION certificate", s.authentication_certificate)
    return EndpointSettings(
        _choice(name, "STATE", s.state, ENDPOINT_STATES),
        ip,
        port,
        s.authentication_certificate,
        _choice(name, "ENCRYPTION", s.encryption, ENCRYPTION_SETTINGS),
        _choice(name, "ALGORITHM", s.algorithm, ALGORITHMS),
        s.message_forwarding,
        size,
    )


def _endpoint_values(
    snap: CatalogSnapshot, name: str, settings: EndpointSettings
) -> tuple[object, ...]:
    s = check_endpoint_settings(name, settings)
    cert = snap.certificates.get(s.authentication_certificate)
    if cert is None:
        raise CatalogError(
            f"endpoint {name!r}: AUTHENTICATION = CERTIFICATE {s.authentication_certificate!r}: "
            f"the certificate does not exist"
        )
    if cert.private_key_file is None:
        raise CatalogError(
            f"endpoint {name!r}: certificate {cert.name!r} has no private key (CREATE "
            f"CERTIFICATE … WITH PRIVATE KEY (FILE = …))"
        )
    return (
        s.state,
        s.listener_ip,
        s.listener_port,
        cert.certificate_id,
        s.encryption,
        s.algorithm,
        int(s.message_forwarding),
        s.message_forward_size,
    )


def create_endpoint(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, settings: EndpointSettings
) -> None:
    """CREATE ENDPOINT ``name`` … FOR SERVICE_BROKER: at most one per database (SQL Server
    allows one Service Broker endpoint per instance).

    Raises:
        CatalogError: a bad name, an endpoint already there, bad settings, an unknown
            certificate or one without a private key.
    """
    check_name("endpoint", name)
    if snap.service_broker_endpoint is not None:
        raise CatalogError(
            f"cannot create endpoint {name!r}: endpoint "
            f"{snap.service_broker_endpoint.name!r} exists, and there is one Service Broker "
            f"endpoint per instance"
        )
    conn.catalog_write(
        "insert_service_broker_endpoint", (name, *_endpoint_values(snap, name, settings))
    )


def _endpoint(snap: CatalogSnapshot, name: str) -> int:
    ep = snap.service_broker_endpoint
    if ep is None or ep.name != name:
        raise CatalogError(f"endpoint {name!r} does not exist")
    return ep.endpoint_id


def alter_endpoint(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    changes: Mapping[str, object],
) -> None:
    """ALTER ENDPOINT ``name``: ``changes`` maps :class:`EndpointSettings` field names to the
    new values (those not given stay), merged with the endpoint as this transaction sees it.

    Raises:
        CatalogError: an unknown endpoint, an unknown setting, or what :func:`create_endpoint`
            refuses in the endpoint as altered.
    """
    endpoint_id = _endpoint(snap, name)
    ep = snap.service_broker_endpoint
    assert ep is not None
    current = EndpointSettings(
        ep.state,
        ep.listener_ip,
        ep.listener_port,
        snap.certificates_by_id[ep.certificate_id].name,
        ep.encryption,
        ep.algorithm,
        bool(ep.message_forwarding),
        ep.message_forward_size,
    )
    unknown = sorted(set(changes) - {f.name for f in fields(EndpointSettings)})
    if unknown:
        raise CatalogError(f"ALTER ENDPOINT {name!r}: unknown setting(s) {', '.join(unknown)}")
    settings = replace(current, **changes)  # type: ignore[arg-type]
    conn.catalog_write(
        "update_service_broker_endpoint", (*_endpoint_values(snap, name, settings), endpoint_id)
    )


def drop_endpoint(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP ENDPOINT: its CONNECT grants go with it. Raises :class:`CatalogError` for an
    unknown name."""
    endpoint_id = _endpoint(snap, name)
    conn.catalog_write("delete_service_broker_endpoint", (endpoint_id,))


# -- routes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteSettings:
    """A route's clauses as given (None: not given)."""

    service_name: str | None
    broker_instance: str | uuid.UUID | None
    address: str | None
    mirror_address: str | None
    lifetime: int | None


def _address(name: str, label: str, value: object, *, special: bool) -> str:
    if special and isinstance(value, str) and value.strip().upper() in (LOCAL, TRANSPORT):
        return value.strip().upper()
    try:
        return format_tcp_address(*parse_tcp_address(value))
    except CatalogError as exc:
        also = ", 'LOCAL' or 'TRANSPORT'" if special else ""
        raise CatalogError(
            f"route {name!r}: {label} must be 'TCP://host:port'{also}: {exc}"
        ) from None


def check_route_settings(name: str, s: RouteSettings) -> RouteSettings:
    """Each clause given checked and normalized: SERVICE_NAME an nvarchar(256) name (byte for
    byte), BROKER_INSTANCE a GUID (canonical lower-case text), ADDRESS ``TCP://host:port``
    (port 4022 when none), ``LOCAL`` or ``TRANSPORT`` (any case), MIRROR_ADDRESS
    ``TCP://host:port``, LIFETIME whole seconds 1..2147483647.

    Raises:
        CatalogError: a clause of the wrong form, naming the route and the value.
    """
    lifetime = s.lifetime
    if lifetime is not None and (
        isinstance(lifetime, bool)
        or not isinstance(lifetime, int)
        or not 1 <= lifetime <= MAX_LIFETIME
    ):
        raise CatalogError(
            f"route {name!r}: LIFETIME must be whole seconds from 1 to {MAX_LIFETIME}, "
            f"got {lifetime!r}"
        )
    return RouteSettings(
        None
        if s.service_name is None
        else check_name("route SERVICE_NAME", s.service_name, limit=SERVICE_STRING_LIMIT),
        None if s.broker_instance is None else normalize_broker_instance(s.broker_instance),
        None if s.address is None else _address(name, "ADDRESS", s.address, special=True),
        None
        if s.mirror_address is None
        else _address(name, "MIRROR_ADDRESS", s.mirror_address, special=False),
        lifetime,
    )


def _check_route(name: str, s: RouteSettings, *, creating: bool) -> None:
    """The rules between clauses, on the route as it will be."""
    if s.mirror_address is not None:
        # CREATE ROUTE (docs/t-sql/statements/create-route-transact-sql.md): "When the
        # MIRROR_ADDRESS is specified, the route must specify the SERVICE_NAME clause and the
        # BROKER_INSTANCE clause. A route that specifies 'LOCAL' or 'TRANSPORT' for the
        # next_hop_address might not specify a mirror address."
        if s.service_name is None or s.broker_instance is None:
            raise CatalogError(
                f"route {name!r}: MIRROR_ADDRESS needs SERVICE_NAME and BROKER_INSTANCE"
            )
        if s.address in (LOCAL, TRANSPORT):
            raise CatalogError(
                f"route {name!r}: a route to {s.address} cannot have a MIRROR_ADDRESS"
            )
    # CREATE ROUTE: "A route that specifies 'TRANSPORT' for the next_hop_address might not
    # specify a service name or broker instance." (ALTER ROUTE: it "can specify" them.)
    if creating and s.address == TRANSPORT and (s.service_name or s.broker_instance):
        raise CatalogError(
            f"route {name!r}: a TRANSPORT route cannot name a SERVICE_NAME or BROKER_INSTANCE"
        )
    # CREATE ROUTE: "A route to this service [SQL/ServiceBroker/BrokerConfiguration] might not
    # specify a broker instance."
    if s.service_name == BROKER_CONFIGURATION and s.broker_instance is not None:
        raise CatalogError(
            f"route {name!r}: a route to {BROKER_CONFIGURATION!r} cannot name a BROKER_INSTANCE"
        )


def create_route(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    settings: RouteSettings,
    *,
    now: float,
) -> None:
    """CREATE ROUTE ``name`` WITH [SERVICE_NAME], [BROKER_INSTANCE], [LIFETIME], ADDRESS
    [, MIRROR_ADDRESS] (RTE-1): the route expires at ``now`` + LIFETIME (broker clock; never
    without one).

    Raises:
        CatalogError: a bad or taken name, no ADDRESS, a clause of the wrong form
            (:func:`check_route_settings`), a MIRROR_ADDRESS without SERVICE_NAME and
            BROKER_INSTANCE or with a LOCAL / TRANSPORT address, a TRANSPORT route naming a
            service or instance.
    """
    check_name("route", name)
    if name in snap.routes:
        raise CatalogError(f"route {name!r} already exists")
    if settings.address is None:
        raise CatalogError(f"route {name!r}: ADDRESS is required")
    s = check_route_settings(name, settings)
    _check_route(name, s, creating=True)
    expiry = None if s.lifetime is None else now + s.lifetime
    conn.catalog_write(
        "insert_route",
        (name, s.service_name, s.broker_instance, s.address, s.mirror_address, expiry),
    )


def alter_route(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    settings: RouteSettings,
    *,
    now: float,
) -> None:
    """ALTER ROUTE ``name`` WITH …: the clauses given replace the route's, the others stay
    (ALTER ROUTE (docs/t-sql/statements/alter-route-transact-sql.md): "Clauses that are not
    specified in the ALTER ROUTE command remain unchanged"); a LIFETIME given counts from
    ``now``, which also makes an expired route active again.

    Raises:
        CatalogError: an unknown route, nothing to change, or what :func:`create_route` refuses
            in the route as altered.
    """
    route = snap.route(name)
    if settings == RouteSettings(None, None, None, None, None):
        raise CatalogError(f"ALTER ROUTE {name!r}: WITH needs at least one clause")
    s = check_route_settings(name, settings)
    merged = RouteSettings(
        route.service_name if s.service_name is None else s.service_name,
        route.broker_instance if s.broker_instance is None else s.broker_instance,
        route.address if s.address is None else s.address,
        route.mirror_address if s.mirror_address is None else s.mirror_address,
        None,
    )
    _check_route(name, merged, creating=False)
    expiry = route.expiry if s.lifetime is None else now + s.lifetime
    conn.catalog_write(
        "update_route",
        (
            merged.service_name,
            merged.broker_instance,
            merged.address,
            merged.mirror_address,
            expiry,
            route.route_id,
        ),
    )


def drop_route(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP ROUTE (``AutoCreatedLocal`` too, as SQL Server allows). Raises
    :class:`CatalogError` for an unknown name."""
    conn.catalog_write("delete_route", (snap.route(name).route_id,))
