"""SIGKILL cycles across processes over real TCP with mutual TLS on loopback (NET-2, NET-3,
NET-4, TICK-3a): a sending broker and a receiving broker, each in a process of its own
(tests/transport_crash_child.py) on its own SQLite database, on the real clock with short
transport intervals. Each cycle SIGKILLs one of them — the receiver at a random moment, the
receiver right before the commit that takes an arriving message, the receiver right after that
commit (before the acknowledgement leaves), or the sender at a random moment — and starts it
again on the same database and port. At the end everything drains and the databases say: every
message the sender committed was received exactly once, in order per dialog, and both
transmission queues are empty. Recovery (restart until a message the sender committed after the
kill is received) is measured per cycle.

Microsoft: messages are acknowledged only once committed, and resent until acknowledged
(https://learn.microsoft.com/en-us/sql/database-engine/service-broker/message-delivery);
a message is delivered exactly once, in order
(https://learn.microsoft.com/en-us/sql/database-engine/service-broker/conversations).

``--transport-crash-cycles N`` sets the number of cycles (default 8, 2 of each kind; a long
run also needs ``--timeout``, e.g. ``--transport-crash-cycles 300 --timeout 1500``;
docs/transport.md "Crash cycles" has the figures of a 300-cycle run)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from servicebroker import Broker, ManualClock
from servicebroker.testing.ports import free_port
from servicebroker.testing.waiting import eventually
from servicebroker.transport.certificates import make_self_signed

from .conftest import START
from .transport_sites import CONTRACT, INITIATOR, TARGET, Site, catalog, secure

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DIALOGS = 8
KINDS = (
    "receiver at random",
    "receiver before commit",
    "receiver after commit",
    "sender at random",
)


@dataclass
class Child:
    """One broker process: its role, database and the files it is told about."""

    role: str
    db: Path
    log: Path
    extra: list[str]
    proc: subprocess.Popen[bytes] | None = None
    out: IO[bytes] | None = None
    starts: int = 0
    module: str = "tests.transport_crash_child"
    """The child program (``python -m module role db extra…``)."""

    def start(self) -> None:
        self.out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.module,
                self.role,
                str(self.db),
                *self.extra,
            ],
            cwd=ROOT,
            stdout=self.out,
            stderr=subprocess.STDOUT,
        )
        self.starts += 1

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(
                f"the {self.role} exited with {self.proc.returncode}: "
                f"{self.log.read_text(errors='replace')[-3000:]}"
            )

    def wait_dead(self, timeout: float = 20.0) -> int:
        assert self.proc is not None and self.out is not None
        code = self.proc.wait(timeout)
        self.out.close()
        return code

    def exited(self) -> bool:
        """Whether the process has ended."""
        return self.proc is not None and self.proc.poll() is not None

    def dump(self) -> None:
        """Have the process write its threads' stacks to its log (faulthandler)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)  # for the log to be written, not an outcome

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        assert self.wait_dead() == -signal.SIGKILL

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.wait_dead()
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Run:
    """The two processes and what the cycles measured."""

    sender: Child
    receiver: Child
    die: Path
    stop: Path
    recoveries: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))


def read(db: Path, sql: str) -> list[tuple[int, ...]]:
    """Rows of the test's own tables, read without taking a write lock (WAL)."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as c:
        return c.execute(sql).fetchall()


def set_up(tmp_path: Path) -> tuple[Path, Path]:
    """The shop (sender) and the warehouse (receiver) databases: catalog, certificates,
    endpoints, CONNECT grants, routes both ways, the dialogs and the test's tables."""
    sites = []
    for name in ("shop", "warehouse"):
        folder = tmp_path / name
        folder.mkdir()
        broker = Broker.open(str(folder / "broker.db"))
        sites.append(Site(broker, ManualClock(START), free_port(), make_self_signed(name, folder)))
    shop, warehouse = sites
    catalog(shop.broker, target=False)
    catalog(warehouse.broker, target=True)
    secure(shop, warehouse)
    secure(warehouse, shop)
    shop.broker.create_route("wh", service_name=TARGET, address=f"TCP://127.0.0.1:{warehouse.port}")
    warehouse.broker.create_route(
        "shop", service_name=INITIATOR, address=f"TCP://127.0.0.1:{shop.port}"
    )
    shop.broker.execute("CREATE TABLE dialogs (d INTEGER PRIMARY KEY, handle TEXT NOT NULL)")
    shop.broker.execute("CREATE TABLE sent (id INTEGER PRIMARY KEY, d INTEGER, n INTEGER)")
    warehouse.broker.execute("CREATE TABLE got (id INTEGER PRIMARY KEY, d INTEGER, n INTEGER)")
    with shop.broker.transaction() as tx:
        for d in range(DIALOGS):
            handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
            tx.execute("INSERT INTO dialogs VALUES (?, ?)", (d, str(handle)))
    for site in sites:
        site.broker.close()
    return tmp_path / "shop" / "broker.db", tmp_path / "warehouse" / "broker.db"


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    shop, warehouse = set_up(tmp_path)
    die, stop = tmp_path / "die", tmp_path / "stop"
    made = Run(
        Child("sender", shop, tmp_path / "sender.log", ["--stop", str(stop)]),
        Child("receiver", warehouse, tmp_path / "receiver.log", ["--die", str(die)]),
        die,
        stop,
    )
    yield made
    for child in (made.sender, made.receiver):
        child.terminate()


def newest_sent(db: Path) -> dict[int, int]:
    """Per dialog, the highest number the sender has committed so far (-1: none)."""
    found = dict(read(db, "SELECT d, MAX(n) FROM sent GROUP BY d"))
    return {d: found.get(d, -1) for d in range(DIALOGS)}


