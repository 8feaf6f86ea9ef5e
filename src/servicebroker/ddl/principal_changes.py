"""The catalog statements of database principals and their permissions — CREATE / DROP USER,
a certificate's owner (CREATE CERTIFICATE … AUTHORIZATION), CREATE / DROP REMOTE SERVICE
BINDING, GRANT / REVOKE SEND ON SERVICE, RECEIVE ON QUEUE and CONNECT ON ENDPOINT — each a
function of an open write transaction (``conn``) and the catalog snapshot it checks against, as
in :mod:`.changes`: they validate, raise :class:`CatalogError` naming the object at fault, and
write through the storage's named catalog statements; the caller bumps the version and commits.

Rules: SEC-3 (a remote service binding maps a remote service to a local user and that user's
certificate), SEC-4 (SEND on a service and RECEIVE on a queue are permissions).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog.model import DBO, PUBLIC, SERVICE_STRING_LIMIT, CatalogSnapshot, check_name
from ..errors import CatalogError
from ..storage.base import StorageConnection
from ..transport.certificates import CertificateInfo
from .network_changes import create_certificate, grant_connect

__all__ = [
    "PERMISSIONS",
    "Securable",
    "create_owned_certificate",
    "create_remote_service_binding",
    "create_user",
    "drop_remote_service_binding",
    "drop_user",
    "grant",
    "parse_securable",
    "revoke",
]

PERMISSIONS = {"SERVICE": "SEND", "QUEUE": "RECEIVE", "ENDPOINT": "CONNECT"}
"""The permission each securable class takes here (grant-service-broker-permissions-transact-
sql.md: SEND on a service, RECEIVE on a queue; grant-endpoint-permissions-transact-sql.md:
CONNECT on an endpoint)."""

_CLASS_ALIASES = {"SERVICE": "SERVICE", "QUEUE": "QUEUE", "OBJECT": "QUEUE", "ENDPOINT": "ENDPOINT"}


@dataclass(frozen=True, slots=True)
class Securable:
    """A securable named in GRANT / REVOKE: ``kind`` SERVICE, QUEUE or ENDPOINT and its
    ``name``; :attr:`text` is its ``"KIND::name"`` form."""

    kind: str
    name: str

    @property
    def text(self) -> str:
        """``"SERVICE::name"``, ``"QUEUE::name"`` or ``"ENDPOINT::name"``."""
        return f"{self.kind}::{self.name}"


def parse_securable(on: object) -> Securable:
    """``"SERVICE::name"``, ``"QUEUE::name"``, ``"OBJECT::name"`` (a queue, as GRANT RECEIVE ON
    OBJECT::queue) or ``"ENDPOINT::name"`` as a :class:`Securable`; the class is read in any
    case, the name is kept byte for byte.

    Raises:
        CatalogError: not a string, no ``::``, an unknown class or an empty name.
    """
    if not isinstance(on, str) or "::" not in on:
        raise CatalogError(
            f"securable {on!r} must be 'SERVICE::name', 'QUEUE::name', 'OBJECT::name' or "
            f"'ENDPOINT::name'"
        )
    kind, _, name = on.partition("::")
    cls = _CLASS_ALIASES.get(kind.strip().upper())
    if cls is None:
        raise CatalogError(
            f"securable {on!r}: unknown class {kind!r}; use SERVICE, QUEUE (or OBJECT) or ENDPOINT"
        )
    check_name(cls.lower(), name)
    return Securable(cls, name)


def _check_permission(permission: object, securable: Securable) -> str:
    """The permission in upper case; CatalogError for one the securable's class does not take."""
    if not isinstance(permission, str) or permission.strip().upper() not in PERMISSIONS.values():
        raise CatalogError(
            f"unknown permission {permission!r}: use SEND (on SERVICE::), RECEIVE (on QUEUE::) "
            f"or CONNECT (on ENDPOINT::)"
        )
    wanted = PERMISSIONS[securable.kind]
    perm = permission.strip().upper()
    if perm != wanted:
        raise CatalogError(
            f"permission {perm} cannot be granted on {securable.text!r}: a {securable.kind} "
            f"takes {wanted}"
        )
    return perm


