"""The catalog views — ``sys.services``, ``sys.service_contracts``, ``sys.service_message_types``,
``sys.service_contract_message_usages``, ``sys.service_contract_usages``,
``sys.service_queue_usages``, ``sys.conversation_priorities``, ``sys.event_notifications``,
``sys.xml_schema_collections`` and ``sys.xml_schema_namespaces`` — as frozen dataclass rows
with SQL Server's column names, built by pure functions from a :class:`CatalogSnapshot`
(``broker.views`` calls them on a fresh snapshot).

Where SQL Server has only an id, a readable ``*_name`` column follows it. ``principal_id`` is
always None: these objects keep no owner (AUTHORIZATION is read and ignored; database
principals own only certificates, :mod:`.principal_views`). ``xml_collection_id`` names the
XML schema collection of a VALID_XML message type (docs/reference.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..clock import to_datetime
from .model import CatalogSnapshot

__all__ = [
    "CatalogViews",
    "ConversationPriorityRow",
    "EventNotificationRow",
    "ServiceContractMessageUsageRow",
    "ServiceContractRow",
    "ServiceContractUsageRow",
    "ServiceMessageTypeRow",
    "ServiceQueueUsageRow",
    "ServiceRow",
    "XmlSchemaCollectionRow",
    "XmlSchemaNamespaceRow",
    "conversation_priorities",
    "event_notifications",
    "service_contract_message_usages",
    "service_contract_usages",
    "service_contracts",
    "service_message_types",
    "service_queue_usages",
    "services",
    "xml_schema_collections",
    "xml_schema_namespaces",
]

VALIDATION_DESC = {"N": "NONE", "E": "EMPTY", "X": "XML", "J": "JSON"}
"""``sys.service_message_types.validation_desc`` by ``validation`` letter (JSON is this
project's own validation)."""


@dataclass(frozen=True)
class ServiceRow:
    """A row of ``sys.services``: the service, the queue it receives on (``service_queue_id``,
    and its name)."""

    name: str
    service_id: int
    principal_id: int | None
    service_queue_id: int
    service_queue_name: str


@dataclass(frozen=True)
class ServiceContractRow:
    """A row of ``sys.service_contracts`` (DEFAULT and the built-in contracts included)."""

    name: str
    service_contract_id: int
    principal_id: int | None


@dataclass(frozen=True)
class ServiceMessageTypeRow:
    """A row of ``sys.service_message_types``: ``validation`` is N (NONE), E (EMPTY), X
    (WELL_FORMED_XML and VALID_XML) or J (JSON), ``validation_desc`` NONE, EMPTY, XML or JSON;
    ``xml_collection_id`` the XML schema collection of a VALID_XML type, else None."""

    name: str
    message_type_id: int
    principal_id: int | None
    validation: str
    validation_desc: str
    xml_collection_id: int | None


@dataclass(frozen=True)
class ServiceContractMessageUsageRow:
    """A row of ``sys.service_contract_message_usages``: one (contract, message type) pair and
    which side may send it (SENT BY INITIATOR, TARGET or ANY: both flags)."""

    service_contract_id: int
    service_contract_name: str
    message_type_id: int
    message_type_name: str
    is_sent_by_initiator: bool
    is_sent_by_target: bool


@dataclass(frozen=True)
class ServiceContractUsageRow:
    """A row of ``sys.service_contract_usages``: a contract a service accepts as a target."""

    service_id: int
    service_name: str
    service_contract_id: int
    service_contract_name: str


@dataclass(frozen=True)
class ServiceQueueUsageRow:
    """A row of ``sys.service_queue_usages``: the queue a service uses (one per service)."""

    service_id: int
    service_name: str
    service_queue_id: int
    service_queue_name: str


@dataclass(frozen=True)
class ConversationPriorityRow:
    """A row of ``sys.conversation_priorities`` (PRI-2): a None criterion means ANY."""

    priority_id: int
    name: str
    service_contract_id: int | None
    service_contract_name: str | None
    local_service_id: int | None
    local_service_name: str | None
    remote_service_name: str | None
    priority: int


@dataclass(frozen=True)
class EventNotificationRow:
    """A row of ``sys.event_notifications`` for a notification ON QUEUE (EVT-1): the parent is
    the queue (``parent_class`` 1, OBJECT_OR_COLUMN); ``event_type`` (of ``sys.events``) and
    ``queue_name`` are added; ``broker_instance`` is always ``'current database'``."""

    name: str
    object_id: int
    parent_class: int
    parent_class_desc: str
    parent_id: int
    queue_name: str
    event_type: str
    service_name: str
    broker_instance: str
    principal_id: int | None
    creator_sid: bytes | None


@dataclass(frozen=True)
class XmlSchemaCollectionRow:
    """A row of ``sys.xml_schema_collections``: ``schema_id`` 1 (dbo: names have no schema
    here), ``principal_id`` None (no owner); dates UTC datetimes on the broker's clock."""

    xml_collection_id: int
    schema_id: int
    principal_id: int | None
    name: str
    create_date: datetime | None
    modify_date: datetime | None


@dataclass(frozen=True)
class XmlSchemaNamespaceRow:
    """A row of ``sys.xml_schema_namespaces``: a target namespace of a collection (blank for
    none) and its 1-based ordinal within the collection, in the order the namespaces came."""

    xml_collection_id: int
    name: str
    xml_namespace_id: int


def services(cat: CatalogSnapshot) -> list[ServiceRow]:
    """``sys.services``, by ``service_id``."""
    return [
        ServiceRow(s.name, s.service_id, None, s.queue_id, cat.queues_by_id[s.queue_id].name)
        for s in sorted(cat.services_by_id.values(), key=lambda s: s.service_id)
    ]


def service_contracts(cat: CatalogSnapshot) -> list[ServiceContractRow]:
    """``sys.service_contracts``, by ``service_contract_id``."""
    return [
        ServiceContractRow(c.name, c.service_contract_id, None)
        for c in sorted(cat.contracts_by_id.values(), key=lambda c: c.service_contract_id)
    ]


def service_message_types(cat: CatalogSnapshot) -> list[ServiceMessageTypeRow]:
    """``sys.service_message_types``, by ``message_type_id``."""
    return [
        ServiceMessageTypeRow(
            m.name,
            m.message_type_id,
            None,
            m.validation_code,
            VALIDATION_DESC[m.validation_code],
            m.xml_collection.xml_collection_id if m.xml_collection is not None else None,
        )
        for m in sorted(cat.message_types_by_id.values(), key=lambda m: m.message_type_id)
    ]


def service_contract_message_usages(cat: CatalogSnapshot) -> list[ServiceContractMessageUsageRow]:
    """``sys.service_contract_message_usages``, by contract then message type id."""
    return [
        ServiceContractMessageUsageRow(
            c.service_contract_id,
            c.name,
            mt_id,
            cat.message_types_by_id[mt_id].name,
            c.sent_by[mt_id] in ("INITIATOR", "ANY"),
            c.sent_by[mt_id] in ("TARGET", "ANY"),
        )
        for c in sorted(cat.contracts_by_id.values(), key=lambda c: c.service_contract_id)
        for mt_id in sorted(c.sent_by)
    ]


def service_contract_usages(cat: CatalogSnapshot) -> list[ServiceContractUsageRow]:
    """``sys.service_contract_usages``, by service then contract id."""
    return [
        ServiceContractUsageRow(s.service_id, s.name, c_id, cat.contracts_by_id[c_id].name)
        for s in sorted(cat.services_by_id.values(), key=lambda s: s.service_id)
        for c_id in sorted(s.contract_ids)
    ]


def service_queue_usages(cat: CatalogSnapshot) -> list[ServiceQueueUsageRow]:
    """``sys.service_queue_usages``, by service id."""
    return [
        ServiceQueueUsageRow(s.service_id, s.name, s.service_queue_id, s.service_queue_name)
        for s in services(cat)
    ]


def conversation_priorities(cat: CatalogSnapshot) -> list[ConversationPriorityRow]:
    """``sys.conversation_priorities``, by ``priority_id``; the contract and local service
    ids resolved from the names the catalog keeps (None for ANY)."""
    rows = []
    for p in sorted(cat.priorities.values(), key=lambda p: p.priority_id):
        contract = cat.contracts.get(p.service_contract_name or "")
        local = cat.services.get(p.local_service_name or "")
        rows.append(
            ConversationPriorityRow(
                p.priority_id,
                p.name,
                contract.service_contract_id if contract else None,
                p.service_contract_name,
                local.service_id if local else None,
                p.local_service_name,
                p.remote_service_name,
                p.priority,
            )
        )
    return rows


def event_notifications(cat: CatalogSnapshot) -> list[EventNotificationRow]:
    """``sys.event_notifications``, by ``object_id``."""
    return [
        EventNotificationRow(
            en.name,
            en.event_notification_id,
            1,
            "OBJECT_OR_COLUMN",
            en.queue_id,
            cat.queues_by_id[en.queue_id].name,
            en.event_type,
            en.to_service,
            "current database",
            None,
            None,
        )
        for en in sorted(cat.event_notifications.values(), key=lambda e: e.event_notification_id)
    ]


def xml_schema_collections(cat: CatalogSnapshot) -> list[XmlSchemaCollectionRow]:
    """``sys.xml_schema_collections``, by ``xml_collection_id``."""
    return [
        XmlSchemaCollectionRow(
            c.xml_collection_id,
            1,
            None,
            c.name,
            to_datetime(c.create_date),
            to_datetime(c.modify_date),
        )
        for c in sorted(
            cat.xml_schema_collections_by_id.values(), key=lambda c: c.xml_collection_id
        )
    ]


def xml_schema_namespaces(cat: CatalogSnapshot) -> list[XmlSchemaNamespaceRow]:
    """``sys.xml_schema_namespaces``, by collection then ``xml_namespace_id``."""
    return [
        XmlSchemaNamespaceRow(c.xml_collection_id, namespace, i)
        for c in sorted(
            cat.xml_schema_collections_by_id.values(), key=lambda c: c.xml_collection_id
        )
        for i, namespace in enumerate(c.namespaces, 1)
    ]


class CatalogViews:
    """The catalog views as methods (``broker.views`` has them): each reads the catalog fresh
    (:meth:`_snapshot`, which the subclass gives) and returns its rows."""

    def _snapshot(self) -> CatalogSnapshot:
        raise NotImplementedError

    def services(self) -> list[ServiceRow]:
        """``sys.services``: every service and its queue."""
        return services(self._snapshot())

    def service_contracts(self) -> list[ServiceContractRow]:
        """``sys.service_contracts``: every contract."""
        return service_contracts(self._snapshot())

    def service_message_types(self) -> list[ServiceMessageTypeRow]:
        """``sys.service_message_types``: every message type and its validation."""
        return service_message_types(self._snapshot())

    def service_contract_message_usages(self) -> list[ServiceContractMessageUsageRow]:
        """``sys.service_contract_message_usages``: each contract's message types, by side."""
        return service_contract_message_usages(self._snapshot())

    def service_contract_usages(self) -> list[ServiceContractUsageRow]:
        """``sys.service_contract_usages``: the contracts each service accepts as a target."""
        return service_contract_usages(self._snapshot())

    def service_queue_usages(self) -> list[ServiceQueueUsageRow]:
        """``sys.service_queue_usages``: the queue of each service."""
        return service_queue_usages(self._snapshot())

    def conversation_priorities(self) -> list[ConversationPriorityRow]:
        """``sys.conversation_priorities``: every conversation priority (PRI-2)."""
        return conversation_priorities(self._snapshot())

    def event_notifications(self) -> list[EventNotificationRow]:
        """``sys.event_notifications``: every event notification (EVT-1)."""
        return event_notifications(self._snapshot())

    def xml_schema_collections(self) -> list[XmlSchemaCollectionRow]:
        """``sys.xml_schema_collections``: every XML schema collection."""
        return xml_schema_collections(self._snapshot())

    def xml_schema_namespaces(self) -> list[XmlSchemaNamespaceRow]:
        """``sys.xml_schema_namespaces``: the target namespaces of each collection."""
        return xml_schema_namespaces(self._snapshot())
