"""The carriers' side of the demo on Spark Structured Streaming (``--engine spark``).

Where the Python engine's activated procedures RECEIVE each carrier queue, two streaming
queries do the carriers' work, each run with ``Trigger.AvailableNow`` whenever the demo has let
messages arrive (after Spark wrote a month, and after the clock moved to the month's end so the
conversation timers fired) — where the external activator would launch the job — on the same
checkpoints every time:

1. ``carriers``: ``readStream.format("servicebroker")`` of every carrier queue (one reader,
   conversation-group claims, a group's messages in one task in RECEIVE order) →
   ``mapInPandas`` settles each flight's conversation in its task (arrived, cancelled, or —
   on its DialogTimer — arrival missing, its details joined from the flights left pending
   earlier) → Parquet (Spark's file sink: exactly once) as *outcomes*: a result, a pending
   flight (a conversation timer to set) or an END to answer.
2. ``replies``: the outcomes Parquet as a stream → ``writeStream.format("servicebroker")``:
   FlightProcessed and END CONVERSATION for each result, BEGIN CONVERSATION TIMER at scheduled
   arrival + 2 h for each pending flight, in one broker transaction per micro-batch (exactly
   once per (query, batch)).

Why two queries and not one: one query has one sink, and the results must reach Parquet and
the broker exactly once each; Spark's file sink and the servicebroker sink each keep their own
commit protocol. Why ``AvailableNow`` runs and not one long query: the demo's clock follows the
data, so work comes in waves (a month, then its timers); a run drains a wave and stops, as an
externally activated job does.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from ..dialogs import DIALOG_TIMER, END_DIALOG, ERROR
from .flights import RESULT_COLUMNS
from .procedures import ARRIVED, CANCELLED, DEPARTED, FLIGHT_PROCESSED, SCHEDULED

if TYPE_CHECKING:
    from ..spark.progress import BatchProgress

__all__ = ["CARRIER_READER", "SparkCarriers", "settle_conversations"]

CARRIER_READER = "demo-carriers"
"""The carriers' stream reader: its claims show under this name."""
MAX_MESSAGES_PER_BATCH = 20_000
"""Messages per micro-batch: a month's backlog (about 95,000 messages) in five or so batches,
taken in priority order (PRI-12) as the activated procedures would."""

OUTCOMES_SCHEMA = (
    "conversation_handle string, kind string, flight_id long, carrier string, origin string, "
    "status string, dep_delay double, arr_delay double, priority int, first_order long, "
    "timer_seconds double, processed_at double, received_at timestamp"
)
_OUTCOME_COLUMNS = [c.split()[0] for c in OUTCOMES_SCHEMA.split(", ")][:-1]
_SETTLED_SCHEMA = OUTCOMES_SCHEMA.rsplit(", ", 1)[0]


def settle_conversations(batches: Iterator[Any], now: float) -> Iterator[Any]:
    """One task's messages (pandas frames of the queue schema, each group whole and in RECEIVE
    order) → one outcome per conversation, as the Python engine's carrier procedure decides:
    ``result`` (arrived or cancelled; ``timer`` for a DialogTimer, settled by the join with
    the pending flights), ``pending`` (departed, no arrival yet: set a timer), ``ended`` (the
    far side ended or failed), or nothing (only Scheduled so far)."""
    import pandas as pd

    frames = [f for f in batches if len(f)]
    if not frames:
        return
    df = pd.concat(frames, ignore_index=True)
    out: list[tuple[Any, ...]] = []
    for handle, rows in df.groupby("conversation_handle", sort=False):
        info: dict[str, Any] = {}
        status = None
        kind = None
        timer_fired = ended = False
        for kind_, body in zip(rows["message_type_name"], rows["message_body"], strict=True):
            if kind_ in (SCHEDULED, DEPARTED, ARRIVED, CANCELLED):
                info.update(json.loads(bytes(body)))
            if kind_ == ARRIVED:
                status = "arrived"
            elif kind_ == CANCELLED:
                status = "cancelled"
            elif kind_ == DIALOG_TIMER:
                timer_fired = True
            elif kind_ in (END_DIALOG, ERROR):
                ended = True
        if ended:
            kind = "ended"
        elif status is not None:
            kind = "result"
        elif timer_fired:
            kind = "timer"
        elif "timer_due" in info:
            kind = "pending"
        if kind is None:
            continue
        out.append(
            (
                handle,
                kind,
                info.get("flight_id"),
                info.get("carrier"),
                info.get("origin"),
                status,
                info.get("dep_delay"),
                info.get("arr_delay") if status == "arrived" else None,
                int(rows["priority"].max()),
                int(rows["queuing_order"].min()),
                max(0.0, float(info["timer_due"]) - now) if kind == "pending" else None,
                now,
            )
        )
    if out:
        yield pd.DataFrame(out, columns=_OUTCOME_COLUMNS)


