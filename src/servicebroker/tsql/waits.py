"""Waiting on the broker's clock (WAITFOR DELAY / TIME): time is injected, so a manual clock's
``advance`` ends the wait, and a wall clock ends it when the seconds have passed."""

from __future__ import annotations

import threading

from ..clock import Clock

__all__ = ["wait_on_clock"]

_LONGEST_NAP = 1.0
"""Real seconds a wait sleeps at most before it looks at the clock again."""


def wait_on_clock(clock: Clock, seconds: float) -> None:
    """Return once ``seconds`` have passed on ``clock`` (at once for 0 or less)."""
    deadline = clock.now() + seconds
    moved = threading.Event()

    def woken(now: float) -> None:
        moved.set()

    clock.subscribe(woken)
    try:
        while (left := deadline - clock.now()) > 0:
            moved.wait(min(clock.max_real_wait(left), _LONGEST_NAP))
            moved.clear()
    finally:
        clock.unsubscribe(woken)
