"""Transmission under saturation: which level gets the link, and how long level 1 waits.

A link that carries CAPACITY messages per simulated second takes messages off the real
transmission queue in the broker's own transmission order (``TransmissionQueue.batch``: the
per-level index reads and ``transmission_order``, as the drain and a transport use them) and
acknowledges them. Senders offer OVERLOAD x CAPACITY messages per second, split evenly over the
levels of the scenario ({1, 10}, {9, 10}, 1..10), on conversations to a service of another
instance (not in this database, so every message waits in the transmission queue). Each run
lasts SECONDS simulated seconds on a manual clock; the same load goes through three orders:

- FIFO: HONOR_BROKER_PRIORITY OFF (PRI-16: everything at level 5, send order);
- strict priority: ON with aging off (``priority_aging_interval=None``): the highest level
  always first, the starvation this project's default avoids;
- aging (the default): ON, a waiting message's level rises by one per 10 s (PRI-18).

Printed per run: each level's share of what the link carried, its median wait and the longest
wait of a level-1 message (counting those still waiting at the end).

    python benchmarks/priorities.py [--seconds 120] [--capacity 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from servicebroker import Broker, ManualClock
from servicebroker.engine.transmission import TransmissionQueue
from servicebroker.storage import open_storage

SCENARIOS = {"{1,10}": (1, 10), "{9,10}": (9, 10), "1..10": tuple(range(1, 11))}
POLICIES = (
    ("FIFO (HONOR_BROKER_PRIORITY OFF)", False, None),
    ("strict priority (aging off)", True, None),
    ("aging, 10 s per level (default)", True, 10.0),
)
CONVERSATIONS_PER_LEVEL = 4
OVERLOAD = 2.0


@dataclass
class Outcome:
    share: dict[int, float]  # level -> share of the link, 0..1
    median_wait: dict[int, float]  # level -> seconds
    longest_wait: dict[int, float]  # level -> seconds, counting messages still waiting
    sent: int
    carried: int


def run(
    levels: tuple[int, ...], honor: bool, aging: float | None, seconds: int, capacity: int
) -> Outcome:
    """One run of the real broker on a manual clock (see the module docstring)."""
    with tempfile.TemporaryDirectory() as folder:
        clock = ManualClock(1_700_000_000.0)
        broker = Broker.open(
            os.path.join(folder, "b.db"), clock=clock, priority_aging_interval=aging
        )
        storage = open_storage(broker.url)  # the link's own connection to the database
        try:
            broker.create_message_type("M")
            for level in levels:
                broker.create_contract(f"C{level}", {"M": "INITIATOR"})
                broker.create_broker_priority(
                    f"p{level}", contract_name=f"C{level}", priority_level=level
                )
            broker.create_queue("q")
            broker.create_service("//here", queue="q")
            broker.alter_database(honor_broker_priority=honor)
            with broker.transaction() as tx:
                handles = [
                    (level, tx.begin_dialog("//here", "//elsewhere", contract=f"C{level}"))
                    for level in levels
                    for _ in range(CONVERSATIONS_PER_LEVEL)
                ]
            per_second = round(capacity * OVERLOAD)
            waits: dict[int, list[float]] = defaultdict(list)
            sent = 0
            for _ in range(seconds):
                with broker.transaction() as tx:
                    for n in range(per_second):
                        level, handle = handles[(sent + n) % len(handles)]
                        tx.send(handle, "M", b"x")
                sent += per_second
                now = clock.now()
                with storage.connection() as conn:  # the link: CAPACITY per second
                    conn.begin_write()
                    queue = TransmissionQueue(conn, broker.catalog, now)
                    for row in queue.batch(capacity, aging)[:capacity]:
                        waits[row.priority].append(now - row.enqueue_time)
                        conn.delete_transmission(row.transmission_id)
                    conn.commit()
                clock.advance(1.0)
            now = clock.now()
            left: dict[int, list[float]] = defaultdict(list)
            for r in broker.views.transmission_queue():
                left[r.priority].append(now - r.enqueue_time.timestamp())
        finally:
            storage.close()
            broker.close()
    carried = sum(len(w) for w in waits.values())
    return Outcome(
        share={lv: len(waits[lv]) / carried for lv in levels},
        median_wait={
            lv: statistics.median(waits[lv]) if waits[lv] else float("nan") for lv in levels
        },
        longest_wait={lv: max(waits[lv] + left[lv], default=0.0) for lv in levels},
        sent=sent,
        carried=carried,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=120, help="simulated seconds per run")
    parser.add_argument("--capacity", type=int, default=100, help="link messages per second")
    args = parser.parse_args()
    console = Console()
    table = Table(
        title=f"Transmission at {OVERLOAD:.0%} of a {args.capacity} msg/s link for "
        f"{args.seconds} simulated s (benchmarks/priorities.py)"
    )
    short = ("FIFO", "strict", "aging")
    table.add_column("levels")
    table.add_column("level", justify="right")
    for kind in ("share", "median wait s", "longest wait s"):
        for label in short:
            table.add_column(f"{kind}\n{label}", justify="right")
    for name, levels in SCENARIOS.items():
        outs = [
            run(levels, honor, aging, args.seconds, args.capacity) for _, honor, aging in POLICIES
        ]
        top_down = sorted(levels, reverse=True)
        for n, lv in enumerate(top_down):
            table.add_row(
                name if n == 0 else "",
                str(lv),
                *(f"{o.share[lv]:.1%}" for o in outs),
                *(
                    "-" if o.median_wait[lv] != o.median_wait[lv] else f"{o.median_wait[lv]:.0f}"
                    for o in outs
                ),
                *(f"{o.longest_wait[lv]:.0f}" for o in outs),
                end_section=n == len(levels) - 1,
            )
    console.print(table)
    console.print(
        "FIFO: HONOR_BROKER_PRIORITY OFF; strict: ON, priority_aging_interval=None; "
        "aging: ON, 10 s per level (the default). Longest wait counts messages still waiting; "
        "'-': nothing of that level was carried."
    )


if __name__ == "__main__":
    main()
