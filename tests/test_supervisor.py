"""Supervised background threads: a thread that dies is logged, restarted after RESTART_DELAY
broker seconds (RESTART_WAIT real seconds at most), and shows in
``views.dm_broker_background_threads()``."""

from __future__ import annotations

import logging
import threading

import pytest

from servicebroker import Broker, ManualClock
from servicebroker.supervisor import RESTART_DELAY, Supervisor
from servicebroker.testing.waiting import eventually
from servicebroker.views import BackgroundThreadRow


def _timer_row(broker: Broker) -> BackgroundThreadRow:
    (row,) = [r for r in broker.views.dm_broker_background_threads() if r.name.endswith("timer")]
    return row


def test_a_dead_timer_thread_is_logged_and_restarted(
    broker: Broker,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage = broker._storage  # the fault goes in below the broker
    real = storage.try_lead
    calls = [0]

    def flaky() -> bool:
        calls[0] += 1
        if calls[0] == 2:  # the first call is start()'s; the second is the thread's
            raise RuntimeError("leader lock went away")
        return real()

    monkeypatch.setattr(storage, "try_lead", flaky)
    with caplog.at_level(logging.ERROR, logger="servicebroker.supervisor"):
        broker.start()
        eventually(lambda: _timer_row(broker).last_error is not None)  # it died
        clock.advance(RESTART_DELAY)  # the restart is due on the broker clock
        eventually(lambda: _timer_row(broker).restarts == 1)
    row = _timer_row(broker)
    assert row.state == "RUNNING" and "leader lock went away" in (row.last_error or "")
    assert row.last_error_time is not None
    assert any("servicebroker-timer died" in r.getMessage() for r in caplog.records)
    seen = calls[0]
    eventually(lambda: calls[0] > seen)  # the restarted loop runs again
    assert broker.is_leader
    broker.stop()
    assert _timer_row(broker).state == "STOPPED"


def test_the_restart_waits_for_the_broker_clock(clock: ManualClock) -> None:
    supervisor = Supervisor(clock, restart_delay=1, restart_wait=60)
    runs: list[int] = []

    def fails_once() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise ValueError("first run fails")

    supervisor.start("t", fails_once)
    eventually(lambda: supervisor.statistics()[0].state == "RESTARTING")
    clock.advance(0.5)
    assert supervisor.statistics()[0].state == "RESTARTING" and len(runs) == 1
    clock.advance(0.5)  # RESTART_DELAY reached
    eventually(lambda: supervisor.statistics()[0].state == "STOPPED")  # ran again and returned
    assert len(runs) == 2 and supervisor.statistics()[0].restarts == 1
    supervisor.close()


def test_a_stopped_supervisor_does_not_restart(clock: ManualClock) -> None:
    supervisor = Supervisor(clock, restart_delay=1, restart_wait=60)
    died = threading.Event()

    def boom() -> None:
        died.set()
        raise ValueError("bad")

    supervisor.start("t", boom)
    assert died.wait(10)
    eventually(lambda: supervisor.statistics()[0].state == "RESTARTING")
    supervisor.stop()
    assert supervisor.statistics()[0].state == "STOPPED"
    assert supervisor.statistics()[0].restarts == 0
    supervisor.close()


def test_a_loop_that_returns_is_stopped_not_restarted(clock: ManualClock) -> None:
    supervisor = Supervisor(clock)
    supervisor.start("once", lambda: None)
    supervisor.join("once", 10)
    (row,) = supervisor.statistics()
    assert (row.name, row.state, row.restarts, row.last_error) == ("once", "STOPPED", 0, None)
    supervisor.close()
