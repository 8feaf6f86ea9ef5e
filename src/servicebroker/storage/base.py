"""What the engine sees of storage: rows and named operations, never SQL or an engine object.

A backend provides a :class:`Storage` (opened from a URL, migrated, pooling connections) whose
:class:`StorageConnection` objects serve one broker transaction each: a database transaction for
the broker's changes and the application's own SQL, and the conversation-group locks that
transaction holds (locking the next available group of a queue is one storage operation, done
natively by each backend). :mod:`servicebroker.testing.storage_kit` checks a backend against
this contract.

The contract as a whole
-----------------------
Values
    Handles, conversation ids, group ids and message ids are 16-byte ``bytes``
    (``uuid.UUID.bytes``); ids of catalog objects, endpoints, queue rows and transmission rows
    are ``int``; times are ``float`` seconds since the epoch **on the broker's clock** (never
    the database's); flags stored by the broker are the integers 0/1 (a ``bool`` is accepted
    wherever a flag is written). Rows are the named tuples below (:class:`MessageRow`, …),
    whose field order is the order of the columns read.

Transactions
    A connection is used by one thread at a time. Every operation outside a write
    transaction reads in autocommit: it sees the rows committed when it runs (each read its
    own snapshot; :meth:`StorageConnection.load_catalog` reads one snapshot for all its
    queries), never another connection's uncommitted writes. Operations that write rows —
    every ``insert_*``, ``update_*``, ``delete_*``, ``set_*``, ``move_*``,
    :meth:`~StorageConnection.finish_received`, the catalog writes and the poison counter —
    must be called between :meth:`~StorageConnection.begin_write` and
    :meth:`~StorageConnection.commit` / :meth:`~StorageConnection.rollback`; reads inside the
    write transaction see its own writes. A write transaction's changes are atomic: all are
    committed, or none. SQLite's write transactions run one at a time (``BEGIN IMMEDIATE``
    takes its single write lock); PostgreSQL's run and commit in parallel, each locking the
    rows it reads to write (endpoints in ``endpoint_id`` order, queue positions in queue
    order, groups in (queue, group) order), and only a catalog change (``begin_write(
    exclusive=True)``) runs alone. On each queue, ``queuing_order`` is commit order
    (:meth:`~StorageConnection.message_sequence` is the queue's watermark); across queues it
    is only unique.

Group locks
    A conversation-group lock (:meth:`~StorageConnection.try_lock_group`,
    :meth:`~StorageConnection.lock_next_group`, :meth:`~StorageConnection.get_endpoint_and_lock`)
    is taken without waiting, is exclusive across every connection of every process on the
    database, is re-entrant for its holder and writes nothing. It is held until
    :meth:`~StorageConnection.unlock_group` or :meth:`~StorageConnection.release_locks`
    (a rollback keeps it); a backend may also drop it at commit (PostgreSQL does, in the
    commit's round trip), so the caller ends every transaction with ``release_locks`` and uses
    no group after committing. Locks of a process that dies are freed at once.

Errors
    No operation lets a driver's exception out: every failure is a
    :class:`~servicebroker.errors.StorageError` whose message names the database
    (:attr:`Storage.database`) and whose ``outcome`` says what became of the write transaction
    (:mod:`.failures`): :class:`~servicebroker.errors.DatabaseUnavailableError` (connection lost,
    server shut down or unreachable), :class:`~servicebroker.errors.StorageFullError`,
    :class:`~servicebroker.errors.StorageIOError` (I/O error, read-only file or server),
    :class:`~servicebroker.errors.IntegrityConflict` (a constraint refused a write: a duplicate
    catalog name or endpoint, the application's SQL) and plain ``StorageError`` (the schema is
    newer than this code, a lock not had within the busy time-out, bad application SQL). After
    any of them the caller rolls back and releases the connection; :meth:`~StorageConnection.rollback`
    and :meth:`Storage.release` never raise and never keep a failed session, so no failure
    path leaks a session, a lock or a descriptor (:meth:`Storage.statistics` counts them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .claim_store import ClaimStore
from .rows import (
    CatalogRows,
    ClosedConversationRow,
    ConversationGroupListRow,
    EndpointListRow,
    EndpointRow,
    MessageRow,
    QueueCountRow,
    QueueInsert,
)
from .sessions import StorageStatistics
from .statistics_store import StatisticsStore
from .transmission_store import TransmissionStore

__all__ = [
    "QueueActivityStore",
    "Storage",
    "StorageConnection",
]


class StorageConnection(ClaimStore, StatisticsStore, TransmissionStore, Protocol):
    """One broker transaction's connection: its database transaction and its group locks (see
    the module docstring for the rules every method follows). Obtained from
    :meth:`Storage.connect` and given back with :meth:`Storage.release`."""

    poll_interval: float
    """Real seconds between two looks for other processes' commits while waiting."""

    # -- transaction control ---------------------------------------------------------------
    @property
    def in_write(self) -> bool:
        """True between :meth:`begin_write` and the :meth:`commit` or :meth:`rollback` that
        ends it."""
        ...

    def begin_write(self, *, exclusive: bool = False) -> None:
        """Start the write transaction (held until :meth:`commit` / :meth:`rollback`);
        nothing if it is already open. ``exclusive``: a catalog change, which no other write
        transaction runs beside (see the module docstring).

        Raises:
            StorageError: a lock was not had within the storage's busy time-out (no write
                transaction is open then).
        """
        ...

    def commit(self, wake: Collection[int] | None = None) -> None:
        """Commit the write transaction atomically and release its locks; nothing
        outside one. The group locks stay held unless the backend drops them with the commit
        (see the module docstring): call :meth:`release_locks` next.

        Args:
            wake: the wait keys (queue ids, and ``waiting.LOCKS`` for lock waiters) whose
                waiters in other processes this commit concerns; None: everyone. A backend
                that polls ignores it.

        Raises:
            StorageError: the commit failed: rolled back (not committed), or — the connection
                lost or an I/O error during COMMIT — with ``outcome`` ``Outcome.UNKNOWN``.
        """
        ...

    def rollback(self) -> None:
        """Discard the write transaction's changes and release its locks; nothing outside
        one. Group locks stay held until :meth:`release_locks`. Never raises: a session whose
        ROLLBACK fails is marked failed (closed on release, which discards the changes)."""
        ...

    def execute_app(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        """Run one statement of the application's SQL (placeholders of
        :attr:`Storage.paramstyle`) in the write transaction, opening it first if needed
        (:meth:`begin_write`); returns its rows (``[]`` for a statement without result).

        Raises:
            IntegrityConflict: a constraint refused it (roll the transaction back).
            StorageError: as :meth:`begin_write`. The driver's own errors for bad SQL propagate.
        """
        ...

    def executemany_app(
        self, sql: str, seq_of_params: Iterable[Sequence[Any] | dict[str, Any]]
    ) -> None:
        """Run the application's statement once per parameter set, in the write transaction
        (opened first if needed).

        Raises:
            IntegrityConflict: a constraint refused one of them (roll the transaction back).
            StorageError: as :meth:`begin_write`.
        """
        ...

    # -- catalog ---------------------------------------------------------------------------
    def catalog_version(self) -> int:
        """Read the catalog's version number (``broker_settings`` ``catalog_version``), which
        :meth:`bump_catalog_version` raises by one with every catalog change."""
        ...

    def catalog_version_later(self) -> Callable[[], int]:
        """:meth:`catalog_version`, read with the next statement this connection sends (on
        PostgreSQL in that statement's round trip, not one of its own); the function returned
        gives the value once that statement ran (it reads it then if none did)."""
        ...

    def load_catalog(self) -> CatalogRows:
        """Read every catalog table, the catalog version, the HONOR_BROKER_PRIORITY option
        (PRI-16) and the database's ``service_broker_guid`` from one consistent snapshot
        (inside the write transaction: what it sees)."""
        ...

    def catalog_write(self, name: str, params: Sequence[Any]) -> int:
        """Run the catalog statement ``name`` (in the write transaction) with positional
        ``params``; returns the new row's id for an ``insert_*`` statement, else 0.

        The statements and their parameters: ``insert_message_type`` (name, validation),
        ``delete_message_type`` (id), ``insert_contract`` (name), ``insert_contract_usage``
        (contract id, message type id, sent_by), ``delete_contract`` (id), ``insert_queue``
        (name, receive, retention, poison handling, activation flags, procedure, max_readers,
        modify_date), ``update_queue`` (the same without name, then queue id),
        ``delete_queue`` (id), ``insert_service`` (name, queue id),
        ``insert_service_contract`` (service id, contract id), ``delete_service`` (id),
        ``insert_event_notification`` (name, queue id, event type, to service),
        ``delete_event_notification`` (id), ``set_event_notification_conversation``
        (handle, id), ``insert_broker_priority`` (name, contract, local service, remote
        service, level), ``update_broker_priority`` (contract, local, remote, level, id),
        ``delete_broker_priority`` (id), ``put_setting`` (name, value),
        ``set_queue_execute_as`` (EXECUTE AS, queue id), ``drop_queue_activation`` (modify date,
        queue id), ``update_message_type`` (validation, id), ``update_service_queue`` (queue
        id, service id), ``delete_service_contract`` (service id, contract id),
        ``set_message_type_xml_collection`` (collection id or None, message type id),
        ``insert_xml_schema_collection`` (name, create date, modify date),
        ``insert_xml_schema_document`` (collection id, ordinal, target namespace, text),
        ``touch_xml_schema_collection`` (modify date, collection id),
        ``delete_xml_schema_documents`` (collection id), ``delete_xml_schema_collection``
        (collection id).

        Raises:
            IntegrityConflict: a constraint refused it (a duplicate name, a row in use); the
                write transaction must be rolled back.
        """
        ...

    def catalog_count(self, name: str, params: Sequence[Any]) -> int:
        """Run the counting query ``name`` — ``endpoints_using_service`` (service id),
        ``endpoints_using_contract`` (contract id): live endpoints using it;
        ``messages_using_message_type`` (message type id): queue and transmission rows
        carrying it; ``messages_of_service`` (service id): its queued messages and live
        endpoints — and return the count."""
        ...

    def bump_catalog_version(self) -> None:
        """Raise the catalog version by one (in the write transaction), so every process
        reloads the catalog once this commits."""
        ...

    def add_rollback(self, queue_id: int) -> int:
        """Count one more consecutive rolled-back RECEIVE on the queue (POI-1), in the write
        transaction; returns the new count."""
        ...

    def reset_rollbacks(self, queue_id: int) -> None:
        """Set the queue's consecutive-rollback count to 0 (a RECEIVE committed, POI-1); writes
        nothing when it already is 0. In the write transaction."""
        ...

    def disable_queue(self, queue_id: int, now: float) -> None:
        """Turn the queue's STATUS OFF (POI-1), zero its rollback count, set its modify_date to
        ``now`` and bump the catalog version; in the write transaction."""
        ...

    # -- endpoints -------------------------------------------------------------------------
    def get_endpoint(self, handle: bytes, *, for_update: bool = False) -> EndpointRow | None:
        """Read the endpoint with this conversation handle, or None. ``for_update`` (a commit
        that will write what it read, in the write transaction): a backend whose commits run
        in parallel locks the row until the write transaction ends; otherwise locks nothing."""
        ...

    def get_endpoints(self, handles: Sequence[bytes]) -> list[EndpointRow]:
        """Read the endpoints with these conversation handles (those that exist, in no set
        order), locking nothing; one query where the backend can."""
        ...

    def get_endpoints_and_lock(self, handles: Sequence[bytes]) -> list[tuple[EndpointRow, bool]]:
        """:meth:`get_endpoint_and_lock` for several handles (those that exist, in no set
        order): ``(endpoint, locked)`` pairs, in one query where the backend can."""
        ...

    def get_endpoint_and_lock(self, handle: bytes) -> tuple[EndpointRow | None, bool]:
        """Read the endpoint and try to lock its group without waiting (as
        :meth:`try_lock_group`): ``(endpoint, True)`` when this connection holds the group now,
        ``(endpoint, False)`` when another holds it, ``(None, False)`` when no such endpoint.
        One round trip where the backend can."""
        ...

    def get_far_endpoint(
        self, conversation_id: bytes, far_is_initiator: bool, *, for_update: bool = False
    ) -> EndpointRow | None:
        """Read the endpoint of ``conversation_id`` on the given side, or None;
        ``for_update`` as :meth:`get_endpoint`."""
        ...

    def get_conversations(
        self, conversation_ids: Sequence[bytes], *, for_update: bool = False
    ) -> list[EndpointRow]:
        """Read every endpoint of the given conversations (both sides, in no set order); one
        query where the backend can. ``for_update`` as :meth:`get_endpoint`, the rows locked
        in ``endpoint_id`` order (so commits locking several never deadlock on them)."""
        ...

    def lock_conversations(
        self, conversation_ids: Sequence[bytes], *, cached: bool = False
    ) -> tuple[list[EndpointRow], bool]:
        """A commit's first read: :meth:`get_conversations` ``for_update``, and
        :meth:`transmission_exists_of` (not remote) read after those rows are locked, together
        (one round trip on PostgreSQL).

        ``cached``: the write transaction holds nothing but the commit's own statements, so
        the backend may answer from its copies of the rows as an earlier commit of this
        process left them, not read again (PostgreSQL, when it has copies of every endpoint
        of the conversations), and check them when it locks them, in the round trip of the
        transaction's next statement. Rows it returns are the caller's to change.

        Raises:
            ~servicebroker.storage.failures.CopiesChanged: (``cached``; here or by any later statement of the transaction,
                COMMIT included) the rows changed since the copies were taken, or a local
                message waits in the transmission queue: nothing of the transaction is
                committed, and the caller rolls back and commits again without copies.
        """
        ...

    def insert_endpoint(self, row: EndpointRow) -> int:
        """Insert an endpoint (``row.endpoint_id`` is ignored); returns its new ``endpoint_id``
        (increasing). In the write transaction.

        Raises:
            IntegrityConflict: the handle, or the (conversation, side) pair, exists already.
        """
        ...

    def update_endpoints(self, rows: Sequence[EndpointRow]) -> None:
        """Write the changeable columns — ``conversation_group_id``, ``state``,
        ``dialog_timer``, ``send_sequence``, ``receive_sequence`` — of each row's endpoint
        (by ``endpoint_id``), in one batch, in the write transaction."""
        ...

    def remember_closed_conversations(self, closed: Iterable[tuple[EndpointRow, float]]) -> None:
        """Keep each endpoint of a dialog with another instance that closed here, with its
        ``forget_after`` (broker-clock seconds) and dialog security columns, in the write
        transaction: a late copy of one of its messages is then a duplicate, not a new dialog
        (NET-2, SEC-2), and its own messages still waiting to be acknowledged are sealed with
        its key."""
        ...

    def closed_conversation(
        self, conversation_id: bytes, is_initiator: bool
    ) -> ClosedConversationRow | None:
        """That side of the conversation while it is remembered as closed here, else None."""
        ...

    def was_closed(self, conversation_id: bytes, is_initiator: bool) -> bool:
        """True while that side of the conversation is remembered as closed here."""
        ...

    def forget_closed_conversations(self, now: float) -> None:
        """Delete the remembered closed sides whose ``forget_after`` is ``now`` or earlier and
        that have nothing left in the transmission queue (TICK-4), in the write transaction."""
        ...

    def delete_endpoints(self, endpoint_ids: Sequence[int]) -> None:
        """Delete endpoints (their queue rows stay), in one batch, in the write transaction."""
        ...

    def group_queue(self, group_id: bytes) -> int | None:
        """The queue id of an existing conversation group, or None when no endpoint is in it."""
        ...

    def group_services(self, group_id: bytes) -> list[int]:
        """The service ids of the endpoints in conversation group ``group_id``, ascending
        (empty when no endpoint is in it): DLG-1 wants one, the FROM service of a BEGIN DIALOG
        that joins the group."""
        ...

    def list_conversation_groups(self) -> list[ConversationGroupListRow]:
        """Every conversation group with an endpoint in it, for the ``conversation_groups``
        view, in the order of their first endpoint."""
        ...

    def due_timers(self, now: float, limit: int) -> list[bytes]:
        """Handles of endpoints whose conversation timer is at or before ``now`` (DLG-6),
        earliest first, at most ``limit`` (-1: all)."""
        ...

    def due_lifetimes(self, now: float, limit: int) -> list[bytes]:
        """Handles of endpoints not in state ER or CD whose lifetime is at or before ``now``
        (DLG-5), earliest first, at most ``limit`` (-1: all)."""
        ...

    def next_due_time(self) -> float | None:
        """The earliest conversation timer or live lifetime still to fire, or None."""
        ...

    def list_endpoints(self) -> list[EndpointListRow]:
        """Every endpoint, for the ``conversation_endpoints`` view, by endpoint_id."""
        ...

    # -- queues ----------------------------------------------------------------------------
    def lock_queues(self, queue_ids: Collection[int]) -> None:
        """Take the right to put messages on these queues for the rest of the write
        transaction (a backend whose commits run in parallel locks each queue's position, in
        queue order; SQLite's single writer has it already). A transaction's commit calls it
        before it touches any group, with every queue it may put messages on (the timer's and
        transmission queue's passes do not yet);
        :meth:`insert_messages` takes the queues it was not given itself."""
        ...

    def insert_messages(self, rows: Iterable[QueueInsert]) -> None:
        """Put messages on their queues, in the write transaction: each gets the next
        ``queuing_order`` of its queue's commit order, in the given order within a
        conversation group (one batch)."""
        ...

    def group_messages(self, group_id: bytes, limit: int) -> list[MessageRow]:
        """The ready (status 1) messages of a group in RECEIVE order — priority descending,
        then ``conversation_order``, ``rank``, ``message_sequence_number`` (PRI-12, SYS-2) —
        at most ``limit`` (-1: all). Locks nothing: the caller holds the group."""
        ...

    def conversation_messages(self, group_id: bytes, handle: bytes, limit: int) -> list[MessageRow]:
        """The ready messages of one conversation endpoint (in group ``group_id``) in RECEIVE
        order — ``rank``, then ``message_sequence_number`` — at most ``limit`` (-1: all)."""
        ...

    def peek(self, queue_id: int, limit: int) -> list[MessageRow]:
        """Rows of a queue of any status, priority descending then queuing order, at most
        ``limit`` (-1: all)."""
        ...

    def peek_after(self, queue_id: int, after: int, limit: int) -> list[MessageRow]:
        """Rows of a queue of any status with ``queuing_order > after``, in queuing order, at
        most ``limit`` (-1: all)."""
        ...

    def queue_has_ready(self, queue_id: int) -> bool:
        """True when the queue holds a ready (status 1) message, locked group or not."""
        ...

    def message_sequence(self, queue_id: int) -> int:
        """The queue's watermark (0 before its first message): every committed row of the
        queue has a ``queuing_order`` at most it, and rows committed on it later get higher
        ones — on each queue, ``queuing_order`` is commit order."""
        ...

    def queue_counts(self) -> list[QueueCountRow]:
        """How many rows of each status each queue holding rows has."""
        ...

    def finish_received(
        self, queuing_orders: Iterable[int], *, retain: bool, removed: str | None
    ) -> None:
        """End received messages (by queuing order, in RECEIVE order): delete them, or with
        ``retain`` (queue RETENTION ON, RCV-3) set their status to 0. In the write
        transaction; a backend with round trips sends it with the next statement (COMMIT).

        Args:
            removed: the error's message when fewer rows than given are there; None: rows
                gone are no error (a reader's claimed batches, which may list a row twice).

        Raises:
            ConversationError: (message ``removed``) fewer rows than given were there — a
                catalog statement (DROP SERVICE, DROP QUEUE, NEW_BROKER) removed some
                meanwhile; raised by this call or by :meth:`commit`, and the write transaction
                fails whole.
        """
        ...

    def delete_conversation_messages(self, endpoints: Sequence[tuple[bytes, bytes]]) -> None:
        """Delete every queue row of the conversation endpoints ``endpoints``, as
        ``(conversation_group_id, conversation_handle)`` pairs (END CONVERSATION), in one
        batch, in the write transaction."""
        ...

    def delete_queue_messages(self, queue_id: int) -> None:
        """Delete every row of a queue (DROP QUEUE); in the write transaction."""
        ...

    def remove_all_conversations(self) -> None:
        """Delete every conversation endpoint, every queue row of every status (retained ones
        too) with the groups' index rows, and every transmission-queue row, and forget the
        dialogs of event notifications (ALTER DATABASE … SET NEW_BROKER); in the write
        transaction. The catalog and the application's tables are left as they are."""
        ...

    def move_conversation_messages(self, handle: bytes, old_group: bytes, group_id: bytes) -> None:
        """Move the queue rows of conversation endpoint ``handle`` from ``old_group`` to
        ``group_id`` (MOVE CONVERSATION, DLG-7); in the write transaction."""
        ...

    # -- conversation-group locks, held until release_locks ----------------------------------
    def try_lock_group(self, group_id: bytes) -> bool:
        """Lock a conversation group for this connection without waiting: True when it holds
        it (now or already), False when another connection, in any process, does. Writes
        nothing; held until :meth:`unlock_group` / :meth:`release_locks`."""
        ...

    def held_groups(self) -> frozenset[bytes]:
        """The group ids this connection holds."""
        ...

    def unlock_group(self, group_id: bytes) -> None:
        """Release one group this connection holds (locked but not used); nothing if it does
        not hold it."""
        ...

    def lock_next_group(
        self,
        queue_id: int,
        skip: Mapping[bytes, Collection[int]],
        *,
        exclude_held: bool = False,
        known_locked: set[bytes] | None = None,
    ) -> bytes | None:
        """Lock and return the group of the queue that RECEIVE takes next, or None.

        That is the group with a ready message whose first such message (in RECEIVE order)
        comes first by priority descending, then queuing order (PRI-12, PRI-13), among the
        groups no other connection holds (tried without waiting, RCV-2). A group this
        connection already holds qualifies by its first ready message not in ``skip[group]`` (per
        group, the queuing orders this transaction received from it already, PRI-9) unless ``exclude_held``
        (GET CONVERSATION GROUP, RCV-5). Groups found held by others are added to
        ``known_locked`` when given, and groups in it are not tried again.
        """
        ...

    def receive_first_group(
        self,
        queue_id: int,
        limit: int,
        *,
        known_locked: set[bytes],
        catalog_version: int | None = None,
    ) -> list[MessageRow] | None:
        """A RECEIVE while the connection holds no group: lock the group :meth:`lock_next_group`
        would and return its ready messages as :meth:`group_messages` does (at most ``limit``,
        -1: all), on PostgreSQL in one round trip; a group found emptied once locked is given
        back and the next tried (eight at most); ``[]``: none had. ``known_locked`` as there.
        ``catalog_version``: the catalog version the caller checked the RECEIVE against; when
        the stored one is another, nothing is locked or read and the result is None."""
        ...

    def release_locks(self, wake: Collection[int] | None = None) -> None:
        """Release every group lock this connection holds (nothing when none); ``wake`` as for
        :meth:`commit`: whose waiters elsewhere the released groups concern."""
        ...


class QueueActivityStore(Protocol):
    """Per-queue activity every process of the database must see (ACT-3, ACT-5b, ACT-8):
    sessions waiting in RECEIVE, and the broker-clock times of the last empty RECEIVE and of the
    last RECEIVE. Kept outside the transactions (written at once, never rolled back); a dead
    process's waits vanish with it."""

    def begin_wait(self, queue_id: int) -> int | None:
        """Count one more session waiting on the queue; returns a token for :meth:`end_wait`
        (None when the backend counts no more)."""
        ...

    def end_wait(self, token: int | None) -> None:
        """The wait of ``token`` ended (None: nothing)."""
        ...

    def waiting(self, queue_id: int) -> int:
        """Sessions of every live process waiting on the queue now."""
        ...

    def note_empty(self, queue_id: int, when: float) -> None:
        """A RECEIVE or GET CONVERSATION GROUP on the queue came back empty at ``when``
        (broker-clock seconds); a later time wins."""
        ...

    def last_empty(self, queue_id: int) -> float | None:
        """The latest time noted by :meth:`note_empty` in any process, or None."""
        ...

    def note_receive(self, queue_id: int, when: float) -> None:
        """A RECEIVE ran on the queue at ``when``; a later time wins (a backend may write it
        at most once per broker-clock second per process)."""
        ...

    def last_receive(self, queue_id: int) -> float | None:
        """The latest time noted by :meth:`note_receive` in any process, or None."""
        ...

    def forget(self, queue_id: int) -> None:
        """Drop a queue's times and waits (DROP QUEUE: a new queue may reuse its id)."""
        ...


class Storage(Protocol):
    """A database opened from a URL and migrated to the current schema; pools its connections.
    Thread-safe: any thread may connect and release."""

    url: str
    """The URL it was opened from (SQLite: ``sqlite:///path``)."""
    database: str
    """The database as error messages name it (``SQLite database <path>``, ``PostgreSQL
    database 'name' at host:port (schema s)``; never a password)."""
    database_name: str
    """The database's name (EVENT_INSTANCE's DatabaseName): SQLite's file name without its
    extension, PostgreSQL's current_database()."""
    poll_interval: float
    """Real seconds between looks for other processes' commits."""
    paramstyle: str
    """Placeholders of the application's SQL in ``tx.execute``: "qmark" (``?``) or "format"
    (``%s``)."""

    @property
    def activity(self) -> QueueActivityStore:
        """The database's queue activity, shared by every process."""
        ...

    def connect(self) -> StorageConnection:
        """A connection for one broker transaction (pooled), outside any write transaction and
        holding no group.

        Raises:
            StorageError: the storage is closed, or no connection came within the busy time-out.
        """
        ...

    def connection(self) -> AbstractContextManager[StorageConnection]:
        """:meth:`connect` for a ``with`` block, :meth:`release` after it."""
        ...

    def release(self, conn: StorageConnection) -> None:
        """Give a connection back: roll back its write transaction, release its group locks
        and return it to the pool (or close it when it failed or the pool is full). Never
        raises."""
        ...

    def statistics(self) -> StorageStatistics:
        """Sessions handed out and idle, and the failures raised since open."""
        ...

    def watch_changes(self) -> Callable[[float], bool | set[int]]:
        """A function, for one poller thread, waiting up to the given real seconds for other
        processes' commits: False (none), True (wake every waiter) or the wait keys to wake.
        This storage's own commits may be reported too (harmless)."""
        ...

    def try_lead(self) -> bool:
        """Hold or take the database's leader lock without waiting; True while this storage
        leads (one storage per database at a time; freed when its process dies).

        Never raises: an unreachable database means not leading."""
        ...

    def resign(self) -> None:
        """Give leadership up (another storage's next :meth:`try_lead` may take it)."""
        ...

    def close(self) -> None:
        """Close every pooled connection, the watchers, the leader lock and the activity store;
        :meth:`connect` raises afterwards."""
        ...
