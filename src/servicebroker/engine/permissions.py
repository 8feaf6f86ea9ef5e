"""Acting as a database principal and the permission checks of the Service Broker statements
(SEC-4): SEND on the target service for SEND, RECEIVE on the queue for RECEIVE, WAITFOR RECEIVE
and GET CONVERSATION GROUP (grant-service-broker-permissions-transact-sql.md). A transaction
acts as one principal (:meth:`Broker.transaction` ``principal=``, default ``dbo``, which may do
everything); the checks read the transaction's catalog snapshot and raise
:class:`~servicebroker.errors.PermissionDeniedError` before anything is enqueued, dequeued or
locked. END CONVERSATION, BEGIN CONVERSATION TIMER and MOVE CONVERSATION check nothing, as in
SQL Server.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..catalog.model import DBO, CatalogSnapshot
from ..errors import CatalogError, PermissionDeniedError
from ..storage.rows import EndpointRow, PrincipalRow

__all__ = [
    "DEFAULT_PRINCIPAL",
    "acting_principal",
    "check_receive",
    "check_send",
    "current_execute_as",
    "execute_as",
    "procedure_principal",
]

DEFAULT_PRINCIPAL = "dbo"
"""The principal a transaction acts as unless told otherwise: it may do everything."""

_EXECUTE_AS: ContextVar[str | None] = ContextVar("servicebroker_execute_as", default=None)


def procedure_principal(execute_as: str) -> str:
    """The principal an activated procedure runs as, from its queue's ACTIVATION (EXECUTE AS
    SELF | OWNER | 'user'): SELF and OWNER are ``dbo`` here (the queue's creator and owner),
    a user name is that user."""
    return DEFAULT_PRINCIPAL if execute_as.upper() in ("SELF", "OWNER") else execute_as


@contextmanager
def execute_as(principal: str) -> Iterator[None]:
    """Within the block, transactions this thread (context) opens without naming a principal
    act as ``principal``: how an activated procedure runs as its queue's EXECUTE AS user."""
    token = _EXECUTE_AS.set(principal)
    try:
        yield
    finally:
        _EXECUTE_AS.reset(token)


def current_execute_as() -> str | None:
    """The principal of the enclosing :func:`execute_as` block, or None outside one."""
    return _EXECUTE_AS.get()


def acting_principal(catalog: CatalogSnapshot, name: object) -> PrincipalRow:
    """The principal called ``name`` that a transaction acts as.

    Args:
        catalog: the transaction's catalog snapshot.
        name: the principal's name (``"dbo"``, a user made by :meth:`Broker.create_user`).

    Raises:
        CatalogError: not a string, an unknown principal, or a role (``public``: a transaction
            acts as a user).
    """
    if not isinstance(name, str):
        raise CatalogError(f"principal must be a user's name, got {name!r}")
    found = catalog.principals.get(name)
    if found is None:
        if name == DEFAULT_PRINCIPAL:  # a catalog read before the principals existed
            return PrincipalRow(DBO, DEFAULT_PRINCIPAL, "S")
        raise CatalogError(f"database principal {name!r} does not exist")
    if found.type != "S":
        raise CatalogError(f"database principal {name!r} is a role; a transaction acts as a user")
    return found


def check_send(catalog: CatalogSnapshot, principal: PrincipalRow, row: EndpointRow) -> None:
    """SEC-4: a SEND on the initiator's endpoint ``row`` to a target service of this database
    needs SEND on that service (a reply of the target, or a message to a service elsewhere,
    is not checked here: the far side checks it, SEC-2).

    Raises:
        PermissionDeniedError: ``principal`` lacks SEND on the target service.
    """
    if principal.principal_id == DBO or not row.is_initiator:
        return
    target = row.far_service
    if target in catalog.services and not catalog.has_permission(
        principal.principal_id, "SEND", f"SERVICE::{target}"
    ):
        raise PermissionDeniedError("SEND", f"SERVICE::{target}", principal.name)


def check_receive(catalog: CatalogSnapshot, principal: PrincipalRow, queue: str) -> None:
    """SEC-4: RECEIVE, WAITFOR RECEIVE and GET CONVERSATION GROUP on ``queue`` need RECEIVE on
    it.

    Raises:
        PermissionDeniedError: ``principal`` lacks RECEIVE on the queue.
    """
    if principal.principal_id != DBO and not catalog.has_permission(
        principal.principal_id, "RECEIVE", f"QUEUE::{queue}"
    ):
        raise PermissionDeniedError("RECEIVE", f"QUEUE::{queue}", principal.name)
