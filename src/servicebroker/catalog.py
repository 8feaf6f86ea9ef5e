"""The catalog: message types, contracts, queues and services (CREATE/ALTER/DROP statements),
their validation, and the in-memory snapshot the engine reads on every statement.

The snapshot is rebuilt whenever the stored ``catalog_version`` changes, so a catalog change made
by any process is seen by the next transaction of every other.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .dialogs import DIALOG_TIMER, END_DIALOG, ERROR
from .errors import CatalogError
from .messages import VALIDATIONS
from .priorities import DEFAULT_LEVEL, BrokerPriority, priority_level
from .storage.base import CatalogRows, StorageConnection

if TYPE_CHECKING:
    from .broker import Broker

__all__ = [
    "SYSTEM_MESSAGE_TYPES",
    "Activation",
    "ActivationContext",
    "CatalogSnapshot",
    "ContractDef",
    "MessageTypeDef",
    "QueueDef",
    "ServiceDef",
    "check_name",
    "resolve_procedure",
]

SYSTEM_MESSAGE_TYPES = frozenset({END_DIALOG, ERROR, DIALOG_TIMER})
SENT_BY = ("INITIATOR", "TARGET", "ANY")
MAX_QUEUE_READERS = 32767
_NAME_LIMIT = 256


@dataclass(frozen=True)
class ActivationContext:
    """What an activated procedure is called with: the broker and the queue it serves."""

    broker: Broker
    queue_name: str


Procedure = Callable[[ActivationContext], object]


@dataclass(frozen=True)
class Activation:
    """A queue's ACTIVATION clause (QUE-1, ACT-7).

    Args:
        procedure: a ``"package.module:function"`` string, or a callable taking an
            :class:`ActivationContext`. A callable is stored by its import path; a process that
            cannot import it runs the callable object only where it was registered.
        max_queue_readers: 0..32767 instances at once (0 activates nothing).
        status: activation ON (True) or OFF.

    Raises:
        CatalogError: a bad procedure or a reader count out of range.
    """

    procedure: str | Procedure
    max_queue_readers: int = 1
    status: bool = True

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_queue_readers, bool)
            or not isinstance(self.max_queue_readers, int)
            or not (0 <= self.max_queue_readers <= MAX_QUEUE_READERS)
        ):
            raise CatalogError(
                f"MAX_QUEUE_READERS must be an integer from 0 to {MAX_QUEUE_READERS}, "
                f"got {self.max_queue_readers!r}"
            )
        if isinstance(self.procedure, str):
            module, _, func = self.procedure.partition(":")
            if not module or not func:
                raise CatalogError(
                    f"activation procedure {self.procedure!r} must be 'package.module:function'"
                )
        elif not callable(self.procedure):
            raise CatalogError(
                f"activation procedure must be a string or a callable, got {self.procedure!r}"
            )
        if not isinstance(self.status, bool):
            raise CatalogError(f"activation status must be True or False, got {self.status!r}")

    @property
    def procedure_name(self) -> str:
        """The procedure's ``module:qualname`` as stored in the catalog."""
        if isinstance(self.procedure, str):
            return self.procedure
        module = getattr(self.procedure, "__module__", "?")
        name = getattr(self.procedure, "__qualname__", repr(self.procedure))
        return f"{module}:{name}"


def resolve_procedure(name: str) -> Procedure:
    """Import ``"package.module:function"``.

    Raises:
        CatalogError: the module or the attribute cannot be found, or it is not callable.
    """
    module_name, _, attr = name.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise CatalogError(f"cannot import activation procedure {name!r}: {exc}") from exc
    if not callable(obj):
        raise CatalogError(f"activation procedure {name!r} is not callable")
    return obj  # type: ignore[no-any-return]


