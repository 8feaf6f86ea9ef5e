"""The transactions of one broker that have not ended, and how each ends — by its commit or
rollback, by :meth:`Broker.close`, or, lost by the application (neither committed nor rolled
back, then garbage), by the garbage collector.

A transaction holds a storage session, on SQLite the process's single write lock once it wrote
through ``tx.execute``, and the conversation groups it locked. A transaction the application
drops must give them back, or every later write of the broker waits for a lock nobody will
release. So each transaction's session is held by an :class:`Ending` kept in
:class:`OpenTransactions` under a weak reference to the transaction: when the transaction is
collected, the reference's callback rolls its session back and releases its locks at once (the
write lock is a plain lock any thread may release), and leaves what takes the broker's own locks
— the session back to the pool, the rollback's statistics and wake-ups — to the next
transaction the broker starts, or to its close (a garbage collection may run in any thread, at
any allocation, even one made while that thread holds one of those locks). Nothing here holds
the transaction itself.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Mapping
from typing import Protocol

from ..errors import StorageError
from ..storage.base import Storage, StorageConnection
from .statistics import StatisticsRecorder
from .waiting import LOCKS

__all__ = ["Ending", "Holdings", "OpenTransactions", "Parts", "RollbackEvents"]

log = logging.getLogger(__name__)


class Holdings(Protocol):
    """What a transaction's RECEIVE side holds (:class:`~servicebroker.engine.receive.Receiving`):
    the queues it received from (``received``, by queue id) and locked groups of."""

    @property
    def received(self) -> Mapping[int, list[int]]:
        """Per queue id, the queuing orders of the messages received."""
        ...

    @property
    def locked_queues(self) -> set[int]:
        """The queues whose groups the transaction locked."""
        ...


class RollbackEvents(Protocol):
    """The broker's reaction to a rollback (:class:`~servicebroker.engine.context.BrokerEvents`)."""

    def rolled_back(
        self, received_queues: set[int], locked_queues: set[int], *, count: bool = True
    ) -> None:
        """A transaction that received from ``received_queues`` rolled back."""
        ...


class Parts(Protocol):
    """The broker's parts an ending uses (:class:`~servicebroker.engine.context.BrokerContext`)."""

    @property
    def storage(self) -> Storage:
        """The storage the session goes back to."""
        ...

    @property
    def statistics(self) -> StatisticsRecorder:
        """The broker's counters (rollbacks)."""
        ...

    @property
    def events(self) -> RollbackEvents:
        """Wakes waiters and counts rollbacks towards POI-1."""
        ...


class Ending:
    """How one transaction ends: what it holds (its session ``conn``, its RECEIVE side
    ``receiving``) and the ending that gives it back, run once, by whichever comes first of the
    transaction's commit or rollback, :meth:`OpenTransactions.close` and the garbage
    collector.

    Attributes:
        active: False once the transaction ended (its statements are refused).
    """

    __slots__ = ("_conn", "_context", "_receiving", "_registry", "_settled", "active", "ref")

    def __init__(
        self,
        registry: OpenTransactions,
        context: Parts,
        conn: StorageConnection,
        receiving: Holdings,
    ) -> None:
        self._registry = registry
        self._context = context
        self._conn = conn
        self._receiving = receiving
        self._settled = False
        self.active = True
        self.ref: weakref.ref[object] | None = None
        """The weak reference to the transaction, its key in the registry."""

    def end(self, *, rolled_back: bool, count: bool = True) -> bool:
        """End the transaction, if nothing ended it before: roll back (``rolled_back``),
        release its group locks and give the session back — whatever fails, the session goes
        back (a lost one is closed and its locks go with it on the server). ``count``: the
        rollback counts towards poison-message handling (POI-1 counts the rollbacks of the
        application's processing, not a failed database or a closing broker). Returns False
        when the transaction had already ended."""
        if not self._registry.claim(self):
            return False
        self.unlock(rolled_back=rolled_back)
        self.settle(rolled_back=rolled_back, count=count)
        return True

    def unlock(self, *, rolled_back: bool) -> None:
        """Roll the session back (``rolled_back``) and release its group locks: only this
        transaction's own objects are touched (and the write lock released), so it is safe in
        any thread, at any time. Never raises a :class:`StorageError`."""
        self.active = False
        try:
            if rolled_back:
                self._conn.rollback()
            self._conn.release_locks(
                set(self._receiving.received) | self._receiving.locked_queues | {LOCKS}
            )
        except StorageError as exc:  # a lost session: the server freed its locks
            log.debug("ending a transaction on a failed session: %s", exc)

    def settle(self, *, rolled_back: bool, count: bool) -> None:
        """Give the session back to the storage and tell the broker of the rollback (its
        statistics, the waiters of the queues it received from or locked, POI-1 when
        ``count``); once."""
        if self._settled:
            return
        self._settled = True
        context = self._context
        context.storage.release(self._conn)
        if rolled_back:
            context.statistics.rolled_back()
            received = set(self._receiving.received)
            try:
                context.events.rolled_back(received, self._receiving.locked_queues, count=count)
            except StorageError as exc:
                log.warning("after a rollback, poison-message counting failed: %s", exc)


