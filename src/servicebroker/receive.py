"""RECEIVE and GET CONVERSATION GROUP (RCV-1..5, PRI-12, PRI-13, SYS-2, QUE-3).

One call takes messages of one conversation group: the highest-priority group that no other
transaction holds (or one this transaction holds already, RCV-2), locked until the transaction
ends. Within the group: conversation by conversation, highest priority first, each in send order
with DialogTimer and Error messages first (SYS-2). A waiting call wakes at once on an in-process
commit or clock move, and polls for other processes' changes every storage ``poll_interval``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from .activation import Trigger
from .catalog import CatalogSnapshot, QueueDef
from .errors import BrokerError, ConversationError, QueueDisabledError
from .messages import Message, fast_uuid
from .storage.base import MessageRow

if TYPE_CHECKING:
    from .transaction import Transaction

__all__ = ["get_conversation_group", "receive", "to_messages"]


def _check_top(top: object) -> int:
    if top is None:
        return -1
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise BrokerError(f"RECEIVE TOP must be an integer >= 0 or None, got {top!r}")
    return top


def _deadline(tx: Transaction, timeout: object, statement: str) -> float | None:
    if timeout is None or timeout == -1:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise BrokerError(f"{statement} timeout must be seconds >= 0, -1 or None, got {timeout!r}")
    return tx._broker.clock.now() + float(timeout)


def _live_queue(tx: Transaction, name: str, statement: str, *, refresh: bool = True) -> QueueDef:
    """The queue, checked to exist and be ON (QUE-3). ``refresh`` re-reads the catalog version
    first (on every wake-up of a waiting call; the first attempt uses the transaction's)."""
    catalog = tx.refresh_catalog() if refresh else tx.catalog
    queue = catalog.queues.get(name)
    if queue is None:
        if name in tx._broker._dropped_queue_names:
            raise QueueDisabledError(f"{statement}: queue {name!r} was dropped")
        raise QueueDisabledError(f"{statement}: queue {name!r} does not exist")
    if not queue.status:
        raise QueueDisabledError(f"{statement}: queue {name!r} is disabled (STATUS = OFF)")
    return queue


def to_messages(cat: CatalogSnapshot, rows: list[MessageRow], queue_name: str) -> list[Message]:
    """Queue rows as :class:`Message` objects, names resolved through the catalog."""
    names: dict[tuple[int, int, int], tuple[str, str, str]] = {}
    ids: dict[bytes, uuid.UUID] = {}
    out = []
    for (
        status,
        priority,
        order,
        group,
        handle,
        seq,
        service_id,
        contract_id,
        mt_id,
        validation,
        body,
        message_id,
        _queue_id,
    ) in rows:
        g = ids.get(group)
        if g is None:
            g = ids[group] = fast_uuid(group)
        h = ids.get(handle)
        if h is None:
            h = ids[handle] = fast_uuid(handle)
        key = (service_id, contract_id, mt_id)
        named = names.get(key)
        if named is None:
            service = cat.services_by_id.get(service_id)
            contract = cat.contracts_by_id.get(contract_id)
            named = names[key] = (
                service.name if service else "",
                contract.name if contract else "",
                cat.message_types_by_id[mt_id].name,
            )
        out.append(
            Message(
                status,
                priority,
                order,
                g,
                h,
                seq,
                named[0],
                service_id,
                named[1],
                contract_id,
                named[2],
                mt_id,
                validation,
                body,
                fast_uuid(message_id),
                queue_name,
            )
        )
    return out


def _take(tx: Transaction, rows: list[MessageRow], top: int) -> list[MessageRow]:
    skip = tx._received_set
    if skip:
        rows = [r for r in rows if r[2] not in skip]
    return rows if top < 0 else rows[:top]


def receive(
    tx: Transaction,
    queue_name: str,
    *,
    top: int | None,
    conversation_handle: object,
    conversation_group_id: object,
    timeout: float | None,
) -> list[Message]:
    """RECEIVE for :meth:`Transaction.receive` (see there for arguments and errors)."""
    from .transaction import to_handle

    limit = _check_top(top)
    statement = f"RECEIVE FROM {queue_name!r}"
    if conversation_handle is not None and conversation_group_id is not None:
        raise ConversationError(
            f"{statement}: WHERE takes conversation_handle or conversation_group_id, not both"
        )
    queue = _live_queue(tx, queue_name, statement, refresh=False)
    deadline = _deadline(tx, timeout, statement)
    conn = tx._conn
    broker = tx._broker
    first = [True]

    def check_queue() -> None:
        if first[0]:
            first[0] = False
        else:
            _live_queue(tx, queue_name, statement)

    if limit == 0:
        return []

    if conversation_handle is not None:
        handle = to_handle(conversation_handle)
        row = tx._endpoints.get(handle.bytes) or conn.get_endpoint(handle.bytes)
        if row is None or row.queue_id != queue.queue_id or row.state == "CD":
            raise ConversationError(
                f"{statement}: conversation handle {handle} is not on this queue"
            )
        group = row.conversation_group_id

        def by_handle() -> list[MessageRow] | None:
            check_queue()
            if not conn.try_lock_group(group):
                return None
            fetch = -1 if limit < 0 else limit + len(tx._received_set)
            rows = _take(tx, conn.conversation_messages(group, handle.bytes, fetch), limit)
            return rows or None

        attempt = by_handle
    elif conversation_group_id is not None:
        group_id = to_handle(conversation_group_id, "conversation_group_id").bytes
        if tx._group_queue(group_id) != queue.queue_id:
            raise ConversationError(
                f"{statement}: conversation group {uuid.UUID(bytes=group_id)} is not on this queue"
            )

        def by_group() -> list[MessageRow] | None:
            check_queue()
            if not conn.try_lock_group(group_id):
                return None
            fetch = -1 if limit < 0 else limit + len(tx._received_set)
            rows = _take(tx, conn.group_messages(group_id, fetch), limit)
            return rows or None

        attempt = by_group
    else:

        def next_group() -> list[MessageRow] | None:
            check_queue()
            for _ in range(8):
                held = conn.held_groups()
                group = conn.lock_next_group(
                    queue.queue_id, tx._received_set, known_locked=tx._known_locked()
                )
                if group is None:
                    return None
                fetch = -1 if limit < 0 else limit + len(tx._received_set)
                rows = _take(tx, conn.group_messages(group, fetch), limit)
                if rows:
                    return rows
                if group not in held:
                    # read before its last holder committed: the group is empty now
                    conn.unlock_group(group)
            return None

        attempt = next_group

    where = conversation_handle is not None or conversation_group_id is not None
    tx._locked_queues.add(queue.queue_id)
    rows = broker._wait_for(attempt, deadline, queue_id=queue.queue_id, counts_as_waiting=not where)
    broker._note_receive(queue.queue_id, empty=rows is None, where=where)
    if queue.queue_id not in tx._receive_checked:
        tx._receive_checked.add(queue.queue_id)
        broker.activation.check({queue.queue_id}, Trigger.RECEIVE)  # ACT-4b, once per transaction
    if rows is None:
        return []
    tx._record_received(queue.queue_id, [r[2] for r in rows])
    return to_messages(tx.catalog, rows, queue.name)


def get_conversation_group(
    tx: Transaction, queue_name: str, *, timeout: float | None
) -> uuid.UUID | None:
    """GET CONVERSATION GROUP for :meth:`Transaction.get_conversation_group`."""
    statement = f"GET CONVERSATION GROUP FROM {queue_name!r}"
    queue = _live_queue(tx, queue_name, statement)
    deadline = _deadline(tx, timeout, statement)
    conn = tx._conn

    def attempt() -> bytes | None:
        _live_queue(tx, queue_name, statement)
        return conn.lock_next_group(
            queue.queue_id, tx._received_set, exclude_held=True, known_locked=tx._known_locked()
        )

    tx._locked_queues.add(queue.queue_id)
    group = tx._broker._wait_for(attempt, deadline, queue_id=queue.queue_id, counts_as_waiting=True)
    if group is None:
        tx._broker._note_receive(queue.queue_id, empty=True, where=False)
        return None
    return uuid.UUID(bytes=group)
