"""Readers versus conversation groups: servicebroker's activation beside a queue-length rule.

For 1, 2, 5, 10 and 50 conversation groups holding 1,000 messages in all, with
MAX_QUEUE_READERS = 16 and a procedure that takes 10 messages of one group per RECEIVE and holds
the group for 1 simulated second, this runs the real broker on a manual clock for 240 simulated
seconds and reports the peak number of readers and the idle reader-seconds (readers waiting in
RECEIVE with nothing they could take). Beside it, the same load under a queue-length rule as KEDA
scales consumers — one reader per 20 unread messages, at most 16, re-evaluated every 5 s — where
only one reader per group can do anything at a time.

    python benchmarks/activation.py
"""

from __future__ import annotations

import math
import os
import sys
import tempfile

from rich.console import Console
from rich.table import Table

from servicebroker import Activation, Broker, ManualClock
from servicebroker.testing import SimulatedWork

MESSAGES = 1000
MAX_READERS = 16
TOP = 10
SECONDS = 240
PER_READER = 20  # the queue-length rule: one reader per this many unread messages


def servicebroker_run(groups: int) -> tuple[int, float, float]:
    """(peak readers, idle reader-seconds, seconds to drain) with real activation."""
    with tempfile.TemporaryDirectory() as folder:
        clock = ManualClock()
        broker = Broker.open(os.path.join(folder, "b.db"), clock=clock, poll_interval=0.01)
        try:
            broker.create_queue("iq")
            broker.create_queue("tq")
            broker.create_service("i", queue="iq")
            broker.create_service("t", queue="tq", contracts=["DEFAULT"])
            broker.start()
            sim = SimulatedWork(broker, clock, "tq")
            broker.alter_queue(
                "tq",
                activation=Activation(
                    sim.procedure(top=TOP, seconds=1, wait=2), max_queue_readers=MAX_READERS
                ),
            )
            with broker.transaction() as tx:
                handles = [tx.begin_dialog("i", "t") for _ in range(groups)]
                for n in range(MESSAGES):
                    tx.send(handles[n % groups], "DEFAULT", b"x")
            drained = None
            for second in range(SECONDS):
                sim.settle()
                if drained is None and not broker.peek("tq", top=1):
                    drained = float(second)
                clock.advance(1)
            sim.settle()
            peak = max(r for r, _ in sim.samples)
            idle = float(sum(w for _, w in sim.samples))
            return peak, idle, drained if drained is not None else float(SECONDS)
        finally:
            broker.close()


def queue_length_run(groups: int) -> tuple[int, float, float]:
    """The same load under the queue-length rule, simulated step by step (1 s)."""
    left = [MESSAGES // groups + (1 if g < MESSAGES % groups else 0) for g in range(groups)]
    readers = peak = 0
    idle = 0.0
    drained = None
    for second in range(SECONDS):
        unread = sum(left)
        if second % 5 == 0:
            readers = min(MAX_READERS, math.ceil(unread / PER_READER))
        peak = max(peak, readers)
        busy = [g for g in range(groups) if left[g] > 0][:readers]
        idle += readers - len(busy)
        for g in busy:
            left[g] = max(0, left[g] - TOP)
        if drained is None and not sum(left):
            drained = float(second + 1)
    return peak, idle, drained if drained is not None else float(SECONDS)


def main() -> int:
    console = Console()
    table = Table(
        title=f"{MESSAGES:,} messages, MAX_QUEUE_READERS = {MAX_READERS}, 1 simulated s per RECEIVE of {TOP}"
    )
    for col in (
        "groups",
        "servicebroker peak readers",
        "idle reader-s",
        "drained (s)",
        "queue-length rule peak",
        "idle reader-s ",
        "drained (s) ",
    ):
        table.add_column(col, justify="right")
    for groups in (1, 2, 5, 10, 50):
        ours = servicebroker_run(groups)
        theirs = queue_length_run(groups)
        table.add_row(
            str(groups),
            str(ours[0]),
            f"{ours[1]:.0f}",
            f"{ours[2]:.0f}",
            str(theirs[0]),
            f"{theirs[1]:.0f}",
            f"{theirs[2]:.0f}",
        )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
