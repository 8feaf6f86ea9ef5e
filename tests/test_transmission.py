"""The transmission queue's order: by level across every destination when HONOR_BROKER_PRIORITY
is ON, send order when OFF, and aging as starvation prevention (PRI-14..18)."""

from __future__ import annotations

import pytest

from servicebroker import Broker, BrokerError, CatalogError, ManualClock
from servicebroker.catalog.priorities import transmission_level, transmission_order

LEVELS = (1, 5, 10)


def setup(broker: Broker) -> None:
    """Services A and B on queue tq (OFF), contracts C1, C5, C10 at their levels."""
    broker.create_message_type("M")
    for level in LEVELS:
        broker.create_contract(f"C{level}", {"M": "INITIATOR"})
        broker.create_broker_priority(f"p{level}", contract_name=f"C{level}", priority_level=level)
    broker.create_queue("iq")
    broker.create_queue("tq", status=False)
    broker.create_service("I", queue="iq")
    for target in ("A", "B"):
        broker.create_service(target, queue="tq", contracts=[f"C{n}" for n in LEVELS])


def send_interleaved(broker: Broker) -> list[bytes]:
    """Two conversations per level (to A and to B), sends interleaved; returns the bodies in
    send order."""
    with broker.transaction() as tx:
        handles = [
            (level, tx.begin_dialog("I", target, contract=f"C{level}"))
            for target in ("A", "B")
            for level in LEVELS
        ]
        bodies = []
        for i in range(2):
            for level, h in handles:
                body = f"{level}:{i}:{len(bodies)}".encode()
                tx.send(h, "M", body)
                bodies.append(body)
    return bodies


def delivered_order(broker: Broker) -> list[bytes]:
    return [m.message_body for m in sorted(broker.peek("tq"), key=lambda m: m.queuing_order)]


def test_off_sends_every_message_at_level_5_in_send_order(broker: Broker) -> None:
    # rule PRI-16: OFF (the default) — the view shows each endpoint's level, order is send order
    setup(broker)
    assert broker.catalog.honor_broker_priority is False
    bodies = send_interleaved(broker)
    waiting = broker.views.transmission_queue()
    assert sorted({(r.to_service_name, r.priority) for r in waiting}) == [
        (t, level) for t in ("A", "B") for level in LEVELS
    ]
    broker.alter_queue("tq", status=True)
    assert delivered_order(broker) == bodies
    assert broker.views.transmission_queue_count() == 0


def test_on_sends_by_level_across_destinations_then_send_order(broker: Broker) -> None:
    # rule PRI-14, rule PRI-16: ON — level 10 to every destination first, then 5, then 1; each
    # level in send order
    setup(broker)
    broker.alter_database(honor_broker_priority=True)
    assert broker.catalog.honor_broker_priority is True
    bodies = send_interleaved(broker)
    broker.alter_queue("tq", status=True)
    expected = [b for level in (10, 5, 1) for b in bodies if b.startswith(f"{level}:".encode())]
    assert delivered_order(broker) == expected


def test_local_sends_to_an_active_queue_skip_the_transmission_queue(broker: Broker) -> None:
    # rule PRI-17: straight into the service's queue; a message waits (and its level applies)
    # only while the target queue is inactive
    setup(broker)
    broker.alter_database(honor_broker_priority=True)
    broker.alter_queue("tq", status=True)
    send_interleaved(broker)
    assert broker.views.transmission_queue_count() == 0
    assert len(broker.peek("tq")) == 12


