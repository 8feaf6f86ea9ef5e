"""Bad input at every public entry point, on both backends: the outcome is a BrokerError naming
the thing at fault, or a valid result — never a bare Python or driver exception, never a
traceback from the command line, never silent acceptance of a value the reference refuses — and
a canary conversation (three messages sent before) is intact after every example: still there,
once each, in order.

The Hypothesis part draws calls from the tables below (``CATALOG``, ``STATEMENTS``, ``VIEWS``,
``SETTINGS``, ``COMMANDS``): adding an entry point is one line in one of them. The example tests
after it prove each documented limit and cite the reference page (docs/limits.md lists them).
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servicebroker import Activation, Broker, ClockError, ManualClock, parse_error_body
from servicebroker.appsql import check_application_sql
from servicebroker.cli import main
from servicebroker.errors import (
    BrokerError,
    CatalogError,
    ConversationError,
    MessageValidationError,
    StorageError,
    TransactionError,
)

from .conftest import Pair, make_pair

FAST = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
CANARY = [b"canary 1", b"canary 2", b"canary 3"]

# -- values: valid ones mixed with hostile ones ------------------------------------------------
HUGE_TEXT = "x" * 10_000_000
HOSTILE_TEXT = st.sampled_from(
    [
        "",
        " ",
        "a\x00b",
        "a\x07b",
        "a\x7fb",
        "a\ud800b",
        "\udcff",
        "a\ufffeb",
        "#temp",
        "x" * 129,
        "x" * 257,
        HUGE_TEXT,
        "ANY",
        "[]",
        "'; COMMIT; --",
    ]
)
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.inf, -math.inf, math.nan, -0.0, 1e308]),
    HOSTILE_TEXT,
    st.text(max_size=12),
    st.binary(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.builds(object),
)
BODIES = st.one_of(
    HOSTILE,
    st.sampled_from(
        [
            b"",
            b"<a/>",
            b"<a>" * 200 + b"</a>" * 200,
            b"NaN",
            b"[Infinity]",
            b"[" * 100_000 + b"]" * 100_000,
            b'{"a": [1, 2]}',
            "caf\u00e9",
            "caf\udce9",
            bytearray(b"x"),
        ]
    ),
)
SECONDS = st.one_of(HOSTILE, st.floats(min_value=0, max_value=1e6), st.integers(0, 2**32))
WAIT = st.one_of(  # a valid wait never ends on the manual clock: 0 and invalid values only
    st.sampled_from([0, 0.0, math.inf, math.nan, -2, -0.5, 2**31, 1e12, "1", True, [1]])
)
LIVE = object()
"""Stands for a conversation handle begun in the example's own transaction."""
HANDLES = st.one_of(
    st.just(LIVE),
    st.just(LIVE),
    HOSTILE,
    st.uuids(),
    st.uuids().map(str),
    st.lists(st.just(LIVE), min_size=1, max_size=2),
    st.lists(st.one_of(st.just(LIVE), st.uuids(), HOSTILE), max_size=3),
)
SQL = st.one_of(
    HOSTILE,
    st.sampled_from(["SELECT 1", "SELECT 'COMMIT'", "-- c\nSELECT 1", "SELECT 1; SELECT 2"]),
    st.builds(
        lambda pre, kw, case: pre + (kw.lower() if case else kw),
        st.sampled_from(["", "  ", "\n", "-- c\n", "/* c */ ", "/* a /* b */ c */ ", "SELECT 1; "]),
        st.sampled_from(
            [
                "COMMIT",
                "ROLLBACK",
                "BEGIN",
                "SAVEPOINT x",
                "RELEASE x",
                "END",
                "START TRANSACTION",
                "ABORT",
                "PREPARE TRANSACTION 'x'",
                "ROLLBACK TO x",
            ]
        ),
        st.booleans(),
    ),
)


def hashable(value: object) -> bool:
    """Whether ``value`` can be a dictionary key (hypothesis's dictionaries need it)."""
    return isinstance(value, Hashable)


def names(*known: str) -> st.SearchStrategy[Any]:
    """Names of objects that exist (not the canary's) mixed with hostile values."""
    return st.one_of(st.sampled_from(known), HOSTILE, st.text(max_size=10))


MESSAGE_TYPES = names("Req", "Resp", "Note", "J", "X", "DEFAULT")
QUEUES = names("iq", "tq")
SERVICES = names("//test/Initiator", "//test/Target")
CONTRACTS = names("C", "CJ", "DEFAULT")


