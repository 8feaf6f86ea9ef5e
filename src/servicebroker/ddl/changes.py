"""The catalog statements — CREATE / ALTER / DROP MESSAGE TYPE, CONTRACT, QUEUE, SERVICE, EVENT
NOTIFICATION and BROKER PRIORITY — each a function of an open write transaction (``conn``) and
the catalog snapshot it checks against. They validate, raise :class:`CatalogError` naming the
object at fault, and write through the storage's named catalog statements; the caller bumps the
catalog version and commits. DROP SERVICE and DROP CONTRACT end the conversations that use the
object in the same transaction, through :class:`~servicebroker.engine.delivery.Applier` (the path END
CONVERSATION and a passed LIFETIME take).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..arguments import check_flag
from ..catalog.model import (
    EVENT_NOTIFICATION_SERVICE,
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
from ..catalog.priorities import ANY
from ..engine.delivery import Applier
from ..engine.system_messages import CONTRACT_DROPPED, SERVICE_DROPPED
from ..errors import CatalogError
from ..messages import VALIDATIONS
from ..storage.base import StorageConnection


def _validation(
    snap: CatalogSnapshot, name: str, validation: object, collection: object
) -> tuple[str, int | None]:
    """A message type's VALIDATION, upper case, and the id of its XML schema collection: one
    for VALID_XML WITH SCHEMA COLLECTION (it must exist: create-message-type-transact-sql.md),
    none for the others."""
    if not isinstance(validation, str) or validation.upper() not in VALIDATIONS:
        raise CatalogError(
            f"message type {name!r}: VALIDATION must be one of {', '.join(VALIDATIONS)}, "
            f"got {validation!r}"
        )
    value = validation.upper()
    if value != "VALID_XML":
        if collection is not None:
            raise CatalogError(
                f"message type {name!r}: an XML schema collection goes only with VALIDATION = "
                f"VALID_XML, not {value}"
            )
        return value, None
    if collection is None:
        raise CatalogError(
            f"message type {name!r}: VALIDATION = VALID_XML needs WITH SCHEMA COLLECTION "
            f"(xml_schema_collection=…)"
        )
    return value, snap.xml_schema_collection(collection).xml_collection_id


def create_message_type(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    validation: str,
    xml_schema_collection: str | None = None,
) -> None:
    """CREATE MESSAGE TYPE (DLG-3); VALID_XML names an existing XML schema collection.
    Raises :class:`CatalogError` on a bad or taken name, an unknown validation or collection,
    VALID_XML without a collection or a collection with another validation."""
    check_name("message type", name)
    value, collection_id = _validation(snap, name, validation, xml_schema_collection)
    if name in snap.message_types:
        raise CatalogError(f"message type {name!r} already exists")
    message_type_id = conn.catalog_write("insert_message_type", (name, value))
    if collection_id is not None:
        conn.catalog_write("set_message_type_xml_collection", (collection_id, message_type_id))


def drop_message_type(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP MESSAGE TYPE: refused while a contract refers to it (the reference's rule), and —
    beyond the reference — while messages of the type wait in a queue or the transmission
    queue (RECEIVE names each message's type). Raises :class:`CatalogError` for those and for
    a built-in type."""
    mt = snap.message_type(name)
    if mt.is_system:
        raise CatalogError(f"message type {name!r} is built in and cannot be dropped")
    users = [c.name for c in snap.contracts.values() if mt.message_type_id in c.sent_by]
    if users:
        raise CatalogError(
            f"cannot drop message type {name!r}: contract(s) {_names(users)} refer to it"
        )
    if conn.catalog_count("messages_using_message_type", (mt.message_type_id,)):
        raise CatalogError(
            f"cannot drop message type {name!r}: messages of this type still wait in a queue "
            f"or the transmission queue"
        )
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
            f"the service contract {name!r} must have at least one message SENT BY INITIATOR or ANY"
        )
    contract_id = conn.catalog_write("insert_contract", (name,))
    for mt_id, who in resolved:
        conn.catalog_write("insert_contract_usage", (contract_id, mt_id, who))


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in sorted(names))


