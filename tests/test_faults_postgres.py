"""The PostgreSQL server goes away under running senders and receivers (processes of their own)
and comes back: stopped with ``pg_ctlcluster … stop -m immediate`` and killed with SIGKILL of the
postmaster, in turns, where this machine's cluster can be controlled (root or postgres, Debian's
``pg_ctlcluster``); elsewhere the workers' sessions are cut with ``pg_terminate_backend``. The
checker counts attempted, acknowledged, lost, duplicated, unexpected and reordered messages.

``make test`` runs a few cycles; the long form: ``pytest tests/test_faults_postgres.py
--fault-cycles 100`` (figures in docs/reliability.md)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from servicebroker.testing.faults import (
    FaultReport,
    ServerControl,
    fault_for,
    run_fault_cycles,
    session_counter,
)

from .conftest import POSTGRES_URL, SERVER, drop_url, need_postgres, new_url

pytestmark = pytest.mark.slow


@pytest.fixture
def fault_url(tmp_path: Path) -> Iterator[str]:
    need_postgres()
    url = new_url("postgres", tmp_path)
    yield f"{url}&application_name=sbfault_{uuid.uuid4().hex[:8]}"
    drop_url(url)


def _port() -> int:
    from psycopg.conninfo import conninfo_to_dict

    return int(conninfo_to_dict(POSTGRES_URL).get("port") or 5432)


def _counter(url: str) -> Callable[[], int]:
    from psycopg.conninfo import conninfo_to_dict

    return session_counter(POSTGRES_URL, str(conninfo_to_dict(url)["application_name"]))


def _report(report: FaultReport, mode: str) -> None:
    print(
        f"\n{mode}: cycles {report.cycles}, attempted {report.attempted}, acknowledged "
        f"{report.acknowledged}, unknown outcomes {report.unknown_outcomes}, delivered "
        f"{report.delivered}, lost {report.lost}, duplicated {report.duplicated}, unexpected "
        f"{report.unexpected}, reordered {report.reordered}, failures {report.failures}, "
        f"recovery max {max(report.recovery_seconds, default=0):.2f} s, peak sessions "
        f"{report.peak_sessions}"
    )
    assert report.foreign == [], report.foreign  # every failure was a BrokerError
    assert report.ok, report
    assert report.acknowledged > 0 and report.delivered == report.acknowledged
    assert report.failures, "the faults never reached the workers"
    # four workers, each a pool of one or two sessions, a listener and an activity session:
    # sessions lost in the faults are replaced, never added to
    assert 0 < report.peak_sessions <= 4 * 5, report.peak_sessions


def test_server_crashes_lose_nothing(fault_url: str, request: pytest.FixtureRequest) -> None:
    if ServerControl.find(_port()) is None:
        pytest.skip(
            "the PostgreSQL server cannot be controlled from here (needs root or postgres and "
            "Debian's pg_ctlcluster on the server's host): test_cut_sessions_lose_nothing "
            "cuts the sessions instead"
        )
    cycles = int(request.config.getoption("--fault-cycles"))
    with SERVER.alone():  # no other test (other workers, other runs) on the server meanwhile
        report = run_fault_cycles(
            fault_url,
            cycles=cycles,
            fault=fault_for(fault_url, "server", POSTGRES_URL),
            count_sessions=_counter(fault_url),
        )
    _report(report, "server")


def test_cut_sessions_lose_nothing(fault_url: str, request: pytest.FixtureRequest) -> None:
    cycles = int(request.config.getoption("--fault-cycles"))
    fault = fault_for(fault_url, "terminate", POSTGRES_URL)
    report = run_fault_cycles(
        fault_url, cycles=cycles, fault=fault, count_sessions=_counter(fault_url)
    )
    _report(report, "terminate")
