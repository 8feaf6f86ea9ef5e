"""The views (DMVs and catalog views) as frozen dataclass rows, named as SQL Server names them,
built from storage rows and the background services' ``statistics()``-style snapshots.

Times are timezone-aware UTC datetimes on the broker's clock. Where SQL Server has only a
numeric id, a ``queue_name`` or ``service_name`` column is added.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime

from .activation.notifications import SYSTEM_QUEUE
from .activation.service import ActivationService
from .activation.tasks import TaskHandlers
from .catalog import EVENT_NOTIFICATION_SERVICE, POST_EVENT_NOTIFICATION, CatalogSnapshot
from .catalog.network_views import NetworkViews
from .catalog.principal_views import PrincipalViews
from .catalog.views import (
    CatalogViews,
    ConversationPriorityRow,
    EventNotificationRow,
    ServiceContractMessageUsageRow,
    ServiceContractRow,
    ServiceContractUsageRow,
    ServiceMessageTypeRow,
    ServiceQueueUsageRow,
    ServiceRow,
    XmlSchemaCollectionRow,
    XmlSchemaNamespaceRow,
)
from .clock import to_datetime
from .dialogs import STATE_DESC
from .engine.claims import GroupClaim, StreamClaims
from .engine.context import BrokerContext
from .engine.statistics import InstanceStatistics, read_published
from .storage.sessions import StorageStatistics
from .supervisor import Supervisor
from .transport.forwarding import ForwardedMessageViewRow, forwarded_messages
from .transport.service import TransportService

__all__ = [
    "ActivatedTaskRow",
    "BackgroundThreadRow",
    "BrokerConnectionRow",
    "ConversationEndpointRow",
    "ConversationGroupRow",
    "ConversationPriorityRow",
    "DatabaseRow",
    "EventNotificationRow",
    "QueueMonitorRow",
    "ServiceContractMessageUsageRow",
    "ServiceContractRow",
    "ServiceContractUsageRow",
    "ServiceMessageTypeRow",
    "ServiceQueueRow",
    "ServiceQueueUsageRow",
    "ServiceRow",
    "StorageSessionsRow",
    "TaskHandlerRow",
    "TransmissionQueueRow",
    "Views",
    "XmlSchemaCollectionRow",
    "XmlSchemaNamespaceRow",
]


@dataclass(frozen=True)
class ConversationEndpointRow:
    """A row of ``sys.conversation_endpoints`` (DLG-8).

    ``send_sequence``: the number the next message sent on this endpoint gets;
    ``receive_sequence``: the number of the next message expected from the far endpoint (one
    more than the last that arrived); ``end_dialog_sequence``: the number of the EndDialog or
    Error message that ended the dialog, sent or received here, -1 while none has;
    ``receive_sequence_frag``: always 0 (a message arrives whole, never in fragments);
    ``far_broker_instance``: the far side's broker instance (``service_broker_guid`` as text):
    another instance's for a dialog across the transport (None until the target's first
    acknowledgement pins an initiator to one, RTE-4), this database's own for a dialog within
    it (as SQL Server shows for a dialog to a service in the same database); ``is_system``: True
    for the dialogs the broker itself begins (event notifications, contract
    ``…/PostEventNotification``); the security columns (SEC-2) follow. The columns of SQL
    Server's view that concern the network transport's internals and its internal transactions
    are left out (docs/reference.md).
    """

    conversation_handle: uuid.UUID
    conversation_id: uuid.UUID
    is_initiator: bool
    service_contract_id: int
    service_contract_name: str
    conversation_group_id: uuid.UUID
    service_id: int
    service_name: str
    queue_name: str
    lifetime: datetime | None
    state: str
    state_desc: str
    far_service: str
    dialog_timer: datetime | None
    send_sequence: int
    receive_sequence: int
    priority: int
    end_dialog_sequence: int
    receive_sequence_frag: int
    far_broker_instance: str | None
    is_system: bool
    principal_id: int | None = None
    """The database principal of this side (SEC-2): the initiator's is who began the dialog
    (``Broker.transaction(principal=…)``), the target's its service's owner."""
    far_principal_id: int | None = None
    """The principal the far side is mapped to here (SEC-2, SEC-3), once dialog security set it."""
    outbound_session_key_identifier: str | None = None
    inbound_session_key_identifier: str | None = None
    security_timestamp: datetime | None = None
    """When the dialog's security header was last checked (None: never)."""
    encryption_requested: bool = True
    """BEGIN DIALOG … WITH ENCRYPTION = ON (True, the default) | OFF; within one broker nothing
    is encrypted (SEC-2). Not a column of SQL Server's view."""


