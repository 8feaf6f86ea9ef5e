"""``diagnose CONFIGURATION``: everything a dialog between two services under one contract needs,
checked over the catalog, as ssbdiagnose's configuration report does
(docs/tools/ssbdiagnose/ssbdiagnose-utility-service-broker.md).

:func:`configuration_findings` is pure: a :class:`~servicebroker.catalog.CatalogSnapshot`, the
request and the few facts from outside the catalog (the broker clock's ``now``, the wall clock
for certificates, which procedure names this process registered, whether a ``module:function``
imports) in; :class:`~.findings.Finding` objects out. :func:`check_configuration` gathers those
inputs from a :class:`~servicebroker.Broker` and calls it.

What is checked, in order: the contract (exists; the initiator may send something; its message
types with SENT BY and validation, info); the FROM service (exists; its queue ON; its
activation); the TO service — here: its queue ON, its activation, the contract bound to it, no
route sending its messages elsewhere, SEND permission for the principal beginning the dialog
(and, without FROM SERVICE, what dialogs from other brokers need: CONNECT on the endpoint, SEND
for public or a certificate's user);
elsewhere: a live route (RTE-1..3), the Service Broker endpoint STARTED with a usable
certificate (SEC-1), dialog security as ``encryption`` asks (a remote service binding whose user
owns a valid certificate, a certificate the beginning user signs with; SEC-2, SEC-3), and what the remote
broker must grant (info); the conversation priority levels that apply (PRI-6, info).
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..activation.service import ActivationService
from ..arguments import short_repr
from ..catalog import DBO, CatalogSnapshot, ContractDef, QueueDef, ServiceDef
from ..catalog.routing import normalize_broker_instance
from ..clock import Clock
from ..engine.permissions import procedure_principal
from ..errors import BrokerError
from .findings import Finding, finding
from .remote import inbound_findings, missing_principal, remote_target_findings, route_to

__all__ = [
    "ENCRYPTIONS",
    "ConfigurationRequest",
    "check_configuration",
    "configuration_findings",
    "procedure_problem",
]

ENCRYPTIONS = ("ON", "OFF", "ANONYMOUS")
"""ssbdiagnose's ENCRYPTION levels: ON (full dialog security, the default), OFF, ANONYMOUS."""

_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class _Diagnosed(Protocol):
    """What CONFIGURATION reads of a broker (a :class:`~servicebroker.Broker` has it)."""

    @property
    def catalog(self) -> CatalogSnapshot: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def activation(self) -> ActivationService: ...
    @property
    def principal(self) -> str: ...


@dataclass(frozen=True)
class ConfigurationRequest:
    """What to check: ``CONFIGURATION [FROM SERVICE from_service] [TO SERVICE to_service] ON
    CONTRACT contract [ENCRYPTION {ON | OFF | ANONYMOUS}]``.

    Attributes:
        from_service: the initiating service (None: the target side only).
        to_service: the target service (None: the initiating side only).
        contract: the contract (ssbdiagnose's default: ``DEFAULT``).
        encryption: ``"ON"``, ``"OFF"`` or ``"ANONYMOUS"``: the dialog security a dialog to a
            remote target must have (ignored for a target in this database: never encrypted).
        principal: the user beginning the dialog (``dbo`` may do everything).
        broker_instance: TO SERVICE's ``broker_id``: the target's ``service_broker_guid``
            (canonical text), or None for any (a dialog begun naming that instance).

    Raises:
        BrokerError: neither service given, or an unknown encryption.
    """

    from_service: str | None
    to_service: str | None
    contract: str = "DEFAULT"
    encryption: str = "ON"
    principal: str = "dbo"
    broker_instance: str | None = None

    def __post_init__(self) -> None:
        if self.from_service is None and self.to_service is None:
            raise BrokerError("CONFIGURATION needs FROM SERVICE, TO SERVICE or both")
        if self.encryption.upper() not in ENCRYPTIONS:
            raise BrokerError(f"ENCRYPTION must be ON, OFF or ANONYMOUS, got {self.encryption!r}")
        object.__setattr__(self, "encryption", self.encryption.upper())


