"""What ``servicebroker diagnose`` reports: a :class:`Finding` (a stable code, a severity, a
message naming the objects, the fix) and the table of every code (:data:`CODES`), documented in
docs/diagnose.md.

ssbdiagnose (docs/tools/ssbdiagnose/ssbdiagnose-utility-service-broker.md) reports each issue
once, at a level ERROR, WARNING or INFO, under a number that ``-IGNORE`` can name; here a code is
a stable string ``SBD-CFG-…`` (a CONFIGURATION check) or ``SBD-RUN-…`` (a RUNTIME check).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BrokerError

__all__ = [
    "CODES",
    "SEVERITIES",
    "Finding",
    "finding",
    "has_problems",
    "sort_findings",
]

SEVERITIES = ("error", "warning", "info")
"""The severities, most serious first: ``error`` (a dialog cannot work, or messages are stuck),
``warning`` (it works only in some cases, or something needs a look), ``info`` (what applies,
for the record: not a problem)."""

CODES: dict[str, tuple[str, str]] = {
    # code: (severity, what it means) -- docs/diagnose.md lists them with their fixes
    # CONFIGURATION: services, queues, the contract
    "SBD-CFG-CONTRACT-MISSING": ("error", "the contract does not exist"),
    "SBD-CFG-CONTRACT-NO-INITIATOR-MESSAGE": (
        "error",
        "the contract lets the initiator send no message type",
    ),
    "SBD-CFG-CONTRACT-MESSAGE-TYPES": ("info", "the contract's message types"),
    "SBD-CFG-FROM-SERVICE-MISSING": ("error", "the initiating service does not exist"),
    "SBD-CFG-TO-SERVICE-MISSING": (
        "error",
        "the target service does not exist here and no route leads elsewhere",
    ),
    "SBD-CFG-CONTRACT-NOT-ON-TARGET": ("error", "the target service does not accept the contract"),
    "SBD-CFG-QUEUE-DISABLED": ("error", "a service's queue is OFF (STATUS = OFF)"),
    "SBD-CFG-ROUTE-ELSEWHERE": (
        "warning",
        "the target service is here, but a route sends its messages elsewhere",
    ),
    # activation
    "SBD-CFG-ACTIVATION-OFF": ("info", "the queue has an activation procedure, turned OFF"),
    "SBD-CFG-ACTIVATION-NO-READERS": ("warning", "activation is ON with MAX_QUEUE_READERS = 0"),
    "SBD-CFG-ACTIVATION-PROCEDURE-UNIMPORTABLE": (
        "error",
        "the activation procedure 'module:function' cannot be imported",
    ),
    "SBD-CFG-ACTIVATION-PROCEDURE-IN-PROCESS": (
        "info",
        "the activation procedure is a callable only the process that registered it can run",
    ),
    "SBD-CFG-ACTIVATION-PROCEDURE-REGISTERED": (
        "info",
        "the activation procedure is a name each activating process must register",
    ),
    "SBD-CFG-ACTIVATION-USER-MISSING": ("error", "the activation's EXECUTE AS user does not exist"),
    # priorities and permissions
    "SBD-CFG-PRIORITY": ("info", "the conversation priority level each endpoint gets"),
    "SBD-CFG-PERMISSION-SEND": ("error", "a principal lacks SEND on the target service"),
    "SBD-CFG-PERMISSION-RECEIVE": ("error", "a principal lacks RECEIVE on a queue"),
    # a remote target: routes, the endpoint, certificates, dialog security
    "SBD-CFG-REMOTE-TARGET": ("info", "the target service is in another broker instance"),
    "SBD-CFG-NO-ROUTE": ("error", "no route leads to the remote target service"),
    "SBD-CFG-ROUTE-EXPIRED": ("warning", "a route to the target service has expired"),
    "SBD-CFG-NO-ENDPOINT": ("error", "no Service Broker endpoint: the transport cannot run"),
    "SBD-CFG-ENDPOINT-NOT-STARTED": ("error", "the Service Broker endpoint is not STARTED"),
    "SBD-CFG-ENDPOINT-NO-CONNECT": (
        "warning",
        "no login has CONNECT on the endpoint: other brokers' connections are refused",
    ),
    "SBD-CFG-REMOTE-SEND-NOT-GRANTED": (
        "warning",
        "no remote initiator may SEND to the local target service",
    ),
    "SBD-CFG-CERTIFICATE-NO-KEY": ("error", "a certificate needed here has no private key"),
    "SBD-CFG-CERTIFICATE-EXPIRED": ("error", "a certificate needed here is not valid now"),
    "SBD-CFG-NO-BINDING": (
        "error",
        "ENCRYPTION ON/ANONYMOUS but no remote service binding for the target",
    ),
    "SBD-CFG-BINDING-ANONYMOUS": (
        "warning",
        "the binding's ANONYMOUS setting differs from the ENCRYPTION asked",
    ),
    "SBD-CFG-BINDING-NO-CERTIFICATE": (
        "error",
        "the remote service binding's user owns no certificate",
    ),
    "SBD-CFG-BINDING-OVERRIDES-OFF": (
        "info",
        "ENCRYPTION OFF, but a remote service binding secures the dialog anyway",
    ),
    "SBD-CFG-NO-DIALOG-CERTIFICATE": (
        "error",
        "the user beginning the dialog owns no certificate with a private key to sign it",
    ),
    "SBD-CFG-REMOTE-PERMISSION": (
        "info",
        "what the remote broker must grant (checked there, not here)",
    ),
    # RUNTIME
    "SBD-RUN-TRANSMISSION-QUEUE-DISABLED": (
        "error",
        "messages wait in the transmission queue: their target queue is OFF",
    ),
    "SBD-RUN-TRANSMISSION-SERVICE-MISSING": (
        "error",
        "messages wait in the transmission queue: their target service does not exist",
    ),
    "SBD-RUN-TRANSMISSION-NO-ROUTE": (
        "error",
        "messages wait in the transmission queue: no route matches their target service",
    ),
    "SBD-RUN-TRANSMISSION-FAILING": (
        "warning",
        "messages wait in the transmission queue: the transport says why",
    ),
    "SBD-RUN-TRANSMISSION-WAITING": (
        "warning",
        "messages on their way have waited in the transmission queue longer than expected",
    ),
    "SBD-RUN-QUEUE-DISABLED": (
        "error",
        "a queue is OFF: nothing is received from it; messages to it wait",
    ),
    "SBD-RUN-ENDPOINT-ERROR": ("warning", "conversation endpoints are in the ERROR state"),
    "SBD-RUN-ENDPOINT-LIFETIME-PASSED": (
        "warning",
        "conversation endpoints are past their lifetime and not ended",
    ),
    "SBD-RUN-MONITOR-NOTIFIED-NO-READERS": (
        "warning",
        "a queue monitor is NOTIFIED, yet no reader is running",
    ),
    "SBD-RUN-QUEUE-UNMONITORED": (
        "warning",
        "a queue with activation ON has messages, but no started broker monitors it",
    ),
    "SBD-RUN-CLAIM-EXPIRED": ("warning", "stream claims past their time-out are not released"),
}
"""Every code, with its severity and what it means (docs/diagnose.md: each with its fix)."""


@dataclass(frozen=True)
class Finding:
    """One issue found (ssbdiagnose's *Diagnosis*).

    Attributes:
        code: a key of :data:`CODES`, stable across releases (scripts may filter on it).
        severity: ``"error"``, ``"warning"`` or ``"info"`` (:data:`SEVERITIES`).
        message: what was found, naming the objects (services, queues, contracts…).
        fix: what to do about it (a statement or a call).
        objects: the names involved, by kind (``{"service": "//shop/Shop", "queue": "shop_q"}``;
            counts and times as text).
    """

    code: str
    severity: str
    message: str
    fix: str
    objects: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise BrokerError(f"finding {self.code}: unknown severity {self.severity!r}")

    @property
    def is_problem(self) -> bool:
        """True for an error or a warning (what makes ``diagnose`` exit 1)."""
        return self.severity != "info"

    def to_dict(self) -> dict[str, Any]:
        """The finding as a JSON-ready dict: code, severity, message, fix, objects."""
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
            "objects": dict(self.objects),
        }


def finding(code: str, message: str, fix: str, **objects: object) -> Finding:
    """A :class:`Finding` with the severity :data:`CODES` gives ``code``; ``objects`` as text
    (None values left out).

    Raises:
        BrokerError: an unknown code (a programming error: every code is in :data:`CODES`).
    """
    if code not in CODES:
        raise BrokerError(f"unknown diagnose code {code!r}")
    names = {k: str(v) for k, v in objects.items() if v is not None}
    return Finding(code, CODES[code][0], message, fix, names)


def has_problems(findings: Iterable[Finding]) -> bool:
    """Whether any finding is an error or a warning."""
    return any(f.is_problem for f in findings)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then infos; the order found within a severity."""
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))
