"""The ``servicebroker`` streaming source: a queue (or several) as a Structured Streaming input,
exactly once and in conversation order, with conversation-group claims (issue 14).

::

    spark.readStream.format("servicebroker").option("url", url).option("queue", "q").load()

Each micro-batch is a *batch* of the broker's :class:`~servicebroker.engine.claims.StreamClaims`: when
Spark asks for the latest offset, the reader acknowledges what Spark finished and plans the next
batch — it claims whole conversation groups that no transaction holds, copies their messages
and splits them into parts, each group whole in one part. An offset is
``{"reader": name, "batch": n}``: the batch's contents live in the broker, so Spark reading
batch n again (a task retried, the driver restarted) reads exactly the same messages.

Acknowledging (the messages leave the queue, or take status 0 under RETENTION) happens when
Spark says a batch is done: in ``commit(end)`` and — as Spark calls ``commit`` a batch late,
and never for the last batch of an ``availableNow`` run — in ``latestOffset(start)`` for
everything up to ``start``, which Spark has committed by then. An ``availableNow`` run asks for
the latest offset once more after its last batch (to learn it is done), which acknowledges that
batch; a run stopped before (a crash) leaves its last batch claimed until the query runs again
from the same checkpoint, or its claim times out.

Options (strings; checked on the driver, a bad one fails with
:class:`~servicebroker.spark.SparkOptionError` naming it): ``url``, ``queue`` (one name, or
several separated by commas), ``maxMessagesPerBatch`` (default: all ready), ``partitions`` (tasks
per batch; default: this machine's cores, Spark's default parallelism in local mode), ``reader``
(the claim's stable name; default: a new name made when the query starts for the first time and
kept in its checkpoint's offsets), ``claimTimeout`` (seconds a reader may show no life before
its unacknowledged batch is released; default 1800), ``clock`` (the broker time, epoch
seconds, for brokers on a simulated clock; default the system clock).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..engine.claims import CLAIM_TIMEOUT
from .options import (
    SparkOptionError,
    clock_at,
    message_tuple,
    open_broker,
    positive_int,
    positive_seconds,
    required,
)

__all__ = ["StreamReadOptions", "parse_stream_options"]


@dataclass(frozen=True)
class StreamReadOptions:
    """Parsed streaming read options (see the module docstring)."""

    url: str
    queues: tuple[str, ...]
    max_messages: int | None
    partitions: int
    reader: str | None
    claim_timeout: float
    clock: float | None = None


def parse_stream_options(options: Mapping[str, str]) -> StreamReadOptions:
    """Typed streaming read options (Spark lower-cases the keys).

    Raises:
        SparkOptionError: a missing ``url`` or ``queue``, or a bad number or name; the message
            names the option.
    """
    url = required(options, "url", "the broker URL")
    queues = tuple(q.strip() for q in required(options, "queue", "the queue to read").split(","))
    if not all(queues):
        raise SparkOptionError(
            f"servicebroker data source: option 'queue' has an empty queue name: {options['queue']!r}"
        )
    max_messages = positive_int(options, "maxMessagesPerBatch")
    partitions = positive_int(options, "partitions") or (os.cpu_count() or 1)
    reader = options.get("reader")
    if reader is not None and (not reader.strip() or len(reader) > 256):
        raise SparkOptionError(
            f"servicebroker data source: option 'reader' must be a name of 1 to 256 characters, got {reader!r}"
        )
    timeout = positive_seconds(options, "claimTimeout") or CLAIM_TIMEOUT
    return StreamReadOptions(
        url, queues, max_messages, partitions, reader, timeout, clock_at(options)
    )


@dataclass(frozen=True)
class _BatchPart(InputPartition):
    """One task's share of a reader's batches after ``low`` up to ``high``."""

    url: str
    reader: str
    low: int
    high: int
    part: int
    clock: float | None


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader (driver side: offsets and commits; ``read`` runs in the tasks).

    Args:
        opts: the parsed options.
    """

    def __init__(self, opts: StreamReadOptions) -> None:
        self.opts = opts
        self._up_to_order: int | None = None
        with self._broker() as broker:
            for name in opts.queues:
                broker.catalog.queue(name)  # an unknown queue fails here, on the driver

    def _broker(self) -> Any:
        return open_broker(self.opts.url, self.opts.clock)

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: after the last batch the named reader acknowledged, or
        at 0 with a new reader name (kept in the checkpoint from then on)."""
        reader = self.opts.reader
        if reader is None:
            return {"reader": f"spark-{uuid.uuid4()}", "batch": 0}
        with self._broker() as broker:
            return {"reader": reader, "batch": broker.claims.start_offset(reader)}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxMessagesPerBatch`` as Spark's ReadMaxRows, else everything ready."""
        if self.opts.max_messages is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_messages)

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow``: read only messages already queued now."""
        with self._broker() as broker:
            self._up_to_order = broker.claims.watermark(self.opts.queues)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Acknowledge everything up to ``start`` (Spark committed it), then the next batch:
        the one planned already, a new one (claims, RCV-2; at most ``limit`` messages), or
        ``start`` when nothing is ready.

        Raises:
            StreamClaimError: the reader's batch was released by its time-out, or ``start`` is
                older than what it acknowledged.
        """
        reader = str(start["reader"])
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        with self._broker() as broker:
            batch = broker.claims.plan(
                reader,
                self.opts.queues,
                int(start["batch"]),
                max_messages=max_rows,
                partitions=self.opts.partitions,
                claim_timeout=self.opts.claim_timeout,
                up_to_order=self._up_to_order,
            )
        return {"reader": reader, "batch": batch}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition per part holding messages in batches after ``start`` up to ``end``.

        Raises:
            StreamClaimError: those batches were released by the reader's time-out.
        """
        reader, low, high = str(end["reader"]), int(start["batch"]), int(end["batch"])
        if high <= low:
            return []
        with self._broker() as broker:
            parts = broker.claims.parts(reader, low, high)
        return [
            _BatchPart(self.opts.url, reader, low, high, part, self.opts.clock) for part, _ in parts
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """The part's messages, in order: each group whole, in RECEIVE order (SYS-2), in a
        task; the reader's claim time-out starts again.

        Raises:
            StreamClaimError: the batch was released by the reader's time-out.
        """
        assert isinstance(partition, _BatchPart)
        with open_broker(partition.url, partition.clock) as broker:
            broker.claims.renew(partition.reader)
            messages = broker.claims.messages(
                partition.reader, partition.low, partition.high, partition.part
            )
        return map(message_tuple, messages)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark finished every batch up to ``end``: acknowledge them (RCV-3).

        Raises:
            StreamClaimError: the reader's batch was released by its time-out.
        """
        with self._broker() as broker:
            broker.claims.acknowledge(str(end["reader"]), int(end["batch"]))