def _end_conversations(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    now: float,
    *,
    service_id: int | None = None,
    contract_id: int | None = None,
) -> set[int]:
    """End every conversation endpoint of the service being dropped (the endpoint goes, its far
    side gets an Error) or of the contract being dropped (each endpoint gets an Error), in the
    catalog statement's transaction; returns the queues that got messages. The endpoints are
    found by a scan of them all, run only when the service or contract has live ones."""
    if not conn.catalog_count(
        "endpoints_using_service" if service_id is not None else "endpoints_using_contract",
        (service_id if service_id is not None else contract_id,),
    ):
        return set()
    rows = [
        e
        for e in conn.list_endpoints()
        if (
            e.service_id == service_id
            if service_id is not None
            else e.service_contract_id == contract_id
        )
    ]
    applier = Applier(conn, snap, now)
    applier.prefetch([e.conversation_id for e in rows])
    applier.lock_queues(())
    for e in rows:
        row = applier.endpoint(e.conversation_handle)
        if row is None:
            continue
        if service_id is not None:
            applier.remove(row, *SERVICE_DROPPED)
        elif row.state in ("ER", "CD"):
            applier.transmission.drop_endpoint(row)  # nothing may leave under the contract
        else:
            applier.fail(row, *CONTRACT_DROPPED)
    applier.finish()
    return applier.woken_queues


def drop_contract(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, *, now: float
) -> set[int]:
    """DROP CONTRACT: each endpoint of the conversations that use it is ended with an Error
    (code -8487) first on its queue and goes to ER; the application ends it. Returns the queues
    that got messages.

    Raises:
        CatalogError: an unknown or built-in contract, or one a service or a broker priority
            refers to.
    """
    contract = snap.contract(name)
    if contract.is_system:
        raise CatalogError(f"contract {name!r} is built in and cannot be dropped")
    users = [
        s.name for s in snap.services.values() if contract.service_contract_id in s.contract_ids
    ]
    if users:
        raise CatalogError(f"cannot drop contract {name!r}: service(s) {_names(users)} refer to it")
    priorities = [p.name for p in snap.priorities.values() if p.service_contract_name == name]
    if priorities:
        raise CatalogError(
            f"cannot drop contract {name!r}: broker priority(ies) {_names(priorities)} refer to it"
        )
    woken = _end_conversations(conn, snap, now, contract_id=contract.service_contract_id)
    conn.catalog_write("delete_contract", (contract.service_contract_id,))
    return woken


def _queue_values(
    name: str, status: object, retention: object, poison: object, activation: Activation | None
) -> tuple[bool, bool, bool, bool, str | None, int]:
    for label, value in (
        ("STATUS", status),
        ("RETENTION", retention),
        ("POISON_MESSAGE_HANDLING", poison),
    ):
        check_flag(value, f"queue {name!r}: {label}", error=CatalogError)
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
    queue_id = conn.catalog_write("insert_queue", (name, *values, now))
    if activation is not None and activation.execute_as != "SELF":
        conn.catalog_write("set_queue_execute_as", (activation.execute_as, queue_id))


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
    drop_activation: bool = False,
) -> QueueDef:
    """ALTER QUEUE (QUE-1): ``None`` keeps a setting; ``drop_activation`` is ACTIVATION (DROP),
    which deletes the queue's activation settings (alter-queue-transact-sql.md). Returns the
    queue as it was before.

    Raises:
        CatalogError: an unknown queue or bad values; ``drop_activation`` not a bool, or given
            with ``activation``.
    """
    if not isinstance(drop_activation, bool) or (drop_activation and activation is not None):
        raise CatalogError(
            f"queue {name!r}: drop_activation must be True or False and not given with "
            f"activation, got {drop_activation!r}"
        )
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
    if activation is not None:
        conn.catalog_write("set_queue_execute_as", (activation.execute_as, q.queue_id))
    if drop_activation:
        conn.catalog_write("drop_queue_activation", (now, q.queue_id))
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
    conn.catalog_write("delete_permissions_on", ("QUEUE", q.queue_id))  # SEC-4
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


