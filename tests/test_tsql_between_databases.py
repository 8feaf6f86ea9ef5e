"""Dialogs between the databases of one instance (issue 28): Microsoft's tutorial "Completing a
Conversation Between Databases" (docs/database-engine/service-broker/
completing-a-conversation-between-databases.md; its four lessons kept verbatim in
tests/data/tsql/between_databases_lesson*.sql, each naming its page and commit) run unchanged
through ``servicebroker sqlcmd`` and ``Instance``, on a folder and on PostgreSQL — and the
dialog's guarantees across the databases: exactly once and in order, END CONVERSATION and Errors
crossing, messages that wait in sys.transmission_queue with their status and go once they can,
and no loss or duplicate when the link fails between its steps and the instance is opened again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from servicebroker import Instance, ManualClock
from servicebroker.cli import main
from servicebroker.testing.waiting import eventually

DATA = Path(__file__).parent / "data" / "tsql"
LESSONS = [DATA / f"between_databases_lesson{n}.sql" for n in (1, 2, 3, 4)]
INITIATOR = "//InitDB/2DBSample/InitiatorService"
TARGET = "//TgtDB/2DBSample/TargetService"
CONTRACT = "//BothDB/2DBSample/SimpleContract"
REQUEST = "//BothDB/2DBSample/RequestMessage"
REPLY = "//BothDB/2DBSample/ReplyMessage"
END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"


def column(name: str, value: str) -> str:
    """One single-column result set as sqlcmd prints an NVARCHAR(100) variable's."""
    return f"{name.ljust(100)}\n{'-' * 100}\n{value.ljust(100)}\n\n(1 row affected)\n"


REQUEST_TEXT = "<RequestMsg>Message for Target service.</RequestMsg>"
REPLY_TEXT = "<ReplyMsg>Message for Initiator service.</ReplyMsg>"
EXPECTED_LESSON_4 = (
    "Changed database context to 'InitiatorDB'.\n"
    + column("SentRequestMsg", REQUEST_TEXT)
    + "Changed database context to 'TargetDB'.\n"
    + column("ReceivedRequestMsg", REQUEST_TEXT)
    + column("SentReplyMsg", REPLY_TEXT)
    + "Changed database context to 'InitiatorDB'.\n"
    + column("ReceivedReplyMsg", REPLY_TEXT)
)


def assert_all_closed(instance: Instance) -> None:
    """What the tutorial leaves: both queues and both transmission queues empty, and no
    conversation endpoint open in either database."""
    for database, queue in (("TargetDB", "TargetQueue2DB"), ("InitiatorDB", "InitiatorQueue2DB")):
        broker = instance.database(database)
        assert broker.peek(queue) == []
        assert broker.views.transmission_queue() == []
        assert [e.state_desc for e in broker.views.conversation_endpoints()] == []


