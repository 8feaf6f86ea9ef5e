"""SEND + RECEIVE throughput against a minimal raw-sqlite3 queue, side by side, in one run.

Both run on the same SQLite settings (WAL, synchronous=FULL), a producer thread and a consumer
thread at once, for batch sizes 1, 10 and 100 messages per transaction:

- raw: the producer inserts rows; the consumer selects the oldest N and deletes them;
- servicebroker, in three shapes of load (``--shapes``): ``one`` — the producer SENDs on one
  dialog, the consumer RECEIVEs TOP (N) with full semantics (group locks, exactly-once, in
  order) and commits; ``groups`` — 64 dialogs in 64 conversation groups, one RECEIVE TOP (N)
  per transaction; ``repeated`` — 64 groups, the consumer RECEIVEs again and again in one
  transaction (each RECEIVE takes one group, RCV-5) until it has N messages, then commits;
  ``top1`` — the same with RECEIVE TOP (1), so one transaction holds up to N groups (what a
  RECEIVE costs in a transaction that already holds many).

Then the memory check: 1,000,000 messages queued, received in batches of 100, peak RSS printed.

    python benchmarks/throughput.py [--messages 20000] [--memory-messages 1000000]
        [--shapes one,groups,repeated,top1]
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from rich.console import Console
from rich.table import Table

from servicebroker import Broker

BODY = b"x" * 100


def raw_run(path: str, total: int, batch: int) -> float:
    def connect() -> sqlite3.Connection:
        c = sqlite3.connect(path, isolation_level=None, timeout=60, check_same_thread=False)
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=FULL")
        return c

    setup = connect()
    setup.execute("CREATE TABLE q (id INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB NOT NULL)")
    setup.close()

    def produce() -> None:
        c = connect()
        for _ in range(total // batch):
            c.execute("BEGIN IMMEDIATE")
            c.executemany("INSERT INTO q (body) VALUES (?)", [(BODY,)] * batch)
            c.execute("COMMIT")
        c.close()

    consumed = 0

    def consume() -> None:
        nonlocal consumed
        c = connect()
        while consumed < total:
            c.execute("BEGIN IMMEDIATE")
            rows = c.execute("SELECT id, body FROM q ORDER BY id LIMIT ?", (batch,)).fetchall()
            if rows:
                c.executemany("DELETE FROM q WHERE id = ?", [(r[0],) for r in rows])
            c.execute("COMMIT")
            consumed += len(rows)
            if not rows:
                time.sleep(0.0005)
        c.close()

    return _timed(produce, consume)


def broker_run(
    path: str,
    total: int,
    batch: int,
    shape: str = "one",
    around: Callable[[], AbstractContextManager[object]] = nullcontext,
    start: bool = False,
) -> float:
    """Seconds to SEND and RECEIVE ``total`` messages; ``around()`` is entered once the
    catalog and dialogs exist, before the clock starts, and left after it stops (an observer
    such as the web console, benchmarks/console_cost.py); with ``start`` the broker runs its
    background work meanwhile (the timer, publishing its statistics every second)."""
    broker = Broker.open(path)
    broker.create_queue("iq")
    broker.create_queue("tq")
    broker.create_service("i", queue="iq")
    broker.create_service("t", queue="tq", contracts=["DEFAULT"])
    with broker.transaction() as tx:
        handles = [tx.begin_dialog("i", "t") for _ in range(1 if shape == "one" else 64)]

    def produce() -> None:
        n = 0
        for _ in range(total // batch):
            with broker.transaction() as tx:
                for _ in range(batch):
                    tx.send(handles[n % len(handles)], "DEFAULT", BODY)
                    n += 1

    consumed = 0

    def consume() -> None:
        nonlocal consumed
        while consumed < total:
            with broker.transaction() as tx:
                top = 1 if shape == "top1" else batch
                got = len(tx.receive("tq", top=top, timeout=5))
                while shape in ("repeated", "top1") and got and got < batch:
                    more = len(tx.receive("tq", top=1 if shape == "top1" else batch - got))
                    if not more:
                        break
                    got += more
            consumed += got

    if start:
        broker.start()
    try:
        with around():
            return _timed(produce, consume)
    finally:
        broker.close()


def _timed(produce: object, consume: object) -> float:
    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]  # type: ignore[arg-type]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def memory_run(path: str, total: int, console: Console) -> tuple[float, float, float]:
    broker = Broker.open(path)
    broker.create_queue("iq")
    broker.create_queue("tq")
    broker.create_service("i", queue="iq")
    broker.create_service("t", queue="tq", contracts=["DEFAULT"])
    start = time.perf_counter()
    with broker.transaction() as tx:
        handle = tx.begin_dialog("i", "t")
    sent = 0
    while sent < total:
        n = min(10_000, total - sent)
        with broker.transaction() as tx:
            for _ in range(n):
                tx.send(handle, "DEFAULT", BODY)
        sent += n
    send_s = time.perf_counter() - start
    rss_queued = _rss_mb()
    start = time.perf_counter()
    received = 0
    while True:
        with broker.transaction() as tx:
            got = len(tx.receive("tq", top=100))
        if not got:
            break
        received += got
    recv_s = time.perf_counter() - start
    broker.close()
    if received != total:
        console.print(f"[red]memory run received {received} of {total}[/red]")
    console.print(
        f"queued {total:,} in {send_s:.1f} s (RSS {rss_queued:.0f} MB), received in {recv_s:.1f} s"
    )
    return send_s, recv_s, _rss_mb()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--messages", type=int, default=20_000, help="messages per run at batch 10 and 100"
    )
    parser.add_argument(
        "--messages-batch1", type=int, default=4_000, help="messages per run at batch 1"
    )
    parser.add_argument("--memory-messages", type=int, default=1_000_000)
    parser.add_argument("--batches", default="1,10,100")
    parser.add_argument("--shapes", default="one,groups,repeated,top1")
    args = parser.parse_args()
    console = Console()
    table = Table(
        title="SEND + RECEIVE throughput, SQLite WAL synchronous=FULL, producer and consumer at once"
    )
    for col in (
        "shape",
        "batch",
        "messages",
        "raw sqlite3 msg/s",
        "servicebroker msg/s",
        "ratio",
        "target",
    ):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as folder:
        for batch in (int(b) for b in args.batches.split(",")):
            total = args.messages_batch1 if batch == 1 else args.messages
            total -= total % batch
            raw = total / raw_run(os.path.join(folder, f"raw{batch}.db"), total, batch)
            for shape in args.shapes.split(","):
                if shape in ("repeated", "top1") and batch == 1:
                    continue  # one RECEIVE of one message: the groups shape
                path = os.path.join(folder, f"sb{batch}{shape}.db")
                sb = total / broker_run(path, total, batch, shape)
                ok = sb >= 0.5 * raw
                table.add_row(
                    shape,
                    str(batch),
                    f"{total:,}",
                    f"{raw:,.0f}",
                    f"{sb:,.0f}",
                    f"{sb / raw:.0%}",
                    "[green]>= 50 % ok[/green]" if ok else "[red]< 50 %[/red]",
                )
        console.print(table)
        if args.memory_messages:
            _, _, peak = memory_run(os.path.join(folder, "mem.db"), args.memory_messages, console)
            verdict = "[green]ok[/green]" if peak < 200 else "[red]over[/red]"
            console.print(
                f"peak RSS with {args.memory_messages:,} messages queued and received: {peak:.0f} MB (target < 200 MB) {verdict}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
