"""The rows of the storage contract (:mod:`.base`) as named types: what a backend returns from
its reads and takes for its writes. Named tuples, whose field order is the column order of the
queries that read them (built in C from the driver's tuples: RECEIVE's hot path); an endpoint is
a slotted dataclass, since a commit changes its working copy in place. Ids are 16-byte
``bytes``, times broker-clock seconds, stored flags the integers 0/1."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "BrokerPriorityRow",
    "CatalogRows",
    "CertificateRow",
    "ContractRow",
    "ContractUsageRow",
    "ConversationGroupListRow",
    "EndpointGrantRow",
    "EndpointListRow",
    "EndpointRow",
    "EventNotificationRow",
    "GroupClaimRow",
    "LoginRow",
    "MessageRow",
    "MessageTypeRow",
    "PermissionRow",
    "PrincipalRow",
    "QueueCountRow",
    "QueueInsert",
    "QueueRow",
    "ReadyGroupRow",
    "RemoteServiceBindingRow",
    "RouteRow",
    "ServiceBrokerEndpointRow",
    "ServiceContractRow",
    "ServiceRow",
    "StatisticsRow",
    "StreamReaderRow",
    "TransmissionListRow",
    "TransmissionRow",
    "TransmissionSummaryRow",
    "TransportMark",
    "TransportRow",
    "XmlSchemaCollectionRow",
    "XmlSchemaDocumentRow",
]


# -- queue rows --------------------------------------------------------------------------------
class MessageRow(NamedTuple):
    """A queue row as read (``queue_messages``).

    ``status``: 1 ready, 0 retained after RECEIVE, 3 retained sent message; ``queuing_order``:
    the row's number, increasing in commit order; ``validation``: the message type's validation
    when sent; ``message_enqueue_time``: broker-clock seconds at which it entered the queue (None
    for a message queued before migration 0007_conversation_sequences)."""

    status: int
    priority: int
    queuing_order: int
    conversation_group_id: bytes
    conversation_handle: bytes
    message_sequence_number: int
    service_id: int
    service_contract_id: int
    message_type_id: int
    validation: str
    message_body: bytes
    message_id: bytes
    queue_id: int
    message_enqueue_time: float | None


class QueueInsert(NamedTuple):
    """A queue row to insert (its ``queuing_order`` is assigned by the database).

    ``conversation_order`` is the receiving endpoint's ``endpoint_id`` and ``rank`` the SYS-2
    order of system messages within a conversation (0 DialogTimer, 1 Error, 2 the rest); with
    ``priority`` and ``message_sequence_number`` they give the RECEIVE order of a group.
    ``message_enqueue_time``: broker-clock seconds at which the message enters the queue."""

    queue_id: int
    status: int
    priority: int
    conversation_group_id: bytes
    conversation_handle: bytes
    conversation_order: int
    rank: int
    message_sequence_number: int
    service_id: int
    service_contract_id: int
    message_type_id: int
    validation: str
    message_body: bytes
    message_id: bytes
    message_enqueue_time: float


class ReadyGroupRow(NamedTuple):
    """How many ready (status 1) messages one conversation group of a queue holds
    (:meth:`StorageConnection.ready_group_counts`)."""

    queue_id: int
    conversation_group_id: bytes
    messages: int


class StatisticsRow(NamedTuple):
    """One broker object's published statistics (table ``broker_statistics``): ``updated`` the
    real time of publication (seconds since the epoch: liveness is real time, whatever the
    broker's clock); ``state`` ``running``, ``stopped`` (may start again) or ``closed``;
    ``snapshot`` the JSON of a :class:`servicebroker.engine.statistics.InstanceStatistics`."""

    instance_id: str
    process: str
    updated: float
    state: str
    snapshot: str


class TransmissionSummaryRow(NamedTuple):
    """The transmission queue's rows of one ``transmission_status``: how many and the oldest
    ``enqueue_time`` (broker seconds)."""

    transmission_status: str | None
    messages: int
    oldest: float


class QueueCountRow(NamedTuple):
    """How many rows of one status a queue holds (:meth:`StorageConnection.queue_counts`)."""

    queue_id: int
    status: int
    messages: int


# -- transmission queue ------------------------------------------------------------------------
class TransmissionRow(NamedTuple):
    """A transmission-queue row (``transmission_queue``): a message that could not be put on its
    target queue yet (QUE-3). ``arrival`` is the engine's arrival kind ("message", "error",
    "end_dialog"), ``transmission_status`` why it waits, ``priority`` the sender's level (1..10)
    and ``lifetime`` the sender's conversation lifetime (broker-clock seconds)."""

    transmission_id: int
    conversation_handle: bytes
    conversation_id: bytes
    is_initiator: int
    to_service_name: str
    from_service_name: str
    service_contract_id: int
    enqueue_time: float
    message_sequence_number: int
    message_type_id: int
    validation: str
    message_body: bytes
    message_id: bytes
    arrival: str
    transmission_status: str
    priority: int
    lifetime: float
    is_remote: int = 0
    to_broker_instance: str | None = None


