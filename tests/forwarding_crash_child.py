"""One broker of tests/test_forwarding_crash.py, in a process of its own on the real clock with
tests/transport_crash_child.py's short transport intervals; the parent SIGKILLs the forwarder
and starts it again on the same database and port.

Usage: ``python -m tests.forwarding_crash_child ROLE DB_PATH [--stop FILE]``

``sender``: sends numbered messages as transport_crash_child's sender does (``sent`` in the
same transaction as each SEND, stopping once ``--stop FILE`` exists), and in the same
transactions RECEIVEs the replies on ``shop_q``, recording each in its table ``replies`` (d, n).
``receiver``: RECEIVEs from ``warehouse_q``, recording each message in ``got`` (d, n) and
SENDing a ``Receipt`` ``d n`` back on its conversation, all in one transaction.
``forwarder``: runs its broker only (MESSAGE_FORWARDING is on its endpoint).

Each ends cleanly on SIGTERM (the broker is closed).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from servicebroker import Broker

from . import transport_crash_child as child

REPLY = "Receipt"


def run_sender(broker: Broker, stop: Path | None) -> None:
    """Send numbered messages round robin (as transport_crash_child's sender) until ``stop``
    exists, then only take replies; each transaction also RECEIVEs the replies waiting on
    ``shop_q`` (without waiting) and records each in ``replies`` — one thread, one writer."""
    handles = dict(broker.execute("SELECT d, handle FROM dialogs ORDER BY d"))
    following = {d: 0 for d in handles}
    for d, n in broker.execute("SELECT d, MAX(n) FROM sent GROUP BY d"):
        following[d] = n + 1
    order = sorted(handles)
    turn = 0
    while not child.stopping.is_set():
        sending = stop is None or not stop.exists()
        with broker.transaction() as tx:
            for _ in range(1 + turn % 2 if sending else 0):
                d = order[turn % len(order)]
                n = following[d]
                tx.send(handles[d], "Order", f"<o d='{d}' n='{n}'/>")
                tx.execute("INSERT INTO sent (d, n) VALUES (?, ?)", (d, n))
                following[d] = n + 1
                turn += 1
            rows = []
            for m in tx.receive("shop_q", top=200):
                if m.message_type_name != REPLY:
                    continue  # an Error or EndDialog would show as a missing reply
                d, n = m.message_body.split()
                rows.append((int(d), int(n)))
            if rows:
                tx.executemany("INSERT INTO replies (d, n) VALUES (?, ?)", rows)
        child.stopping.wait(0.004 if sending else 0.05)  # a steady stream, not a flood


def run_receiver(broker: Broker) -> None:
    """RECEIVE, record in ``got`` and reply, in one transaction each batch, until SIGTERM."""
    while not child.stopping.is_set():
        with broker.transaction() as tx:
            msgs = tx.receive(child.QUEUE, top=200, timeout=0.2)
            rows = []
            for m in msgs:
                match = child.BODY.fullmatch(m.message_body)
                assert match is not None, m.message_body
                d, n = int(match[1]), int(match[2])
                rows.append((d, n))
                tx.send(m.conversation_handle, REPLY, f"{d} {n}".encode())
            if rows:
                tx.executemany("INSERT INTO got (d, n) VALUES (?, ?)", rows)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=("sender", "receiver", "forwarder"))
    parser.add_argument("db")
    parser.add_argument("--stop", type=Path, help="sender: stop sending once this file exists")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {args.role} %(threadName)s %(message)s"
    )
    signal.signal(signal.SIGTERM, lambda *_: child.stopping.set())
    broker = child.open_broker(args.db)
    try:
        broker.start()
        if not broker.transport.running:
            raise SystemExit(f"the transport of {args.db} did not start")
        print("started", flush=True)
        if args.role == "sender":
            run_sender(broker, args.stop)
        elif args.role == "receiver":
            run_receiver(broker)
        else:
            child.stopping.wait()
    finally:
        broker.close()


if __name__ == "__main__":
    main(sys.argv[1:])
