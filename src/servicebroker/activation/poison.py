"""Poison-message handling (POI-1): a queue whose receiving transactions roll back five times in a
row is turned OFF (when its POISON_MESSAGE_HANDLING is ON), and BROKER_QUEUE_DISABLED is raised
to the event notifications registered for it (EVT-1). A committed RECEIVE breaks the run (the
transaction resets the stored counter in its commit)."""

from __future__ import annotations

import logging
import threading

from ..engine.context import BrokerContext
from .notifications import raise_event

__all__ = ["POISON_ROLLBACKS", "PoisonMessageHandling"]

log = logging.getLogger(__name__)

POISON_ROLLBACKS = 5
"""POI-1: consecutive rollbacks of receiving transactions that disable a queue."""


class PoisonMessageHandling:
    """Counts rollbacks of receiving transactions per queue, in storage (so the count is the
    database's, whatever process rolled back).

    Args:
        context: the broker's shared parts.
    """

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._disabled: list[tuple[str, float]] = []

    def rolled_back(self, queue_ids: set[int]) -> list[str]:
        """A transaction that received from ``queue_ids`` rolled back: count one more for each;
        turn OFF those that reach :data:`POISON_ROLLBACKS` with POISON_MESSAGE_HANDLING ON and
        raise BROKER_QUEUE_DISABLED for them. Returns the names of the queues turned OFF.

        Raises:
            StorageError: the database failed.
        """
        context = self._context
        disabled: list[str] = []
        with context.storage.connection() as conn:
            conn.begin_write()
            snap = context.catalog.snapshot(conn, fresh=True)
            for queue_id in sorted(queue_ids):
                queue = snap.queues_by_id.get(queue_id)
                if queue is None:
                    continue
                count = conn.add_rollback(queue_id)
                if count >= POISON_ROLLBACKS and queue.poison_message_handling and queue.status:
                    conn.disable_queue(queue_id, context.clock.now())
                    disabled.append(queue.name)
            conn.commit()
        if not disabled:
            return disabled
        context.catalog.invalidate()
        catalog = context.catalog.current(fresh=True)
        for name in disabled:
            log.warning(
                "queue %s disabled after %d rollbacks in a row (BROKER_QUEUE_DISABLED)",
                name,
                POISON_ROLLBACKS,
            )
            with self._lock:
                self._disabled.append((name, context.clock.now()))
            raise_event(context, catalog.queue(name), "BROKER_QUEUE_DISABLED")  # POI-1, EVT-1
        return disabled

    def disabled_events(self) -> list[tuple[str, float]]:
        """BROKER_QUEUE_DISABLED events raised in this process: (queue name, broker time)."""
        with self._lock:
            return list(self._disabled)
