"""The demo's progress as plain lines when its output is not a terminal (a log file, CI,
nohup, systemd): rich draws its bar only on a terminal, so a long run would otherwise print
nothing until its report."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console

__all__ = ["ProgressLines"]


class ProgressLines:
    """Prints a line for every stage of the demo and, between stages, at most one every
    ``every`` seconds of real time while flights settle — only when ``console`` is not a
    terminal (on a terminal the bar shows the same).

    Args:
        console: where the lines go.
        total: the flights the run settles (shown as ``settled/total``).
        every: real seconds between two lines of the same stage (a display cadence: nothing
            the demo decides depends on it).
        monotonic: the real clock read for that cadence and the elapsed time (injectable).
    """

    def __init__(
        self,
        console: Console,
        total: int,
        *,
        every: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._console = console
        self._total = total
        self._every = every
        self._monotonic = monotonic
        self._started = monotonic()
        self._last = float("-inf")
        self._stage = "starting"
        self._settled = 0
        self.enabled = not console.is_terminal

    def stage(self, description: str) -> None:
        """A new stage (e.g. ``month  3: receiving``): printed at once."""
        self._stage = description
        self._print()

    def settled(self, done: int) -> None:
        """``done`` flights settled so far: printed when ``every`` seconds passed since the
        last line."""
        self._settled = done
        if self._monotonic() - self._last >= self._every:
            self._print()

    def _print(self) -> None:
        if not self.enabled:
            return
        now = self._monotonic()
        self._last = now
        elapsed = int(now - self._started)
        self._console.print(
            f"[{elapsed // 60:d}:{elapsed % 60:02d}] {self._stage} — "
            f"{self._settled:,}/{self._total:,} flights settled",
            highlight=False,
        )
