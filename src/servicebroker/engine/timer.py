"""The broker's timer (TICK-1) and the time-driven dialog work: conversation timers (DLG-6) and
lifetimes (DLG-5).

:class:`PeriodicTasks` is the one registry of work run on every Nth 5-second notification; its
:meth:`PeriodicTasks.tick_to` is a pure step of (tick count, now) that tests call directly.
:class:`BrokerTimer` fires due conversation timers and lifetimes and drives the ticks, from the
broker's background thread or, with a :class:`~servicebroker.clock.ManualClock`, synchronously
when the clock advances.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..dialogs import DIALOG_TIMER, LIFETIME_EXPIRED_CODE, LIFETIME_EXPIRED_TEXT, State, is_ended
from .context import BrokerContext
from .delivery import Applier

__all__ = [
    "TICK_SECONDS",
    "BrokerTimer",
    "PeriodicTask",
    "PeriodicTasks",
    "TimerStatistics",
    "expire_lifetime",
    "fire_dialog_timer",
]

log = logging.getLogger(__name__)

TICK_SECONDS = 5.0
"""TICK-1: the timer notifies the broker every 5 seconds."""
_BATCH = 500


def fire_dialog_timer(applier: Applier, handle: bytes, now: float) -> None:
    """A due conversation timer (DLG-6) puts a DialogTimer message on the local queue, in the
    commit of ``applier``; the timer is cleared. Nothing when it is not due at ``now`` or the
    endpoint is gone; no message when this side has ended."""
    row = applier.endpoint(handle)
    if row is None or row.dialog_timer is None or row.dialog_timer > now:
        return
    row.dialog_timer = None
    applier.touch(row)
    if not is_ended(row.state):
        applier.put_local(row, DIALOG_TIMER, b"")


def expire_lifetime(applier: Applier, handle: bytes, now: float) -> None:
    """A passed LIFETIME (DLG-5) puts the endpoint in ER with an Error message on its own
    queue, or closes it when this side had ended; a conversation whose endpoints are all closed
    is deleted. The side's messages still in the transmission queue are dropped (NET-7: a
    message waits until delivered or until its dialog's lifetime ends)."""
    row = applier.endpoint(handle)
    if row is None or row.lifetime > now or row.state in (State.ER, State.CD):
        return
    applier.fail(row, LIFETIME_EXPIRED_CODE, LIFETIME_EXPIRED_TEXT)


@dataclass(frozen=True)
class PeriodicTask:
    """Work run on every ``every``-th timer notification; ``run(now)`` takes the broker time."""

    name: str
    every: int
    run: Callable[[float], None]


@dataclass(frozen=True)
class TimerStatistics:
    """What the timer has done: notifications counted, timers fired, lifetimes expired, and
    ``next_tick_time``, the broker time (seconds) of the next notification it will run: one at
    or before the clock's now is due and not yet run."""

    ticks: int
    last_tick_time: float | None
    conversation_timers_fired: int
    lifetimes_expired: int
    next_tick_time: float


class PeriodicTasks:
    """The registry of periodic tasks and the notification counter (TICK-1)."""

    def __init__(self, interval: float = TICK_SECONDS) -> None:
        self.interval = interval
        self.ticks = 0
        self.last_tick_time: float | None = None
        self._tasks: list[PeriodicTask] = []

    def register(self, name: str, every: int, run: Callable[[float], None]) -> None:
        """Run ``run(now)`` on every ``every``-th notification (``every`` >= 1)."""
        if every < 1:
            raise ValueError(f"periodic task {name!r}: every must be >= 1, got {every}")
        self._tasks.append(PeriodicTask(name, every, run))

    def due_ticks(self, start: float, now: float) -> int:
        """How many notifications are due at ``now`` for a timer started at ``start``."""
        return max(0, math.floor((now - start) / self.interval)) - self.ticks

    def tick_to(self, count: int, now: float) -> list[str]:
        """Run each task once if any of ``count`` more notifications at ``now`` is a multiple
        of its ``every`` (a clock jump of many ticks runs each task once), then count them.
        Returns the names of the tasks run."""
        if count <= 0:
            return []
        first, last = self.ticks + 1, self.ticks + count
        ran = []
        for task in self._tasks:
            if last // task.every >= math.ceil(first / task.every):
                try:
                    task.run(now)
                except Exception:
                    log.exception("periodic task %s failed", task.name)
                ran.append(task.name)
        # counted once its tasks have run: a notification in progress is still due
        self.ticks = last
        self.last_tick_time = now
        return ran


class BrokerTimer:
    """Fires conversation timers and lifetimes and counts the 5-second notifications.

    Args:
        context: the broker's shared parts.
        interval: seconds between notifications (TICK-1: 5).
    """

    def __init__(self, context: BrokerContext, interval: float = TICK_SECONDS) -> None:
        self._context = context
        self.tasks = PeriodicTasks(interval)
        self._start = context.clock.now()
        self._lock = threading.Lock()
        self._counters = threading.Lock()
        self._timers_fired = 0
        self._lifetimes_expired = 0
        self._not_counted = 0  # ticks due before this broker took the lead: another counted them

    def statistics(self) -> TimerStatistics:
        """A snapshot of the timer's counters: ``ticks`` counts the notifications this broker
        counted while it led (those another leader counted before it took over are left out,
        so the published sum over brokers counts each notification once)."""
        with self._counters:
            return TimerStatistics(
                self.tasks.ticks - self._not_counted,
                self.tasks.last_tick_time,
                self._timers_fired,
                self._lifetimes_expired,
                self._start + (self.tasks.ticks + 1) * self.tasks.interval,
            )

    def take_lead(self, now: float) -> None:
        """This broker now leads: the notifications due since it was opened were counted by
        the leader before it (they still run its periodic tasks once, TICK-1), so its
        statistics leave them out."""
        with self._lock, self._counters:
            self._not_counted += self.tasks.due_ticks(self._start, now)

    def run_due(self, now: float) -> None:
        """Fire everything due at ``now``: conversation timers, lifetimes, timer ticks."""
        with self._lock:
            self.fire_dialog_timers(now)
            self.tasks.tick_to(self.tasks.due_ticks(self._start, now), now)

    def next_wakeup(self, now: float) -> float:
        """The broker time of the next thing to do (next tick or next due timer)."""
        next_tick = self.statistics().next_tick_time
        with self._context.storage.connection() as conn:
            due = conn.next_due_time()
        return min(next_tick, due) if due is not None else next_tick

    def fire_dialog_timers(self, now: float) -> int:
        """Put DialogTimer messages for due conversation timers (DLG-6) and Error messages for
        passed lifetimes (DLG-5); returns how many fired."""
        storage = self._context.storage
        fired = 0
        while True:
            with storage.connection() as conn:
                timers = conn.due_timers(now, _BATCH)
                lifetimes = conn.due_lifetimes(now, _BATCH)
                if not timers and not lifetimes:
                    return fired
                conn.begin_write()
                applier = Applier(conn, self._context.catalog.snapshot(conn), now)
                for handle in timers:
                    fire_dialog_timer(applier, handle, now)
                for handle in lifetimes:
                    expire_lifetime(applier, handle, now)
                applier.finish()
                conn.commit()
            fired += len(timers) + len(lifetimes)
            with self._counters:
                self._timers_fired += len(timers)
                self._lifetimes_expired += len(lifetimes)
            self._context.statistics.delivered(applier.tally()[0])
            self._context.events.committed(
                applier.woken_queues, set(), frozenset(applier.arrived_on_empty)
            )