# -- users -------------------------------------------------------------------------------------


def create_user(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, certificate: str | None
) -> int:
    """CREATE USER ``name`` WITHOUT LOGIN, or FROM CERTIFICATE ``certificate`` (the user owns
    it: a remote broker or service presenting it acts as this user, SEC-3). Returns its
    principal_id (5 and up).

    Raises:
        CatalogError: a bad or taken name; an unknown certificate, or one another user owns.
    """
    check_name("user", name)
    if name in snap.principals:
        raise CatalogError(f"database principal {name!r} already exists")
    cert = None if certificate is None else _free_certificate(snap, certificate, name)
    principal_id = conn.catalog_write("insert_principal", (name, "S"))
    if cert is not None:
        conn.catalog_write("set_certificate_owner", (principal_id, cert))
    return principal_id


def _free_certificate(snap: CatalogSnapshot, certificate: str, user: str) -> int:
    """The id of ``certificate`` when no user but dbo owns it yet."""
    cert = snap.certificate(certificate)
    owner = cert.principal_id
    if owner not in (None, DBO) and owner in snap.principals_by_id:
        raise CatalogError(
            f"certificate {certificate!r} is already owned by user "
            f"{snap.principals_by_id[owner].name!r}; it cannot be given to {user!r}"
        )
    return cert.certificate_id


def create_owned_certificate(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    info: CertificateInfo,
    private_key_file: str | None,
    user: str | None,
) -> None:
    """CREATE CERTIFICATE ``name`` AUTHORIZATION ``user`` FROM FILE …: the certificate, owned
    by ``user`` (None or "dbo": dbo), as :func:`.network_changes.create_certificate`.

    Raises:
        CatalogError: a bad or taken name; an unknown user, or a role.
    """
    owner: int | None = None
    if user is not None:
        principal = snap.principal(user)
        if principal.type != "S":
            raise CatalogError(
                f"certificate {name!r}: AUTHORIZATION {user!r} is a role, not a user"
            )
        owner = None if principal.principal_id == DBO else principal.principal_id
    create_certificate(conn, snap, name, info, private_key_file, owner)


