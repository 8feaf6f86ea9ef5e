"""The command line: every command, its output, and clean errors."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from servicebroker import Broker, ManualClock
from servicebroker.cli import main
from servicebroker.testing.waiting import eventually

from .conftest import Pair
from .test_activator import send as send_requests
from .test_activator import setup_notifications, write_config


def setup(path: str) -> None:
    with Broker.open(path) as b:
        b.create_queue("iq")
        b.create_queue("tq")
        b.create_service("I", queue="iq")
        b.create_service("T", queue="tq", contracts=["DEFAULT"])


def test_send_peek_receive_status(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    runner = CliRunner()
    assert runner.invoke(main, ["init", db]).exit_code == 0
    setup(db)
    sent = runner.invoke(
        main, ["send", "--url", db, "--from-service", "I", "--to-service", "T", "--body", "hello"]
    )
    assert sent.exit_code == 0, sent.output
    handle = sent.output.strip()
    again = runner.invoke(main, ["send", "--url", db, "--conversation", handle, "--body", "again"])
    assert again.exit_code == 0, again.output
    peeked = runner.invoke(main, ["peek", "tq", "--url", db, "--json"])
    assert [json.loads(line)["message_body"] for line in peeked.output.splitlines()] == [
        "hello",
        "again",
    ]
    got = runner.invoke(main, ["receive", "tq", "--url", db, "--json", "--end"])
    assert got.exit_code == 0
    assert [json.loads(line)["message_body"] for line in got.output.splitlines()] == [
        "hello",
        "again",
    ]
    status = runner.invoke(main, ["status", "--url", db])
    assert (
        status.exit_code == 0
        and "service_queues" in status.output
        and "conversation_endpoints" in status.output
    )


def test_errors_exit_non_zero_with_a_message(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    setup(db)
    runner = CliRunner()
    r = runner.invoke(main, ["peek", "nope", "--url", db])
    assert r.exit_code == 1 and "queue 'nope' does not exist" in r.output
    r = runner.invoke(main, ["send", "--url", db, "--body", "x"])
    assert r.exit_code == 2 and "--conversation" in r.output
    r = runner.invoke(main, ["send", "--url", db, "--conversation", "not-a-uuid"])
    assert r.exit_code == 2 and "not a conversation handle" in r.output
    r = runner.invoke(main, ["receive", "tq", "--url", "mysql://x/y"])
    assert r.exit_code == 1 and "unsupported storage URL scheme" in r.output
    r = runner.invoke(main, ["receive", "tq", "--url", db, "--top", "-3"])
    assert r.exit_code == 2


def test_activator_bad_configuration_exits_non_zero_with_a_message(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = tmp_path / "missing.toml"
    r = runner.invoke(main, ["activator", str(missing)])
    assert r.exit_code == 1, r.output
    assert f"activator configuration {str(missing)!r}: No such file or directory" in r.output
    bad = tmp_path / "bad.toml"
    bad.write_text('url = "x.db"\n')
    r = runner.invoke(main, ["activator", str(bad)])
    assert r.exit_code == 1 and "notification_queue must be a non-empty string" in r.output
    bad.write_text('url = "x.db"\nnotification_queue = [\n')
    r = runner.invoke(main, ["activator", str(bad)])
    assert r.exit_code == 1 and f"activator configuration {str(bad)!r}" in r.output
    good = write_config(tmp_path, str(tmp_path / "a.db"), ["true"])
    r = runner.invoke(main, ["activator", good, "--url", "mysql://x/y", "--once"])
    assert r.exit_code == 1 and "unsupported storage URL scheme" in r.output
    r = runner.invoke(main, ["activator", good, "--timeout", "-1"])
    assert r.exit_code == 2 and "--timeout" in r.output
    r = runner.invoke(main, ["activator"])
    assert r.exit_code == 2 and "CONFIG.toml" in r.output


def _marker_command(out: Path) -> list[str]:
    """A command that writes its SERVICEBROKER_QUEUE and SERVICEBROKER_URL to ``out``."""
    code = (
        "import os, pathlib; pathlib.Path(os.environ['OUT']).write_text("
        "os.environ['SERVICEBROKER_QUEUE'] + ' ' + os.environ['SERVICEBROKER_URL'])"
    )
    return [sys.executable, "-c", code.replace("os.environ['OUT']", repr(str(out)))]


def _wait_for(path: Path, seconds: float) -> str:
    """What the activated command wrote to ``path``, once it has written it."""
    return eventually(
        lambda: path.exists() and path.read_text(), f"the command to write {path}", seconds, 0.05
    )


def test_activator_launches_the_configured_command_until_terminated(
    tmp_path: Path, url: str, broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule ACT-8: `servicebroker activator CONFIG.toml` as a program, stopped by SIGTERM
    setup_notifications(broker)
    broker.start()
    out = tmp_path / "launched.txt"
    config = write_config(tmp_path, url, _marker_command(out), high=1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "servicebroker.cli", "activator", config, "--timeout", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        send_requests(broker, pair)
        broker.tasks.drain()  # the QUEUE_ACTIVATION notification is on notify_q
        assert _wait_for(out, 60) == f"tq {url}"
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, output
    assert output.strip().endswith("stopped")
    assert broker.peek("notify_q") == []  # the notification was received and committed


def test_activator_once_handles_the_waiting_notification(
    tmp_path: Path, url: str, broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule ACT-8: --once runs one round; --url overrides the configuration's url
    setup_notifications(broker)
    broker.start()
    send_requests(broker, pair)
    broker.tasks.drain()
    out = tmp_path / "launched.txt"
    config = write_config(tmp_path, "elsewhere.db", _marker_command(out), high=1)
    r = CliRunner().invoke(main, ["activator", config, "--url", url, "--once", "--timeout", "5"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "launched 1 process(es)"
    assert _wait_for(out, 60) == f"tq {url}"  # the launched reader is told the broker's url
    r = CliRunner().invoke(main, ["activator", config, "--url", url, "--once", "--timeout", "0"])
    assert r.exit_code == 0 and r.output.strip() == "launched 0 process(es)"


def test_demo_instances_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    # `servicebroker demo --instances 2 --target-url`: bad combinations exit with a message
    # naming the fault, before Spark or a broker starts
    runner = CliRunner()
    out = str(tmp_path / "out")
    r = runner.invoke(main, ["demo", "--output", out, "--target-url", str(tmp_path / "c.db")])
    assert r.exit_code == 1 and "needs two instances" in r.output
    r = runner.invoke(main, ["demo", "--output", out, "--instances", "3"])
    assert r.exit_code == 2 and "--instances" in r.output
    same = str(tmp_path / "same.db")
    r = runner.invoke(
        main, ["demo", "--output", out, "--instances", "2", "--url", same, "--target-url", same]
    )
    assert r.exit_code == 1 and "two databases" in r.output
    setup(same)
    r = runner.invoke(main, ["demo", "--output", out, "--instances", "2", "--url", same])
    assert r.exit_code == 1 and "exists already" in r.output
    assert not (tmp_path / "out" / "carriers.db").exists()
