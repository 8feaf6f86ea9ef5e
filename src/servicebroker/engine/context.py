"""What the parts of one broker share: :class:`BrokerContext` holds the storage, the clock, the
catalog cache, the wait loop, the broker's settings and :class:`BrokerEvents`, the seam through
which a transaction tells the rest of the broker what it did (waking waiters, queue monitors,
poison-message handling). Transactions, the timer, the transmission service, the activation
service and the views are built on a context; none of them knows the :class:`Broker` facade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..catalog import CatalogCache
from ..clock import Clock
from ..storage.base import Storage
from .open_transactions import OpenTransactions
from .statistics import StatisticsRecorder
from .waiting import Waiting

__all__ = ["BrokerContext", "BrokerEvents"]


class BrokerEvents(Protocol):
    """What the broker does after a transaction's statements (see :mod:`servicebroker.activation.events`)."""

    def committed(
        self,
        woken_queues: set[int],
        locked_queues: set[int],
        arrived_on_empty: frozenset[int] = frozenset(),
    ) -> None:
        """A commit put messages on ``woken_queues`` (on an empty, activated queue for those
        in ``arrived_on_empty``) and released groups of ``locked_queues``."""
        ...

    def rolled_back(
        self, received_queues: set[int], locked_queues: set[int], *, count: bool = True
    ) -> None:
        """A transaction that received from ``received_queues`` rolled back (RCV-3; POI-1
        counts it unless ``count`` is False: the database failed)."""
        ...

    def received(self, queue_id: int, *, empty: bool, where: bool, first: bool) -> None:
        """A RECEIVE or GET CONVERSATION GROUP ran on the queue (ACT-3b, ACT-4b, ACT-8):
        ``empty`` it returned nothing, ``where`` it had a WHERE clause, ``first`` it is the
        transaction's first on this queue."""
        ...


@dataclass(frozen=True)
class BrokerContext:
    """One broker's shared parts.

    Attributes:
        storage: the opened storage.
        clock: the broker's clock (every time-out, timer and interval reads it).
        catalog: the catalog cache.
        waiting: the wait loop of waiting statements.
        events: what happens after commits, rollbacks and RECEIVEs.
        lock_timeout: seconds a statement waits for a conversation group another transaction
            holds (broker clock).
        priority_aging_interval: PRI-18's seconds per level, None for strict priority.
        statistics: the process's counters (commits, messages, waits) for
            ``Broker.statistics()``.
        transactions: the broker's transactions not ended yet (a lost one rolls back; the
            broker's close rolls back those still open).
    """

    storage: Storage
    clock: Clock
    catalog: CatalogCache
    waiting: Waiting
    events: BrokerEvents
    lock_timeout: float
    priority_aging_interval: float | None
    statistics: StatisticsRecorder
    transactions: OpenTransactions = field(default_factory=OpenTransactions)