def test_every_lesson_runs_unchanged_through_sqlcmd(instance_location: str) -> None:
    """sqlcmd -i each lesson in order, one run: the request reaches TargetDB's queue, the
    reply comes back, both ends close; the output is what the page's SELECTs show."""
    args = ["sqlcmd", "-S", instance_location, "-b"]
    for lesson in LESSONS:
        args += ["-i", str(lesson)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert (result.exit_code, result.output) == (
        0,
        "Changed database context to 'master'.\n"
        "Changed database context to 'TargetDB'.\n"
        "Changed database context to 'InitiatorDB'.\n" + EXPECTED_LESSON_4,
    )
    with Instance.open(instance_location) as instance:
        assert_all_closed(instance)
        trusted = instance.execute(
            "SELECT name, is_trustworthy_on FROM sys.databases WHERE name LIKE N'%DB' ORDER BY name"
        )
        assert trusted.result_sets[0].values == [["InitiatorDB", 1], ["TargetDB", 0]]


def test_the_instance_runs_the_tutorial_and_the_request_is_there_at_commit(
    instance: Instance,
) -> None:
    """Lesson 4's RECEIVE in TargetDB comes in the batch after the SEND's (a WAITFOR of one
    second): SQL Server puts a message for a service of another database of the instance on
    its queue at commit when it can — so here, with the manual clock standing still, the
    request is on TargetQueue2DB when the SEND batch returns."""
    for lesson in LESSONS[:3]:
        instance.execute(lesson.read_text())
    text = LESSONS[3].read_text()
    send, rest = text.split("    USE TargetDB;", 1)
    sent = instance.execute(send)
    assert [r.values for r in sent.result_sets] == [[[REQUEST_TEXT]]]
    target = instance.database("TargetDB")
    (request,) = target.peek("TargetQueue2DB")
    assert (request.message_type_name, request.service_name) == (REQUEST, TARGET)
    assert request.message_body.decode("utf-16-le") == REQUEST_TEXT
    assert instance.database("InitiatorDB").views.transmission_queue() == []  # acknowledged
    results = instance.execute("    USE TargetDB;" + rest)
    assert [r.values[0][0] for r in results.result_sets] == [REQUEST_TEXT, REPLY_TEXT, REPLY_TEXT]
    assert_all_closed(instance)


def build_pair(
    instance: Instance, *, trustworthy: bool = True, target_service: bool = True
) -> None:
    """Lessons 1-3 (lesson 1 without TRUSTWORTHY when ``trustworthy`` is False, lesson 2
    without its service when ``target_service`` is False)."""
    first = LESSONS[0].read_text()
    if not trustworthy:
        first = first.replace("ALTER DATABASE InitiatorDB SET TRUSTWORTHY ON;", "")
    instance.execute(first)
    second = LESSONS[1].read_text()
    if not target_service:
        second = second.split("    CREATE SERVICE", 1)[0]
    instance.execute(second)
    instance.execute(LESSONS[2].read_text())


def begin(instance: Instance) -> uuid.UUID:
    """A dialog from InitiatorDB to TargetDB through the Python API."""
    with instance.database("InitiatorDB").transaction() as tx:
        return tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, encryption=False)


def send_numbered(instance: Instance, handle: uuid.UUID, numbers: range, per_tx: int = 3) -> None:
    broker = instance.database("InitiatorDB")
    values = list(numbers)
    for i in range(0, len(values), per_tx):
        with broker.transaction() as tx:
            for n in values[i : i + per_tx]:
                tx.send(handle, REQUEST, f"<n>{n}</n>")


def received_numbers(instance: Instance) -> list[int]:
    """Every request RECEIVEd from TargetQueue2DB, as its number, in RECEIVE order."""
    out = []
    broker = instance.database("TargetDB")
    while True:
        with broker.transaction() as tx:
            got = tx.receive("TargetQueue2DB", top=1000)
        if not got:
            return out
        out += [int(m.message_body[3:-4]) for m in got if m.message_type_name == REQUEST]


def test_the_python_api_brokers_of_two_databases_talk_exactly_once_in_order(
    instance: Instance,
) -> None:
    """``instance.database("InitiatorDB")`` and ``.database("TargetDB")``: 40 messages in 14
    transactions on two dialogs arrive once each, in order per dialog; the target's replies
    and END CONVERSATIONs come back and both ends close."""
    build_pair(instance)
    first, second = begin(instance), begin(instance)
    send_numbered(instance, first, range(0, 20))
    send_numbered(instance, second, range(100, 120))
    got = received_numbers(instance)
    assert sorted(got) == [*range(0, 20), *range(100, 120)]
    assert [n for n in got if n < 100] == list(range(20))
    assert [n for n in got if n >= 100] == list(range(100, 120))
    target = instance.database("TargetDB")
    for endpoint in target.views.conversation_endpoints():
        with target.transaction() as tx:
            tx.send(endpoint.conversation_handle, REPLY, "<done/>")
            tx.end_conversation(endpoint.conversation_handle)
    initiator = instance.database("InitiatorDB")
    arrived = initiator.peek("InitiatorQueue2DB")
    assert sorted(m.message_type_name for m in arrived) == sorted([REPLY, END_DIALOG] * 2)
    for handle in (first, second):
        with initiator.transaction() as tx:
            tx.receive("InitiatorQueue2DB", conversation_handle=handle)
            tx.end_conversation(handle)
    assert_all_closed(instance)


