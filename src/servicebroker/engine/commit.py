"""A transaction's commit: its operation log (:mod:`.recorded`) replayed, in statement order,
on the rows as they stand at commit, inside one storage write transaction ("Statements check
now, commit writes later", docs/architecture.md).

The statements (:mod:`.transaction`) checked against working copies and recorded what they
decided; :func:`write_commit` takes the locks in the one order every commit takes them (the
endpoints, the queues it may put messages on, then the groups), finishes what the transaction
received, re-checks that what it used still exists, and hands each operation to the
:class:`~servicebroker.engine.delivery.Applier`, which writes in batches at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from ..catalog import CatalogSnapshot
from ..errors import ConversationError
from ..storage.base import StorageConnection
from ..storage.failures import CopiesChanged
from ..storage.rows import EndpointRow
from .context import BrokerContext
from .delivery import Applier
from .receive import Receiving
from .recorded import (
    BeginDialogOp,
    EndConversationOp,
    MoveOp,
    RecordedOp,
    SendOp,
    TimerOp,
)
from .waiting import LOCKS

__all__ = ["Committed", "check_begun_dialogs", "replay", "write_commit"]


class Committed(NamedTuple):
    """What :func:`write_commit` wrote: the ``applier`` (its woken queues and tallies) and
    whether the commit changed the catalog (``catalog_changed``: the cache must be
    invalidated)."""

    applier: Applier
    catalog_changed: bool


def write_commit(
    context: BrokerContext,
    conn: StorageConnection,
    receiving: Receiving,
    endpoints: Collection[EndpointRow],
    locked_group_of: Mapping[bytes, bytes],
    ops: Sequence[RecordedOp],
    now: float,
) -> Committed:
    """Write one transaction and commit it on ``conn``: the messages it received finished
    (deleted, or kept with RETENTION), ``ops`` replayed in order, everything written and
    committed, waking the waiters of the queues touched.

    When nothing was written in the transaction before (no ``tx.execute``), the storage may
    write from its copies of the endpoints instead of reading them (one round trip fewer on
    PostgreSQL, checked by the server); if they were out of date (CopiesChanged: nothing
    committed, the group locks kept), the attempt is rolled back and written again, reading
    the rows.

    Args:
        context: the broker's shared parts (the catalog cache re-read for dropped services).
        conn: the transaction's storage connection (its write transaction is begun here).
        receiving: the transaction's RECEIVE side (what it received and locked).
        endpoints: the transaction's working copies; those already stored (an
            ``endpoint_id``) must still exist, in the group locked (``locked_group_of``, by
            handle).
        ops: the operation log, in statement order.
        now: the broker's time at commit, seconds.

    Raises:
        ConversationError: an endpoint used was removed or moved meanwhile, a dialog begun
            lost its service or contract (:func:`check_begun_dialogs`), or messages received
            were removed: nothing is committed (the caller rolls back).
        StorageError: the database failed (see :meth:`StorageConnection.commit`).
    """
    args = (context, conn, receiving, endpoints, locked_group_of, ops, now)
    if conn.in_write:
        return _write(*args, cached=False)
    try:
        return _write(*args, cached=True)
    except CopiesChanged:
        conn.rollback()
        return _write(*args, cached=False)


def _write(
    context: BrokerContext,
    conn: StorageConnection,
    receiving: Receiving,
    endpoints: Collection[EndpointRow],
    locked_group_of: Mapping[bytes, bytes],
    ops: Sequence[RecordedOp],
    now: float,
    *,
    cached: bool,
) -> Committed:
    """One attempt of :func:`write_commit` (``cached``: from the storage's copies).

    Raises:
        CopiesChanged: (``cached``) the copies were out of date: nothing was committed.
    """
    conn.begin_write()
    catalog = receiving.catalog
    applier = Applier(conn, catalog, now)
    begun = [op.row for op in ops if isinstance(op, BeginDialogOp)]
    # locks in the one order every commit takes them (the storage contract): the endpoints,
    # the queues it may put messages on, then the groups
    applier.prefetch((row.conversation_id for row in endpoints if row.endpoint_id), cached=cached)
    applier.lock_queues(begun)
    for queue_id, orders in receiving.received.items():
        q = catalog.queues_by_id.get(queue_id)
        where = q.name if q else queue_id
        removed = (
            f"messages this transaction received from queue {where!r} were removed meanwhile "
            f"(DROP SERVICE, DROP QUEUE or ALTER DATABASE … SET NEW_BROKER); the transaction is "
            f"rolled back"
        )
        conn.finish_received(orders, retain=bool(q and q.retention), removed=removed)
        conn.reset_rollbacks(queue_id)
    for row in endpoints:
        if row.endpoint_id:  # existing endpoints: still there, in the group locked?
            handle = row.conversation_handle
            applier.endpoint(handle, locked_group_of[handle], must_exist=True)
    if begun:  # a DROP SERVICE / CONTRACT committed meanwhile refuses the dialogs begun
        current = context.catalog.snapshot(conn)
        if current.version != catalog.version:
            check_begun_dialogs(current, begun)
    catalog_changed = replay(applier, ops)
    applier.finish()
    conn.commit(applier.woken_queues | receiving.locked_queues | {LOCKS})
    return Committed(applier, catalog_changed)


def replay(applier: Applier, ops: Iterable[RecordedOp]) -> bool:
    """Apply each operation through ``applier``, in order, re-decided on the rows as they
    stand now (an endpoint gone meanwhile is skipped by the :class:`Applier`). Returns True
    when one changed the catalog (an event notification's dialog, EVT-1)."""
    conn = applier.conn
    catalog_changed = False
    for op in ops:  # the most frequent first
        if isinstance(op, SendOp):
            applier.send(op.handle, op.message)
        elif isinstance(op, BeginDialogOp):
            applier.insert_endpoint(replace(op.row))
        elif isinstance(op, EndConversationOp):
            applier.end(op.handle, op.mode, op.error, op.description)
        elif isinstance(op, TimerOp):
            applier.set_timer(op.handle, op.due)
        elif isinstance(op, MoveOp):
            applier.move(op.handle, op.group_id)
        else:
            conn.catalog_write(
                "set_event_notification_conversation", (op.handle, op.event_notification_id)
            )
            conn.bump_catalog_version()
            catalog_changed = True
    return catalog_changed


def check_begun_dialogs(current: CatalogSnapshot, begun: list[EndpointRow]) -> None:
    """At commit, the FROM services and contracts of the dialogs a transaction begins still
    exist in the ``current`` catalog: a DROP SERVICE or DROP CONTRACT committed while the
    transaction ran refuses the commit (in the broker's own process at once; another process's
    within the storage's poll interval), so no endpoint is left on a dropped service.

    Raises:
        ConversationError: naming the dialog; the transaction is rolled back.
    """
    for row in begun:
        handle = uuid.UUID(bytes=row.conversation_handle)
        if row.service_id not in current.services_by_id:
            raise ConversationError(
                f"BEGIN DIALOG {handle}: its FROM service was dropped while this transaction "
                f"ran; the transaction is rolled back"
            )
        if row.service_contract_id not in current.contracts_by_id:
            raise ConversationError(
                f"BEGIN DIALOG {handle}: its contract was dropped while this transaction ran; "
                f"the transaction is rolled back"
            )
