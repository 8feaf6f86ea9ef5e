"""ALTER DATABASE … SET NEW_BROKER and ERROR_BROKER_CONVERSATIONS, the database's
``service_broker_guid`` and the ``databases()`` view, as Microsoft's reference documents them
(issue 11): each test names the page and quotes the sentence it proves. Both backends."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from servicebroker import (
    END_DIALOG,
    ERROR,
    Broker,
    ConversationError,
    ManualClock,
    StorageError,
    parse_error_body,
)
from servicebroker.cli import main

from .conftest import Pair, drop_url, make_pair, new_url

# ALTER DATABASE SET options (docs/t-sql/statements/alter-database-transact-sql-set-options.md)
SET_OPTIONS = "docs/t-sql/statements/alter-database-transact-sql-set-options.md"
ERRORED = (
    -8499,
    "The conversation was ended by ALTER DATABASE SET ERROR_BROKER_CONVERSATIONS "
    "(the database was attached, restored or copied).",
)


def _states(broker: Broker) -> dict[uuid.UUID, str]:
    return {e.conversation_handle: e.state for e in broker.views.conversation_endpoints()}


def _talk(broker: Broker, pair: Pair) -> tuple[uuid.UUID, uuid.UUID]:
    """A conversing dialog: Req received by the target, Resp waiting for the initiator, a
    second Req waiting for the target; returns (initiator, target) handles."""
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"one")
    with broker.transaction() as tx:
        (m,) = tx.receive(pair.tq)
        tx.send(m.conversation_handle, "Resp", b"answer")
    with broker.transaction() as tx:
        tx.send(h, "Req", b"two")
    return h, m.conversation_handle


def test_service_broker_guid_is_made_with_the_database_and_kept(
    backend: str, url: str, clock: ManualClock, tmp_path: Path
) -> None:
    # sys.databases (docs/relational-databases/system-catalog-views/sys-databases-transact-
    # sql.md): "service_broker_guid: Identifier of the service broker for this database";
    # ALTER DATABASE SET options: ENABLE_BROKER "The database keeps the existing Service
    # Broker identifier" — so does a restart
    with Broker.open(url, clock=clock) as broker:
        guid = broker.service_broker_guid
        assert isinstance(guid, uuid.UUID) and guid.version == 4
        broker.alter_database(enable_broker=True)
        (row,) = broker.views.databases()
        assert row.name == broker.database_name
        assert (row.service_broker_guid, row.is_broker_enabled) == (guid, True)
        assert row.is_honor_broker_priority_on is False
        broker.alter_database(honor_broker_priority=True)
        assert broker.views.databases()[0].is_honor_broker_priority_on is True
    with Broker.open(url, clock=clock) as broker:
        assert broker.service_broker_guid == guid
    (tmp_path / "other").mkdir()
    other = new_url(backend, tmp_path / "other")
    try:
        with Broker.open(other, clock=clock) as broker:
            assert broker.service_broker_guid != guid
    finally:
        drop_url(other)


def test_a_database_made_before_the_guid_gets_one_when_it_migrates(
    url: str, clock: ManualClock
) -> None:
    # the migration that adds service_broker_guid gives an existing database one, once
    version = 8  # one stream: 0008_service_broker_guid on every backend
    with Broker.open(url, clock=clock) as broker:
        broker.execute("DELETE FROM broker_settings WHERE name = 'service_broker_guid'")
        broker.execute(f"DELETE FROM schema_migrations WHERE version = {version}")
        broker.execute(
            "UPDATE broker_settings SET value = CAST(value AS INTEGER) + 1 "
            "WHERE name = 'catalog_version'"
        )
        with pytest.raises(StorageError, match="has no service_broker_guid"):
            _ = broker.service_broker_guid
    with Broker.open(url, clock=clock) as broker:
        guid = broker.service_broker_guid
    with Broker.open(url, clock=clock) as broker:
        assert broker.service_broker_guid == guid


def test_far_broker_instance_is_this_database(broker: Broker, pair: Pair) -> None:
    # sys.conversation_endpoints (docs/relational-databases/system-catalog-views/sys-
    # conversation-endpoints-transact-sql.md): "far_broker_instance: The broker instance for
    # the remote side of the conversation" — both sides here are in this database, whose
    # instance is its service_broker_guid (BEGIN DIALOG's 'CURRENT DATABASE')
    _talk(broker, pair)
    rows = broker.views.conversation_endpoints()
    assert len(rows) == 2
    assert {r.far_broker_instance for r in rows} == {str(broker.service_broker_guid)}


def test_new_broker_removes_every_conversation_and_nothing_else(broker: Broker) -> None:
    # ALTER DATABASE SET options, NEW_BROKER: "Specifies that the database should receive a
    # new broker identifier. The database acts as a new service broker. As such, all existing
    # conversations in the database are immediately removed without producing end dialog
    # messages."
    pair = make_pair(broker, retention=True)
    broker.create_broker_priority("P", contract_name=pair.contract, priority_level=7)
    broker.execute("CREATE TABLE app_rows (x INTEGER)")
    broker.execute("INSERT INTO app_rows (x) VALUES (1)")
    _talk(broker, pair)
    with broker.transaction() as tx:  # one held in the transmission queue
        tx.send(tx.begin_dialog(pair.initiator, "//not/yet", contract=pair.contract), "Req", b"")
    assert len(broker.views.transmission_queue()) == 1
    assert broker.views.conversation_groups() != []
    assert sorted(m.status for m in broker.peek(pair.tq)) == [0, 1, 3]  # retained rows too
    before = broker.service_broker_guid
    catalog = broker.catalog
    broker.alter_database(new_broker=True)
    assert broker.service_broker_guid != before
    assert broker.views.databases()[0].service_broker_guid == broker.service_broker_guid
    assert broker.views.conversation_endpoints() == []
    assert broker.views.conversation_groups() == []
    assert broker.views.transmission_queue() == []
    assert broker.peek(pair.iq) == [] and broker.peek(pair.tq) == []  # nothing was sent
    after = broker.catalog
    assert (after.queues, after.services, after.contracts) == (
        catalog.queues,
        catalog.services,
        catalog.contracts,
    )
    assert after.message_types == catalog.message_types
    assert after.priorities == catalog.priorities
    assert broker.execute("SELECT x FROM app_rows") == [(1,)]
    # conversations begun afterwards work, under the new instance
    _talk(broker, pair)
    with broker.transaction() as tx:
        got = tx.receive(pair.iq)
    assert [m.message_body for m in got] == [b"answer"]
    assert {r.far_broker_instance for r in broker.views.conversation_endpoints()} == {
        str(broker.service_broker_guid)
    }


def test_new_broker_beside_a_transaction_that_holds_a_group(broker: Broker, pair: Pair) -> None:
    # NEW_BROKER: "all existing conversations in the database are immediately removed" — a
    # transaction that RECEIVEd (holding the group, writing nothing yet) is not waited for;
    # a statement on the removed conversation fails (it does not exist), and its commit is
    # refused and rolled back whole: its own SQL does not commit without the messages it
    # received (docs/ddl.md)
    broker.execute("CREATE TABLE app_rows (x INTEGER)")
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h, "Req", b"one")
    tx = broker.transaction()
    (m,) = tx.receive(pair.tq)
    broker.alter_database(new_broker=True)
    with pytest.raises(ConversationError, match=f"{m.conversation_handle} does not exist"):
        tx.send(m.conversation_handle, "Resp", b"too late")
    tx.execute("INSERT INTO app_rows (x) VALUES (2)")
    with pytest.raises(ConversationError, match=r"received from queue 'tq' were removed"):
        tx.commit()
    assert broker.views.conversation_endpoints() == []
    assert broker.peek(pair.iq) == [] and broker.peek(pair.tq) == []
    assert broker.execute("SELECT x FROM app_rows") == []


def test_new_broker_waits_for_a_commit_in_progress_then_says_so(
    url: str, clock: ManualClock, pair: Pair, broker: Broker
) -> None:
    # ALTER DATABASE SET options: ENABLE_BROKER "requires an exclusive database lock. If other
    # sessions have locked resources in the database, ENABLE_BROKER will wait until the other
    # sessions release their locks" — NEW_BROKER too: it waits for a transaction that is
    # writing, up to the busy time-out, then fails with nothing changed
    broker.execute("CREATE TABLE app_rows (x INTEGER)")
    _talk(broker, pair)
    guid = broker.service_broker_guid
    with Broker.open(url, clock=clock, busy_timeout=0.2) as other:
        with broker.transaction() as tx:
            tx.execute("INSERT INTO app_rows (x) VALUES (3)")  # the write lock is held
            with pytest.raises(StorageError, match=r"ALTER DATABASE did not run: .*busy time-out"):
                other.alter_database(new_broker=True)
        assert other.service_broker_guid == guid
    assert len(broker.views.conversation_endpoints()) == 2


def test_new_broker_in_t_sql_and_bad_values(broker: Broker, pair: Pair) -> None:
    # ALTER DATABASE SET options: "ALTER DATABASE { database_name | CURRENT } SET
    # <option_spec> [ WITH <termination> ]", <service_broker_option> NEW_BROKER
    _talk(broker, pair)
    before = broker.service_broker_guid
    assert broker.execute_ddl("ALTER DATABASE CURRENT SET NEW_BROKER WITH ROLLBACK IMMEDIATE") == 1
    assert broker.service_broker_guid != before
    assert broker.views.conversation_endpoints() == []
    for bad in ({"new_broker": "yes"}, {"error_broker_conversations": None}):
        with pytest.raises(Exception, match="set with True") as info:
            broker.alter_database(**bad)  # type: ignore[arg-type]
        assert type(info.value).__name__ == "CatalogError"
    with pytest.raises(Exception, match="cannot be set together"):
        broker.alter_database(new_broker=True, error_broker_conversations=True)


def test_init_new_broker_on_a_copied_file(tmp_path: Path, clock: ManualClock) -> None:
    # NEW_BROKER: "the database should receive a new broker identifier" — for a copied
    # database file, `servicebroker init --new-broker`; a plain copy keeps the identifier
    original = tmp_path / "original.db"
    with Broker.open(str(original), clock=clock) as broker:
        pair = make_pair(broker)
        _talk(broker, pair)
        guid = broker.service_broker_guid
    copy = tmp_path / "copy.db"
    shutil.copyfile(original, copy)
    runner = CliRunner()
    kept = runner.invoke(main, ["init", str(copy)])
    assert kept.exit_code == 0 and str(guid) in kept.output
    done = runner.invoke(main, ["init", "--new-broker", str(copy)])
    assert done.exit_code == 0, done.output
    with Broker.open(str(copy), clock=clock) as broker:
        assert broker.service_broker_guid != guid
        assert str(broker.service_broker_guid) in done.output
        assert broker.views.conversation_endpoints() == []
        assert broker.peek(pair.iq) == [] and broker.peek(pair.tq) == []
        assert pair.target in broker.catalog.services
    with Broker.open(str(original), clock=clock) as broker:  # the original is untouched
        assert broker.service_broker_guid == guid
        assert len(broker.views.conversation_endpoints()) == 2


def test_error_broker_conversations_ends_each_open_endpoint_with_one_error(
    broker: Broker, pair: Pair
) -> None:
    # ALTER DATABASE SET options, ERROR_BROKER_CONVERSATIONS: "This setting preserves the
    # existing Service Broker identifier for the database. Service Broker ends all
    # conversations in the database with an error. This setting enables applications to run
    # regular cleanup for existing conversations."
    h, t = _talk(broker, pair)
    with broker.transaction() as tx:  # a second dialog the initiator has ended: DO / DI
        h2 = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        tx.send(h2, "Req", b"x")
    with broker.transaction() as tx:
        tx.end_conversation(h2)
    guid = broker.service_broker_guid
    broker.alter_database(error_broker_conversations=True)
    assert broker.service_broker_guid == guid
    states = _states(broker)
    assert (states[h], states[t]) == ("ER", "ER")
    assert states[h2] == "CD"  # this side had ended: it closes
    t2 = next(k for k, v in states.items() if k not in (h, t, h2))
    assert states[t2] == "ER"
    with broker.transaction() as tx:
        at_initiator = tx.receive(pair.iq)
    with broker.transaction() as tx:
        at_target = tx.receive(pair.tq, conversation_handle=t)
    with broker.transaction() as tx:
        at_target2 = tx.receive(pair.tq, conversation_handle=t2)
    # each side: exactly one Error, first in its conversation (SYS-2); no EndDialog made
    assert [m.message_type_name for m in at_initiator] == [ERROR, "Resp"]
    assert [m.message_type_name for m in at_target] == [ERROR, "Req"]
    assert [m.message_type_name for m in at_target2] == [ERROR, "Req", END_DIALOG]
    for m in (at_initiator[0], at_target[0], at_target2[0]):
        assert parse_error_body(m.message_body) == ERRORED
    # the application ends them; then they are gone
    with broker.transaction() as tx:
        for handle in (h, t, t2):
            tx.end_conversation(handle)
    assert broker.views.conversation_endpoints() == []
    assert broker.peek(pair.iq) == [] and broker.peek(pair.tq) == []
    # conversations begun afterwards work
    h3, _ = _talk(broker, pair)
    assert _states(broker)[h3] == "CO"
    assert broker.execute_ddl("ALTER DATABASE [db] SET ERROR_BROKER_CONVERSATIONS") == 1
    assert _states(broker)[h3] == "ER"
    assert broker.service_broker_guid == guid


def test_error_broker_conversations_drops_unsent_messages_and_spares_ended_endpoints(
    broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # ERROR_BROKER_CONVERSATIONS "ends all conversations in the database with an error": an
    # initiator whose messages still wait in the transmission queue is ended too, and what it
    # had not sent is dropped (as an END CONVERSATION WITH ERROR drops it); an endpoint already
    # in ER (its LIFETIME passed) has had its Error and gets no second one
    with broker.transaction() as tx:
        waiting = tx.begin_dialog(pair.initiator, "//not/yet", contract=pair.contract)
        tx.send(waiting, "Req", b"held")
        expired = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract, lifetime=5)
        tx.send(expired, "Req", b"late")
    clock.advance(6)
    broker.timer.fire_dialog_timers(clock.now())
    assert _states(broker)[expired] == "ER"
    assert len(broker.views.transmission_queue()) == 1
    broker.alter_database(error_broker_conversations=True)
    assert broker.views.transmission_queue() == []
    assert _states(broker)[waiting] == "ER"
    with broker.transaction() as tx:
        got_waiting = tx.receive(pair.iq, conversation_handle=waiting)
        got_expired = tx.receive(pair.iq, conversation_handle=expired)
    assert [parse_error_body(m.message_body) for m in got_waiting] == [ERRORED]
    assert [m.message_type_name for m in got_expired] == [ERROR]  # the lifetime's, only
    assert parse_error_body(got_expired[0].message_body) != ERRORED
    broker.create_service("//not/yet", queue=pair.tq)  # nothing was left to deliver to it
    assert b"held" not in [m.message_body for m in broker.peek(pair.tq)]
