"""The transport's catalog statements as the Broker's methods: CREATE / DROP CERTIFICATE,
CREATE / ALTER / DROP ENDPOINT … FOR SERVICE_BROKER, CREATE / DROP LOGIN … FROM CERTIFICATE,
GRANT CONNECT ON ENDPOINT and CREATE / ALTER / DROP ROUTE. :class:`NetworkStatements` is a base
of :class:`~servicebroker.Broker` (beside
:class:`~servicebroker.ddl.statements.CatalogStatements`): each method reads and checks
what lies outside the database (certificate and key files), then runs its
:mod:`~servicebroker.ddl.network_changes` function in a catalog transaction. The transport
reads the result from the catalog snapshot (``routes``, ``service_broker_endpoint``,
``certificates``, ``logins``, ``endpoint_grants``), without a query of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..catalog.cache import CatalogCache
from ..catalog.routing import DEFAULT_PORT
from ..transport.certificates import (
    check_key_matches,
    load_certificate_file,
    load_private_key_file,
)
from . import network_changes as nc
from . import principal_changes

if TYPE_CHECKING:
    from ..clock import Clock

__all__ = ["NetworkStatements"]

T = TypeVar("T")


class NetworkStatements:
    """The transport's catalog methods of a broker (a base class of Broker).

    Args:
        cache: the broker's catalog cache.
        clock: the broker clock (a route's LIFETIME counts from its ``now``).
        changed: called after every committed change (wakes the broker's background thread).
    """

    def __init__(self, cache: CatalogCache, *, clock: Clock, changed: Callable[[], None]) -> None:
        self._network_cache = cache
        self._network_clock = clock
        self._network_changed = changed

    def _network_change(self, statement: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        result = self._network_cache.change(statement, *args, **kwargs)
        self._network_changed()
        return result

    # -- certificates and logins ---------------------------------------------------------
    def create_certificate(
        self,
        name: str,
        *,
        certificate_file: str | Path,
        private_key_file: str | Path | None = None,
        authorization: str | None = None,
    ) -> None:
        """CREATE CERTIFICATE ``name`` [AUTHORIZATION ``authorization``] FROM FILE =
        ``certificate_file`` [WITH PRIVATE KEY (FILE = ``private_key_file``)]
        (create-certificate-transact-sql.md). ``authorization`` names the user that owns it
        (:meth:`create_user`; default dbo): a certificate a user owns identifies that user to
        a remote broker (SEC-2, SEC-3). The certificate (PEM) is
        read and kept in the database, as SQL Server does; the private key (unencrypted PEM)
        is read now to check that it matches, and its path is kept: the transport reads it
        again when the endpoint starts (an unreadable key then fails the start, retried by
        TICK-4c).

        Raises:
            CertificateError: a file that cannot be read or parsed, or a key that does not
                match the certificate (naming the file).
            CatalogError: a bad or taken name; an unknown ``authorization`` user.
        """
        info = load_certificate_file(certificate_file)
        key_path: str | None = None
        if private_key_file is not None:
            key_path = str(Path(private_key_file).resolve())
            key = load_private_key_file(private_key_file)
            check_key_matches(info, key, key_file=str(private_key_file))
        self._network_change(
            principal_changes.create_owned_certificate, name, info, key_path, authorization
        )

    def drop_certificate(self, name: str) -> None:
        """DROP CERTIFICATE. Raises :class:`CatalogError` for an unknown name, or while the
        endpoint or a login uses it."""
        self._network_change(nc.drop_certificate, name)

    def create_login(self, name: str, *, certificate: str) -> None:
        """CREATE LOGIN ``name`` FROM CERTIFICATE ``certificate`` (create-login-transact-sql.md):
        a peer presenting that certificate acts as this login (SEC-1).

        Raises:
            CatalogError: a bad or taken name, an unknown certificate.
        """
        self._network_change(nc.create_login, name, certificate)

    def drop_login(self, name: str) -> None:
        """DROP LOGIN: its CONNECT permission goes too. Raises :class:`CatalogError` for an
        unknown name."""
        self._network_change(nc.drop_login, name)

    def grant_connect(
        self, endpoint: str, login: str | None = None, *, certificate: str | None = None
    ) -> str:
        """GRANT CONNECT ON ENDPOINT::``endpoint`` TO ``login`` (grant-endpoint-permissions-
        transact-sql.md, SEC-1). With ``certificate=`` instead of a login it does both at once:
        CREATE LOGIN ``<certificate>_login`` FROM CERTIFICATE ``certificate`` (reused when it
        exists) and the GRANT. Granting again does nothing more. Returns the login's name.

        Raises:
            CatalogError: an unknown endpoint, login or certificate; both or neither of
                ``login`` and ``certificate``.
        """
        return self._network_change(nc.grant_connect, endpoint, login, certificate)

    # -- the endpoint --------------------------------------------------------------------
    def create_endpoint(
        self,
        name: str,
        *,
        listener_port: int = DEFAULT_PORT,
        listener_ip: str = "127.0.0.1",
        authentication_certificate: str,
        encryption: str = "REQUIRED",
        algorithm: str = "AES",
        message_forwarding: bool = False,
        message_forward_size: int = 10,
        state: str = "STARTED",
    ) -> None:
        """CREATE ENDPOINT ``name`` STATE = ``state`` AS TCP (LISTENER_PORT, LISTENER_IP) FOR
        SERVICE_BROKER (AUTHENTICATION = CERTIFICATE ``authentication_certificate``,
        ENCRYPTION = DISABLED | SUPPORTED | REQUIRED ALGORITHM AES | RC4 | AES RC4 | RC4 AES,
        MESSAGE_FORWARDING, MESSAGE_FORWARD_SIZE megabytes) (create-endpoint-transact-sql.md).
        One per database. ``listener_ip`` is ``"ALL"`` or an address; ``listener_port`` 0
        lets the system choose (tests). The transport listens while the state is STARTED.

        Raises:
            CatalogError: a bad name; an endpoint already there; a bad setting; an unknown
                certificate or one without a private key.
        """
        settings = nc.EndpointSettings(
            state,
            listener_ip,
            listener_port,
            authentication_certificate,
            encryption,
            algorithm,
            message_forwarding,
            message_forward_size,
        )
        self._network_change(nc.create_endpoint, name, settings)

    def alter_endpoint(
        self,
        name: str,
        *,
        listener_port: int | None = None,
        listener_ip: str | None = None,
        authentication_certificate: str | None = None,
        encryption: str | None = None,
        algorithm: str | None = None,
        message_forwarding: bool | None = None,
        message_forward_size: int | None = None,
        state: str | None = None,
    ) -> None:
        """ALTER ENDPOINT ``name``: the settings given replace the endpoint's (None keeps one);
        as :meth:`create_endpoint` otherwise.

        Raises:
            CatalogError: an unknown endpoint, a bad setting, an unknown certificate or one
                without a private key.
        """
        given = {
            "state": state,
            "listener_ip": listener_ip,
            "listener_port": listener_port,
            "authentication_certificate": authentication_certificate,
            "encryption": encryption,
            "algorithm": algorithm,
            "message_forwarding": message_forwarding,
            "message_forward_size": message_forward_size,
        }
        changes = {k: v for k, v in given.items() if v is not None}
        self._network_change(nc.alter_endpoint, name, changes)

    def drop_endpoint(self, name: str) -> None:
        """DROP ENDPOINT: the transport stops listening; the CONNECT grants on it go.
        Raises :class:`CatalogError` for an unknown name."""
        self._network_change(nc.drop_endpoint, name)

    # -- routes --------------------------------------------------------------------------
    def create_route(
        self,
        name: str,
        *,
        service_name: str | None = None,
        broker_instance: str | uuid.UUID | None = None,
        address: str,
        mirror_address: str | None = None,
        lifetime: int | None = None,
    ) -> None:
        """CREATE ROUTE ``name`` WITH SERVICE_NAME, BROKER_INSTANCE, LIFETIME (seconds), ADDRESS
        (``'TCP://host:port'``, ``'LOCAL'`` or ``'TRANSPORT'``), MIRROR_ADDRESS
        (create-route-transact-sql.md, RTE-1). A route without a service or an instance
        matches any; one whose LIFETIME has passed (broker clock) is ignored, never removed.

        Raises:
            CatalogError: a bad or taken name; a clause of the wrong form; a MIRROR_ADDRESS
                without SERVICE_NAME and BROKER_INSTANCE or with a LOCAL or TRANSPORT
                address; a TRANSPORT route naming a service or broker instance.
        """
        settings = nc.RouteSettings(
            service_name, broker_instance, address, mirror_address, lifetime
        )
        self._network_change(nc.create_route, name, settings, now=self._network_clock.now())

    def alter_route(
        self,
        name: str,
        *,
        service_name: str | None = None,
        broker_instance: str | uuid.UUID | None = None,
        address: str | None = None,
        mirror_address: str | None = None,
        lifetime: int | None = None,
    ) -> None:
        """ALTER ROUTE ``name`` WITH …: the clauses given replace the route's, the others stay
        (alter-route-transact-sql.md; a route cannot be made to match any service or instance
        again, nor never to expire: drop it and create it). A LIFETIME counts from now.

        Raises:
            CatalogError: an unknown route, no clause, or what :meth:`create_route` refuses.
        """
        settings = nc.RouteSettings(
            service_name, broker_instance, address, mirror_address, lifetime
        )
        self._network_change(nc.alter_route, name, settings, now=self._network_clock.now())

    def drop_route(self, name: str) -> None:
        """DROP ROUTE. Raises :class:`CatalogError` for an unknown name."""
        self._network_change(nc.drop_route, name)