def check_name(kind: str, name: object, *, limit: int = _NAME_LIMIT) -> str:
    """Validate an object name (compared byte for byte, case-sensitively: DLG-1).

    Raises:
        CatalogError: not a string, empty or blank, longer than ``limit`` characters, or holding
            a control character.
    """
    if not isinstance(name, str):
        raise CatalogError(f"{kind} name must be a string, got {type(name).__name__} {name!r}")
    if not name.strip():
        raise CatalogError(f"{kind} name must not be empty")
    if len(name) > limit:
        raise CatalogError(f"{kind} name {name[:40]!r}… is longer than {limit} characters")
    if any(ord(c) < 32 for c in name):
        raise CatalogError(f"{kind} name {name!r} holds a control character")
    return name


@dataclass(frozen=True, slots=True)
class MessageTypeDef:
    """A message type: its id, name and validation (NONE, EMPTY, WELL_FORMED_XML, JSON)."""

    message_type_id: int
    name: str
    validation: str
    is_system: bool

    @property
    def validation_code(self) -> str:
        """The QUE-2 ``validation`` letter."""
        return VALIDATIONS[self.validation]


@dataclass(frozen=True, slots=True)
class ContractDef:
    """A contract and, per message type id, who may send it (INITIATOR, TARGET, ANY)."""

    service_contract_id: int
    name: str
    sent_by: Mapping[int, str]
    is_system: bool

    def allows(self, message_type_id: int, *, initiator: bool) -> bool:
        """True when the side (initiator or target) may send that message type (DLG-2)."""
        who = self.sent_by.get(message_type_id)
        return who == "ANY" or who == ("INITIATOR" if initiator else "TARGET")


@dataclass(frozen=True, slots=True)
class QueueDef:
    """A queue's settings (QUE-1)."""

    queue_id: int
    name: str
    status: bool
    retention: bool
    poison_message_handling: bool
    activation_enabled: bool
    activation_procedure: str | None
    max_queue_readers: int
    modify_date: float


@dataclass(frozen=True, slots=True)
class ServiceDef:
    """A service, its queue and the contracts it accepts as a target."""

    service_id: int
    name: str
    queue_id: int
    contract_ids: frozenset[int]


EVENT_TYPES = ("QUEUE_ACTIVATION", "BROKER_QUEUE_DISABLED")
"""EVT-1: the queue events a notification can be registered for."""
EVENT_NOTIFICATION = "http://schemas.microsoft.com/SQL/Notifications/EventNotification"
POST_EVENT_NOTIFICATION = "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"
EVENT_NOTIFICATION_SERVICE = (
    "http://schemas.microsoft.com/SQL/Notifications/EventNotificationService"
)


@dataclass(frozen=True, slots=True)
class EventNotificationDef:
    """CREATE EVENT NOTIFICATION ``name`` ON QUEUE … FOR ``event_type`` TO SERVICE
    ``to_service`` (EVT-1); ``conversation_handle`` is the dialog its messages travel on."""

    event_notification_id: int
    name: str
    queue_id: int
    event_type: str
    to_service: str
    conversation_handle: bytes | None