def drop_service(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, *, now: float
) -> set[int]:
    """DROP SERVICE: the service's conversation endpoints and all their messages are deleted,
    and the far side of each of its open conversations gets an Error (code -8470, "Remote
    service has been dropped."). Returns the queues that got messages.

    Raises:
        CatalogError: an unknown or built-in service, or one a broker priority names as its
            LOCAL_SERVICE_NAME.
    """
    service = snap.service(name)
    if name == EVENT_NOTIFICATION_SERVICE:
        raise CatalogError(f"service {name!r} is built in and cannot be dropped")
    priorities = [p.name for p in snap.priorities.values() if p.local_service_name == name]
    if priorities:
        raise CatalogError(
            f"cannot drop service {name!r}: broker priority(ies) {_names(priorities)} refer to it"
        )
    woken = _end_conversations(conn, snap, now, service_id=service.service_id)
    conn.catalog_write("delete_permissions_on", ("SERVICE", service.service_id))  # SEC-4
    conn.catalog_write("delete_service", (service.service_id,))
    return woken


CURRENT_DATABASE = "current database"
"""CREATE EVENT NOTIFICATION … TO SERVICE 'svc', 'current database': the broker instance."""


def create_event_notification(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    queue: str,
    event: str,
    to_service: str,
    broker_instance: str = CURRENT_DATABASE,
) -> None:
    """CREATE EVENT NOTIFICATION ``name`` ON QUEUE ``queue`` FOR ``event`` TO SERVICE
    ``to_service``, ``broker_instance`` (EVT-1). Raises :class:`CatalogError` for a bad or
    taken name, an unknown queue, an event other than QUEUE_ACTIVATION or
    BROKER_QUEUE_DISABLED, a bad service name, or a broker instance other than
    ``'current database'`` (case-insensitive: the only broker instance served)."""
    check_name("event notification", name)
    if name in snap.event_notifications:
        raise CatalogError(f"event notification {name!r} already exists")
    q = snap.queue(queue)
    if event not in EVENT_TYPES:
        raise CatalogError(
            f"event notification {name!r}: event must be one of {', '.join(EVENT_TYPES)}, got {event!r}"
        )
    check_name("TO SERVICE", to_service, limit=SERVICE_STRING_LIMIT)
    if not isinstance(broker_instance, str) or broker_instance.lower() != CURRENT_DATABASE:
        raise CatalogError(
            f"event notification {name!r}: broker instance {broker_instance!r} is not served; "
            f"only {CURRENT_DATABASE!r} (this database's broker) is"
        )
    conn.catalog_write("insert_event_notification", (name, q.queue_id, event, to_service))


def drop_event_notification(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, queue: str | None = None
) -> None:
    """DROP EVENT NOTIFICATION ``name`` [ON QUEUE ``queue``]. Raises :class:`CatalogError` for
    an unknown name, or one that is not on ``queue`` when it is given."""
    en = snap.event_notifications.get(name)
    if en is None:
        raise CatalogError(f"event notification {name!r} does not exist")
    if queue is not None and snap.queue(queue).queue_id != en.queue_id:
        raise CatalogError(f"event notification {name!r} is not on queue {queue!r}")
    conn.catalog_write("delete_event_notification", (en.event_notification_id,))


# -- broker priorities (PRI-2) ------------------------------------------------------------


