"""I/O faults under the SQLite backend: a full disk (a small tmpfs the test mounts) and I/O errors
injected into ``pwrite`` and ``fsync`` by Debian's libfiu (``fiu-run``). Nothing acknowledged is
lost or duplicated, the file passes ``PRAGMA integrity_check``, every error is a BrokerError, no
connection is leaked, and the broker carries on once the disk has room again. Where the test may
not mount or has no ``fiu-run`` it is skipped with the reason, and fails when ``CI`` is set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from servicebroker import Broker, BrokerError, Outcome, StorageFullError, StorageIOError

from .conftest import in_ci

pytestmark = pytest.mark.sqlite_only


def unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"the fault tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs mounted on a fresh folder (needs root or CAP_SYS_ADMIN)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        unavailable("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        unavailable(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_loses_nothing_and_the_broker_carries_on(small_disk: Path) -> None:
    path = small_disk / "broker.db"
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * 512 * 1024)  # freed later: the disk gets room again
    broker = Broker.open(str(path))
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "INITIATOR"})
    broker.create_queue("q")
    broker.create_service("s", queue="q", contracts=["C"])
    with broker.transaction() as tx:
        handle = tx.begin_dialog("s", "s", contract="C")
    acked: list[bytes] = []
    failures: list[BaseException] = []
    for n in range(2000):
        body = f"{n:06d}".encode() + os.urandom(4000)
        try:
            with broker.transaction() as tx:
                tx.send(handle, "M", body)
            acked.append(body)
        except Exception as exc:
            failures.append(exc)
            if len(failures) >= 20:
                break
    assert failures, "the disk never filled"
    assert all(isinstance(f, BrokerError) for f in failures), failures
    assert all(isinstance(f, StorageFullError) for f in failures), failures
    full = failures[0]
    assert str(path) in str(full) and "full" in str(full)
    assert full.outcome is Outcome.ROLLED_BACK  # type: ignore[attr-defined]
    assert broker.views.dm_broker_storage_sessions()[0].sessions_in_use == 0

    # the command line says it in one line, with no traceback
    cli = Path(sys.executable).parent / "servicebroker"
    run = subprocess.run(
        [
            str(cli),
            "send",
            "--url",
            str(path),
            "--conversation",
            str(handle),
            "--message-type",
            "M",
            "--body-file",
            "-",
        ],
        input="x" * 400_000,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1, run
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "full" in run.stderr and str(path) in run.stderr

    ballast.unlink()  # room again: the same broker works on, nothing reopened
    with broker.transaction() as tx:
        tx.send(handle, "M", b"after")
    acked.append(b"after")
    got: list[bytes] = []
    while True:
        with broker.transaction() as tx:
            msgs = tx.receive("q", top=100)
        if not msgs:
            break
        got += [m.message_body for m in msgs]
    assert got == acked  # every acknowledged message, once, in order
    assert broker.execute("PRAGMA integrity_check") == [("ok",)]
    broker.close()


def test_injected_io_errors_lose_nothing(tmp_path: Path) -> None:
    """3 % of pwrite and fsync calls fail with EIO (libfiu) while a process sends (writing a row
    per message in the same transaction, checked after an unknown outcome) and receives
    (writing a row per message processed); then the faults stop and the queue is drained."""
    if shutil.which("fiu-run") is None:
        unavailable("fiu-run is missing (Debian package fiu-utils; `make install` adds it as root)")
    child = Path(__file__).with_name("fiu_child.py")
    db = tmp_path / f"fiu-{uuid.uuid4().hex[:6]}.db"
    run = subprocess.run(
        ["fiu-run", "-x", "-f", "", sys.executable, str(child), str(db), "600", "0.03", "7"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent / "src")},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    # a COMMIT whose fsync failed: an I/O error whose outcome is unknown
    assert report["commit_error"]["type"] == "StorageIOError"
    assert report["commit_error"]["outcome"] == "unknown"
    assert "during COMMIT" in report["commit_error"]["message"]
    counts = report["counts"]
    assert counts["acknowledged"] > 50, report
    assert counts["lost"] == counts["duplicated"] == counts["unexpected"] == 0, report
    assert counts["reordered"] == 0, report
    assert report["foreign"] == [], report
    assert set(report["failures"]) <= {"StorageIOError"} and report["failures"], report
    assert report["integrity"] == ["ok"]
    assert report["sessions_in_use"] == 0


def test_a_read_only_file_system_is_a_storage_io_error(small_disk: Path) -> None:
    path = small_disk / "broker.db"
    with Broker.open(str(path)) as broker:
        broker.create_queue("q")
    done = subprocess.run(
        ["mount", "-o", "remount,ro", str(small_disk)], capture_output=True, text=True
    )
    if done.returncode != 0:
        unavailable(f"cannot remount the tmpfs read-only: {done.stderr.strip()}")
    with pytest.raises(StorageIOError) as err:
        Broker.open(str(path))
    assert str(path) in str(err.value)
    cli = Path(sys.executable).parent / "servicebroker"
    run = subprocess.run(
        [str(cli), "peek", "q", "--url", str(path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
