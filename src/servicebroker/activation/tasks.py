"""The task infrastructure (TICK-2b): up to 2 × (number of CPUs) task handlers, started with the
broker and always running; every timer notification restarts a handler that failed. Handlers run
the broker's own work items — launching activated procedures and raising event notifications —
so that a monitor's decision never waits for them.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TaskHandler", "TaskHandlers"]

log = logging.getLogger(__name__)

Work = Callable[[], object]


@dataclass(frozen=True)
class TaskHandler:
    """One handler's figures (a ``dm_broker_task_handlers`` row)."""

    handler_id: int
    state: str
    tasks_run: int
    tasks_failed: int
    restarts: int


class _Handler:
    __slots__ = ("busy", "failed", "handler_id", "restarts", "run", "thread")

    def __init__(self, handler_id: int) -> None:
        self.handler_id = handler_id
        self.thread: threading.Thread | None = None
        self.run = 0
        self.failed = 0
        self.restarts = 0
        self.busy = False


class TaskHandlers:
    """A fixed pool of handler threads fed from one work queue.

    Args:
        count: handlers (default 2 × ``os.cpu_count()``).
    """

    def __init__(self, count: int | None = None) -> None:
        self.count = count or 2 * (os.cpu_count() or 1)
        self._work: queue.Queue[Work | None] = queue.Queue()
        self._handlers = [_Handler(i) for i in range(self.count)]
        self._lock = threading.Lock()
        self._running = False
        self.restarted = 0

    def start(self) -> None:
        """Start every handler."""
        with self._lock:
            self._running = True
            for h in self._handlers:
                self._spawn(h)

    def _spawn(self, h: _Handler) -> None:
        h.thread = threading.Thread(
            target=self._loop, args=(h,), name=f"task-handler-{h.handler_id}", daemon=True
        )
        h.thread.start()

    def _loop(self, h: _Handler) -> None:
        while True:
            item = self._work.get()
            if item is None:
                self._work.task_done()
                return
            h.busy = True
            try:
                item()
                h.run += 1
            except Exception:
                h.failed += 1
                log.exception("task handler %d: a work item failed", h.handler_id)
            finally:
                h.busy = False
                self._work.task_done()

    def submit(self, work: Work) -> None:
        """Queue a work item; it runs on the next free handler (at once when not started)."""
        if not self._running:
            work()
            return
        self._work.put(work)

    def drain(self) -> None:
        """Wait until every queued work item has run (for tests and orderly shutdown)."""
        if self._running:
            self._work.join()

    def restart_failed(self, now: float) -> None:
        """TICK-2b: restart every handler whose thread died (a periodic task of ``now``)."""
        self.restarted = self.restart_dead()

    def restart_dead(self) -> int:
        """Restart every handler whose thread died; returns how many."""
        restarted = 0
        with self._lock:
            if not self._running:
                return 0
            for h in self._handlers:
                if h.thread is None or not h.thread.is_alive():
                    h.restarts += 1
                    self._spawn(h)
                    restarted += 1
        return restarted

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every handler after the work already queued."""
        with self._lock:
            if not self._running:
                return
            self._running = False
            threads = [h.thread for h in self._handlers]
        for _ in threads:
            self._work.put(None)
        for t in threads:
            if t is not None:
                t.join(timeout)

    def statistics(self) -> list[TaskHandler]:
        """One row per handler."""
        with self._lock:
            return [
                TaskHandler(
                    h.handler_id,
                    "STOPPED"
                    if h.thread is None or not h.thread.is_alive()
                    else ("RUNNING" if h.busy else "IDLE"),
                    h.run,
                    h.failed,
                    h.restarts,
                )
                for h in self._handlers
            ]
