"""Conversation priorities: the PRI-6 precedence, assignment at endpoint creation, and the
RECEIVE order they give (PRI-2..10, PRI-12, PRI-13)."""

from __future__ import annotations

import pytest

from servicebroker import Broker, CatalogError
from servicebroker.catalog.priorities import BrokerPriority, priority_level

C, L, R = "//c", "//local", "//remote"


def test_precedence_first_match_wins_in_the_documented_order() -> None:
    # rule PRI-6: all eight kinds present; removing the winner each time walks down the table
    patterns = [
        (C, L, R),
        (C, L, None),
        (C, None, R),
        (C, None, None),
        (None, L, R),
        (None, L, None),
        (None, None, R),
        (None, None, None),
    ]
    priorities = [
        BrokerPriority(i, f"p{i}", *pattern, 10 - i) for i, pattern in enumerate(patterns)
    ]
    for i in range(8):
        assert priority_level(priorities[i:], C, L, R) == 10 - i
    assert priority_level([], C, L, R) == 5  # rule PRI-10
    # a criterion that names something else does not match; names compare byte for byte
    assert priority_level([BrokerPriority(0, "x", "//C", None, None, 9)], C, L, R) == 5
    # the precedence is by pattern, not by level or creation order
    assert (
        priority_level(
            [
                BrokerPriority(0, "low", None, None, None, 1),
                BrokerPriority(1, "hi", C, None, None, 2),
            ],
            C,
            L,
            R,
        )
        == 2
    )


def setup(broker: Broker) -> None:
    broker.create_message_type("Req")
    broker.create_message_type("Resp")
    for name in ("C10", "C1", "C5"):
        broker.create_contract(name, {"Req": "INITIATOR", "Resp": "TARGET"})
    broker.create_queue("iq")
    broker.create_queue("tq")
    broker.create_service("I", queue="iq")
    broker.create_service("T", queue="tq", contracts=["C10", "C1", "C5"])


def levels(broker: Broker) -> dict[tuple[str, bool], int]:
    return {
        (e.service_contract_name, e.is_initiator): e.priority
        for e in broker.views.conversation_endpoints()
    }


def test_levels_are_checked_and_listed(broker: Broker) -> None:
    # rule PRI-2
    setup(broker)
    for bad in (0, 11, "9", True):
        with pytest.raises(CatalogError, match="PRIORITY_LEVEL"):
            broker.create_broker_priority("p", priority_level=bad)  # type: ignore[arg-type]
    broker.create_broker_priority("p", contract_name="C10", priority_level=10)
    with pytest.raises(CatalogError, match="already exists"):
        broker.create_broker_priority("p")
    (row,) = broker.views.conversation_priorities()
    assert (row.name, row.service_contract_name, row.local_service_name, row.priority) == (
        "p",
        "C10",
        None,
        10,
    )
    broker.alter_broker_priority("p", priority_level=7)
    assert broker.views.conversation_priorities()[0].priority == 7
    broker.drop_broker_priority("p")
    assert broker.views.conversation_priorities() == []
    with pytest.raises(CatalogError, match="does not exist"):
        broker.drop_broker_priority("p")


def test_level_is_fixed_when_the_endpoint_is_created(broker: Broker) -> None:
    # rule PRI-5: a priority created after BEGIN DIALOG changes nothing for that conversation
    setup(broker)
    with broker.transaction() as tx:
        old = tx.begin_dialog("I", "T", contract="C10")
    broker.create_broker_priority("p", contract_name="C10", priority_level=10)
    with broker.transaction() as tx:
        tx.send(old, "Req", b"x")
        new = tx.begin_dialog("I", "T", contract="C10")
    by_handle = {e.conversation_handle: e.priority for e in broker.views.conversation_endpoints()}
    assert by_handle[old] == 5 and by_handle[new] == 10


