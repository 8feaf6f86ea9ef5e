"""When the database goes away (PostgreSQL): every entry point raises a BrokerError naming the
database and the transaction's outcome, no session is leaked, a waiting RECEIVE returns with the
error, and the broker works again once the server is back. Sessions are cut the way a server
restart or an administrator cuts them: ``pg_terminate_backend`` (waiting until each is gone)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servicebroker import (
    Broker,
    DatabaseUnavailableError,
    ManualClock,
    Outcome,
    StorageError,
    TransactionError,
)
from servicebroker.testing.faults import terminate_sessions

from .conftest import POSTGRES_URL, Pair, drop_url, make_pair, need_postgres, new_url


@pytest.fixture
def app_name() -> str:
    return f"sbfail_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def pg_url(tmp_path: Path, app_name: str) -> Iterator[str]:
    """A fresh schema, reached with a password in the URL (the test server trusts, so it is
    ignored there) that no error message may repeat."""
    need_postgres()
    url = new_url("postgres", tmp_path)
    scheme, rest = url.split("://", 1)
    user, at, host = rest.partition("@")
    with_password = f"{scheme}://{user}:{PASSWORD}@{host}" if at and ":" not in user else url
    yield f"{with_password}&application_name={app_name}"
    drop_url(url)


PASSWORD = "s3cret-Pw"


@pytest.fixture
def pg(pg_url: str, clock: ManualClock) -> Iterator[Broker]:
    b = Broker.open(pg_url, clock=clock, pool_size=2, busy_timeout=2, poll_interval=0.05)
    yield b
    b.close()


def cut(app_name: str) -> None:
    """Cut every session of the broker under test."""
    terminate_sessions(POSTGRES_URL, app_name)


def in_use(broker: Broker) -> int:
    return broker.views.dm_broker_storage_sessions()[0].sessions_in_use


def _send(broker: Broker, pair: Pair) -> uuid.UUID:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"x")
    return h


def test_a_transaction_whose_construction_fails_gives_its_session_back(
    pg: Broker, app_name: str
) -> None:
    """The defect: broker.transaction() failing while it read the catalog kept its session, so a
    pool of 2 was exhausted after two server restarts ("no PostgreSQL session free"). The
    catalog is read by the transaction's first statement (or ``tx.catalog``) now: failing
    there gives the session back as well."""
    pair = make_pair(pg)
    for i in range(6):
        pg.create_message_type(f"T{i}")  # the next transaction re-reads the catalog
        cut(app_name)
        with pytest.raises(DatabaseUnavailableError) as err:
            pg.transaction().catalog  # noqa: B018 - reading it is the point
        assert err.value.outcome is Outcome.ROLLED_BACK
        assert in_use(pg) == 0
    _send(pg, pair)  # the server is there: the broker works at once
    stats = pg.views.dm_broker_storage_sessions()[0]
    assert stats.sessions_in_use == 0 and stats.failures >= 6
    assert "PostgreSQL database" in (stats.last_failure or "")


def _statements(pair: Pair, app_name: str) -> dict[str, Callable[[Any, uuid.UUID], object]]:
    """Each statement, on transaction ``tx`` and conversation ``h``; "commit" cuts the sessions
    between its SEND and its COMMIT."""
    return {
        "send": lambda tx, h: tx.send(h, "Req", b"y"),
        "receive": lambda tx, h: tx.receive(pair.tq),
        "get_conversation_group": lambda tx, h: tx.get_conversation_group(pair.tq),
        "execute": lambda tx, h: tx.execute("SELECT 1"),
        "begin_dialog": lambda tx, h: tx.begin_dialog(
            pair.initiator, pair.target, contract=pair.contract
        ),
        "end_conversation": lambda tx, h: tx.end_conversation(h),
        "begin_conversation_timer": lambda tx, h: tx.begin_conversation_timer(h, 5),
        "commit": lambda tx, h: (tx.send(h, "Req", b"z"), cut(app_name), tx.commit()),
    }


@pytest.mark.parametrize(
    "name",
    [
        "send",
        "receive",
        "get_conversation_group",
        "execute",
        "begin_dialog",
        "end_conversation",
        "begin_conversation_timer",
        "commit",
    ],
)
def test_each_statement_raises_a_broker_error_and_keeps_no_session(
    pg: Broker, app_name: str, name: str
) -> None:
    """Every entry point, its session cut under it, raises DatabaseUnavailableError (never a
    bare psycopg error) naming the database, ends the transaction (rolled back) and gives the
    session back — ten times in a row on a pool of two."""
    pair = make_pair(pg)
    handle = _send(pg, pair)
    statement = _statements(pair, app_name)[name]
    for _ in range(10):
        tx = pg.transaction()
        tx.refresh_catalog()
        if name != "commit":
            cut(app_name)
        with pytest.raises(DatabaseUnavailableError) as err:
            statement(tx, handle)
        assert "PostgreSQL database 'postgres' at" in str(err.value)
        assert err.value.database is not None and "schema sbtest_" in err.value.database
        assert PASSWORD not in str(err.value)
        with pytest.raises(TransactionError):
            tx.send(handle, "Req", b"after")  # the transaction ended with the failure
        tx.rollback()  # harmless: already ended
        assert in_use(pg) == 0
    assert len(pg.peek(pair.tq)) == 1  # nothing lost, nothing added
    _send(pg, pair)


def test_rollback_and_exit_after_a_lost_session_raise_nothing(pg: Broker, app_name: str) -> None:
    """A rollback cannot fail in a way that matters: the server rolls back a lost session."""
    pair = make_pair(pg)
    _send(pg, pair)
    tx = pg.transaction()
    assert tx.receive(pair.tq)
    cut(app_name)
    tx.rollback()
    assert in_use(pg) == 0
    with pytest.raises(RuntimeError, match="the application's own"), pg.transaction() as tx2:
        tx2.receive(pair.tq)
        cut(app_name)
        raise RuntimeError("the application's own error")  # not replaced by a storage error
    assert in_use(pg) == 0
    with pg.transaction() as tx3:  # the message is back (RCV-3) and the broker works
        assert [m.message_body for m in tx3.receive(pair.tq)] == [b"x"]


def test_catalog_statements_views_and_peek_raise_broker_errors(pg: Broker, app_name: str) -> None:
    pair = make_pair(pg)
    calls: list[Callable[[], object]] = [
        lambda: pg.create_queue("another"),
        lambda: pg.views.conversation_endpoints(),
        lambda: pg.peek(pair.tq),
        lambda: pg.execute("SELECT 1"),
    ]
    for n, call in enumerate(calls):
        pg.execute("SELECT 1")  # a pooled session, idle, that the cut breaks
        cut(app_name)
        with pytest.raises(DatabaseUnavailableError):
            call()
        assert in_use(pg) == 0, n
    pg.create_queue("another")  # works again


def test_a_commit_lost_during_commit_has_an_unknown_outcome(pg: Broker, app_name: str) -> None:
    """The connection lost while COMMIT runs (here: a deferred trigger makes COMMIT slow, and
    the session is cut then): the error says the outcome is unknown, and the documented check
    — look for the transaction's own row — tells what happened."""
    pair = make_pair(pg)
    pg.execute("CREATE TABLE marks (tag TEXT)")
    pg.execute(
        "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$"
    )
    pg.execute(
        "CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON marks DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION slow_commit()"
    )
    import psycopg

    def cut_when_committing() -> None:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            for _ in range(600):  # until the COMMIT sleeps in the trigger (bounded: 30 s)
                row = admin.execute(
                    "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                    "WHERE application_name = %s AND wait_event = 'PgSleep'",
                    (app_name,),
                ).fetchone()
                if row and row[0]:
                    return
                threading.Event().wait(0.05)

    cutter = threading.Thread(target=cut_when_committing)
    cutter.start()
    with pytest.raises(DatabaseUnavailableError) as err, pg.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"maybe")
        tx.execute("INSERT INTO marks VALUES ('m1')")
    cutter.join()
    assert err.value.outcome is Outcome.UNKNOWN
    assert "during COMMIT" in str(err.value) and "outcome is unknown" in str(err.value)
    assert in_use(pg) == 0
    # the check: the transaction's own row (here it was rolled back by the cut)
    assert pg.execute("SELECT count(*) FROM marks") == [(0,)]
    assert pg.peek(pair.tq) == []