@dataclass(frozen=True)
class CatalogSnapshot:
    """The catalog at one version, indexed by name and id."""

    version: int
    message_types: dict[str, MessageTypeDef] = field(default_factory=dict)
    message_types_by_id: dict[int, MessageTypeDef] = field(default_factory=dict)
    contracts: dict[str, ContractDef] = field(default_factory=dict)
    contracts_by_id: dict[int, ContractDef] = field(default_factory=dict)
    queues: dict[str, QueueDef] = field(default_factory=dict)
    queues_by_id: dict[int, QueueDef] = field(default_factory=dict)
    services: dict[str, ServiceDef] = field(default_factory=dict)
    services_by_id: dict[int, ServiceDef] = field(default_factory=dict)
    event_notifications: dict[str, EventNotificationDef] = field(default_factory=dict)
    priorities: dict[str, BrokerPriority] = field(default_factory=dict)
    honor_broker_priority: bool = False
    """The database option HONOR_BROKER_PRIORITY (PRI-16), OFF unless set."""

    @classmethod
    def from_rows(cls, rows: CatalogRows) -> CatalogSnapshot:
        """Build the snapshot from the storage's catalog rows."""
        snap = cls(version=rows.version, honor_broker_priority=rows.honor_broker_priority)
        for mt_id, name, validation, is_system in rows.message_types:
            mt = MessageTypeDef(mt_id, name, validation, bool(is_system))
            snap.message_types[name] = mt
            snap.message_types_by_id[mt_id] = mt
        usages: dict[int, dict[int, str]] = {}
        for c_id, mt_id, sent_by in rows.contract_usages:
            usages.setdefault(c_id, {})[mt_id] = sent_by
        for c_id, name, is_system in rows.contracts:
            contract = ContractDef(c_id, name, usages.get(c_id, {}), bool(is_system))
            snap.contracts[name] = contract
            snap.contracts_by_id[c_id] = contract
        for q in rows.queues:
            queue = QueueDef(
                q[0], q[1], bool(q[2]), bool(q[3]), bool(q[4]), bool(q[5]), q[6], q[7], q[8]
            )
            snap.queues[queue.name] = queue
            snap.queues_by_id[queue.queue_id] = queue
        contracts_of: dict[int, set[int]] = {}
        for s_id, c_id in rows.service_contracts:
            contracts_of.setdefault(s_id, set()).add(c_id)
        for s_id, name, queue_id in rows.services:
            service = ServiceDef(s_id, name, queue_id, frozenset(contracts_of.get(s_id, ())))
            snap.services[name] = service
            snap.services_by_id[s_id] = service
        for row in rows.event_notifications:
            en = EventNotificationDef(*row)
            snap.event_notifications[en.name] = en
        for priority_row in rows.broker_priorities:
            bp = BrokerPriority(*priority_row)
            snap.priorities[bp.name] = bp
        return snap

    def level(self, contract_id: int, local_service: str, remote_service: str) -> int:
        """The level of a new endpoint (PRI-6) from this catalog's priorities."""
        if not self.priorities:
            return DEFAULT_LEVEL
        contract = self.contracts_by_id[contract_id].name
        return priority_level(self.priorities.values(), contract, local_service, remote_service)

    def notifications(self, queue_id: int, event_type: str) -> list[EventNotificationDef]:
        """The event notifications registered on a queue for one event type."""
        return [
            en
            for en in self.event_notifications.values()
            if en.queue_id == queue_id and en.event_type == event_type
        ]

    def message_type(self, name: object) -> MessageTypeDef:
        """The message type called ``name``; raises :class:`CatalogError` if there is none."""
        mt = self.message_types.get(name) if isinstance(name, str) else None
        if mt is None:
            raise CatalogError(f"message type {name!r} does not exist")
        return mt

    def contract(self, name: object) -> ContractDef:
        """The contract called ``name``; raises :class:`CatalogError` if there is none."""
        contract = self.contracts.get(name) if isinstance(name, str) else None
        if contract is None:
            raise CatalogError(f"contract {name!r} does not exist")
        return contract

    def queue(self, name: object) -> QueueDef:
        """The queue called ``name``; raises :class:`CatalogError` if there is none."""
        queue = self.queues.get(name) if isinstance(name, str) else None
        if queue is None:
            raise CatalogError(f"queue {name!r} does not exist")
        return queue

    def service(self, name: object) -> ServiceDef:
        """The service called ``name``; raises :class:`CatalogError` if there is none."""
        service = self.services.get(name) if isinstance(name, str) else None
        if service is None:
            raise CatalogError(f"service {name!r} does not exist")
        return service


# -- catalog statements: each runs inside an open write transaction of ``conn`` ----------------


def create_message_type(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, validation: str
) -> None:
    """CREATE MESSAGE TYPE (DLG-3). Raises :class:`CatalogError` on a bad or taken name or an
    unknown validation."""
    check_name("message type", name)
    if not isinstance(validation, str) or validation.upper() not in VALIDATIONS:
        raise CatalogError(
            f"message type {name!r}: VALIDATION must be one of {', '.join(VALIDATIONS)}, got {validation!r}"
        )
    if name in snap.message_types:
        raise CatalogError(f"message type {name!r} already exists")
    conn.catalog_write("insert_message_type", (name, validation.upper()))


