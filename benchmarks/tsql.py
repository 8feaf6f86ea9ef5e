"""T-SQL beside Python, side by side in one run: Microsoft's internal-activation tutorial's
procedure (``TargetActivProc``: RECEIVE TOP (1), reply to a request, COMMIT, loop) as T-SQL run
by the interpreter, against the same logic as a Python activation procedure — on SQLite and on
PostgreSQL.

Each round puts ``--messages`` requests on the target queue (each on its own dialog, sent before
the clock starts), then drains the queue with one reader and times it from the first RECEIVE to
the commit of the last reply: messages per second of each, and the ratio T-SQL / Python (the
issue's target: at least 0.5×). Both run in this process, not through activation, so the figure
is the interpreter's cost and nothing else; the procedure is the tutorial's, unchanged (its
final WAITFOR … TIMEOUT 5000 runs on a manual clock, moved once the queue is drained).

    python benchmarks/tsql.py [--messages 2000] [--rounds 3] [--postgres URL] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from bench_setup import POSTGRES_URL
from rich.console import Console
from rich.table import Table

from servicebroker import Instance, ManualClock
from servicebroker.tsql import Session

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "tsql"
INITIATOR = "//AWDB/InternalAct/InitiatorService"
TARGET = "//AWDB/InternalAct/TargetService"
CONTRACT = "//AWDB/InternalAct/SampleContract"
REQUEST = "//AWDB/InternalAct/RequestMessage"
REPLY = "//AWDB/InternalAct/ReplyMessage"
REPLY_BODY = "<ReplyMsg>Message for Initiator service.</ReplyMsg>".encode("utf-16-le")


def setup(location: str) -> Instance:
    """A fresh instance with the tutorial's objects and its procedure (lessons 1 and 2)."""
    instance = Instance.open(location, clock=ManualClock())
    instance.execute("CREATE DATABASE AdventureWorks2008R2")
    for n in (1, 2):
        instance.execute((DATA / f"internal_activation_lesson{n}.sql").read_text())
    # the procedure is run by this benchmark, not by activation
    instance.execute(
        "ALTER QUEUE TargetQueueIntAct WITH ACTIVATION (STATUS = OFF)",
        database="AdventureWorks2008R2",
    )
    return instance


def load(instance: Instance, messages: int) -> None:
    broker = instance.database("AdventureWorks2008R2")
    body = "<RequestMsg>Message for Target service.</RequestMsg>".encode("utf-16-le")
    for start in range(0, messages, 500):
        with broker.transaction() as tx:
            for _ in range(min(500, messages - start)):
                handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)
                tx.send(handle, REQUEST, body)


def python_procedure(instance: Instance) -> None:
    """TargetActivProc's logic in Python, as an activation procedure would be written."""
    broker = instance.database("AdventureWorks2008R2")
    while True:
        with broker.transaction() as tx:
            received = tx.receive("TargetQueueIntAct", top=1, timeout=0)
            if not received:
                break
            message = received[0]
            if message.message_type_name == REQUEST:
                tx.send(message.conversation_handle, REPLY, REPLY_BODY)


def tsql_procedure(instance: Instance) -> None:
    """EXEC TargetActivProc (the tutorial's text), its last WAITFOR ended by the clock once the
    queue is empty."""
    broker = instance.database("AdventureWorks2008R2")
    clock = instance.clock
    assert isinstance(clock, ManualClock)
    session = Session(instance, "AdventureWorks2008R2")
    done = threading.Event()

    def release() -> None:
        while not done.wait(0.002):
            if not broker.peek("TargetQueueIntAct", top=1):
                clock.advance(6)

    mover = threading.Thread(target=release, daemon=True)
    mover.start()
    try:
        session.run_batch("EXEC TargetActivProc")
    finally:
        done.set()
        mover.join()
        session.close()
    assert not session.results.errors, session.results.errors


def measure(location_for: dict[str, str], backend: str, messages: int, runner: str) -> float:
    instance = setup(location_for[runner])
    try:
        load(instance, messages)
        started = time.perf_counter()
        (tsql_procedure if runner == "tsql" else python_procedure)(instance)
        seconds = time.perf_counter() - started
        replies = len(instance.database("AdventureWorks2008R2").peek("InitiatorQueueIntAct"))
        assert replies == messages, (backend, runner, replies)
        return messages / seconds
    finally:
        instance.close()


def locations(backend: str, folder: Path, postgres: str) -> dict[str, str]:
    if backend == "sqlite":
        return {r: str(folder / f"{r}-{uuid.uuid4().hex[:6]}") for r in ("tsql", "python")}
    sep = "&" if "?" in postgres else "?"
    return {r: f"{postgres}{sep}instance=bench{uuid.uuid4().hex[:8]}" for r in ("tsql", "python")}


def drop_postgres(postgres: str, location: str) -> None:
    import psycopg

    name = location.rsplit("instance=", 1)[1]
    with psycopg.connect(postgres, autocommit=True) as c:
        for (schema,) in c.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (f"sb_{name}_",)
        ).fetchall():
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", default=POSTGRES_URL)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    table = Table(
        title=f"TargetActivProc over {args.messages:,} requests (msg/s, median of {args.rounds})"
    )
    for column in ("backend", "T-SQL", "Python", "T-SQL / Python", "target"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            rates: dict[str, list[float]] = {"tsql": [], "python": []}
            for _ in range(args.rounds):
                where = locations(backend, Path(tmp), args.postgres)
                try:
                    for runner in ("tsql", "python"):  # interleaved rounds
                        rates[runner].append(measure(where, backend, args.messages, runner))
                finally:
                    if backend == "postgres":
                        for location in where.values():
                            drop_postgres(args.postgres, location)
            tsql = statistics.median(rates["tsql"])
            python = statistics.median(rates["python"])
            ratio = tsql / python
            table.add_row(
                backend,
                f"{tsql:,.0f}",
                f"{python:,.0f}",
                f"{ratio:.2f}×",
                "≥ 0.5×: met" if ratio >= 0.5 else "≥ 0.5×: missed",
            )
    Console().print(table)


if __name__ == "__main__":
    main()
