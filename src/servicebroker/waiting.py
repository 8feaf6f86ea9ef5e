"""How waiting statements wake up: a RECEIVE or GET CONVERSATION GROUP waiting on a queue, and a
statement waiting for a conversation group another transaction holds.

Wake-ups are per queue (a commit that put messages on queue 7 wakes only the waiters of queue 7)
plus one key, :data:`LOCKS`, for lock waiters, woken whenever a transaction releases its groups.
Changes made by other processes are noticed by one watcher thread per broker, which asks the
storage whether anything changed (SQLite: polled every ``poll_interval`` real seconds;
PostgreSQL: a LISTEN that returns as soon as a commit's NOTIFY arrives) and then wakes
everyone; it runs only while somebody waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

__all__ = ["LOCKS", "Notifier"]

LOCKS = -1
"""The wake-up key of statements waiting for a conversation group lock."""


class Notifier:
    """Per-key wake-ups over one lock, with generation counters so that no wake-up is lost
    between a waiter's check and its sleep.

    Args:
        changed: waits up to the given real seconds and returns what another process's commits
            concern meanwhile: False (nothing), True (everyone) or the wait keys to wake;
            called from the poller thread only. SQLite's polls; PostgreSQL's returns as soon as
            a notification arrives.
        poll_interval: real seconds passed to ``changed`` per call.
    """

    def __init__(
        self, changed: Callable[[float], bool | set[int]] | None, poll_interval: float
    ) -> None:
        self._lock = threading.Lock()
        self._conds: dict[int, threading.Condition] = {}
        self._generations: dict[int, int] = {}
        self._global = 0
        self._waiters = 0
        self._changed = changed
        self._poll_interval = poll_interval
        self._poller: threading.Thread | None = None
        self._closed = False
        self._someone_waits = threading.Condition(self._lock)

    def _cond(self, key: int) -> threading.Condition:
        cond = self._conds.get(key)
        if cond is None:
            cond = self._conds[key] = threading.Condition(self._lock)
        return cond

    def generation(self, key: int) -> tuple[int, int]:
        """The current (global, per-key) generation; pass it back to :meth:`wait`."""
        with self._lock:
            return self._global, self._generations.get(key, 0)

    def notify(self, keys: Iterable[int] | None = None) -> None:
        """Wake the waiters of ``keys`` (every waiter when None)."""
        with self._lock:
            if keys is None:
                self._global += 1
                for cond in self._conds.values():
                    cond.notify_all()
                return
            for key in keys:
                self._generations[key] = self._generations.get(key, 0) + 1
                waiting = self._conds.get(key)
                if waiting is not None:
                    waiting.notify_all()

    def wait(self, key: int, seen: tuple[int, int], timeout: float) -> None:
        """Sleep up to ``timeout`` real seconds unless ``key`` was notified since ``seen``."""
        with self._lock:
            if (self._global, self._generations.get(key, 0)) != seen:
                return
            self._waiters += 1
            if self._changed is not None and self._poller is None and not self._closed:
                self._poller = threading.Thread(
                    target=self._poll, name="servicebroker-poller", daemon=True
                )
                self._poller.start()
            self._someone_waits.notify_all()
            try:
                self._cond(key).wait(timeout)
            finally:
                self._waiters -= 1

    def _poll(self) -> None:
        assert self._changed is not None
        while True:
            with self._lock:
                while not self._waiters and not self._closed:
                    self._someone_waits.wait()
                if self._closed:
                    return
            try:
                changed = self._changed(self._poll_interval)
            except Exception:
                threading.Event().wait(self._poll_interval)
                changed = True
            if changed is True:
                self.notify(None)
            elif changed:
                self.notify(changed)

    def close(self) -> None:
        """Wake everyone and stop the poller."""
        with self._lock:
            self._closed = True
            self._someone_waits.notify_all()
        self.notify(None)
        if self._poller is not None:
            self._poller.join(5)
