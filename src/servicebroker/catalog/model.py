"""The catalog's definitions: message types, contracts, queues, services, event notifications,
broker priorities and XML schema collections as frozen records, the queue's ACTIVATION clause,
name checks, and the :class:`CatalogSnapshot` the engine reads on every statement (rebuilt
whenever the stored ``catalog_version`` changes, so a change made by any process is seen by the
next transaction of every other)."""

from __future__ import annotations

import importlib
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..arguments import short_repr
from ..dialogs import DIALOG_TIMER, END_DIALOG, ERROR
from ..errors import BrokerError, CatalogError
from ..messages import VALIDATIONS
from ..storage.rows import (
    CatalogRows,
    CertificateRow,
    EventNotificationRow,
    LoginRow,
    PrincipalRow,
    RemoteServiceBindingRow,
    RouteRow,
    ServiceBrokerEndpointRow,
)
from .priorities import DEFAULT_LEVEL, BrokerPriority, priority_level
from .xml_schemas import SchemaDocument, XmlSchemaCollectionDef

__all__ = [
    "DBO",
    "NAME_LIMIT",
    "PUBLIC",
    "SERVICE_STRING_LIMIT",
    "SYSTEM_MESSAGE_TYPES",
    "Activation",
    "CatalogSnapshot",
    "ContractDef",
    "MessageTypeDef",
    "QueueDef",
    "ServiceDef",
    "check_name",
    "resolve_procedure",
]

PUBLIC = 0
"""The principal_id of the role ``public``: a grant to it counts for every principal (SEC-4)."""
DBO = 1
"""The principal_id of ``dbo``: the default principal, which may do everything."""

SYSTEM_MESSAGE_TYPES = frozenset({END_DIALOG, ERROR, DIALOG_TIMER})
SENT_BY = ("INITIATOR", "TARGET", "ANY")
MAX_QUEUE_READERS = 32767
NAME_LIMIT = 128
"""A catalog object's name is a sysname: up to 128 characters (CREATE MESSAGE TYPE, CREATE
CONTRACT: "can be up to 128 characters"; CREATE SERVICE: "a valid sysname")."""
SERVICE_STRING_LIMIT = 256
"""BEGIN DIALOG's TO SERVICE and a priority's REMOTE_SERVICE_NAME are nvarchar(256)."""
_BAD_NAME_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


Procedure = Callable[[Any], object]
"""An activated procedure: called with an ``ActivationContext`` (the broker and the queue)."""


@dataclass(frozen=True)
class Activation:
    """A queue's ACTIVATION clause (QUE-1, ACT-7).

    Args:
        procedure: a ``"package.module:function"`` string, the name of a procedure registered
            with :meth:`Broker.register_procedure` (a T-SQL procedure name such as
            ``"ProcessOrders"``: no ``:``), or a callable taking an ``ActivationContext``. A
            callable is stored by its import path; a process that cannot import it runs the
            callable object only where it was registered.
        max_queue_readers: 0..32767 instances at once (0 activates nothing).
        status: activation ON (True) or OFF.
        execute_as: EXECUTE AS ``"SELF"`` (the default), ``"OWNER"`` or a user name: the
            transactions the activated procedure opens act as that principal (SELF and OWNER:
            ``dbo``, the queue's creator; SEC-4); a user that does not exist when the procedure
            starts makes its first transaction fail (logged). Shown in
            ``views.service_queues()``.

    Raises:
        CatalogError: a bad procedure or a reader count out of range.
    """

    procedure: str | Procedure
    max_queue_readers: int = 1
    status: bool = True
    execute_as: str = "SELF"

    def __post_init__(self) -> None:
        if not isinstance(self.execute_as, str) or not self.execute_as.strip():
            raise CatalogError(
                f"activation EXECUTE AS must be 'SELF', 'OWNER' or a user name, "
                f"got {self.execute_as!r}"
            )
        if self.execute_as.upper() in ("SELF", "OWNER"):
            object.__setattr__(self, "execute_as", self.execute_as.upper())
        else:
            check_name("EXECUTE AS user", self.execute_as, limit=128)
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
            module, colon, func = self.procedure.partition(":")
            if colon and (not module or not func):
                raise CatalogError(
                    f"activation procedure {self.procedure!r} must be 'package.module:function' "
                    f"or the name of a procedure registered with Broker.register_procedure"
                )
            if not colon:
                check_name("activation procedure", self.procedure)
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


