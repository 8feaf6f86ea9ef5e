"""The ``servicebroker`` streaming sink: a micro-batch's rows become SENDs, new dialogs,
conversation timers and END CONVERSATIONs, committed in one broker transaction per micro-batch,
exactly once (issue 14).

::

    replies.writeStream.format("servicebroker").option("url", url)
        .option("checkpointLocation", path).start()

The columns are those of :mod:`.dialog_rows`: a row with a ``conversation_handle`` acts on that
conversation (a reply; no ``conversation_key`` and no service options needed), with
``end_conversation`` it ends it after its message (or alone).

Tasks only collect their rows (each task's rows travel to the driver in its commit message);
Spark's driver-side ``commit(messages, batchId)`` applies them all in one transaction that
also records (query id, batch id) in the broker's ``stream_commits`` table. A batch Spark
commits again — it crashed after the sink's commit and before its own commit log — finds its
record and does nothing. A task that failed left nothing behind. The query id is Spark's (the
same across restarts from one checkpoint), or the ``queryName`` option outside a query.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage

from .dialog_rows import DialogRows, WriteOptions, record_once, row_tuple
from .options import SparkOptionError, open_broker

__all__ = ["BatchRows", "DialogStreamWriter"]

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property Spark sets on a streaming query's tasks: the query's id."""


@dataclass
class BatchRows(WriterCommitMessage):
    """One task's rows (tuples of :data:`.dialog_rows.FIELDS`), and the query it ran for."""

    partition_id: int
    query_id: str | None
    rows: list[tuple[Any, ...]] = field(default_factory=list)


class DialogStreamWriter(DataSourceStreamWriter):
    """The streaming sink (see the module docstring).

    Args:
        opts: the parsed write options.

    Attributes:
        last: (batch id, dialogs begun, messages sent, conversations ended, committed now) of
            the last commit on this writer.
    """

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.last: tuple[int, int, int, int, bool] | None = None

    def write(self, iterator: Iterator[Any]) -> BatchRows:
        """Collect the task's rows, in order (in a task)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx is not None else 0
        query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
        columns = self.opts.columns
        return BatchRows(partition_id, query_id, [row_tuple(r, columns) for r in iterator])

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Apply every task's rows, by partition, in one transaction recording
        (query, ``batchId``); nothing when that was recorded already.

        Raises:
            SparkOptionError: no query id (set ``queryName``) for a batch with rows, or a bad row.
            BrokerError: a statement failed (nothing of the batch is committed; Spark fails the
                query and runs the batch again when it restarts).
        """
        parts = sorted(
            (m for m in messages if isinstance(m, BatchRows)), key=lambda m: m.partition_id
        )
        query_id = next((m.query_id for m in parts if m.query_id), None) or self.opts.query
        if query_id is None:
            if any(m.rows for m in parts):
                raise SparkOptionError(
                    "servicebroker data source: the streaming sink cannot tell which query this "
                    "is: set option 'queryName'"
                )
            return
        with open_broker(self.opts.url, self.opts.clock) as broker:
            tx = broker.transaction()
            try:
                if not record_once(tx, broker.paramstyle, query_id, batchId, broker.clock.now()):
                    self.last = (batchId, 0, 0, 0, False)
                    return
                rows = DialogRows(tx, self.opts)
                for m in parts:
                    for row in m.rows:
                        rows.apply(row)
            except BaseException:
                tx.rollback()
                raise
            tx.commit()
        self.last = (batchId, len(rows.dialogs), rows.sent, rows.ended, True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: the tasks wrote nothing."""
