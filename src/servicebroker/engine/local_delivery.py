"""Local delivery: a message put on its far endpoint's queue in this database — the target
endpoint created on a dialog's first message (PRI-3), the far endpoint's state deciding
(DLG-4: discarded after its END), the sender's copy kept with RETENTION, a message from another
instance put on its queue in order (NET-2).

What cannot be delivered now (the target service does not exist yet, its queue is OFF: QUE-3)
is told to the caller, which holds it in the transmission queue (:mod:`.outbound`).
"""

from __future__ import annotations

from ..catalog import DBO
from ..dialogs import TARGET_START, Arrival, is_ended, on_arrival
from ..messages import Outgoing, new_id
from ..storage.rows import EndpointRow
from .system_messages import CONTRACT_REFUSED_CODE, TARGET_GONE_CODE, SystemMessages

__all__ = ["LocalDelivery"]


class LocalDelivery(SystemMessages):
    """Delivery onto this database's queues, in one commit (see
    :class:`~servicebroker.engine.commit_rows.CommitRows` for the arguments)."""

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

    def enqueue(self, row: EndpointRow, out: Outgoing) -> None:
        """Put ``out`` on ``row``'s queue, ready: a message from another instance, in order
        (NET-2), taken by :func:`servicebroker.transport.arrival.take_arrival`."""
        self._enqueue(row, out)

    def _retain_sent(self, row: EndpointRow, out: Outgoing) -> bool:
        queue = self.catalog.queues_by_id.get(row.queue_id)
        if queue is not None and queue.retention:
            self._enqueue(row, out, status=3)
            return True
        return False