@pytest.mark.parametrize(
    ("aging", "waited", "first"),
    [(10.0, 95.0, b"low"), (10.0, 85.0, b"high"), (None, 10_000.0, b"high")],
)
def test_a_long_wait_raises_the_level_so_low_levels_are_not_starved(
    url: str, aging: float | None, waited: float, first: bytes
) -> None:
    # rule PRI-18, rule PRI-15: aging (10 s per level by default): a level-1 message that has
    # waited 9 intervals leaves before a level-10 message sent after it; 8.5 intervals are not
    # enough; with aging off (strict priority) level 10 always leaves first
    clock = ManualClock(1_700_000_000.0)
    with Broker.open(url, clock=clock, priority_aging_interval=aging) as broker:
        setup(broker)
        broker.alter_database(honor_broker_priority=True)
        with broker.transaction() as tx:
            tx.send(tx.begin_dialog("I", "A", contract="C1"), "M", b"low")
        clock.advance(waited)
        with broker.transaction() as tx:
            tx.send(tx.begin_dialog("I", "B", contract="C10"), "M", b"high")
        broker.alter_queue("tq", status=True)
        assert delivered_order(broker)[0] == first


def test_transmission_level_and_order_are_pure_functions() -> None:
    # rule PRI-16, rule PRI-18
    assert transmission_level(1, 1_000.0, honor=False) == 5
    assert transmission_level(3, 0.0, honor=True) == 3
    assert transmission_level(3, 29.9, honor=True, aging_interval=10.0) == 5
    assert transmission_level(3, 10_000.0, honor=True, aging_interval=10.0) == 10
    assert transmission_level(3, 10_000.0, honor=True, aging_interval=None) == 3
    rows = [(1, 1, 0.0), (2, 10, 50.0), (3, 5, 50.0), (4, 1, 50.0)]
    assert transmission_order(rows, 50.0, honor=False) == [1, 2, 3, 4]
    assert transmission_order(rows, 50.0, honor=True, aging_interval=None) == [2, 3, 1, 4]
    # message 1 has waited 50 s: level 1 + 5 = 6, ahead of level 5
    assert transmission_order(rows, 50.0, honor=True, aging_interval=10.0) == [2, 1, 3, 4]


def test_one_conversations_messages_keep_their_send_order_under_aging() -> None:
    # rule PRI-14, rule PRI-18: for any rows and time, messages of one level (one conversation)
    # leave in send order
    from hypothesis import given
    from hypothesis import strategies as st

    @given(
        st.lists(st.tuples(st.integers(1, 10), st.floats(0, 500)), max_size=30),
        st.floats(0, 1000),
        st.sampled_from([None, 1.0, 10.0, 60.0]),
    )
    def check(items: list[tuple[int, float]], later: float, aging: float | None) -> None:
        # send order = transmission id order = enqueue time order
        items = sorted(items, key=lambda i: i[1])
        rows = [(tid, level, t) for tid, (level, t) in enumerate(items)]
        now = (items[-1][1] if items else 0.0) + later
        order = transmission_order(rows, now, honor=True, aging_interval=aging)
        assert sorted(order) == [r[0] for r in rows]
        for level in range(1, 11):
            mine = [tid for tid in order if rows[tid][1] == level]
            assert mine == sorted(mine)

    check()


def test_honor_broker_priority_in_ddl_and_bad_values(broker: Broker) -> None:
    # rule PRI-16
    assert broker.execute_ddl("ALTER DATABASE [db] SET HONOR_BROKER_PRIORITY ON;\nGO") == 1
    assert broker.catalog.honor_broker_priority is True
    broker.execute_ddl("alter database db set honor_broker_priority off")
    assert broker.catalog.honor_broker_priority is False
    with pytest.raises(CatalogError, match="line 1, column 45"):
        broker.execute_ddl("ALTER DATABASE db SET HONOR_BROKER_PRIORITY MAYBE")
    with pytest.raises(CatalogError, match="HONOR_BROKER_PRIORITY"):
        broker.alter_database(honor_broker_priority="ON")  # type: ignore[arg-type]
    with pytest.raises(
        BrokerError, match=r"priority_aging_interval must be a finite number of seconds > 0, got 0"
    ):
        Broker.open(broker.url, priority_aging_interval=0)
    with pytest.raises(BrokerError, match=r"priority_aging_interval must be a finite .* got inf"):
        Broker.open(broker.url, priority_aging_interval=float("inf"))
