"""Write transactions commit in parallel on PostgreSQL, and the orders readers rely on hold
under concurrent committing senders on both backends: on each queue ``queuing_order`` is commit
order, so a reader paging a queue by it (``peek_after``, the Spark reader) sees every message
exactly once, and RECEIVE — one group per call, or many groups held in one transaction (RCV-5)
— delivers every message exactly once and in order per conversation, with replies crossing
(docs/performance.md, issue 10)."""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from servicebroker import Broker, DeadlockError, Outcome

from .conftest import Pair, drop_url, make_pair, new_url

SENDERS = 3
TRANSACTIONS = 30
DIALOGS = 6
PER_TRANSACTION = 8


def test_write_transactions_commit_side_by_side_on_postgres(tmp_path: Path) -> None:
    # A transaction whose write transaction is open (the application's SQL ran) does not hold
    # up another transaction's commit; a catalog change waits for it (exclusive). SQLite has
    # one writer at a time by design.
    import psycopg

    url = new_url("postgres", tmp_path)
    broker = Broker.open(url, busy_timeout=10)
    try:
        pair = make_pair(broker)
        broker.execute("CREATE TABLE app_rows (n integer)")
        created: list[BaseException | None] = []
        ddl = threading.Thread(
            target=lambda: created.append(_outcome(lambda: broker.create_queue("must_wait")))
        )
        with broker.transaction() as first, psycopg.connect(url, autocommit=True) as observer:
            first.execute("INSERT INTO app_rows VALUES (1)")  # the write transaction is open
            with broker.transaction() as second:  # same thread: a lock wait would never end
                h = second.begin_dialog(pair.initiator, pair.target, contract="C")
                second.send(h, "Req", b"while the first is open")
            assert [m.message_body for m in broker.peek(pair.tq)] == [b"while the first is open"]
            ddl.start()  # exclusive: waits for the open transaction — seen waiting in pg_locks
            while not observer.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()[0]:
                assert ddl.is_alive() and not created, "the catalog change did not wait"
            assert not created  # still waiting while the first transaction is open
        ddl.join()
        assert created == [None]  # done once the first transaction ended
        assert "must_wait" in [q.name for q in broker.views.service_queues()]
        assert broker.execute("SELECT n FROM app_rows") == [(1,)]
    finally:
        broker.close()
        drop_url(url)


def _outcome(action: Callable[[], object]) -> BaseException | None:
    """Run ``action``; None, or the exception it raised."""
    try:
        action()
    except BaseException as exc:
        return exc
    return None


def test_a_deadlock_in_the_applications_sql_is_a_clear_error(tmp_path: Path) -> None:
    # Commits run in parallel on PostgreSQL, so the application's own SQL can deadlock two
    # transactions: the one PostgreSQL picks is rolled back with a DeadlockError that says so
    url = new_url("postgres", tmp_path)
    broker = Broker.open(url)
    try:
        broker.execute("CREATE TABLE accounts (id integer PRIMARY KEY, n integer)")
        broker.execute("INSERT INTO accounts VALUES (1, 0), (2, 0)")
        both = threading.Barrier(2)
        errors: list[BaseException] = []

        def transfer(first: int, second: int) -> None:
            try:
                with broker.transaction() as tx:
                    tx.execute("UPDATE accounts SET n = n + 1 WHERE id = %s", (first,))
                    both.wait()
                    tx.execute("UPDATE accounts SET n = n + 1 WHERE id = %s", (second,))
            except DeadlockError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=transfer, args=a) for a in ((1, 2), (2, 1))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        (error,) = errors
        assert "deadlocked with a concurrent one" in str(error)
        assert error.outcome is Outcome.ROLLED_BACK
        assert broker.execute("SELECT sum(n) FROM accounts") == [(2,)]  # the other committed
    finally:
        broker.close()
        drop_url(url)