def test_a_commit_the_server_refuses_is_rolled_back(pg: Broker) -> None:
    pair = make_pair(pg)
    pg.execute("CREATE TABLE marks (tag TEXT)")
    pg.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$"
    )
    pg.execute(
        "CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON marks DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    with pytest.raises(StorageError, match="refused at commit") as err, pg.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"no")
        tx.execute("INSERT INTO marks VALUES ('m1')")
    assert err.value.outcome is Outcome.ROLLED_BACK
    assert "rolled back" in str(err.value)
    assert pg.peek(pair.tq) == [] and in_use(pg) == 0


@pytest.mark.parametrize("statement", ["receive", "get_conversation_group"])
def test_a_waiting_receive_returns_with_the_error_when_the_server_goes(
    pg: Broker, pg_url: str, app_name: str, statement: str
) -> None:
    """WAITFOR (RECEIVE …) with a time-out the manual clock never reaches: only the failure
    can end it, and it does."""
    pair = make_pair(pg)
    outcome: list[BaseException | object] = []
    waiting = threading.Event()

    def wait() -> None:
        try:
            with pg.transaction() as tx:
                waiting.set()
                if statement == "receive":
                    outcome.append(tx.receive(pair.tq, timeout=3600))
                else:
                    outcome.append(tx.get_conversation_group(pair.tq, timeout=3600))
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    waiting.wait(10)
    import psycopg

    with psycopg.connect(pg_url, application_name="observer", autocommit=True) as observer:
        for _ in range(400):  # until the statement sleeps in its wait loop (bounded: 20 s)
            row = observer.execute("SELECT coalesce(sum(waiting), 0) FROM queue_waiters").fetchone()
            if row and row[0]:
                break
            threading.Event().wait(0.05)
        else:
            pytest.fail("the statement never waited")
    cut(app_name)
    t.join(20)  # bounded: the wait loop looks again within a second
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], DatabaseUnavailableError)
    assert in_use(pg) == 0