def check_name(
    kind: str,
    name: object,
    *,
    limit: int = NAME_LIMIT,
    error: type[BrokerError] = CatalogError,
) -> str:
    """The one check of every name that enters the broker: catalog object names (a sysname, up
    to 128 characters), a TO SERVICE string and a priority's REMOTE_SERVICE_NAME (nvarchar(256),
    ``limit=SERVICE_STRING_LIMIT``). Names are compared byte for byte, case-sensitively (DLG-1);
    see docs/limits.md for the reference page of each limit.

    Args:
        kind: what the name names, for the message ("queue", "TO SERVICE", …); a queue name
            beginning with ``#`` is refused (CREATE QUEUE: "queue names starting with # are
            not valid"); message type, contract and service names may begin with ``#``.
        name: the value given.
        limit: the most characters allowed.
        error: the :class:`BrokerError` subclass to raise (``ConversationError`` for BEGIN
            DIALOG's TO SERVICE).

    Returns:
        ``name``, a ``str``.

    Raises:
        CatalogError (or ``error``): not a string, empty or blank, longer than ``limit``
            characters, holding a control character (U+0000..U+001F, U+007F..U+009F) or a
            lone surrogate (not encodable text), or a queue name beginning with ``#``.
    """
    if not isinstance(name, str):
        raise error(f"{kind} name must be a string, got {type(name).__name__} {short_repr(name)}")
    if not name.strip():
        raise error(f"{kind} name must not be empty")
    if len(name) > limit:
        raise error(f"{kind} name {name[:40]!r}… is {len(name)} characters; the limit is {limit}")
    bad = _BAD_NAME_CHARACTER.search(name)
    if bad is not None:
        what = "a lone surrogate" if bad.group() >= "\ud800" else "a control character"
        raise error(f"{kind} name {name!r} holds {what} (U+{ord(bad.group()):04X})")
    if kind == "queue" and name.startswith("#"):
        raise error(f"queue name {name!r} begins with '#': a queue cannot be a temporary object")
    return name


@dataclass(frozen=True, slots=True)
class MessageTypeDef:
    """A message type: its id, name and validation (NONE, EMPTY, WELL_FORMED_XML, VALID_XML,
    JSON); ``xml_collection`` the XML schema collection a VALID_XML type validates against."""

    message_type_id: int
    name: str
    validation: str
    is_system: bool
    xml_collection: XmlSchemaCollectionDef | None = None

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
    execute_as: str = "SELF"
    """ACTIVATION's EXECUTE AS (SELF, OWNER or a user name): the principal the activated
    procedure's transactions act as (SELF and OWNER: dbo; SEC-4)."""


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


