"""What the engine sees of storage: rows and named operations, never SQL or an engine object.

A backend provides a :class:`Storage` (opened from a URL, migrated, pooling connections) whose
:class:`StorageConnection` objects serve one broker transaction each: a database transaction for
the broker's changes and the application's own SQL, and the conversation-group locks that
transaction holds (locking the next available group of a queue is one storage operation, done
natively by each backend).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "CatalogRows",
    "EndpointRow",
    "MessageRow",
    "QueueActivityStore",
    "QueueInsert",
    "Storage",
    "StorageConnection",
    "TransmissionRow",
]

MessageRow = tuple[int, int, int, bytes, bytes, int, int, int, int, str, bytes, bytes, int]
"""A queue row as read: (status, priority, queuing_order, conversation_group_id,
conversation_handle, message_sequence_number, service_id, service_contract_id, message_type_id,
validation, message_body, message_id, queue_id)."""

QueueInsert = tuple[int, int, int, bytes, bytes, int, int, int, int, int, int, str, bytes, bytes]
"""A queue row to insert: (queue_id, status, priority, conversation_group_id,
conversation_handle, conversation_order, rank, message_sequence_number, service_id,
service_contract_id, message_type_id, validation, message_body, message_id)."""

TransmissionRow = tuple[
    int, bytes, bytes, int, str, str, int, float, int, int, str, bytes, bytes, str, str, int, float
]
"""A transmission-queue row: (transmission_id, conversation_handle, conversation_id,
is_initiator, to_service_name, from_service_name, service_contract_id, enqueue_time,
message_sequence_number, message_type_id, validation, message_body, message_id, arrival,
transmission_status, priority, lifetime). Inserted without the leading id."""


@dataclass(slots=True)
class EndpointRow:
    """One conversation endpoint (``sys.conversation_endpoints``); ids are 16-byte values,
    ``lifetime`` and ``dialog_timer`` absolute times in seconds on the broker's clock."""

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


@dataclass(frozen=True, slots=True)
class CatalogRows:
    """The whole catalog as rows, read in one go (the engine caches it per catalog version)."""

    version: int
    message_types: Sequence[tuple[int, str, str, int]]
    contracts: Sequence[tuple[int, str, int]]
    contract_usages: Sequence[tuple[int, int, str]]
    queues: Sequence[tuple[int, str, int, int, int, int, str | None, int, float]]
    services: Sequence[tuple[int, str, int]]
    service_contracts: Sequence[tuple[int, int]]
    event_notifications: Sequence[tuple[int, str, int, str, str, bytes | None]]
    broker_priorities: Sequence[tuple[int, str, str | None, str | None, str | None, int]]
    honor_broker_priority: bool = False


