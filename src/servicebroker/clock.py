"""The broker's clock: every time-out, lifetime, timer and interval reads it (DEVELOPERS: time is
injected). :class:`SystemClock` follows the wall clock; :class:`ManualClock` moves only when a test
or a simulation calls :meth:`ManualClock.advance`, so a 90-second rule is tested in milliseconds.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from .errors import BrokerError, ClockError

__all__ = ["Clock", "ManualClock", "SystemClock", "check_seconds", "to_datetime"]

Listener = Callable[[float], None]


def to_datetime(seconds: float | None) -> datetime | None:
    """A broker-clock time (seconds since the epoch) as a timezone-aware UTC datetime, as the
    views and queue rows show times; None stays None, and a time beyond what ``datetime``
    holds (a LIFETIME of 2**31-1 seconds from now, far in the future) is ``datetime.max``."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return datetime.max.replace(tzinfo=UTC)


class Clock(Protocol):
    """What the broker needs of a clock.

    ``now()`` returns seconds (float) since the Unix epoch on this clock. ``subscribe(fn)``
    registers ``fn(now)`` to be called whenever the clock jumps (a manual clock's ``advance``);
    a wall clock never calls it. ``max_real_wait(seconds)`` says how long, in real seconds, a
    waiter may sleep before it must look at the clock again for a deadline ``seconds`` away.
    """

    def now(self) -> float:
        """Seconds since the epoch on this clock."""
        ...

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(now)`` whenever the clock jumps."""
        ...

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        ...

    def max_real_wait(self, seconds: float) -> float:
        """Real seconds a waiter may sleep for a deadline ``seconds`` away on this clock."""
        ...


class SystemClock:
    """The wall clock (``time.time()``); the default of :meth:`Broker.open`."""

    def now(self) -> float:
        """Seconds since the epoch, from ``time.time()``."""
        return time.time()

    def subscribe(self, listener: Listener) -> None:
        """Accepted and ignored: the wall clock never jumps."""

    def unsubscribe(self, listener: Listener) -> None:
        """Accepted and ignored."""

    def max_real_wait(self, seconds: float) -> float:
        """A deadline ``seconds`` away on the wall clock is ``seconds`` of real time."""
        return max(0.0, seconds)


class ManualClock:
    """A clock that moves only by :meth:`advance` (or :meth:`set`).

    Args:
        start: the initial time, seconds since the epoch (default 1,700,000,000).

    Listeners (the broker's waiting RECEIVEs and its background services) are called
    synchronously, in the advancing thread, with the new time, so after ``advance`` returns every
    timer due by then has fired and every waiter whose time-out passed has been woken.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = check_seconds(start, "ManualClock start", error=ClockError)
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    def now(self) -> float:
        """The current manual time in seconds."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` (>= 0) and notify listeners.

        Returns the new time.

        Raises:
            ClockError: ``seconds`` is not a number, or negative, NaN or infinite.
        """
        seconds = check_seconds(seconds, "ManualClock.advance", error=ClockError)
        return self.set(self._now + seconds)

    def set(self, when: float) -> float:
        """Move the clock to ``when`` (seconds since the epoch; never backwards) and notify.

        Raises:
            ClockError: ``when`` is not a finite number >= 0, or before the clock's time.
        """
        when = check_seconds(when, "ManualClock.set", error=ClockError)
        with self._lock:
            if when < self._now:
                raise ClockError(f"ManualClock cannot go back from {self._now!r} to {when!r}")
            self._now = when
            listeners = list(self._listeners)
        for listener in listeners:
            listener(self._now)
        return self._now

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(now)`` after every move of the clock."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling ``listener``; unknown listeners are ignored."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def max_real_wait(self, seconds: float) -> float:
        """Manual time does not pass by itself: a waiter sleeps until woken (bounded by the
        storage's poll interval for changes made by other processes)."""
        return float("inf")


def check_seconds(
    value: object,
    what: str,
    *,
    allow_zero: bool = True,
    maximum: float | None = None,
    error: type[BrokerError] = BrokerError,
) -> float:
    """``value`` as a finite number of seconds (a duration on the broker's clock: a time-out, a
    LIFETIME, a timer, a setting), as ``float``.

    Args:
        value: the number given (``bool`` is refused).
        what: names the argument or setting in the error, e.g. ``"lock_timeout"``.
        allow_zero: whether 0 is accepted (``False``: it must be > 0, as a LIFETIME, DLG-1).
        maximum: the largest value accepted, if any (a documented limit: docs/limits.md).
        error: the class raised (a :class:`BrokerError`; :class:`ClockError` for the clock).

    Raises:
        BrokerError (or ``error``): not a number, NaN, infinite, negative, 0 where ``allow_zero`` is False,
            or above ``maximum``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise error(f"{what} must be a number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero) or math.isinf(value):
        raise error(
            f"{what} must be a finite number of seconds {'>=' if allow_zero else '>'} 0, "
            f"got {value!r}"
        )
    if maximum is not None and value > maximum:
        raise error(f"{what} must be at most {maximum:.12g} seconds, got {value!r}")
    return float(value)
