"""The security catalog views — ``sys.database_principals``, ``sys.database_permissions`` and
``sys.remote_service_bindings`` — as frozen dataclass rows with SQL Server's column names, built
by pure functions from a :class:`CatalogSnapshot` (``broker.views`` calls them on a fresh
snapshot); where SQL Server has only an id, a readable ``*_name`` column follows. Also
``sys.certificates`` with its owner's ``principal_id`` (dbo, 1, unless a user owns it).

Pages: sys-database-principals-transact-sql.md, sys-database-permissions-transact-sql.md,
sys-remote-service-bindings-transact-sql.md (SEC-3, SEC-4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .model import DBO, CatalogSnapshot
from .network_views import CertificateViewRow, certificates

__all__ = [
    "DatabasePermissionRow",
    "DatabasePrincipalRow",
    "PrincipalViews",
    "RemoteServiceBindingViewRow",
    "database_permissions",
    "database_principals",
    "owned_certificates",
    "remote_service_bindings",
]

_TYPE_DESC = {"R": "DATABASE_ROLE", "S": "SQL_USER"}
_PERMISSION_TYPE = {"SEND": "SN", "RECEIVE": "RC"}
_CLASS = {"SERVICE": (17, "SERVICE"), "QUEUE": (1, "OBJECT_OR_COLUMN")}


@dataclass(frozen=True)
class DatabasePrincipalRow:
    """A row of ``sys.database_principals``: public (0, ``R`` DATABASE_ROLE), dbo (1) and the
    users of CREATE USER (``S`` SQL_USER, from 5 up). ``default_schema_name`` ``dbo`` for a
    user, None for the role; ``owning_principal_id`` the role's owner (dbo), None for a user;
    ``authentication_type`` 1 INSTANCE for dbo, 0 NONE for a user WITHOUT LOGIN or FROM
    CERTIFICATE and None for the role; ``certificate_names`` (added) the certificates it owns."""

    name: str
    principal_id: int
    type: str
    type_desc: str
    default_schema_name: str | None
    owning_principal_id: int | None
    is_fixed_role: bool
    authentication_type: int | None
    authentication_type_desc: str | None
    certificate_names: tuple[str, ...]


@dataclass(frozen=True)
class DatabasePermissionRow:
    """A row of ``sys.database_permissions`` (SEC-4): ``class`` 17 SERVICE (SEND, type ``SN``)
    or 1 OBJECT_OR_COLUMN (a queue: RECEIVE, type ``RC``); ``major_id`` the service_id or
    queue_id; ``minor_id`` 0; ``state`` ``G`` GRANT. Added: ``securable`` (``SERVICE::name``
    / ``QUEUE::name``), ``grantee_name``, ``grantor_name``. (CONNECT ON ENDPOINT is a server
    permission, not listed here: ``views.service_broker_endpoints``.)"""

    class_: int
    class_desc: str
    major_id: int
    minor_id: int
    grantee_principal_id: int
    grantor_principal_id: int
    type: str
    permission_name: str
    state: str
    state_desc: str
    securable: str
    grantee_name: str
    grantor_name: str


@dataclass(frozen=True)
class RemoteServiceBindingViewRow:
    """A row of ``sys.remote_service_bindings`` (SEC-3): ``principal_id`` the binding's owner
    (dbo), ``remote_principal_id`` the user whose certificate serves the remote service (its
    name in ``remote_principal_name``, added), ``service_contract_id`` 0 (every contract)."""

    name: str
    remote_service_binding_id: int
    principal_id: int | None
    remote_service_name: str
    service_contract_id: int
    remote_principal_id: int
    remote_principal_name: str
    is_anonymous_on: bool


def database_principals(cat: CatalogSnapshot) -> list[DatabasePrincipalRow]:
    """``sys.database_principals``, by ``principal_id``."""
    out = []
    for p in sorted(cat.principals_by_id.values(), key=lambda p: p.principal_id):
        role = p.type == "R"
        auth = None if role else (1 if p.principal_id == DBO else 0)
        out.append(
            DatabasePrincipalRow(
                p.name,
                p.principal_id,
                p.type,
                _TYPE_DESC.get(p.type, p.type),
                None if role else "dbo",
                DBO if role else None,
                False,
                auth,
                None if auth is None else ("INSTANCE" if auth == 1 else "NONE"),
                tuple(c.name for c in cat.certificates_owned_by(p.principal_id)),
            )
        )
    return out


def database_permissions(cat: CatalogSnapshot) -> list[DatabasePermissionRow]:
    """``sys.database_permissions``: every SEND and RECEIVE granted, by securable and grantee."""
    out = []
    for grantee, permission, securable in sorted(cat.grants, key=lambda g: (g[2], g[0], g[1])):
        kind, _, name = securable.partition("::")
        major = cat.services[name].service_id if kind == "SERVICE" else cat.queues[name].queue_id
        code, desc = _CLASS[kind]
        out.append(
            DatabasePermissionRow(
                code,
                desc,
                major,
                0,
                grantee,
                DBO,
                _PERMISSION_TYPE[permission],
                permission,
                "G",
                "GRANT",
                securable,
                cat.principals_by_id[grantee].name if grantee in cat.principals_by_id else "",
                "dbo",
            )
        )
    return out


def remote_service_bindings(cat: CatalogSnapshot) -> list[RemoteServiceBindingViewRow]:
    """``sys.remote_service_bindings``, by id."""
    return [
        RemoteServiceBindingViewRow(
            b.name,
            b.remote_service_binding_id,
            DBO,
            b.remote_service_name,
            0,
            b.principal_id,
            cat.principals_by_id[b.principal_id].name
            if b.principal_id in cat.principals_by_id
            else "",
            bool(b.is_anonymous_on),
        )
        for b in sorted(
            cat.remote_service_bindings.values(), key=lambda b: b.remote_service_binding_id
        )
    ]


def owned_certificates(cat: CatalogSnapshot) -> list[CertificateViewRow]:
    """``sys.certificates`` with each certificate's owner as ``principal_id`` (dbo, 1, unless
    CREATE CERTIFICATE … AUTHORIZATION or CREATE USER … FROM CERTIFICATE gave it to a user)."""
    return [
        replace(row, principal_id=cert.principal_id or DBO)
        for row in certificates(cat)
        for cert in (cat.certificates_by_id[row.certificate_id],)
    ]


class PrincipalViews:
    """The security views as methods (``broker.views`` has them): each reads the catalog fresh
    (:meth:`_snapshot`, which the subclass gives)."""

    def _snapshot(self) -> CatalogSnapshot:
        raise NotImplementedError

    def database_principals(self) -> list[DatabasePrincipalRow]:
        """``sys.database_principals``: public, dbo and every user."""
        return database_principals(self._snapshot())

    def database_permissions(self) -> list[DatabasePermissionRow]:
        """``sys.database_permissions``: the SEND and RECEIVE permissions granted (SEC-4)."""
        return database_permissions(self._snapshot())

    def remote_service_bindings(self) -> list[RemoteServiceBindingViewRow]:
        """``sys.remote_service_bindings`` (SEC-3)."""
        return remote_service_bindings(self._snapshot())

    def certificates(self) -> list[CertificateViewRow]:
        """``sys.certificates``: every certificate, with its owner's ``principal_id``."""
        return owned_certificates(self._snapshot())
