"""Run under Debian's ``fiu-run -x`` by tests/test_faults_sqlite.py: sends and receives on an
SQLite broker while libfiu makes a few per cent of ``pwrite`` and ``fsync``/``fdatasync`` calls
fail with EIO, then prints what it saw as JSON (one line).

Usage: fiu_child.py DB_PATH OPERATIONS PROBABILITY SEED
"""

from __future__ import annotations

import ctypes
import json
import random
import sys
from collections import Counter

from servicebroker import Broker, BrokerError, Outcome, StorageError, StorageIOError
from servicebroker.testing.faults import check

POINTS = (
    "posix/io/rw/pwrite",
    "posix/io/rw/pwrite64",
    "posix/io/sync/fsync",
    "posix/io/sync/fdatasync",
)
EIO = 5
fiu = ctypes.CDLL("libfiu.so.0")
fiu.fiu_enable_random.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_float]
fiu.fiu_enable.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint]
fiu.fiu_disable.argtypes = [ctypes.c_char_p]


def faults(probability: float) -> None:
    for point in POINTS:
        if probability:
            fiu.fiu_enable_random(point.encode(), 1, ctypes.c_void_p(EIO), probability)
        else:
            fiu.fiu_disable(point.encode())


def main() -> None:
    path, operations, probability, seed = (
        sys.argv[1],
        int(sys.argv[2]),
        float(sys.argv[3]),
        int(sys.argv[4]),
    )
    rng = random.Random(seed)
    broker = Broker.open(path, busy_timeout=5)
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "INITIATOR"})
    broker.create_queue("q")
    broker.create_service("s", queue="q", contracts=["C"])
    broker.execute("CREATE TABLE sent (tag TEXT)")
    broker.execute("CREATE TABLE got (id INTEGER PRIMARY KEY, tag TEXT)")
    with broker.transaction() as tx:
        handles = [tx.begin_dialog("s", "s", contract="C") for _ in range(4)]

    # one COMMIT whose fsync fails: an I/O error with an unknown outcome
    fiu.fiu_enable(b"posix/io/sync/fdatasync", 1, ctypes.c_void_p(EIO), 0)
    fiu.fiu_enable(b"posix/io/sync/fsync", 1, ctypes.c_void_p(EIO), 0)
    commit_error: dict[str, str] = {}
    try:
        with broker.transaction() as tx:
            tx.execute("INSERT INTO sent VALUES ('probe')")
    except StorageError as exc:
        commit_error = {
            "type": type(exc).__name__,
            "outcome": exc.outcome.value,
            "message": str(exc),
        }
    faults(0.0)

    failures: Counter[str] = Counter()
    foreign: list[str] = []
    attempted: set[str] = set()
    acked: list[str] = []
    seq = [0] * len(handles)
    unknown = 0
    faults(probability)
    for _ in range(operations):
        try:
            if rng.random() < 0.6:
                i = rng.randrange(len(handles))
                tag = f"{i}:{seq[i]}"
                attempted.add(tag)
                try:
                    with broker.transaction() as tx:
                        tx.send(handles[i], "M", tag.encode())
                        tx.execute("INSERT INTO sent VALUES (?)", (tag,))
                    ok = True
                except StorageError as exc:
                    if exc.outcome is not Outcome.UNKNOWN:
                        raise
                    unknown += 1
                    failures[type(exc).__name__] += 1
                    faults(0.0)  # the documented check, once the disk answers again
                    ok = bool(broker.execute("SELECT 1 FROM sent WHERE tag = ?", (tag,)))
                    faults(probability)
                if ok:
                    acked.append(tag)
                    seq[i] += 1
            else:
                with broker.transaction() as tx:
                    msgs = tx.receive("q", top=5)
                    if msgs:
                        tx.executemany(
                            "INSERT INTO got (tag) VALUES (?)",
                            [(m.message_body.decode(),) for m in msgs],
                        )
        except BrokerError as exc:
            failures[type(exc).__name__] += 1
        except Exception as exc:  # anything else is a defect
            foreign.append(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
    faults(0.0)
    while True:  # drain what is left
        with broker.transaction() as tx:
            msgs = tx.receive("q", top=100)
            if not msgs:
                break
            tx.executemany(
                "INSERT INTO got (tag) VALUES (?)", [(m.message_body.decode(),) for m in msgs]
            )
    delivered = [r[0] for r in broker.execute("SELECT tag FROM got ORDER BY id")]
    integrity = broker.execute("PRAGMA integrity_check")
    stats = broker.views.dm_broker_storage_sessions()[0]
    broker.close()
    print(
        json.dumps(
            {
                "commit_error": commit_error,
                "counts": check(attempted, acked, delivered),
                "unknown": unknown,
                "failures": dict(failures),
                "foreign": foreign,
                "integrity": [r[0] for r in integrity],
                "sessions_in_use": stats.sessions_in_use,
                "io_error_class": StorageIOError.__name__,
            }
        )
    )


if __name__ == "__main__":
    main()
