"""How waiting statements wait and wake up: a RECEIVE or GET CONVERSATION GROUP waiting on a
queue (WAITFOR), and a statement waiting for a conversation group another transaction holds.

:class:`Waiting` is the wait loop: it tries, sleeps until woken or until its deadline on the
broker's clock, and tries again. :class:`Notifier` does the waking.

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
from typing import TypeVar

from ..clock import Clock
from ..storage.base import QueueActivityStore

__all__ = ["LOCKS", "WAIT_SAFETY", "Notifier", "Waiting"]

T = TypeVar("T")
WAIT_SAFETY = 1.0
"""Real seconds a waiting statement sleeps at most before it looks again on its own (a safety
net: wake-ups and the poller normally come first)."""

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
        spawn: starts the poller loop on a thread of its own, given a name and the loop (the
            broker's :class:`~servicebroker.supervisor.Supervisor`); a plain daemon thread when
            None.
    """

    def __init__(
        self,
        changed: Callable[[float], bool | set[int]] | None,
        poll_interval: float,
        spawn: Callable[[str, Callable[[], None]], None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._conds: dict[int, threading.Condition] = {}
        self._generations: dict[int, int] = {}
        self._global = 0
        self._waiters = 0
        self._changed = changed
        self._poll_interval = poll_interval
        self._spawn = spawn or _daemon_thread
        self._poller_started = False
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
            if self._changed is not None and not self._poller_started and not self._closed:
                self._poller_started = True
                self._spawn("servicebroker-poller", self._poll)
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
        """Wake everyone and make the poller return (its owner joins its thread)."""
        with self._lock:
            self._closed = True
            self._someone_waits.notify_all()
        self.notify(None)


def _daemon_thread(name: str, loop: Callable[[], None]) -> None:
    threading.Thread(target=loop, name=name, daemon=True).start()


class Waiting:
    """The wait loop of statements that wait (RECEIVE and GET CONVERSATION GROUP with a
    time-out, a statement waiting for a locked conversation group).

    Args:
        clock: the broker's clock: deadlines are broker times, and a manual clock's moves wake
            waiters (the caller notifies).
        notifier: the broker's :class:`Notifier`.
        activity: where waits are published for the queue monitors of every process (ACT-3).
        give_up: called between tries; True ends the wait with nothing (the broker closed, or
            it is stopping and the caller is an activated procedure, which then exits).
    """

    def __init__(
        self,
        clock: Clock,
        notifier: Notifier,
        activity: QueueActivityStore,
        give_up: Callable[[], bool],
    ) -> None:
        self.clock = clock
        self.notifier = notifier
        self._activity = activity
        self._give_up = give_up

    def locks_generation(self) -> tuple[int, int]:
        """The generation of :data:`LOCKS` wake-ups: it moves whenever some transaction
        releases conversation groups (a transaction forgets which groups it saw locked then)."""
        return self.notifier.generation(LOCKS)

    def wait_for(
        self,
        attempt: Callable[[], T | None],
        deadline: float | None,
        *,
        queue_id: int | None = None,
        counts_as_waiting: bool = False,
    ) -> T | None:
        """Call ``attempt`` until it returns a value, the broker-clock ``deadline`` passes
        (None: never) or :attr:`give_up` says so; returns the value or None.

        Between tries it sleeps until woken: by a commit touching ``queue_id`` (or releasing
        locks, when ``queue_id`` is None), by a clock move, or by the poller seeing another
        process's commit; at most :data:`WAIT_SAFETY` real seconds. ``counts_as_waiting``: the
        caller is a RECEIVE or GET CONVERSATION GROUP without WHERE, which queue monitors
        count (ACT-3, ACT-5b) while it sleeps.

        Raises:
            whatever ``attempt`` raises (e.g. QueueDisabledError); StorageError from the
            activity store.
        """
        key = LOCKS if queue_id is None else queue_id
        counted = False
        token: int | None = None
        try:
            while True:
                seen = self.notifier.generation(key)
                result = attempt()
                if result is not None:
                    return result
                now = self.clock.now()
                if (deadline is not None and now >= deadline) or self._give_up():
                    return None
                if queue_id is not None and counts_as_waiting and not counted:
                    token = self._activity.begin_wait(queue_id)  # ACT-3, all processes
                    counted = True
                real = WAIT_SAFETY
                if deadline is not None:
                    real = min(real, self.clock.max_real_wait(deadline - now))
                self.notifier.wait(key, seen, max(real, 0.0005))
        finally:
            if counted:
                self._activity.end_wait(token)
