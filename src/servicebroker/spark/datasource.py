"""The ``servicebroker`` PySpark data source (PySpark's Python Data Source API).

Read (batch)::

    spark.read.format("servicebroker").option("url", url).option("queue", "q").load()

peeks a queue (nothing consumed or locked) as a DataFrame with the QUE-2 columns.

Write::

    df.write.format("servicebroker").option("url", url).option("from_service", "//a")
      .option("to_service", "//b").option("contract", "C").mode("append").save()

takes the columns of :mod:`.dialog_rows` (``conversation_key``, ``group_key``,
``message_type_name``, ``message_body``, ``from_service``, ``to_service``, ``contract``,
``conversation_handle``, ``conversation_timer``, ``end_conversation``). Rows with the same
``conversation_key`` go, in the order they come, on one dialog, so a key's rows must be in one
partition (``repartition`` by the key, then ``sortWithinPartitions``). Partition by
``group_key`` too: one partition's sends are one transaction holding its groups' locks until it
commits. Each partition commits once, and records (write id, partition) in the same
transaction, so a retried task does not send again.

Streams: ``spark.readStream.format("servicebroker")`` (:mod:`.stream_reader`) and
``df.writeStream.format("servicebroker")`` (:mod:`.stream_writer`).

Options are parsed into typed settings on the driver, where a bad one fails with
:class:`SparkOptionError` naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from .dialog_rows import DialogRows, WriteOptions, parse_write_options, record_once, row_tuple
from .options import (
    QUEUE_SCHEMA,
    SparkOptionError,
    message_tuple,
    number_option,
    open_broker,
    required,
)
from .stream_reader import QueueStreamReader, parse_stream_options
from .stream_writer import DialogStreamWriter

__all__ = [
    "ServiceBrokerDataSource",
    "parse_read_options",
]

_PAGE = 10_000


@dataclass(frozen=True)
class ReadOptions:
    """Parsed batch read options: the storage URL, the queue, an optional row limit."""

    url: str
    queue: str
    top: int | None


def parse_read_options(options: dict[str, str] | Any) -> ReadOptions:
    """Typed batch read options. Raises :class:`SparkOptionError` for a missing url/queue or a
    bad top."""
    top = number_option(options, "top", int, lambda v: v >= 0, "an integer >= 0")
    return ReadOptions(
        required(options, "url", "the broker URL"),
        required(options, "queue", "the queue to read"),
        top,
    )


def _check_catalog(opts: WriteOptions) -> None:
    """The contract and FROM service the options name exist (on the driver)."""
    with open_broker(opts.url, None) as broker:
        cat = broker.catalog
        if "conversation_key" in opts.columns:
            cat.contract(opts.contract)
            if opts.from_service is not None:
                cat.service(opts.from_service)


class ServiceBrokerDataSource(DataSource):
    """The ``servicebroker`` format: read peeks a queue, write sends messages on dialogs;
    readStream takes a queue's messages exactly once, writeStream answers and ends dialogs."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``servicebroker``."""
        return "servicebroker"

    def schema(self) -> str:
        """The queue schema (QUE-2 columns plus ``queue_name``)."""
        return QUEUE_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        """A batch reader that peeks the ``queue`` option's queue; options checked here."""
        return _QueueReader(parse_read_options(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """The streaming source (:mod:`.stream_reader`); options and queues checked here."""
        return QueueStreamReader(parse_stream_options(self.options))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        """A writer sending rows on dialogs; options and catalog names checked here, on the driver."""
        if overwrite:
            raise SparkOptionError(
                "servicebroker data source: mode 'overwrite' is not supported; use 'append'"
            )
        opts = parse_write_options(self.options, list(schema.fieldNames()))
        _check_catalog(opts)
        return _DialogWriter(opts)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming sink (:mod:`.stream_writer`); options checked here."""
        if overwrite:
            raise SparkOptionError(
                "servicebroker data source: output mode 'complete' is not supported; use 'append'"
            )
        opts = parse_write_options(self.options, list(schema.fieldNames()))
        _check_catalog(opts)
        return DialogStreamWriter(opts)


class _QueueReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        with open_broker(opts.url, None) as broker:
            broker.catalog.queue(opts.queue)

    def partitions(self) -> list[InputPartition]:
        """One partition: a queue is read in queuing order by one task."""
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Page through the queue (10,000 rows a page), nothing consumed."""
        remaining = self.opts.top
        with open_broker(self.opts.url, None) as broker:
            after = 0
            while remaining is None or remaining > 0:
                page = _PAGE if remaining is None else min(_PAGE, remaining)
                messages = broker.peek_after(self.opts.queue, after, top=page)
                if not messages:
                    return
                yield from map(message_tuple, messages)
                after = messages[-1].queuing_order
                if remaining is not None:
                    remaining -= len(messages)


@dataclass
class SendReport(WriterCommitMessage):
    """What one partition sent: dialogs begun and messages sent (0 when already written)."""

    partition_id: int
    dialogs: int
    messages: int


class _DialogWriter(DataSourceWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.reports: list[SendReport] = []

    def write(self, iterator: Iterator[Any]) -> SendReport:
        """Apply one partition's rows in one transaction; skip a partition already written."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx is not None else 0
        opts = self.opts
        with open_broker(opts.url, opts.clock) as broker:
            tx = broker.transaction()
            try:
                rows = DialogRows(tx, opts)
                for row in iterator:
                    rows.apply(row_tuple(row, opts.columns))
                if not record_once(
                    tx,
                    broker.paramstyle,
                    f"write:{opts.write_id}",
                    partition_id,
                    broker.clock.now(),
                ):
                    return SendReport(partition_id, 0, 0)  # written by an earlier attempt
            except BaseException:
                tx.rollback()
                raise
            tx.commit()
        return SendReport(partition_id, len(rows.dialogs), rows.sent)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Keep the partitions' reports (driver side)."""
        self.reports = [m for m in messages if isinstance(m, SendReport)]

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: a failed partition's transaction rolled back."""
        self.reports = []
