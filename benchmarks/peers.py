"""servicebroker beside its peers, side by side in one run: a raw SQLite queue, servicebroker on
SQLite, a raw PostgreSQL ``FOR UPDATE SKIP LOCKED`` queue, PGMQ (its SQL installed from the
``pgmq`` Python package, no extension needed) and servicebroker on PostgreSQL.

Each figure is messages per second from the first send to the last receive's commit, with one
sender process and one receiver process at once, 100-byte bodies, at 1, 10 and 100 messages per
transaction, servicebroker in four shapes of load (``--shapes``: one dialog; 64 dialogs in 64
conversation groups, one RECEIVE TOP (n) per transaction; the same with RECEIVE repeated in the
transaction until it has n messages — its sender putting a transaction's messages in one
``send_many`` in these three; 64 groups with the sender calling ``tx.send`` per message); then the round trip (SEND, commit, RECEIVE, commit, one message at a time, one
process, one dialog); then 1, 2, 4 and 8 receiver processes on PostgreSQL doing ``--work-ms`` of
simulated work per message (the scaling curve, each count beside the one-receiver figure). Each
figure is the median of ``--rounds`` interleaved rounds. Durable defaults everywhere: SQLite
WAL + synchronous=FULL; PostgreSQL fsync and synchronous_commit on.

    python benchmarks/peers.py [--postgres URL] [--messages 10000] [--batches 1,10,100]
        [--readers 1,2,4,8] [--work-ms 1] [--shapes one,groups,repeated,each] [--rounds 3]

PostgreSQL: a database ``servicebroker_bench`` on the server of ``--postgres`` (default
``SERVICEBROKER_TEST_POSTGRES_URL`` or ``postgresql://postgres@127.0.0.1:5432/postgres``), made
if missing; PGMQ's schema is installed there.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench_setup import POSTGRES_URL, drop_schema, open_dialogs, postgres_schema
from rich.console import Console
from rich.table import Table

from servicebroker import Broker

BODY = b"x" * 100
SHAPES = {
    "one": "1 conversation",
    "groups": "64 groups, one RECEIVE",
    "repeated": "64 groups, RECEIVE repeated",
    "each": "64 groups, tx.send per message",
}
"""servicebroker's shapes of load: one dialog; 64 dialogs in 64 groups with one RECEIVE TOP (n)
per transaction; the same with RECEIVE repeated in the transaction up to n messages; 64 groups
with the sender calling ``tx.send`` once per message, as an application naturally does (the
other shapes put a transaction's messages in one ``send_many``)."""
ctx = mp.get_context("spawn")


# -- the queues: each a (setup, send, receive) triple working on its own connection ---------------


def _sqlite(path: str) -> sqlite3.Connection:
    c = sqlite3.connect(path, isolation_level=None, timeout=60)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=FULL")
    return c


def raw_sqlite_setup(target: str, shape: str = "groups") -> None:
    _sqlite(target).execute("CREATE TABLE q (id INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB)")


def raw_sqlite_sender(target: str, shape: str = "groups") -> Callable[[int], None]:
    c = _sqlite(target)

    def send(n: int) -> None:
        c.execute("BEGIN IMMEDIATE")
        c.executemany("INSERT INTO q (body) VALUES (?)", [(BODY,)] * n)
        c.execute("COMMIT")

    return send


def raw_sqlite_receiver(target: str, shape: str = "groups") -> Callable[[int], int]:
    c = _sqlite(target)

    def receive(n: int) -> int:
        c.execute("BEGIN IMMEDIATE")
        rows = c.execute("SELECT id, body FROM q ORDER BY id LIMIT ?", (n,)).fetchall()
        if rows:
            c.execute("DELETE FROM q WHERE id <= ?", (rows[-1][0],))
        c.execute("COMMIT")
        return len(rows)

    return receive


def raw_pg_setup(target: str, shape: str = "groups") -> None:
    import psycopg

    with psycopg.connect(target, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS bench_q")
        c.execute("CREATE TABLE bench_q (id BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL)")


def raw_pg_sender(target: str, shape: str = "groups") -> Callable[[int], None]:
    import psycopg

    c = psycopg.connect(target, autocommit=True)

    def send(n: int) -> None:
        with c.transaction(), c.cursor() as cur:
            cur.executemany("INSERT INTO bench_q (body) VALUES (%s)", [(BODY,)] * n)

    return send


def raw_pg_receiver(target: str, shape: str = "groups") -> Callable[[int], int]:
    import psycopg

    c = psycopg.connect(target, autocommit=True)

    def receive(n: int) -> int:
        with c.transaction():
            rows = c.execute(
                "DELETE FROM bench_q WHERE id IN (SELECT id FROM bench_q ORDER BY id LIMIT %s "
                "FOR UPDATE SKIP LOCKED) RETURNING id, body",
                (n,),
            ).fetchall()
        return len(rows)

    return receive


def pgmq_setup(target: str, shape: str = "groups") -> None:
    import psycopg
    from pgmq.install import get_embedded_install_sql

    with psycopg.connect(target, autocommit=True) as c:
        if c.execute("SELECT to_regnamespace('pgmq')").fetchone()[0] is None:
            c.execute(get_embedded_install_sql().encode())
        if c.execute("SELECT 1 FROM pgmq.list_queues() WHERE queue_name = 'bench'").fetchone():
            c.execute("SELECT pgmq.drop_queue('bench')")
        c.execute("SELECT pgmq.create('bench')")


def pgmq_sender(target: str, shape: str = "groups") -> Callable[[int], None]:
    import psycopg

    c = psycopg.connect(target, autocommit=True)
    body = json.dumps(BODY.decode())

    def send(n: int) -> None:
        c.execute("SELECT pgmq.send_batch('bench', %s::jsonb[])", ([body] * n,))

    return send


def pgmq_receiver(target: str, shape: str = "groups") -> Callable[[int], int]:
    import psycopg

    c = psycopg.connect(target, autocommit=True)

    def receive(n: int) -> int:
        return len(c.execute("SELECT msg_id FROM pgmq.pop('bench', %s)", (n,)).fetchall())

    return receive


def sb_setup(target: str, shape: str = "groups") -> None:
    with Broker.open(target) as broker:
        handles = [str(h) for h in open_dialogs(broker, 1 if shape == "one" else 64)]
        broker.execute("CREATE TABLE bench_handles (handle TEXT)")
        mark = "?" if broker.paramstyle == "qmark" else "%s"
        with broker.transaction() as tx:
            tx.executemany(f"INSERT INTO bench_handles VALUES ({mark})", [(h,) for h in handles])


def sb_sender(target: str, shape: str = "groups") -> Callable[[int], None]:
    """SENDs of a transaction go round-robin over the dialogs, in one ``send_many`` (shape
    ``each``: one ``tx.send`` per message)."""
    broker = Broker.open(target)
    handles = [uuid.UUID(r[0]) for r in broker.execute("SELECT handle FROM bench_handles")]
    turn = [0]

    def send(n: int) -> None:
        first = turn[0]
        turn[0] += n
        with broker.transaction() as tx:
            if shape == "each":
                for i in range(first, first + n):
                    tx.send(handles[i % len(handles)], "M", BODY)
            else:
                tx.send_many(
                    (handles[i % len(handles)], "M", BODY) for i in range(first, first + n)
                )

    return send


def sb_receiver(target: str, shape: str = "groups") -> Callable[[int], int]:
    """One RECEIVE TOP (n) per transaction; ``repeated``: RECEIVE again in the transaction
    (each RECEIVE takes one group, RCV-5) until it has n messages or the queue is empty."""
    broker = Broker.open(target)

    def receive(n: int) -> int:
        with broker.transaction() as tx:
            got = len(tx.receive("tq", top=n, timeout=0.05))
            while shape == "repeated" and got and got < n:
                more = len(tx.receive("tq", top=n - got))
                if not more:
                    break
                got += more
            return got

    return receive


QUEUES: dict[str, tuple[Callable[..., Any], ...]] = {
    "raw SQLite": (raw_sqlite_setup, raw_sqlite_sender, raw_sqlite_receiver),
    "servicebroker SQLite": (sb_setup, sb_sender, sb_receiver),
    "raw PostgreSQL SKIP LOCKED": (raw_pg_setup, raw_pg_sender, raw_pg_receiver),
    "PGMQ": (pgmq_setup, pgmq_sender, pgmq_receiver),
    "servicebroker PostgreSQL": (sb_setup, sb_sender, sb_receiver),
}


# -- the processes ------------------------------------------------------------------------------


def _send_process(name: str, shape: str, target: str, total: int, batch: int, go: Any) -> None:
    send = QUEUES[name][1](target, shape)
    go.wait()
    for _ in range(total // batch):
        send(batch)


def _receive_process(
    name: str, shape: str, target: str, batch: int, total: int, received: Any, go: Any, work: float
) -> None:
    receive = QUEUES[name][2](target, shape)
    go.wait()
    while received.value < total:
        got = receive(batch)
        if work and got:
            time.sleep(work * got)  # simulated processing of each message
        with received.get_lock():
            received.value += got


def run(
    name: str,
    target: str,
    total: int,
    batch: int,
    readers: int = 1,
    work: float = 0.0,
    shape: str = "groups",
) -> float:
    """Messages per second of ``name`` with one sender and ``readers`` receiver processes."""
    QUEUES[name][0](target, shape)
    go = ctx.Event()
    received = ctx.Value("q", 0)
    procs = [ctx.Process(target=_send_process, args=(name, shape, target, total, batch, go))] + [
        ctx.Process(
            target=_receive_process,
            args=(name, shape, target, batch, total, received, go, work),
        )
        for _ in range(readers)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # every process connected
    start = time.perf_counter()
    go.set()
    for p in procs:
        p.join()
    return total / (time.perf_counter() - start)


def round_trip(name: str, target: str, total: int) -> float:
    """SEND (commit), then RECEIVE (commit), one message at a time, in one process."""
    QUEUES[name][0](target, "one")
    send, receive = QUEUES[name][1](target, "one"), QUEUES[name][2](target, "one")
    start = time.perf_counter()
    for _ in range(total):
        send(1)
        while not receive(1):
            pass
    return total / (time.perf_counter() - start)


def medians(
    runs: list[tuple[str, str]], rounds: int, measure: Callable[[str, str], float]
) -> dict[tuple[str, str], float]:
    """The median over ``rounds`` of ``measure(name, shape)`` for each of ``runs``, the rounds
    interleaved (every run once per round), so that a slow moment of the machine falls on all."""
    samples: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
    for _ in range(rounds):
        for name, shape in runs:
            samples[name, shape].append(measure(name, shape))
    return {r: statistics.median(v) for r, v in samples.items()}


def _targets(
    postgres: str, folder: str, made: list[str]
) -> tuple[str, dict[str, Callable[[], str]]]:
    """The PostgreSQL server URL of the benchmark database, and per queue a function making a
    fresh target (servicebroker on PostgreSQL: a new schema, its URL appended to ``made``)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with psycopg.connect(postgres, autocommit=True) as c:
        if not c.execute(
            "SELECT 1 FROM pg_database WHERE datname = 'servicebroker_bench'"
        ).fetchone():
            c.execute("CREATE DATABASE servicebroker_bench")
    bench = make_conninfo(postgres, dbname="servicebroker_bench")
    params = conninfo_to_dict(bench)
    url = (
        f"postgresql://{params.get('user', 'postgres')}@{params.get('host', '127.0.0.1')}:"
        f"{params.get('port', 5432)}/servicebroker_bench"
    )

    def sb_pg() -> str:
        made.append(postgres_schema(url))
        return made[-1]

    counter = [0]

    def sqlite_file() -> str:
        counter[0] += 1
        return os.path.join(folder, f"bench{counter[0]}.db")

    return url, {
        "raw SQLite": sqlite_file,
        "servicebroker SQLite": sqlite_file,
        "raw PostgreSQL SKIP LOCKED": lambda: url,
        "PGMQ": lambda: url,
        "servicebroker PostgreSQL": sb_pg,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--postgres",
        default=POSTGRES_URL,
    )
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--batches", default="1,10,100")
    parser.add_argument("--readers", default="1,2,4,8")
    parser.add_argument("--work-ms", type=float, default=1.0)
    parser.add_argument("--shapes", default="one,groups,repeated,each", help=", ".join(SHAPES))
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds, interleaved; each figure is their median"
    )
    args = parser.parse_args()
    console = Console(width=170)
    made: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        server, target = _targets(args.postgres, folder, made)
        try:
            report(args, console, target)
        finally:
            for url in made:
                drop_schema(server, url)
    return 0


def report(
    args: argparse.Namespace, console: Console, target: dict[str, Callable[[], str]]
) -> None:
    """Run every figure and print the two tables."""
    table = Table(title="msg/s, one sender and one receiver process at once, 100-byte bodies")
    table.add_column("load")
    for name in QUEUES:
        table.add_column(name, justify="right")
    table.add_column("sb SQLite / raw", justify="right")
    table.add_column("sb PostgreSQL / best peer", justify="right")
    ours = ("servicebroker SQLite", "servicebroker PostgreSQL")
    shapes = args.shapes.split(",")
    for batch in (int(b) for b in args.batches.split(",")):
        total = max(batch, (args.messages // (10 if batch == 1 else 1)) // batch * batch)
        runs = [(n, "groups") for n in QUEUES if n not in ours] + [
            (n, shape) for shape in shapes for n in ours
        ]
        fig = medians(
            runs,
            args.rounds,
            lambda n, shape, t=total, b=batch: run(n, target[n](), t, b, shape=shape),
        )
        best = max(fig["raw PostgreSQL SKIP LOCKED", "groups"], fig["PGMQ", "groups"])
        for shape in shapes:
            row = {n: fig[n, shape if n in ours else "groups"] for n in QUEUES}
            table.add_row(
                f"{batch} per transaction, {SHAPES[shape]}",
                *(f"{row[n]:,.0f}" for n in QUEUES),
                f"{row['servicebroker SQLite'] / row['raw SQLite']:.0%}",
                f"{row['servicebroker PostgreSQL'] / best:.0%}",
            )
    trips = max(100, args.messages // 20)
    fig = medians(
        [(n, "one") for n in QUEUES if n != "PGMQ"],
        args.rounds,
        lambda n, _: round_trip(n, target[n](), trips),
    )
    table.add_row(
        "SEND then RECEIVE, one at a time",
        *(f"{fig[n, 'one']:,.0f}" if n != "PGMQ" else "–" for n in QUEUES),
        f"{fig['servicebroker SQLite', 'one'] / fig['raw SQLite', 'one']:.0%}",
        f"{fig['servicebroker PostgreSQL', 'one'] / fig['raw PostgreSQL SKIP LOCKED', 'one']:.0%}",
    )
    console.print(table)
    scaling = Table(
        title=f"PostgreSQL, receivers doing {args.work_ms:g} ms of work per message, "
        f"batch 10, msg/s"
    )
    scaling.add_column("receiver processes", justify="right")
    pg = ("raw PostgreSQL SKIP LOCKED", "servicebroker PostgreSQL")
    for name in pg:
        scaling.add_column(name, justify="right")
        scaling.add_column("× one receiver", justify="right")
    total = args.messages // 5 // 10 * 10
    first: dict[str, float] = {}
    for readers in (int(r) for r in args.readers.split(",")):
        fig = medians(
            [(n, "groups") for n in pg],
            args.rounds,
            lambda n, _, r=readers: run(n, target[n](), total, 10, r, args.work_ms / 1000),
        )
        cells = []
        for n in pg:
            first.setdefault(n, fig[n, "groups"])
            cells += [f"{fig[n, 'groups']:,.0f}", f"{fig[n, 'groups'] / first[n]:.2f}"]
        scaling.add_row(str(readers), *cells)
    console.print(scaling)


if __name__ == "__main__":
    raise SystemExit(main())
