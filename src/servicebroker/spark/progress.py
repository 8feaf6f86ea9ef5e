"""Spark's streaming progress as the project's progress: a listener that turns each
micro-batch's progress report into a :class:`BatchProgress` for a callback — a progress bar's
update on a terminal, a log line elsewhere (the default)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

__all__ = ["BatchProgress", "QueryProgress", "follow", "log_batch"]

log = logging.getLogger("servicebroker.spark")


@dataclass(frozen=True)
class BatchProgress:
    """One micro-batch of a streaming query.

    Attributes:
        query: the query's name (``queryName``), or its id.
        batch_id: Spark's batch id.
        rows: input rows (messages, for the servicebroker source).
        seconds: the batch's trigger execution time.
        rows_per_second: Spark's processing rate.
    """

    query: str
    batch_id: int
    rows: int
    seconds: float
    rows_per_second: float


def log_batch(p: BatchProgress) -> None:
    """Log one line per micro-batch with input (INFO, logger ``servicebroker.spark``)."""
    if p.rows:
        log.info(
            "query %s: micro-batch %d: %d rows in %.2f s (%.0f rows/s)",
            p.query,
            p.batch_id,
            p.rows,
            p.seconds,
            p.rows_per_second,
        )


class QueryProgress(StreamingQueryListener):
    """A listener calling ``report`` with each micro-batch's :class:`BatchProgress` (on the
    driver, in Spark's listener thread).

    Args:
        report: what to do with it (default: :func:`log_batch`).
    """

    def __init__(self, report: Callable[[BatchProgress], None] = log_batch) -> None:
        self.report = report

    def onQueryStarted(self, event: Any) -> None:
        """Nothing: progress comes with the batches."""

    def onQueryProgress(self, event: Any) -> None:
        """Report the batch."""
        p = event.progress
        self.report(
            BatchProgress(
                p.name or str(p.id),
                int(p.batchId),
                int(p.numInputRows),
                p.durationMs.get("triggerExecution", 0) / 1000,
                float(p.processedRowsPerSecond or 0.0),
            )
        )

    def onQueryIdle(self, event: Any) -> None:
        """Nothing."""

    def onQueryTerminated(self, event: Any) -> None:
        """Nothing."""


def follow(spark: Any, report: Callable[[BatchProgress], None] = log_batch) -> QueryProgress:
    """Add a :class:`QueryProgress` to ``spark`` (every query's batches go to ``report``);
    remove it with ``spark.streams.removeListener``."""
    listener = QueryProgress(report)
    spark.streams.addListener(listener)
    return listener
