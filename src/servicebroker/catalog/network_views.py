"""The transport's catalog views — ``sys.routes``, ``sys.service_broker_endpoints`` and
``sys.certificates`` — as frozen dataclass rows with SQL Server's column names, built by pure
functions from a :class:`CatalogSnapshot` (``broker.views`` calls them on a fresh snapshot).
Times are timezone-aware UTC datetimes. ``sys.certificates``' owner (``principal_id``) is
filled in by :mod:`.principal_views`, which knows the database principals.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..clock import to_datetime
from .model import CatalogSnapshot

__all__ = [
    "CertificateViewRow",
    "NetworkViews",
    "RouteViewRow",
    "ServiceBrokerEndpointViewRow",
    "certificates",
    "routes",
    "service_broker_endpoints",
]


@dataclass(frozen=True)
class RouteViewRow:
    """A row of ``sys.routes`` (RTE-1): ``remote_service_name`` and ``broker_instance`` None
    match any; ``lifetime`` the time the route expires (None: never; an expired route stays
    here, ignored); ``address`` ``TCP://host:port``, ``LOCAL`` or ``TRANSPORT``."""

    name: str
    route_id: int
    principal_id: int | None
    remote_service_name: str | None
    broker_instance: str | None
    lifetime: datetime | None
    address: str
    mirror_address: str | None


@dataclass(frozen=True)
class ServiceBrokerEndpointViewRow:
    """A row of ``sys.service_broker_endpoints`` (with ``sys.tcp_endpoints``' ``port`` and
    ``ip_address``): ``state`` 0 STARTED, 1 STOPPED, 2 DISABLED; ``connection_auth`` 4
    CERTIFICATE; ``encryption_algorithm`` 0 none, 1 RC4, 2 AES, 3 AES RC4, 4 RC4 AES (the
    reference's codes); ``ip_address`` None for ALL; ``message_forward_size`` megabytes;
    ``certificate_name`` added."""

    name: str
    endpoint_id: int
    principal_id: int | None
    protocol: int
    protocol_desc: str
    type: int
    type_desc: str
    state: int
    state_desc: str
    is_admin_endpoint: bool
    port: int
    ip_address: str | None
    is_message_forwarding_enabled: bool
    message_forwarding_size: int
    connection_auth: int
    connection_auth_desc: str
    certificate_id: int
    certificate_name: str
    encryption_algorithm: int
    encryption_algorithm_desc: str
    encryption: str
    """DISABLED, SUPPORTED or REQUIRED (not a column of SQL Server's view: its
    ``encryption_algorithm`` says NONE for DISABLED only)."""


@dataclass(frozen=True)
class CertificateViewRow:
    """A row of ``sys.certificates``: ``pvt_key_encryption_type`` ``NA`` (no private key) or
    ``FS`` (this project's code: the key is in a file, its path ``private_key_file``, not a
    SQL Server column); ``thumbprint`` the SHA-1 of the DER as bytes (``thumbprint_hex`` as
    text); the dates as read from the certificate."""

    name: str
    certificate_id: int
    principal_id: int | None
    pvt_key_encryption_type: str
    pvt_key_encryption_type_desc: str
    is_active_for_begin_dialog: bool
    issuer_name: str
    cert_serial_number: str
    subject: str
    expiry_date: datetime | None
    start_date: datetime | None
    thumbprint: bytes
    thumbprint_hex: str
    private_key_file: str | None


_STATES = {"STARTED": 0, "STOPPED": 1, "DISABLED": 2}
_ALGORITHMS = {"RC4": 1, "AES": 2, "AES RC4": 3, "RC4 AES": 4}


def routes(cat: CatalogSnapshot) -> list[RouteViewRow]:
    """``sys.routes``, by ``route_id`` (expired routes included)."""
    return [
        RouteViewRow(
            r.name,
            r.route_id,
            None,
            r.service_name,
            r.broker_instance,
            to_datetime(r.expiry),
            r.address,
            r.mirror_address,
        )
        for r in sorted(cat.routes.values(), key=lambda r: r.route_id)
    ]


def service_broker_endpoints(cat: CatalogSnapshot) -> list[ServiceBrokerEndpointViewRow]:
    """``sys.service_broker_endpoints``: the one endpoint, or no row."""
    ep = cat.service_broker_endpoint
    if ep is None:
        return []
    cert = cat.certificates_by_id[ep.certificate_id]
    algorithm = 0 if ep.encryption == "DISABLED" else _ALGORITHMS.get(ep.algorithm, 2)
    return [
        ServiceBrokerEndpointViewRow(
            ep.name,
            ep.endpoint_id,
            None,
            2,
            "TCP",
            3,
            "SERVICE_BROKER",
            _STATES[ep.state],
            ep.state,
            False,
            ep.listener_port,
            None if ep.listener_ip == "ALL" else ep.listener_ip,
            bool(ep.message_forwarding),
            ep.message_forward_size,
            4,
            "CERTIFICATE",
            cert.certificate_id,
            cert.name,
            algorithm,
            "NONE" if algorithm == 0 else ep.algorithm,
            ep.encryption,
        )
    ]


def certificates(cat: CatalogSnapshot) -> list[CertificateViewRow]:
    """``sys.certificates``, by ``certificate_id``; ``is_active_for_begin_dialog`` is True
    (every certificate may serve dialog security, SEC-2)."""
    return [
        CertificateViewRow(
            c.name,
            c.certificate_id,
            None,
            "NA" if c.private_key_file is None else "FS",
            "NO_PRIVATE_KEY" if c.private_key_file is None else "PRIVATE_KEY_IN_FILE",
            True,
            c.issuer,
            c.cert_serial_number,
            c.subject,
            to_datetime(c.expiry_date),
            to_datetime(c.start_date),
            bytes.fromhex(c.thumbprint),
            c.thumbprint,
            c.private_key_file,
        )
        for c in sorted(cat.certificates.values(), key=lambda c: c.certificate_id)
    ]


class NetworkViews:
    """The transport's catalog views as methods (``broker.views`` has them): each reads the
    catalog fresh (:meth:`_snapshot`, which the subclass gives)."""

    def _snapshot(self) -> CatalogSnapshot:
        raise NotImplementedError

    def routes(self) -> list[RouteViewRow]:
        """``sys.routes``: the routing table (RTE-1)."""
        return routes(self._snapshot())

    def service_broker_endpoints(self) -> list[ServiceBrokerEndpointViewRow]:
        """``sys.service_broker_endpoints``: the Service Broker endpoint, if any."""
        return service_broker_endpoints(self._snapshot())

    def certificates(self) -> list[CertificateViewRow]:
        """``sys.certificates``: every certificate."""
        return certificates(self._snapshot())