def _criterion(kind: str, value: object) -> str | None:
    """A priority criterion: None for ANY, else the name (CONTRACT_NAME and LOCAL_SERVICE_NAME
    are identifiers, REMOTE_SERVICE_NAME an nvarchar(256) string: CREATE BROKER PRIORITY)."""
    if value == ANY:
        return None
    limit = SERVICE_STRING_LIMIT if kind == "REMOTE_SERVICE_NAME" else NAME_LIMIT
    return check_name(f"broker priority {kind}", value, limit=limit)


def _named(snap: CatalogSnapshot, name: str, kind: str, value: object) -> str | None:
    """A CONTRACT_NAME or LOCAL_SERVICE_NAME criterion: ANY (None), or the name of a contract
    or service of this database (CREATE / ALTER BROKER PRIORITY: it "must specify the name of
    a contract [service] in the current database")."""
    criterion = _criterion(kind, value)
    if criterion is None:
        return None
    known = snap.contracts if kind == "CONTRACT_NAME" else snap.services
    if criterion not in known:
        what = "contract" if kind == "CONTRACT_NAME" else "service"
        raise CatalogError(
            f"broker priority {name!r}: {kind} {criterion!r} names no {what} of this database "
            f"(create the {what} first, or use ANY)"
        )
    return criterion