def drop_user(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP USER ``name``: its permissions go with it.

    Raises:
        CatalogError: an unknown user; public or dbo; a user that a remote service binding
            names, or that owns a certificate (drop-user-transact-sql.md: "Users that own
            securables cannot be dropped").
    """
    principal = snap.principal(name)
    if principal.principal_id in (PUBLIC, DBO):
        raise CatalogError(f"database principal {name!r} is built in and cannot be dropped")
    bindings = sorted(
        b.name
        for b in snap.remote_service_bindings.values()
        if b.principal_id == principal.principal_id
    )
    if bindings:
        raise CatalogError(
            f"cannot drop user {name!r}: remote service binding(s) "
            f"{', '.join(map(repr, bindings))} use it; drop them first"
        )
    owned = sorted(c.name for c in snap.certificates_owned_by(principal.principal_id))
    if owned:
        raise CatalogError(
            f"cannot drop user {name!r}: it owns certificate(s) {', '.join(map(repr, owned))}; "
            f"drop them first"
        )
    conn.catalog_write("delete_permissions_of", (principal.principal_id,))
    conn.catalog_write("delete_principal", (principal.principal_id,))


# -- remote service bindings -------------------------------------------------------------------


def create_remote_service_binding(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    to_service: str,
    user: str,
    anonymous: bool,
) -> int:
    """CREATE REMOTE SERVICE BINDING ``name`` TO SERVICE ``to_service`` WITH USER = ``user``,
    ANONYMOUS = ON | OFF (SEC-3). Returns its id.

    Raises:
        CatalogError: a bad or taken name; a bad TO SERVICE; a service that has a binding
            already; an unknown user, or a role; ``anonymous`` not a bool.
    """
    check_name("remote service binding", name)
    if name in snap.remote_service_bindings:
        raise CatalogError(f"remote service binding {name!r} already exists")
    check_name("TO SERVICE", to_service, limit=SERVICE_STRING_LIMIT)
    if not isinstance(anonymous, bool):
        raise CatalogError(
            f"remote service binding {name!r}: ANONYMOUS must be True or False, got {anonymous!r}"
        )
    taken = snap.binding_for(to_service)
    if taken is not None:
        raise CatalogError(
            f"remote service binding {name!r}: service {to_service!r} is bound already by "
            f"{taken.name!r}"
        )
    principal = snap.principal(user)
    if principal.type != "S":
        raise CatalogError(f"remote service binding {name!r}: {user!r} is a role, not a user")
    if principal.principal_id == DBO:
        raise CatalogError(
            f"remote service binding {name!r}: USER must own the remote service's certificate; "
            "dbo owns this database's own certificates"
        )
    return conn.catalog_write(
        "insert_remote_service_binding",
        (name, to_service, principal.principal_id, int(anonymous)),
    )


def drop_remote_service_binding(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP REMOTE SERVICE BINDING. Raises :class:`CatalogError` for an unknown name."""
    binding = snap.remote_service_binding(name)
    conn.catalog_write("delete_remote_service_binding", (binding.remote_service_binding_id,))


# -- GRANT / REVOKE ----------------------------------------------------------------------------


def _major_id(snap: CatalogSnapshot, securable: Securable) -> int:
    if securable.kind == "SERVICE":
        return snap.service(securable.name).service_id
    return snap.queue(securable.name).queue_id


def grant(
    conn: StorageConnection, snap: CatalogSnapshot, permission: str, on: str, to: str
) -> None:
    """GRANT ``permission`` ON ``on`` TO ``to`` (SEC-4): SEND on ``"SERVICE::name"``, RECEIVE
    on ``"QUEUE::name"`` / ``"OBJECT::name"`` to a database principal (``"public"``: every
    one); CONNECT on ``"ENDPOINT::name"`` to a login (SEC-1). Granting twice does nothing
    more.

    Raises:
        CatalogError: an unknown permission, securable class, securable or grantee; a
            permission the class does not take.
    """
    securable = parse_securable(on)
    perm = _check_permission(permission, securable)
    if securable.kind == "ENDPOINT":
        grant_connect(conn, snap, securable.name, to, None)
        return
    major = _major_id(snap, securable)
    grantee = snap.principal(to).principal_id
    if (grantee, perm, securable.text) in snap.grants:
        return
    conn.catalog_write("insert_permission", (securable.kind, major, grantee, DBO, perm))


def revoke(
    conn: StorageConnection, snap: CatalogSnapshot, permission: str, on: str, to: str
) -> None:
    """REVOKE ``permission`` ON ``on`` FROM ``to``: the grant goes (none there: nothing
    happens, as in SQL Server). CONNECT ON ENDPOINT:: is revoked from a login.

    Raises:
        CatalogError: as :func:`grant`.
    """
    securable = parse_securable(on)
    perm = _check_permission(permission, securable)
    if securable.kind == "ENDPOINT":
        endpoint = snap.service_broker_endpoint
        if endpoint is None or endpoint.name != securable.name:
            raise CatalogError(f"endpoint {securable.name!r} does not exist")
        login = snap.login(to)
        conn.catalog_write("delete_endpoint_grant", (endpoint.endpoint_id, login.login_id))
        return
    major = _major_id(snap, securable)
    grantee = snap.principal(to).principal_id
    conn.catalog_write("delete_permission", (securable.kind, major, grantee, perm))
