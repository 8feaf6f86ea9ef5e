"""The ``servicebroker`` PySpark data source (PySpark's Python Data Source API).

Read (batch)::

    spark.read.format("servicebroker").option("url", url).option("queue", "q").load()

peeks a queue (nothing consumed or locked) as a DataFrame with the QUE-2 columns.

Write::

    df.write.format("servicebroker").option("url", url).option("from_service", "//a")
      .option("to_service", "//b").option("contract", "C").mode("append").save()

takes columns ``message_type_name``, ``message_body`` (binary or string), ``conversation_key``
and optionally ``group_key``, ``from_service``, ``to_service``, ``contract`` (per-row overrides
of the options; a conversation takes the values of its first row, as BEGIN DIALOG does). Rows with the same ``conversation_key`` go, in the order they come, on one dialog, so a
key's rows must be in one partition (``repartition`` by the key, then ``sortWithinPartitions``);
rows with the same ``group_key`` and FROM service share a conversation group
(RELATED_CONVERSATION_GROUP, DLG-1; the group id is derived from both, so it is the same group in
every partition and every job).
Partition by ``group_key`` too: one partition's sends are one transaction holding its groups'
locks until it commits. Each partition commits once, and records (write id, partition) in the
same transaction, so a retried task does not send again.

Options are parsed into typed settings on the driver, where a bad one fails with
:class:`SparkOptionError` naming it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from ..errors import BrokerError, IntegrityConflict

__all__ = [
    "QUEUE_SCHEMA",
    "ServiceBrokerDataSource",
    "SparkOptionError",
    "parse_read_options",
    "parse_write_options",
]

QUEUE_SCHEMA = (
    "status int, priority int, queuing_order long, conversation_group_id string, "
    "conversation_handle string, message_sequence_number long, service_name string, "
    "service_id int, service_contract_name string, service_contract_id int, "
    "message_type_name string, message_type_id int, validation string, message_body binary, "
    "message_enqueue_time timestamp, message_id string, queue_name string"
)
"""The DataFrame schema of a queue: the QUE-2 columns plus ``queue_name``."""

GROUP_NAMESPACE = uuid.UUID("5b6e0c1e-8a4f-4d1e-9d2a-6f1c3b7a9e10")
_WRITES_TABLE = (
    "CREATE TABLE IF NOT EXISTS servicebroker_spark_writes "
    "(write_id TEXT NOT NULL, partition_id INTEGER NOT NULL, PRIMARY KEY (write_id, partition_id))"
)
_PAGE = 10_000


class SparkOptionError(BrokerError):
    """A ``servicebroker`` data source option is missing or bad."""


@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options: the storage URL, the queue, an optional row limit."""

    url: str
    queue: str
    top: int | None


@dataclass(frozen=True)
class WriteOptions:
    """Parsed write options (service names and contract may be overridden per row)."""

    url: str
    from_service: str | None
    to_service: str | None
    contract: str
    write_id: str