@dataclass(frozen=True)
class DatabaseRow:
    """The row of ``sys.databases`` for this broker database, with the columns that have a
    meaning here: ``name`` (:attr:`Broker.database_name`), ``service_broker_guid`` (the
    database's Service Broker identifier, new after NEW_BROKER), ``is_broker_enabled``
    (always True: DISABLE_BROKER is not supported) and ``is_honor_broker_priority_on``
    (ALTER DATABASE … SET HONOR_BROKER_PRIORITY, PRI-16)."""

    name: str
    service_broker_guid: uuid.UUID | None
    is_broker_enabled: bool
    is_honor_broker_priority_on: bool


@dataclass(frozen=True)
class ConversationGroupRow:
    """A row of ``sys.conversation_groups``: a conversation group, the service its
    conversations belong to (DLG-1: the FROM service is an end of each) and whether it is a
    system group (the broker's event-notification service); ``service_name``, ``queue_id`` and
    ``queue_name`` are added. A group exists while a conversation endpoint is in it."""

    conversation_group_id: uuid.UUID
    service_id: int
    is_system: bool
    service_name: str
    queue_id: int
    queue_name: str


@dataclass(frozen=True)
class BrokerConnectionRow:
    """A row of ``sys.dm_broker_connections`` (NET-8): one open connection with another
    broker instance. ``state``/``state_desc`` and ``login_state``/``login_state_desc`` as
    SQL Server shows them; times are datetimes (broker clock); ``address`` the peer's
    ``TCP://host:port``; ``peer_certificate`` the SHA-1 thumbprint of the certificate the peer
    presented; ``encryption_algorithm`` / ``encryption_algorithm_desc`` 3 "AES" for an
    encrypted connection, 1 (SIGNING ONLY) "NONE" for one the ENCRYPTION matrix leaves
    unencrypted (authenticated and integrity-protected, SEC-1)."""

    connection_id: uuid.UUID
    address: str
    peer_broker_instance: str | None
    state: int
    state_desc: str
    connect_time: datetime | None
    login_time: datetime | None
    last_activity_time: datetime | None
    is_accept: bool
    login_state: int
    login_state_desc: str
    authentication_method: str
    peer_certificate: str | None
    encryption_algorithm: int
    encryption_algorithm_desc: str
    total_bytes_sent: int
    total_bytes_received: int
    total_fragments_sent: int
    total_fragments_received: int
    total_sends: int
    total_receives: int


@dataclass(frozen=True)
class TransmissionQueueRow:
    """A row of ``sys.transmission_queue`` (QUE-3, PRI-16, NET-7): ``to_broker_instance`` the
    instance a message for the transport goes to, when known; ``transmission_status`` why a
    message waits ("" while it is on its way)."""

    conversation_handle: uuid.UUID
    to_service_name: str
    to_broker_instance: str | None
    from_service_name: str
    service_contract_name: str
    enqueue_time: datetime | None
    message_sequence_number: int
    message_type_name: str
    is_conversation_error: bool
    is_end_of_dialog: bool
    message_body: bytes
    transmission_status: str
    priority: int


@dataclass(frozen=True)
class ServiceQueueRow:
    """A row of ``sys.service_queues`` (QUE-1), with the queue's message counts."""

    name: str
    object_id: int
    max_readers: int
    activation_procedure: str | None
    is_activation_enabled: bool
    is_receive_enabled: bool
    is_enqueue_enabled: bool
    is_retention_enabled: bool
    is_poison_message_handling_enabled: bool
    modify_date: datetime | None
    ready_messages: int
    retained_messages: int
    execute_as: str = "SELF"
    """ACTIVATION's EXECUTE AS: ``SELF``, ``OWNER`` or the user name given (sys.service_queues
    has ``execute_as_principal_id``; the name is shown: the activated procedure's transactions
    act as that principal, SELF and OWNER as dbo, SEC-4)."""
    is_ms_shipped: bool = False
    """The queue is the broker's own (``sys_event_notifications``), not the user's: what
    scripts filter on (sys.objects' column, which sys.service_queues inherits)."""