def drop_message_type(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP MESSAGE TYPE. Raises :class:`CatalogError` for a system type, one a contract uses,
    or one that messages still carry."""
    mt = snap.message_type(name)
    if mt.is_system:
        raise CatalogError(f"message type {name!r} is built in and cannot be dropped")
    users = [c.name for c in snap.contracts.values() if mt.message_type_id in c.sent_by]
    if users:
        raise CatalogError(
            f"message type {name!r} is used by contract(s) {', '.join(sorted(users))}"
        )
    if conn.catalog_count("messages_using_message_type", (mt.message_type_id,)):
        raise CatalogError(f"message type {name!r} is carried by messages still queued")
    conn.catalog_write("delete_message_type", (mt.message_type_id,))


def create_contract(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, messages: Mapping[str, str]
) -> None:
    """CREATE CONTRACT (DLG-2): ``messages`` maps message type names to INITIATOR, TARGET or ANY.

    Raises:
        CatalogError: bad or taken name, unknown message type, a system message type, a bad
            SENT BY value, or no message type the initiator may send.
    """
    check_name("contract", name)
    if name in snap.contracts:
        raise CatalogError(f"contract {name!r} already exists")
    if not isinstance(messages, Mapping) or not messages:
        raise CatalogError(
            f"contract {name!r} needs a mapping of message types to INITIATOR, TARGET or ANY"
        )
    resolved: list[tuple[int, str]] = []
    for mt_name, sent_by in messages.items():
        mt = snap.message_type(mt_name)
        if mt.name in SYSTEM_MESSAGE_TYPES:
            raise CatalogError(
                f"contract {name!r}: system message type {mt_name!r} belongs to every contract already"
            )
        who = sent_by.upper() if isinstance(sent_by, str) else sent_by
        if who not in SENT_BY:
            raise CatalogError(
                f"contract {name!r}: message type {mt_name!r} must be SENT BY INITIATOR, TARGET or ANY, got {sent_by!r}"
            )
        resolved.append((mt.message_type_id, who))
    if not any(who in ("INITIATOR", "ANY") for _, who in resolved):
        raise CatalogError(
            f"contract {name!r} must let the initiator send at least one message type"
        )
    contract_id = conn.catalog_write("insert_contract", (name,))
    for mt_id, who in resolved:
        conn.catalog_write("insert_contract_usage", (contract_id, mt_id, who))


def drop_contract(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP CONTRACT. Raises :class:`CatalogError` for DEFAULT, a contract a service uses, or one
    with open conversations."""
    contract = snap.contract(name)
    if contract.is_system:
        raise CatalogError(f"contract {name!r} is built in and cannot be dropped")
    users = [
        s.name for s in snap.services.values() if contract.service_contract_id in s.contract_ids
    ]
    if users:
        raise CatalogError(f"contract {name!r} is used by service(s) {', '.join(sorted(users))}")
    if conn.catalog_count("endpoints_using_contract", (contract.service_contract_id,)):
        raise CatalogError(f"contract {name!r} has open conversations")
    conn.catalog_write("delete_contract", (contract.service_contract_id,))


def _queue_values(
    name: str, status: object, retention: object, poison: object, activation: Activation | None
) -> tuple[bool, bool, bool, bool, str | None, int]:
    for label, value in (
        ("STATUS", status),
        ("RETENTION", retention),
        ("POISON_MESSAGE_HANDLING", poison),
    ):
        if not isinstance(value, bool):
            raise CatalogError(f"queue {name!r}: {label} must be True or False, got {value!r}")
    if activation is not None and not isinstance(activation, Activation):
        raise CatalogError(
            f"queue {name!r}: activation must be an Activation(...), got {activation!r}"
        )
    act_on = activation is not None and activation.status
    proc = activation.procedure_name if activation is not None else None
    readers = activation.max_queue_readers if activation is not None else 0
    return bool(status), bool(retention), bool(poison), act_on, proc, readers


def create_queue(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    *,
    status: bool,
    retention: bool,
    poison_message_handling: bool,
    activation: Activation | None,
    now: float,
) -> None:
    """CREATE QUEUE (QUE-1). Raises :class:`CatalogError` on a bad or taken name or bad values."""
    check_name("queue", name, limit=128)
    if name in snap.queues:
        raise CatalogError(f"queue {name!r} already exists")
    values = _queue_values(name, status, retention, poison_message_handling, activation)
    conn.catalog_write("insert_queue", (name, *values, now))


def alter_queue(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    *,
    status: bool | None,
    retention: bool | None,
    poison_message_handling: bool | None,
    activation: Activation | None,
    now: float,
) -> QueueDef:
    """ALTER QUEUE (QUE-1): ``None`` keeps a setting. Returns the queue as it was before.
    Raises :class:`CatalogError` for an unknown queue or bad values."""
    q = snap.queue(name)
    values = _queue_values(
        name,
        q.status if status is None else status,
        q.retention if retention is None else retention,
        q.poison_message_handling if poison_message_handling is None else poison_message_handling,
        activation,
    )
    if activation is None:
        values = (*values[:3], q.activation_enabled, q.activation_procedure, q.max_queue_readers)
    conn.catalog_write("update_queue", (*values, now, q.queue_id))
    return q


def drop_queue(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> QueueDef:
    """DROP QUEUE: its messages go with it. Raises :class:`CatalogError` while a service uses it."""
    q = snap.queue(name)
    users = [s.name for s in snap.services.values() if s.queue_id == q.queue_id]
    if users:
        raise CatalogError(
            f"queue {name!r} is used by service(s) {', '.join(sorted(users))}; drop them first"
        )
    conn.delete_queue_messages(q.queue_id)
    conn.catalog_write("delete_queue", (q.queue_id,))
    return q


def create_service(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    queue: str,
    contracts: tuple[str, ...],
) -> None:
    """CREATE SERVICE ON QUEUE (contracts). Raises :class:`CatalogError` for a bad or taken name,
    an unknown queue or contract."""
    check_name("service", name)
    if name in snap.services:
        raise CatalogError(f"service {name!r} already exists")
    if isinstance(contracts, str):
        raise CatalogError(
            f"service {name!r}: contracts must be a list of names, not the string {contracts!r}"
        )
    q = snap.queue(queue)
    contract_ids = {snap.contract(c).service_contract_id for c in contracts}
    service_id = conn.catalog_write("insert_service", (name, q.queue_id))
    for c_id in sorted(contract_ids):
        conn.catalog_write("insert_service_contract", (service_id, c_id))


def drop_service(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP SERVICE. Raises :class:`CatalogError` for an unknown service or one with open
    conversations (end them first)."""
    service = snap.service(name)
    if conn.catalog_count("endpoints_using_service", (service.service_id,)):
        raise CatalogError(f"service {name!r} has open conversations; end them first")
    conn.catalog_write("delete_service", (service.service_id,))


def create_event_notification(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    queue: str,
    event: str,
    to_service: str,
) -> None:
    """CREATE EVENT NOTIFICATION ``name`` ON QUEUE ``queue`` FOR ``event`` TO SERVICE
    ``to_service`` (EVT-1). Raises :class:`CatalogError` for a bad or taken name, an unknown
    queue, an event other than QUEUE_ACTIVATION or BROKER_QUEUE_DISABLED, or a bad service name."""
    check_name("event notification", name)
    if name in snap.event_notifications:
        raise CatalogError(f"event notification {name!r} already exists")
    q = snap.queue(queue)
    if event not in EVENT_TYPES:
        raise CatalogError(
            f"event notification {name!r}: event must be one of {', '.join(EVENT_TYPES)}, got {event!r}"
        )
    check_name("service", to_service)
    conn.catalog_write("insert_event_notification", (name, q.queue_id, event, to_service))


def drop_event_notification(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP EVENT NOTIFICATION. Raises :class:`CatalogError` for an unknown name."""
    en = snap.event_notifications.get(name)
    if en is None:
        raise CatalogError(f"event notification {name!r} does not exist")
    conn.catalog_write("delete_event_notification", (en.event_notification_id,))
