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

__all__ = ["AuditBrokerLogin", "LoginFailure", "audit_login"]


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
    """Log one Audit Broker Login event: INFO for LOGIN_SUCCESS, WARNING otherwise.

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