def test_dropping_a_priority_leaves_its_conversations_at_their_levels(broker: Broker) -> None:
    # rule PRI-5; DROP BROKER PRIORITY (docs/t-sql/statements/drop-broker-priority-transact-sql.md):
    # "When you drop a conversation priority, any existing conversations continue to operate with
    # the priority levels they were assigned from the conversation priority."
    setup(broker)
    broker.execute_ddl(
        "CREATE BROKER PRIORITY p FOR CONVERSATION SET (CONTRACT_NAME = C10, PRIORITY_LEVEL = 9)"
    )
    with broker.transaction() as tx:
        old = tx.begin_dialog("I", "T", contract="C10")
    broker.execute_ddl("DROP BROKER PRIORITY p;")
    with broker.transaction() as tx:
        tx.send(old, "Req", b"x")
        new = tx.begin_dialog("I", "T", contract="C10")
    by_handle = {e.conversation_handle: e.priority for e in broker.views.conversation_endpoints()}
    assert by_handle[old] == 9 and by_handle[new] == 5


def test_each_endpoint_has_its_own_level_and_messages_carry_the_receivers(broker: Broker) -> None:
    # rule PRI-8, rule PRI-3, rule PRI-4, rule PRI-7: initiator at 10, target at 1
    setup(broker)
    broker.create_broker_priority(
        "init", local_service_name="I", remote_service_name="T", priority_level=10
    )
    broker.create_broker_priority(
        "targ", local_service_name="T", remote_service_name="I", priority_level=1
    )
    with broker.transaction() as tx:
        h = tx.begin_dialog("I", "T", contract="C5")
        tx.send(h, "Req", b"to target")
    assert levels(broker) == {("C5", True): 10, ("C5", False): 1}
    (m,) = broker.peek("tq")
    assert m.priority == 1  # sent by the initiator at 10, received from the target queue at 1
    with broker.transaction() as tx:
        (m,) = tx.receive("tq")
        tx.send(m.conversation_handle, "Resp", b"to initiator")
    (m,) = broker.peek("iq")
    assert m.priority == 10  # sent by the target at 1, received from the initiator queue at 10


def test_receive_takes_the_highest_level_group_then_conversations_by_level(broker: Broker) -> None:
    # rule PRI-1 (higher levels first), rule PRI-9, rule PRI-12, rule PRI-13
    import uuid

    setup(broker)
    broker.create_broker_priority("ten", contract_name="C10", priority_level=10)
    broker.create_broker_priority("one", contract_name="C1", priority_level=1)
    group_a = uuid.uuid4()
    with broker.transaction() as tx:
        b = tx.begin_dialog("I", "T", contract="C5")
        a2 = tx.begin_dialog("I", "T", contract="C1", related_conversation_group=group_a)
        a1 = tx.begin_dialog("I", "T", contract="C10", related_conversation_group=group_a)
        for h in (b, a2, a1):
            tx.send(h, "Req", b"q")
    with broker.transaction() as tx:  # the target replies on each
        for _ in range(3):
            for m in tx.receive("tq"):
                tx.send(m.conversation_handle, "Resp", m.service_contract_name.encode())
    with broker.transaction() as tx:
        assert tx.get_conversation_group("iq") == group_a  # level 10 > 5 (PRI-13)
        tx.rollback()
    with broker.transaction() as tx:
        msgs = tx.receive("iq")
        assert [m.conversation_handle for m in msgs] == [a1, a2]  # one group, a1 (10) before a2 (1)
        tx.rollback()
    with broker.transaction() as tx:  # take a1's message only: group A's level falls to 1 (PRI-9)
        assert [m.message_body for m in tx.receive("iq", conversation_handle=a1)] == [b"C10"]
    with broker.transaction() as tx:
        assert [m.conversation_handle for m in tx.receive("iq")] == [b]  # group B (5) now first
        assert [m.conversation_handle for m in tx.receive("iq")] == [a2]


