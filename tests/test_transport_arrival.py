"""The storage side of the dialog protocol (servicebroker.transport.arrival), without sockets:
what a message from another broker instance does to this database, decided in one write
transaction — on both backends."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from servicebroker import Broker
from servicebroker.dialogs import ERROR, error_body, parse_error_body
from servicebroker.engine.delivery import Applier
from servicebroker.engine.system_messages import SERVICE_DROPPED
from servicebroker.transport.arrival import ArrivalSecurity, Verdict, take_arrival
from servicebroker.transport.dialog_protection import KeyRing
from servicebroker.transport.wire import MessageHeader

FAR = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")

PLAIN = ArrivalSecurity(KeyRing(), wall_now=1.7e9)  # dialogs not secured: no keys needed


def header(conversation_id: bytes, sequence: int, **changes: object) -> MessageHeader:
    fields: dict[str, object] = dict(
        conversation_id=conversation_id,
        is_initiator=True,
        sequence=sequence,
        message_id=uuid.uuid4().bytes,
        from_service="//far/Initiator",
        to_service="//here/Target",
        contract="DEFAULT",
        message_type="DEFAULT",
        validation="N",
        from_broker_instance=FAR,
        to_broker_instance=None,
        priority=5,
        lifetime=None,
        message_size=2,
        fragment_count=1,
    )
    fields.update(changes)
    return MessageHeader(**fields)  # type: ignore[arg-type]


@contextmanager
def arriving(broker: Broker) -> Iterator[Applier]:
    """One write transaction of ``broker``'s storage with its Applier (what the transport's
    dispatcher runs), committed at the end."""
    context = broker._context  # type: ignore[attr-defined]
    with context.storage.connection() as conn:
        conn.begin_write()
        applier = Applier(conn, context.catalog.snapshot(conn), broker.clock.now())
        yield applier
        applier.finish()
        conn.commit()


def test_a_later_message_of_a_new_dialog_waits_for_the_first(broker: Broker) -> None:
    # NET-5: a dialog's first message may still be in fragments when a later, smaller one is
    # complete: the later one waits (not acknowledged, not received, no Error to the sender)
    broker.create_queue("tq")
    broker.create_service("//here/Target", queue="tq", contracts=["DEFAULT"])
    broker.grant("SEND", on="SERVICE:://here/Target", to="public")
    conversation = uuid.uuid4().bytes
    with arriving(broker) as applier:
        assert take_arrival(applier, header(conversation, 1), b"m1", PLAIN).verdict is Verdict.LATER
    assert broker.views.conversation_endpoints() == []
    with arriving(broker) as applier:
        assert (
            take_arrival(applier, header(conversation, 0), b"m0", PLAIN).verdict
            is Verdict.DELIVERED
        )
        assert (
            take_arrival(applier, header(conversation, 1), b"m1", PLAIN).verdict
            is Verdict.DELIVERED
        )
        # NET-2: a second copy is a duplicate, acknowledged again and dropped
        assert (
            take_arrival(applier, header(conversation, 0), b"m0", PLAIN).verdict
            is Verdict.DUPLICATE
        )
    with broker.transaction() as tx:
        assert [m.message_body for m in tx.receive("tq", top=10)] == [b"m0", b"m1"]
    [target] = broker.views.conversation_endpoints()
    assert target.far_broker_instance == str(FAR) and target.receive_sequence == 2


def test_lifetime_queue_off_and_the_far_brokers_error(broker: Broker) -> None:
    """The storage side of issue 12's fixes. DLG-5: a new dialog's message whose lifetime
    has passed is discarded (acknowledged, no endpoint). QUE-3, NET-7: a message for an
    endpoint whose queue is OFF is refused with a status naming the queue. An unsequenced
    Error from the far broker (DROP SERVICE there: -8470) puts the endpoint in ER with the
    Error on its queue, once: a second copy changes nothing."""
    broker.create_queue("tq")
    broker.create_service("//here/Target", queue="tq", contracts=["DEFAULT"])
    broker.grant("SEND", on="SERVICE:://here/Target", to="public")
    now = broker.clock.now()
    with arriving(broker) as applier:
        expired = header(uuid.uuid4().bytes, 0, lifetime=now - 1)
        assert take_arrival(applier, expired, b"m0", PLAIN).verdict is Verdict.DELIVERED
    assert broker.views.conversation_endpoints() == []
    conversation = uuid.uuid4().bytes
    with arriving(broker) as applier:
        first = header(conversation, 0, lifetime=now + 60)
        assert take_arrival(applier, first, b"m0", PLAIN).verdict is Verdict.DELIVERED
    broker.alter_queue("tq", status=False)
    with arriving(broker) as applier:
        outcome = take_arrival(applier, header(conversation, 1), b"m1", PLAIN)
    assert outcome.verdict is Verdict.REFUSED and "'tq' is disabled" in outcome.status
    broker.alter_queue("tq", status=True)
    dropped = error_body(*SERVICE_DROPPED)
    for _ in range(2):
        with arriving(broker) as applier:
            error = header(conversation, -1, message_type=ERROR, message_size=len(dropped))
            assert take_arrival(applier, error, dropped, PLAIN).verdict is Verdict.DELIVERED
    [target] = broker.views.conversation_endpoints()
    assert target.state == "ER"
    with broker.transaction() as tx:
        got = tx.receive("tq", top=10)
    assert [m.message_type_name for m in got] == [ERROR, "DEFAULT"]
    assert parse_error_body(got[0].message_body) == SERVICE_DROPPED