def _required(options: Mapping[str, str], name: str, what: str) -> str:
    value = options.get(name)
    if value is None or not str(value).strip():
        raise SparkOptionError(f"servicebroker data source: option {name!r} ({what}) is required")
    return str(value)


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Typed read options. Raises :class:`SparkOptionError` for a missing url/queue or a bad top."""
    top_text = options.get("top")
    top = None
    if top_text is not None:
        try:
            top = int(top_text)
        except ValueError:
            top = -1
        if top < 0:
            raise SparkOptionError(
                f"servicebroker data source: option 'top' must be an integer >= 0, got {top_text!r}"
            )
    return ReadOptions(
        _required(options, "url", "the broker URL"),
        _required(options, "queue", "the queue to read"),
        top,
    )


def parse_write_options(options: Mapping[str, str], columns: list[str]) -> WriteOptions:
    """Typed write options, checked against the DataFrame's ``columns``.

    Raises:
        SparkOptionError: a missing url, a missing column, or a service given neither as an
            option nor as a column.
    """
    url = _required(options, "url", "the broker URL")
    missing = [
        c for c in ("message_type_name", "message_body", "conversation_key") if c not in columns
    ]
    if missing:
        raise SparkOptionError(
            f"servicebroker data source: the DataFrame lacks column(s) {', '.join(missing)}"
        )
    from_service = options.get("from_service")
    to_service = options.get("to_service")
    if from_service is None and "from_service" not in columns:
        raise SparkOptionError(
            "servicebroker data source: give option 'from_service' or a from_service column"
        )
    if to_service is None and "to_service" not in columns:
        raise SparkOptionError(
            "servicebroker data source: give option 'to_service' or a to_service column"
        )
    return WriteOptions(
        url, from_service, to_service, options.get("contract", "DEFAULT"), uuid.uuid4().hex
    )


def group_id_for(from_service: str, key: str) -> uuid.UUID:
    """The conversation group id of a ``group_key`` sent from ``from_service``: the same in
    every job and partition. A group belongs to one queue (DLG-1), so the FROM service is part
    of it: one plane flying from three airports has a group at each."""
    return uuid.uuid5(GROUP_NAMESPACE, f"{from_service}\x00{key}")


class ServiceBrokerDataSource(DataSource):
    """The ``servicebroker`` format: read peeks a queue, write sends messages on dialogs."""

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

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        """A writer sending rows on dialogs; options and catalog names checked here, on the driver."""
        if overwrite:
            raise SparkOptionError(
                "servicebroker data source: mode 'overwrite' is not supported; use 'append'"
            )
        opts = parse_write_options(self.options, list(schema.fieldNames()))
        from ..broker import Broker

        with Broker.open(opts.url) as broker:
            broker.execute(_WRITES_TABLE)
            cat = broker.catalog
            cat.contract(opts.contract)
            if opts.from_service is not None:
                cat.service(opts.from_service)
        return _DialogWriter(opts, list(schema.fieldNames()))


class _QueueReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        from ..broker import Broker

        with Broker.open(opts.url) as broker:
            broker.catalog.queue(opts.queue)

    def partitions(self) -> list[InputPartition]:
        """One partition: a queue is read in queuing order by one task."""
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Page through the queue (10,000 rows a page), nothing consumed."""
        from ..broker import Broker

        remaining = self.opts.top
        with Broker.open(self.opts.url) as broker:
            after = 0
            while remaining is None or remaining > 0:
                page = _PAGE if remaining is None else min(_PAGE, remaining)
                messages = broker.peek_after(self.opts.queue, after, top=page)
                if not messages:
                    return
                for m in messages:
                    yield (
                        m.status,
                        m.priority,
                        m.queuing_order,
                        str(m.conversation_group_id),
                        str(m.conversation_handle),
                        m.message_sequence_number,
                        m.service_name,
                        m.service_id,
                        m.service_contract_name,
                        m.service_contract_id,
                        m.message_type_name,
                        m.message_type_id,
                        m.validation,
                        bytearray(m.message_body),
                        m.message_enqueue_time,
                        str(m.message_id),
                        m.queue_name,
                    )
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
    def __init__(self, opts: WriteOptions, columns: list[str]) -> None:
        self.opts = opts
        self.columns = columns
        self.reports: list[SendReport] = []

    def write(self, iterator: Iterator[Any]) -> SendReport:
        """Send one partition's rows in one transaction; skip a partition already written."""
        from pyspark import TaskContext

        from ..broker import Broker
        from ..storage.queries import portable_sql

        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx is not None else 0
        opts = self.opts
        has_group = "group_key" in self.columns
        has_from = "from_service" in self.columns
        has_to = "to_service" in self.columns
        has_contract = "contract" in self.columns
        dialogs: dict[Any, uuid.UUID] = {}
        sent = 0
        with Broker.open(opts.url) as broker:
            tx = broker.transaction()
            try:
                for row in iterator:
                    key = row["conversation_key"]
                    if key is None:
                        raise SparkOptionError(
                            "servicebroker data source: conversation_key must not be null"
                        )
                    handle = dialogs.get(key)
                    if handle is None:
                        group_key = row["group_key"] if has_group else None
                        from_service = (
                            row["from_service"] if has_from else None
                        ) or opts.from_service
                        handle = tx.begin_dialog(
                            from_service,  # type: ignore[arg-type]
                            (row["to_service"] if has_to else None) or opts.to_service,  # type: ignore[arg-type]
                            contract=(row["contract"] if has_contract else None) or opts.contract,
                            related_conversation_group=None
                            if group_key is None
                            else group_id_for(str(from_service), str(group_key)),
                        )
                        dialogs[key] = handle
                    body = row["message_body"]
                    tx.send(
                        handle,
                        row["message_type_name"],
                        b"" if body is None else bytes(body) if not isinstance(body, str) else body,
                    )
                    sent += 1
                tx.execute(
                    portable_sql(
                        "INSERT INTO servicebroker_spark_writes (write_id, partition_id) "
                        "VALUES (?, ?)",
                        broker.paramstyle,
                    ),
                    (opts.write_id, partition_id),
                )
            except IntegrityConflict:
                tx.rollback()
                return SendReport(
                    partition_id, 0, 0
                )  # this partition was written by an earlier attempt
            except BaseException:
                tx.rollback()
                raise
            tx.commit()
        return SendReport(partition_id, len(dialogs), sent)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Keep the partitions' reports (driver side)."""
        self.reports = [m for m in messages if isinstance(m, SendReport)]

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: a failed partition's transaction rolled back."""
        self.reports = []