class TransportRow(NamedTuple):
    """A transport's row of the transmission queue, as the transmitter reads it: a message for
    another broker instance (NET-1). ``message_size`` is the body's length in bytes;
    ``message_body`` is None when the body is larger than the read asked to carry (the
    transmitter reads it alone when it offers the message, so a large queue is never loaded
    into memory at once, NET-5)."""

    transmission_id: int
    conversation_id: bytes
    is_initiator: int
    to_service_name: str
    from_service_name: str
    service_contract_id: int
    enqueue_time: float
    message_sequence_number: int
    message_type_id: int
    validation: str
    message_id: bytes
    transmission_status: str
    priority: int
    lifetime: float
    to_broker_instance: str | None
    message_size: int
    message_body: bytes | None


class TransportMark(NamedTuple):
    """Where the transport's rows stand: ``mark`` the highest ``transmission_id`` among them
    (None: there are none), ``at_or_below`` how many have an id at or below the id asked
    about (a row committed out of id order shows as one more than the transmitter knows)."""

    mark: int | None
    at_or_below: int


class TransmissionListRow(NamedTuple):
    """A row of the ``transmission_queue`` view (:meth:`StorageConnection.list_transmission`)."""

    conversation_handle: bytes
    to_service_name: str
    from_service_name: str
    service_contract_id: int
    enqueue_time: float
    message_sequence_number: int
    message_type_id: int
    arrival: str
    message_body: bytes
    transmission_status: str
    priority: int
    to_broker_instance: str | None


# -- endpoints ---------------------------------------------------------------------------------
@dataclass(slots=True)
class EndpointRow:
    """One conversation endpoint (``sys.conversation_endpoints``); ids are 16-byte values,
    ``lifetime`` and ``dialog_timer`` absolute times in seconds on the broker's clock;
    ``send_sequence`` the number the next message sent gets, ``receive_sequence`` the number of
    the next message expected from the far side, ``end_dialog_sequence`` the number of the
    EndDialog or Error message that ended the dialog (sent or received), -1 while none has;
    ``far_broker_instance`` the far side's ``service_broker_guid`` (text) for a dialog with
    another broker instance, None for a dialog within this database (or before the target's
    first acknowledgement pins an initiator to an instance, RTE-4)."""

    endpoint_id: int
    conversation_handle: bytes
    conversation_id: bytes
    is_initiator: bool
    service_contract_id: int
    conversation_group_id: bytes
    service_id: int
    queue_id: int
    far_service: str
    lifetime: float
    state: str
    dialog_timer: float | None
    send_sequence: int
    receive_sequence: int
    priority: int
    end_dialog_sequence: int = -1
    far_broker_instance: str | None = None
    principal_id: int | None = None
    """The database principal this side acts as (SEC-2; the initiator's: who began the dialog,
    the target's: its service's owner, dbo); None for a row made before principals."""
    far_principal_id: int | None = None
    """The principal the far side is mapped to here (SEC-2/SEC-3; set by dialog security)."""
    outbound_session_key_identifier: str | None = None
    inbound_session_key_identifier: str | None = None
    security_timestamp: float | None = None
    """When the dialog's security header was last checked (broker-clock seconds)."""
    session_key: bytes | None = field(default=None, repr=False)  # never in a log
    """The dialog's session key (SEC-2; None while there is none)."""
    encryption_requested: int = 0
    """BEGIN DIALOG … WITH ENCRYPTION = ON (1, the default) | OFF (0)."""
    far_certificate: str | None = None
    """The far side's certificate as dialog security found it (SEC-2)."""


class ClosedConversationRow(NamedTuple):
    """A closed endpoint of a dialog with another instance, remembered (``closed_conversations``,
    NET-2, SEC-2): its side, until when (broker-clock seconds), and its dialog security columns
    (None when the dialog was not secured), so that its messages still waiting to be
    acknowledged are sealed with its key."""

    conversation_id: bytes
    is_initiator: int
    forget_after: float
    principal_id: int | None
    far_principal_id: int | None
    session_key_identifier: str | None
    security_timestamp: float | None
    session_key: bytes | None
    far_certificate: str | None