EventNotificationDef = EventNotificationRow
"""CREATE EVENT NOTIFICATION ``name`` ON QUEUE … FOR ``event_type`` TO SERVICE
    ``to_service`` (EVT-1); ``conversation_handle`` is the dialog its messages travel on."""


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
    service_broker_guid: uuid.UUID | None = None
    """The database's Service Broker identifier (sys.databases ``service_broker_guid``; None
    only for a snapshot not read from a database)."""
    certificates: dict[str, CertificateRow] = field(default_factory=dict)
    """CREATE CERTIFICATE: by name (the transport's authentication, SEC-1)."""
    certificates_by_id: dict[int, CertificateRow] = field(default_factory=dict)
    service_broker_endpoint: ServiceBrokerEndpointRow | None = None
    """The one Service Broker endpoint (CREATE ENDPOINT … FOR SERVICE_BROKER), or None."""
    logins: dict[str, LoginRow] = field(default_factory=dict)
    """CREATE LOGIN … FROM CERTIFICATE: by name."""
    endpoint_grants: frozenset[int] = frozenset()
    """The ``login_id`` of each login granted CONNECT on the endpoint (SEC-1)."""
    routes: dict[str, RouteRow] = field(default_factory=dict)
    """The routing table (RTE-1), by name; expired routes included (they are never removed)."""
    principals: dict[str, PrincipalRow] = field(default_factory=dict)
    """The database principals by name: public (0), dbo (1) and CREATE USER's users."""
    principals_by_id: dict[int, PrincipalRow] = field(default_factory=dict)
    grants: frozenset[tuple[int, str, str]] = frozenset()
    """SEC-4: ``(grantee_principal_id, permission, securable)`` of each permission granted,
    the securable as ``"SERVICE::name"`` / ``"QUEUE::name"``."""
    remote_service_bindings: dict[str, RemoteServiceBindingRow] = field(default_factory=dict)
    """CREATE REMOTE SERVICE BINDING (SEC-3), by name."""
    xml_schema_collections: dict[str, XmlSchemaCollectionDef] = field(default_factory=dict)
    """CREATE XML SCHEMA COLLECTION, by name."""
    xml_schema_collections_by_id: dict[int, XmlSchemaCollectionDef] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: CatalogRows) -> CatalogSnapshot:
        """Build the snapshot from the storage's catalog rows."""
        snap = cls(
            version=rows.version,
            honor_broker_priority=rows.honor_broker_priority,
            service_broker_guid=(
                uuid.UUID(rows.service_broker_guid) if rows.service_broker_guid else None
            ),
        )
        documents: dict[int, list[SchemaDocument]] = {}
        for d in rows.xml_schema_documents:
            documents.setdefault(d.xml_collection_id, []).append(
                SchemaDocument(d.target_namespace, d.document)
            )
        for x in rows.xml_schema_collections:
            collection = XmlSchemaCollectionDef(
                x.xml_collection_id,
                x.name,
                x.create_date,
                x.modify_date,
                tuple(documents.get(x.xml_collection_id, ())),
            )
            snap.xml_schema_collections[x.name] = collection
            snap.xml_schema_collections_by_id[x.xml_collection_id] = collection
        for m in rows.message_types:
            mt = MessageTypeDef(
                m.message_type_id,
                m.name,
                m.validation,
                bool(m.is_system),
                snap.xml_schema_collections_by_id.get(m.xml_collection_id)
                if m.xml_collection_id is not None
                else None,
            )
            snap.message_types[mt.name] = mt
            snap.message_types_by_id[mt.message_type_id] = mt
        usages: dict[int, dict[int, str]] = {}
        for u in rows.contract_usages:
            usages.setdefault(u.service_contract_id, {})[u.message_type_id] = u.sent_by
        for c in rows.contracts:
            c_id = c.service_contract_id
            contract = ContractDef(c_id, c.name, usages.get(c_id, {}), bool(c.is_system))
            snap.contracts[c.name] = contract
            snap.contracts_by_id[c_id] = contract
        for q in rows.queues:
            queue = QueueDef(
                q.queue_id,
                q.name,
                bool(q.is_receive_enabled),
                bool(q.is_retention_enabled),
                bool(q.is_poison_message_handling_enabled),
                bool(q.is_activation_enabled),
                q.activation_procedure,
                q.max_readers,
                q.modify_date,
                q.execute_as,
            )
            snap.queues[queue.name] = queue
            snap.queues_by_id[queue.queue_id] = queue
        contracts_of: dict[int, set[int]] = {}
        for sc in rows.service_contracts:
            contracts_of.setdefault(sc.service_id, set()).add(sc.service_contract_id)
        for s in rows.services:
            service = ServiceDef(
                s.service_id, s.name, s.queue_id, frozenset(contracts_of.get(s.service_id, ()))
            )
            snap.services[s.name] = service
            snap.services_by_id[s.service_id] = service
        for en in rows.event_notifications:
            snap.event_notifications[en.name] = en
        for bp in rows.broker_priorities:
            snap.priorities[bp.name] = bp
        for cert in rows.certificates:
            snap.certificates[cert.name] = cert
            snap.certificates_by_id[cert.certificate_id] = cert
        for login in rows.logins:
            snap.logins[login.name] = login
        for route in rows.routes:
            snap.routes[route.name] = route
        for principal in rows.principals:
            snap.principals[principal.name] = principal
            snap.principals_by_id[principal.principal_id] = principal
        for binding in rows.remote_service_bindings:
            snap.remote_service_bindings[binding.name] = binding
        grants = set()
        for p in rows.permissions:
            found = (snap.services_by_id if p.class_ == "SERVICE" else snap.queues_by_id).get(
                p.major_id
            )
            if found is not None and p.state == "G":
                grants.add((p.grantee_principal_id, p.permission_name, f"{p.class_}::{found.name}"))
        object.__setattr__(snap, "grants", frozenset(grants))
        endpoint = rows.service_broker_endpoints[0] if rows.service_broker_endpoints else None
        endpoint_grants = frozenset(
            g.login_id
            for g in rows.endpoint_grants
            if endpoint is not None and g.endpoint_id == endpoint.endpoint_id
        )
        object.__setattr__(snap, "service_broker_endpoint", endpoint)
        object.__setattr__(snap, "endpoint_grants", endpoint_grants)
        return snap

    def certificates_owned_by(self, principal_id: int) -> list[CertificateRow]:
        """The certificates ``principal_id`` owns, by id (dbo, 1: those of no owner too)."""
        return [
            c
            for c in self.certificates_by_id.values()
            if (c.principal_id if c.principal_id is not None else DBO) == principal_id
        ]

    def principal_of_thumbprint(self, thumbprint: str) -> PrincipalRow | None:
        """The user (not dbo) owning a certificate whose SHA-1 ``thumbprint`` (hex, any case) is
        this: how a remote broker or service presenting that certificate is identified (SEC-2,
        SEC-3); None when no user owns one."""
        wanted = thumbprint.lower()
        for cert in self.certificates_by_id.values():
            if (
                cert.principal_id not in (None, DBO)
                and cert.thumbprint.lower() == wanted
                and cert.principal_id in self.principals_by_id
            ):
                return self.principals_by_id[cert.principal_id]
        return None

    def binding_for(self, service_name: str) -> RemoteServiceBindingRow | None:
        """The remote service binding of the service ``service_name`` (byte-for-byte match of
        its REMOTE_SERVICE_NAME, SEC-3), or None."""
        for binding in self.remote_service_bindings.values():
            if binding.remote_service_name == service_name:
                return binding
        return None

    def has_permission(self, principal_id: int, permission: str, securable: str) -> bool:
        """SEC-4: whether ``principal_id`` holds ``permission`` ("SEND", "RECEIVE") on
        ``securable`` (``"SERVICE::name"``, ``"QUEUE::name"``): dbo always does; a grant to
        public (0) counts for every principal."""
        if principal_id == DBO:
            return True
        return (principal_id, permission, securable) in self.grants or (
            PUBLIC,
            permission,
            securable,
        ) in self.grants

    def principal(self, name: object) -> PrincipalRow:
        """The database principal called ``name``; raises :class:`CatalogError` if none."""
        return _find(self.principals, "database principal", name)

    def remote_service_binding(self, name: object) -> RemoteServiceBindingRow:
        """The remote service binding called ``name``; raises :class:`CatalogError` if none."""
        return _find(self.remote_service_bindings, "remote service binding", name)

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
        return _find(self.message_types, "message type", name)

    def contract(self, name: object) -> ContractDef:
        """The contract called ``name``; raises :class:`CatalogError` if there is none."""
        return _find(self.contracts, "contract", name)

    def queue(self, name: object) -> QueueDef:
        """The queue called ``name``; raises :class:`CatalogError` if there is none."""
        return _find(self.queues, "queue", name)

    def service(self, name: object) -> ServiceDef:
        """The service called ``name``; raises :class:`CatalogError` if there is none."""
        return _find(self.services, "service", name)

    def certificate(self, name: object) -> CertificateRow:
        """The certificate called ``name``; raises :class:`CatalogError` if there is none."""
        return _find(self.certificates, "certificate", name)

    def login(self, name: object) -> LoginRow:
        """The login called ``name``; raises :class:`CatalogError` if there is none."""
        return _find(self.logins, "login", name)

    def route(self, name: object) -> RouteRow:
        """The route called ``name``; raises :class:`CatalogError` if there is none."""
        return _find(self.routes, "route", name)

    def xml_schema_collection(self, name: object) -> XmlSchemaCollectionDef:
        """The XML schema collection called ``name``; raises :class:`CatalogError` if there is
        none."""
        return _find(self.xml_schema_collections, "XML schema collection", name)


_Def = TypeVar("_Def")


def _find(table: Mapping[str, _Def], kind: str, name: object) -> _Def:
    """``table[name]``, or :class:`CatalogError` "<kind> <name> does not exist" (also for a
    name that is not a string)."""
    found = table.get(name) if isinstance(name, str) else None
    if found is None:
        raise CatalogError(f"{kind} {name!r} does not exist")
    return found
