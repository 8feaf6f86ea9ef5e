"""The external activator program (ACT-8): launches the configured command on QUEUE_ACTIVATION
notifications, between min and max instances, and adopts its processes after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from servicebroker import Broker, ManualClock
from servicebroker.activator import ConfigError, ExternalActivator, load_config
from servicebroker.testing.waiting import eventually

from .conftest import Pair

POST = "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"


def write_config(
    tmp_path: Path, url: str, command: list[str], *, low: int = 0, high: int = 2
) -> str:
    path = tmp_path / "activator.toml"
    quoted = ", ".join(f'"{c}"' for c in command)
    path.write_text(
        f'url = "{url}"\nnotification_queue = "notify_q"\n\n'
        f'[[queue]]\nname = "tq"\ncommand = [{quoted}]\nmin = {low}\nmax = {high}\n'
    )
    return str(path)


def setup_notifications(broker: Broker) -> None:
    broker.create_queue("notify_q")
    broker.create_service("//activator", queue="notify_q", contracts=[POST])
    broker.create_event_notification(
        "ea", queue="tq", event="QUEUE_ACTIVATION", to_service="//activator"
    )


def send(broker: Broker, pair: Pair, n: int = 1) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        for i in range(n):
            tx.send(h, "Req", f"{i}".encode())


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('url = "x.db"\n')
    with pytest.raises(ConfigError, match="notification_queue"):
        load_config(str(bad))
    bad.write_text('url = "x.db"\nnotification_queue = "n"\n[[queue]]\nname = "q"\ncommand = []\n')
    with pytest.raises(ConfigError, match=r"queue\[0\]\.command"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="No such file"):
        load_config(str(tmp_path / "missing.toml"))


def test_launches_up_to_max_and_adopts_after_a_restart(
    tmp_path: Path, url: str, broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule ACT-8
    setup_notifications(broker)
    broker.start()
    config = load_config(
        write_config(tmp_path, url, [sys.executable, "-c", "import time; time.sleep(60)"])
    )
    activator = ExternalActivator(config, broker)
    try:
        send(broker, pair)
        broker.tasks.drain()
        assert activator.step() == 1  # the first notification: one reader
        assert activator.step() == 0  # no notification within the response time-out
        clock.advance(60)
        broker.tasks.drain()
        assert activator.step() == 1  # time-out expired, still necessary: a second one
        clock.advance(60)
        broker.tasks.drain()
        assert activator.step() == 0  # max = 2
        restarted = ExternalActivator(config, broker)  # after a crash of the activator
        assert restarted.instances("tq") == 2  # adopted, not launched again
        clock.advance(60)
        broker.tasks.drain()
        assert restarted.step() == 0
    finally:
        for instance in activator.running.get("tq", []):
            os.kill(instance.pid, signal.SIGKILL)


def test_min_instances_run_without_a_notification(
    tmp_path: Path, url: str, broker: Broker, pair: Pair
) -> None:
    # rule ACT-8: the activator keeps `min` instances of a queue's command running, launched
    # again when one exits, notification or not
    setup_notifications(broker)
    config = load_config(
        write_config(
            tmp_path, url, [sys.executable, "-c", "import time; time.sleep(60)"], low=1, high=2
        )
    )
    activator = ExternalActivator(config, broker)
    try:
        assert activator.step() == 1  # no message, no notification: min = 1
        assert activator.step() == 0
        (first,) = activator.running["tq"]
        os.kill(first.pid, signal.SIGKILL)
        os.waitpid(first.pid, 0)
        assert activator.step() == 1  # back to min
        (second,) = activator.running["tq"]
        assert second.pid != first.pid and second.slot == 0
    finally:
        for instance in activator.running.get("tq", []):
            os.kill(instance.pid, signal.SIGKILL)


def test_each_instance_gets_the_lowest_free_slot_and_keeps_it_after_a_restart(
    tmp_path: Path, url: str, broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule ACT-8: SERVICEBROKER_INSTANCE is 0 .. max - 1, never shared by two running instances
    setup_notifications(broker)
    broker.start()
    config = load_config(
        write_config(tmp_path, url, [sys.executable, "-c", "import time; time.sleep(60)"])
    )
    children: dict[int, subprocess.Popen[bytes]] = {}
    slots: list[str] = []

    def launch(argv: Sequence[str], env: dict[str, str]) -> int:
        slots.append(env["SERVICEBROKER_INSTANCE"])
        child = subprocess.Popen(list(argv), env=env)
        children[child.pid] = child
        return child.pid

    def notify() -> None:
        clock.advance(60)  # the response time-out: the broker notifies again (still necessary)
        broker.tasks.drain()

    activator = ExternalActivator(config, broker, launch=launch)
    try:
        send(broker, pair)
        broker.tasks.drain()
        assert activator.step() == 1
        notify()
        assert activator.step() == 1
        assert slots == ["0", "1"] and activator.peak["tq"] == 2
        first = activator.running["tq"][0]
        children[first.pid].kill()
        children[first.pid].wait()
        notify()
        assert activator.step() == 1  # instance 0 exited: its slot is launched again
        assert slots == ["0", "1", "0"] and activator.peak["tq"] == 2
        restarted = ExternalActivator(config, broker, launch=launch)  # after a crash
        assert sorted(i.slot for i in restarted.running["tq"]) == [0, 1]
        notify()
        assert restarted.step() == 0  # max = 2
        assert restarted.peak["tq"] == 2
        # a state file written before slots: the adopted instances are numbered from 0
        Path(config.state_file).write_text(
            json.dumps({"tq": [[i.pid, i.start] for i in restarted.running["tq"]]})
        )
        older = ExternalActivator(config, broker, launch=launch)
        assert sorted(i.slot for i in older.running["tq"]) == [0, 1]
    finally:
        for child in children.values():
            child.kill()
            child.wait()


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.long  # test_spark_activation.py launches real Spark jobs from the activator
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_activator_starts_a_pyspark_job(
    spark: object, tmp_path: Path, url: str, broker: Broker, pair: Pair
) -> None:
    # rule ACT-8: a real PySpark job, launched on QUEUE_ACTIVATION, reads and drains the queue.
    # On SQLite only: the activator does the same on either backend (its PostgreSQL runs are
    # the tests above), and a job reading PostgreSQL through the data source is test_spark.py's;
    # each run here costs a JVM start.
    setup_notifications(broker)
    broker.start()
    out = tmp_path / "count.txt"
    job = Path(__file__).parent / "jobs" / "count_queue.py"
    config = load_config(write_config(tmp_path, url, [sys.executable, str(job), str(out)], high=1))
    activator = ExternalActivator(config, broker)
    send(broker, pair, 5)
    broker.tasks.drain()
    assert activator.step() == 1
    eventually(out.exists, "the activated PySpark job to finish", 240, every=0.2)
    assert out.read_text() == "5"
    assert broker.peek(pair.tq) == []