def procedure_problem(name: str) -> tuple[str, str] | None:
    """Whether the activation procedure ``"package.module:function"`` can be imported (the
    module imported, the attribute looked up and checked callable; the procedure is not run).

    Returns:
        None when it imports; ``("unimportable", why)`` when a well-formed dotted path does
        not; ``("in-process", why)`` when the name is no import path at all (a callable given
        to CREATE QUEUE is stored as ``module:qualname``: a lambda, a nested function or a
        ``functools.partial`` only the process that registered it can run).
    """
    module_name, _, attr = name.partition(":")
    if not _DOTTED.match(module_name) or not _DOTTED.match(attr):
        return ("in-process", f"{name!r} is not an importable 'package.module:function' path")
    try:
        obj: object = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # ImportError, AttributeError, or the module failing to import
        return ("unimportable", f"{type(exc).__name__}: {exc}")
    if not callable(obj):
        return ("unimportable", f"{name!r} is not callable")
    return None


def check_configuration(
    broker: _Diagnosed,
    from_service: str | None,
    to_service: str | None,
    contract: str = "DEFAULT",
    *,
    encryption: str = "ON",
    principal: str | None = None,
    broker_instance: str | None = None,
) -> list[Finding]:
    """ssbdiagnose's CONFIGURATION report on ``broker``'s catalog (read fresh).

    Args:
        broker: the broker whose database holds the services.
        from_service: the initiating service name, or None.
        to_service: the target service name (here, or reached by a route), or None.
        contract: the contract name (default ``DEFAULT``).
        encryption: ``"ON"`` (default), ``"OFF"`` or ``"ANONYMOUS"`` (see
            :class:`ConfigurationRequest`).
        principal: the user who begins the dialog (default the broker's principal).
        broker_instance: the target's broker instance (ssbdiagnose's TO SERVICE ``name,
            broker_id``), or None.

    Returns:
        The findings, in the order checked (see the module docstring); empty or infos only
        when the dialog has all it needs.

    Raises:
        BrokerError: neither service given, a bad ``encryption``; StorageError: the database
            cannot be read.
    """
    request = ConfigurationRequest(
        from_service,
        to_service,
        contract,
        encryption,
        principal or broker.principal,
        None if broker_instance is None else normalize_broker_instance(broker_instance),
    )
    return configuration_findings(
        broker.catalog,
        request,
        now=broker.clock.now(),
        wall_now=time.time(),
        registered=broker.activation.has_named_procedure,
        import_problem=procedure_problem,
    )


def configuration_findings(
    snap: CatalogSnapshot,
    request: ConfigurationRequest,
    *,
    now: float,
    wall_now: float,
    registered: Callable[[str], bool],
    import_problem: Callable[[str], tuple[str, str] | None],
) -> list[Finding]:
    """The CONFIGURATION checks, pure (see the module docstring).

    Args:
        snap: the catalog.
        request: the services, contract, encryption and principal to check.
        now: broker-clock seconds (route lifetimes).
        wall_now: seconds since the epoch (certificate validity, as dialog security checks it).
        registered: whether a procedure name (without ``:``) is registered in this process.
        import_problem: :func:`procedure_problem` or a stand-in.

    Returns:
        The findings in the order checked.
    """
    out: list[Finding] = []
    contract = snap.contracts.get(request.contract)
    if contract is None:
        out.append(
            finding(
                "SBD-CFG-CONTRACT-MISSING",
                f"Contract {request.contract!r} does not exist.",
                f"CREATE CONTRACT [{request.contract}] (… SENT BY INITIATOR, …) — "
                f"broker.create_contract({request.contract!r}, {{message_type: 'INITIATOR'}}).",
                contract=request.contract,
            )
        )
    else:
        out.extend(_contract_checks(snap, contract))
    checked_queues: set[str] = set()
    if request.from_service is not None:
        service = snap.services.get(request.from_service)
        if service is None:
            out.append(
                finding(
                    "SBD-CFG-FROM-SERVICE-MISSING",
                    f"The initiating service {request.from_service!r} does not exist in this "
                    "database (BEGIN DIALOG's FROM SERVICE must be local).",
                    f"CREATE SERVICE [{request.from_service}] ON QUEUE <queue> — "
                    f"broker.create_service({request.from_service!r}, queue=…).",
                    service=request.from_service,
                )
            )
        else:
            out.extend(
                _queue_checks(
                    snap, service, "initiating", checked_queues, registered, import_problem
                )
            )
    if request.to_service is not None:
        target = _local_target(snap, request.to_service, request.broker_instance, now)
        if target is not None:
            out.extend(
                _queue_checks(snap, target, "target", checked_queues, registered, import_problem)
            )
            out.extend(_local_target_checks(snap, request, target, now))
            if request.from_service is None:  # the initiator may be another broker
                out.extend(inbound_findings(snap, target.name))
        else:
            out.extend(
                remote_target_findings(
                    snap,
                    request.to_service,
                    request.contract,
                    encryption=request.encryption,
                    principal=request.principal,
                    broker_instance=request.broker_instance,
                    now=now,
                    wall_now=wall_now,
                )
            )
    if contract is not None and request.from_service and request.to_service:
        out.extend(_priority_checks(snap, request, contract.service_contract_id))
    return out


