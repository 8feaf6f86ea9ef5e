"""What one SEND transaction and one RECEIVE transaction cost: wall time and this process's CPU
(Python and the driver) per transaction, on 64 dialogs, ``--batch`` messages per transaction
(``tx.send`` per message), the SENDs first and then the RECEIVEs, nothing else running.

    python benchmarks/transaction_costs.py [--url sqlite-path-or-postgresql-URL] [--batch 1]
        [--messages 2000]

Without ``--url``: a fresh SQLite file. A PostgreSQL URL gets a fresh schema, dropped after.
The server's own time per statement is not measured here: on PostgreSQL, run the same with
``options=-clog_min_duration_statement%3D0`` in the URL (a superuser's) and read the server's
log (docs/performance.md, "Where issue 29 ends").
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from bench_setup import drop_schema, open_dialogs, postgres_schema

from servicebroker import Broker

BODY = b"x" * 100


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = args.url
        postgres = bool(server and server.startswith(("postgresql://", "postgres://")))
        url = postgres_schema(server) if postgres else (server or os.path.join(folder, "c.db"))
        broker = Broker.open(url)
        try:
            handles = open_dialogs(broker, 64)
            for i in range(200):  # warm: the statements prepared, the endpoints' copies kept
                with broker.transaction() as tx:
                    tx.send(handles[i % 64], "M", BODY)
            while True:
                with broker.transaction() as tx:
                    if not tx.receive("tq", top=100):
                        break
            transactions = args.messages // args.batch
            wall, cpu = time.perf_counter(), time.process_time()
            for n in range(transactions):
                with broker.transaction() as tx:
                    for k in range(args.batch):
                        tx.send(handles[(n * args.batch + k) % 64], "M", BODY)
            _report("SEND", transactions, args.batch, wall, cpu)
            received = taken = 0
            wall, cpu = time.perf_counter(), time.process_time()
            while received < transactions * args.batch:
                with broker.transaction() as tx:
                    received += len(tx.receive("tq", top=args.batch))
                taken += 1
            _report("RECEIVE", taken, received / taken, wall, cpu)
        finally:
            broker.close()
            if postgres:
                drop_schema(server, url)
    return 0


def _report(what: str, transactions: int, per: float, wall: float, cpu: float) -> None:
    seconds = time.perf_counter() - wall
    used = time.process_time() - cpu
    print(
        f"{what}: {transactions:,} transactions of {per:g} message(s), "
        f"{seconds / transactions * 1e3:.2f} ms wall and {used / transactions * 1e3:.2f} ms "
        f"of this process's CPU per transaction, {transactions * per / seconds:,.0f} msg/s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
