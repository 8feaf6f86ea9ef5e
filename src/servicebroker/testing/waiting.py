"""Waiting in real time for another thread or process: the one bounded poll the tests and the
testing kit share. The bound only ends a failing run; what a test asserts is what the probe
returned."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["eventually", "poll"]

T = TypeVar("T")


def poll(probe: Callable[[], T], timeout: float, every: float = 0.01) -> T | None:
    """Call ``probe`` every ``every`` seconds until it returns something truthy (returned), for
    at most ``timeout`` real seconds (then None: the caller decides what that means)."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            return None
        time.sleep(every)


def eventually(
    probe: Callable[[], T | None],
    what: str = "the condition",
    timeout: float = 20.0,
    every: float = 0.01,
) -> T:
    """What ``probe`` returns once it is truthy, polled every ``every`` seconds.

    Raises:
        AssertionError: not truthy within ``timeout`` real seconds (naming ``what``).
    """
    got = poll(probe, timeout, every)
    if not got:
        raise AssertionError(f"timed out waiting for {what} ({timeout:g} s)")
    return got
