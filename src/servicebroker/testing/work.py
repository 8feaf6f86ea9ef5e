"""Helpers for tests and benchmarks that drive a broker on a :class:`ManualClock`: procedures
whose "processing" takes simulated seconds, and a way to let every reader reach a blocked state
before the clock moves again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..broker import ActivationContext, Broker
from ..clock import ManualClock

__all__ = ["SimulatedWork"]


@dataclass
class SimulatedWork:
    """Simulated processing time for the activated procedures of one queue.

    Args:
        broker: the broker (started, on ``clock``).
        clock: its manual clock.
        queue: the queue whose monitor :meth:`settle` watches.

    ``starts`` records the broker time each procedure instance started; ``samples`` the
    (running, waiting) readers seen at each :meth:`settle`.
    """

    broker: Broker
    clock: ManualClock
    queue: str
    cond: threading.Condition = field(default_factory=threading.Condition)
    wake_times: list[float] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    samples: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clock.subscribe(self._moved)

    def _moved(self, now: float) -> None:
        with self.cond:
            self.cond.notify_all()

    def sleep(self, seconds: float) -> None:
        """Block the calling procedure for ``seconds`` of broker time."""
        until = self.clock.now() + seconds
        with self.cond:
            self.wake_times.append(until)
            try:
                while self.clock.now() < until and self.broker.running:
                    self.cond.wait(0.5)
            finally:
                self.wake_times.remove(until)

    def sleeping(self) -> int:
        """Procedures blocked in :meth:`sleep` whose time has not yet come (one whose time has
        come but that has not yet run again is busy, not blocked)."""
        now = self.clock.now()
        with self.cond:
            return sum(1 for until in self.wake_times if until > now)

    def readers(self) -> tuple[int, int]:
        """(running, waiting) readers of the queue, from ``dm_broker_queue_monitors``."""
        for m in self.broker.views.dm_broker_queue_monitors():
            if m.queue_name == self.queue:
                return m.running_tasks, m.tasks_waiting
        return 0, 0

    def _ticked(self) -> bool:
        """The leading broker's timer has run every notification due at the clock's now (its
        thread wakes on a clock move: a tick it ran late, after the next move, would see the
        readers of that later moment)."""
        if not (self.broker.running and self.broker.is_leader):
            return True
        return self.broker.timer.statistics().next_tick_time > self.clock.now()

    def settle(self, limit: float = 20.0) -> tuple[int, int]:
        """Wait (real time, only to synchronise) until the timer has run the ticks due now and
        every running procedure is blocked —
        sleeping in simulated work or waiting in RECEIVE — for ten looks in a row 2 ms apart
        (on a loaded machine, a test run beside others, a thread between its commit and its
        next RECEIVE can go unscheduled for several milliseconds); record and return (running,
        waiting).

        Raises:
            TimeoutError: not settled within ``limit`` real seconds.
        """
        end = time.monotonic() + limit
        stable = 0
        while stable < 10:
            ticked = self._ticked()
            self.broker.tasks.drain()
            running, waiting = self.readers()
            blocked = self.sleeping() + waiting
            stable = stable + 1 if ticked and blocked >= running else 0
            if time.monotonic() > end:
                raise TimeoutError(
                    f"queue {self.queue}: running={running} waiting={waiting} "
                    f"sleeping={self.sleeping()}"
                )
            time.sleep(0.002)
        sample = self.readers()
        self.samples.append(sample)
        return sample

    def run(self, seconds: float, step: float = 1.0) -> None:
        """Advance the clock ``seconds`` in steps of ``step``, settling before each step.

        A step that brings both a timer tick and the end of a procedure's simulated work lets
        the tick race the procedure's next RECEIVE, a moment that has no width in real time:
        offset the work from the ticks (start it half a step after the broker) and use steps
        that stop at every tick, as ``tests/test_activation.py`` does."""
        for _ in range(round(seconds / step)):
            self.settle()
            self.clock.advance(step)
        self.settle()

    def procedure(
        self, *, top: int, seconds: float, wait: float
    ) -> Callable[[ActivationContext], None]:
        """An activated procedure: RECEIVE TOP (``top``), hold the group ``seconds`` of broker
        time, commit; exit when nothing arrives for ``wait`` seconds (ACT-9)."""

        def procedure(ctx: ActivationContext) -> None:
            self.starts.append(ctx.broker.clock.now())
            while True:
                with ctx.broker.transaction() as tx:
                    msgs = tx.receive(ctx.queue_name, top=top, timeout=wait)
                    if not msgs:
                        return
                    self.sleep(seconds)

        return procedure
