"""The ``servicebroker`` streaming source and sink (issue 14): every message in exactly one
committed micro-batch, in send order per conversation, a group's messages in one task; replies
and END CONVERSATION through the sink, committed once per micro-batch; claims against
activated procedures. Kill tests: tests/test_spark_kill.py; the claim rule without Spark:
tests/test_claims.py."""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from servicebroker import Broker
from servicebroker.dialogs import END_DIALOG
from servicebroker.testing.waiting import poll

from .conftest import Pair
from .test_claims import dialogs

pytestmark = pytest.mark.spark


def stream(spark: Any, url: str, queue: str, **options: str) -> Any:
    reader = spark.readStream.format("servicebroker").option("url", url).option("queue", queue)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_every_message_once_in_conversation_order_a_group_in_one_task(
    spark: Any, url: str, broker: Broker, pair: Pair, tmp_path: Path
) -> None:
    # exactly once, in send order per conversation (DLG-2), a group's messages in one task;
    # messages leave the queue only once Spark committed their batch (RCV-3)
    from pyspark.sql import functions as F

    dialogs(broker, pair, 12, 5)
    seen: list[tuple[int, int, str, str, int, bytes]] = []

    def collect(df: Any, batch_id: int) -> None:
        for r in df.withColumn("task", F.spark_partition_id()).collect():
            seen.append(
                (
                    batch_id,
                    r["task"],
                    r["conversation_group_id"],
                    r["conversation_handle"],
                    r["message_sequence_number"],
                    bytes(r["message_body"]),
                )
            )

    q = (
        stream(spark, url, pair.tq, maxMessagesPerBatch="17", partitions="3")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert sorted(b for *_, b in seen) == sorted(
        f"{k}:{i}".encode() for k in range(12) for i in range(5)
    )
    assert len({b for *_, b in seen}) == 60  # none twice
    batches = defaultdict(int)
    for batch_id, *_ in seen:
        batches[batch_id] += 1
    assert max(batches.values()) <= 17 and len(batches) >= 4  # maxMessagesPerBatch
    tasks = defaultdict(set)
    order = defaultdict(list)
    for batch_id, task, group, handle, seq, _ in seen:
        tasks[(batch_id, group)].add(task)
        order[handle].append((batch_id, seq))
    assert all(len(t) == 1 for t in tasks.values())  # a group's messages: one task
    for handle, got in order.items():  # in order across and within batches
        assert [s for _, s in got] == sorted(s for _, s in got), handle
    assert broker.peek(pair.tq) == []
    assert broker.views.conversation_group_claims() == []


def test_the_sink_replies_and_ends_each_conversation_once(
    spark: Any, url: str, broker: Broker, pair: Pair, tmp_path: Path
) -> None:
    # SEND on the received conversation and END CONVERSATION (DLG-3) through the streaming sink,
    # in one broker transaction per micro-batch
    # (END CONVERSATION, docs/t-sql/statements/end-conversation-transact-sql.md)
    from pyspark.sql import functions as F

    handles = dialogs(broker, pair, 8, 3)
    replies = stream(spark, url, pair.tq, maxMessagesPerBatch="7").select(
        "conversation_handle",
        F.lit("Resp").alias("message_type_name"),
        F.concat(F.lit(b"re:"), F.col("message_body")).alias("message_body"),
        (F.col("message_sequence_number") == 2).alias("end_conversation"),
    )
    q = (
        replies.writeStream.format("servicebroker")
        .option("url", url)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    got: dict[uuid.UUID, list[tuple[str, bytes]]] = defaultdict(list)
    with broker.transaction() as tx:
        while batch := tx.receive(pair.iq):
            for m in batch:
                got[m.conversation_handle].append((m.message_type_name, m.message_body))
                if m.message_type_name == END_DIALOG:
                    tx.end_conversation(m.conversation_handle)
    assert set(got) == set(handles)
    for k, h in enumerate(handles):
        assert got[h] == [("Resp", f"re:{k}:{i}".encode()) for i in range(3)] + [(END_DIALOG, b"")]
    assert broker.views.conversation_endpoints() == []  # both sides ended every dialog
    commits = broker.execute("SELECT count(*), count(DISTINCT batch_id) FROM stream_commits")[0]
    assert commits[0] == commits[1] >= 4


def test_a_sink_batch_committed_again_is_skipped(url: str, broker: Broker, pair: Pair) -> None:
    # Spark commits a batch again after a crash between the sink's commit and its commit log:
    # the sink's commit is idempotent per (query, batch id), inside the broker's transaction
    from servicebroker.spark.dialog_rows import parse_write_options
    from servicebroker.spark.stream_writer import BatchRows, DialogStreamWriter

    (h,) = dialogs(broker, pair, 1, 1)
    target = next(e for e in broker.views.conversation_endpoints() if not e.is_initiator)
    opts = parse_write_options(
        {"url": url}, ["conversation_handle", "message_type_name", "message_body"]
    )
    writer = DialogStreamWriter(opts)
    row = (
        str(target.conversation_handle),
        None,
        None,
        None,
        None,
        None,
        "Resp",
        b"once",
        None,
        None,
    )
    for _ in range(2):
        writer.commit([BatchRows(0, "query-1", [row])], 7)
    assert writer.last == (7, 0, 0, 0, False)
    writer.commit([BatchRows(0, "query-1", [row])], 8)  # the next batch is a new one
    with broker.transaction() as tx:
        assert [m.message_body for m in tx.receive(pair.iq)] == [b"once", b"once"]
    assert h


def test_a_streaming_sink_begins_dialogs_by_key(
    spark: Any, url: str, broker: Broker, pair: Pair, tmp_path: Path
) -> None:
    # the batch writer's columns work on a stream: conversation_key / group_key begin dialogs
    # (DLG-1: RELATED_CONVERSATION_GROUP), one per key
    from pyspark.sql import functions as F

    src = Path(tmp_path / "in")
    src.mkdir()
    spark.createDataFrame(  # type: ignore[attr-defined]
        [(f"k{k}", f"g{k % 2}", f"{k}:{i}") for k in range(4) for i in range(2)],
        "conversation_key string, group_key string, body string",
    ).coalesce(1).write.json(str(src / "a"))
    rows = (
        spark.readStream.schema("conversation_key string, group_key string, body string")
        .json(str(src / "a"))
        .select(
            "conversation_key",
            "group_key",
            F.lit("Req").alias("message_type_name"),
            F.col("body").alias("message_body"),
        )
    )
    q = (
        rows.writeStream.format("servicebroker")
        .option("url", url)
        .option("from_service", pair.initiator)
        .option("to_service", pair.target)
        .option("contract", "C")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    initiators = [e for e in broker.views.conversation_endpoints() if e.is_initiator]
    assert len(initiators) == 4 and len({e.conversation_group_id for e in initiators}) == 2
    assert sorted(m.message_body for m in broker.peek(pair.tq)) == sorted(
        f"{k}:{i}".encode() for k in range(4) for i in range(2)
    )


def test_a_running_query_takes_new_messages_and_leaves_claimed_groups_to_nobody_else(
    spark: Any, url: str, broker: Broker, pair: Pair, tmp_path: Path
) -> None:
    # processing-time trigger: messages sent while the query runs arrive in later batches;
    # a RECEIVE beside it never gets a group the query claimed (RCV-2)
    seen: list[bytes] = []
    received: list[bytes] = []
    lock = threading.Lock()

    def collect(df: Any, batch_id: int) -> None:
        rows = [bytes(r["message_body"]) for r in df.collect()]
        claimed = {c.conversation_group_id for c in broker.views.conversation_group_claims()}
        groups = {uuid.UUID(r["conversation_group_id"]) for r in df.collect()}
        assert groups <= claimed  # the batch's groups are claimed while Spark works on it
        with lock:
            seen.extend(rows)

    q = (
        stream(spark, url, pair.tq, maxMessagesPerBatch="5")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        for round_ in range(3):
            dialogs(broker, pair, 4, 2, prefix=f"r{round_}-")
            with broker.transaction() as tx:
                for m in tx.receive(pair.tq):
                    received.append(m.message_body)
        poll(lambda: len(seen) + len(received) >= 24 or not q.isActive, 90, every=0.5)
        assert q.exception() is None
    finally:
        q.stop()
    assert sorted(seen + received) == sorted(
        f"r{r}-{k}:{i}".encode() for r in range(3) for k in range(4) for i in range(2)
    )  # each message once: to the query or to the RECEIVE, never both


def test_options_are_checked_on_the_driver(
    spark: Any, url: str, broker: Broker, pair: Pair
) -> None:
    from pyspark.errors import AnalysisException, StreamingQueryException

    errors = (AnalysisException, StreamingQueryException, Exception)
    for option, value, text in [
        ("maxMessagesPerBatch", "0", "option 'maxMessagesPerBatch' must be an integer >= 1"),
        ("partitions", "many", "option 'partitions' must be an integer >= 1"),
        ("claimTimeout", "-5", "option 'claimTimeout' must be a number of seconds > 0"),
    ]:
        with pytest.raises(errors, match=text):
            q = (
                stream(spark, url, pair.tq, **{option: value})
                .writeStream.format("console")
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination()
    with pytest.raises(errors, match="CatalogError: queue 'nope' does not exist"):
        q = (
            stream(spark, url, "nope")
            .writeStream.format("console")
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()


def test_the_readme_streaming_example_runs(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the README's streaming example, as written, against a shop whose client sent orders
    import re

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "readStream" in b)
    # Spark's workers resolve a relative path from where Spark started (docs/spark.md): the
    # test's Spark started elsewhere, so the example's database is given its absolute path
    url = f"sqlite:///{tmp_path}/orders.db"
    block = block.replace("sqlite:///orders.db", url)
    monkeypatch.chdir(tmp_path)
    with Broker.open(url) as broker:
        broker.execute_ddl(
            "CREATE MESSAGE TYPE [//shop/Order] VALIDATION = NONE;"
            "CREATE MESSAGE TYPE [//shop/Receipt] VALIDATION = NONE;"
            "CREATE CONTRACT [//shop/Ordering] ([//shop/Order] SENT BY INITIATOR,"
            " [//shop/Receipt] SENT BY TARGET);"
            "CREATE QUEUE client_q; CREATE QUEUE shop_q;"
            "CREATE SERVICE [//shop/Client] ON QUEUE client_q;"
            "CREATE SERVICE [//shop/Shop] ON QUEUE shop_q ([//shop/Ordering]);"
        )
        with broker.transaction() as tx:
            for n in range(3):
                h = tx.begin_dialog("//shop/Client", "//shop/Shop", contract="//shop/Ordering")
                tx.send(h, "//shop/Order", f"order {n}".encode())
        exec(block, {"spark": spark})
        got = []
        with broker.transaction() as tx:
            while batch := tx.receive("client_q"):
                got += batch
        receipts = sorted(m.message_body for m in got if m.message_type_name == "//shop/Receipt")
        assert receipts == [b"order 0", b"order 1", b"order 2"]
        assert {m.message_type_name for m in got} == {"//shop/Receipt", END_DIALOG}