def _level(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise CatalogError(
            f"broker priority {name!r}: PRIORITY_LEVEL must be an integer from 1 to 10, got {value!r}"
        )
    return value


def create_broker_priority(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    *,
    contract_name: str,
    local_service_name: str,
    remote_service_name: str,
    priority_level: int,
) -> None:
    """CREATE BROKER PRIORITY (PRI-2). Raises :class:`CatalogError` for a bad or taken name, a
    bad criterion, a CONTRACT_NAME or LOCAL_SERVICE_NAME naming no contract or service of this
    database (REMOTE_SERVICE_NAME is any text), or a level outside 1..10."""
    check_name("broker priority", name)
    if name in snap.priorities:
        raise CatalogError(f"broker priority {name!r} already exists")
    conn.catalog_write(
        "insert_broker_priority",
        (
            name,
            _named(snap, name, "CONTRACT_NAME", contract_name),
            _named(snap, name, "LOCAL_SERVICE_NAME", local_service_name),
            _criterion("REMOTE_SERVICE_NAME", remote_service_name),
            _level(name, priority_level),
        ),
    )


def alter_broker_priority(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    *,
    contract_name: str | None,
    local_service_name: str | None,
    remote_service_name: str | None,
    priority_level: int | None,
) -> None:
    """ALTER BROKER PRIORITY: change the criteria and level given (None keeps one); existing
    conversations keep their levels (PRI-5). Raises :class:`CatalogError` for an unknown name,
    nothing to change, or bad values (as CREATE BROKER PRIORITY)."""
    p = snap.priorities.get(name)
    if p is None:
        raise CatalogError(f"broker priority {name!r} does not exist")
    if (contract_name, local_service_name, remote_service_name, priority_level) == (None,) * 4:
        raise CatalogError(
            f"ALTER BROKER PRIORITY {name!r}: SET must contain at least one of CONTRACT_NAME, "
            f"LOCAL_SERVICE_NAME, REMOTE_SERVICE_NAME or PRIORITY_LEVEL"
        )
    conn.catalog_write(
        "update_broker_priority",
        (
            p.service_contract_name
            if contract_name is None
            else _named(snap, name, "CONTRACT_NAME", contract_name),
            p.local_service_name
            if local_service_name is None
            else _named(snap, name, "LOCAL_SERVICE_NAME", local_service_name),
            p.remote_service_name
            if remote_service_name is None
            else _criterion("REMOTE_SERVICE_NAME", remote_service_name),
            p.priority if priority_level is None else _level(name, priority_level),
            p.priority_id,
        ),
    )


def drop_broker_priority(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP BROKER PRIORITY: existing conversations keep their levels. Raises
    :class:`CatalogError` for an unknown name."""
    p = snap.priorities.get(name)
    if p is None:
        raise CatalogError(f"broker priority {name!r} does not exist")
    conn.catalog_write("delete_broker_priority", (p.priority_id,))


# -- the ALTER statements of the T-SQL DDL (docs/ddl.md) ---------------------------------


def alter_message_type(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    validation: str,
    xml_schema_collection: str | None = None,
) -> None:
    """ALTER MESSAGE TYPE ``name`` VALIDATION = … [WITH SCHEMA COLLECTION …]
    (alter-message-type-transact-sql.md): messages already in a queue keep the validation they
    were sent with.

    Raises:
        CatalogError: an unknown or built-in message type, an unknown validation or
            collection, VALID_XML without a collection or a collection with another validation.
    """
    mt = snap.message_type(name)
    if mt.is_system:
        raise CatalogError(f"message type {name!r} is built in and cannot be altered")
    value, collection_id = _validation(snap, name, validation, xml_schema_collection)
    conn.catalog_write("update_message_type", (value, mt.message_type_id))
    conn.catalog_write("set_message_type_xml_collection", (collection_id, mt.message_type_id))


def alter_service(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    name: str,
    queue: str | None,
    add_contracts: Sequence[str],
    drop_contracts: Sequence[str],
) -> None:
    """ALTER SERVICE ``name`` [ON QUEUE ``queue``] [(ADD CONTRACT …, DROP CONTRACT …)]
    (alter-service-transact-sql.md). A dropped contract stops new conversations to the service
    on it; existing ones are unaffected. ON QUEUE moves a service that has no open
    conversations and no queued messages (SQL Server moves the messages too; here it refuses:
    end the conversations first — docs/ddl.md).

    Raises:
        CatalogError: an unknown service, queue or contract; a contract added that the service
            has, or dropped that it has not; ON QUEUE while the service has open conversations
            or messages.
    """
    service = snap.service(name)
    for label, names in (("ADD CONTRACT", add_contracts), ("DROP CONTRACT", drop_contracts)):
        if (
            isinstance(names, str)
            or not isinstance(names, (Sequence, set, frozenset))
            or not all(isinstance(n, str) for n in names)
        ):
            raise CatalogError(
                f"service {name!r}: {label} needs a list of contract names, got {names!r}"
            )
    for label, names in (("ADD CONTRACT", add_contracts), ("DROP CONTRACT", drop_contracts)):
        twice = sorted({n for n in names if list(names).count(n) > 1})
        if twice:
            raise CatalogError(f"service {name!r}: {label} {', '.join(twice)} given twice")
    both = set(add_contracts) & set(drop_contracts)
    if both:
        raise CatalogError(
            f"service {name!r}: contract(s) {', '.join(sorted(both))} both added and dropped"
        )
    adds = [snap.contract(c) for c in add_contracts]
    drops = [snap.contract(c) for c in drop_contracts]
    for c in adds:
        if c.service_contract_id in service.contract_ids:
            raise CatalogError(f"service {name!r} already has contract {c.name!r}")
    for c in drops:
        if c.service_contract_id not in service.contract_ids:
            raise CatalogError(f"service {name!r} does not have contract {c.name!r}")
    if queue is not None:
        q = snap.queue(queue)
        if q.queue_id != service.queue_id:
            if conn.catalog_count("messages_of_service", (service.service_id,)):
                raise CatalogError(
                    f"service {name!r} has open conversations or queued messages; ALTER "
                    f"SERVICE … ON QUEUE {queue!r} moves only a service without them here "
                    f"(end its conversations first)"
                )
            conn.catalog_write("update_service_queue", (q.queue_id, service.service_id))
    for c in sorted(adds, key=lambda c: c.service_contract_id):
        conn.catalog_write("insert_service_contract", (service.service_id, c.service_contract_id))
    for c in drops:
        conn.catalog_write("delete_service_contract", (service.service_id, c.service_contract_id))
