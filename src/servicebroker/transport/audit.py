"""SQL Server's Audit Broker Login event (SEC-1): every login an endpoint decides — accepted or
refused — is logged with its event subclass, as SQL Server reports it to a trace
(https://learn.microsoft.com/en-us/sql/relational-databases/event-classes/audit-broker-login-event-class).

The record goes to the ``servicebroker.transport.peer`` logger, on both sides of a connection (INFO for a success, WARNING for a
refusal); its message reads ``Audit Broker Login (<subclass>): …`` and the record carries the
subclass as the attribute ``audit_broker_login`` (an :class:`AuditBrokerLogin`), so a log
handler can filter on it.
"""

from __future__ import annotations

import enum
import logging

from ..errors import TransportError

__all__ = [
    "HANDSHAKE_FAILED",
    "AuditBrokerLogin",
    "LoginFailure",
    "audit_login",
    "handshake_status",
]


HANDSHAKE_FAILED = "Connection handshake failed."
"""How SQL Server's status texts of a refused connection begin (SEC-1, NET-7)."""


def handshake_status(reason: str, address: str) -> str:
    """The ``transmission_status`` of a handshake with ``address`` (``TCP://host:port``) that
    failed for ``reason`` (SEC-1): "Connection handshake failed. <reason> (<address>)" — the
    prefix once, also when ``reason`` carries it already (a peer's LOGIN refusal does)."""
    if reason.startswith(HANDSHAKE_FAILED[:-1]):
        return f"{reason} ({address})"
    return f"{HANDSHAKE_FAILED} {reason} ({address})"


class AuditBrokerLogin(enum.IntEnum):
    """The EventSubClass of Audit Broker Login (event class 159); :attr:`desc` is its name."""

    LOGIN_SUCCESS = 1
    """The adjacent broker login finished successfully."""
    LOGIN_PROTOCOL_ERROR = 2
    """A well-formed message came that is not valid in the login's state (or none came: the
    peer closed, or the handshake timed out)."""
    MESSAGE_FORMAT_ERROR = 3
    """A message does not have the expected format (not this protocol on the port)."""
    NEGOTIATE_FAILURE = 4
    """The two endpoints' settings exclude each other (ENCRYPTION REQUIRED against DISABLED)."""
    AUTHENTICATION_FAILURE = 5
    """Authentication could not be done: no certificate presented, an expired or not yet valid
    one, or the TLS handshake failed otherwise."""
    AUTHORIZATION_FAILURE = 6
    """The peer's certificate does not correspond to a certificate granted CONNECT on the
    endpoint (not granted, or signed by a CA not granted)."""

    @property
    def desc(self) -> str:
        """The subclass name as SQL Server's documentation writes it ("Login Success", …)."""
        return self.name.replace("_", " ").title()


class LoginFailure(TransportError):
    """A connection's login failed (SEC-1); the message is the status text (the connecting
    side's ``transmission_status``), :attr:`subclass` the Audit Broker Login subclass.

    Args:
        status: the status text.
        subclass: an :class:`AuditBrokerLogin` other than LOGIN_SUCCESS.
    """

    def __init__(self, status: str, subclass: AuditBrokerLogin) -> None:
        super().__init__(status)
        self.subclass = subclass


def audit_login(
    logger: logging.Logger,
    subclass: AuditBrokerLogin,
    peer_address: str,
    detail: str,
    *,
    accept: bool,
) -> None:
    """Log one Audit Broker Login event (SEC-1): INFO for LOGIN_SUCCESS, WARNING otherwise.

    Args:
        logger: where to log.
        subclass: the event subclass.
        peer_address: ``TCP://host:port`` of the peer.
        detail: the status text (why it failed), or how the connection is secured.
        accept: True on the accepting side ("a connection from …"), False on the connecting
            side ("a connection to …").
    """
    level = logging.INFO if subclass is AuditBrokerLogin.LOGIN_SUCCESS else logging.WARNING
    outcome = "login succeeded" if subclass is AuditBrokerLogin.LOGIN_SUCCESS else "login failed"
    logger.log(
        level,
        "Audit Broker Login (%s): %s for a connection %s %s: %s",
        subclass.desc,
        outcome,
        "from" if accept else "to",
        peer_address,
        detail,
        extra={"audit_broker_login": subclass},
    )
