"""The Spark streaming source (issue 14) beside the batch data source and the plain Python
RECEIVE loop, on the same queue content, side by side in one run.

The queue: ``--messages`` 100-byte messages on dialogs of ``--per-dialog`` messages each (every
dialog its own conversation group), all queued on ``tq`` before anything reads. Each consumer
below starts from a fresh copy of that content (SQLite: a copy of the filled file; PostgreSQL: a
new schema filled the same way), for each batch size B of ``--batches``:

- ``RECEIVE loop``: plain Python, one thread; a transaction RECEIVEs TOP (B - got) again and
  again (each RECEIVE takes one group, RCV-5) until it has B messages or the queue is empty,
  then commits. With the ``reply`` work it also SENDs one reply per message (``send_many``) and
  ENDs each conversation at its last message, in the same transaction. Batch latency: one
  transaction, first RECEIVE to commit.
- ``stream``: ``spark.readStream.format("servicebroker").option("maxMessagesPerBatch", B)``,
  ``Trigger.AvailableNow``, until the query stops; sink ``noop`` (Spark's noop format: the
  batches are read and acknowledged, nothing written) or ``reply`` (``writeStream.format(
  "servicebroker")``: the same replies and ENDs as the loop, one broker transaction per
  micro-batch). An ``availableNow`` run leaves its last batch claimed, unacknowledged, until the
  query runs again: the timed drain includes acknowledging it (``claims.acknowledge``), so the
  queue is empty at the end, as after the loop. Batch latency: Spark's ``triggerExecution``
  duration of each micro-batch that read rows (``query.recentProgress``). Messages per second
  count the whole drain, query start to the last acknowledgement.
- ``batch source``: ``spark.read.format("servicebroker").option("top", B)`` into Spark's noop
  sink, ``--batch-reads`` times; a *peek*: it neither consumes nor locks, so every read sees the
  same first B messages. Raw read speed, for reference: B / the median read.

Peak memory: the resident set of the process tree (this Python process, the Spark JVM and the
Python workers it starts) sampled every 0.1 s with psutil, summed over the processes (shared
pages counted in each), the highest sum during each row; the loops run before Spark starts.

The RECEIVE loop's transaction of B messages holds B / ``--per-dialog`` groups, and each RECEIVE
in it costs in proportion to the groups it holds already: at B = 100,000 it takes minutes on
SQLite and far longer on PostgreSQL; ``--loop-max`` leaves it out above a batch size.

    python benchmarks/streaming.py [--messages 100000] [--batches 1000,10000,100000]
        [--per-dialog 10] [--work noop,reply] [--batch-reads 5] [--url POSTGRESQL-SERVER-URL]
        [--loop-max B]

Without ``--url``: SQLite files in a temporary folder. With a PostgreSQL server URL (libpq; e.g.
``postgresql://postgres@127.0.0.1:5432/postgres``) each run gets a fresh schema, dropped after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psutil
from bench_setup import drop_schema, postgres_schema
from rich.console import Console
from rich.table import Table

from servicebroker import Broker

BODY = b"x" * 100
QUEUE = "tq"
DDL = """
CREATE MESSAGE TYPE Req VALIDATION = NONE;
CREATE MESSAGE TYPE Rep VALIDATION = NONE;
CREATE CONTRACT C (Req SENT BY INITIATOR, Rep SENT BY TARGET);
CREATE QUEUE iq;
CREATE QUEUE tq;
CREATE SERVICE i ON QUEUE iq;
CREATE SERVICE t ON QUEUE tq (C);
"""


@dataclass
class Row:
    """One consumer at one batch size: what the table prints."""

    consumer: str
    work: str
    batch: int
    messages: int
    batches: int
    seconds: float
    latencies_ms: list[float]
    peak_mb: float
    consumes: bool

    @property
    def rate(self) -> float:
        """Messages per second over the run (for the batch source: B / the median read)."""
        if self.consumer == "batch source":
            return self.batch_size_read / (statistics.median(self.latencies_ms) / 1000)
        return self.messages / self.seconds

    @property
    def batch_size_read(self) -> int:
        """Messages one read of the batch source returns."""
        return self.messages // max(1, self.batches)


# -- memory of the process tree -----------------------------------------------------------------


class TreeMemory:
    """Samples the summed RSS of this process and all its descendants every ``interval``
    seconds in a thread; :meth:`phase` gives the peak seen while its block runs."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.me = psutil.Process()
        self.peak = 0
        self.overall = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> int:
        """The summed RSS of the tree now, bytes."""
        total = 0
        for proc in [self.me, *self.me.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            now = self.sample()
            self.peak = max(self.peak, now)
            self.overall = max(self.overall, now)

    @contextlib.contextmanager
    def phase(self) -> Iterator[list[float]]:
        """Yield a one-item list that holds the block's peak (MB) when the block ends."""
        out = [0.0]
        self.peak = self.sample()
        try:
            yield out
        finally:
            self.peak = max(self.peak, self.sample())
            self.overall = max(self.overall, self.peak)
            out[0] = self.peak / 2**20

    def close(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join()


# -- the queue content --------------------------------------------------------------------------


def fill(url: str, messages: int, per_dialog: int) -> None:
    """The catalog (:data:`DDL`) and ``messages`` Req messages on dialogs of ``per_dialog``
    messages from ``i`` to ``t``, 10,000 messages per transaction."""
    with Broker.open(url) as broker:
        broker.execute_ddl(DDL)
        sent = 0
        while sent < messages:
            n = min(10_000, messages - sent)
            with broker.transaction() as tx:
                batch = []
                while len(batch) < n:
                    h = tx.begin_dialog("i", "t", contract="C")
                    k = min(per_dialog, n - len(batch))
                    batch.extend((h, "Req", BODY) for _ in range(k))
                tx.send_many(batch)
            sent += n


class Copies:
    """Fresh copies of one queue content: copies of a filled SQLite file, or PostgreSQL
    schemas each filled anew (dropped by :meth:`close`)."""

    def __init__(self, folder: str, server: str | None, messages: int, per_dialog: int) -> None:
        self.folder = folder
        self.server = server
        self.messages = messages
        self.per_dialog = per_dialog
        self.made: list[str] = []
        self.template = os.path.join(folder, "template.db")
        if server is None:
            fill(self.template, messages, per_dialog)

    def fresh(self) -> str:
        """The URL of a new copy."""
        if self.server is not None:
            url = postgres_schema(self.server)
            self.made.append(url)
            fill(url, self.messages, self.per_dialog)
            return url
        path = os.path.join(self.folder, f"copy{len(self.made)}.db")
        shutil.copyfile(self.template, path)
        self.made.append(path)
        return f"sqlite:///{path}"

    def close(self) -> None:
        """Drop the PostgreSQL schemas made."""
        if self.server is not None:
            for url in self.made:
                drop_schema(self.server, url)


def check_drained(url: str, messages: int, per_dialog: int, work: str) -> None:
    """The queue is empty and, with the reply work, ``iq`` holds one reply per message and one
    EndDialog per dialog; else raise RuntimeError."""
    with Broker.open(url) as broker:
        left = len(broker.peek(QUEUE))
        replies = len(broker.peek("iq"))
    dialogs = -(-messages // per_dialog)
    want = messages + dialogs if work == "reply" else 0
    if left or replies != want:
        raise RuntimeError(f"{url}: {left} messages left on {QUEUE}, {replies} on iq (want {want})")


# -- the consumers ------------------------------------------------------------------------------


def receive_loop(url: str, batch: int, work: str, last: int) -> tuple[int, int, float, list[float]]:
    """Drain the queue in transactions of up to ``batch`` messages; returns (messages,
    transactions, seconds, per-transaction milliseconds)."""
    latencies: list[float] = []
    total = 0
    with Broker.open(url) as broker:
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            with broker.transaction() as tx:
                got = tx.receive(QUEUE, top=batch)
                while got and len(got) < batch:
                    more = tx.receive(QUEUE, top=batch - len(got))
                    if not more:
                        break
                    got.extend(more)
                if got and work == "reply":
                    tx.send_many((m.conversation_handle, "Rep", m.message_body) for m in got)
                    for m in got:
                        if m.message_sequence_number == last:
                            tx.end_conversation(m.conversation_handle)
            if not got:
                break
            latencies.append((time.perf_counter() - t0) * 1000)
            total += len(got)
        seconds = time.perf_counter() - start
    return total, len(latencies), seconds, latencies


def stream_drain(
    spark: Any, url: str, batch: int, work: str, last: int, folder: str
) -> tuple[int, int, float, list[float]]:
    """Drain the queue with a streaming query (Trigger.AvailableNow) into the ``work`` sink,
    then acknowledge its last batch; returns (messages, micro-batches with rows, seconds,
    their triggerExecution milliseconds)."""
    from pyspark.sql import functions as F

    reader = f"bench-{uuid.uuid4().hex[:8]}"
    df = (
        spark.readStream.format("servicebroker")
        .option("url", url)
        .option("queue", QUEUE)
        .option("maxMessagesPerBatch", str(batch))
        .option("reader", reader)
        .load()
    )
    if work == "reply":
        writer = (
            df.select(
                "conversation_handle",
                F.lit("Rep").alias("message_type_name"),
                "message_body",
                (F.col("message_sequence_number") == last).alias("end_conversation"),
            )
            .writeStream.format("servicebroker")
            .option("url", url)
        )
    else:
        writer = df.writeStream.format("noop")
    checkpoint = os.path.join(folder, f"checkpoint-{reader}")
    start = time.perf_counter()
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    with Broker.open(url) as broker:
        (row,) = [r for r in broker.claims.readers() if r.reader == reader]
        broker.claims.acknowledge(reader, row.latest)
    seconds = time.perf_counter() - start
    progress = [p for p in query.recentProgress if p.numInputRows > 0]
    latencies = [float(p.durationMs["triggerExecution"]) for p in progress]
    return sum(p.numInputRows for p in progress), len(progress), seconds, latencies


def batch_reads(spark: Any, url: str, batch: int, reads: int) -> tuple[int, list[float]]:
    """Read the first ``batch`` messages with the batch data source into Spark's noop sink
    ``reads`` times; returns (messages per read, milliseconds per read)."""
    latencies = []
    for _ in range(reads):
        t0 = time.perf_counter()
        df = (
            spark.read.format("servicebroker")
            .option("url", url)
            .option("queue", QUEUE)
            .option("top", str(batch))
            .load()
        )
        df.write.format("noop").mode("overwrite").save()
        latencies.append((time.perf_counter() - t0) * 1000)
    with Broker.open(url) as broker:
        seen = len(broker.peek(QUEUE, top=batch))
    return seen, latencies


# -- the run ------------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """The ``p`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p * len(ordered) + 0.5) - 1))]


def timed_row(
    memory: TreeMemory,
    consumer: str,
    work: str,
    batch: int,
    run: Callable[[], tuple[int, int, float, list[float]]],
    consumes: bool = True,
) -> Row:
    """Run one consumer under a memory phase."""
    with memory.phase() as peak:
        messages, batches, seconds, latencies = run()
    return Row(consumer, work, batch, messages, batches, seconds, latencies, peak[0], consumes)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000, help="messages on the queue")
    parser.add_argument("--batches", default="1000,10000,100000", help="messages per batch")
    parser.add_argument("--per-dialog", type=int, default=10, help="messages per dialog (group)")
    parser.add_argument("--work", default="noop,reply", help="what consumers do: noop, reply")
    parser.add_argument("--batch-reads", type=int, default=5, help="batch source reads per B")
    parser.add_argument("--url", help="a PostgreSQL server URL (default: SQLite files)")
    parser.add_argument(
        "--loop-max",
        type=int,
        help="run the RECEIVE loop only at batch sizes up to this (its cost grows with the "
        "square of the groups one transaction holds)",
    )
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    works = args.work.split(",")
    last = args.per_dialog - 1
    console = Console(width=150)
    memory = TreeMemory()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        copies = Copies(folder, args.url, args.messages, args.per_dialog)
        try:
            if args.url is None:
                console.print(
                    f"filled {args.messages:,} messages in {time.perf_counter() - t0:.1f} s"
                )
            for batch in batches:
                if args.loop_max is not None and batch > args.loop_max:
                    console.print(f"RECEIVE loop at B={batch:,}: skipped (--loop-max)")
                    continue
                for work in works:
                    url = copies.fresh()
                    rows.append(
                        timed_row(
                            memory,
                            "RECEIVE loop",
                            work,
                            batch,
                            lambda u=url, b=batch, w=work: receive_loop(u, b, w, last),
                        )
                    )
                    check_drained(url, args.messages, args.per_dialog, work)
                    console.print(_line(rows[-1]))
            from servicebroker.spark import session

            spark = session(
                temp_dir=folder,
                extra={"spark.sql.streaming.numRecentProgressUpdates": "100000"},
            )
            try:
                for batch in batches:
                    for work in works:
                        url = copies.fresh()
                        rows.append(
                            timed_row(
                                memory,
                                "stream",
                                work,
                                batch,
                                lambda u=url, b=batch, w=work: stream_drain(
                                    spark, u, b, w, last, folder
                                ),
                            )
                        )
                        check_drained(url, args.messages, args.per_dialog, work)
                        console.print(_line(rows[-1]))
                url = copies.fresh()
                for batch in batches:
                    with memory.phase() as peak:
                        seen, latencies = batch_reads(spark, url, batch, args.batch_reads)
                    rows.append(
                        Row(
                            "batch source",
                            "peek",
                            batch,
                            seen * len(latencies),
                            len(latencies),
                            sum(latencies) / 1000,
                            latencies,
                            peak[0],
                            False,
                        )
                    )
                    console.print(_line(rows[-1]))
            finally:
                spark.stop()
        finally:
            copies.close()
    memory.close()
    console.print(_table(rows, args))
    console.print(f"peak RSS of the process tree over the run: {memory.overall / 2**20:,.0f} MB")
    console.print(json.dumps([_summary(r) for r in rows]))
    return 0


def _summary(row: Row) -> dict[str, Any]:
    return {
        "consumer": row.consumer,
        "work": row.work,
        "batch": row.batch,
        "messages": row.messages,
        "batches": row.batches,
        "msg_s": round(row.rate),
        "p50_ms": round(percentile(row.latencies_ms, 0.5), 1),
        "p99_ms": round(percentile(row.latencies_ms, 0.99), 1),
        "peak_mb": round(row.peak_mb),
    }


def _line(row: Row) -> str:
    s = _summary(row)
    return " ".join(f"{k}={v}" for k, v in s.items())


def _table(rows: list[Row], args: argparse.Namespace) -> Table:
    backend = "PostgreSQL" if args.url else "SQLite"
    table = Table(
        title=(
            f"Spark streaming vs batch source vs RECEIVE loop, {backend}, {args.messages:,} "
            f"messages of 100 B, {args.per_dialog} per dialog (group)"
        )
    )
    for col in (
        "B",
        "consumer",
        "work",
        "consumes",
        "messages",
        "batches",
        "seconds",
        "msg/s",
        "batch p50 ms",
        "batch p99 ms",
        "peak RSS tree MB",
    ):
        table.add_column(col, justify="right")
    order = {"RECEIVE loop": 0, "stream": 1, "batch source": 2}
    for row in sorted(rows, key=lambda r: (r.batch, r.work != "noop", order[r.consumer])):
        s = _summary(row)
        table.add_row(
            f"{row.batch:,}",
            row.consumer,
            row.work,
            "yes" if row.consumes else "no (peek)",
            f"{row.messages:,}",
            f"{row.batches:,}",
            f"{row.seconds:,.1f}",
            f"{s['msg_s']:,}",
            f"{s['p50_ms']:,}",
            f"{s['p99_ms']:,}",
            f"{s['peak_mb']:,}",
        )
    return table


if __name__ == "__main__":
    sys.exit(main())
