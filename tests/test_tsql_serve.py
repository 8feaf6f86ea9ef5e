"""``servicebroker serve -S INSTANCE`` runs every database's background work of a T-SQL instance
(docs/tsql.md), databases created after it started included: with it running, a ``sqlcmd``
whose request activates a T-SQL procedure gets the reply, as on SQL Server where the instance
is always running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from servicebroker.testing.waiting import eventually

DATA = Path(__file__).parent / "data" / "tsql"
BIN = Path(sys.executable).parent


def run_sqlcmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "servicebroker"), "sqlcmd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_serve_runs_the_instance_and_its_new_databases(tmp_path: Path) -> None:
    instance = str(tmp_path / "instance")
    serve = subprocess.Popen(
        [str(BIN / "servicebroker"), "serve", "-S", instance],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert serve.stdout is not None
        for line in serve.stdout:
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        eventually(lambda: "serving database master" in lines, "serve to start", timeout=60)
        prelude = tmp_path / "prelude.sql"
        prelude.write_text("CREATE DATABASE AdventureWorks2008R2;\nGO\n")
        lessons = [str(DATA / f"internal_activation_lesson{n}.sql") for n in (1, 2, 3)]
        done = run_sqlcmd("-S", instance, "-b", "-i", str(prelude))
        assert done.returncode == 0, done.stdout + done.stderr
        eventually(
            lambda: "serving database AdventureWorks2008R2" in lines,
            "serve to pick up the new database",
            timeout=60,
        )
        # the queue and its procedure are made after serve opened the database, in another
        # process: serve's activation finds the procedure when the queue needs it (ACT-7)
        done = run_sqlcmd("-S", instance, "-b", "-i", lessons[0], "-i", lessons[1])
        assert done.returncode == 0, done.stdout + done.stderr
        done = run_sqlcmd("-S", instance, "-b", "-i", lessons[2])
        assert done.returncode == 0, done.stdout + done.stderr
        assert "<ReplyMsg>Message for Initiator service.</ReplyMsg>" in done.stdout
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=60)
        reader.join(timeout=10)
    assert lines[-1] == "stopped", lines