def _local_target(
    snap: CatalogSnapshot, name: str, broker_instance: str | None, now: float
) -> ServiceDef | None:
    """The target service when dialogs to it stay in this database: it exists here and no
    broker instance is named, or the one named is this database's, or the routes still deliver
    here (RTE-2 step 5); else None (a remote target)."""
    target = snap.services.get(name)
    if target is None or broker_instance is None:
        return target
    if snap.service_broker_guid is not None and str(snap.service_broker_guid) == broker_instance:
        return target
    route = route_to(snap, name, broker_instance, now)
    return target if route is not None and route.is_local else None


def _contract_checks(snap: CatalogSnapshot, contract: ContractDef) -> list[Finding]:
    """The contract lets the initiator send something; its message types (info)."""
    name = contract.name
    usages = [
        (snap.message_types_by_id[mt_id], who)
        for mt_id, who in sorted(contract.sent_by.items())
        if mt_id in snap.message_types_by_id
    ]
    out = []
    if not any(who in ("INITIATOR", "ANY") for _, who in usages):
        out.append(
            finding(
                "SBD-CFG-CONTRACT-NO-INITIATOR-MESSAGE",
                f"Contract {name!r} has no message type SENT BY INITIATOR or ANY: the initiator "
                "can send nothing, so no dialog under it can begin.",
                f"DROP CONTRACT [{name}] and create it again with a message type SENT BY "
                "INITIATOR.",
                contract=name,
            )
        )
    listed = ", ".join(
        f"{mt.name} (SENT BY {who}, VALIDATION = {mt.validation})" for mt, who in usages
    )
    out.append(
        finding(
            "SBD-CFG-CONTRACT-MESSAGE-TYPES",
            f"Contract {name!r}: {listed or 'no message types'}. A body that fails its message "
            "type's validation is refused at SEND.",
            "Nothing to do; a remote target's broker needs the same contract and message types.",
            contract=name,
            message_types=", ".join(mt.name for mt, _ in usages),
        )
    )
    return out


def _queue_checks(
    snap: CatalogSnapshot,
    service: ServiceDef,
    role: str,
    checked: set[str],
    registered: Callable[[str], bool],
    import_problem: Callable[[str], tuple[str, str] | None],
) -> list[Finding]:
    """The service's queue: ON, and its activation (once per queue: ``checked`` remembers)."""
    queue = snap.queues_by_id[service.queue_id]
    if queue.name in checked:
        return []
    checked.add(queue.name)
    out = []
    if not queue.status:
        out.append(
            finding(
                "SBD-CFG-QUEUE-DISABLED",
                f"Queue {queue.name!r} of the {role} service {service.name!r} is OFF (STATUS = "
                "OFF): messages to it wait in the transmission queue and RECEIVE fails.",
                f"ALTER QUEUE [{queue.name}] WITH STATUS = ON — "
                f"broker.alter_queue({queue.name!r}, status=True) (if poison handling turned it "
                "OFF, fix what made the transaction roll back first).",
                service=service.name,
                queue=queue.name,
            )
        )
    out.extend(_activation_checks(snap, queue, registered, import_problem))
    return out


