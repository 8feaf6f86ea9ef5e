"""A commit written from the storage's copies of its endpoints (issue 29): on PostgreSQL a SEND
transaction's commit does not read its endpoints again when an earlier commit of the process
left copies of them; the server checks the copies as it locks the rows, and a commit whose
copies another process (or an arrival) made out of date is rolled back and written again,
reading the rows. What a user sees is unchanged: every message once, in order, numbered in its
conversation's send order (DLG-2) — and ``dm_broker_storage_sessions()`` counts both cases."""

from __future__ import annotations

from servicebroker import Broker

from .conftest import Pair


def _counts(broker: Broker) -> tuple[int, int]:
    row = broker.views.dm_broker_storage_sessions()[0]
    return row.commits_from_copies, row.copies_out_of_date


def test_sends_from_two_brokers_on_one_conversation_stay_in_order(
    url: str, broker: Broker, pair: Pair
) -> None:
    # rule DLG-2 (per conversation, in send order), rule DLG-9: a second broker on the same
    # database (another process) sends on the conversation between this broker's commits, so
    # the copies this broker kept of its endpoints are out of date at its next commit
    with broker.transaction() as tx:
        handle = tx.begin_dialog(pair.initiator, pair.target, contract="C")
    other = Broker.open(url)
    try:
        for n in range(3):
            with broker.transaction() as tx:
                tx.send(handle, "Req", b"a%d" % n)
        used, out_of_date = _counts(broker)
        with other.transaction() as tx:
            tx.send(handle, "Req", b"b0")
        for n in range(3, 5):
            with broker.transaction() as tx:
                tx.send(handle, "Req", b"a%d" % n)
        with broker.transaction() as tx:
            got = tx.receive(pair.tq, top=100)
    finally:
        other.close()
    assert [m.message_body for m in got] == [b"a0", b"a1", b"a2", b"b0", b"a3", b"a4"]
    assert [m.message_sequence_number for m in got] == list(range(6))
    if url.startswith("postgresql"):  # the second and third commits wrote from copies
        assert used >= 2
        assert out_of_date == 0
        assert _counts(broker)[0] == used + 2  # both later commits tried the copies
        assert _counts(broker)[1] == 1  # the first of them found them changed
    else:  # SQLite reads its rows in the process: no copies
        assert _counts(broker) == (0, 0)


def test_a_transaction_that_ran_application_sql_reads_its_endpoints(
    url: str, broker: Broker, pair: Pair
) -> None:
    # Its write transaction holds the application's rows: a commit refused for out-of-date
    # copies could not be written again without them, so it never uses copies.
    broker.execute("CREATE TABLE app_rows (n integer)")
    with broker.transaction() as tx:
        handle = tx.begin_dialog(pair.initiator, pair.target, contract="C")
    for _ in range(2):
        with broker.transaction() as tx:
            tx.send(handle, "Req", b"warm")  # copies kept on PostgreSQL
    before = _counts(broker)
    with broker.transaction() as tx:
        tx.execute("INSERT INTO app_rows (n) VALUES (1)")
        tx.send(handle, "Req", b"with sql")
    assert _counts(broker) == before
    assert broker.execute("SELECT n FROM app_rows") == [(1,)]
    assert [m.message_body for m in broker.peek(pair.tq)][-1] == b"with sql"


def test_a_send_after_another_process_moved_the_conversation(
    url: str, broker: Broker, pair: Pair
) -> None:
    # rule DLG-7, rule DLG-9: another process moves the conversation to another group of the
    # queue after this broker kept copies of its endpoints; this broker's next SEND locks the
    # group the conversation is in now, and its commit is not refused as if a MOVE had
    # raced it (its copy, in the old group, is out of date: the commit reads the rows)
    with broker.transaction() as tx:
        handle = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        other_handle = tx.begin_dialog(pair.initiator, pair.target, contract="C")
    for body in (b"1", b"2"):
        with broker.transaction() as tx:
            tx.send(handle, "Req", body)  # copies kept on PostgreSQL
    groups = {
        e.conversation_handle: e.conversation_group_id
        for e in broker.views.conversation_endpoints()
    }
    group = groups[other_handle]
    other = Broker.open(url)
    try:
        with other.transaction() as tx:
            tx.move_conversation(handle, group)
    finally:
        other.close()
    with broker.transaction() as tx:
        tx.send(handle, "Req", b"3")
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"1", b"2", b"3"]
    groups = {
        e.conversation_handle: e.conversation_group_id
        for e in broker.views.conversation_endpoints()
    }
    assert groups[handle] == group