@dataclass
class SparkCarriers:
    """The carriers' streaming queries (see the module docstring).

    Args:
        spark: the SparkSession (the ``servicebroker`` source registered).
        url: the carriers' broker.
        queues: the carrier queue names.
        folder: where outcomes and checkpoints go (``OUTPUT/spark``).
        now: the broker clock's time (read at each run: the clock stands still during one).
        on_progress: called with each micro-batch's progress while a query runs (from
            Spark's listener thread).
    """

    spark: Any
    url: str
    queues: list[str]
    folder: str
    now: Callable[[], float]
    on_progress: Callable[[BatchProgress], None] | None = None
    runs: int = 0
    batches: list[tuple[str, int, float]] = field(default_factory=list)
    """(query, input rows, seconds) of every micro-batch that had input."""

    @property
    def outcomes(self) -> str:
        """The outcomes' Parquet folder (Spark's file sink, with its ``_spark_metadata``)."""
        return os.path.join(self.folder, "outcomes")

    def _checkpoint(self, name: str) -> str:
        return os.path.join(self.folder, "checkpoints", name)

    def _pending(self) -> Any:
        """The flights left pending by earlier runs (read afresh for each run)."""
        from pyspark.sql import functions as F

        if not os.path.isdir(os.path.join(self.outcomes, "_spark_metadata")):
            return self.spark.createDataFrame([], OUTCOMES_SCHEMA).select(
                "conversation_handle", "flight_id", "carrier", "origin", "dep_delay"
            )
        return (
            self.spark.read.schema(OUTCOMES_SCHEMA)
            .parquet(self.outcomes)
            .where(F.col("kind") == "pending")
            .select("conversation_handle", "flight_id", "carrier", "origin", "dep_delay")
        )

    def drain(self) -> None:
        """Run both queries once with ``Trigger.AvailableNow``: what the carrier queues hold
        now is settled, written to Parquet, answered and ended."""
        from pyspark.sql import functions as F

        now = self.now()
        messages = (
            self.spark.readStream.format("servicebroker")
            .option("url", self.url)
            .option("queue", ",".join(self.queues))
            .option("reader", CARRIER_READER)
            .option("maxMessagesPerBatch", str(MAX_MESSAGES_PER_BATCH))
            .option("partitions", "2")
            .option("clock", repr(now))  # the demo's brokers run on its clock
            .load()
        )
        settled = messages.mapInPandas(
            partial(settle_conversations, now=now), _SETTLED_SCHEMA
        ).withColumn("received_at", F.current_timestamp())  # the micro-batch's time
        p = self._pending().alias("p")
        joined = settled.alias("s").join(
            p, F.col("s.conversation_handle") == F.col("p.conversation_handle"), "left"
        )
        timer = F.col("s.kind") == "timer"
        found = F.col("p.flight_id").isNotNull()
        outcomes = joined.where(~timer | found).select(
            F.col("s.conversation_handle").alias("conversation_handle"),
            F.when(timer, F.lit("result")).otherwise(F.col("s.kind")).alias("kind"),
            F.coalesce("s.flight_id", "p.flight_id").alias("flight_id"),
            F.coalesce("s.carrier", "p.carrier").alias("carrier"),
            F.coalesce("s.origin", "p.origin").alias("origin"),
            F.when(timer, F.lit("arrival_missing")).otherwise(F.col("s.status")).alias("status"),
            F.coalesce("s.dep_delay", "p.dep_delay").alias("dep_delay"),
            F.col("s.arr_delay").alias("arr_delay"),
            F.col("s.priority").alias("priority"),
            F.col("s.first_order").alias("first_order"),
            F.col("s.timer_seconds").alias("timer_seconds"),
            F.col("s.processed_at").alias("processed_at"),
            F.col("s.received_at").alias("received_at"),
        )
        self._run(
            "carriers",
            outcomes.writeStream.format("parquet")
            .option("path", self.outcomes)
            .option("checkpointLocation", self._checkpoint("carriers")),
        )
        result = F.col("kind") == "result"
        actions = (
            self.spark.readStream.schema(OUTCOMES_SCHEMA)
            .parquet(self.outcomes)
            .where(F.col("kind").isin("result", "pending", "ended"))
            .select(
                "conversation_handle",
                F.when(result, F.lit(FLIGHT_PROCESSED)).alias("message_type_name"),
                F.when(result, F.to_json(F.struct("flight_id", "status")))
                .cast("binary")
                .alias("message_body"),
                F.when(F.col("kind") == "pending", F.col("timer_seconds")).alias(
                    "conversation_timer"
                ),
                F.col("kind").isin("result", "ended").alias("end_conversation"),
            )
        )
        self._run(
            "replies",
            actions.writeStream.format("servicebroker")
            .option("url", self.url)
            .option("clock", repr(now))
            .option("checkpointLocation", self._checkpoint("replies")),
        )
        self.runs += 1

    def _listen(self) -> Any:
        from ..spark import follow

        return None if self.on_progress is None else follow(self.spark, self.on_progress)

    def _run(self, name: str, writer: Any) -> None:
        """Start one query with ``Trigger.AvailableNow``, wait for it, keep its batches."""
        started = time.monotonic()
        listener = self._listen()
        try:
            query = writer.queryName(f"demo-{name}").trigger(availableNow=True).start()
            query.awaitTermination()
        finally:
            if listener is not None:
                self.spark.streams.removeListener(listener)
        for progress in query.recentProgress:
            rows = int(progress.numInputRows)
            if rows:
                seconds = progress.durationMs.get("triggerExecution", 0) / 1000
                self.batches.append((name, rows, seconds))
        if not query.recentProgress:
            self.batches.append((name, 0, time.monotonic() - started))

    def results(self) -> Any:
        """The flights' results as the Python engine's ``flight_results`` table (a pandas
        DataFrame): ``receive_position`` is the order Spark received them in (by run and
        micro-batch, then level, then queuing order, as the claims take groups: PRI-12)."""
        from pyspark.sql import functions as F

        df = (
            self.spark.read.schema(OUTCOMES_SCHEMA)
            .parquet(self.outcomes)
            .where(F.col("kind") == "result")
            .toPandas()
        )
        df = df.sort_values(
            ["processed_at", "received_at", "priority", "first_order"],
            ascending=[True, True, False, True],
        )
        df["receive_position"] = range(len(df))
        return df[RESULT_COLUMNS].reset_index(drop=True)

    @property
    def received(self) -> int:
        """Messages the carriers' stream received."""
        return sum(rows for name, rows, _ in self.batches if name == "carriers")

    def statistics(self) -> list[tuple[str, str]]:
        """Report rows: runs, micro-batches with input and their seconds, messages received."""
        fed = [b for b in self.batches if b[1]]
        carriers = [b for b in fed if b[0] == "carriers"]
        seconds = sorted(b[2] for b in fed)
        return [
            ("Spark: AvailableNow runs (carriers + replies queries)", f"{self.runs:,}"),
            (
                "Spark: messages received by the carriers' stream",
                f"{sum(b[1] for b in carriers):,}",
            ),
            (
                "Spark: micro-batches with input (carriers / replies)",
                f"{len(carriers):,} / {len(fed) - len(carriers):,}",
            ),
            (
                "Spark: micro-batch seconds (total / median / longest)",
                f"{sum(seconds):,.1f} / {seconds[len(seconds) // 2] if seconds else 0:.2f} / "
                f"{seconds[-1] if seconds else 0:.2f}",
            ),
        ]