class EndpointListRow(NamedTuple):
    """A row of the ``conversation_endpoints`` view (:meth:`StorageConnection.list_endpoints`)."""

    conversation_handle: bytes
    conversation_id: bytes
    is_initiator: int
    service_contract_id: int
    conversation_group_id: bytes
    service_id: int
    far_service: str
    lifetime: float
    state: str
    dialog_timer: float | None
    send_sequence: int
    receive_sequence: int
    priority: int
    queue_id: int
    end_dialog_sequence: int
    far_broker_instance: str | None
    principal_id: int | None
    far_principal_id: int | None
    outbound_session_key_identifier: str | None
    inbound_session_key_identifier: str | None
    security_timestamp: float | None
    encryption_requested: int


class ConversationGroupListRow(NamedTuple):
    """A row of the ``conversation_groups`` view (:meth:`StorageConnection.list_conversation_groups`):
    a group and the service and queue of its conversations (the lowest ids, should a MOVE
    CONVERSATION have joined conversations of two services of one queue)."""

    conversation_group_id: bytes
    service_id: int
    queue_id: int


class StreamReaderRow(NamedTuple):
    """A stream reader (``stream_readers``, issue 14): the queues it reads (names, comma
    separated), the last batch it planned (``latest``), acknowledged and had ``released``
    by the time-out, when it last showed life (``renewed``, broker-clock seconds) and its
    ``claim_timeout`` (seconds)."""

    reader: str
    queues: str
    latest: int
    acknowledged: int
    released: int
    renewed: float
    claim_timeout: float


class GroupClaimRow(NamedTuple):
    """A row of the ``conversation_group_claims`` view: a group claimed by a reader's batch,
    since ``claimed_at``, the reader last ``renewed`` (broker-clock seconds), its
    ``claim_timeout`` (seconds) and the ``messages`` of the group in the batch."""

    conversation_group_id: bytes
    queue_id: int
    reader: str
    batch: int
    claimed_at: float
    renewed: float
    claim_timeout: float
    messages: int


# -- catalog -----------------------------------------------------------------------------------
class MessageTypeRow(NamedTuple):
    """A message type (``message_types``); ``is_system`` 1 for the built-in ones;
    ``xml_collection_id`` the XML schema collection of a VALID_XML type (else None)."""

    message_type_id: int
    name: str
    validation: str
    is_system: int
    xml_collection_id: int | None = None


class XmlSchemaCollectionRow(NamedTuple):
    """An XML schema collection (``xml_schema_collections``, sys.xml_schema_collections);
    dates broker-clock seconds."""

    xml_collection_id: int
    name: str
    create_date: float
    modify_date: float


class XmlSchemaDocumentRow(NamedTuple):
    """One ``<xsd:schema>`` document of a collection (``xml_schema_documents``): its place
    (``ordinal``, from 1 within the collection), its ``target_namespace`` ('' for none) and its
    text as the CREATE or ALTER … ADD gave it."""

    xml_collection_id: int
    ordinal: int
    target_namespace: str
    document: str


class ContractRow(NamedTuple):
    """A contract (``service_contracts``)."""

    service_contract_id: int
    name: str
    is_system: int


class ContractUsageRow(NamedTuple):
    """A message type of a contract and who may send it: INITIATOR, TARGET or ANY."""

    service_contract_id: int
    message_type_id: int
    sent_by: str


class QueueRow(NamedTuple):
    """A queue and its settings (``service_queues``); flags 0/1, ``modify_date`` broker-clock
    seconds."""

    queue_id: int
    name: str
    is_receive_enabled: int
    is_retention_enabled: int
    is_poison_message_handling_enabled: int
    is_activation_enabled: int
    activation_procedure: str | None
    max_readers: int
    modify_date: float
    execute_as: str = "SELF"
    """ACTIVATION's EXECUTE AS: SELF, OWNER or a user name (the activated procedure's
    principal, SEC-4)."""


class ServiceRow(NamedTuple):
    """A service and its queue (``services``)."""

    service_id: int
    name: str
    queue_id: int


class ServiceContractRow(NamedTuple):
    """A contract a service accepts as target (``service_contract_usages``)."""

    service_id: int
    service_contract_id: int


class EventNotificationRow(NamedTuple):
    """An event notification (``event_notifications``); ``conversation_handle`` the dialog it
    sends on, once begun."""

    event_notification_id: int
    name: str
    queue_id: int
    event_type: str
    to_service: str
    conversation_handle: bytes | None


class BrokerPriorityRow(NamedTuple):
    """A conversation priority (``conversation_priorities``); a None criterion means ANY."""

    priority_id: int
    name: str
    service_contract_name: str | None
    local_service_name: str | None
    remote_service_name: str | None
    priority: int


