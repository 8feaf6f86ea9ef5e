"""The catalog statements — CREATE / ALTER / DROP MESSAGE TYPE, CONTRACT, QUEUE, SERVICE, EVENT
NOTIFICATION and BROKER PRIORITY — each a function of an open write transaction (``conn``) and
the catalog snapshot it checks against. They validate, raise :class:`CatalogError` naming the
object at fault, and write through the storage's named catalog statements; the caller bumps the
catalog version and commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import CatalogError
from ..messages import VALIDATIONS
from ..priorities import ANY, BrokerPriority
from ..storage.base import StorageConnection
from .model import (
    EVENT_TYPES,
    NAME_LIMIT,
    SENT_BY,
    SERVICE_STRING_LIMIT,
    SYSTEM_MESSAGE_TYPES,
    Activation,
    CatalogSnapshot,
    QueueDef,
    check_name,
)


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
    check_name("queue", name)
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
    contracts: Iterable[str],
) -> None:
    """CREATE SERVICE ON QUEUE (contracts). Raises :class:`CatalogError` for a bad or taken name,
    an unknown queue or contract."""
    check_name("service", name)
    if name in snap.services:
        raise CatalogError(f"service {name!r} already exists")
    if isinstance(contracts, str | bytes) or not isinstance(contracts, Iterable):
        raise CatalogError(
            f"service {name!r}: contracts must be a list of contract names, got {contracts!r}"
        )
    q = snap.queue(queue)
    contract_ids = {snap.contract(c).service_contract_id for c in tuple(contracts)}
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
    check_name("TO SERVICE", to_service, limit=SERVICE_STRING_LIMIT)
    conn.catalog_write("insert_event_notification", (name, q.queue_id, event, to_service))


def drop_event_notification(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP EVENT NOTIFICATION. Raises :class:`CatalogError` for an unknown name."""
    en = snap.event_notifications.get(name)
    if en is None:
        raise CatalogError(f"event notification {name!r} does not exist")
    conn.catalog_write("delete_event_notification", (en.event_notification_id,))


# -- broker priorities (PRI-2) ------------------------------------------------------------


def _criterion(kind: str, value: object) -> str | None:
    """A priority criterion: None for ANY, else the name (CONTRACT_NAME and LOCAL_SERVICE_NAME
    are identifiers, REMOTE_SERVICE_NAME an nvarchar(256) string: CREATE BROKER PRIORITY)."""
    if value == ANY:
        return None
    limit = SERVICE_STRING_LIMIT if kind == "REMOTE_SERVICE_NAME" else NAME_LIMIT
    return check_name(f"broker priority {kind}", value, limit=limit)


def _level(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise CatalogError(
            f"broker priority {name!r}: PRIORITY_LEVEL must be an integer from 1 to 10, got {value!r}"
        )
    return value


def create_broker_priority(
    conn: StorageConnection,
    existing: Mapping[str, BrokerPriority],
    name: str,
    *,
    contract_name: str,
    local_service_name: str,
    remote_service_name: str,
    priority_level: int,
) -> None:
    """CREATE BROKER PRIORITY (PRI-2). Raises :class:`CatalogError` for a bad or taken name, a
    bad criterion, or a level outside 1..10."""
    check_name("broker priority", name)
    if name in existing:
        raise CatalogError(f"broker priority {name!r} already exists")
    conn.catalog_write(
        "insert_broker_priority",
        (
            name,
            _criterion("CONTRACT_NAME", contract_name),
            _criterion("LOCAL_SERVICE_NAME", local_service_name),
            _criterion("REMOTE_SERVICE_NAME", remote_service_name),
            _level(name, priority_level),
        ),
    )


def alter_broker_priority(
    conn: StorageConnection,
    existing: Mapping[str, BrokerPriority],
    name: str,
    *,
    contract_name: str | None,
    local_service_name: str | None,
    remote_service_name: str | None,
    priority_level: int | None,
) -> None:
    """ALTER BROKER PRIORITY: change the criteria and level given (None keeps one); existing
    conversations keep their levels (PRI-5). Raises :class:`CatalogError` for an unknown name
    or bad values."""
    p = existing.get(name)
    if p is None:
        raise CatalogError(f"broker priority {name!r} does not exist")
    conn.catalog_write(
        "update_broker_priority",
        (
            p.service_contract_name
            if contract_name is None
            else _criterion("CONTRACT_NAME", contract_name),
            p.local_service_name
            if local_service_name is None
            else _criterion("LOCAL_SERVICE_NAME", local_service_name),
            p.remote_service_name
            if remote_service_name is None
            else _criterion("REMOTE_SERVICE_NAME", remote_service_name),
            p.priority if priority_level is None else _level(name, priority_level),
            p.priority_id,
        ),
    )


def drop_broker_priority(
    conn: StorageConnection, existing: Mapping[str, BrokerPriority], name: str
) -> None:
    """DROP BROKER PRIORITY. Raises :class:`CatalogError` for an unknown name."""
    p = existing.get(name)
    if p is None:
        raise CatalogError(f"broker priority {name!r} does not exist")
    conn.catalog_write("delete_broker_priority", (p.priority_id,))