def received_beyond(db: Path, marks: dict[int, int]) -> bool:
    """Whether the receiver has recorded a message numbered above ``marks`` on its dialog."""
    return any(n > marks[d] for d, n in read(db, "SELECT d, MAX(n) FROM got GROUP BY d"))


def cycle(run: Run, kind: str, rng: random.Random) -> float:
    """Kill one process as ``kind`` says, start it again, and return the seconds from the
    restart until a message the sender committed after the kill is received."""
    victim = run.sender if kind.startswith("sender") else run.receiver
    if kind.endswith("at random"):
        time.sleep(rng.uniform(0.0, 0.3))  # the moment of the kill, not an outcome
        victim.kill()
    else:
        ready = run.die.with_suffix(".new")  # written whole, then renamed: read whole
        ready.write_text(kind.split()[1])  # "before" / "after": the receiver kills itself
        ready.replace(run.die)
        watch(run, lambda: victim.exited(), f"the receiver to kill itself ({kind})")
        assert victim.wait_dead() == -signal.SIGKILL, kind
        assert not run.die.exists()
    marks = newest_sent(run.sender.db)
    restarted = time.monotonic()
    victim.start()

    def recovered() -> bool:
        run.sender.check_alive()
        run.receiver.check_alive()
        return received_beyond(run.receiver.db, marks)

    watch(run, recovered, f"a new message after restarting the {victim.role} ({kind})")
    return time.monotonic() - restarted


def watch(run: Run, probe: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """:func:`eventually`, and when it times out each process's stacks in its log."""
    try:
        eventually(probe, what, timeout)
    except pytest.fail.Exception:
        run.sender.dump()
        run.receiver.dump()
        raise


def outcome(shop: Path, warehouse: Path) -> tuple[int, int, int, int]:
    """(messages committed by the sender, lost, duplicated, reordered) from the databases:
    per dialog, the sequence received (in RECEIVE order) against the sequence sent."""
    sent: dict[int, list[int]] = defaultdict(list)
    got: dict[int, list[int]] = defaultdict(list)
    for d, n in read(shop, "SELECT d, n FROM sent ORDER BY id"):
        sent[d].append(n)
    for d, n in read(warehouse, "SELECT d, n FROM got ORDER BY id"):
        got[d].append(n)
    lost = duplicated = reordered = 0
    for d in range(DIALOGS):
        assert sent[d] == list(range(len(sent[d]))), f"dialog {d}: the sender's own record"
        counts = Counter(got[d])
        lost += sum(1 for n in sent[d] if n not in counts)
        duplicated += sum(c - 1 for c in counts.values())
        reordered += sum(1 for a, b in zip(got[d], got[d][1:], strict=False) if b < a)
    return sum(len(v) for v in sent.values()), lost, duplicated, reordered


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_sigkill_cycles_lose_duplicate_and_reorder_nothing(
    run: Run, request: pytest.FixtureRequest
) -> None:
    """NET-2, NET-3, NET-4, TICK-3a: SIGKILL the receiver (at random, right before an
    arrival's commit, right after it before the ack) and the sender (at random), restarting
    each on its database and port, ``--transport-crash-cycles`` times: every message the
    sender committed is received exactly once and in order per dialog (lost = duplicated =
    reordered = 0), both transmission queues end empty, and each restart recovers."""
    cycles = int(request.config.getoption("--transport-crash-cycles"))
    seed = int(os.environ.get("TRANSPORT_CRASH_SEED", "12"))
    rng = random.Random(seed)
    began = time.monotonic()
    run.receiver.start()
    run.sender.start()
    eventually(lambda: read(run.receiver.db, "SELECT 1 FROM got LIMIT 1"), "the first message")
    kinds = [KINDS[i % len(KINDS)] for i in range(cycles)]
    rng.shuffle(kinds)
    for kind in kinds:
        run.recoveries[kind].append(cycle(run, kind, rng))

    run.stop.touch()  # the sender stops sending; what waits is delivered
    shop_reader = Broker.open(str(run.sender.db), busy_timeout=30)
    warehouse_reader = Broker.open(str(run.receiver.db), busy_timeout=30)
    try:

        def drained() -> bool:
            run.sender.check_alive()
            run.receiver.check_alive()
            (sent,), (got,) = (
                read(run.sender.db, "SELECT COUNT(*) FROM sent")[0],
                read(run.receiver.db, "SELECT COUNT(*) FROM got")[0],
            )
            return (
                got >= sent
                and shop_reader.views.transmission_queue_count() == 0
                and warehouse_reader.views.transmission_queue_count() == 0
            )

        watch(run, drained, "everything sent received and acknowledged", 60.0)
        run.sender.terminate()
        run.receiver.terminate()
        assert shop_reader.views.transmission_queue_count() == 0
        assert warehouse_reader.peek("warehouse_q") == []
    finally:
        shop_reader.close()
        warehouse_reader.close()
    messages, lost, duplicated, reordered = outcome(run.sender.db, run.receiver.db)
    every = [r for rs in run.recoveries.values() for r in rs]
    by_kind = ", ".join(
        f"{kind}: {len(rs)}, p50 {percentile(rs, 0.5):.2f}s max {max(rs):.2f}s"
        for kind, rs in sorted(run.recoveries.items())
    )
    print(
        f"\ntransport crash cycles: seed={seed} cycles={cycles} messages={messages} "
        f"lost={lost} duplicated={duplicated} reordered={reordered} "
        f"recovery p50={percentile(every, 0.5):.2f}s p99={percentile(every, 0.99):.2f}s "
        f"max={max(every):.2f}s wall={time.monotonic() - began:.1f}s ({by_kind})"
    )
    assert (lost, duplicated, reordered) == (0, 0, 0)
    assert messages > cycles