def test_open_and_the_command_line_on_an_unreachable_server(tmp_path: Path) -> None:
    """Nothing listens on port 1: Broker.open and `servicebroker send` say so in one line."""
    import subprocess
    import sys

    url = "postgresql://postgres:secret@127.0.0.1:1/nowhere"
    with pytest.raises(DatabaseUnavailableError) as err:
        Broker.open(url)
    assert "PostgreSQL database 'nowhere' at 127.0.0.1:1" in str(err.value)
    assert "secret" not in str(err.value)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "servicebroker.cli",
            "send",
            "--url",
            url,
            "--from-service",
            "a",
            "--to-service",
            "b",
            "--body",
            "x",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "PostgreSQL database 'nowhere'" in run.stderr and "secret" not in run.stderr


def test_rollbacks_caused_by_the_database_do_not_poison_the_queue(
    pg: Broker, app_name: str
) -> None:
    """POI-1 counts the rollbacks of the application's processing, not a server that went away
    six times while a message was being received (docs/reliability.md)."""
    # rule POI-1 (our departure: database failures are not counted)
    pair = make_pair(pg)
    _send(pg, pair)
    for _ in range(6):
        tx = pg.transaction()
        assert tx.receive(pair.tq)
        cut(app_name)
        with pytest.raises(DatabaseUnavailableError):
            tx.commit()
    assert pg.catalog.queue(pair.tq).status
    with pg.transaction() as tx:
        assert [m.message_body for m in tx.receive(pair.tq)] == [b"x"]