class CertificateRow(NamedTuple):
    """A certificate (``certificates``, CREATE CERTIFICATE … FROM FILE): its PEM as read at
    CREATE, the private key's file (None: no key), subject and issuer (RFC 4514 text), the
    SHA-1 ``thumbprint`` of the DER (hex), the serial number (hex) and the validity as seconds
    since the epoch."""

    certificate_id: int
    name: str
    certificate_pem: str
    private_key_file: str | None
    subject: str
    issuer: str
    thumbprint: str
    cert_serial_number: str
    start_date: float
    expiry_date: float
    principal_id: int | None = None
    """The owner (CREATE CERTIFICATE … AUTHORIZATION user, CREATE USER … FROM CERTIFICATE);
    None or 1 is dbo."""


class ServiceBrokerEndpointRow(NamedTuple):
    """The Service Broker endpoint (``service_broker_endpoints``, at most one): ``state``
    STARTED, STOPPED or DISABLED; ``encryption`` DISABLED, SUPPORTED or REQUIRED;
    ``message_forwarding`` 0/1; ``message_forward_size`` megabytes."""

    endpoint_id: int
    name: str
    state: str
    listener_ip: str
    listener_port: int
    certificate_id: int
    encryption: str
    algorithm: str
    message_forwarding: int
    message_forward_size: int


class LoginRow(NamedTuple):
    """A login mapped to a certificate (``logins``, CREATE LOGIN … FROM CERTIFICATE)."""

    login_id: int
    name: str
    certificate_id: int


class EndpointGrantRow(NamedTuple):
    """GRANT CONNECT ON ENDPOINT to a login (``endpoint_grants``, SEC-1)."""

    endpoint_id: int
    login_id: int


class RouteRow(NamedTuple):
    """A route (``routes``, RTE-1): None ``service_name`` / ``broker_instance`` match any;
    ``address`` ``TCP://host:port``, ``LOCAL`` or ``TRANSPORT``; ``expiry`` the broker-clock
    time the route stops being considered (None: never)."""

    route_id: int
    name: str
    service_name: str | None
    broker_instance: str | None
    address: str
    mirror_address: str | None
    expiry: float | None


class PrincipalRow(NamedTuple):
    """A database principal (``database_principals``, sys.database_principals): ``type`` "R"
    (a role: public, id 0) or "S" (a user: dbo, id 1, and those of CREATE USER, from 5 up)."""

    principal_id: int
    name: str
    type: str


class PermissionRow(NamedTuple):
    """A permission granted on a securable (``database_permissions``, SEC-4): ``class`` "SERVICE"
    or "QUEUE", ``major_id`` its service_id or queue_id, ``permission_name`` "SEND" or
    "RECEIVE", ``state`` "G" (granted)."""

    class_: str
    major_id: int
    grantee_principal_id: int
    grantor_principal_id: int
    permission_name: str
    state: str


class RemoteServiceBindingRow(NamedTuple):
    """CREATE REMOTE SERVICE BINDING (``remote_service_bindings``, SEC-3): the remote service
    ``remote_service_name`` (matched byte for byte) is reached as the user ``principal_id``,
    with that user's certificate; ``is_anonymous_on`` 1: the initiator acts as public at the
    target."""

    remote_service_binding_id: int
    name: str
    remote_service_name: str
    principal_id: int
    is_anonymous_on: int


@dataclass(frozen=True, slots=True)
class CatalogRows:
    """The whole catalog as rows, read from one snapshot (the engine caches it per catalog
    version); each sequence is ordered by id where the table has one."""

    version: int
    message_types: Sequence[MessageTypeRow]
    contracts: Sequence[ContractRow]
    contract_usages: Sequence[ContractUsageRow]
    queues: Sequence[QueueRow]
    services: Sequence[ServiceRow]
    service_contracts: Sequence[ServiceContractRow]
    event_notifications: Sequence[EventNotificationRow]
    broker_priorities: Sequence[BrokerPriorityRow]
    honor_broker_priority: bool = False
    service_broker_guid: str = ""
    """The database's Service Broker identifier (``broker_settings`` ``service_broker_guid``,
    a UUID's text; empty only for a database no migration gave one)."""
    certificates: Sequence[CertificateRow] = ()
    service_broker_endpoints: Sequence[ServiceBrokerEndpointRow] = ()
    logins: Sequence[LoginRow] = ()
    endpoint_grants: Sequence[EndpointGrantRow] = ()
    routes: Sequence[RouteRow] = ()
    principals: Sequence[PrincipalRow] = ()
    permissions: Sequence[PermissionRow] = ()
    remote_service_bindings: Sequence[RemoteServiceBindingRow] = ()
    xml_schema_collections: Sequence[XmlSchemaCollectionRow] = ()
    xml_schema_documents: Sequence[XmlSchemaDocumentRow] = ()