@dataclass(frozen=True)
class QueueMonitorRow:
    """A row of ``sys.dm_broker_queue_monitors`` (ACT-2, ACT-3)."""

    queue_id: int
    queue_name: str
    state: str
    last_empty_rowset_time: datetime | None
    last_activated_time: datetime | None
    tasks_waiting: int
    running_tasks: int
    peak_running_tasks: int


@dataclass(frozen=True)
class ActivatedTaskRow:
    """A row of ``sys.dm_broker_activated_tasks`` (ACT-7)."""

    spid: int
    queue_id: int
    queue_name: str
    procedure_name: str
    execute_as: str | None


@dataclass(frozen=True)
class TaskHandlerRow:
    """A task handler (TICK-2b): its id, state (IDLE, RUNNING, STOPPED) and counters."""

    handler_id: int
    state: str
    tasks_run: int
    tasks_failed: int
    restarts: int


@dataclass(frozen=True)
class BackgroundThreadRow:
    """A supervised background thread of this broker: its name, state (RUNNING, RESTARTING,
    STOPPED), how often it was restarted, and its last error and when; not a SQL Server view,
    named like one."""

    name: str
    state: str
    restarts: int
    last_error: str | None
    last_error_time: datetime | None


StorageSessionsRow = StorageStatistics
"""The row of ``dm_broker_storage_sessions()``: this broker's database sessions (in use, idle,
the pool's limit, callers waiting) and the storage failures raised since it opened; not a SQL
Server view, named like one."""


