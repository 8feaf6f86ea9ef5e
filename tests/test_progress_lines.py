"""The demo's progress as plain lines when its output is not a terminal (`make demo > log`,
CI, nohup): a line per stage at once, and between stages a line at most every ``every``
seconds while flights settle; nothing on a terminal, where rich draws the bar."""

from __future__ import annotations

import io

from rich.console import Console

from servicebroker.demo.progress_lines import ProgressLines


def test_lines_when_not_a_terminal() -> None:
    now = [100.0]
    log = io.StringIO()
    lines = ProgressLines(Console(file=log, width=200), 1000, every=10.0, monotonic=lambda: now[0])
    lines.stage("month  1: receiving")
    lines.settled(10)  # within 10 s of the last line: not printed
    now[0] += 10.0
    lines.settled(250)
    now[0] += 65.0
    lines.stage("month  2: Spark sends")
    assert log.getvalue().splitlines() == [
        "[0:00] month  1: receiving — 0/1,000 flights settled",
        "[0:10] month  1: receiving — 250/1,000 flights settled",
        "[1:15] month  2: Spark sends — 250/1,000 flights settled",
    ]


def test_nothing_on_a_terminal() -> None:
    log = io.StringIO()
    lines = ProgressLines(Console(file=log, force_terminal=True), 10)
    lines.stage("month  1: receiving")
    lines.settled(10)
    assert log.getvalue() == ""
