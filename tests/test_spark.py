"""The `servicebroker` PySpark data source: read peeks a queue, write sends on dialogs."""

from __future__ import annotations

import pytest

from servicebroker import Broker

from .conftest import Pair

pytestmark = pytest.mark.spark


def send(broker: Broker, pair: Pair, n: int) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        for i in range(n):
            tx.send(h, "Req", f"m{i}".encode())


def test_read_peeks_a_queue_with_the_que2_columns(
    spark: object, url: str, broker: Broker, pair: Pair
) -> None:
    # rule QUE-2, rule QUE-1 (a queue can be read without receiving)
    send(broker, pair, 3)
    df = spark.read.format("servicebroker").option("url", url).option("queue", pair.tq).load()  # type: ignore[attr-defined]
    assert df.columns[:3] == ["status", "priority", "queuing_order"]
    rows = df.orderBy("queuing_order").collect()
    assert [bytes(r["message_body"]) for r in rows] == [b"m0", b"m1", b"m2"]
    assert {r["message_type_name"] for r in rows} == {"Req"}
    assert {r["service_contract_name"] for r in rows} == {"C"}
    # CREATE QUEUE (docs/t-sql/statements/create-queue-transact-sql.md), queue columns:
    # message_enqueue_time, "Time at which the message entered the queue."
    peeked = {m.message_body: m.message_enqueue_time for m in broker.peek(pair.tq)}
    assert all(r["message_enqueue_time"] is not None for r in rows)
    assert [r["message_enqueue_time"].timestamp() for r in rows] == [
        peeked[bytes(r["message_body"])].timestamp() for r in rows
    ]
    assert len(broker.peek(pair.tq)) == 3  # nothing consumed
    top = (
        spark.read.format("servicebroker")
        .option("url", url)
        .option("queue", pair.tq)
        .option("top", "2")
        .load()
    )  # type: ignore[attr-defined]
    assert top.count() == 2


def test_write_sends_each_key_in_order_on_one_dialog(
    spark: object, url: str, broker: Broker, pair: Pair
) -> None:
    # rule DLG-1 (related conversation group), rule DLG-2 (send order within a dialog)
    rows = [
        (f"k{k}", f"g{k % 2}", i, "Req", f"{k}:{i}".encode()) for k in range(6) for i in range(4)
    ]
    df = spark.createDataFrame(  # type: ignore[attr-defined]
        rows,
        "conversation_key string, group_key string, seq int, message_type_name string, message_body binary",
    )
    (
        df.repartition(2, "group_key")
        .sortWithinPartitions("conversation_key", "seq")
        .write.format("servicebroker")
        .option("url", url)
        .option("from_service", pair.initiator)
        .option("to_service", pair.target)
        .option("contract", "C")
        .mode("append")
        .save()
    )
    initiators = [e for e in broker.views.conversation_endpoints() if e.is_initiator]
    assert len(initiators) == 6
    assert len({e.conversation_group_id for e in initiators}) == 2  # one group per group_key
    by_conversation: dict[object, list[bytes]] = {}
    for m in broker.peek(pair.tq):
        by_conversation.setdefault(m.conversation_handle, []).append(m.message_body)
    assert sorted(by_conversation.values()) == sorted(
        [f"{k}:{i}".encode() for i in range(4)] for k in range(6)
    )


def test_a_contract_column_chooses_each_conversations_contract_and_level(
    spark: object, url: str, broker: Broker, pair: Pair
) -> None:
    # rule PRI-6 (the level follows the contract each row names), rule DLG-1
    broker.create_contract("Urgent", {"Req": "INITIATOR", "Resp": "TARGET"})
    broker.create_service("//test/Both", queue=pair.tq, contracts=["C", "Urgent"])
    broker.create_broker_priority("urgent", contract_name="Urgent", priority_level=9)
    rows = [("a", "C", "Req", b"a"), ("b", "Urgent", "Req", b"b"), ("c", None, "Req", b"c")]
    df = spark.createDataFrame(  # type: ignore[attr-defined]
        rows,
        "conversation_key string, contract string, message_type_name string, message_body binary",
    )
    (
        df.write.format("servicebroker")
        .option("url", url)
        .option("from_service", pair.initiator)
        .option("to_service", "//test/Both")
        .option("contract", "C")
        .mode("append")
        .save()
    )
    got = {m.message_body: (m.service_contract_name, m.priority) for m in broker.peek(pair.tq)}
    assert got == {b"a": ("C", 5), b"b": ("Urgent", 9), b"c": ("C", 5)}


def test_write_options_are_checked_on_the_driver(
    spark: object, url: str, broker: Broker, pair: Pair
) -> None:
    # Spark reports a data source's driver-side error as an AnalysisException whose message
    # carries our error's class and text
    from pyspark.errors import AnalysisException

    df = spark.createDataFrame(
        [("k", "Req", b"x")],
        "conversation_key string, message_type_name string, message_body binary",
    )  # type: ignore[attr-defined]
    writer = (
        df.write.format("servicebroker")
        .option("url", url)
        .option("to_service", pair.target)
        .mode("append")
    )
    with pytest.raises(
        AnalysisException,
        match=r"SparkOptionError: servicebroker data source: give option 'from_service' or a "
        r"from_service column",
    ):
        writer.save()
    bad = df.drop("message_body").write.format("servicebroker").option("url", url)
    with pytest.raises(
        AnalysisException,
        match=r"SparkOptionError: servicebroker data source: the DataFrame lacks column\(s\) "
        r"message_body",
    ):
        bad.option("from_service", pair.initiator).option("to_service", pair.target).mode(
            "append"
        ).save()
    with pytest.raises(AnalysisException, match=r"CatalogError: queue 'nope' does not exist"):
        spark.read.format("servicebroker").option("url", url).option(
            "queue", "nope"
        ).load().collect()  # type: ignore[attr-defined]
    assert broker.peek(pair.tq) == []


def test_a_retried_partition_sends_nothing_twice(url: str, broker: Broker, pair: Pair) -> None:
    # exactly once per (write, partition): a task retried after its commit sends nothing
    pytest.importorskip("pyspark")
    from pyspark.sql import Row

    from servicebroker.spark.datasource import _DialogWriter, parse_write_options

    columns = ["conversation_key", "message_type_name", "message_body"]
    opts = parse_write_options(
        {
            "url": url,
            "from_service": pair.initiator,
            "to_service": pair.target,
            "contract": "C",
        },
        columns,
    )
    writer = _DialogWriter(opts)
    rows = [Row(conversation_key="k", message_type_name="Req", message_body=bytearray(b"once"))]
    first = writer.write(iter(rows))
    again = writer.write(iter(rows))
    assert (first.messages, again.messages) == (1, 0)
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"once"]