def test_receive_order_property(tmp_path_factory: pytest.TempPathFactory) -> None:
    # rule PRI-12, rule PRI-9: for any conversations, levels, groupings and sends, each RECEIVE
    # returns one group, the highest-level one left; inside it conversations by level, each in
    # send order and whole; every message exactly once
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    conversation = st.tuples(st.integers(1, 10), st.integers(1, 4))  # (level, messages)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        conversations=st.lists(conversation, min_size=1, max_size=8),
        grouping=st.lists(st.integers(0, 2), min_size=8, max_size=8),
    )
    def check(conversations: list[tuple[int, int]], grouping: list[int]) -> None:
        path = tmp_path_factory.mktemp("prop") / "b.db"
        with Broker.open(str(path)) as broker:
            broker.create_message_type("M")
            for level in range(1, 11):
                broker.create_contract(f"C{level}", {"M": "INITIATOR"})
                broker.create_broker_priority(
                    f"p{level}", contract_name=f"C{level}", priority_level=level
                )
            broker.create_queue("iq")
            broker.create_queue("tq")
            broker.create_service("I", queue="iq")
            broker.create_service("T", queue="tq", contracts=[f"C{n}" for n in range(1, 11)])
            sent: dict[str, list[bytes]] = {}
            with broker.transaction() as tx:
                for c, (level, count) in enumerate(conversations):
                    h = tx.begin_dialog("I", "T", contract=f"C{level}")
                    sent[str(c)] = [f"{c}:{i}".encode() for i in range(count)]
                    for body in sent[str(c)]:
                        tx.send(h, "M", body)
            # move target conversations into up to three groups
            first = {}
            for m in broker.peek("tq"):
                first.setdefault(m.message_body.split(b":")[0].decode(), m)
            with broker.transaction() as tx:
                anchor: dict[int, object] = {}
                for c, m in sorted(first.items(), key=lambda kv: int(kv[0])):
                    g = grouping[int(c)]
                    if g in anchor:
                        tx.move_conversation(m.conversation_handle, anchor[g])  # type: ignore[arg-type]
                    else:
                        anchor[g] = m.conversation_group_id
            level_of = {str(c): level for c, (level, _) in enumerate(conversations)}
            remaining = {c: list(bodies) for c, bodies in sent.items()}
            while True:
                with broker.transaction() as tx:
                    msgs = tx.receive("tq")
                if not msgs:
                    break
                assert len({m.conversation_group_id for m in msgs}) == 1
                convs = [m.message_body.split(b":")[0].decode() for m in msgs]
                order = list(dict.fromkeys(convs))
                assert convs == [
                    c for c in order for _ in range(convs.count(c))
                ]  # each conversation whole
                levels = [level_of[c] for c in order]
                assert levels == sorted(levels, reverse=True)  # by level inside the group
                best_left = max(level_of[c] for c, bodies in remaining.items() if bodies)
                assert levels[0] == best_left  # the highest-level group first
                for c in order:
                    got = [
                        m.message_body for m in msgs if m.message_body.split(b":")[0].decode() == c
                    ]
                    assert got == remaining[c]  # in send order, all of it
                    remaining[c] = []
            assert not any(remaining.values())

    check()


SEED_004 = """
    USE InitiatorDB;
    GO
    CREATE BROKER PRIORITY InitiatorToTargetPriority
        FOR CONVERSATION
        SET (CONTRACT_NAME = SimpleContract,
             LOCAL_SERVICE_NAME = InitiatorSerivce,
             REMOTE_SERVICE_NAME = N'TargetService',
             PRIORITY_LEVEL = 3);
    GO
"""


def test_the_seed_statement_runs_as_written(broker: Broker) -> None:
    # rule PRI-2: the documented text form, N'…' strings included. The contract and local
    # service it names exist in the seed's database:
    # CREATE BROKER PRIORITY (docs/t-sql/statements/create-broker-priority-transact-sql.md):
    # "must specify the name of a contract in the current database"
    broker.create_message_type("m")
    broker.create_contract("SimpleContract", {"m": "ANY"})
    broker.create_contract("//c/x", {"m": "ANY"})
    broker.create_queue("q")
    broker.create_service("InitiatorSerivce", queue="q")
    assert broker.execute_ddl(SEED_004) == 1
    (row,) = broker.views.conversation_priorities()
    assert (
        row.name,
        row.service_contract_name,
        row.local_service_name,
        row.remote_service_name,
        row.priority,
    ) == (
        "InitiatorToTargetPriority",
        "SimpleContract",
        "InitiatorSerivce",
        "TargetService",
        3,
    )
    broker.execute_ddl(
        "alter broker priority InitiatorToTargetPriority for conversation "
        "set (PRIORITY_LEVEL = DEFAULT, REMOTE_SERVICE_NAME = ANY);"
    )
    (row,) = broker.views.conversation_priorities()
    assert (row.priority, row.remote_service_name) == (5, None)
    broker.execute_ddl(
        "CREATE BROKER PRIORITY [//urgent] FOR CONVERSATION SET (CONTRACT_NAME = [//c/x]);"
    )
    assert {p.name for p in broker.views.conversation_priorities()} == {
        "InitiatorToTargetPriority",
        "//urgent",
    }
    broker.execute_ddl(
        "DROP BROKER PRIORITY InitiatorToTargetPriority; DROP BROKER PRIORITY [//urgent]"
    )
    assert broker.views.conversation_priorities() == []


