"""``servicebroker diagnose`` as ssbdiagnose reports (docs/tools/ssbdiagnose/
ssbdiagnose-utility-service-broker.md): CONFIGURATION checks everything a dialog between two
services on a contract needs ("Configuration checks can be made for either two services or a
single service"; ON CONTRACT defaults to DEFAULT; ENCRYPTION ON is the default level), RUNTIME
reports the issues that stop running conversations; each issue is reported once with a level
(ERROR, WARNING, INFO, ``-LEVEL``) and an id ``-IGNORE`` can name; output as text or (here
``--json`` for ssbdiagnose's ``-XML``) a machine-readable list. Each seeded misconfiguration is
found with its code, a healthy broker reports nothing, and the exit status says which.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from servicebroker import Activation, Broker, ManualClock
from servicebroker.cli import main
from servicebroker.diagnose import (
    CODES,
    Finding,
    check_configuration,
    check_runtime,
    has_problems,
    runtime_findings,
)
from servicebroker.diagnose.command import parse_report
from servicebroker.diagnose.configuration import procedure_problem
from servicebroker.diagnose.runtime import BEHIND, classify_status
from servicebroker.engine.claims import GroupClaim
from servicebroker.testing.waiting import eventually
from servicebroker.transport.certificates import make_self_signed
from servicebroker.views import TransmissionQueueRow

from .conftest import START, Pair, drop_url, make_pair, new_url

INITIATOR, TARGET, CONTRACT = "//test/Initiator", "//test/Target", "C"


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def problems(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings if f.is_problem]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Broker]:
    """A broker on an SQLite file, on a manual clock."""
    b = Broker.open(str(tmp_path / "broker.db"), clock=ManualClock(START), poll_interval=0.01)
    yield b
    b.close()


def reply_and_end(context: object) -> None:
    """An activated procedure: receive everything, end each conversation (the target's side)."""
    broker = context.broker  # type: ignore[attr-defined]
    queue = context.queue_name  # type: ignore[attr-defined]
    while True:
        with broker.transaction() as tx:
            msgs = tx.receive(queue, timeout=0)
            for m in msgs:
                tx.end_conversation(m.conversation_handle)
        if not msgs:
            return


# -- every code is documented ---------------------------------------------------------------
def test_every_code_is_documented_with_its_severity() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "diagnose.md").read_text(encoding="utf-8")
    for code, (severity, _) in CODES.items():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{code}` ")), None)
        assert row is not None, f"{code} is not in docs/diagnose.md"
        assert f"| {severity} |" in row, f"{code}: docs/diagnose.md gives another severity"


# -- CONFIGURATION ----------------------------------------------------------------------------
def test_a_complete_dialog_set_up_reports_no_problem(db: Broker) -> None:
    make_pair(db)
    db.register_procedure("ProcessOrders", reply_and_end)
    db.alter_queue("tq", activation=Activation("ProcessOrders", max_queue_readers=2))
    db.alter_queue("iq", activation=Activation("json:dumps", status=False))
    found = check_configuration(db, INITIATOR, TARGET, CONTRACT)
    assert problems(found) == []
    # infos only: the contract's message types, and the initiator queue's activation is OFF
    assert codes(found) == ["SBD-CFG-CONTRACT-MESSAGE-TYPES", "SBD-CFG-ACTIVATION-OFF"]
    assert "Req (SENT BY INITIATOR, VALIDATION = NONE)" in found[0].message


def test_a_missing_contract_on_the_target_service_is_found(db: Broker) -> None:
    make_pair(db)
    db.alter_service(TARGET, drop_contracts=[CONTRACT])
    found = check_configuration(db, INITIATOR, TARGET, CONTRACT)
    assert problems(found) == ["SBD-CFG-CONTRACT-NOT-ON-TARGET"]
    f = found[1]
    assert f.severity == "error"
    assert f.objects == {"service": TARGET, "contract": CONTRACT}
    assert f"ALTER SERVICE [{TARGET}] (ADD CONTRACT [C])" in f.fix


def test_an_unknown_contract_and_services_are_found(db: Broker) -> None:
    make_pair(db)
    found = check_configuration(db, "//nobody", TARGET, "NoSuchContract")
    assert problems(found) == ["SBD-CFG-CONTRACT-MISSING", "SBD-CFG-FROM-SERVICE-MISSING"]
    # a target that is not here: AutoCreatedLocal keeps its messages here until it exists
    found = check_configuration(db, INITIATOR, "//missing", CONTRACT)
    assert problems(found) == ["SBD-CFG-TO-SERVICE-MISSING"]
    assert found[-1].objects["route"] == "AutoCreatedLocal"
    db.drop_route("AutoCreatedLocal")
    assert problems(check_configuration(db, INITIATOR, "//missing", CONTRACT)) == [
        "SBD-CFG-NO-ROUTE"
    ]


def test_a_disabled_queue_is_found_by_both_reports(db: Broker) -> None:
    make_pair(db)
    db.alter_queue("tq", status=False)
    found = check_configuration(db, INITIATOR, TARGET, CONTRACT)
    assert problems(found) == ["SBD-CFG-QUEUE-DISABLED"]
    assert found[-1].objects == {"service": TARGET, "queue": "tq"}
    run = check_runtime(db)
    assert codes(run) == ["SBD-RUN-QUEUE-DISABLED"]
    assert run[0].objects["queue"] == "tq"


def test_an_unimportable_activation_procedure_is_found(db: Broker) -> None:
    make_pair(db)
    db.alter_queue("tq", activation=Activation("no_such_module_xyz:process"))
    found = check_configuration(db, INITIATOR, TARGET, CONTRACT)
    assert problems(found) == ["SBD-CFG-ACTIVATION-PROCEDURE-UNIMPORTABLE"]
    assert "No module named 'no_such_module_xyz'" in found[-1].message
    assert found[-1].objects == {"queue": "tq", "procedure": "no_such_module_xyz:process"}
    # a missing attribute, and a callable only this process can run (never called here)
    assert procedure_problem("json:no_such_function") is not None
    assert procedure_problem("json:dumps") is None
    db.alter_queue("tq", activation=Activation(lambda ctx: None))
    found = check_configuration(db, None, TARGET, CONTRACT)
    assert problems(found) == []  # right for one broker process: an info
    assert codes(found)[-1] == "SBD-CFG-ACTIVATION-PROCEDURE-IN-PROCESS"


def test_activation_readers_users_and_permissions(db: Broker) -> None:
    make_pair(db)
    db.alter_queue("tq", activation=Activation("json:dumps", max_queue_readers=0))
    assert problems(check_configuration(db, None, TARGET, CONTRACT)) == [
        "SBD-CFG-ACTIVATION-NO-READERS"
    ]
    db.create_user("worker")
    db.alter_queue("tq", activation=Activation("json:dumps", execute_as="worker"))
    assert problems(check_configuration(db, None, TARGET, CONTRACT)) == [
        "SBD-CFG-PERMISSION-RECEIVE"
    ]
    db.grant("RECEIVE", on="QUEUE::tq", to="worker")
    assert problems(check_configuration(db, None, TARGET, CONTRACT)) == []
    # the principal beginning the dialog needs SEND on the target service
    db.create_user("alice")
    found = check_configuration(db, INITIATOR, TARGET, CONTRACT, principal="alice")
    assert problems(found) == ["SBD-CFG-PERMISSION-SEND"]
    assert found[-1].objects == {"service": TARGET, "user": "alice"}
    db.grant("SEND", on=f"SERVICE::{TARGET}", to="alice")
    assert problems(check_configuration(db, INITIATOR, TARGET, CONTRACT, principal="alice")) == []


def test_the_priorities_that_apply_are_reported(db: Broker) -> None:
    make_pair(db)
    db.create_broker_priority(
        "urgent", contract_name=CONTRACT, local_service_name=TARGET, priority_level=9
    )
    found = [
        f
        for f in check_configuration(db, INITIATOR, TARGET, CONTRACT)
        if f.code == "SBD-CFG-PRIORITY"
    ]
    assert len(found) == 1 and found[0].severity == "info"
    assert found[0].objects["levels"] == "initiator endpoint level 5, target endpoint level 9"


def test_a_remote_target_needs_a_route_an_endpoint_and_dialog_security(
    db: Broker, tmp_path: Path
) -> None:
    make_pair(db)
    remote = "//remote/Target"
    db.create_route("to_remote", service_name=remote, address="TCP://127.0.0.1:4999")
    found = check_configuration(db, INITIATOR, remote, CONTRACT)
    assert problems(found) == ["SBD-CFG-NO-ENDPOINT", "SBD-CFG-NO-BINDING"]
    assert "SBD-CFG-REMOTE-TARGET" in codes(found) and "SBD-CFG-REMOTE-PERMISSION" in codes(found)
    # ENCRYPTION OFF needs no binding
    assert problems(check_configuration(db, INITIATOR, remote, CONTRACT, encryption="OFF")) == [
        "SBD-CFG-NO-ENDPOINT"
    ]
    cert, key = make_self_signed("here", tmp_path / "certs")
    db.create_certificate("here", certificate_file=cert, private_key_file=key)
    db.create_endpoint("sb", listener_port=0, authentication_certificate="here", state="STOPPED")
    assert problems(check_configuration(db, INITIATOR, remote, CONTRACT, encryption="OFF")) == [
        "SBD-CFG-ENDPOINT-NOT-STARTED",
        "SBD-CFG-ENDPOINT-NO-CONNECT",
    ]
    db.alter_endpoint("sb", state="STARTED")
    # full dialog security: a binding whose user owns the target's certificate
    theirs, _ = make_self_signed("there", tmp_path / "theirs")
    db.create_user("remote_user")
    db.create_remote_service_binding("b", to_service=remote, user="remote_user")
    assert problems(check_configuration(db, INITIATOR, remote, CONTRACT)) == [
        "SBD-CFG-ENDPOINT-NO-CONNECT",
        "SBD-CFG-BINDING-NO-CERTIFICATE",
    ]
    db.create_certificate("there", certificate_file=theirs, authorization="remote_user")
    db.grant_connect("sb", certificate="there")  # the target broker's connections back
    assert problems(check_configuration(db, INITIATOR, remote, CONTRACT)) == []
    assert problems(
        check_configuration(db, INITIATOR, remote, CONTRACT, encryption="ANONYMOUS")
    ) == ["SBD-CFG-BINDING-ANONYMOUS"]
    # a route past its LIFETIME is ignored
    db.alter_route("to_remote", lifetime=10)
    assert isinstance(db.clock, ManualClock)
    db.clock.advance(11)
    assert problems(check_configuration(db, INITIATOR, remote, CONTRACT)) == [
        "SBD-CFG-ROUTE-EXPIRED",
        "SBD-CFG-TO-SERVICE-MISSING",
    ]


def test_a_target_reached_from_other_brokers(db: Broker, tmp_path: Path) -> None:
    make_pair(db)
    cert, key = make_self_signed("here", tmp_path / "certs")
    db.create_certificate("here", certificate_file=cert, private_key_file=key)
    db.create_endpoint("sb", listener_port=0, authentication_certificate="here")
    # without FROM SERVICE the initiator may be another broker: CONNECT and SEND for it
    found = check_configuration(db, None, TARGET, CONTRACT)
    assert problems(found) == ["SBD-CFG-ENDPOINT-NO-CONNECT", "SBD-CFG-REMOTE-SEND-NOT-GRANTED"]
    assert found[-1].objects == {"service": TARGET, "endpoint": "sb"}
    theirs, _ = make_self_signed("there", tmp_path / "theirs")
    db.create_certificate("there", certificate_file=theirs)
    db.grant_connect("sb", certificate="there")
    db.grant("SEND", on=f"SERVICE::{TARGET}", to="public")
    assert problems(check_configuration(db, None, TARGET, CONTRACT)) == []


def test_a_broker_id_names_which_instance_holds_the_target(db: Broker) -> None:
    make_pair(db)
    own = str(db.service_broker_guid)
    assert problems(check_configuration(db, INITIATOR, TARGET, CONTRACT, broker_instance=own)) == []
    other = "8d659e56-e1c0-43ff-a4fc-7d990c809f37"
    db.create_route(
        "elsewhere", service_name=TARGET, broker_instance=other, address="TCP://127.0.0.1:4999"
    )
    found = check_configuration(
        db, INITIATOR, TARGET, CONTRACT, encryption="OFF", broker_instance=other
    )
    assert "SBD-CFG-REMOTE-TARGET" in codes(found)
    assert problems(found) == ["SBD-CFG-NO-ENDPOINT"]


# -- RUNTIME --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_message_stuck_because_its_queue_is_off(backend: str, tmp_path: Path) -> None:
    url = new_url(backend, tmp_path)
    try:
        with Broker.open(url, clock=ManualClock(START)) as b:
            make_pair(b)
            b.alter_queue("tq", status=False)
            with b.transaction() as tx:
                for _ in range(3):
                    h = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
                    tx.send(h, "Req", b"1")
                    tx.send(h, "Req", b"2")
            b.clock.advance(30)  # type: ignore[attr-defined]
            found = check_runtime(b)
    finally:
        drop_url(url)
    assert codes(found) == ["SBD-RUN-TRANSMISSION-QUEUE-DISABLED", "SBD-RUN-QUEUE-DISABLED"]
    stuck = found[0]
    assert stuck.severity == "error"
    assert stuck.objects["queue"] == "tq"
    assert stuck.objects["messages"] == "6"
    assert stuck.objects["transmission_status"] == "the target queue 'tq' is disabled"
    assert "6 message(s) of 3 conversation(s)" in stuck.message and "(30 s)" in stuck.message
    assert "ALTER QUEUE [tq] WITH STATUS = ON" in stuck.fix


def test_a_message_stuck_because_its_target_service_is_missing(db: Broker) -> None:
    make_pair(db)
    with db.transaction() as tx:
        tx.send(tx.begin_dialog(INITIATOR, "//missing"), "DEFAULT", b"x")
    (found,) = check_runtime(db)
    assert found.code == "SBD-RUN-TRANSMISSION-SERVICE-MISSING"
    assert found.objects["to_service"] == "//missing"
    assert found.objects["transmission_status"] == "the target service '//missing' does not exist"


def test_endpoints_past_their_lifetime_without_a_started_broker(db: Broker) -> None:
    make_pair(db)
    with db.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT, lifetime=10)
        tx.send(h, "Req", b"x")
    assert check_runtime(db) == []
    db.clock.advance(20)  # type: ignore[attr-defined]
    found = check_runtime(db)
    assert codes(found) == ["SBD-RUN-ENDPOINT-LIFETIME-PASSED"] * 2  # both ends
    assert {f.objects["service"] for f in found} == {INITIATOR, TARGET}


def test_an_activated_queue_no_started_broker_monitors(db: Broker) -> None:
    make_pair(db)
    db.register_procedure("ProcessOrders", reply_and_end)
    db.alter_queue("tq", activation=Activation("ProcessOrders"))
    with db.transaction() as tx:
        tx.send(tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT), "Req", b"x")
    (found,) = check_runtime(db)  # this broker was never started: nothing activates tq
    assert found.code == "SBD-RUN-QUEUE-UNMONITORED"
    assert found.objects == {"queue": "tq", "ready_messages": "1"}


def test_endpoints_in_error_are_found(db: Broker) -> None:
    make_pair(db)
    with db.transaction() as tx:
        h = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(h, "Req", b"x")
    with db.transaction() as tx:
        (m,) = tx.receive("tq")
        tx.end_conversation(m.conversation_handle, error=50001, description="no stock")
    found = check_runtime(db)
    assert codes(found) == ["SBD-RUN-ENDPOINT-ERROR"]
    assert found[0].objects["service"] == INITIATOR
    assert str(h) in found[0].objects["conversation_handles"]


def test_a_started_broker_with_its_traffic_done_reports_nothing(tmp_path: Path) -> None:
    b = Broker.open(str(tmp_path / "live.db"), poll_interval=0.01)
    try:
        make_pair(b)
        b.register_procedure("ProcessOrders", reply_and_end)
        b.alter_queue("tq", activation=Activation("ProcessOrders", max_queue_readers=2))
        b.start()
        handles = []
        for i in range(20):
            with b.transaction() as tx:
                h = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
                tx.send(h, "Req", b"%d" % i)
                handles.append(h)

        def ends_arrived() -> bool:
            q = b.operations.overview().queue("iq")
            return q is not None and q.ready_messages == 20

        eventually(ends_arrived, "the target's EndDialog messages")
        while True:  # one conversation group (here: one dialog) per RECEIVE
            with b.transaction() as tx:
                msgs = tx.receive("iq", timeout=0)
                for m in msgs:
                    tx.end_conversation(m.conversation_handle)
            if not msgs:
                break
        assert b.views.conversation_endpoints() == []
        assert check_runtime(b) == []
        assert problems(check_configuration(b, INITIATOR, TARGET, CONTRACT)) == []
    finally:
        b.close()


@dataclass(frozen=True)
class Q:
    """A queue's figures as the overview gives them (runtime_findings reads only these)."""

    queue_name: str = "q"
    is_receive_enabled: bool = True
    is_activation_enabled: bool = True
    activation_procedure: str | None = "m:f"
    ready_messages: int = 5
    poison_events: int = 0
    monitor_state: str | None = "RECEIVES_OCCURRING"
    readers_running: int = 1
    tasks_waiting: int = 0


NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_monitors_poison_and_unmonitored_queues() -> None:
    assert runtime_findings([Q()], [], [], [], now=NOW) == []
    notified = runtime_findings(
        [Q(monitor_state="NOTIFIED", readers_running=0)], [], [], [], now=NOW
    )
    assert codes(notified) == ["SBD-RUN-MONITOR-NOTIFIED-NO-READERS"]
    alone = runtime_findings([Q(monitor_state=None, readers_running=0)], [], [], [], now=NOW)
    assert codes(alone) == ["SBD-RUN-QUEUE-UNMONITORED"]
    poisoned = runtime_findings(
        [Q(is_receive_enabled=False, poison_events=1, monitor_state=None)], [], [], [], now=NOW
    )
    assert codes(poisoned) == ["SBD-RUN-QUEUE-DISABLED"]
    assert "poison message handling turned it OFF 1 time(s)" in poisoned[0].message


def row(status: str, *, seq: int = 0, handle: int = 1, age: float = 5.0) -> TransmissionQueueRow:
    import uuid

    return TransmissionQueueRow(
        uuid.UUID(int=handle), "//far", None, "//near", "C", NOW - timedelta(seconds=age), seq,
        "Req", False, False, b"", status, 5,
    )  # fmt: skip


def test_the_transmission_queue_is_reported_once_per_target_and_reason() -> None:
    assert classify_status("No route matches service '//far'; the message waits for one.") == (
        "SBD-RUN-TRANSMISSION-NO-ROUTE"
    )
    assert classify_status("The target queue 'tq' is disabled.") == (
        "SBD-RUN-TRANSMISSION-QUEUE-DISABLED"
    )
    assert classify_status("the target service '//x' does not exist") == (
        "SBD-RUN-TRANSMISSION-SERVICE-MISSING"
    )
    assert classify_status("connection refused by TCP://h:1") == "SBD-RUN-TRANSMISSION-FAILING"
    assert classify_status("") is None and classify_status(BEHIND) is None
    # on its way: reported once it waited longer than waiting_after
    young = [row("", age=5.0)]
    assert runtime_findings([], young, [], [], now=NOW) == []
    old = [row("", age=120.0), row(BEHIND, seq=1, age=119.0)]
    (waiting,) = runtime_findings([], old, [], [], now=NOW)
    assert waiting.code == "SBD-RUN-TRANSMISSION-WAITING" and waiting.objects["messages"] == "2"
    # a conversation's later messages count under its first one's reason
    failing = [row("TLS handshake failed", handle=h, seq=s) for h in (1, 2) for s in (0, 1)]
    (f,) = runtime_findings([], failing, [], [], now=NOW, waiting_after=1)
    assert (
        f.code == "SBD-RUN-TRANSMISSION-FAILING"
        and "4 message(s) of 2 conversation(s)" in f.message
    )


def test_expired_stream_claims_are_found() -> None:
    import uuid

    claim = GroupClaim(uuid.uuid4(), "q", "reader-1", 3, 10, NOW - timedelta(minutes=5), NOW)
    assert runtime_findings([], [], [], [claim], now=NOW - timedelta(seconds=1)) == []
    (f,) = runtime_findings([], [], [], [claim], now=NOW)
    assert f.code == "SBD-RUN-CLAIM-EXPIRED" and f.objects == {
        "queue": "q",
        "reader": "reader-1",
        "claims": "1",
    }


# -- the command ------------------------------------------------------------------------------
def test_the_grammar_is_ssbdiagnose_s_in_any_case() -> None:
    assert parse_report(["runtime"]) == ("RUNTIME", {})
    words = "configuration from service //a To Service //b on contract C encryption off"
    assert parse_report(words.split()) == (
        "CONFIGURATION",
        {"from_service": "//a", "to_service": "//b", "contract": "C", "encryption": "OFF"},
    )
    assert parse_report(["CONFIGURATION", "TO", "SERVICE", "//b"])[1]["contract"] == "DEFAULT"
    # TO SERVICE name[, broker_id]
    guid = "8D659E56-E1C0-43FF-A4FC-7D990C809F37"
    for words in (["//b,", guid], [f"//b,{guid}"], ["//b", f",{guid}"], ["//b", ",", guid]):
        _, args = parse_report(["CONFIGURATION", "TO", "SERVICE", *words])
        assert (args["to_service"], args["broker_instance"]) == ("//b", guid.lower())


@pytest.fixture
def cli_db(tmp_path: Path) -> tuple[str, Pair]:
    path = str(tmp_path / "cli.db")
    with Broker.open(path) as b:
        pair = make_pair(b)
    return path, pair


def test_json_output_and_exit_statuses(cli_db: tuple[str, Pair]) -> None:
    path, pair = cli_db
    runner = CliRunner()
    config = ["CONFIGURATION", "FROM", "SERVICE", INITIATOR, "TO", "SERVICE", TARGET]
    config += ["ON", "CONTRACT", CONTRACT]
    # a healthy set-up reports nothing at ssbdiagnose's default level (WARNING) ...
    healthy = runner.invoke(main, ["diagnose", "--url", path, "--json", *config])
    assert (healthy.exit_code, json.loads(healthy.output)) == (0, [])
    text = runner.invoke(main, ["diagnose", "--url", path, "runtime"])
    assert (text.exit_code, text.output) == (0, "No problems found.\n")
    # ... and its infos at --level info, still exit status 0
    infos = runner.invoke(main, ["diagnose", "--url", path, "--json", "--level", "info", *config])
    assert infos.exit_code == 0
    assert [f["code"] for f in json.loads(infos.output)] == ["SBD-CFG-CONTRACT-MESSAGE-TYPES"]

    with Broker.open(path) as b:
        b.alter_service(pair.target, drop_contracts=[CONTRACT])
    found = runner.invoke(main, ["diagnose", "--url", path, "--json", *config])
    assert found.exit_code == 1
    assert json.loads(found.output) == [
        {
            "code": "SBD-CFG-CONTRACT-NOT-ON-TARGET",
            "severity": "error",
            "message": f"Target service {TARGET!r} does not accept contract 'C': a dialog under "
            "it is answered with an Error and ended.",
            "fix": f"ALTER SERVICE [{TARGET}] (ADD CONTRACT [C]) — "
            f"broker.alter_service({TARGET!r}, add_contracts=['C']).",
            "objects": {"service": TARGET, "contract": CONTRACT},
        }
    ]
    text = runner.invoke(main, ["diagnose", "--url", path, "--level", "INFO", *config])
    assert text.exit_code == 1
    assert text.output.startswith("ERROR   SBD-CFG-CONTRACT-NOT-ON-TARGET\n  Target service")
    assert text.output.endswith("1 error, 0 warnings, 1 info.\n")
    # -IGNORE as ssbdiagnose's
    ignored = ["--ignore", "SBD-CFG-CONTRACT-NOT-ON-TARGET"]
    quiet = runner.invoke(main, ["diagnose", "--url", path, *ignored, *config])
    assert (quiet.exit_code, quiet.output) == (0, "No problems found.\n")
    # RUNTIME as JSON: a disabled queue
    with Broker.open(path) as b:
        b.alter_queue(pair.tq, status=False)
    run = runner.invoke(main, ["diagnose", "--url", path, "--json", "RUNTIME"])
    assert run.exit_code == 1
    assert [(f["code"], f["objects"]["queue"]) for f in json.loads(run.output)] == [
        ("SBD-RUN-QUEUE-DISABLED", "tq")
    ]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([], "Missing argument"),
        (["STATUS"], "expected CONFIGURATION or RUNTIME, got 'STATUS'"),
        (["RUNTIME", "NOW"], "RUNTIME takes no more words"),
        (["CONFIGURATION"], "CONFIGURATION needs FROM SERVICE name, TO SERVICE name or both"),
        (["CONFIGURATION", "FROM", "//a"], "expected FROM SERVICE, TO SERVICE, ON CONTRACT"),
        (["CONFIGURATION", "TO", "SERVICE"], "expected a service name after TO SERVICE"),
        (["CONFIGURATION", "TO", "SERVICE", "t", "ON", "CONTRACT"], "a contract name after"),
        (["CONFIGURATION", "TO", "SERVICE", "t", "ENCRYPTION", "maybe"], "ON, OFF or ANONYMOUS"),
        (["CONFIGURATION", "TO", "SERVICE", "t,", "nope"], "expected a broker_id (a GUID)"),
    ],
)
def test_bad_syntax_is_a_usage_error(
    cli_db: tuple[str, Pair], words: list[str], expected: str
) -> None:
    result = CliRunner().invoke(main, ["diagnose", "--url", cli_db[0], *words])
    assert result.exit_code == 2
    assert expected in result.output


def test_a_missing_database_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    result = CliRunner().invoke(main, ["diagnose", "--url", str(missing), "RUNTIME"])
    assert result.exit_code == 2 and "no broker database at" in result.output
    assert not missing.exists()
    unknown = CliRunner().invoke(main, ["diagnose", "--ignore", "SBD-NOPE", "RUNTIME"])
    assert unknown.exit_code == 2 and "unknown code(s) SBD-NOPE" in unknown.output


def test_has_problems() -> None:
    info = Finding("SBD-CFG-PRIORITY", "info", "m", "f")
    assert not has_problems([info])
    assert has_problems([info, Finding("SBD-RUN-QUEUE-DISABLED", "error", "m", "f")])
