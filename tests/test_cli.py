"""The command line: every command, its output, and clean errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from servicebroker import Broker
from servicebroker.cli import main


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