class OpenTransactions:
    """One broker's transactions that have not ended (its context holds it)."""

    __slots__ = ("_closing", "_lost", "_open")

    def __init__(self) -> None:
        self._open: dict[weakref.ref[object], Ending] = {}
        self._lost: deque[Ending] = deque()  # collected, rolled back, not settled yet
        self._closing = threading.Lock()

    def track(
        self,
        transaction: object,
        context: Parts,
        conn: StorageConnection,
        receiving: Holdings,
    ) -> Ending:
        """Register a new ``transaction`` holding ``conn``; returns its :class:`Ending`."""
        ending = Ending(self, context, conn, receiving)
        ref = weakref.ref(transaction, self._collected)
        ending.ref = ref
        self._open[ref] = ending
        return ending

    def claim(self, ending: Ending) -> bool:
        """Take ``ending`` out of the open transactions: True for the one caller that does
        (a dict's pop is atomic), who ends it."""
        ref = ending.ref
        if ref is None or self._open.pop(ref, None) is None:
            return False
        ending.ref = None  # no callback once the transaction is collected
        return True

    def _collected(self, ref: weakref.ref[object]) -> None:
        """The weak reference's callback: a transaction nobody ended was collected. Rolls it
        back and unlocks now; the rest waits for :meth:`reap` (module docstring)."""
        ending = self._open.pop(ref, None)
        if ending is None:
            return
        try:
            ending.unlock(rolled_back=True)
        except Exception as exc:  # never out of a garbage collection
            log.debug("rolling back a lost transaction failed: %s", exc)
        self._lost.append(ending)

    def reap(self) -> None:
        """Settle the lost transactions the collector rolled back: their sessions back to the
        storage, their rollbacks counted (a lost transaction is the application's: POI-1
        counts it). Cheap when there are none."""
        while self._lost:
            try:
                ending = self._lost.popleft()
            except IndexError:  # another thread took the last one
                return
            try:
                ending.settle(rolled_back=True, count=True)
            except Exception as exc:
                log.warning("giving back a lost transaction's session failed: %s", exc)

    def close(self) -> None:
        """Roll back every transaction still open (their statements are refused after) and
        settle the lost ones: what :meth:`Broker.close` does before it closes the storage. A
        rollback here does not count towards poison-message handling."""
        with self._closing:
            self.reap()
            while True:
                try:
                    endings = list(self._open.values())
                    break
                except RuntimeError:  # a transaction began or ended meanwhile
                    continue
            for ending in endings:
                ending.end(rolled_back=True, count=False)
            self.reap()

    def __len__(self) -> int:
        """The transactions open now."""
        return len(self._open)