class StorageConnection(Protocol):
    """One broker transaction's connection. Methods that change rows must be called between
    :meth:`begin_write` and :meth:`commit` / :meth:`rollback`."""

    poll_interval: float

    @property
    def in_write(self) -> bool: ...
    def begin_write(self) -> None: ...
    def commit(self, wake: Collection[int] | None = None) -> None:
        """Commit; ``wake``: the wait keys (queue ids, LOCKS) whose waiters in other processes
        this commit concerns (None: everyone)."""
        ...

    def rollback(self) -> None: ...
    def execute_app(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]: ...
    def executemany_app(
        self, sql: str, seq_of_params: Iterable[Sequence[Any] | dict[str, Any]]
    ) -> None: ...
    def close(self) -> None: ...

    # catalog
    def catalog_version(self) -> int: ...
    def load_catalog(self) -> CatalogRows: ...
    def catalog_write(self, name: str, params: Sequence[Any]) -> int: ...
    def catalog_count(self, name: str, params: Sequence[Any]) -> int: ...
    def bump_catalog_version(self) -> None: ...
    def add_rollback(self, queue_id: int) -> int: ...
    def reset_rollbacks(self, queue_id: int) -> None: ...
    def disable_queue(self, queue_id: int, now: float) -> None: ...

    # endpoints
    def get_endpoint(self, handle: bytes) -> EndpointRow | None: ...
    def get_endpoint_and_lock(self, handle: bytes) -> tuple[EndpointRow | None, bool]:
        """The endpoint, and whether its group is now locked by this transaction (False: another
        holds it); one round trip where the backend can."""
        ...

    def get_far_endpoint(
        self, conversation_id: bytes, far_is_initiator: bool
    ) -> EndpointRow | None: ...
    def get_conversation(self, conversation_id: bytes) -> list[EndpointRow]: ...
    def get_conversations(self, conversation_ids: Sequence[bytes]) -> list[EndpointRow]:
        """Every endpoint of the given conversations (one query where the backend can)."""
        ...

    def insert_endpoint(self, row: EndpointRow) -> int: ...
    def update_endpoint(self, row: EndpointRow) -> None: ...
    def update_endpoints(self, rows: Sequence[EndpointRow]) -> None:
        """Write several endpoints' changeable columns (one batch)."""
        ...

    def delete_endpoint(self, endpoint_id: int) -> None: ...
    def group_queue(self, group_id: bytes) -> int | None: ...
    def due_timers(self, now: float, limit: int) -> list[bytes]: ...
    def due_lifetimes(self, now: float, limit: int) -> list[bytes]: ...
    def next_due_time(self) -> float | None: ...
    def list_endpoints(self) -> list[tuple[Any, ...]]: ...

    # queues
    def insert_messages(self, rows: Iterable[QueueInsert]) -> None: ...
    def group_messages(self, group_id: bytes, limit: int) -> list[MessageRow]: ...
    def conversation_messages(
        self, group_id: bytes, handle: bytes, limit: int
    ) -> list[MessageRow]: ...
    def peek(self, queue_id: int, limit: int) -> list[MessageRow]: ...
    def peek_after(self, queue_id: int, after: int, limit: int) -> list[MessageRow]: ...
    def queue_has_ready(self, queue_id: int) -> bool: ...
    def message_sequence(self) -> int: ...
    def queue_counts(self) -> list[tuple[int, int, int]]: ...
    def finish_received(self, queuing_orders: Iterable[int], *, retain: bool) -> None: ...
    def delete_conversation_messages(self, group_id: bytes, handle: bytes) -> None: ...
    def delete_queue_messages(self, queue_id: int) -> None: ...
    def move_conversation_messages(
        self, handle: bytes, old_group: bytes, group_id: bytes
    ) -> None: ...

    # transmission queue
    def insert_transmission(self, row: tuple[Any, ...]) -> None: ...
    def transmission_pending(self, limit: int) -> list[TransmissionRow]:
        """Each level's oldest ``limit`` transmission-queue rows."""
        ...

    def transmission_exists(self) -> bool: ...
    def transmission_count(self) -> int: ...
    def transmission_waiting(self, conversation_id: bytes, is_initiator: bool) -> bool: ...
    def delete_transmission(self, transmission_id: int) -> None: ...
    def set_transmission_status(self, transmission_id: int, status: str) -> None: ...
    def delete_transmission_of_endpoint(
        self, conversation_id: bytes, is_initiator: bool
    ) -> None: ...
    def list_transmission(self) -> list[tuple[Any, ...]]: ...

    # conversation-group locks, held until release_locks
    def try_lock_group(self, group_id: bytes) -> bool: ...
    def held_groups(self) -> frozenset[bytes]: ...
    def unlock_group(self, group_id: bytes) -> None: ...
    def lock_next_group(
        self,
        queue_id: int,
        skip: set[int],
        *,
        exclude_held: bool = False,
        known_locked: set[bytes] | None = None,
    ) -> bytes | None: ...
    def release_locks(self, wake: Collection[int] | None = None) -> None:
        """Release the transaction's group locks; ``wake`` as for :meth:`commit`."""
        ...


class QueueActivityStore(Protocol):
    """Per-queue activity every process must see (ACT-3, ACT-5b, ACT-8): waiting sessions and
    the times of the last empty RECEIVE and of the last RECEIVE."""

    def begin_wait(self, queue_id: int) -> int | None: ...
    def end_wait(self, token: int | None) -> None: ...
    def waiting(self, queue_id: int) -> int: ...
    def note_empty(self, queue_id: int, when: float) -> None: ...
    def last_empty(self, queue_id: int) -> float | None: ...
    def note_receive(self, queue_id: int, when: float) -> None: ...
    def last_receive(self, queue_id: int) -> float | None: ...
    def forget(self, queue_id: int) -> None: ...
    def close(self) -> None: ...


class Storage(Protocol):
    """A database opened from a URL and migrated to the current schema."""

    url: str
    database_name: str
    """The database's name (EVENT_INSTANCE's DatabaseName): SQLite's file name without its
    extension, PostgreSQL's current_database()."""
    poll_interval: float
    paramstyle: str
    """Placeholders of the application's SQL in ``tx.execute``: "qmark" (``?``) or "format"
    (``%s``)."""

    @property
    def activity(self) -> QueueActivityStore: ...

    def connect(self) -> StorageConnection: ...
    def connection(self) -> AbstractContextManager[StorageConnection]: ...
    def watch_changes(self) -> Callable[[float], bool | set[int]]:
        """A function waiting up to the given seconds for other processes' commits: False
        (none), True (wake every waiter) or the wait keys to wake."""
        ...

    def try_lead(self) -> bool:
        """Hold or take the database's leader lock; True while this storage leads."""
        ...

    def resign(self) -> None: ...
    def release(self, conn: StorageConnection) -> None: ...
    def close(self) -> None: ...
