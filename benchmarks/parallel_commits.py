"""Readers that write the application's own rows in the RECEIVE transaction, on PostgreSQL:
each transaction RECEIVEs up to 10 messages, inserts a row per message with ``tx.execute`` (so
the write transaction is open from there on), works ``--work-ms`` per message, answers nothing
and commits. With a database-wide commit lock the readers' transactions run one after another
from their first ``tx.execute`` on; with parallel commits they overlap.

    python benchmarks/parallel_commits.py [--postgres URL] [--messages 2000] [--readers 1,2,4]
        [--work-ms 1]

Prints messages per second for each reader count (threads of one process, each on its own
session). Run it with ``PYTHONPATH=<another tree>/src`` to compare two versions side by side.
"""

from __future__ import annotations

import argparse
import threading
import time

from bench_setup import POSTGRES_URL, drop_schema, open_dialogs, postgres_schema

from servicebroker import Broker

TOP = 10


def run(server: str, messages: int, readers: int, work: float) -> float:
    """Messages per second with ``readers`` reader threads draining ``messages`` messages."""
    url = postgres_schema(server)
    try:
        return _drain(url, messages, readers, work)
    finally:
        drop_schema(server, url)


def _drain(url: str, messages: int, readers: int, work: float) -> float:
    with Broker.open(url, pool_size=readers + 2) as broker:
        handles = open_dialogs(broker, 64)
        broker.execute("CREATE TABLE results (body bytea)")
        with broker.transaction() as tx:
            for n in range(messages):
                tx.send(handles[n % len(handles)], "M", b"x" * 100)
        done = [0]
        lock = threading.Lock()

        def read() -> None:
            while True:
                with broker.transaction() as tx:
                    got = tx.receive("tq", top=TOP)
                    for m in got:
                        tx.execute("INSERT INTO results VALUES (%s)", (m.message_body,))
                        time.sleep(work)
                with lock:
                    done[0] += len(got)
                    if done[0] >= messages or not got:
                        return

        threads = [threading.Thread(target=read) for _ in range(readers)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        assert broker.execute("SELECT count(*) FROM results") == [(messages,)]
    return messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--postgres",
        default=POSTGRES_URL,
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--readers", default="1,2,4")
    parser.add_argument("--work-ms", type=float, default=1.0)
    args = parser.parse_args()
    for readers in (int(r) for r in args.readers.split(",")):
        rate = run(args.postgres, args.messages, readers, args.work_ms / 1000)
        print(f"{readers} reader(s): {rate:,.0f} msg/s")


if __name__ == "__main__":
    main()
