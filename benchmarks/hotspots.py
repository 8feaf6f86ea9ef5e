"""Where the time of SEND and RECEIVE goes: one thread SENDs ``--messages`` messages on
``--conversations`` dialogs (one group each), ``--batch`` per transaction, then RECEIVEs them
TOP (batch), each phase under cProfile; prints msg/s, network round trips to PostgreSQL per
transaction (a pipeline of statements counts one) and the functions that took the most time.

    python benchmarks/hotspots.py [--url sqlite-path-or-postgresql-URL] [--conversations 64]
        [--batch 100] [--messages 20000] [--top 12]

Without ``--url``: a fresh SQLite file. A PostgreSQL URL gets a fresh schema, dropped after.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import tempfile
import time
import uuid
from typing import Any

from bench_setup import open_dialogs

from servicebroker import Broker

BODY = b"x" * 100


def _count_statements() -> list[int]:
    """Count network round trips to PostgreSQL from here on (0 forever on SQLite): a statement
    run alone, an ``executemany`` and a pipeline (statements sent together, one sync) count one
    each."""
    calls = [0]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the postgres extra is part of dev
        return calls
    depth = [0]
    execute, executemany, pipeline = (
        psycopg.Connection.execute,
        psycopg.Cursor.executemany,
        psycopg.Connection.pipeline,
    )

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not depth[0]:
            calls[0] += 1
        return execute(self, *args, **kwargs)

    def counted_many(self: Any, *args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        calls[0] += 1
        try:
            return executemany(self, *args, **kwargs)
        finally:
            depth[0] -= 1

    @contextlib.contextmanager
    def counted_pipeline(self: Any) -> Any:
        depth[0] += 1
        calls[0] += 1
        try:
            with pipeline(self) as p:
                yield p
        finally:
            depth[0] -= 1

    psycopg.Connection.execute = counted  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_many  # type: ignore[method-assign]
    psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign,assignment]
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url")
    parser.add_argument("--conversations", type=int, default=64)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    schema = None
    with tempfile.TemporaryDirectory() as folder:
        url = args.url or os.path.join(folder, "hotspots.db")
        if url.startswith(("postgresql://", "postgres://")):
            import psycopg

            schema = f"sbhotspots_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(url, autocommit=True) as c:
                c.execute(f"CREATE SCHEMA {schema}")
            url = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
        broker = Broker.open(url)
        handles = open_dialogs(broker, args.conversations)
        statements = _count_statements()
        total = args.messages - args.messages % args.batch

        def send() -> int:
            for n in range(total // args.batch):
                with broker.transaction() as tx:
                    for k in range(args.batch):
                        tx.send(handles[(n * args.batch + k) % len(handles)], "M", BODY)
            return total // args.batch

        def receive() -> int:
            got = transactions = 0
            while got < total:
                with broker.transaction() as tx:
                    got += len(tx.receive("tq", top=args.batch))
                transactions += 1
            return transactions

        for name, phase in (("SEND", send), ("RECEIVE", receive)):
            statements[0] = 0
            profile = cProfile.Profile()
            start = time.perf_counter()
            profile.enable()
            transactions = phase()
            profile.disable()
            seconds = time.perf_counter() - start
            print(
                f"\n{name}: {total / seconds:,.0f} msg/s, {seconds / total * 1e6:.1f} µs per "
                f"message, {statements[0] / transactions:.1f} round trips per transaction"
            )
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
        broker.close()
        if schema is not None:
            import psycopg

            with psycopg.connect(args.url, autocommit=True) as c:
                c.execute(f"DROP SCHEMA {schema} CASCADE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