# -- the entry points: one line each -----------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One entry point: ``method`` of the broker (or of ``views``, or of a transaction) with
    arguments drawn from ``args`` and ``kwargs`` strategies."""

    method: str
    args: tuple[st.SearchStrategy[Any], ...] = ()
    kwargs: tuple[tuple[str, st.SearchStrategy[Any]], ...] = ()

    def draw(self) -> st.SearchStrategy[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        return st.tuples(
            st.just(self.method),
            st.tuples(*self.args),
            st.fixed_dictionaries(dict(self.kwargs)),
        )


def call(method: str, *args: st.SearchStrategy[Any], **kwargs: st.SearchStrategy[Any]) -> Call:
    return Call(method, args, tuple(kwargs.items()))


ACTIVATIONS = st.one_of(
    st.none(),
    HOSTILE,
    st.builds(Activation, st.just("os:getcwd"), st.integers(0, 3)),
)
DDL_TEMPLATES = [
    "CREATE MESSAGE TYPE [{0}] VALIDATION = {1}",
    "ALTER MESSAGE TYPE [{0}] VALIDATION = {1}",
    "DROP MESSAGE TYPE [{0}]",
    "CREATE CONTRACT [{0}] ([{1}] SENT BY ANY)",
    "DROP CONTRACT [{0}]",
    "CREATE QUEUE [{0}] WITH STATUS = {1}, RETENTION = OFF",
    "CREATE QUEUE [{0}] WITH ACTIVATION (PROCEDURE_NAME = [{1}], MAX_QUEUE_READERS = 1, EXECUTE AS SELF)",
    "ALTER QUEUE [{0}] WITH STATUS = {1}",
    "DROP QUEUE [{0}]",
    "CREATE SERVICE [{0}] ON QUEUE [{1}] ([DEFAULT])",
    "ALTER SERVICE [{0}] (ADD CONTRACT [{1}])",
    "DROP SERVICE [{0}]",
    "CREATE EVENT NOTIFICATION [{0}] ON QUEUE [{1}] FOR QUEUE_ACTIVATION TO SERVICE '{1}', 'current database'",
    "ALTER DATABASE [{0}] SET {1}",
]
DDL_WORDS = st.one_of(
    st.sampled_from(
        [
            "iq",
            "tq",
            "C",
            "Req",
            "DEFAULT",
            "//test/Target",
            "ON",
            "OFF",
            "JSON",
            "NONE",
            "NEW_BROKER",
            "ENABLE_BROKER",
            "os:getcwd",
        ]
    ),
    st.sampled_from(["", "a]]b", "a'b", "x" * 129, "a\x01b", "-- c", "/*", "GO"]),
    st.text(max_size=8),
)
DDL = st.builds(
    lambda t, a, b: t.format(a, b), st.sampled_from(DDL_TEMPLATES), DDL_WORDS, DDL_WORDS
)
"""T-SQL DDL statements with hostile or existing names (execute_ddl and ``servicebroker ddl``)."""
CATALOG = [
    call("create_message_type", HOSTILE_TEXT | st.text(max_size=8), validation=HOSTILE | st.sampled_from(["NONE", "JSON", "json", "VALID_XML"])),
    call("alter_message_type", MESSAGE_TYPES, validation=HOSTILE | st.sampled_from(["NONE", "EMPTY", "JSON", "WELL_FORMED_XML"])),
    call("drop_message_type", MESSAGE_TYPES),
    call("create_contract", HOSTILE_TEXT | st.text(max_size=8), HOSTILE | st.dictionaries(MESSAGE_TYPES.filter(hashable), st.sampled_from(["INITIATOR", "TARGET", "ANY", "any", "NOBODY"]) | HOSTILE, max_size=2)),
    call("drop_contract", CONTRACTS),
    call("create_queue", HOSTILE_TEXT | st.text(max_size=8), status=HOSTILE, retention=HOSTILE, poison_message_handling=HOSTILE, activation=ACTIVATIONS),
    call("alter_queue", QUEUES, status=st.none() | HOSTILE, retention=st.none() | HOSTILE, activation=ACTIVATIONS),
    call("drop_queue", QUEUES),
    call("create_service", HOSTILE_TEXT | st.text(max_size=8), queue=QUEUES, contracts=HOSTILE | st.lists(CONTRACTS, max_size=2)),
    call("alter_service", SERVICES, queue=st.none() | QUEUES, add_contracts=HOSTILE | st.lists(CONTRACTS, max_size=2), drop_contracts=HOSTILE | st.lists(CONTRACTS, max_size=2)),
    call("drop_service", SERVICES),
    call("create_event_notification", HOSTILE_TEXT | st.text(max_size=8), queue=QUEUES, event=HOSTILE | st.sampled_from(["QUEUE_ACTIVATION", "BROKER_QUEUE_DISABLED"]), to_service=SERVICES),
    call("drop_event_notification", HOSTILE_TEXT),
    call("create_broker_priority", HOSTILE_TEXT | st.text(max_size=8), contract_name=CONTRACTS | st.just("ANY"), local_service_name=SERVICES, remote_service_name=SERVICES, priority_level=HOSTILE | st.integers(0, 11)),
    call("alter_broker_priority", HOSTILE_TEXT, contract_name=st.none() | CONTRACTS, priority_level=st.none() | HOSTILE),
    call("drop_broker_priority", HOSTILE_TEXT),
    call("create_user", HOSTILE_TEXT | st.text(max_size=8), certificate=st.none() | HOSTILE_TEXT),
    call("drop_user", HOSTILE_TEXT | st.sampled_from(["dbo", "public"])),
    call("create_remote_service_binding", HOSTILE_TEXT | st.text(max_size=8), to_service=HOSTILE_TEXT | SERVICES, user=HOSTILE_TEXT | st.sampled_from(["dbo", "public"]), anonymous=HOSTILE),
    call("drop_remote_service_binding", HOSTILE_TEXT),
    call("grant", HOSTILE | st.sampled_from(["SEND", "RECEIVE", "CONNECT", "send", "CONTROL"]), on=HOSTILE_TEXT | st.sampled_from(["SERVICE::s", "QUEUE::q", "ENDPOINT::e", "OBJECT::q", "SERVICE::"]), to=HOSTILE_TEXT | st.sampled_from(["public", "dbo"])),
    call("revoke", HOSTILE | st.sampled_from(["SEND", "RECEIVE", "CONNECT"]), on=HOSTILE_TEXT | st.sampled_from(["SERVICE::s", "QUEUE::q", "ENDPOINT::e"]), to=HOSTILE_TEXT | st.sampled_from(["public", "dbo"])),
    call("alter_database", honor_broker_priority=HOSTILE, new_broker=HOSTILE.filter(lambda v: v is not True), error_broker_conversations=HOSTILE.filter(lambda v: v is not True)),
    call("peek", QUEUES, top=st.none() | HOSTILE),
    call("peek_after", QUEUES, HOSTILE | st.integers(), top=HOSTILE | st.integers(0, 5)),
    call("execute", SQL),
    call("execute_ddl", HOSTILE | DDL | st.sampled_from(["CREATE BROKER PRIORITY p FOR CONVERSATION SET (PRIORITY_LEVEL = 99)", "DROP BROKER PRIORITY [x\x00]", "GO"])),
]  # fmt: skip
STATEMENTS = [
    call("begin_dialog", SERVICES, HOSTILE_TEXT | SERVICES, contract=CONTRACTS, lifetime=st.none() | SECONDS, related_conversation=st.none() | HANDLES, related_conversation_group=st.none() | HOSTILE | st.uuids(), encryption=HOSTILE),
    call("send", HANDLES, MESSAGE_TYPES, BODIES),
    call("send_many", HOSTILE | st.lists(st.tuples(HANDLES, MESSAGE_TYPES, BODIES) | HOSTILE, max_size=3)),
    call("receive", QUEUES, top=st.none() | HOSTILE, conversation_handle=st.none() | HANDLES, conversation_group_id=st.none() | HOSTILE | st.uuids(), timeout=WAIT),
    call("get_conversation_group", QUEUES, timeout=WAIT),
    call("end_conversation", HANDLES, error=st.none() | HOSTILE, description=st.none() | HOSTILE | BODIES, cleanup=HOSTILE),
    call("end_conversation", HANDLES),
    call("begin_conversation_timer", HANDLES, SECONDS),
    call("move_conversation", HANDLES, HOSTILE | st.uuids()),
    call("execute", SQL),
    call("execute", SQL, HOSTILE | st.tuples(HOSTILE)),
    call("executemany", SQL, HOSTILE | st.lists(st.tuples(HOSTILE), max_size=2)),
]  # fmt: skip
VIEWS = [
    "databases",
    "conversation_endpoints",
    "conversation_groups",
    "transmission_queue",
    "transmission_queue_count",
    "service_queues",
    "dm_broker_queue_monitors",
    "conversation_priorities",
    "dm_broker_task_handlers",
    "dm_broker_activated_tasks",
    "dm_broker_background_threads",
    "dm_broker_storage_sessions",
    "services",
    "service_contracts",
    "service_message_types",
    "service_contract_message_usages",
    "service_contract_usages",
    "service_queue_usages",
    "event_notifications",
]
SETTINGS = {
    "lock_timeout": SECONDS,
    "empty_receive_window": SECONDS,
    "external_activation_timeout": SECONDS,
    "priority_aging_interval": st.none() | SECONDS,
    "busy_timeout": SECONDS,
    "poll_interval": SECONDS,
    "pool_size": HOSTILE | st.integers(1, 4),
    "synchronous": HOSTILE | st.sampled_from(["FULL", "NORMAL", "full"]),
    "no_such_setting": HOSTILE,
    "clock": HOSTILE,
}
CLI_TEXT = st.one_of(
    st.sampled_from(["iq", "tq", "//test/Initiator", "//test/Target", "C", "Req", "DEFAULT"]),
    st.sampled_from(["", "a\x01b", "a\udcffb", "x" * 300, "--url", "-1", "nan", "inf", "1e309"]),
    st.text(max_size=8),
)
BAD_URLS = st.sampled_from(
    ["nosuch://x", "sqlite://x", "/nonexistent/dir/x.db", "postgresql://nobody@127.0.0.1:1/x"]
)
CLI_NUMBER = st.sampled_from(["0", "-1", "5", str(2**63), "abc", "nan", "inf", "", "1e309"])
CLI_WAIT = st.sampled_from(["0", "inf", "nan", "-2", "abc", "1e309", "3e6"])  # never a real wait
COMMANDS: list[st.SearchStrategy[list[str]]] = [
    st.tuples(st.just("init"), CLI_TEXT).map(list),
    st.tuples(st.just("send"), st.just("--from-service"), CLI_TEXT, st.just("--to-service"), CLI_TEXT, st.just("--contract"), CLI_TEXT, st.just("--message-type"), CLI_TEXT, st.just("--body"), CLI_TEXT).map(list),
    st.tuples(st.just("send"), st.just("--conversation"), CLI_TEXT | st.uuids().map(str), st.just("--body"), CLI_TEXT, st.sampled_from(["--end", "--json"])).map(list),
    st.tuples(st.just("send"), st.just("--from-service"), CLI_TEXT, st.just("--body-file"), CLI_TEXT).map(list),
    st.tuples(st.just("receive"), CLI_TEXT, st.just("--top"), CLI_NUMBER, st.just("--timeout"), CLI_WAIT, st.sampled_from(["--end", "--json"])).map(list),
    st.tuples(st.just("peek"), CLI_TEXT, st.just("--top"), CLI_NUMBER, st.just("--json")).map(list),
    st.tuples(st.just("status"), CLI_TEXT).map(list),
    st.tuples(st.just("activator"), CLI_TEXT, st.just("--once"), st.just("--timeout"), CLI_WAIT).map(list),
    st.tuples(st.just("ddl"), CLI_TEXT).map(list),  # a file name: mostly none such
    st.tuples(st.just("serve"), BAD_URLS).map(list),  # a good URL would serve until interrupted
    st.tuples(st.just("demo"), st.just("--limit"), st.sampled_from(["0", "-1", "abc", ""])).map(list),
    st.tuples(st.just("demo"), st.just("--instances"), st.sampled_from(["0", "3", "-1", "abc", ""])).map(list),
    st.tuples(st.just("demo"), st.just("--target-url"), CLI_TEXT).map(list),  # needs --instances 2
]  # fmt: skip
"""Every command; the database URL is appended to each (``--url``). ``serve`` is given only
URLs it cannot open (with one it can, it serves until interrupted) and ``demo`` only bad
``--limit`` or ``--instances`` values, or ``--target-url`` without ``--instances 2`` (a good
run is the Spark job for minutes)."""


# -- the checks ----------------------------------------------------------------------------------
@pytest.fixture
def canary(broker: Broker) -> Iterator[Pair]:
    """The standard pair (queues without poison-message handling: examples roll back) plus J
    (JSON) and X (WELL_FORMED_XML) types, and a canary conversation on queues of its own."""
    pair = make_pair(broker, poison=False)
    broker.create_message_type("J", validation="JSON")
    broker.create_message_type("X", validation="WELL_FORMED_XML")
    broker.create_contract("CJ", {"J": "ANY", "X": "ANY", "Req": "ANY"})
    broker.create_service("//test/Any", queue=pair.tq, contracts=["CJ", "C", "DEFAULT"])
    broker.create_queue("canary_iq", poison_message_handling=False)
    broker.create_queue("canary_tq", poison_message_handling=False)
    broker.create_service("//canary/I", queue="canary_iq")
    broker.create_service("//canary/T", queue="canary_tq", contracts=["DEFAULT"])
    with broker.transaction() as tx:
        h = tx.begin_dialog("//canary/I", "//canary/T")
        for body in CANARY:
            tx.send(h, "DEFAULT", body)
    with broker.transaction() as tx:  # something to RECEIVE on the pair's queues
        for contract in ("C", "CJ"):
            tx.send(tx.begin_dialog(pair.initiator, "//test/Any", contract=contract), "Req", b"r")
    check_canary(broker)
    yield pair
    check_canary(broker)


def check_canary(broker: Broker) -> None:
    messages = broker.peek("canary_tq")
    assert [m.message_body for m in messages] == CANARY
    assert [m.message_sequence_number for m in messages] == [0, 1, 2]


def outcome(fn: Callable[[], object]) -> object:
    """Run ``fn``: its result, or the BrokerError it raised; any other exception fails."""
    try:
        return fn()
    except BrokerError as exc:
        assert str(exc), f"{type(exc).__name__} without a message"
        return exc


def _live(value: object, handle: uuid.UUID) -> object:
    if value is LIVE:
        return handle
    if isinstance(value, list):
        return [_live(v, handle) for v in value]
    if isinstance(value, tuple):
        return tuple(_live(v, handle) for v in value)
    return value


@FAST
@given(drawn=st.one_of([c.draw() for c in CATALOG]))
def test_catalog_statements_and_views_take_any_input(
    broker: Broker, canary: Pair, drawn: tuple[str, tuple[Any, ...], dict[str, Any]]
) -> None:
    method, args, kwargs = drawn
    outcome(lambda: getattr(broker, method)(*args, **kwargs))
    for view in VIEWS:
        getattr(broker.views, view)()
    check_canary(broker)


@settings(FAST, max_examples=200)
@given(drawn=st.one_of([c.draw() for c in STATEMENTS]))
def test_transaction_statements_take_any_input(
    broker: Broker, canary: Pair, drawn: tuple[str, tuple[Any, ...], dict[str, Any]]
) -> None:
    method, args, kwargs = drawn
    tx = broker.transaction()
    try:
        live = tx.begin_dialog(canary.initiator, "//test/Any", contract="CJ")
        args = tuple(_live(a, live) for a in args)
        kwargs = {k: _live(v, live) for k, v in kwargs.items()}
        outcome(lambda: getattr(tx, method)(*args, **kwargs))
    finally:
        tx.rollback()
    check_canary(broker)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@settings(FAST, max_examples=40)
@given(values=st.dictionaries(st.sampled_from(sorted(SETTINGS)), st.none(), max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({k: SETTINGS[k] for k in keys})
))  # fmt: skip
def test_broker_open_takes_any_settings(
    broker: Broker, url: str, canary: Pair, values: dict[str, Any]
) -> None:
    before = _fds()
    opened = outcome(lambda: Broker.open(url, **{"clock": ManualClock(), **values}))
    if isinstance(opened, Broker):
        opened.close()
    elif url.endswith(".db"):  # a refused open keeps no file open (SQLite)
        assert _fds() == before
    check_canary(broker)


@pytest.mark.parametrize("bad", [None, 5, "", "   ", "nosuch://x", "sqlite://x", b"x.db", "a\x00b"])
def test_broker_open_refuses_a_bad_url(bad: object) -> None:
    with pytest.raises(BrokerError):
        Broker.open(bad)  # type: ignore[arg-type]


@settings(FAST, max_examples=60)
@given(args=st.one_of(COMMANDS))
def test_every_command_fails_in_one_line(
    broker: Broker,
    url: str,
    canary: Pair,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # `init NAME` makes files in the current folder
    result = CliRunner().invoke(main, [*args, "--url", url])
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    if result.exit_code:
        assert result.output.strip(), "an error without a message"
    check_canary(broker)


# -- names (section 1's limits) --------------------------------------------------------------------
def test_names_are_sysnames_of_up_to_128_characters(broker: Broker) -> None:
    # CREATE MESSAGE TYPE (docs/t-sql/statements/create-message-type-transact-sql.md): "The
    # message_type_name can be up to 128 characters."
    broker.create_message_type("m" * 128)
    with pytest.raises(
        CatalogError, match=r"message type name .* 129 characters; the limit is 128"
    ):
        broker.create_message_type("m" * 129)
    # CREATE CONTRACT (docs/t-sql/statements/create-contract-transact-sql.md): "The
    # contract_name can be up to 128 characters."
    with pytest.raises(CatalogError, match=r"contract name .* limit is 128"):
        broker.create_contract("c" * 129, {"m" * 128: "ANY"})
    # CREATE SERVICE (docs/t-sql/statements/create-service-transact-sql.md): "The service_name
    # must be a valid sysname."; CREATE QUEUE (create-queue-transact-sql.md): queue_name "must
    # meet the guidelines for SQL Server identifiers"
    broker.create_queue("q" * 128)
    with pytest.raises(CatalogError, match=r"queue name .* limit is 128"):
        broker.create_queue("q" * 129)
    with pytest.raises(CatalogError, match=r"service name .* limit is 128"):
        broker.create_service("s" * 129, queue="q" * 128)
    # CREATE BROKER PRIORITY (create-broker-priority-transact-sql.md): the name "must conform to
    # the rules for Database Engine identifiers"; CREATE EVENT NOTIFICATION: event_notification_name
    with pytest.raises(CatalogError, match=r"broker priority name .* limit is 128"):
        broker.create_broker_priority("p" * 129)
    with pytest.raises(CatalogError, match=r"event notification name .* limit is 128"):
        broker.create_event_notification(
            "e" * 129, queue="q" * 128, event="QUEUE_ACTIVATION", to_service="s"
        )


def test_a_queue_name_may_not_begin_with_hash_but_other_names_may(broker: Broker) -> None:
    # CREATE QUEUE (docs/t-sql/statements/create-queue-transact-sql.md): "A queue might not be a
    # temporary object. Therefore, queue names starting with # are not valid."
    with pytest.raises(CatalogError, match=r"queue name '#q' begins with '#'"):
        broker.create_queue("#q")
    # CREATE MESSAGE TYPE: "Message type names starting with # are allowed, but are permanent
    # objects."; CREATE CONTRACT: "Contract names starting with # are permitted, but are
    # permanent objects."; CREATE SERVICE: "Service names beginning with # are allowed, but are
    # permanent objects."
    broker.create_message_type("#m")
    broker.create_contract("#c", {"#m": "ANY"})
    broker.create_queue("q")
    broker.create_service("#s", queue="q", contracts=["#c"])
    assert {"#m", "#c", "#s"} <= {
        *broker.catalog.message_types,
        *broker.catalog.contracts,
        *broker.catalog.services,
    }


@pytest.mark.parametrize("bad", ["a\x00b", "a\x1fb", "a\x7fb", "a\x85b", "a\ud800b", "\udfff"])
def test_control_characters_and_lone_surrogates_are_refused_in_every_name(
    broker: Broker, pair: Pair, bad: str
) -> None:
    for create in (
        lambda: broker.create_message_type(bad),
        lambda: broker.create_contract(bad, {"Req": "ANY"}),
        lambda: broker.create_queue(bad),
        lambda: broker.create_service(bad, queue=pair.tq),
        lambda: broker.create_broker_priority(bad),
        lambda: broker.create_broker_priority("p", contract_name=bad),
        lambda: broker.create_broker_priority("p", remote_service_name=bad),
        lambda: broker.create_event_notification(
            "e", queue=pair.tq, event="QUEUE_ACTIVATION", to_service=bad
        ),
    ):
        with pytest.raises(CatalogError, match=r"holds a (control character|lone surrogate)"):
            create()
    with broker.transaction() as tx, pytest.raises(ConversationError, match=r"TO SERVICE"):
        tx.begin_dialog(pair.initiator, bad)


def test_to_service_is_a_string_of_up_to_256_characters(broker: Broker, pair: Pair) -> None:
    # BEGIN DIALOG (docs/t-sql/statements/begin-dialog-conversation-transact-sql.md): "The
    # target_service_name is of type nvarchar(256)."
    with broker.transaction() as tx:
        tx.begin_dialog(pair.initiator, "t" * 256)
        for bad in ("t" * 257, "t" * 10_000_000):
            with pytest.raises(ConversationError, match=r"TO SERVICE .* the limit is 256"):
                tx.begin_dialog(pair.initiator, bad)
        tx.rollback()
    # CREATE BROKER PRIORITY: "RemoteServiceName is a literal of type nvarchar(256)."
    broker.create_broker_priority("p", remote_service_name="r" * 256)
    with pytest.raises(CatalogError, match=r"REMOTE_SERVICE_NAME .* the limit is 256"):
        broker.create_broker_priority("p2", remote_service_name="r" * 257)


def test_a_priority_criterion_is_a_name_or_any(broker: Broker) -> None:
    # CREATE BROKER PRIORITY: CONTRACT_NAME = {ContractName | ANY}; "The default is ANY."
    for bad in (None, "c" * 10_000_000, 5):
        with pytest.raises(CatalogError, match=r"CONTRACT_NAME"):
            broker.create_broker_priority("p", contract_name=bad)  # type: ignore[arg-type]
    broker.create_broker_priority("p", contract_name="ANY")
    assert broker.views.conversation_priorities()[0].service_contract_name is None


def test_service_contracts_must_be_a_list(broker: Broker, pair: Pair) -> None:
    for bad in (None, 5, "C"):
        with pytest.raises(CatalogError, match=r"contracts must be a list"):
            broker.create_service("s", queue=pair.tq, contracts=bad)  # type: ignore[arg-type]


# -- statements' arguments -----------------------------------------------------------------------
def test_end_conversation_error_arguments_follow_the_reference(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"x")
        # END CONVERSATION (docs/t-sql/statements/end-conversation-transact-sql.md): "The
        # failure_code is of type int." … "The failure code must be greater than 0."
        for bad in (0, -1, 2**31, 2**63, 1.5, True, "1"):
            with pytest.raises(ConversationError, match=r"ERROR code must be an integer"):
                tx.end_conversation(h, error=bad, description="d")  # type: ignore[arg-type]
        # "The failure_text is of type nvarchar(3000)." — and it travels in the Error message's
        # XML body, so it must be XML text
        with pytest.raises(ConversationError, match=r"3001 characters; the limit is 3000"):
            tx.end_conversation(h, error=1, description="d" * 3001)
        for bad_text in ("a\x00b", "a\ufffeb", "a\uffffb", "a\ud800b", "a\x0bb"):
            with pytest.raises(ConversationError, match=r"which XML text cannot carry"):
                tx.end_conversation(h, error=1, description=bad_text)
        with pytest.raises(ConversationError, match=r"CLEANUP must be True or False"):
            tx.end_conversation(h, cleanup="yes")  # type: ignore[arg-type]
        tx.end_conversation(h, error=2**31 - 1, description="tab\tnew line\n" + "d" * 2986)
    error = broker.peek(pair.tq)[-1]
    assert error.message_type_name.endswith("/Error")


def test_lifetime_and_timer_are_int_seconds(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        # BEGIN DIALOG: "Lifetime is of type int. When no LIFETIME clause is specified, the
        # dialog lifetime is the maximum value of the int data type."
        h = tx.begin_dialog(pair.initiator, pair.target, lifetime=2**31 - 1)
        for bad in (2**31, math.inf, math.nan, 0, -1, "60"):
            with pytest.raises(BrokerError, match=r"LIFETIME"):
                tx.begin_dialog(pair.initiator, pair.target, lifetime=bad)  # type: ignore[arg-type]
        # BEGIN CONVERSATION TIMER (begin-conversation-timer-transact-sql.md): "TIMEOUT
        # Specifies, in seconds, the amount of time to wait" — an int, as LIFETIME
        tx.begin_conversation_timer(h, 2**31 - 1)
        for bad in (2**31, math.inf, math.nan, -1, None):
            with pytest.raises(BrokerError, match=r"TIMER TIMEOUT"):
                tx.begin_conversation_timer(h, bad)  # type: ignore[arg-type]


def test_receive_top_and_timeout_limits(broker: Broker, pair: Pair) -> None:
    with broker.transaction() as tx:
        # RECEIVE (docs/t-sql/statements/receive-transact-sql.md): TIMEOUT is "the amount of
        # time, in milliseconds, for the statement to wait for a message" — an int: 2**31-1 ms
        for statement in (
            lambda t: tx.receive(pair.tq, timeout=t),
            lambda t: tx.get_conversation_group(pair.tq, timeout=t),
        ):
            for bad in (math.inf, math.nan, -2, 2_147_484, "1", True):
                with pytest.raises(
                    BrokerError, match=r"timeout must be seconds from 0 to 2147483.647"
                ):
                    statement(bad)
        for bad_top in (2**63, -1, 1.0, "1"):
            with pytest.raises(BrokerError, match=r"RECEIVE TOP must be an integer"):
                tx.receive(pair.tq, top=bad_top)  # type: ignore[arg-type]
        assert tx.receive(pair.tq, top=2**63 - 1) == []
        with pytest.raises(BrokerError, match=r"peek TOP"):
            broker.peek(pair.tq, top=2**63)
        assert broker.peek(pair.tq, top=2**63 - 1) == []


@pytest.mark.parametrize("bad", [None, 123, 1.5, object()])
def test_send_needs_conversation_handles(broker: Broker, pair: Pair, bad: object) -> None:
    with broker.transaction() as tx:
        with pytest.raises(ConversationError, match=r"conversation handle must be a UUID"):
            tx.send(bad, "Req", b"x")  # type: ignore[arg-type]
        with pytest.raises(ConversationError, match=r"send_many"):
            tx.send_many(bad)  # type: ignore[arg-type]
        with pytest.raises(ConversationError, match=r"send_many needs"):
            tx.send_many([bad])  # type: ignore[list-item]


# -- bodies --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("validation", "body", "match"),
    [
        ("NONE", "a\ud800b", "not valid Unicode text"),
        ("JSON", b"NaN", "NaN is not a JSON value"),
        ("JSON", b"[Infinity, 1]", "Infinity is not a JSON value"),
        ("JSON", b"-Infinity", "Infinity is not a JSON value"),
        ("JSON", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        ("WELL_FORMED_XML", b"<a>" * 129 + b"</a>" * 129, "more than 128 levels"),
        ("WELL_FORMED_XML", b"<a>" * 100_000 + b"</a>" * 100_000, "more than 128 levels"),
    ],
)
def test_bad_bodies_are_refused(
    broker: Broker, pair: Pair, validation: str, body: bytes | str, match: str
) -> None:
    broker.create_message_type("M", validation=validation)
    broker.create_contract("CM", {"M": "ANY"})
    broker.create_service("//t/M", queue=pair.tq, contracts=["CM"])
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, "//t/M", contract="CM")
        with pytest.raises(MessageValidationError, match=match):
            tx.send(h, "M", body)
        if validation == "WELL_FORMED_XML":
            tx.send(h, "M", b"<a>" * 128 + b"</a>" * 128)
        # the reference's limit (a SQL Server xml instance nests at most 128 levels: error
        # 6335) and a "billion laughs" body, which expat's amplification limit refuses
        laughs = (
            '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
            + "".join(
                f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9)
            )
            + "]><l>&j;</l>"
        )
        if validation == "WELL_FORMED_XML":
            with pytest.raises(MessageValidationError, match=r"well-formed XML"):
                tx.send(h, "M", laughs)


# -- tx.execute and the transaction ---------------------------------------------------------------
POSTGRES_READINGS = {
    # texts only PostgreSQL reads so that the COMMIT is a statement; SQLite reads them otherwise
    # and refuses them as syntax errors (nothing commits, the transaction is rolled back)
    "/* a /* nested */ b */ COMMIT",
    "SELECT E'a\\'b'; COMMIT; SELECT 'x'",  # an E'' string takes backslash escapes
    "/* /* */ ' */ COMMIT; SELECT ''",  # the nested comment hides the quote
    "SELECT a ['x]' ]; COMMIT; SELECT ' ]'",  # a subscript, no [identifier]
}


@pytest.mark.parametrize(
    "sql",
    [
        "COMMIT",
        "commit",
        "  Rollback",
        "BEGIN",
        "begin transaction",
        "SAVEPOINT s",
        "RELEASE s",
        "END",
        "START TRANSACTION",
        "ABORT",
        "PREPARE TRANSACTION 'x'",
        "ROLLBACK TO s",
        "-- why\nCOMMIT",
        "/* c */ COMMIT",
        "SELECT 1; COMMIT",
        "SELECT 'x;y'; COMMIT",
        # texts a general SQL lexer (sqlparse) reads unlike PostgreSQL / SQLite do
        "SELECT 'a\\'; COMMIT; --'",  # a backslash escapes nothing in a standard string
        'SELECT 1 AS "a\\"; COMMIT; --"',
        "SELECT 5 # 3; COMMIT",  # PostgreSQL's XOR, not a comment
        "CREATE TABLE t (declare int); COMMIT",
        "CREATE TABLE trigger (begin int); COMMIT",
        "CREATE TRIGGER t AFTER INSERT ON x BEGIN DELETE FROM y; END; COMMIT",
        *sorted(POSTGRES_READINGS),
    ],
)
def test_execute_refuses_transaction_control(broker: Broker, pair: Pair, sql: str) -> None:
    sqlite = broker.paramstyle == "qmark"
    if sqlite and sql in POSTGRES_READINGS:
        with (
            pytest.raises(StorageError, match=r"syntax error|unrecognized token"),
            broker.transaction() as tx,
        ):
            h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
            tx.send(h, "Req", b"x")
            tx.execute(sql)
        assert broker.peek(pair.tq) == []  # rolled back whole: nothing committed half
        return
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"x")
        with pytest.raises(TransactionError, match=r"owns commit and rollback"):
            tx.execute(sql)
        with pytest.raises(TransactionError, match=r"tx.executemany: .* owns commit and rollback"):
            tx.executemany(sql, [()])
        tx.execute("SELECT 1")  # the transaction goes on
    assert len(broker.peek(pair.tq)) == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SET search_path = elsewhere",
        "set session statement_timeout = 1",
        "SET TIME ZONE 'UTC'",
        "RESET ALL",
        "DISCARD ALL",
        "SELECT 1; SET role = nobody",
        "SET LOCAL standard_conforming_strings = off",
        "SET backslash_quote = on",
    ],
)
def test_postgresql_session_state_is_refused(sql: str) -> None:
    # a session goes back to the broker's pool: SET without LOCAL would change every later
    # transaction on it (a search_path sent another broker's messages to this schema), and
    # standard_conforming_strings would let a backslash hide a COMMIT from the check
    with pytest.raises(TransactionError, match=r"session|standard_conforming_strings"):
        check_application_sql(sql, postgres=True)
    check_application_sql(sql, postgres=False)  # SQLite has no SET: its own error, if any
    for fine in ("SET LOCAL statement_timeout = 1000", "SET CONSTRAINTS ALL DEFERRED"):
        assert check_application_sql(fine, postgres=True) == fine


def test_a_postgresql_function_body_is_one_string_to_the_check(broker: Broker) -> None:
    # a $$ body is read as PostgreSQL reads it (one string), on SQLite as SQLite reads it
    body = (
        "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM 1; RETURN NULL; END $$"
    )
    if broker.paramstyle == "qmark":
        with broker.transaction() as tx, pytest.raises(TransactionError):
            tx.execute(body)  # SQLite has no $$ quotes: "END $$" would be a statement
    else:
        with broker.transaction() as tx:
            tx.execute(body)
    assert check_application_sql(body, postgres=True) == body


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'COMMIT'",
        'SELECT 1 AS "commit"',
        "-- COMMIT\nSELECT 1",
        "/* ROLLBACK */ SELECT 1",
        "SELECT $$;COMMIT$$",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
        "CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT CASE WHEN 1 THEN 2 END; END",
        "PREPARE q AS SELECT 1",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql "
        "BEGIN ATOMIC SELECT CASE WHEN true THEN 1 END; SELECT 2; END",
        "CREATE TEMP TRIGGER t AFTER INSERT ON x BEGIN DELETE FROM y; END",
        "/* a /* b */ c */ SELECT 1",
        "SELECT $q$ ' $q$; SELECT 2",
    ],
)
def test_the_check_lets_other_sql_through(sql: str) -> None:
    assert check_application_sql(sql) == sql


def test_a_failed_statement_leaves_a_transaction_that_must_roll_back(
    broker: Broker, pair: Pair
) -> None:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"work")
    tx = broker.transaction()
    assert [m.message_body for m in tx.receive(pair.tq)] == [b"work"]
    with pytest.raises(BrokerError):
        tx.execute("SELECT * FROM no_such_table")  # caught by the application
    # on PostgreSQL the transaction is aborted: nothing of it may commit
    with pytest.raises(TransactionError, match=r"rolled back when a statement failed.*run again"):
        tx.commit()
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"work"]  # back in the queue
    # a with block that caught the failure and ended normally says so too, and commits nothing
    failed = pytest.raises(TransactionError, match=r"rolled back when a statement failed")
    with failed, broker.transaction() as tx:
        assert len(tx.receive(pair.tq)) == 1
        with contextlib.suppress(BrokerError):
            tx.execute("SELECT * FROM no_such_table")
    assert [m.message_body for m in broker.peek(pair.tq)] == [b"work"]
    with broker.transaction() as tx:  # a with block that commits or rolls back itself is fine
        tx.rollback()


# -- Broker.open and the command line ------------------------------------------------------------
@pytest.mark.parametrize(
    "setting",
    [
        {"lock_timeout": "x"},
        {"busy_timeout": None},
        {"busy_timeout": math.inf},
        {"busy_timeout": math.nan},
        {"poll_interval": -1},
        {"poll_interval": 0},
        {"poll_interval": 1e-300},
        {"priority_aging_interval": float("inf")},
        {"poll_interval": math.nan},
        {"pool_size": 0},
        {"pool_size": 1.5},
        {"priority_aging_interval": -1},
        {"synchronous": None},
    ],
)
def test_bad_settings_are_refused_before_the_database_opens(
    tmp_path: Path, setting: dict[str, object]
) -> None:
    url = str(tmp_path / "b.db")
    other = Broker.open(url)  # another connection's locks keep a closed file open in SQLite
    before = _fds()
    with pytest.raises(BrokerError, match=next(iter(setting))):
        Broker.open(url, **setting)
    assert _fds() == before
    other.close()


def test_a_body_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    argv = [sys.executable, "-m", "servicebroker.cli", "send", "--url", db]
    argv += ["--from-service", "a", "--to-service", "b", "--body"]
    run = subprocess.run([*map(os.fsencode, argv), b"\xff\xfe"], capture_output=True, timeout=60)
    assert run.returncode == 2
    assert b"Traceback" not in run.stderr
    assert b"--body: the body is not valid UTF-8 text" in run.stderr


def test_parameters_the_driver_refuses_leave_the_transaction_going(
    broker: Broker, pair: Pair
) -> None:
    # docs/limits.md: parameters the driver cannot take are a BrokerError, not a failed
    # statement: nothing ran, and the transaction (here holding a received message) goes on
    broker.execute("CREATE TABLE app_rows (x INTEGER)")
    mark = "?" if broker.paramstyle == "qmark" else "%s"
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"x")
    with broker.transaction() as tx:
        assert len(tx.receive(pair.tq)) == 1
        for params in ([object()], [1, 2]):
            with pytest.raises(BrokerError, match="refused the statement's parameters") as err:
                tx.execute(f"INSERT INTO app_rows (x) VALUES ({mark})", params)
            assert not isinstance(err.value, StorageError)
        tx.execute(f"INSERT INTO app_rows (x) VALUES ({mark})", [7])
    assert broker.execute("SELECT x FROM app_rows") == [(7,)]
    assert broker.peek(pair.tq) == []  # the RECEIVE committed with the row
    # refused as a transaction's first write (on PostgreSQL its BEGIN travels with it): the
    # transaction is still one, and its rollback takes back what it wrote after
    with broker.transaction() as tx:
        with pytest.raises(BrokerError, match="refused the statement's parameters"):
            tx.execute(f"INSERT INTO app_rows (x) VALUES ({mark})", [1, 2])
        tx.execute(f"INSERT INTO app_rows (x) VALUES ({mark})", [8])
        tx.rollback()
    assert broker.execute("SELECT x FROM app_rows") == [(7,)]


@pytest.mark.parametrize(
    "call",
    [
        lambda: ManualClock(start="x"),  # type: ignore[arg-type]
        lambda: ManualClock(start=None),  # type: ignore[arg-type]
        lambda: ManualClock(start=math.nan),
        lambda: ManualClock().advance(-1),
        lambda: ManualClock().advance(math.nan),
        lambda: ManualClock().advance(math.inf),
        lambda: ManualClock().advance("1"),  # type: ignore[arg-type]
        lambda: ManualClock(100.0).set(99.0),
        lambda: ManualClock(100.0).set(math.nan),
    ],
    ids=[
        "start-text",
        "start-none",
        "start-nan",
        "back",
        "nan",
        "inf",
        "text",
        "set-back",
        "set-nan",
    ],
)
def test_a_manual_clock_refuses_bad_times_with_a_clock_error(call: Callable[[], object]) -> None:
    """The clear-error rule for the manual clock: a ClockError of the hierarchy (a ValueError
    too), naming the clock and the value."""
    with pytest.raises(ClockError, match="ManualClock") as refused:
        call()
    assert isinstance(refused.value, BrokerError) and isinstance(refused.value, ValueError)


@pytest.mark.parametrize("body", [None, 5, "text", ["x"]])
def test_parse_error_body_refuses_what_is_not_bytes(body: object) -> None:
    """SYS-1: parse_error_body of anything but bytes is a ConversationError, not a TypeError."""
    with pytest.raises(ConversationError, match="not a Service Broker Error message body"):
        parse_error_body(body)  # type: ignore[arg-type]


def test_alter_database_needs_an_option(broker: Broker) -> None:
    """ALTER DATABASE … SET with no option is refused (alter-database-transact-sql-set-options.md:
    SET takes at least one option); ``honor_broker_priority=None`` alone is no option."""
    for kwargs in ({}, {"honor_broker_priority": None}, {"new_broker": False}):
        with pytest.raises(CatalogError, match="ALTER DATABASE … SET needs an option"):
            broker.alter_database(**kwargs)  # type: ignore[arg-type]
    broker.alter_database(enable_broker=True)  # ENABLE_BROKER alone is an option: nothing to do
    assert broker.views.databases()[0].is_honor_broker_priority_on is False