def test_an_error_crosses_both_ways(instance: Instance) -> None:
    """END CONVERSATION WITH ERROR in TargetDB reaches InitiatorDB as an Error message (the
    endpoint in ER); a message TargetDB's validation refuses (its type there is
    WELL_FORMED_XML, InitiatorDB's NONE) ends the initiator's side with the broker's Error."""
    build_pair(instance)
    handle = begin(instance)
    send_numbered(instance, handle, range(1))
    target = instance.database("TargetDB")
    (far,) = target.views.conversation_endpoints()
    with target.transaction() as tx:
        tx.end_conversation(far.conversation_handle, error=50001, description="no thanks")
    initiator = instance.database("InitiatorDB")
    (error,) = initiator.peek("InitiatorQueue2DB")
    assert error.message_type_name == "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    assert b"no thanks" in error.message_body.replace(b"\x00", b"")
    assert [e.state_desc for e in initiator.views.conversation_endpoints()] == ["ERROR"]

    instance.execute(
        "ALTER MESSAGE TYPE [//BothDB/2DBSample/RequestMessage] VALIDATION = NONE",
        database="InitiatorDB",
    )
    handle = begin(instance)
    with initiator.transaction() as tx:
        tx.send(handle, REQUEST, b"not xml <")
    states = instance.execute(
        f"SELECT state_desc FROM sys.conversation_endpoints WHERE conversation_handle = '{handle}'",
        database="InitiatorDB",
    )
    assert states.result_sets[0].values == [["ERROR"]]
    assert initiator.views.transmission_queue() == []
    assert target.peek("TargetQueue2DB") == []  # nothing of either dialog was enqueued


def tick(instance: Instance, clock: ManualClock, probe: Callable[[], bool]) -> None:
    """Move the started instance's clock a timer tick at a time until ``probe`` holds."""

    def moved() -> bool:
        clock.advance(5)
        return probe()

    eventually(moved, "delivery after the cause is gone", timeout=30, every=0.05)


def test_a_message_that_cannot_go_waits_with_its_status_and_goes_when_it_can(
    instance: Instance, clock: ManualClock
) -> None:
    """sys.transmission_queue in InitiatorDB shows the waiting requests with why they wait, as
    each cause goes in turn on the timer's ticks: the target service in no database; then the
    target queue OFF; then InitiatorDB not TRUSTWORTHY (SQL Server's Msg 916). Once none is
    left, the next tick delivers them, once each and in order."""
    build_pair(instance, trustworthy=False, target_service=False)
    instance.execute("ALTER QUEUE TargetQueue2DB WITH STATUS = OFF", database="TargetDB")
    handle = begin(instance)
    send_numbered(instance, handle, range(3))
    instance.start()

    def statuses() -> list[list[object]]:
        return (
            instance.execute(
                "SELECT to_service_name, message_sequence_number, transmission_status "
                "FROM sys.transmission_queue ORDER BY message_sequence_number",
                database="InitiatorDB",
            )
            .result_sets[0]
            .values
        )

    def first_status() -> str:
        rows = statuses()
        return str(rows[0][2]) if rows else ""

    behind = "waiting behind earlier messages of the conversation"
    assert statuses() == [
        [TARGET, 0, f"the target service '{TARGET}' does not exist"],
        [TARGET, 1, behind],
        [TARGET, 2, behind],
    ]
    instance.execute(
        f"CREATE SERVICE [{TARGET}] ON QUEUE TargetQueue2DB ([{CONTRACT}])", database="TargetDB"
    )
    tick(
        instance, clock, lambda: first_status() == "The target queue 'TargetQueue2DB' is disabled."
    )
    assert [row[:2] for row in statuses()] == [[TARGET, n] for n in range(3)]
    target = instance.database("TargetDB")
    assert target.peek("TargetQueue2DB") == []
    instance.execute("ALTER QUEUE TargetQueue2DB WITH STATUS = ON", database="TargetDB")
    untrusted = (
        "An exception occurred while enqueueing a message in the target queue. Error: "
        '916, State: 3. The server principal "sa" is not able to access the database '
        '"TargetDB" under the current security context.'
    )
    tick(instance, clock, lambda: first_status() == untrusted)
    assert target.peek("TargetQueue2DB") == []
    instance.execute("ALTER DATABASE InitiatorDB SET TRUSTWORTHY ON")
    tick(instance, clock, lambda: len(target.peek("TargetQueue2DB")) == 3)
    assert received_numbers(instance) == [0, 1, 2]
    eventually(lambda: instance.database("InitiatorDB").views.transmission_queue() == [])


