"""What a commit writes: the :class:`Applier`, through which a transaction's commit
(:mod:`.commit`), the timer (:mod:`.timer`), the transmission queue, the transport and the DDL
apply their operations to the rows as they stand at commit, inside the storage's write
transaction.

Statements validate against the transaction's working copies (so errors surface at the
statement), and the :class:`Applier` re-applies their effects to fresh rows (an Error or
EndDialog may have arrived meanwhile). Its parts, bottom to top: :mod:`.commit_rows` (the rows
read once and the writes batched), :mod:`.system_messages` (EndDialog, Error, DialogTimer made
by the broker), :mod:`.local_delivery` (onto this database's queues, PRI-3), :mod:`.outbound`
(the transmission queue, QUE-3, and the transport, NET-3) and :mod:`.closing` (DLG-4's ends and
deletions); this module adds the statements a commit replays: SEND, BEGIN CONVERSATION TIMER and
MOVE CONVERSATION.
"""

from __future__ import annotations

from ..dialogs import Arrival, State, after_sent
from ..messages import Outgoing
from ..storage.rows import QueueInsert
from .closing import Closing
from .system_messages import SYSTEM_TYPES

__all__ = ["Applier"]


class Applier(Closing):
    """Applies one commit's operations through ``conn`` (already in its write transaction).

    Args:
        conn: the transaction's storage connection.
        catalog: the catalog snapshot to resolve names and queue settings.
        now: the broker's time, seconds.
    """

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
            if (
                far is not None
                and far.state == State.CO
                and out.message_type_name not in SYSTEM_TYPES
            ):
                self._routes[handle] = far

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
