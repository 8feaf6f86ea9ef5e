"""Shared fixtures: a broker on a temporary SQLite file (never :memory:) driven by a manual
clock, and a standard initiator/target service pair."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servicebroker import Broker, ManualClock

START = 1_700_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "broker.db")


@pytest.fixture
def broker(db_path: str, clock: ManualClock) -> Iterator[Broker]:
    b = Broker.open(db_path, clock=clock, poll_interval=0.01)
    yield b
    b.close()


@dataclass
class Pair:
    """An initiator service on queue 'iq' and a target service on 'tq' under contract 'C' with
    message types Req (initiator), Resp (target), Note (any)."""

    initiator: str = "//test/Initiator"
    target: str = "//test/Target"
    iq: str = "iq"
    tq: str = "tq"
    contract: str = "C"


def make_pair(broker: Broker, *, retention: bool = False, poison: bool = True) -> Pair:
    broker.create_message_type("Req", validation="NONE")
    broker.create_message_type("Resp", validation="NONE")
    broker.create_message_type("Note", validation="NONE")
    broker.create_contract("C", {"Req": "INITIATOR", "Resp": "TARGET", "Note": "ANY"})
    broker.create_queue("iq", retention=retention, poison_message_handling=poison)
    broker.create_queue("tq", retention=retention, poison_message_handling=poison)
    p = Pair()
    broker.create_service(p.initiator, queue="iq")
    broker.create_service(p.target, queue="tq", contracts=["C"])
    return p


@pytest.fixture
def pair(broker: Broker) -> Pair:
    return make_pair(broker)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local SparkSession for the whole test run, with the servicebroker data source."""
    import shutil

    problem = None
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        problem = f"PySpark is not installed: {exc}"
    if problem is None and not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        problem = "no Java runtime (java on PATH or JAVA_HOME)"
    if problem is not None:
        if in_ci():
            pytest.fail(f"Spark tests must run in CI: {problem}")
        pytest.skip(problem)
    from servicebroker.spark import session

    s = session(
        "local[2]", app_name="servicebroker-tests", temp_dir=str(tmp_path_factory.mktemp("spark"))
    )
    yield s
    s.stop()
