"""A transaction the application loses — neither committed nor rolled back, then garbage —
rolls back: its writes are undone, SQLite's single write lock and the group locks it held are
released, and the broker's next write does not wait. ``Broker.close()`` rolls back the
transactions still open, so closing does not wait for their locks and another broker can write
at once. Every wait is bounded by a short busy time-out or a thread's join time-out: the bug
these tests guard against held the lock for good."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from servicebroker import Broker
from servicebroker.clock import ManualClock
from servicebroker.errors import TransactionError

from .conftest import make_pair

BUSY = 2.0
"""The brokers' busy time-out here, real seconds: how long a write waits for a lock."""
PROMPT = 1.5
"""Real seconds within which what must not wait has finished (below :data:`BUSY`)."""


@pytest.fixture
def short(url: str, clock: ManualClock) -> Iterator[Broker]:
    """A broker whose writes wait at most :data:`BUSY` seconds for a lock, with a table ``t``
    of one row ``(1, 0)``."""
    b = Broker.open(url, clock=clock, poll_interval=0.01, busy_timeout=BUSY)
    with b.transaction() as tx:
        tx.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)")
        tx.execute("INSERT INTO t VALUES (1, 0)")
    try:
        yield b
    finally:
        b.close()


def within(seconds: float, work: Callable[[], Any]) -> Any:
    """Run ``work`` in a thread; its result once it finished within ``seconds`` real seconds.

    Raises:
        AssertionError: it did not finish in time (the thread is left to its busy time-out).
        BaseException: what ``work`` raised.
    """
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("ok", work()))
        except BaseException as exc:  # handed to the test's thread
            outcome.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {time.monotonic() - started:.1f} s"
    kind, value = outcome[0]
    if kind == "raised":
        raise value
    return value


def write(broker: Broker, value: int) -> list[tuple[Any, ...]]:
    """Set ``t``'s row to ``value`` in a transaction of its own; the table after."""
    with broker.transaction() as tx:
        tx.execute(f"UPDATE t SET v = {int(value)} WHERE k = 1")
    with broker.transaction() as tx:
        return tx.execute("SELECT k, v FROM t ORDER BY k")


def lose(broker: Broker, value: int) -> None:
    """A transaction that writes ``value`` into ``t`` and is dropped, neither committed nor
    rolled back."""
    tx = broker.transaction()
    tx.execute(f"UPDATE t SET v = {int(value)} WHERE k = 1")
    del tx


def test_a_dropped_transaction_rolls_back_and_frees_the_writer(short: Broker) -> None:
    lose(short, 7)
    gc.collect()
    assert within(PROMPT, lambda: write(short, 2)) == [(1, 2)]


def test_a_transaction_left_after_a_refused_commit_statement_rolls_back(short: Broker) -> None:
    tx = short.transaction()
    tx.execute("UPDATE t SET v = 9 WHERE k = 1")
    with pytest.raises(TransactionError):
        tx.execute("COMMIT")  # refused; the caller does not roll back
    del tx
    gc.collect()
    assert within(PROMPT, lambda: write(short, 3)) == [(1, 3)]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_dropped_receiving_transaction_gives_its_messages_back(broker: Broker) -> None:
    # SQLite only: there the lost transaction's group lock is held by its lock file's
    # descriptor, kept open in the process; a lost PostgreSQL session that is collected closes
    # with its psycopg connection, and the server frees its locks without the broker's help
    pair = make_pair(broker)
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"hello")
    tx = broker.transaction()
    assert [m.message_body for m in tx.receive(pair.tq)] == [b"hello"]
    del tx
    gc.collect()
    with broker.transaction() as again:
        assert [m.message_body for m in again.receive(pair.tq)] == [b"hello"]


def test_close_rolls_back_open_transactions_and_returns_promptly(
    url: str, clock: ManualClock
) -> None:
    first = Broker.open(url, clock=clock, poll_interval=0.01, busy_timeout=BUSY)
    with first.transaction() as tx:
        tx.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)")
        tx.execute("INSERT INTO t VALUES (1, 0)")
    open_tx = first.transaction()
    open_tx.execute("UPDATE t SET v = 5 WHERE k = 1")
    within(PROMPT, first.close)
    with pytest.raises(TransactionError):
        open_tx.commit()  # it was rolled back
    second = Broker.open(url, clock=clock, poll_interval=0.01, busy_timeout=BUSY)
    try:
        assert within(PROMPT, lambda: write(second, 4)) == [(1, 4)]
    finally:
        second.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_transaction_dropped_in_another_thread_rolls_back(short: Broker) -> None:
    # SQLite only: the write lock is this process's; on PostgreSQL a session collected with its
    # psycopg connection (a daemon's garbage collection here) is let go by the server anyway
    holder = [short.transaction()]
    holder[0].execute("UPDATE t SET v = 8 WHERE k = 1")

    def drop() -> None:
        holder.clear()  # the last reference goes in this thread: the rollback runs here
        gc.collect()

    within(PROMPT, drop)
    assert within(PROMPT, lambda: write(short, 6)) == [(1, 6)]
