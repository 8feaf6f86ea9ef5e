"""The rows one commit works on and the writes it batches: the base of the
:class:`~servicebroker.engine.delivery.Applier`.

:class:`CommitRows` reads each endpoint the commit touches once (locked where the backend locks
rows), keeps it as it stands in this commit, and collects what the commit writes — queue rows
to insert and delete, changed endpoints, endpoints to delete, closed conversations to remember
— to write them in batches at :meth:`CommitRows.finish`, not one statement each. The modules
above it decide what is written: :mod:`.system_messages` (the messages the broker makes),
:mod:`.local_delivery` (onto this database's queues), :mod:`.outbound` (to the transmission
queue and the transport) and :mod:`.closing` (ending and deleting conversations).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable

from ..catalog import CatalogSnapshot
from ..dialogs import receive_rank
from ..errors import ConversationError
from ..messages import Outgoing
from ..storage.base import StorageConnection
from ..storage.failures import CopiesChanged
from ..storage.rows import EndpointRow, QueueInsert
from .transmission import TransmissionQueue

__all__ = ["CommitRows"]


class CommitRows:
    """One commit's rows and batched writes through ``conn`` (already in its write
    transaction).

    Args:
        conn: the commit's storage connection.
        catalog: the catalog snapshot to resolve names and queue settings.
        now: the broker's time, seconds.

    Attributes:
        woken_queues: the queues this commit put ready messages on (their waiters are woken).
        arrived_on_empty: those of them with activation that had no ready message (ACT-5a).
        enqueued: messages put on queues, by (queue id, message type name).
        sent: messages SENT, by (the sender's queue id, message type name).
    """

    def __init__(self, conn: StorageConnection, catalog: CatalogSnapshot, now: float) -> None:
        self.conn = conn
        self.catalog = catalog
        self.now = now
        self._rows: dict[bytes, EndpointRow | None] = {}
        self._sides: dict[tuple[bytes, bool], bytes | None] = {}
        self._dirty: dict[bytes, EndpointRow] = {}
        self._pending: list[QueueInsert] = []
        self._pending_handles: set[bytes] = set()
        self._purges: dict[bytes, bytes] = {}  # handle -> group: its queue rows to delete
        self._purged_queues: set[int] = set()
        self._deleted: list[int] = []  # endpoint ids to delete
        self._closed_remote: list[tuple[EndpointRow, float]] = []  # sides with another instance
        # the SEND fast path: the far endpoint a plain message on the conversation reached in
        # this commit (cleared by any statement that may change a state or a group)
        self._routes: dict[bytes, EndpointRow] = {}
        self._cached = False  # the rows may be the storage's copies (prefetch(cached=True))
        self.transmission = TransmissionQueue(conn, catalog, now)
        self.woken_queues: set[int] = set()
        self.arrived_on_empty: set[int] = set()
        self.enqueued: Counter[tuple[int, str]] = Counter()  # (queue id, message type): count
        self.sent: Counter[tuple[int, str]] = Counter()  # (sender's queue id, message type)

    # -- rows ----------------------------------------------------------------------------
    def prefetch(self, conversation_ids: Iterable[bytes], *, cached: bool = False) -> None:
        """Read both endpoints of the conversations into the cache (one query where the
        backend can; locked on a backend whose commits run in parallel). A side not found is
        not cached as missing: :meth:`far_of` reads it again when it is needed, with a fresh
        view — a commit this one waited for may have created it (the first message delivered
        from the transmission queue creates the target endpoint).

        ``cached``: the storage may answer from its copies, checked later
        (:meth:`~servicebroker.storage.base.StorageConnection.lock_conversations`)."""
        wanted = [c for c in dict.fromkeys(conversation_ids) if (c, True) not in self._sides]
        if not wanted:
            return
        self._cached = self._cached or cached
        rows, local_waiting = self.conn.lock_conversations(wanted, cached=cached)
        self.transmission.knows_local(local_waiting)
        for row in rows:
            if row.conversation_handle not in self._rows:
                self._rows[row.conversation_handle] = row
                self._sides[(row.conversation_id, row.is_initiator)] = row.conversation_handle

    def lock_queues(self, new_endpoints: Iterable[EndpointRow]) -> None:
        """Take the queues this commit may put messages on (:meth:`StorageConnection.lock_queues`)
        before it touches any group: the queues of every endpoint read so far (both ends of
        the prefetched conversations: deliveries, retention and errors go there) and of the
        target services of ``new_endpoints`` (dialogs begun in this transaction)."""
        queues = {row.queue_id for row in self._rows.values() if row is not None}
        for row in new_endpoints:
            queues.add(row.queue_id)
            target = self.catalog.services.get(row.far_service)
            if target is not None:
                queues.add(target.queue_id)
        self.conn.lock_queues(queues)

    def endpoint(
        self, handle: bytes, locked_group: bytes | None = None, *, must_exist: bool = False
    ) -> EndpointRow | None:
        """The endpoint as it stands in this commit (read once, then cached).

        Raises:
            ConversationError: ``locked_group`` (the group the statement locked) is no longer
                the endpoint's group: a concurrent MOVE CONVERSATION won; or, ``must_exist``,
                the endpoint was removed while the transaction used it (DROP SERVICE, DROP
                CONTRACT, NEW_BROKER): the commit fails.
            CopiesChanged: the same disagreement while the rows may be the storage's copies
                (:meth:`prefetch` ``cached``): a copy older than a MOVE committed before the
                statement ran; the commit is written again, reading the rows, and decides.
        """
        if handle not in self._rows:
            row = self.conn.get_endpoint(handle, for_update=True)
            self._rows[handle] = row
            if row is not None:
                self._sides[(row.conversation_id, row.is_initiator)] = handle
        row = self._rows[handle]
        if row is None and must_exist:
            raise ConversationError(
                f"conversation {uuid.UUID(bytes=handle)} was removed while this transaction "
                f"used it (DROP SERVICE, DROP CONTRACT or ALTER DATABASE … SET NEW_BROKER); "
                f"the transaction is rolled back"
            )
        if (
            locked_group is not None
            and row is not None
            and row.conversation_group_id != locked_group
        ):
            if self._cached:
                raise CopiesChanged(
                    f"conversation {uuid.UUID(bytes=handle)}: the commit's copy of its endpoint "
                    f"is in another group than the one its statement locked"
                )
            raise ConversationError(
                f"conversation {uuid.UUID(bytes=handle)} was moved to another group by a concurrent "
                f"MOVE CONVERSATION; the transaction is rolled back, retry it"
            )
        return row

    def far_of(self, row: EndpointRow) -> EndpointRow | None:
        """The other endpoint of ``row``'s conversation, if it exists in this database."""
        return self.side(row.conversation_id, not row.is_initiator)

    def side(self, conversation_id: bytes, is_initiator: bool) -> EndpointRow | None:
        """The endpoint of that side (``is_initiator``) of conversation ``conversation_id``
        (16 bytes) in this database, or None: read once, locked, then cached — how a message or
        an acknowledgement from another instance finds its endpoint (NET-2, RTE-4)."""
        key = (conversation_id, is_initiator)
        if key not in self._sides:
            row = self.conn.get_far_endpoint(conversation_id, is_initiator, for_update=True)
            self._sides[key] = None if row is None else row.conversation_handle
            if row is not None:
                self._rows[row.conversation_handle] = row
        handle = self._sides[key]
        return None if handle is None else self._rows.get(handle)

    def touch(self, row: EndpointRow) -> None:
        """Mark an endpoint to be written at :meth:`finish`."""
        self._dirty[row.conversation_handle] = row

    def insert_endpoint(self, row: EndpointRow) -> EndpointRow:
        """Insert a new endpoint now (its id orders its messages in the group)."""
        row.endpoint_id = self.conn.insert_endpoint(row)
        self._rows[row.conversation_handle] = row
        self._sides[(row.conversation_id, row.is_initiator)] = row.conversation_handle
        return row

    # -- batched writes --------------------------------------------------------------------
    def flush_messages(self, handle: bytes | None = None) -> None:
        """Write the queued deletes and inserts of queue rows: all of them, or only if some
        inserts are for ``handle`` (before a statement that moves that conversation's rows)."""
        if handle is None or handle in self._pending_handles or handle in self._purges:
            self._flush_purges()
            if self._pending:
                self.conn.insert_messages(self._pending)
                self._pending = []
                self._pending_handles.clear()

    def _purge(self, row: EndpointRow) -> None:
        """Delete the endpoint's queue rows (END CONVERSATION): its inserts still queued are
        dropped, its stored rows deleted with the others at :meth:`flush_messages` — one
        batch for the commit, the same rows as deleting them now."""
        handle = row.conversation_handle
        if handle in self._pending_handles:
            self._pending = [m for m in self._pending if m.conversation_handle != handle]
            self._pending_handles.discard(handle)
        self._purges[handle] = row.conversation_group_id
        self._purged_queues.add(row.queue_id)

    def _flush_purges(self) -> None:
        if self._purges:
            self.conn.delete_conversation_messages(
                [(group, handle) for handle, group in self._purges.items()]
            )
            self._purges.clear()
            self._purged_queues.clear()

    def _enqueue(self, row: EndpointRow, out: Outgoing, status: int = 1) -> None:
        if row.conversation_handle in self._purges:
            self._flush_purges()  # rows deleted before, this one stays
        self._pending_handles.add(row.conversation_handle)
        self._pending.append(
            QueueInsert(
                row.queue_id,
                status,
                row.priority,
                row.conversation_group_id,
                row.conversation_handle,
                row.endpoint_id,
                receive_rank(out.message_type_name),
                out.sequence,
                row.service_id,
                row.service_contract_id,
                out.message_type_id,
                out.validation,
                out.body,
                out.message_id,
                self.now,
            )
        )
        if status == 1:  # not a retained copy of a sent message (status 3)
            self.enqueued[row.queue_id, out.message_type_name] += 1
        if status == 1 and row.queue_id not in self.woken_queues:
            self.woken_queues.add(row.queue_id)
            queue = self.catalog.queues_by_id.get(row.queue_id)
            if queue is not None and queue.activation_enabled:
                if row.queue_id in self._purged_queues:
                    self._flush_purges()  # the queue as the deletes leave it
                if not self.conn.queue_has_ready(row.queue_id):
                    self.arrived_on_empty.add(row.queue_id)  # ACT-5a: new work on an idle queue

    def finish(self) -> None:
        """Write queue rows, the transport's transmission rows, changed endpoints and
        endpoint deletions."""
        self.flush_messages()
        self.transmission.flush()
        changed = [
            row for row in self._dirty.values() if self._rows.get(row.conversation_handle) is row
        ]
        if changed:
            self.conn.update_endpoints(changed)
        self._dirty.clear()
        if self._deleted:
            self.conn.delete_endpoints(self._deleted)
            self._deleted = []
        if self._closed_remote:
            self.conn.remember_closed_conversations(self._closed_remote)
            self._closed_remote = []

    def tally(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """(enqueued, sent): the messages this commit put on queues and SENT, by (queue name,
        message type name), for the broker's statistics."""
        return self._named(self.enqueued), self._named(self.sent)

    def _named(self, counts: Counter[tuple[int, str]]) -> dict[tuple[str, str], int]:
        queues = self.catalog.queues_by_id
        return {
            ((q.name if (q := queues.get(queue_id)) else f"#{queue_id}"), mt): n
            for (queue_id, mt), n in counts.items()
        }
