"""SIGKILL cycles of a forwarder (FWD-2, NET-2, NET-3, NET-4): a sending broker, a forwarder and
a receiving broker, each in a process of its own (tests/forwarding_crash_child.py) on its own
SQLite database, on the real clock with short transport intervals, over real TCP with mutual
TLS on loopback: shop → forwarder → warehouse, and the warehouse's replies back through the
forwarder. Each cycle SIGKILLs the forwarder at a random moment mid-stream and starts it again
on the same database and port. A forwarder holds what it forwards in memory only and never
acknowledges, so a kill loses only copies: the senders retry (NET-4), the new forwarder passes
the copies on and the destination's duplicate detection (NET-2) keeps each message exactly
once. At the end everything drains and the databases say: every message the sender committed
was received exactly once and in order per dialog, every reply came back exactly once and in
order, and both transmission queues are empty. Recovery (restart until a message the sender
committed after the kill is received) is measured per cycle. The dialogs are secured end to end
(SEC-2, SEC-3, full dialog security): the forwarder only ever holds ciphertext.

Microsoft: "Service Broker message forwarding" — the forwarder does not acknowledge; "the
sending instance retries until the message is acknowledged by the destination"
(https://learn.microsoft.com/en-us/sql/database-engine/service-broker/service-broker-message-forwarding).

``--forwarding-crash-cycles N`` sets the number of cycles (default 5, a few seconds; a long run
also needs ``--timeout``; docs/transport.md "Forwarding" has the figures of a longer run)."""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servicebroker import Broker, ManualClock
from servicebroker.testing.ports import free_port
from servicebroker.testing.waiting import eventually
from servicebroker.transport.certificates import make_self_signed

from .conftest import START
from .test_transport_crash import Child, percentile, read
from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    address_of,
    catalog,
    secure_dialogs,
    trust,
)

pytestmark = pytest.mark.slow

DIALOGS = 4


def fwd_child(role: str, db: Path, log: Path, extra: list[str]) -> Child:
    """A broker process of tests/forwarding_crash_child.py."""
    return Child(role, db, log, extra, module="tests.forwarding_crash_child")


@dataclass
class Trio:
    sender: Child
    forwarder: Child
    receiver: Child
    stop: Path

    @property
    def children(self) -> tuple[Child, Child, Child]:
        return self.sender, self.forwarder, self.receiver

    def check_alive(self) -> None:
        for c in self.children:
            c.check_alive()