class Views(CatalogViews, PrincipalViews, NetworkViews):
    """``broker.views``: each method returns the current rows of one view (the catalog views'
    methods come from :class:`~servicebroker.catalog.views.CatalogViews`, the security views'
    — principals, permissions, remote service bindings, certificates with their owners —
    from :class:`~servicebroker.catalog.principal_views.PrincipalViews`).

    Args:
        context: the broker's shared parts (storage rows, the catalog).
        activation: the activation service (monitors, activated tasks).
        tasks: the task handlers.
        supervisor: the supervisor of the background threads.
        transport: the transport (its connections).
    """

    def __init__(
        self,
        context: BrokerContext,
        *,
        activation: ActivationService,
        tasks: TaskHandlers,
        supervisor: Supervisor,
        transport: TransportService,
        claims: StreamClaims,
    ) -> None:
        self._context = context
        self._claims = claims
        self._activation = activation
        self._tasks = tasks
        self._supervisor = supervisor
        self._transport = transport

    def _snapshot(self) -> CatalogSnapshot:
        return self._context.catalog.current(fresh=True)

    def conversation_endpoints(self) -> list[ConversationEndpointRow]:
        """Every conversation endpoint of the database (DLG-8)."""
        with self._context.storage.connection() as conn:
            cat = self._context.catalog.snapshot(conn)
            rows = conn.list_endpoints()
        far_broker = str(cat.service_broker_guid) if cat.service_broker_guid else None
        out = []
        for r in rows:
            contract = cat.contracts_by_id.get(r.service_contract_id)
            service = cat.services_by_id.get(r.service_id)
            queue = cat.queues_by_id.get(r.queue_id)
            out.append(
                ConversationEndpointRow(
                    uuid.UUID(bytes=r.conversation_handle),
                    uuid.UUID(bytes=r.conversation_id),
                    bool(r.is_initiator),
                    r.service_contract_id,
                    contract.name if contract else "",
                    uuid.UUID(bytes=r.conversation_group_id),
                    r.service_id,
                    service.name if service else "",
                    queue.name if queue else "",
                    to_datetime(r.lifetime),
                    r.state,
                    STATE_DESC.get(r.state, r.state),
                    r.far_service,
                    to_datetime(r.dialog_timer),
                    r.send_sequence,
                    r.receive_sequence,
                    r.priority,
                    r.end_dialog_sequence,
                    0,
                    r.far_broker_instance or far_broker,
                    contract is not None and contract.name == POST_EVENT_NOTIFICATION,
                    r.principal_id,
                    r.far_principal_id,
                    r.outbound_session_key_identifier,
                    r.inbound_session_key_identifier,
                    to_datetime(r.security_timestamp),
                    bool(r.encryption_requested),
                )
            )
        return out

    def databases(self) -> list[DatabaseRow]:
        """``sys.databases``: one row, this broker's database (a broker is one database)."""
        cat = self._snapshot()
        return [
            DatabaseRow(
                self._context.storage.database_name,
                cat.service_broker_guid,
                True,
                cat.honor_broker_priority,
            )
        ]

    def conversation_groups(self) -> list[ConversationGroupRow]:
        """Every conversation group of the database (``sys.conversation_groups``), in the
        order of their first conversation."""
        with self._context.storage.connection() as conn:
            cat = self._context.catalog.snapshot(conn)
            rows = conn.list_conversation_groups()
        out = []
        for r in rows:
            service = cat.services_by_id.get(r.service_id)
            queue = cat.queues_by_id.get(r.queue_id)
            out.append(
                ConversationGroupRow(
                    uuid.UUID(bytes=r.conversation_group_id),
                    r.service_id,
                    service is not None and service.name == EVENT_NOTIFICATION_SERVICE,
                    service.name if service else "",
                    r.queue_id,
                    queue.name if queue else "",
                )
            )
        return out

    def conversation_group_claims(self) -> list[GroupClaim]:
        """The conversation groups stream readers claim (the Spark streaming source's batches
        not yet committed): group, queue, reader, batch, messages, claimed at, expires at. A
        claimed group is taken by no RECEIVE until its reader acknowledges the batch or its
        claim expires."""
        return self._claims.claims()

    def transmission_queue(self) -> list[TransmissionQueueRow]:
        """Messages waiting to be put on their target queue (QUE-3)."""
        with self._context.storage.connection() as conn:
            cat = self._context.catalog.snapshot(conn)
            rows = conn.list_transmission()
        out = []
        for r in rows:
            contract = cat.contracts_by_id.get(r.service_contract_id)
            mt = cat.message_types_by_id.get(r.message_type_id)
            out.append(
                TransmissionQueueRow(
                    uuid.UUID(bytes=r.conversation_handle),
                    r.to_service_name,
                    r.to_broker_instance,
                    r.from_service_name,
                    contract.name if contract else "",
                    to_datetime(r.enqueue_time),
                    r.message_sequence_number,
                    mt.name if mt else "",
                    r.arrival == "error",
                    r.arrival == "end_dialog",
                    r.message_body,
                    r.transmission_status,
                    r.priority,
                )
            )
        return out

    def dm_broker_connections(self) -> list[BrokerConnectionRow]:
        """The open connections with other broker instances (NET-8, SEC-1)."""
        out = []
        for conn in self._transport.connections():
            st = conn.adjacent.statistics()
            out.append(
                BrokerConnectionRow(
                    conn.connection_id,
                    conn.address,
                    None if st.peer_instance is None else str(st.peer_instance),
                    int(st.state),
                    st.state_desc,
                    to_datetime(st.connect_time),
                    to_datetime(st.login_time),
                    to_datetime(st.last_activity_time),
                    st.is_accept,
                    int(st.login_state),
                    st.login_state_desc,
                    "CERTIFICATE",
                    conn.peer_certificate,
                    st.encryption_algorithm,
                    st.encryption_algorithm_desc,
                    st.total_bytes_sent,
                    st.total_bytes_received,
                    st.total_fragments_sent,
                    st.total_fragments_received,
                    st.total_sends,
                    st.total_receives,
                )
            )
        return out

    # -- forwarding (FWD-2) ---------------------------------------------------------------
    def dm_broker_forwarded_messages(self) -> list[ForwardedMessageViewRow]:
        """The fragments this broker holds to forward, one row each (FWD-2, FWD-3):
        ``sys.dm_broker_forwarded_messages``."""
        held = self._transport.forwarded_messages()
        return forwarded_messages(held, self._context.clock.now())

    def transmission_queue_count(self) -> int:
        """How many messages wait in the transmission queue (without reading them)."""
        with self._context.storage.connection() as conn:
            return conn.transmission_count()

    def service_queues(self) -> list[ServiceQueueRow]:
        """Every queue and its settings (QUE-1)."""
        with self._context.storage.connection() as conn:
            cat = self._context.catalog.snapshot(conn)
            counts = conn.queue_counts()
        ready: dict[int, int] = {}
        retained: dict[int, int] = {}
        for c in counts:
            if c.status == 1:
                ready[c.queue_id] = c.messages
            elif c.status in (0, 3):
                retained[c.queue_id] = retained.get(c.queue_id, 0) + c.messages
        return [
            ServiceQueueRow(
                q.name,
                q.queue_id,
                q.max_queue_readers,
                q.activation_procedure,
                q.activation_enabled,
                q.status,
                q.status,  # STATUS = OFF: "no messages can be added to the queue or removed"
                q.retention,
                q.poison_message_handling,
                to_datetime(q.modify_date),
                ready.get(q.queue_id, 0),
                retained.get(q.queue_id, 0),
                execute_as=q.execute_as,
                is_ms_shipped=q.name == SYSTEM_QUEUE,
            )
            for q in cat.queues_by_id.values()
        ]

    def dm_broker_queue_monitors(self) -> list[QueueMonitorRow]:
        """The queue monitors of this process's broker (ACT-2, ACT-3)."""
        return [
            QueueMonitorRow(
                m.queue_id,
                m.queue_name,
                m.state,
                to_datetime(m.last_empty_rowset_time),
                to_datetime(m.last_activated_time),
                m.tasks_waiting,
                m.running,
                m.peak_running,
            )
            for m in self._activation.monitors()
        ]

    def dm_broker_task_handlers(self) -> list[TaskHandlerRow]:
        """The task handlers of this broker (TICK-2b); not a SQL Server view, named like one."""
        return [
            TaskHandlerRow(h.handler_id, h.state, h.tasks_run, h.tasks_failed, h.restarts)
            for h in self._tasks.statistics()
        ]

    def dm_broker_activated_tasks(self) -> list[ActivatedTaskRow]:
        """The activated procedures running in this process (ACT-7); ``execute_as`` is the
        EXECUTE AS of the queue's ACTIVATION clause (shown, not enforced: no principals)."""
        tasks = self._activation.tasks()
        queues = self._context.catalog.current().queues_by_id if tasks else {}
        return [
            ActivatedTaskRow(
                t.spid,
                t.queue_id,
                t.queue_name,
                t.procedure_name,
                q.execute_as if (q := queues.get(t.queue_id)) is not None else None,
            )
            for t in tasks
        ]

    def dm_broker_background_threads(self) -> list[BackgroundThreadRow]:
        """The supervised background threads of this broker: a thread that died shows its
        restarts and last error."""
        return [
            BackgroundThreadRow(
                t.name, t.state, t.restarts, t.last_error, to_datetime(t.last_error_time)
            )
            for t in self._supervisor.statistics()
        ]

    def dm_broker_storage_sessions(self) -> list[StorageSessionsRow]:
        """This broker's database sessions and storage failures (one row): after any number
        of failures, ``sessions_in_use`` is back to the transactions still open."""
        return [self._context.storage.statistics()]

    def dm_broker_statistics(self) -> list[InstanceStatistics]:
        """What every broker object on this database published (``Broker.statistics()``):
        one per broker opened in any process that started, committed or rolled back, plus
        ``retired``, the sum of those that closed. Not a SQL Server view, named like one
        (SQL Server's counters are ``sys.dm_os_performance_counters``)."""
        with self._context.storage.connection() as conn:
            rows = conn.list_statistics()
        wall_now = time.time()  # liveness: real time, whatever the brokers' clock
        return read_published(rows, wall_now)