def _activation_checks(
    snap: CatalogSnapshot,
    queue: QueueDef,
    registered: Callable[[str], bool],
    import_problem: Callable[[str], tuple[str, str] | None],
) -> list[Finding]:
    """The queue's ACTIVATION: ON or OFF, readers, the procedure, its EXECUTE AS user."""
    procedure = queue.activation_procedure
    if procedure is None:
        return []
    out = []
    names = {"queue": queue.name, "procedure": procedure}
    if not queue.activation_enabled:
        out.append(
            finding(
                "SBD-CFG-ACTIVATION-OFF",
                f"Queue {queue.name!r} has the activation procedure {procedure!r}, turned OFF: "
                "messages wait until a program RECEIVEs them.",
                f"If the procedure should read it: ALTER QUEUE [{queue.name}] WITH ACTIVATION "
                "(STATUS = ON).",
                **names,
            )
        )
    elif queue.max_queue_readers == 0:
        out.append(
            finding(
                "SBD-CFG-ACTIVATION-NO-READERS",
                f"Queue {queue.name!r} has activation ON with MAX_QUEUE_READERS = 0: no "
                f"procedure {procedure!r} is ever started.",
                f"ALTER QUEUE [{queue.name}] WITH ACTIVATION (MAX_QUEUE_READERS = 1).",
                **names,
            )
        )
    if ":" in procedure:
        problem = import_problem(procedure)
        if problem is not None and problem[0] == "in-process":
            out.append(
                finding(
                    "SBD-CFG-ACTIVATION-PROCEDURE-IN-PROCESS",
                    f"Queue {queue.name!r}: the activation procedure {short_repr(procedure)} is "
                    "a callable given in a process, no import path: only that process can start "
                    "it, no other broker process can.",
                    "Nothing while one broker process runs the queue; for several, name a "
                    "module-level function 'package.module:function' in Activation(...), or "
                    "Broker.register_procedure a name in every process.",
                    **names,
                )
            )
        elif problem is not None:
            out.append(
                finding(
                    "SBD-CFG-ACTIVATION-PROCEDURE-UNIMPORTABLE",
                    f"Queue {queue.name!r}: the activation procedure {procedure!r} cannot be "
                    f"imported ({problem[1]}); every activation fails.",
                    "Install the module in the broker's environment or correct the name: "
                    f"ALTER QUEUE [{queue.name}] WITH ACTIVATION (PROCEDURE_NAME = "
                    "'package.module:function').",
                    **names,
                )
            )
    elif not registered(procedure):
        out.append(
            finding(
                "SBD-CFG-ACTIVATION-PROCEDURE-REGISTERED",
                f"Queue {queue.name!r}: the activation procedure {procedure!r} is a name; every "
                "process that activates the queue must register it (this one has not, which "
                "is expected of a diagnosing process).",
                f"In each broker process: broker.register_procedure({procedure!r}, fn).",
                **names,
            )
        )
    user = procedure_principal(queue.execute_as)
    principal = snap.principals.get(user)
    if user != "dbo" and principal is None:
        out.append(
            finding(
                "SBD-CFG-ACTIVATION-USER-MISSING",
                f"Queue {queue.name!r}: the activation runs as user {user!r} (EXECUTE AS), who "
                "does not exist; the procedure's first transaction fails.",
                f"CREATE USER [{user}] — broker.create_user({user!r}) — or ALTER QUEUE "
                f"[{queue.name}] WITH ACTIVATION (EXECUTE AS OWNER).",
                queue=queue.name,
                user=user,
            )
        )
    elif principal is not None and not snap.has_permission(
        principal.principal_id, "RECEIVE", f"QUEUE::{queue.name}"
    ):
        out.append(
            finding(
                "SBD-CFG-PERMISSION-RECEIVE",
                f"Queue {queue.name!r}: the activation runs as user {user!r}, who lacks RECEIVE "
                "on it; every RECEIVE of the procedure is refused.",
                f"GRANT RECEIVE ON [{queue.name}] TO [{user}] — "
                f"broker.grant('RECEIVE', on='QUEUE::{queue.name}', to={user!r}).",
                queue=queue.name,
                user=user,
            )
        )
    return out


