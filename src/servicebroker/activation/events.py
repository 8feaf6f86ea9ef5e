"""What the broker does after a transaction's statements (the :class:`~.context.BrokerEvents`
seam): wake the statements waiting on the queues and groups a commit touched, let the queue
monitors check (ACT-4a, ACT-4b, ACT-4c), record RECEIVE activity every process sees (ACT-3b,
ACT-8), and count rollbacks for poison-message handling (POI-1)."""

from __future__ import annotations

import logging

from ..clock import Clock
from ..engine.waiting import LOCKS, Notifier
from ..errors import StorageError
from ..storage.base import QueueActivityStore
from .monitor import Trigger
from .poison import PoisonMessageHandling
from .service import ActivationService

__all__ = ["Reactions"]

log = logging.getLogger(__name__)


class Reactions:
    """The broker's :class:`~.context.BrokerEvents`.

    Args:
        clock: the broker's clock (times of RECEIVEs).
        notifier: wakes waiting statements.
        activity: per-queue activity shared by every process.

    :meth:`connect` gives it the activation service and poison handling once they exist (they
    are built on the context this object is part of).
    """

    def __init__(self, clock: Clock, notifier: Notifier, activity: QueueActivityStore) -> None:
        self._clock = clock
        self._notifier = notifier
        self._activity = activity
        self._activation: ActivationService | None = None
        self._poison: PoisonMessageHandling | None = None

    def connect(self, activation: ActivationService, poison: PoisonMessageHandling) -> None:
        """Attach the services the reactions drive."""
        self._activation = activation
        self._poison = poison

    def committed(
        self,
        woken_queues: set[int],
        locked_queues: set[int],
        arrived_on_empty: frozenset[int] = frozenset(),
    ) -> None:
        """Wake waiters of queues that got messages or had groups unlocked, and lock waiters;
        the monitors of queues that got messages check (ACT-4a). Never raises for the database:
        the commit is done, and an error here would say it was not — a storage failure of the
        activation check is logged (the timer's next tick checks again, TICK-2a)."""
        if woken_queues or locked_queues:
            self._notifier.notify(woken_queues | locked_queues | {LOCKS})
        activation = self._activation
        if woken_queues and activation is not None and activation.enabled:
            try:
                activation.check(woken_queues, Trigger.MESSAGE_ARRIVED, arrived_on_empty)
            except StorageError as exc:
                log.warning("after a commit, the activation check failed: %s", exc)

    def rolled_back(
        self, received_queues: set[int], locked_queues: set[int], *, count: bool = True
    ) -> None:
        """Received messages are back (RCV-3): count it (POI-1; not when ``count`` is False:
        the database failed), wake waiters, and the monitors check (ACT-4c).

        Raises:
            StorageError: the poison counter could not be written (waiters are woken first).
        """
        try:
            if received_queues and count and self._poison is not None:
                self._poison.rolled_back(received_queues)
        finally:
            if received_queues or locked_queues:
                self._notifier.notify(received_queues | locked_queues | {LOCKS})
        activation = self._activation
        if received_queues and activation is not None and activation.enabled:
            activation.check(received_queues, Trigger.ROLLBACK)

    def received(self, queue_id: int, *, empty: bool, where: bool, first: bool) -> None:
        """A RECEIVE or GET CONVERSATION GROUP ran (ACT-3b, ACT-4b, ACT-8)."""
        now = self._clock.now()
        activation = self._activation
        if empty:
            if not where:
                self._activity.note_empty(queue_id, now)
        else:
            self._activity.note_receive(queue_id, now)
            if activation is not None:
                activation.received(queue_id)
        if first and activation is not None:
            activation.check({queue_id}, Trigger.RECEIVE)  # ACT-4b, once per transaction