def test_ddl_errors_name_line_and_column(broker: Broker) -> None:
    # rule PRI-2
    with pytest.raises(CatalogError, match="line 2, column 41"):
        broker.execute_ddl("CREATE BROKER PRIORITY p\n FOR CONVERSATION SET (PRIORITY_LEVEL = , x)")
    with pytest.raises(CatalogError, match="PRIORITY_LEVEL must be an integer from 1 to 10"):
        broker.execute_ddl("CREATE BROKER PRIORITY p FOR CONVERSATION SET (PRIORITY_LEVEL = 11)")
    with pytest.raises(CatalogError, match="given twice"):
        broker.execute_ddl(
            "CREATE BROKER PRIORITY p FOR CONVERSATION SET (PRIORITY_LEVEL = 1, PRIORITY_LEVEL = 2)"
        )
    assert broker.views.conversation_priorities() == []


def test_a_held_group_ranks_by_what_this_transaction_left_in_it(broker: Broker) -> None:
    # rule PRI-9, rule RCV-2: inside one transaction, a group it holds whose level-10
    # conversation it already received ranks at the level of what is left (1), below group B (5)
    setup(broker)
    broker.create_broker_priority("ten", contract_name="C10", priority_level=10)
    broker.create_broker_priority("one", contract_name="C1", priority_level=1)
    with broker.transaction() as tx:
        for contract in ("C5", "C10", "C1"):
            tx.send(tx.begin_dialog("I", "T", contract=contract), "Req", contract.encode())
    at = {m.service_contract_name: m for m in broker.peek("tq")}
    with broker.transaction() as tx:  # group A on the target side: C10 and C1
        tx.move_conversation(at["C1"].conversation_handle, at["C10"].conversation_group_id)
    with broker.transaction() as tx:
        got = tx.receive("tq", conversation_handle=at["C10"].conversation_handle)
        assert [m.message_body for m in got] == [b"C10"]
        assert [m.message_body for m in tx.receive("tq")] == [b"C5"]
        assert [m.message_body for m in tx.receive("tq")] == [b"C1"]
        assert tx.receive("tq") == []


def _groups_table(path: str) -> tuple[set[tuple[object, ...]], set[tuple[object, ...]]]:
    """queue_groups as the triggers keep it, and as recomputed from queue_messages."""
    import sqlite3

    with sqlite3.connect(path) as c:
        kept = set(c.execute("SELECT * FROM queue_groups"))
        recomputed = set(
            c.execute(
                "SELECT conversation_group_id, queue_id, priority, conversation_order, rank, "
                "message_sequence_number, queuing_order FROM (SELECT *, row_number() OVER ("
                "PARTITION BY conversation_group_id, queue_id ORDER BY priority DESC, "
                "conversation_order, rank, message_sequence_number, queuing_order) AS n "
                "FROM queue_messages WHERE status = 1) WHERE n = 1"
            )
        )
    return kept, recomputed


