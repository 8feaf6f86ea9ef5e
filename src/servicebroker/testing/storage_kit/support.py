"""What the contract checks share: the violation they raise, their assertions, a bench that
closes what a check opened, and writers of test rows."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

from ...errors import IntegrityConflict
from ...messages import new_id
from ...storage.base import Storage, StorageConnection
from ...storage.rows import CatalogRows, EndpointRow, MessageRow, QueueInsert

__all__ = [
    "FAR",
    "NOW",
    "Bench",
    "ContractViolation",
    "StorageOpener",
    "bodies",
    "catalog_has",
    "committed",
    "each",
    "endpoint",
    "equal",
    "expect",
    "message",
    "new_id",
    "new_queue",
    "orders",
    "refused",
    "transmission",
    "typed",
]

StorageOpener = Callable[[], Storage]
"""Opens a new :class:`~servicebroker.storage.base.Storage` on the database under test (the
same database at every call)."""

_T = TypeVar("_T")

NOW = 1_700_000_000.0
"""The broker-clock time the checks write (seconds since the epoch)."""
FAR = NOW + 1_000_000.0
"""The lifetime of the checks' endpoints, except :func:`check_timers`'s own."""


class ContractViolation(AssertionError):
    """A backend broke the storage contract; the message names the check and what was wrong."""


# -- helpers -----------------------------------------------------------------------------------
def expect(condition: bool, message: str) -> None:
    """Raise :class:`ContractViolation` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ContractViolation(message)


def equal(actual: object, expected: object, what: str) -> None:
    """Raise :class:`ContractViolation` naming ``what`` and both values unless they are equal."""
    if actual != expected:
        raise ContractViolation(f"{what}: expected {expected!r}, got {actual!r}")


def typed(rows: Iterable[object], row_type: type, what: str) -> None:
    """Raise :class:`ContractViolation` unless every row is a ``row_type`` (the contract's
    named row types, :mod:`servicebroker.storage.rows`)."""
    for row in rows:
        expect(
            isinstance(row, row_type),
            f"{what}: rows must be {row_type.__name__}, got {type(row).__name__}",
        )


class Bench:
    """The storages and connections one check opened; all released and closed at its end."""

    def __init__(self, open_storage: StorageOpener) -> None:
        self._open = open_storage
        self._storages: list[Storage] = []
        self._connections: list[tuple[Storage, StorageConnection]] = []

    def __enter__(self) -> Bench:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            for storage, conn in reversed(self._connections):
                storage.release(conn)
        finally:
            for storage in reversed(self._storages):
                storage.close()

    def storage(self) -> Storage:
        """Open one more storage on the database (another process, as far as it can tell)."""
        storage = self._open()
        self._storages.append(storage)
        return storage

    def connect(self, storage: Storage) -> StorageConnection:
        """A connection of ``storage``, released at the end of the check."""
        conn = storage.connect()
        self._connections.append((storage, conn))
        return conn


def committed(conn: StorageConnection, write: Callable[[], Any]) -> Any:
    """Run ``write`` in a write transaction of ``conn`` and commit it; its result."""
    conn.begin_write()
    try:
        result = write()
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
    return result


def refused(conn: StorageConnection, write: Callable[[], object], what: str) -> None:
    """Run ``write`` in a write transaction of ``conn``: it must raise IntegrityConflict. Rolled
    back either way."""
    conn.begin_write()
    try:
        write()
    except IntegrityConflict:
        return
    finally:
        conn.rollback()
    raise ContractViolation(f"{what} must raise IntegrityConflict")


def each(action: Callable[[_T], object], items: Iterable[_T]) -> None:
    """Call ``action`` on every item (inside a lambda given to :func:`committed`)."""
    for item in items:
        action(item)


def new_queue(conn: StorageConnection) -> int:
    """A new queue (STATUS ON, retention OFF); its id."""
    name = f"kit_{uuid.uuid4().hex[:12]}"
    return int(
        committed(
            conn, lambda: conn.catalog_write("insert_queue", (name, 1, 0, 1, 0, None, 0, NOW))
        )
    )


def endpoint(
    queue_id: int,
    *,
    conversation_id: bytes | None = None,
    is_initiator: bool = True,
    group_id: bytes | None = None,
    state: str = "CO",
    lifetime: float = FAR,
    dialog_timer: float | None = None,
    priority: int = 5,
) -> EndpointRow:
    """An endpoint to insert on ``queue_id`` (new handle, and new conversation and group unless
    given)."""
    return EndpointRow(
        endpoint_id=0,
        conversation_handle=new_id(),
        conversation_id=conversation_id or new_id(),
        is_initiator=is_initiator,
        service_contract_id=1,
        conversation_group_id=group_id or new_id(),
        service_id=1,
        queue_id=queue_id,
        far_service="//kit/far",
        lifetime=lifetime,
        state=state,
        dialog_timer=dialog_timer,
        send_sequence=0,
        receive_sequence=0,
        priority=priority,
    )


def message(
    queue_id: int,
    group_id: bytes,
    handle: bytes,
    *,
    priority: int = 5,
    conversation_order: int = 1,
    rank: int = 2,
    sequence: int = 0,
    body: bytes = b"",
) -> QueueInsert:
    """A ready message (status 1) of conversation endpoint ``handle`` in ``group_id``."""
    return QueueInsert(
        queue_id=queue_id,
        status=1,
        priority=priority,
        conversation_group_id=group_id,
        conversation_handle=handle,
        conversation_order=conversation_order,
        rank=rank,
        message_sequence_number=sequence,
        service_id=1,
        service_contract_id=1,
        message_type_id=1,
        validation="N",
        message_body=body,
        message_id=new_id(),
        message_enqueue_time=1000.0 + sequence,
    )


def transmission(
    conversation_id: bytes,
    level: int,
    body: bytes,
    message_type_id: int = 1,
    *,
    sequence: int = 0,
    to_broker_instance: str | None = None,
) -> tuple[Any, ...]:
    """A transmission row to insert: TransmissionRow's fields but its id, in order (sent by the
    initiator of ``conversation_id`` at ``level``); with ``to_broker_instance`` a row for the
    transport (``is_remote`` 1)."""
    remote = int(to_broker_instance is not None)
    return (
        *(new_id(), conversation_id, 1, "//kit/to", "//kit/from", 1, NOW, sequence),
        *(message_type_id, "N", body, new_id(), "message", "", level, FAR),
        *(remote, to_broker_instance),
    )


def bodies(rows: Iterable[MessageRow]) -> list[bytes]:
    """The message bodies of ``rows``, in order."""
    return [row.message_body for row in rows]


def orders(conn: StorageConnection, queue_id: int) -> dict[bytes, int]:
    """Queuing order by body of every row of the queue."""
    return {row.message_body: row.queuing_order for row in conn.peek_after(queue_id, 0, -1)}


# -- endpoints ---------------------------------------------------------------------------------
def catalog_has(rows: CatalogRows, what: str, **names: str) -> None:
    """Raise :class:`ContractViolation` unless each ``field=name`` names exactly one row of
    that field of ``rows`` (e.g. ``queues="q"``)."""
    for field, name in names.items():
        found = [row for row in getattr(rows, field) if row.name == name]
        expect(len(found) == 1, f"load_catalog: {field} must hold {what} {name!r} once")
