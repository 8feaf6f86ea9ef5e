"""One broker of tests/test_transport_crash.py, in a process of its own, on the real clock with
short transport intervals; the parent SIGKILLs it and starts it again on the same database and
port.

Usage: ``python -m tests.transport_crash_child ROLE DB_PATH [--stop FILE] [--die FILE]``

``sender``: sends numbered messages ``<o d='D' n='N'/>`` round robin on the dialogs listed in its
table ``dialogs`` (made by the parent), one or two per transaction, recording each in its table
``sent`` (d, n) in the SAME transaction as the SEND — so ``sent`` is exactly what was committed.
It stops sending (the broker keeps running, so what waits is delivered) once ``--stop FILE``
exists.

``receiver``: RECEIVEs from ``warehouse_q`` and records each message in its table ``got`` (d, n)
in the same transaction as the RECEIVE. When ``--die FILE`` exists and says ``before`` or
``after``, the receiver deletes it and SIGKILLs itself at the next arrival it takes: right
before the commit of the arrival's write transaction (``before``), or right after that commit,
before the acknowledgement is queued (``after``). The kill points are set by wrapping the
transport's functions in this process only.

Both end cleanly on SIGTERM (the broker is closed).
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from servicebroker import Broker
from servicebroker.transport import receiving as transport_receiving
from servicebroker.transport.arrival import Outcome, Verdict
from servicebroker.transport.settings import TransportSettings

SETTINGS = TransportSettings(
    retry_initial=0.25,
    retry_max=1.0,
    suppress_after_disconnect=0.05,
    suppress_after_failure=0.1,
    handshake_timeout=5.0,
)
"""Intervals short enough that a restart is recovered from in well under a second."""

QUEUE = "warehouse_q"
BODY = re.compile(rb"<o d='(\d+)' n='(\d+)'/>")
stopping = threading.Event()


def open_broker(path: str) -> Broker:
    """The broker on ``path``, on the system clock, with :data:`SETTINGS`."""
    return Broker.open(path, transport=SETTINGS, busy_timeout=30)


def run_sender(broker: Broker, stop: Path | None) -> None:
    """Send numbered messages round robin until ``stop`` exists (then idle until SIGTERM)."""
    handles = dict(broker.execute("SELECT d, handle FROM dialogs ORDER BY d"))
    following = {d: 0 for d in handles}
    for d, n in broker.execute("SELECT d, MAX(n) FROM sent GROUP BY d"):
        following[d] = n + 1
    order = sorted(handles)
    turn = 0
    while not stopping.is_set():
        if stop is not None and stop.exists():
            stopping.wait(0.05)
            continue
        with broker.transaction() as tx:
            for _ in range(1 + turn % 2):
                d = order[turn % len(order)]
                n = following[d]
                tx.send(handles[d], "Order", f"<o d='{d}' n='{n}'/>")
                tx.execute("INSERT INTO sent (d, n) VALUES (?, ?)", (d, n))
                following[d] = n + 1
                turn += 1
        stopping.wait(0.004)  # a steady stream, not a flood


def run_receiver(broker: Broker) -> None:
    """RECEIVE and record each message in ``got`` in the same transaction, until SIGTERM."""
    while not stopping.is_set():
        with broker.transaction() as tx:
            msgs = tx.receive(QUEUE, top=200, timeout=0.2)
            rows = []
            for m in msgs:
                match = BODY.fullmatch(m.message_body)
                assert match is not None, m.message_body
                rows.append((int(match[1]), int(match[2])))
            if rows:
                tx.executemany("INSERT INTO got (d, n) VALUES (?, ?)", rows)


def arm_kill_points(die: Path) -> None:
    """Make this process SIGKILL itself at the next arrival taken once ``die`` says
    ``before`` (right before the arrival's commit) or ``after`` (right after the commit,
    before the acknowledgement is queued); ``die`` is deleted first."""
    armed: list[str] = []
    take_arrival = transport_receiving.take_arrival

    def arriving(applier: Any, header: Any, body: bytes, security: Any) -> Outcome:
        outcome = take_arrival(applier, header, body, security)
        if outcome.verdict is Verdict.DELIVERED and not armed and die.exists():
            point = die.read_text().strip()
            die.unlink()
            armed.append(point)
        return outcome

    class Applier(transport_receiving.Applier):
        def finish(self) -> None:
            super().finish()
            if armed == ["before"]:
                os.kill(os.getpid(), signal.SIGKILL)  # the arrival's transaction is open

    ack_back = transport_receiving.ReceivingSide._ack_back

    def acking(self: Any, conn: Any, ack: Any) -> None:
        if armed == ["after"]:
            os.kill(os.getpid(), signal.SIGKILL)  # committed; the ack is not queued yet
        ack_back(self, conn, ack)

    transport_receiving.take_arrival = arriving
    transport_receiving.Applier = Applier
    transport_receiving.ReceivingSide._ack_back = acking


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=("sender", "receiver"))
    parser.add_argument("db")
    parser.add_argument("--stop", type=Path, help="sender: stop sending once this file exists")
    parser.add_argument("--die", type=Path, help="receiver: the kill-point file (see module)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {args.role} %(threadName)s %(message)s"
    )
    faulthandler.register(signal.SIGUSR1)  # the parent asks for the stacks when stuck
    if args.die is not None:
        arm_kill_points(args.die)
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    broker = open_broker(args.db)
    try:
        broker.start()
        if not broker.transport.running:
            raise SystemExit(
                f"the transport of {args.db} did not start: "
                f"{broker.transport.statistics().start_status}"
            )
        print("started", flush=True)
        if args.role == "sender":
            run_sender(broker, args.stop)
        else:
            run_receiver(broker)
    finally:
        broker.close()


if __name__ == "__main__":
    main(sys.argv[1:])