class Fault(Exception):
    """The failure a test injects at one step of the link."""


def test_a_failure_at_each_step_of_the_link_loses_nothing_and_duplicates_nothing(
    instance_location: str, clock: ManualClock
) -> None:
    """The link fails at each of its steps in turn — after reading InitiatorDB's rows; after
    TargetDB committed them, before InitiatorDB forgot them; after both — for one batch of
    messages each time; the instance is then closed, as a crashed process leaves it, and opened
    again, and more messages follow. TargetDB has each committed message exactly once, in send
    order (across the restarts), and InitiatorDB's transmission queue empties."""
    instance = Instance.open(instance_location, clock=clock)
    try:
        build_pair(instance)
        handle = begin(instance)
        send_numbered(instance, handle, range(0, 4))
        sent = 4
        for step in ("read", "taken", "answered"):
            failures = []

            def fail(at: str, step: str = step, failures: list[str] = failures) -> None:
                if at == step:
                    failures.append(at)
                    raise Fault(f"injected at {at}")

            instance.link.step = fail
            send_numbered(instance, handle, range(sent, sent + 4), per_tx=4)
            sent += 4
            assert failures == [step]
            left = instance.database("InitiatorDB").views.transmission_queue()
            assert len(left) == (0 if step == "answered" else 4)
            instance.close()
            instance = Instance.open(instance_location, clock=clock)  # the process again
            send_numbered(instance, handle, range(sent, sent + 2))
            sent += 2
        assert received_numbers(instance) == list(range(sent))
        assert instance.database("InitiatorDB").views.transmission_queue() == []
        assert len(instance.database("TargetDB").views.conversation_endpoints()) == 1
    finally:
        instance.close()


def test_two_instances_carrying_at_once_deliver_once(instance_location: str) -> None:
    """Two processes' views of one instance (two ``Instance`` objects) both carry the same
    rows: the receiving side's de-duplication by sequence number keeps each message once."""
    clock = ManualClock(1_000_000.0)
    one = Instance.open(instance_location, clock=clock)
    two = Instance.open(instance_location, clock=clock)
    try:
        build_pair(one)
        one.link.step = lambda at: None
        handle = begin(one)

        def hold(at: str) -> None:
            if at == "read":
                raise Fault("not now")

        one.link.step = hold
        send_numbered(one, handle, range(6))
        assert len(one.database("InitiatorDB").views.transmission_queue()) == 6
        one.link.step = lambda at: None
        two.link.carry_from("InitiatorDB")
        one.link.carry_from("InitiatorDB")
        assert received_numbers(two) == list(range(6))
        assert one.database("InitiatorDB").views.transmission_queue() == []
    finally:
        one.close()
        two.close()
