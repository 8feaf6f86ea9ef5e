"""Database principals and permissions as the Broker's methods: CREATE / DROP USER, CREATE /
DROP REMOTE SERVICE BINDING, GRANT / REVOKE (SEND ON SERVICE, RECEIVE ON QUEUE, CONNECT ON
ENDPOINT). :class:`PrincipalStatements` is a base of :class:`~servicebroker.Broker` (beside
:class:`~servicebroker.ddl.statements.CatalogStatements` and
:class:`~servicebroker.ddl.network.NetworkStatements`): each method runs its
:mod:`~servicebroker.ddl.principal_changes` function in a catalog transaction. The engine
reads the result from the catalog snapshot (``principals``, ``grants``,
``remote_service_bindings``, ``has_permission``, ``binding_for``).

Rules: SEC-3 (remote service bindings), SEC-4 (SEND / RECEIVE permissions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..catalog.cache import CatalogCache
from . import principal_changes as pc

__all__ = ["PrincipalStatements"]

T = TypeVar("T")


class PrincipalStatements:
    """The principal and permission methods of a broker (a base class of Broker).

    Args:
        cache: the broker's catalog cache.
        changed: called after every committed change (wakes the broker's background thread).
    """

    def __init__(self, cache: CatalogCache, *, changed: Callable[[], None]) -> None:
        self._principal_cache = cache
        self._principal_changed = changed

    def _principal_change(self, statement: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        result = self._principal_cache.change(statement, *args, **kwargs)
        self._principal_changed()
        return result

    def create_user(self, name: str, *, certificate: str | None = None) -> int:
        """CREATE USER ``name`` WITHOUT LOGIN, or with ``certificate=`` CREATE USER ``name`` FROM
        CERTIFICATE (create-user-transact-sql.md): a database principal a transaction can act
        as (:meth:`Broker.transaction` ``principal=``). With a certificate (already created by
        :meth:`create_certificate`) the user owns it: a remote broker or service presenting
        that certificate is identified as this user (SEC-2, SEC-3). Returns its principal_id
        (from 5 up, as SQL Server numbers users).

        Raises:
            CatalogError: a bad or taken name (``public`` and ``dbo`` always exist); an unknown
                certificate, or one another user owns already.
        """
        return self._principal_change(pc.create_user, name, certificate)

    def drop_user(self, name: str) -> None:
        """DROP USER ``name`` (drop-user-transact-sql.md): its permissions go with it.

        Raises:
            CatalogError: an unknown user; ``public`` or ``dbo``; a user a remote service
                binding names or that owns a certificate ("Users that own securables cannot be
                dropped").
        """
        self._principal_change(pc.drop_user, name)

    def create_remote_service_binding(
        self, name: str, *, to_service: str, user: str, anonymous: bool = False
    ) -> None:
        """CREATE REMOTE SERVICE BINDING ``name`` TO SERVICE ``to_service`` WITH USER =
        ``user``, ANONYMOUS = ON | OFF (create-remote-service-binding-transact-sql.md, SEC-3):
        dialogs to that remote service use the certificate ``user`` owns; with ``anonymous``
        the initiator acts as ``public`` at the target. ``to_service`` is matched byte for
        byte.

        Raises:
            CatalogError: a bad or taken name; a bad service name or one bound already; an
                unknown user.
        """
        self._principal_change(pc.create_remote_service_binding, name, to_service, user, anonymous)

    def drop_remote_service_binding(self, name: str) -> None:
        """DROP REMOTE SERVICE BINDING ``name``. Raises :class:`CatalogError` for an unknown
        name."""
        self._principal_change(pc.drop_remote_service_binding, name)

    def grant(self, permission: str, *, on: str, to: str) -> None:
        """GRANT ``permission`` ON ``on`` TO ``to`` (grant-service-broker-permissions-transact-
        sql.md, grant-endpoint-permissions-transact-sql.md): ``"SEND"`` on
        ``"SERVICE::name"``, ``"RECEIVE"`` on ``"QUEUE::name"`` (or ``"OBJECT::name"``) to a
        database principal — ``"public"`` grants it to every one (SEC-4); ``"CONNECT"`` on
        ``"ENDPOINT::name"`` to a login (SEC-1). Granting twice does nothing more.

        Raises:
            CatalogError: an unknown permission, securable class, object or grantee; a
                permission the securable's class does not take.
        """
        self._principal_change(pc.grant, permission, on, to)

    def revoke(self, permission: str, *, on: str, to: str) -> None:
        """REVOKE ``permission`` ON ``on`` FROM ``to`` (revoke-service-broker-permissions-
        transact-sql.md): the grant goes; revoking what was not granted does nothing. A
        principal keeps what ``public`` is granted.

        Raises:
            CatalogError: as :meth:`grant`.
        """
        self._principal_change(pc.revoke, permission, on, to)
