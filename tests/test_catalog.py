"""Catalog statements and their errors (QUE-1, DLG-1, DLG-2, DLG-3, SYS-1)."""

from __future__ import annotations

import pytest

from servicebroker import DIALOG_TIMER, END_DIALOG, ERROR, Activation, Broker, CatalogError


def test_built_ins_exist(broker: Broker) -> None:
    # rule SYS-1
    cat = broker.catalog
    for name in ("DEFAULT", END_DIALOG, ERROR, DIALOG_TIMER):
        assert name in cat.message_types
    assert END_DIALOG == "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
    assert "DEFAULT" in cat.contracts
    with pytest.raises(CatalogError, match="built in"):
        broker.drop_message_type(END_DIALOG)
    with pytest.raises(CatalogError, match="built in"):
        broker.drop_contract("DEFAULT")


def test_queue_defaults(broker: Broker) -> None:
    # rule QUE-1
    broker.create_queue("q")
    (row,) = [r for r in broker.views.service_queues() if r.name == "q"]
    assert row.is_receive_enabled and not row.is_retention_enabled
    assert row.is_poison_message_handling_enabled and not row.is_activation_enabled


@pytest.mark.parametrize("bad", ["", "   ", 7, None, "x" * 300, "a\x00b"])
def test_bad_names_are_refused(broker: Broker, bad: object) -> None:
    with pytest.raises(CatalogError, match="name"):
        broker.create_message_type(bad)  # type: ignore[arg-type]


def test_duplicates_and_unknowns_are_named(broker: Broker) -> None:
    broker.create_message_type("M")
    with pytest.raises(CatalogError, match="'M' already exists"):
        broker.create_message_type("M")
    with pytest.raises(CatalogError, match="VALIDATION"):
        broker.create_message_type("N", validation="YAML")
    with pytest.raises(CatalogError, match="message type 'Nope' does not exist"):
        broker.create_contract("C", {"Nope": "ANY"})
    with pytest.raises(CatalogError, match="SENT BY"):
        broker.create_contract("C", {"M": "BOTH"})
    # CREATE CONTRACT (docs/t-sql/statements/create-contract-transact-sql.md): "The CREATE
    # CONTRACT statement fails when the contract does not contain at least one message type
    # that is SENT BY ANY or SENT BY INITIATOR."
    with pytest.raises(CatalogError, match="at least one message SENT BY INITIATOR or ANY"):
        broker.create_contract("C", {"M": "TARGET"})
    with pytest.raises(CatalogError, match="queue 'nq' does not exist"):
        broker.create_service("S", queue="nq")


def test_in_use_objects_cannot_be_dropped(broker: Broker) -> None:
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "ANY"})
    broker.create_queue("q")
    broker.create_service("S", queue="q", contracts=["C"])
    # DROP MESSAGE TYPE (docs/t-sql/statements/drop-message-type-transact-sql.md): "You cannot
    # drop a message type if any contracts refer to the message type."
    with pytest.raises(CatalogError, match="contract\\(s\\) 'C' refer to it"):
        broker.drop_message_type("M")
    # DROP CONTRACT (docs/t-sql/statements/drop-contract-transact-sql.md): "You cannot drop a
    # contract if any services or conversation priorities refer to the contract."
    with pytest.raises(CatalogError, match="service\\(s\\) 'S' refer to it"):
        broker.drop_contract("C")
    # DROP QUEUE (docs/t-sql/statements/drop-queue-transact-sql.md): "You cannot drop a queue if
    # any services refer to the queue."
    with pytest.raises(CatalogError, match="used by service"):
        broker.drop_queue("q")
    broker.drop_service("S")
    broker.drop_queue("q")
    broker.drop_contract("C")
    broker.drop_message_type("M")
    assert "M" not in broker.catalog.message_types


def test_activation_validation(broker: Broker) -> None:
    # rule QUE-1: MAX_QUEUE_READERS from 0 to 32767
    Activation("mod:fn", max_queue_readers=32767)
    with pytest.raises(CatalogError, match="MAX_QUEUE_READERS"):
        Activation("mod:fn", max_queue_readers=32768)
    with pytest.raises(CatalogError, match=r"package\.module:function"):
        Activation("module:")
    # a name without ':' is a procedure registered with the broker (Broker.register_procedure)
    with pytest.raises(CatalogError, match=r"neither 'package\.module:function' nor registered"):
        broker.create_queue("q0", activation=Activation("nocolon"))
    broker.create_queue("q", activation=Activation("json:dumps", max_queue_readers=3))
    (row,) = [r for r in broker.views.service_queues() if r.name == "q"]
    assert (
        row.is_activation_enabled
        and row.max_readers == 3
        and row.activation_procedure == "json:dumps"
    )
    broker.alter_queue("q", status=False)
    (row,) = [r for r in broker.views.service_queues() if r.name == "q"]
    assert not row.is_receive_enabled and row.max_readers == 3


def test_catalog_is_durable_and_shared(url: str, broker: Broker) -> None:
    broker.create_queue("q")
    with Broker.open(url) as other:
        assert "q" in other.catalog.queues
        other.create_queue("q2")
    assert "q2" in broker.catalog.queues


@pytest.mark.sqlite_only
def test_schema_is_versioned(url: str, broker: Broker) -> None:
    import sqlite3

    assert broker._storage.schema_version() == 20  # type: ignore[attr-defined]
    with sqlite3.connect(url) as c:
        names = [r[0] for r in c.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert names == [
        "0001_initial.sql",
        "0002_event_notifications.sql",
        "0003_conversation_priorities.sql",
        "0004_queue_groups.sql",
        "0005_transmission_levels.sql",
        "0006_activation_execute_as.sql",
        "0007_conversation_sequences.sql",
        "0008_service_broker_guid.sql",
        "0009_network_catalog.sql",
        "0010_transport.sql",
        "0011_principals.sql",
        "0012_closed_conversations.sql",
        "0013_group_claims.sql",
        "0014_broker_statistics.sql",
        "0015_queue_positions.sql",  # comments only on SQLite: PostgreSQL's step
        "0016_xml_schema_collections.sql",
        "0017_receive_function.sql",  # comments only on SQLite: PostgreSQL's step
        "0018_finish_received_function.sql",  # comments only on SQLite: PostgreSQL's step
        "0019_lock_unchanged_function.sql",  # comments only on SQLite: PostgreSQL's step
        "0020_queue_groups_statement_triggers.sql",  # comments only on SQLite
    ]