def test_group_index_follows_every_change_to_the_queue(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # rule PRI-9, rule PRI-12: the per-group level and head RECEIVE walks stay exact through
    # sends, partial RECEIVEs (TOP), retention, MOVE CONVERSATION, END CONVERSATION and rollbacks
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    step = st.one_of(
        st.tuples(st.just("send"), st.integers(0, 5), st.integers(1, 3)),
        st.tuples(st.just("receive"), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("move"), st.integers(0, 5), st.integers(0, 5)),
        st.tuples(st.just("end"), st.integers(0, 5), st.booleans()),
    )

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        levels=st.lists(st.integers(1, 10), min_size=6, max_size=6),
        retention=st.booleans(),
        steps=st.lists(step, max_size=12),
    )
    def check(levels: list[int], retention: bool, steps: list[tuple[str, int, object]]) -> None:
        path = str(tmp_path_factory.mktemp("groups") / "b.db")
        with Broker.open(path) as broker:
            broker.create_message_type("M")
            for level in set(levels):
                broker.create_contract(f"C{level}", {"M": "ANY"})
                broker.create_broker_priority(
                    f"p{level}", contract_name=f"C{level}", priority_level=level
                )
            broker.create_queue("iq")
            broker.create_queue("tq", retention=retention)
            broker.create_service("I", queue="iq")
            broker.create_service("T", queue="tq", contracts=[f"C{n}" for n in set(levels)])
            with broker.transaction() as tx:
                handles = [tx.begin_dialog("I", "T", contract=f"C{n}") for n in levels]
                for h in handles:
                    tx.send(h, "M", b"first")
            by_conv = {}
            for m in broker.peek("tq"):
                by_conv.setdefault(m.conversation_handle, m)
            firsts = sorted(by_conv.values(), key=lambda m: m.queuing_order)
            targets = {n: m.conversation_handle for n, m in enumerate(firsts)}
            group_of = {n: m.conversation_group_id for n, m in enumerate(firsts)}
            for kind, a, b in steps:
                with broker.transaction() as tx:
                    if kind == "send" and handles[a] is not None:
                        for _ in range(int(b)):  # type: ignore[call-overload]
                            tx.send(handles[a], "M", b"x")
                    elif kind == "receive":
                        tx.receive("tq", top=a)
                        if b:
                            tx.rollback()
                    elif kind == "move" and a in targets and b in targets and a != b:
                        tx.move_conversation(targets[a], group_of[b])  # type: ignore[index]
                        group_of[a] = group_of[b]  # type: ignore[index]
                    elif kind == "end" and handles[a] is not None:
                        tx.end_conversation(handles[a], cleanup=bool(b))
                        handles[a] = None
                kept, recomputed = _groups_table(path)
                assert kept == recomputed

    check()


@pytest.mark.sqlite_only
def test_group_choice_reads_the_group_index_not_the_messages(broker: Broker) -> None:
    # rule PRI-13: the candidate walk is an index search over groups
    import sqlite3

    from servicebroker.storage.queries import load_queries

    setup(broker)
    queries = load_queries("servicebroker.storage.sqlite")
    with sqlite3.connect(broker.url.removeprefix("sqlite:///")) as c:
        for name, params in (
            ("candidate_groups", (1,)),
            ("candidate_groups_excluding", (1, '["00"]')),
        ):
            plan = " ".join(r[3] for r in c.execute("EXPLAIN QUERY PLAN " + queries[name], params))
            assert "queue_groups_next" in plan and "queue_messages" not in plan, name


@pytest.mark.sqlite_only
def test_upgrade_builds_the_group_index_from_queued_messages(url: str) -> None:
    # rule PRI-12: a database made before migration 4 gets its group index from its messages
    import sqlite3

    with Broker.open(url) as broker:
        setup(broker)
        broker.create_broker_priority("ten", contract_name="C10", priority_level=10)
        with broker.transaction() as tx:
            for contract in ("C5", "C10", "C1"):
                tx.send(tx.begin_dialog("I", "T", contract=contract), "Req", contract.encode())
    with sqlite3.connect(url) as c:
        for trigger in ("after_insert", "after_delete", "after_update"):
            c.execute(f"DROP TRIGGER queue_groups_{trigger}")
        c.execute("DROP TABLE queue_groups")
        c.execute("DELETE FROM schema_migrations WHERE version = 4")
    with Broker.open(url) as broker:
        kept, recomputed = _groups_table(url)
        assert kept == recomputed and len(kept) == 3
        with broker.transaction() as tx:
            assert [m.message_body for m in tx.receive("tq")] == [b"C10"]