def set_up(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The shop, forwarder and warehouse databases: catalogs, certificates, endpoints (the
    forwarder's with MESSAGE_FORWARDING), CONNECT grants, routes (the forwarder's to both
    services), the dialogs and the test's tables."""
    sites = []
    for name in ("shop", "forwarder", "warehouse"):
        folder = tmp_path / name
        folder.mkdir()
        broker = Broker.open(str(folder / "broker.db"))
        sites.append(Site(broker, ManualClock(START), free_port(), make_self_signed(name, folder)))
    shop, fwd, warehouse = sites
    catalog(shop.broker, target=False)
    catalog(warehouse.broker, target=True)
    trust(shop, [fwd])
    trust(fwd, [shop, warehouse], forwarding=True)
    trust(warehouse, [fwd])
    secure_dialogs(shop, warehouse)  # SEC-2: the forwarder holds no dialog certificate
    shop.broker.create_route("wh", service_name=TARGET, address=address_of(fwd))
    fwd.broker.create_route("wh", service_name=TARGET, address=address_of(warehouse))
    fwd.broker.create_route("shop", service_name=INITIATOR, address=address_of(shop))
    warehouse.broker.create_route("shop", service_name=INITIATOR, address=address_of(fwd))
    shop.broker.execute("CREATE TABLE dialogs (d INTEGER PRIMARY KEY, handle TEXT NOT NULL)")
    shop.broker.execute("CREATE TABLE sent (id INTEGER PRIMARY KEY, d INTEGER, n INTEGER)")
    shop.broker.execute("CREATE TABLE replies (id INTEGER PRIMARY KEY, d INTEGER, n INTEGER)")
    warehouse.broker.execute("CREATE TABLE got (id INTEGER PRIMARY KEY, d INTEGER, n INTEGER)")
    with shop.broker.transaction() as tx:
        for d in range(DIALOGS):
            handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
            tx.execute("INSERT INTO dialogs VALUES (?, ?)", (d, str(handle)))
    for site in sites:
        site.broker.close()
    return tuple(tmp_path / n / "broker.db" for n in ("shop", "forwarder", "warehouse"))  # type: ignore[return-value]


@pytest.fixture
def trio(tmp_path: Path) -> Iterator[Trio]:
    shop, fwd, warehouse = set_up(tmp_path)
    stop = tmp_path / "stop"
    made = Trio(
        fwd_child("sender", shop, tmp_path / "sender.log", ["--stop", str(stop)]),
        fwd_child("forwarder", fwd, tmp_path / "forwarder.log", []),
        fwd_child("receiver", warehouse, tmp_path / "receiver.log", []),
        stop,
    )
    yield made
    for c in made.children:
        c.terminate()


def watch(trio: Trio, probe: object, what: str, timeout: float = 30.0) -> None:
    """:func:`eventually`, and when it times out each process's stacks in its log."""
    try:
        eventually(probe, what, timeout)  # type: ignore[arg-type]
    except pytest.fail.Exception:
        for c in trio.children:
            c.dump()
        raise


def sequences(db: Path, table: str) -> dict[int, list[int]]:
    seqs: dict[int, list[int]] = defaultdict(list)
    for d, n in read(db, f"SELECT d, n FROM {table} ORDER BY id"):
        seqs[d].append(n)
    return seqs


def compare(sent: dict[int, list[int]], got: dict[int, list[int]]) -> tuple[int, int, int]:
    """(lost, duplicated, reordered) of ``got`` against ``sent``, per dialog."""
    lost = duplicated = reordered = 0
    for d in range(DIALOGS):
        counts = Counter(got[d])
        lost += sum(1 for n in sent[d] if n not in counts)
        duplicated += sum(c - 1 for c in counts.values())
        reordered += sum(1 for a, b in zip(got[d], got[d][1:], strict=False) if b < a)
    return lost, duplicated, reordered


def test_forwarder_sigkill_cycles_lose_duplicate_and_reorder_nothing(
    trio: Trio, request: pytest.FixtureRequest
) -> None:
    """FWD-2, NET-2, NET-4: SIGKILL the forwarder at a random moment mid-stream and restart
    it on its database and port, ``--forwarding-crash-cycles`` times: every message the
    sender committed is received exactly once and in order per dialog, every reply comes back
    exactly once and in order, both transmission queues end empty (the final destinations'
    acks came back through the forwarder), and each restart recovers."""
    cycles = int(request.config.getoption("--forwarding-crash-cycles"))
    seed = int(os.environ.get("FORWARDING_CRASH_SEED", "13"))
    rng = random.Random(seed)
    began = time.monotonic()
    for c in (trio.receiver, trio.forwarder, trio.sender):
        c.start()
    watch(trio, lambda: read(trio.receiver.db, "SELECT 1 FROM got LIMIT 1"), "the first message")
    recoveries = []
    for _ in range(cycles):
        time.sleep(rng.uniform(0.0, 0.3))  # the moment of the kill, not an outcome
        trio.forwarder.kill()
        marks = dict(read(trio.sender.db, "SELECT d, MAX(n) FROM sent GROUP BY d"))
        restarted = time.monotonic()
        trio.forwarder.start()

        def recovered(marks: dict[int, int] = marks) -> bool:
            trio.check_alive()
            got = read(trio.receiver.db, "SELECT d, MAX(n) FROM got GROUP BY d")
            return any(n > marks.get(d, -1) for d, n in got)

        watch(trio, recovered, "a new message after restarting the forwarder")
        recoveries.append(time.monotonic() - restarted)

    trio.stop.touch()  # the sender stops sending; what waits is delivered
    shop_reader = Broker.open(str(trio.sender.db), busy_timeout=30)
    warehouse_reader = Broker.open(str(trio.receiver.db), busy_timeout=30)
    try:

        def drained() -> bool:
            trio.check_alive()
            (sent,), (got,), (replies,) = (
                read(trio.sender.db, "SELECT COUNT(*) FROM sent")[0],
                read(trio.receiver.db, "SELECT COUNT(*) FROM got")[0],
                read(trio.sender.db, "SELECT COUNT(*) FROM replies")[0],
            )
            return (
                got >= sent
                and replies >= got
                and shop_reader.views.transmission_queue_count() == 0
                and warehouse_reader.views.transmission_queue_count() == 0
            )

        watch(trio, drained, "everything sent received, replied to and acknowledged", 60.0)
        for c in trio.children:
            c.terminate()
        assert warehouse_reader.peek("warehouse_q") == []
    finally:
        shop_reader.close()
        warehouse_reader.close()
    sent = sequences(trio.sender.db, "sent")
    got = sequences(trio.receiver.db, "got")
    replies = sequences(trio.sender.db, "replies")
    messages = sum(len(v) for v in sent.values())
    there = compare(sent, got)
    back = compare(got, replies)
    print(
        f"\nforwarding crash cycles: seed={seed} cycles={cycles} messages={messages} "
        f"(lost, duplicated, reordered)={there} replies={back} "
        f"recovery p50={percentile(recoveries, 0.5):.2f}s p99={percentile(recoveries, 0.99):.2f}s "
        f"max={max(recoveries):.2f}s wall={time.monotonic() - began:.1f}s"
    )
    assert there == (0, 0, 0) and back == (0, 0, 0)
    assert messages > cycles