def _send_all(broker: Broker, pair: Pair, sender: int, errors: list[BaseException]) -> None:
    """One sender: TRANSACTIONS transactions of PER_TRANSACTION messages over its own
    DIALOGS dialogs, bodies ``sender:dialog:n`` (n counts per dialog)."""
    try:
        with broker.transaction() as tx:
            handles = [
                tx.begin_dialog(pair.initiator, pair.target, contract="C") for _ in range(DIALOGS)
            ]
        counts = [0] * DIALOGS
        for t in range(TRANSACTIONS):
            with broker.transaction() as tx:
                for i in range(PER_TRANSACTION):
                    d = (t * PER_TRANSACTION + i) % DIALOGS
                    tx.send(handles[d], "Req", f"{sender}:{d}:{counts[d]}".encode())
                    counts[d] += 1
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def _expected() -> set[bytes]:
    total = TRANSACTIONS * PER_TRANSACTION
    per_dialog = [total // DIALOGS + (1 if d < total % DIALOGS else 0) for d in range(DIALOGS)]
    return {
        f"{s}:{d}:{n}".encode()
        for s in range(SENDERS)
        for d in range(DIALOGS)
        for n in range(per_dialog[d])
    }


def _in_order(bodies: list[bytes]) -> bool:
    """True when each dialog's bodies come in their send order."""
    last: dict[tuple[bytes, bytes], int] = {}
    for body in bodies:
        s, d, n = body.split(b":")
        if last.get((s, d), -1) != int(n) - 1:
            return False
        last[(s, d)] = int(n)
    return True


def test_a_reader_paging_by_queuing_order_misses_nothing(broker: Broker, pair: Pair) -> None:
    # rule QUE-1 (peek), the Spark reader's offsets: committing senders in parallel, a reader
    # pages the queue by queuing_order while they commit and sees each message exactly once
    errors: list[BaseException] = []
    senders = [
        threading.Thread(target=_send_all, args=(broker, pair, s, errors)) for s in range(SENDERS)
    ]
    for t in senders:
        t.start()
    seen: list[bytes] = []
    after = 0
    while True:
        done = not any(t.is_alive() for t in senders)  # read before the page: then complete
        page = broker.peek_after(pair.tq, after, top=7)
        seen += [m.message_body for m in page]
        if page:
            after = page[-1].queuing_order
        elif done:
            break
    for t in senders:
        t.join()
    assert errors == []
    assert len(seen) == len(set(seen)), "a message was seen twice"
    assert set(seen) == _expected(), "a message was skipped"
    assert _in_order(seen)


def test_receivers_holding_many_groups_get_everything_once_in_order_with_replies(
    broker: Broker, pair: Pair
) -> None:
    # rule RCV-1, rule RCV-2, rule RCV-5, rule DLG-2: senders commit in parallel while one
    # receiver RECEIVEs again and again in one transaction (holding up to 12 groups) and
    # another takes one group per transaction; both answer every message in the same
    # transaction, so commits put messages on the queue the other commits take them from
    errors: list[BaseException] = []
    received: dict[str, list[bytes]] = defaultdict(list)
    log: list[bytes] = []  # in the order the receiving transactions held their groups
    replies = 0
    senders_done = threading.Event()
    lock = threading.Lock()

    def receive(name: str, repeated: bool) -> None:
        nonlocal replies
        try:
            while True:
                with broker.transaction() as tx:
                    got = []
                    while True:
                        batch = tx.receive(pair.tq, top=1 if repeated else 5)
                        got += batch
                        if not batch or not repeated or len(got) >= 12:
                            break
                    for m in got:
                        tx.send(m.conversation_handle, "Resp", m.message_body)
                    with lock:  # before the commit: the groups are still held
                        received[name] += [m.message_body for m in got]
                        log.extend(m.message_body for m in got)
                        replies += len(got)
                if not got and senders_done.is_set() and not broker.peek(pair.tq, top=1):
                    return
        except BaseException as exc:
            errors.append(exc)

    senders = [
        threading.Thread(target=_send_all, args=(broker, pair, s, errors)) for s in range(SENDERS)
    ]
    receivers = [
        threading.Thread(target=receive, args=("repeated", True)),
        threading.Thread(target=receive, args=("one group", False)),
    ]
    for t in senders + receivers:
        t.start()
    for t in senders:
        t.join()
    senders_done.set()
    for t in receivers:
        t.join()
    assert errors == []
    everything = received["repeated"] + received["one group"]
    assert len(everything) == len(set(everything)), "a message was received twice"
    assert set(everything) == _expected(), "a message was never received"
    assert _in_order(log)  # per dialog, in send order, across both receivers
    assert received["repeated"] and received["one group"]
    answers = broker.peek(pair.iq)
    assert len(answers) == replies == len(everything)
    by_dialog: dict[uuid.UUID, list[bytes]] = defaultdict(list)
    for m in sorted(answers, key=lambda m: m.queuing_order):
        by_dialog[m.conversation_handle].append(m.message_body)
    assert all(_in_order(bodies) for bodies in by_dialog.values())
