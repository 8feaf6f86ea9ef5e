"""Local delivery: what a commit writes — the operations a transaction recorded, applied to fresh
rows inside the storage's write transaction, in statement order.

Statements validate against the transaction's working copies (so errors surface at the
statement), and :class:`Applier` re-applies their effects to the rows as they stand at commit
(an Error or EndDialog may have arrived meanwhile). It puts each message on the far endpoint's
queue, creating the target endpoint on its first message (PRI-3), or hands it to the
transmission queue (:mod:`.transmission`) while that queue is OFF or its service does not exist
yet (QUE-3), and deletes a conversation once both its endpoints are closed (DLG-4). The timer
(:mod:`.timer`) puts its DialogTimer and lifetime Error messages through the same
:class:`Applier`.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable

from ..catalog import DBO, CatalogSnapshot
from ..catalog.routing import LOCAL, RouteChooser
from ..dialogs import (
    DIALOG_TIMER,
    END_DIALOG,
    ERROR,
    TARGET_START,
    Arrival,
    EndAction,
    EndMode,
    State,
    after_local_end,
    after_refusal,
    after_sent,
    error_body,
    is_ended,
    on_arrival,
    on_lifetime_expired,
    receive_rank,
)
from ..errors import ConversationError
from ..messages import Outgoing, new_id
from ..storage.base import StorageConnection
from ..storage.rows import EndpointRow, QueueInsert
from .transmission import TransmissionQueue

__all__ = ["CLOSED_REMEMBERED", "Applier", "check_begun_dialogs"]

TARGET_GONE_CODE = -8493
CONTRACT_REFUSED_CODE = -8408
SERVICE_DROPPED = (-8470, "Remote service has been dropped.")
"""DROP SERVICE: the Error the far side of each of the service's conversations gets (SQL
Server's message 8470, negated as the broker's own errors are)."""
CONTRACT_DROPPED = (-8487, "The remote service contract has been dropped.")
"""DROP CONTRACT: the Error each endpoint of the contract's conversations gets (message 8487)."""
CLOSED_REMEMBERED = 1800.0
"""Seconds (broker clock) a closed endpoint of a dialog with another instance is remembered, so
that a late copy of its messages is a duplicate and not a new dialog: SQL Server keeps such an
endpoint for half an hour to prevent replay attacks (NET-2, SEC-2)."""
BROKER_CONVERSATIONS_ERRORED = (
    -8499,
    "The conversation was ended by ALTER DATABASE SET ERROR_BROKER_CONVERSATIONS "
    "(the database was attached, restored or copied).",
)
"""ALTER DATABASE … SET ERROR_BROKER_CONVERSATIONS: the Error each open endpoint gets. No
Microsoft page gives the code or text of this Error: both are this broker's choice
(docs/ddl.md)."""

_SYSTEM = frozenset({END_DIALOG, ERROR, DIALOG_TIMER})


