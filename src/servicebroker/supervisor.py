"""Supervised background threads: a thread whose work raises is logged with its traceback and
restarted, after :data:`RESTART_DELAY` seconds on the broker's clock but never later than
:data:`RESTART_WAIT` real seconds (a manual clock that stands still must not leave the broker
without its timer), until the supervisor stops or its owner cancels that thread. Every thread's state, restarts and last error show in
``broker.views.dm_broker_background_threads()`` (built from :meth:`Supervisor.statistics`).

The broker's own threads run under it: the timer thread (TICK-1, leadership, monitors) and the
change poller that wakes waiting statements on other processes' commits. Task handlers have
their own restart rule (TICK-2b, :mod:`.activation.tasks`); activated procedures are the
application's and are never restarted by the broker (ACT-9).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .clock import Clock

__all__ = ["RESTART_DELAY", "RESTART_WAIT", "Supervisor", "ThreadStatistics"]

log = logging.getLogger(__name__)

RESTART_DELAY = 1.0
"""Broker-clock seconds between a supervised thread's failure and its restart."""
RESTART_WAIT = 0.25
"""Real seconds a failed thread waits for its restart at most (the broker's background poll)."""


@dataclass(frozen=True)
class ThreadStatistics:
    """One supervised thread: ``state`` is RUNNING, RESTARTING (failed, waiting to restart) or
    STOPPED; ``restarts`` how often it was restarted; ``last_error`` the ``repr`` of the last
    exception and ``last_error_time`` when (broker seconds), or None."""

    name: str
    state: str
    restarts: int
    last_error: str | None
    last_error_time: float | None


class _Entry:
    __slots__ = (
        "cancelled",
        "last_error",
        "last_error_time",
        "restarts",
        "state",
        "target",
        "thread",
    )

    def __init__(self, target: Callable[[], None]) -> None:
        self.target = target
        self.cancelled = False
        self.thread: threading.Thread | None = None
        self.state = "RUNNING"
        self.restarts = 0
        self.last_error: str | None = None
        self.last_error_time: float | None = None


class Supervisor:
    """Runs named background loops on daemon threads and restarts those that raise.

    Args:
        clock: the broker's clock (restart delays; a manual clock's moves wake the wait).
        restart_delay: broker seconds between a failure and the restart.
        restart_wait: real seconds the restart waits at most.
    """

    def __init__(
        self,
        clock: Clock,
        restart_delay: float = RESTART_DELAY,
        restart_wait: float = RESTART_WAIT,
    ) -> None:
        self._clock = clock
        self.restart_delay = restart_delay
        self.restart_wait = restart_wait
        self._cond = threading.Condition()
        self._entries: dict[str, _Entry] = {}
        self._stopping = False
        clock.subscribe(self._on_clock)

    def _on_clock(self, now: float) -> None:
        with self._cond:
            self._cond.notify_all()

    def start(self, name: str, target: Callable[[], None]) -> None:
        """Run ``target`` on a thread called ``name``; when it raises, log and restart it. A
        ``target`` that returns is done (STOPPED). Starting a name that runs does nothing, and
        a stopped supervisor starts nothing."""
        with self._cond:
            entry = self._entries.get(name)
            if self._stopping or (
                entry is not None and entry.thread is not None and entry.thread.is_alive()
            ):
                if entry is not None:
                    entry.cancelled = False
                return
            if entry is None:
                entry = self._entries[name] = _Entry(target)
            entry.target, entry.state, entry.cancelled = target, "RUNNING", False
            self._spawn(name, entry)

    def _spawn(self, name: str, entry: _Entry) -> None:
        entry.thread = threading.Thread(
            target=self._run, args=(name, entry), name=name, daemon=True
        )
        entry.thread.start()

    def _run(self, name: str, entry: _Entry) -> None:
        try:
            entry.target()
        except BaseException as exc:
            failed_at = self._clock.now()
            log.exception("background thread %s died; restarting it", name)
            with self._cond:
                entry.state = "RESTARTING"
                entry.last_error, entry.last_error_time = repr(exc), failed_at
                due = failed_at + self.restart_delay
                wait_until = time.monotonic() + self.restart_wait
                while (
                    not (self._stopping or entry.cancelled)
                    and self._clock.now() < due
                    and time.monotonic() < wait_until
                ):
                    wait = self._clock.max_real_wait(due - self._clock.now())
                    self._cond.wait(max(0.0, min(wait, wait_until - time.monotonic())))
                if self._stopping or entry.cancelled:
                    entry.state = "STOPPED"
                    return
                entry.restarts += 1
                entry.state = "RUNNING"
                self._spawn(name, entry)
            return
        with self._cond:
            entry.state = "STOPPED"

    def join(self, name: str, timeout: float) -> None:
        """Do not restart thread ``name`` again, and wait up to ``timeout`` real seconds for
        it to end (its owner has made its loop return); :meth:`start` runs it again."""
        with self._cond:
            entry = self._entries.get(name)
            if entry is not None:
                entry.cancelled = True
                self._cond.notify_all()
            thread = None if entry is None else entry.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """No more restarts; wait up to ``timeout`` real seconds for each thread to end (each
        loop ends by its own stop condition, which its owner sets)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            threads = [e.thread for e in self._entries.values() if e.thread is not None]
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def close(self) -> None:
        """Stop and forget the clock."""
        self.stop()
        self._clock.unsubscribe(self._on_clock)

    def statistics(self) -> list[ThreadStatistics]:
        """One row per supervised thread, by name."""
        with self._cond:
            return [
                ThreadStatistics(
                    name,
                    "STOPPED"
                    if e.state == "RUNNING" and (e.thread is None or not e.thread.is_alive())
                    else e.state,
                    e.restarts,
                    e.last_error,
                    e.last_error_time,
                )
                for name, e in sorted(self._entries.items())
            ]
