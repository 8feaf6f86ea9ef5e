"""SEND + RECEIVE throughput on PostgreSQL beside SQLite, in one run.

For each backend, for 1, 2 and 4 reader processes and batch sizes 1, 10 and 100 messages per
transaction: a fresh database (an SQLite file; a new schema on the PostgreSQL server), one
sender process SENDing on 64 dialogs (one conversation group each) and the reader processes
RECEIVEing TOP (batch) with full semantics (group locks, exactly once, in order) and committing,
all at once. The figure is messages per second from the first SEND to the last RECEIVE's commit.

    python benchmarks/backends.py [--postgres URL] [--messages 20000] [--batches 1,10,100]
        [--readers 1,2,4]

PostgreSQL is the server of ``--postgres`` (default ``SERVICEBROKER_TEST_POSTGRES_URL`` or
``postgresql://postgres@127.0.0.1:5432/postgres``); both run with their durable defaults
(SQLite WAL + synchronous=FULL; PostgreSQL fsync on, synchronous_commit on).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
import uuid
from typing import Any

from bench_setup import POSTGRES_URL, drop_schema, open_dialogs, postgres_schema
from rich.console import Console
from rich.table import Table

from servicebroker import Broker

BODY = b"x" * 100
CONVERSATIONS = 64
ctx = mp.get_context("spawn")


def _setup(url: str) -> list[uuid.UUID]:
    with Broker.open(url) as broker:
        return open_dialogs(broker, CONVERSATIONS)


def _sender(url: str, handles: list[uuid.UUID], total: int, batch: int, go: Any) -> None:
    with Broker.open(url) as broker:
        go.wait()
        n = 0
        while n < total:
            with broker.transaction() as tx:
                for _ in range(min(batch, total - n)):
                    tx.send(handles[n % len(handles)], "M", BODY)
                    n += 1


def _reader(url: str, batch: int, total: int, received: Any, go: Any, done: Any) -> None:
    with Broker.open(url) as broker:
        go.wait()
        while received.value < total:
            with broker.transaction() as tx:
                got = len(tx.receive("tq", top=batch, timeout=0.05))
            if got:
                with received.get_lock():
                    received.value += got
                    if received.value >= total:
                        done.set()


def run(url: str, total: int, batch: int, readers: int) -> float:
    """Messages per second for one configuration (module docstring)."""
    handles = _setup(url)
    go, done = ctx.Event(), ctx.Event()
    received = ctx.Value("q", 0)
    procs = [ctx.Process(target=_sender, args=(url, handles, total, batch, go))]
    procs += [
        ctx.Process(target=_reader, args=(url, batch, total, received, go, done))
        for _ in range(readers)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let every process import and open the broker
    started = time.perf_counter()
    go.set()
    if not done.wait(600):
        raise RuntimeError(f"readers did not finish ({received.value} of {total})")
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join(60)
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--postgres",
        default=POSTGRES_URL,
    )
    parser.add_argument("--messages", type=int, default=20_000, help="messages at batch 100")
    parser.add_argument("--batches", default="1,10,100")
    parser.add_argument("--readers", default="1,2,4")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    reader_counts = [int(r) for r in args.readers.split(",")]
    console = Console(width=max(Console().width, 120))
    table = Table(title="SEND + RECEIVE msg/s: one sender process, N reader processes")
    table.add_column("batch", justify="right")
    table.add_column("messages", justify="right")
    for r in reader_counts:
        table.add_column(f"SQLite\n{r} reader{'s' if r > 1 else ''}", justify="right")
    for r in reader_counts:
        table.add_column(f"PostgreSQL\n{r} reader{'s' if r > 1 else ''}", justify="right")
    for batch in batches:
        total = max(2_000, min(args.messages, batch * 400))
        figures: list[str] = []
        for backend in ("sqlite", "postgres"):
            for readers in reader_counts:
                if backend == "sqlite":
                    with tempfile.TemporaryDirectory() as folder:
                        rate = run(os.path.join(folder, "b.db"), total, batch, readers)
                else:
                    url = postgres_schema(args.postgres)
                    try:
                        rate = run(url, total, batch, readers)
                    finally:
                        drop_schema(args.postgres, url)
                console.print(
                    f"batch {batch:>3}, {backend:>8}, {readers} reader(s): {rate:,.0f} msg/s"
                )
                figures.append(f"{rate:,.0f}")
        table.add_row(str(batch), f"{total:,}", *figures)
    console.print(table)


if __name__ == "__main__":
    main()