def _local_target_checks(
    snap: CatalogSnapshot, request: ConfigurationRequest, target: ServiceDef, now: float
) -> list[Finding]:
    """A target in this database: the contract bound to it, no route elsewhere, SEND."""
    out = []
    contract = snap.contracts.get(request.contract)
    if contract is not None and contract.service_contract_id not in target.contract_ids:
        out.append(
            finding(
                "SBD-CFG-CONTRACT-NOT-ON-TARGET",
                f"Target service {target.name!r} does not accept contract {contract.name!r}: "
                "a dialog under it is answered with an Error and ended.",
                f"ALTER SERVICE [{target.name}] (ADD CONTRACT [{contract.name}]) — "
                f"broker.alter_service({target.name!r}, add_contracts=[{contract.name!r}]).",
                service=target.name,
                contract=contract.name,
            )
        )
    route = route_to(snap, target.name, None, now)
    if route is not None and not route.is_local:
        out.append(
            finding(
                "SBD-CFG-ROUTE-ELSEWHERE",
                f"Target service {target.name!r} exists here, but route {route.route_name!r} "
                f"sends dialogs to it to {route.address}: they do not reach this database's "
                "service.",
                f"DROP ROUTE [{route.route_name}] if the local service is meant, or begin the "
                "dialog naming this broker instance.",
                service=target.name,
                route=route.route_name,
                address=route.address,
            )
        )
    principal = snap.principals.get(request.principal)
    if principal is None:
        out.append(missing_principal(request.principal))
    elif principal.principal_id != DBO and not snap.has_permission(
        principal.principal_id, "SEND", f"SERVICE::{target.name}"
    ):
        out.append(
            finding(
                "SBD-CFG-PERMISSION-SEND",
                f"User {request.principal!r} lacks SEND on service {target.name!r}: its SEND "
                "(and BEGIN DIALOG's first message) is refused.",
                f"GRANT SEND ON SERVICE::[{target.name}] TO [{request.principal}] — "
                f"broker.grant('SEND', on='SERVICE::{target.name}', to={request.principal!r}).",
                service=target.name,
                user=request.principal,
            )
        )
    return out


def _priority_checks(
    snap: CatalogSnapshot, request: ConfigurationRequest, contract_id: int
) -> list[Finding]:
    """PRI-6: the level each endpoint of a new dialog gets (info; only when priorities exist)."""
    if not snap.priorities:
        return []
    assert request.from_service is not None and request.to_service is not None
    initiator = snap.level(contract_id, request.from_service, request.to_service)
    text = f"initiator endpoint level {initiator}"
    if request.to_service in snap.services:
        target = snap.level(contract_id, request.to_service, request.from_service)
        text += f", target endpoint level {target}"
    honor = "ON" if snap.honor_broker_priority else "OFF"
    return [
        finding(
            "SBD-CFG-PRIORITY",
            f"Conversation priorities ({len(snap.priorities)} defined) give dialogs from "
            f"{request.from_service!r} to {request.to_service!r} on {request.contract!r}: "
            f"{text}. RECEIVE takes higher levels first; the transmission queue does when "
            f"HONOR_BROKER_PRIORITY is ON (it is {honor}).",
            "Nothing to do; CREATE / ALTER BROKER PRIORITY to change the levels.",
            contract=request.contract,
            levels=text,
        )
    ]