class Applier:
    """Applies one commit's operations through ``conn`` (already in its write transaction).

    Args:
        conn: the transaction's storage connection.
        catalog: the catalog snapshot to resolve names and queue settings.
        now: the broker's time, seconds.
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
        self.transmission = TransmissionQueue(conn, catalog, now)
        self._routes: dict[bytes, EndpointRow] = {}
        self.woken_queues: set[int] = set()
        self.arrived_on_empty: set[int] = set()
        self.enqueued: Counter[tuple[int, str]] = Counter()  # (queue id, message type): count
        self.sent: Counter[tuple[int, str]] = Counter()  # (sender's queue id, message type)
        guid = catalog.service_broker_guid
        self._own_instance = None if guid is None else str(guid)
        self._route_chooser = RouteChooser(
            catalog.routes.values(), local_services=catalog.services, now=now
        )
        # RTE-2: with no route to another instance every dialog stays here (no lookup)
        self._network_routes = any(r.address.upper() != LOCAL for r in catalog.routes.values())

    # -- rows ----------------------------------------------------------------------------
    def prefetch(self, conversation_ids: Iterable[bytes]) -> None:
        """Read both endpoints of the conversations into the cache (one query where the
        backend can; locked on a backend whose commits run in parallel). A side not found is
        not cached as missing: :meth:`far_of` reads it again when it is needed, with a fresh
        view — a commit this one waited for may have created it (the first message delivered
        from the transmission queue creates the target endpoint)."""
        wanted = [c for c in dict.fromkeys(conversation_ids) if (c, True) not in self._sides]
        if not wanted:
            return
        for row in self.conn.get_conversations(wanted, for_update=True):
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

    # -- operations ----------------------------------------------------------------------
    def send(self, handle: bytes, out: Outgoing) -> None:
        """SEND: advance the sender and deliver (DLG-2)."""
        far = self._routes.get(handle)
        if far is not None:
            # fast path: this commit already delivered a plain message on this conversation
            row = self._rows[handle]
            assert row is not None
            row.send_sequence = out.sequence + 1
            self.sent[row.queue_id, out.message_type_name] += 1
            self.enqueued[far.queue_id, out.message_type_name] += 1
            self._pending_handles.add(far.conversation_handle)
            self._pending.append(
                QueueInsert(
                    far.queue_id,
                    1,
                    far.priority,
                    far.conversation_group_id,
                    far.conversation_handle,
                    far.endpoint_id,
                    2,
                    out.sequence,
                    far.service_id,
                    far.service_contract_id,
                    out.message_type_id,
                    out.validation,
                    out.body,
                    out.message_id,
                    self.now,
                )
            )
            far.receive_sequence = out.sequence + 1
            self.touch(far)
            return
        row = self.endpoint(handle)
        if row is None:
            return
        row.send_sequence = max(row.send_sequence, out.sequence + 1)
        row.state = after_sent(row.state)
        self.sent[row.queue_id, out.message_type_name] += 1
        self.touch(row)
        retained = self._retain_sent(row, out)
        if self.deliver(row, out, Arrival.MESSAGE) is None and not retained:
            far = self.far_of(row)
            if far is not None and far.state == State.CO and out.message_type_name not in _SYSTEM:
                self._routes[handle] = far

    def end(self, handle: bytes, mode: EndMode, code: int | None, description: str | None) -> None:
        """END CONVERSATION (DLG-4), re-decided on the endpoint's state at commit."""
        self._routes.clear()
        row = self.endpoint(handle)
        if row is None:
            return
        new_state, action = after_local_end(row.state, mode, uuid.UUID(bytes=handle))
        self._purge(row)
        if mode is not EndMode.PLAIN:
            self.transmission.drop_endpoint(row)
        row.state = new_state
        row.dialog_timer = None
        self.touch(row)
        if action is EndAction.SEND_END_DIALOG:
            self._send_ending(row, END_DIALOG, b"", Arrival.END_DIALOG)
        elif action is EndAction.SEND_ERROR:
            body = error_body(code or 0, description or "")
            self._send_ending(row, ERROR, body, Arrival.ERROR)
        elif action is EndAction.ACKNOWLEDGE:
            far = self.far_of(row)
            if far is None and self.remote_of(row) is not None:
                # the far side is another instance: its endpoint closes when our END arrives
                self._send_ending(row, END_DIALOG, b"", Arrival.END_DIALOG)
            elif far is not None:
                new_far = on_arrival(far.state, Arrival.ACKNOWLEDGE)
                if new_far is not None:
                    far.state = new_far
                    self.touch(far)
        if mode is EndMode.CLEANUP:
            self._delete_endpoint(row)
        self.close_if_done(row)

    def _send_ending(self, row: EndpointRow, name: str, body: bytes, arrival: Arrival) -> None:
        """Send the EndDialog or Error that ends ``row``'s side (DLG-4), numbered as its
        ``end_dialog_sequence``."""
        out = self._system(row, name, body)
        row.end_dialog_sequence = out.sequence
        self.deliver(row, out, arrival)

    def set_timer(self, handle: bytes, due: float | None) -> None:
        """BEGIN CONVERSATION TIMER (DLG-6): store the due time."""
        row = self.endpoint(handle)
        if row is not None:
            row.dialog_timer = due
            self.touch(row)

    def move(self, handle: bytes, group_id: bytes) -> None:
        """MOVE CONVERSATION (DLG-7): the endpoint and its queued messages change group."""
        self._routes.clear()
        row = self.endpoint(handle)
        if row is None:
            return
        self.flush_messages(handle)
        self.conn.move_conversation_messages(handle, row.conversation_group_id, group_id)
        row.conversation_group_id = group_id
        self.touch(row)

    def put_local(self, row: EndpointRow, message_type_name: str, body: bytes) -> None:
        """Put a message the broker makes — a DialogTimer (DLG-6), a lifetime's Error (DLG-5)
        — on ``row``'s own queue, first in its conversation (sequence -1, SYS-2)."""
        self._enqueue(row, self._system(row, message_type_name, body, sequence=-1))

    def fail(self, row: EndpointRow, code: int, text: str) -> None:
        """The broker ends ``row`` with error ``code``/``text`` (a passed LIFETIME, DLG-5; DROP
        CONTRACT): its unsent messages are dropped (NET-7), its conversation timer cleared, and
        it goes to ER with the Error message first on its own queue (SYS-2); an endpoint this
        side had ended closes, and a conversation whose endpoints are all closed is deleted."""
        self.transmission.drop_endpoint(row)
        self.change_state(row, on_lifetime_expired(row.state))
        row.dialog_timer = None
        if row.state == State.ER:
            self.put_local(row, ERROR, error_body(code, text))
        self.close_if_done(row)

    def remove(self, row: EndpointRow, code: int, text: str) -> None:
        """The endpoint's service is dropped (DROP SERVICE): the endpoint, its queued and
        retained messages and its unsent ones are deleted, and its far endpoint gets an Error
        ``code``/``text`` first on its queue (SYS-2) — moving to ER, or closing if it had
        ended (DLG-4); the far endpoint of a service being dropped too goes without one. A far
        endpoint at another broker instance gets the Error through the transport: unsequenced
        (NET-2), as the broker's own refusals travel, held until that instance acknowledges
        it."""
        self._routes.clear()
        self.transmission.drop_endpoint(row)
        far = self.far_of(row)
        remote = self.remote_of(row) if far is None else None
        self._delete_endpoint(row)
        if remote is not None:
            error = self._system(row, ERROR, error_body(code, text), sequence=-1)
            self.transmission.hold_remote(row, error, Arrival.ERROR, remote)
            return
        if far is None or self._rows.get(far.conversation_handle) is None:
            return
        new_state = on_arrival(far.state, Arrival.ERROR)
        if new_state is None:
            return
        self.change_state(far, new_state)
        if new_state == State.ER:
            self.put_local(far, ERROR, error_body(code, text))
        self.close_if_done(far)

    def change_state(self, row: EndpointRow, state: State) -> None:
        """Set ``row``'s state to one :mod:`.dialogs` decided outside a statement (a passed
        LIFETIME); written at :meth:`finish`."""
        self._routes.clear()
        row.state = state
        self.touch(row)

    # -- delivery ------------------------------------------------------------------------
    def deliver(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> str | None:
        """Put a message from ``sender`` on its far endpoint's queue.

        Returns None when delivered or discarded, or the reason the message must wait in the
        transmission queue (it is then inserted there, unless it came from there); a message
        for another broker instance always goes there, for the transport (status "").
        """
        if self._to_transport(sender, out, arrival):
            return ""
        if self.transmission.blocks(sender):
            return self.transmission.hold(
                sender, out, arrival, "waiting behind earlier messages of the conversation"
            )
        reason = self._deliver_here(sender, out, arrival)
        if reason is not None:
            return self.transmission.hold(sender, out, arrival, reason)
        return None

    def deliver_now(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> str | None:
        """Put ``out`` on the far endpoint's queue now, creating the target endpoint on the
        first message (PRI-3); the far endpoint's state decides (DLG-4: discarded after END).
        Returns None when done, else why it cannot be delivered yet (the target service does
        not exist, or its queue is OFF: QUE-3) — the caller holds it in the transmission
        queue. A message whose dialog now goes to another instance (a route created since)
        moves to the transport's rows. (:class:`~servicebroker.engine.transmission.Destination`.)"""
        if self._to_transport(sender, out, arrival):
            return None
        return self._deliver_here(sender, out, arrival)

    def _to_transport(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> bool:
        """Hold ``out`` as a transport row when its dialog goes to another instance (NET-3:
        it stays until acknowledged); True when it did."""
        remote = self.remote_of(sender)
        if remote is None:
            return False
        self.transmission.hold_remote(sender, out, arrival, remote)
        return True

    def _deliver_here(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> str | None:
        """:meth:`deliver_now` for a dialog within this database."""
        far = self.far_of(sender)
        if far is None:
            if not sender.is_initiator:
                return None
            target = self.catalog.services.get(sender.far_service)
            if target is None:
                return f"the target service {sender.far_service!r} does not exist"
            queue = self.catalog.queues_by_id[target.queue_id]
            if not queue.status:
                return f"the target queue {queue.name!r} is disabled"
            if out.sequence != 0:
                self._error_back(
                    sender, TARGET_GONE_CODE, "The target conversation endpoint no longer exists."
                )
                return None
            if sender.service_contract_id not in target.contract_ids:
                contract = self.catalog.contracts_by_id[sender.service_contract_id].name
                self._error_back(
                    sender,
                    CONTRACT_REFUSED_CODE,
                    f"Target service {target.name!r} does not support contract {contract!r}.",
                )
                return None
            from_service = self.catalog.services_by_id[sender.service_id].name
            far = self.insert_endpoint(
                EndpointRow(
                    0,
                    new_id(),
                    sender.conversation_id,
                    False,
                    sender.service_contract_id,
                    new_id(),
                    target.service_id,
                    target.queue_id,
                    from_service,
                    sender.lifetime,
                    TARGET_START,
                    None,
                    0,
                    0,
                    # the target endpoint's own level: local = target, remote = initiator (PRI-4)
                    self.catalog.level(sender.service_contract_id, target.name, from_service),
                    principal_id=DBO,  # dbo owns the target service; the far one began it
                    far_principal_id=sender.principal_id,
                )
            )
        else:
            far_queue = self.catalog.queues_by_id.get(far.queue_id)
            if far_queue is not None and not far_queue.status and not is_ended(far.state):
                return f"the target queue {far_queue.name!r} is disabled"
        new_state = on_arrival(far.state, arrival)
        if new_state is None:
            return None
        far.state = new_state
        if out.sequence >= 0:  # the next message expected from the sender (conversation_endpoints)
            far.receive_sequence = max(far.receive_sequence, out.sequence + 1)
            if arrival is not Arrival.MESSAGE:
                far.end_dialog_sequence = out.sequence
        self.touch(far)
        self._enqueue(far, out)
        return None

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

    def enqueue(self, row: EndpointRow, out: Outgoing) -> None:
        """Put ``out`` on ``row``'s queue, ready: a message from another instance, in order
        (NET-2), taken by :func:`servicebroker.transport.arrival.take_arrival`."""
        self._enqueue(row, out)

    def remote_of(self, sender: EndpointRow) -> str | None:
        """Where a message from ``sender`` goes when that is another broker instance: the
        instance's ``service_broker_guid`` (text), "" while not known yet; None when the far
        endpoint is in this database. A dialog bound to an instance (an endpoint made by a
        message from another instance, or pinned by its first acknowledgement, RTE-4) stays
        with it."""
        instance = sender.far_broker_instance
        if instance is not None:
            return None if instance == self._own_instance else instance
        if not sender.is_initiator or not self._network_routes:
            return None
        choice = self._route_chooser.choose(sender.far_service)
        return None if choice is None or choice.is_local else choice.broker_instance or ""

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

    def _retain_sent(self, row: EndpointRow, out: Outgoing) -> bool:
        queue = self.catalog.queues_by_id.get(row.queue_id)
        if queue is not None and queue.retention:
            self._enqueue(row, out, status=3)
            return True
        return False

    def _error_back(self, sender: EndpointRow, code: int, text: str) -> None:
        sender.state = after_refusal(sender.state)
        self.touch(sender)
        self._enqueue(sender, self._system(sender, ERROR, error_body(code, text), sequence=-1))

    def _system(
        self, row: EndpointRow, name: str, body: bytes, sequence: int | None = None
    ) -> Outgoing:
        mt = self.catalog.message_types[name]
        if sequence is None:
            sequence = row.send_sequence
            row.send_sequence += 1
        return Outgoing(mt.message_type_id, name, mt.validation_code, body, new_id(), sequence)

    def _delete_endpoint(self, row: EndpointRow) -> None:
        self._purge(row)
        self._deleted.append(row.endpoint_id)
        if row.far_broker_instance is not None:  # NET-2, SEC-2: late copies stay duplicates
            self._closed_remote.append((row, self.now + CLOSED_REMEMBERED))
        self._rows[row.conversation_handle] = None
        self._sides[(row.conversation_id, row.is_initiator)] = None
        self._dirty.pop(row.conversation_handle, None)

    def close_if_done(self, row: EndpointRow) -> None:
        """Delete a conversation once every endpoint it still has is closed (CD)."""
        mine = self._rows.get(row.conversation_handle)
        if mine is not None and mine.state != State.CD:
            return
        far = self.far_of(row)
        if far is not None and far.state != State.CD:
            return
        for end in (mine, far):
            if end is not None:
                self._delete_endpoint(end)


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
