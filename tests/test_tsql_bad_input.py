"""Bad input to the T-SQL interpreter, on both backends: malformed and hostile scripts —
unterminated strings, names, comments and blocks, deep nesting, huge literals, control
characters, names and bodies shaped as injections, dynamic SQL aimed at the catalog — get SQL
Server-shaped errors (:class:`~servicebroker.TSqlError`), never another exception, a Python
traceback through ``servicebroker sqlcmd``, a hang, or a change to the messages already stored.

The Hypothesis part draws hostile scripts (token soup, mutilated statements, deep nesting, huge
literals, injection-shaped names and values in well-formed statements, statements on the
application's tables aimed at the broker's own storage, dynamic SQL around all of these, GO
between them) and runs each through ``Instance.execute`` and some through ``servicebroker
sqlcmd``; a canary conversation's messages on queue ``tq`` (sent through the Python API first)
must be byte-for-byte the same afterwards. The scripts drawn cannot legitimately change them: no
RECEIVE, MOVE, ALTER, DROP of a queue, service or contract, END CONVERSATION or read of a
conversation handle (``legitimate``); nor WAITFOR or WHILE, which wait as long as told.
The examples after it pin each error's shape as SQL Server gives it (number, level, batch line,
text from sysmessages.tsv and reserved-keywords-transact-sql.md).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from servicebroker import Broker, Instance, TSqlError
from servicebroker.cli import main
from servicebroker.tsql import Results

# -- the canary: messages sent through the Python API before any hostile script ---------------
SETUP = """
CREATE MESSAGE TYPE [//bad/Req] VALIDATION = NONE;
CREATE CONTRACT [//bad/C] ([//bad/Req] SENT BY INITIATOR);
CREATE QUEUE iq;
CREATE QUEUE tq;
CREATE SERVICE [//bad/I] ON QUEUE iq;
CREATE SERVICE [//bad/T] ON QUEUE tq ([//bad/C]);
CREATE QUEUE sq;
CREATE SERVICE [//bad/S] ON QUEUE sq ([DEFAULT]);
"""
"""``iq`` / ``tq``: the canary's services; ``sq``: a scratch service scripts may send to."""

CANARY = [b"canary one", b"\x00\xff\x00 binary", "canary \u00fc\u00f1\u00ee".encode("utf-16-le")]

Snapshot = list[tuple[object, ...]]


def snapshot(broker: Broker) -> Snapshot:
    """Every message on the canary's queues: ids, conversation, order, type and body."""
    return [
        (
            m.queue_name,
            m.message_id,
            m.conversation_handle,
            m.conversation_group_id,
            m.message_sequence_number,
            m.queuing_order,
            m.status,
            m.message_type_name,
            m.message_body,
        )
        for queue in ("tq", "iq")
        for m in broker.peek(queue)
    ]


@dataclass
class Canary:
    """The canary's messages in ``database`` of ``instance``, as they were sent (``before``)."""

    instance: Instance
    database: str
    before: Snapshot

    @classmethod
    def set_up(cls, instance: Instance, database: str) -> Canary:
        broker = instance.database(database)
        broker.execute_ddl(SETUP)
        with broker.transaction() as tx:
            handle = tx.begin_dialog("//bad/I", "//bad/T", contract="//bad/C", encryption=False)
            for body in CANARY:
                tx.send(handle, "//bad/Req", body)
        before = snapshot(broker)
        assert [row[-1] for row in before] == CANARY
        return cls(instance, database, before)

    @property
    def broker(self) -> Broker:
        return self.instance.database(self.database)

    def intact(self) -> bool:
        try:
            return snapshot(self.broker) == self.before
        except Exception:  # a harmed store fails as it fails
            return False

    def check(self, what: str) -> None:
        try:
            after = snapshot(self.broker)
        except Exception as exc:  # a harmed store fails as it fails
            raise AssertionError(f"the canary's queues cannot be read after {what!r}") from exc
        assert after == self.before, f"the canary's messages changed after {what!r}"

    def renewed(self) -> Canary:
        """This canary if intact, else a new one in a new database: a script that harmed it
        (found, then shrunk, by Hypothesis) must not make the examples after it fail too."""
        if self.intact():
            return self
        database = f"canary{len(self.instance.database_names())}"
        self.instance.create_database(database)  # the harmed one kept: it may not close
        return Canary.set_up(self.instance, database)


@pytest.fixture
def canary(instance: Instance) -> Canary:
    """The canary in ``master``, where a session starts."""
    return Canary.set_up(instance, "master")


@pytest.fixture
def canaries(instance: Instance) -> list[Canary]:
    """The canary in a database of its own, ``canary``, renewed after an example harms it
    (``[0]`` is the current one)."""
    instance.create_database("canary")
    return [Canary.set_up(instance, "canary")]


# -- running a script with a bound on its time ------------------------------------------------
BOUND = 20.0
"""Real seconds any one hostile script may take (the slowest, a 1 MB literal on PostgreSQL
under load, takes about one)."""


def bounded(call: Callable[[], object], what: str, bound: float = BOUND) -> object:
    """``call()``'s result or exception, or a failure when it has not ended in BOUND seconds
    (run on a daemon thread, so that a hang fails the test instead of stopping the suite)."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # judged by the caller
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True, name="hostile script")
    started = time.monotonic()
    worker.start()
    worker.join(bound)
    if worker.is_alive():
        pytest.fail(f"hung: still running after {bound:g} s: {what[:300]!r}")
    assert time.monotonic() - started < bound
    return outcome[0]


def outcome_of(
    instance: Instance, text: str, *, database: str = "master", bound: float = BOUND
) -> Results | TSqlError:
    """What ``instance.execute(text, database=database)`` gives: its Results or the TSqlError
    it raises — any other exception (or a hang) fails the test."""
    got = bounded(lambda: instance.execute(text, database=database), text, bound)
    if isinstance(got, BaseException) and not isinstance(got, TSqlError):
        raise AssertionError(
            f"{type(got).__name__} instead of a TSqlError for {text[:300]!r}"
        ) from got
    assert isinstance(got, Results | TSqlError)
    return got


def shaped(error: TSqlError) -> None:
    """An error as SQL Server reports one: a number, a level, a state, a line, a text."""
    assert isinstance(error.number, int) and error.number >= 0
    assert 0 <= error.severity <= 25
    assert error.state >= 0
    assert isinstance(error.line, int) and error.line >= 1
    assert isinstance(error.message, str)
    assert error.message or error.number >= 50000  # RAISERROR ('', …) and THROW may be empty
    assert "Traceback" not in error.message


def error_of(instance: Instance, text: str, *, bound: float = BOUND) -> TSqlError:
    got = outcome_of(instance, text, bound=bound)
    assert isinstance(got, TSqlError), f"no error for {text[:200]!r}: {got}"
    shaped(got)
    return got


# -- the strategies ---------------------------------------------------------------------------
_FORBIDDEN = re.compile(
    r"\b(RECEIVE|MOVE|ALTER|WAITFOR|WHILE|CONVERSATION_HANDLE|CONVERSATION_GROUP_ID)\b"
    r"|\bEND\W+CONVERSATION\b"
    r"|\bDROP\W+(QUEUE|SERVICE|CONTRACT|MESSAGE|DATABASE|BROKER|ROUTE|USER|CERTIFICATE)\W+"
    r"(\[?(tq|iq|sq|//bad)|\[?DEFAULT|master)",
    re.I,
)


def legitimate(text: str) -> bool:
    """Whether ``text`` cannot legitimately change the canary's messages (nor wait: WAITFOR and
    WHILE may run as long as they are told to). The words are looked for anywhere, strings and
    comments included, so dynamic SQL cannot smuggle them in either."""
    return _FORBIDDEN.search(text) is None


_KEYWORD_WORDS = (
    "SELECT FROM WHERE DECLARE SET IF ELSE BEGIN END TRY CATCH TRAN TRANSACTION COMMIT ROLLBACK "
    "SAVE PRINT RAISERROR THROW RETURN BREAK CONTINUE CREATE QUEUE SERVICE CONTRACT MESSAGE TYPE "
    "VALIDATION SEND ON CONVERSATION DIALOG TIMER TO WITH AS CASE WHEN THEN NULL NOT AND OR IN "
    "LIKE BETWEEN EXISTS IS CAST CONVERT TRY_CAST TOP DISTINCT ORDER BY GROUP INSERT INTO VALUES "
    "UPDATE DELETE TABLE EXEC EXECUTE PROCEDURE PROC OUTPUT DEFAULT USE DATABASE GO INT BIGINT "
    "NVARCHAR VARCHAR VARBINARY UNIQUEIDENTIFIER XML MAX sp_executesql GET ENCRYPTION "
    "ACTIVATION STATUS PROCEDURE_NAME EXECUTE_AS SELF OWNER GRANT REVOKE"
)
KEYWORDS = _KEYWORD_WORDS.split()
PUNCTUATION = [
    *"(),;.=+-*/%<>@[]'\"",
    "<>", "!=", "@@", "::", "N'", "0x", "$(", "/*", "*/", "--", "\n", "\n\n", "\t", "\r\n",
    "''", "]]", "N''",
]  # fmt: skip
CONTROL = ["\x00", "\x01", "\x07", "\x1b", "\x7f", "\u2028", "\ufeff", "\ud800", "\U0001f600"]
INJECTIONS = [
    "]; DROP QUEUE decoy; --",
    "'; DELETE FROM queue_messages; --",
    "'); DROP TABLE queue_messages; --",
    '"; UPDATE service_queues SET is_receive_enabled = 0; --',
    "*/ DROP TABLE services /*",
    "x]] ; EXEC('DELETE FROM queue_messages') --",
    "tq; DELETE FROM conversation_endpoints",
    "\x00; DROP TABLE transmission_queue",
]
INTERNAL_TABLES = [
    "queue_messages",
    "service_queues",
    "services",
    "conversation_endpoints",
    "message_types",
    "service_contracts",
    "transmission_queue",
    "broker_settings",
    "dbo.queue_messages",
    "[queue_messages]",
    "master.dbo.queue_messages",
    "sqlite_master",
    "information_schema.tables",
]
"""The broker's own tables, as a hostile script would guess them. Never PostgreSQL's catalogs
(pg_namespace, pg_authid …) here: while T-SQL's table statements reach the database underneath
unchecked, a DELETE on one of them, run as the test server's superuser, wipes that catalog for
every user of the server — the explicit test below only reads them."""
NAMES = [
    "tq", "iq", "sq", "decoy", "x", "[x]", "@h", "@s", "@@TRANCOUNT", "@@ERROR", "dbo.tq",
    "sys.service_queues", "sys.services", "sys.databases", "sys.transmission_queue",
    "[//bad/S]", "'//bad/S'", "[DEFAULT]", *INTERNAL_TABLES,
]  # fmt: skip


def nstring(text: str) -> str:
    """``text`` as a T-SQL N'…' literal."""
    return "N'" + text.replace("'", "''") + "'"


def bracketed(text: str) -> str:
    """``text`` as a T-SQL [delimited] name."""
    return "[" + text.replace("]", "]]") + "]"


HUGE = [
    "'" + "x" * 1_000_000 + "'",
    "N'" + "\u00e9" * 300_000 + "'",
    "9" * 400,
    "0." + "0" * 60 + "1",
    "1e999",
    "0x" + "f" * 999,
    "0x" + "AB" * 250_000,
    "0x123",
    "0x",
    "@" + "v" * 1000,
    "[" + "n" * 1000 + "]",
    "'" + "''" * 50_000 + "'",
]
"""Huge literals: a 1 MB string, a 400-digit number, numbers beyond DECIMAL(38) and FLOAT,
hex with an odd number of digits, names of 1000 characters."""

small_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(CONTROL),
    max_size=12,
)
token = st.one_of(
    st.sampled_from(KEYWORDS),
    st.sampled_from(KEYWORDS).map(str.lower),
    st.sampled_from(PUNCTUATION),
    st.sampled_from(NAMES),
    st.sampled_from(CONTROL),
    st.integers(-(2**70), 2**70).map(str),
    small_text.map(nstring),
    small_text.map(bracketed),
    small_text,
    st.sampled_from(INJECTIONS),
)
soup = st.lists(token, min_size=1, max_size=30).flatmap(
    lambda tokens: st.sampled_from([" ", "", "\n"]).map(lambda sep: sep.join(tokens))
)
"""Token soup: keywords, punctuation, names, numbers, strings and raw text in any order."""

VALID = [
    "SELECT 'abc' + N'def' AS [x y], 1.5 * 2, 0x0102, NULL",
    "DECLARE @s NVARCHAR(MAX) = N'it''s'; PRINT @s",
    "BEGIN TRY SELECT 1/0 END TRY BEGIN CATCH PRINT ERROR_MESSAGE() END CATCH",
    "IF EXISTS (SELECT * FROM sys.service_queues WHERE name = 'tq') PRINT 'yes' ELSE PRINT 'no'",
    "CREATE QUEUE [odd /* queue */]",
    "BEGIN TRAN; SELECT @@TRANCOUNT; ROLLBACK",
    "SELECT CASE WHEN 1 = 1 THEN 'a' ELSE [b] END /* a comment */ -- another",
    "EXEC(N'PRINT ''dynamic''')",
    "EXEC sp_executesql N'SELECT @p', N'@p NVARCHAR(20)', @p = N'x'",
    "CREATE TABLE notes (id INT PRIMARY KEY, body NVARCHAR(100)); "
    "INSERT INTO notes VALUES (1, N'a'); SELECT * FROM notes; DROP TABLE notes",
]
mutilated = st.tuples(st.sampled_from(VALID), st.integers(0, 10_000), st.integers(0, 10_000)).map(
    lambda v: v[0][: v[1] % (len(v[0]) + 1)] + v[0][v[1] % (len(v[0]) + 1) + v[2] % 7 :]
)
"""Valid statements cut short (unterminated strings, names, comments, blocks) or with a few
characters taken out."""

NESTINGS: dict[str, Callable[[int], str]] = {
    "begin": lambda k: "BEGIN " * k + "PRINT 1 " + "END " * k,
    "begin-unclosed": lambda k: "BEGIN " * k + "PRINT 1 " + "END " * (k // 2),
    "if": lambda k: "IF 1 = 1 " * k + "PRINT 1",
    "try": lambda k: "BEGIN TRY " * k + "PRINT 1 " + "END TRY BEGIN CATCH END CATCH " * k,
    "parentheses": lambda k: "SELECT " + "(" * k + "1" + ")" * k,
    "parentheses-unclosed": lambda k: "SELECT " + "(" * k + "1",
    "plus": lambda k: "SELECT " + " + ".join(["1"] * k),
    "concatenation": lambda k: "SELECT " + " + ".join(["N'a'"] * k),
    "negation": lambda k: "SELECT " + "- " * k + "1",
    "not": lambda k: "IF " + "NOT " * k + "1 = 1 PRINT 1",
    "and": lambda k: "IF " + " AND ".join(["1 = 1"] * k) + " PRINT 1",
    "case": lambda k: "SELECT " + "CASE WHEN 1 = 1 THEN " * k + "1" + " END" * k,
    "function": lambda k: "SELECT " + "ABS(" * k + "1" + ")" * k,
    "subquery": lambda k: "SELECT " + "(SELECT " * k + "1" + ")" * k,
    "exists": lambda k: "IF " + "EXISTS (SELECT 1 WHERE " * k + "1 = 1" + ")" * k + " PRINT 1",
    "comment": lambda k: "/*" * k + " PRINT 1 " + "*/" * k,
    "comment-unclosed": lambda k: "/*" * k + " PRINT 1 " + "*/" * (k - 1),
}
nested = st.builds(
    lambda kind, depth: NESTINGS[kind](depth),
    st.sampled_from(sorted(NESTINGS)),
    st.sampled_from([1, 9, 11, 50, 120, 300, 3000]),
)

hostile_value = st.one_of(
    small_text.map(nstring),
    st.sampled_from(INJECTIONS).map(nstring),
    st.sampled_from(HUGE),
    st.binary(max_size=16).map(lambda b: "0x" + b.hex()),
    st.integers(-(2**80), 2**80).map(str),
)
hostile_name = st.one_of(
    st.sampled_from(INJECTIONS).map(bracketed),
    small_text.filter(lambda t: t.strip()).map(bracketed),
    st.sampled_from(["[" + "q" * 129 + "]", '"quoted""name"', "[]", "[ ]"]),
)
TEMPLATES = [
    "CREATE QUEUE {name}",
    "CREATE SERVICE {name} ON QUEUE sq",
    "CREATE SERVICE {name} ON QUEUE {name} ([DEFAULT])",
    "CREATE MESSAGE TYPE {name} VALIDATION = NONE",
    "CREATE CONTRACT {name} ([DEFAULT] SENT BY ANY)",
    "CREATE PROCEDURE {name} AS PRINT {value}",
    "EXEC {name}",
    "DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE [//bad/S] TO SERVICE '//bad/S' "
    "WITH ENCRYPTION = OFF; SEND ON CONVERSATION @h ({value})",
    "DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE [//bad/S] TO SERVICE {value} "
    "WITH ENCRYPTION = OFF",
    "SELECT {value}",
    "PRINT {value}",
    "DECLARE @v NVARCHAR(MAX) = {value}; SELECT @v, LEN(@v), CAST(@v AS VARBINARY(MAX))",
    "RAISERROR({value}, 16, 1)",
    "SELECT * FROM sys.service_queues WHERE name = {value}",
    "SELECT * FROM {name}",
    "CREATE TABLE {name} (a NVARCHAR(MAX)); INSERT INTO {name} VALUES ({value})",
    "USE {name}",
]
templated = st.builds(
    lambda template, name, value: template.format(name=name, value=value),
    st.sampled_from(TEMPLATES),
    hostile_name,
    hostile_value,
)
"""Statements in the right shape with hostile names and values: injections in names and bodies,
control characters, huge literals."""

AT_THE_STORAGE = [
    "DELETE FROM {table}",
    "DELETE FROM {table} WHERE 1 = 1",
    "UPDATE {table} SET name = {value}",
    "UPDATE {table} SET message_body = NULL",
    "INSERT INTO {table} VALUES ({value})",
    "DROP TABLE {table}",
    "SELECT * FROM {table}",
    "SELECT COUNT(*) FROM {table}",
]
at_the_storage = st.builds(
    lambda template, table, value: template.format(table=table, value=value),
    st.sampled_from(AT_THE_STORAGE),
    st.sampled_from(INTERNAL_TABLES),
    hostile_value,
)
"""Statements on the application's tables aimed at the broker's own storage underneath."""


def _dynamic(text: str, how: int) -> str:
    if how == 0:
        return f"EXEC({nstring(text)})"
    if how == 1:
        return f"EXEC sp_executesql {nstring(text)}"
    if how == 2:
        return f"DECLARE @s NVARCHAR(MAX) = {nstring(text)}; EXEC(@s)"
    return f"EXEC sp_executesql N'SELECT @p', N'@p NVARCHAR(MAX)', @p = {nstring(text)}"


dynamic = st.builds(
    _dynamic, st.one_of(soup, mutilated, templated, at_the_storage), st.integers(0, 3)
)
"""Dynamic SQL (EXEC (@s), sp_executesql) around hostile text."""

batch = st.one_of(soup, mutilated, nested, templated, at_the_storage, dynamic)
script = (
    st.lists(
        st.tuples(batch, st.sampled_from(["\n", "\nGO\n", "\nGO 2\n", ";\n"])),
        min_size=1,
        max_size=3,
    )
    .map(lambda parts: "".join(b + sep for b, sep in parts))
    .filter(legitimate)
)

PROPERTY = settings(
    max_examples=80,
    deadline=timedelta(seconds=BOUND),
    # no shrinking, one failure: a script that harms the store harms it for every example
    # after it, so a shrinker would blame innocent ones; the examples are short to read as drawn
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


@PROPERTY
@given(text=script)
def test_hostile_scripts_get_sql_server_errors_and_leave_the_messages(
    canaries: list[Canary], text: str
) -> None:
    canary = canaries[0] = canaries[0].renewed()
    got = outcome_of(canary.instance, text, database=canary.database)
    if isinstance(got, TSqlError):
        shaped(got)
        for error in got.results.errors:  # type: ignore[attr-defined]
            shaped(error)
    canary.check(text)


# -- the same through servicebroker sqlcmd ---------------------------------------------------
SQLCMD_LINES = [
    ':setvar v "x\'; DROP TABLE queue_messages; --"',
    "PRINT N'$(v)'",
    "PRINT '$(undefined)'",
    ":on error exit",
    ":on error ignore",
    ":frobnicate now",
    ":connect elsewhere",
    ":connect",
    "!! rm -rf /",
    ":r does-not-exist.sql",
    "GO",
    "GO 3",
    "exit",
    "quit",
]


def sqlcmd(location: str, *arguments: str, stdin: str | None = None) -> tuple[int, str]:
    """Run ``servicebroker sqlcmd -S location arguments``: its exit code and output; an
    exception other than the exit (a traceback) fails the test."""
    result = CliRunner().invoke(main, ["sqlcmd", "-S", location, *arguments], input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(
            f"servicebroker sqlcmd {' '.join(arguments)[:200]} raised "
            f"{type(result.exception).__name__}\n{result.output[-2000:]}"
        ) from result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.output


cli_script = (
    st.lists(st.one_of(batch, st.sampled_from(SQLCMD_LINES)), min_size=1, max_size=4)
    .map("\n".join)
    .filter(legitimate)
)


@settings(PROPERTY, max_examples=15)
@given(text=cli_script, stop=st.booleans())
def test_hostile_scripts_through_sqlcmd_never_show_a_traceback(
    canaries: list[Canary],
    instance_location: str,
    tmp_path_factory: pytest.TempPathFactory,
    text: str,
    stop: bool,
) -> None:
    canary = canaries[0] = canaries[0].renewed()
    path = tmp_path_factory.mktemp("script") / "hostile.sql"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    arguments = ["-d", canary.database, "-i", str(path), *(["-b"] if stop else [])]
    got = bounded(lambda: sqlcmd(instance_location, *arguments), text)
    if isinstance(got, BaseException):
        raise got
    assert isinstance(got, tuple) and got[0] in (0, 1)
    canary.check(text)


# -- the error shapes, one by one ------------------------------------------------------------
UNCLOSED = [
    ("SELECT 'abc", "abc", 1),
    ("PRINT N'abc", "abc", 1),
    ("PRINT 1\nSELECT 'it''s", "it''s", 2),  # a doubled mark does not close
    ("SELECT [abc", "abc", 1),
    ('SELECT "abc', "abc", 1),
    ("SELECT 1 AS [a]]b", "a]]b", 1),
    ("PRINT 1 /* 'in a comment' */\nPRINT 'a\nb", "a\nb", 2),
    ("PRINT '/* not a comment'\nPRINT [x", "x", 2),
]


def test_an_unclosed_quotation_mark_is_msg_105(instance: Instance) -> None:
    """Msg 105, Level 15: "Unclosed quotation mark after the character string '%.*ls'." (the
    rest of the batch after the opening mark, on the line where it opens) — for a string, an
    N'string', a [name] or a "name" left open."""
    for text, rest, line in UNCLOSED:
        error = error_of(instance, text)
        assert (error.number, error.severity, error.line) == (105, 15, line), text
        assert error.message == f"Unclosed quotation mark after the character string '{rest}'."


def test_an_unclosed_comment_is_msg_113(instance: Instance) -> None:
    """Msg 113, Level 15: "Missing end comment mark '*/'." — comments nest, so one closing mark
    is not enough for two opening ones."""
    for text in ("PRINT 1\n/* open", "PRINT 1 /* a /* b */ c", "/*/"):
        error = error_of(instance, text)
        assert (error.number, error.severity) == (113, 15)
        assert error.message == "Missing end comment mark '*/'."
    done = instance.execute("PRINT 1 /* a /* nested */ still a comment */ PRINT 2")
    assert done.messages == ["1", "2"]


SYNTAX_ERRORS = [
    ("PRINT 1\n\nSELECT * FROM sys.databases WHERE ) = 1", 102, "')'", 3),
    ("PRINT 1\nSELECT FROM sys.databases", 156, "the keyword 'FROM'", 2),
    ("PRINT 1\nPRINT 2 +\n", 102, "'+'", 2),
    ("BEGIN\nPRINT 1\nPRINT 2", 102, "'2'", 3),  # BEGIN without END
    ("BEGIN TRY\n  PRINT 1\nEND TRY", 102, "'TRY'", 3),  # TRY without CATCH
    ("SELECT 1 +\n-- the rest is a comment\n/* and so is this */", 102, "'+'", 1),
    ("PRINT 1\nSELECT 1 WHERE", 156, "the keyword 'WHERE'", 2),
    ("SELECT 1\x00", 102, "'\x00'", 1),
    ("IF 1 = 1\nPRINT 1\nELSE", 156, "the keyword 'ELSE'", 3),
    ("CREATE QUEUE\n  select", 156, "the keyword 'select'", 2),  # reserved: [select] only
    ("SELECT 1 AS order", 156, "the keyword 'order'", 1),
    ("SELECT (1", 102, "'1'", 1),
    ("PRINT", 156, "the keyword 'PRINT'", 1),
]


def test_incorrect_syntax_is_msg_102_or_156_at_the_batch_line(instance: Instance) -> None:
    """Msg 102 "Incorrect syntax near '%.*ls'." and, at a reserved keyword, Msg 156 "Incorrect
    syntax near the keyword '%.*ls'.", both level 15, on the line of the batch where the parse
    failed (at the end of the batch: its last token, comments not counted)."""
    for text, number, near, line in SYNTAX_ERRORS:
        error = error_of(instance, text)
        assert (error.number, error.severity, error.line) == (number, 15, line), text
        assert error.message == f"Incorrect syntax near {near}.", text
    (rows,) = instance.execute("SELECT 1 AS [order], 2 AS fromage, LEFT('ab', 1)").result_sets
    assert rows.values == [[1, 2, "a"]]


def test_the_line_is_the_batch_line_not_the_script_line(instance: Instance) -> None:
    """sqlcmd sends each batch alone, so an error's line counts from its batch's first line."""
    error = error_of(instance, "PRINT 1\nPRINT 2\nGO\nPRINT 3\nSELECT FROM x")
    assert (error.number, error.line) == (156, 2)


NESTED_TOO_DEEPLY = (
    "Some part of your SQL statement is nested too deeply. Rewrite the query or break it up "
    "into smaller queries."
)


def test_thousands_deep_is_msg_191(canary: Canary) -> None:
    """Msg 191, Level 15 (sysmessages.tsv) for a batch nested thousands deep — raised before
    anything runs — and the same shape a few levels deep runs."""
    for kind in ("begin", "if", "try", "plus", "concatenation", "not", "and", "function"):
        error = error_of(canary.instance, "PRINT 1\n" + NESTINGS[kind](2000))
        assert (error.number, error.severity, error.line) == (191, 15, 2), kind
        assert error.message == NESTED_TOO_DEEPLY
        assert not isinstance(outcome_of(canary.instance, NESTINGS[kind](20)), TSqlError), kind
    error = error_of(canary.instance, NESTINGS["subquery"](300))
    assert (error.number, error.severity) == (191, 15)
    canary.check("deep nesting")


def test_deep_nesting_inside_dynamic_sql_and_procedures_is_msg_191(canary: Canary) -> None:
    deep = NESTINGS["begin"](3000)
    for text in (
        f"EXEC({nstring(deep)})",
        f"EXEC sp_executesql {nstring(deep)}",
        f"CREATE PROCEDURE deep AS {deep}",
    ):
        error = error_of(canary.instance, text)
        assert (error.number, error.severity) == (191, 15)
    canary.check("deep dynamic SQL")


def test_case_nested_beyond_ten_is_msg_125(instance: Instance) -> None:
    """case-transact-sql.md: "SQL Server allows for only 10 levels of nesting in CASE
    expressions." — Msg 125, Level 15."""
    assert instance.execute(NESTINGS["case"](10)).result_sets[0].values == [[1]]
    error = error_of(instance, NESTINGS["case"](11))
    assert (error.number, error.severity) == (125, 15)
    assert error.message == "Case expressions may only be nested to level 10."


def test_huge_literals(canary: Canary) -> None:
    """A 1 MB string is a value like any other; a number beyond DECIMAL(38) is Msg 1007 and
    a float beyond FLOAT Msg 168 (both level 15); hex with an odd number of digits has a zero
    put in front (0x123 is 0x0123); a name longer than 128 is Msg 103."""
    instance = canary.instance
    (rows,) = instance.execute("SELECT LEN('" + "x" * 1_000_000 + "')").result_sets
    assert rows.values == [[1_000_000]]
    (rows,) = instance.execute("SELECT 0x123, 0x").result_sets
    assert rows.values == [[b"\x01\x23", b""]]
    (rows,) = instance.execute("SELECT 0x" + "ab" * 500_000).result_sets
    assert rows.values == [[b"\xab" * 500_000]]
    (rows,) = instance.execute("SELECT " + "9" * 38).result_sets
    assert rows.values == [[10**38 - 1]]
    for number in ("9" * 400, "9" * 39, "0." + "0" * 38 + "1", "1" + "0" * 38 + ".5"):
        error = error_of(instance, "PRINT 1\nSELECT " + number)
        assert (error.number, error.severity, error.line) == (1007, 15, 2)
        assert error.message == (
            f"The number '{number}' is out of the range for numeric representation "
            f"(maximum precision 38)."
        )
    error = error_of(instance, "SELECT 1e999")
    assert (error.number, error.severity) == (168, 15)
    assert error.message == (
        "The floating point value '1e999' is out of the range of computer representation (8 bytes)."
    )
    for name in ("@" + "v" * 200, "[" + "q" * 129 + "]", "q" * 129, '"' + "q" * 129 + '"'):
        text = f"DECLARE {name} INT" if name.startswith("@") else f"CREATE QUEUE {name}"
        error = error_of(instance, text)
        assert (error.number, error.severity) == (103, 15)
        start = name.strip('[]"')[:128]
        assert error.message == (
            f"The identifier that starts with '{start}' is too long. Maximum length is 128."
        )
    instance.execute(f"CREATE QUEUE [{'q' * 128}]")  # 128 is allowed
    canary.check("huge literals")


def test_control_characters_in_code_strings_and_names(canary: Canary) -> None:
    """A control character in the code is a syntax error (level 15); in a string it is a
    character like any other; in a name the broker refuses it with an error, not a crash."""
    for character in ("\x00", "\x01", "\x1b", "\x7f", "\ufeff", "\ud800"):
        error = error_of(canary.instance, f"PRINT 1 {character} PRINT 2")
        assert error.severity == 15 and error.number == 102, repr(character)
        (rows,) = canary.instance.execute(f"SELECT LEN(N'a{character}b')").result_sets
        assert rows.values == [[3]]
        for text in (f"CREATE QUEUE [q{character}]", f"CREATE SERVICE [s{character}] ON QUEUE sq"):
            got = outcome_of(canary.instance, text)
            if isinstance(got, TSqlError):
                shaped(got)
    canary.check("control characters")


# -- injections ------------------------------------------------------------------------------
INJECTION = "]; DROP QUEUE tq; --"


def test_an_injection_shaped_name_is_just_a_name(canary: Canary) -> None:
    """A delimited name holds what it holds: ``[]]; DROP QUEUE tq; --]`` names a queue (and a
    service on it) called ``]; DROP QUEUE tq; --``; tq and its messages stay."""
    name = bracketed(INJECTION)
    canary.instance.execute(
        f"CREATE QUEUE {name};\nCREATE SERVICE {name} ON QUEUE {name} ([DEFAULT]);"
    )
    (rows,) = canary.instance.execute(
        f"SELECT name FROM sys.service_queues WHERE name = {nstring(INJECTION)}"
    ).result_sets
    assert rows.values == [[INJECTION]]
    (rows,) = canary.instance.execute(
        f"SELECT name FROM sys.services WHERE name = {nstring(INJECTION)}"
    ).result_sets
    assert rows.values == [[INJECTION]]
    assert canary.broker.peek(INJECTION) == []
    canary.check("an injection-shaped name")


def test_an_injection_shaped_body_arrives_as_sent(canary: Canary) -> None:
    """A SEND body is bytes: an NVARCHAR body arrives as its UTF-16LE bytes, whatever it says."""
    bodies = ["]; DROP QUEUE tq; --", "'; DROP QUEUE tq; --", "\x00\x01", "*/ END CONVERSATION /*"]
    for body in bodies:
        canary.instance.execute(
            "DECLARE @h UNIQUEIDENTIFIER;\n"
            "BEGIN DIALOG @h FROM SERVICE [//bad/S] TO SERVICE '//bad/S' WITH ENCRYPTION = OFF;\n"
            f"SEND ON CONVERSATION @h ({nstring(body)});"
        )
    sent = [m.message_body for m in canary.broker.peek("sq")]
    assert sent == [body.encode("utf-16-le") for body in bodies]
    canary.check("an injection-shaped body")


def test_a_lone_surrogate_in_a_body_is_sent_as_its_utf16_code_unit(canary: Canary) -> None:
    """NVARCHAR is UTF-16 code units: N'\\ud800' is the two bytes 00 D8 (CAST to VARBINARY
    gives them), never a UnicodeEncodeError."""
    got = outcome_of(
        canary.instance,
        "DECLARE @h UNIQUEIDENTIFIER;\n"
        "BEGIN DIALOG @h FROM SERVICE [//bad/S] TO SERVICE '//bad/S' WITH ENCRYPTION = OFF;\n"
        "SEND ON CONVERSATION @h (N'a\ud800');",
    )
    assert not isinstance(got, TSqlError), got
    (message,) = canary.broker.peek("sq")
    assert message.message_body == b"a\x00\x00\xd8"
    canary.check("a lone surrogate")


def test_dynamic_sql_with_quotename_keeps_the_injection_a_name(canary: Canary) -> None:
    """EXEC (@s) and sp_executesql run what they are given: QUOTENAME makes the injection a
    name, a parameter keeps it a value."""
    canary.instance.execute(
        f"DECLARE @n SYSNAME = {nstring(INJECTION)};\n"
        "DECLARE @s NVARCHAR(MAX) = N'CREATE QUEUE ' + QUOTENAME(@n);\n"
        "EXEC (@s);"
    )
    (rows,) = canary.instance.execute(
        f"EXEC sp_executesql N'SELECT name FROM sys.service_queues WHERE name = @p', "
        f"N'@p SYSNAME', @p = {nstring(INJECTION)}"
    ).result_sets
    assert rows.values == [[INJECTION]]
    canary.check("dynamic SQL")


BROKER_TABLES = [
    "DELETE FROM queue_messages",
    "DELETE FROM dbo.queue_messages",
    "UPDATE queue_messages SET message_body = NULL",
    "DROP TABLE queue_messages",
    "DELETE FROM conversation_endpoints",
    "UPDATE service_queues SET is_receive_enabled = 0",
    "DROP TABLE services",
    "EXEC('DELETE FROM queue_messages')",
    "EXEC sp_executesql N'DROP TABLE queue_messages'",
    "SELECT * FROM queue_messages",
    "SELECT COUNT(*) FROM sqlite_master",
    "SELECT COUNT(*) FROM pg_catalog.pg_namespace",  # read only: see INTERNAL_TABLES
]


def test_the_brokers_own_tables_are_not_the_applications(canary: Canary) -> None:
    """The broker's storage is not a table of the database as T-SQL sees it: on SQL Server a
    queue's internal table cannot be named (Msg 208, "Invalid object name '%.*ls'.", level
    16; a DROP TABLE of it Msg 3701, "Cannot drop the table '%.*ls', because it does not exist
    or you do not have permission.", level 11), so no DML, DROP or SELECT reaches the messages
    or the catalog behind them."""
    wrong = []
    for text in BROKER_TABLES:
        got = outcome_of(canary.instance, text)
        dropping = "DROP TABLE" in text.upper()
        expected = (3701, 11) if dropping else (208, 16)
        shape = (
            r"Cannot drop the table '[\w.]+', because it does not exist or you do not have "
            r"permission\."
            if dropping
            else r"Invalid object name '[\w.]+'\."
        )
        if not (
            isinstance(got, TSqlError)
            and (got.number, got.severity) == expected
            and re.fullmatch(shape, got.message)
        ):
            wrong.append((text, got.message if isinstance(got, TSqlError) else got.events))
        if snapshot(canary.broker) != canary.before:
            wrong.append((text, "the canary's messages changed"))
            break
    assert not wrong, "\n".join(f"{text!r}: {what}" for text, what in wrong)


def test_a_wait_beyond_a_day_is_msg_148_at_once(canary: Canary) -> None:
    """waitfor-transact-sql.md: the delay is a time of day (at most 23:59:59.997); anything
    else is Msg 148 "Incorrect time syntax in time string '%.*ls' used with WAITFOR." at
    once — not a wait of 99,999 hours."""
    for value in ("99999:00:00", "24:00:00", "-1", "nan", "inf", "1e300"):
        error = error_of(canary.instance, f"WAITFOR DELAY '{value}'", bound=5.0)
        assert (error.number, error.severity) == (148, 15), (value, error.message)
        assert error.message == (
            f"Incorrect time syntax in time string '{value}' used with WAITFOR."
        )


def test_runaway_recursion_is_msg_217(canary: Canary) -> None:
    """A procedure or dynamic SQL that calls itself stops at nesting level 32: Msg 217
    "Maximum stored procedure, function, trigger, or view nesting level exceeded (limit 32).",
    level 16 — not a Python RecursionError."""
    canary.instance.execute("CREATE PROCEDURE again AS EXEC again")
    for text in (
        "EXEC again",
        "DECLARE @s NVARCHAR(MAX) = N'EXEC sp_executesql @s, N''@s NVARCHAR(MAX)'', @s';\n"
        "EXEC sp_executesql @s, N'@s NVARCHAR(MAX)', @s",
    ):
        error = error_of(canary.instance, text)
        assert (error.number, error.severity) == (217, 16), error.message
        assert error.message == (
            "Maximum stored procedure, function, trigger, or view nesting level exceeded "
            "(limit 32)."
        )
    canary.check("recursion")


# -- batches and sqlcmd -----------------------------------------------------------------------
def test_a_failed_batch_does_not_stop_the_next(instance: Instance) -> None:
    """Each GO-separated batch runs on its own: after a batch fails to parse, the next runs;
    execute raises the first error, with everything that ran in ``results``."""
    with pytest.raises(TSqlError) as info:
        instance.execute("PRINT 'one'\nGO\nSELECT 1 +\nGO\nPRINT 'three'\nGO\nSELECT 'x\nGO")
    assert (info.value.number, info.value.line) == (102, 1)
    results: Results = info.value.results  # type: ignore[attr-defined]
    assert results.messages == ["one", "three"]
    assert [e.number for e in results.errors] == [102, 105]


def test_go_inside_a_string_a_comment_or_a_name_is_not_a_batch_end(instance: Instance) -> None:
    """A GO line inside a string, a (nested) comment or a delimited name is part of it; a quote
    inside a delimited name opens nothing."""
    results = instance.execute(
        "SELECT 1 AS [it's]\nGO\nPRINT 'a\nGO\nb'\nGO\n/* a\nGO\n*/ PRINT 'c'\nGO\n"
        "SELECT 2 AS \"it's\"\nGO\nPRINT 'd'\nGO\n/* a /* b */\nGO\n*/ PRINT 'e'"
    )
    assert results.messages == ["a\nGO\nb", "c", "d", "e"]
    assert [r.values for r in results.result_sets] == [[[1]], [[2]]]


def test_go_with_a_huge_count_after_nothing_ends_at_once(instance: Instance) -> None:
    got = outcome_of(instance, "GO 2000000000\nPRINT 'after'")
    assert isinstance(got, Results) and got.messages == ["after"]


FAILING_SCRIPT = "PRINT 'one'\nGO\nSELECT 1 +\nGO\nPRINT 'three'\nGO\n"


def test_sqlcmd_runs_on_after_a_failed_batch_and_exits_0(
    canary: Canary, instance_location: str
) -> None:
    """Without -b sqlcmd reports the error (Msg N, Level L, State S, Server, Line L) and runs
    the next batches; its exit code is 0."""
    code, output = sqlcmd(instance_location, "-Q", FAILING_SCRIPT)
    assert code == 0
    assert output.index("one") < output.index("Msg 102, Level 15, State 1") < output.index("three")
    assert "Incorrect syntax near '+'." in output


def test_sqlcmd_b_stops_at_the_first_failing_batch_and_exits_1(
    canary: Canary, instance_location: str, tmp_path: Path
) -> None:
    """sqlcmd-utility.md, -b: "sqlcmd exits and returns a DOS ERRORLEVEL value when an error
    occurs" — the batches after the failing one do not run."""
    script = tmp_path / "failing.sql"
    script.write_text(FAILING_SCRIPT, encoding="utf-8")
    code, output = sqlcmd(instance_location, "-b", "-i", str(script))
    assert code == 1
    assert "one" in output and "Msg 102, Level 15" in output
    assert "three" not in output
    code, output = sqlcmd(instance_location, "-b", "-Q", "PRINT 'fine'")
    assert (code, output.strip()) == (0, "fine")


def test_sqlcmd_an_undefined_variable_is_a_sqlcmd_error(instance_location: str) -> None:
    """$(name) without :setvar or -v: sqlcmd's own error (no Msg, no server), naming the
    variable and the script line; the script stops there."""
    code, output = sqlcmd(
        instance_location, "-b", "-Q", "PRINT 'one'\nGO\nPRINT '$(nope)'\nGO\nPRINT 'two'"
    )
    assert code == 1
    assert "one" in output and "two" not in output
    assert "Sqlcmd: Error: Syntax error at line 3 near command '$(nope)'" in output
    assert "'nope' scripting variable not defined." in output
    assert "Msg " not in output
    code, output = sqlcmd(instance_location, "-v", "nope=yes", "-Q", "PRINT '$(nope)'")
    assert (code, output.strip()) == (0, "yes")


def test_sqlcmd_an_unknown_command_is_a_sqlcmd_error(instance_location: str) -> None:
    code, output = sqlcmd(
        instance_location, "-b", "-Q", "PRINT 'one'\nGO\n:frobnicate x\nPRINT 'two'"
    )
    assert code == 1
    assert "one" in output and "two" not in output
    assert output.count("Sqlcmd: Error:") == 1 and "':frobnicate'" in output
    assert "Msg " not in output


def test_sqlcmd_files_it_cannot_read_are_sqlcmd_errors(
    instance_location: str, tmp_path: Path
) -> None:
    """A missing file, a file that is not UTF-8 (or UTF-16 with its mark) and a file that
    reads itself with :r are sqlcmd's errors, not tracebacks; a UTF-16 script runs."""
    binary = tmp_path / "binary.sql"
    binary.write_bytes(b"PRINT 1\n\xff\xfe\x00\xc3(")
    looping = tmp_path / "looping.sql"
    looping.write_text("PRINT 'again'\n:r looping.sql\n", encoding="utf-8")
    unicode_ = tmp_path / "unicode.sql"
    unicode_.write_text("PRINT N'\u00fcnicode'\n", encoding="utf-16")
    for path, expected in (
        (tmp_path / "missing.sql", "Invalid filename."),
        (binary, "not UTF-8 text"),
        (looping, "files deep"),
    ):
        code, output = sqlcmd(instance_location, "-b", "-i", str(path))
        assert code == 1
        assert "Sqlcmd: " in output and expected in output
    code, output = sqlcmd(instance_location, "-b", "-i", str(unicode_))
    assert (code, output.strip()) == (0, "\u00fcnicode")


def test_sqlcmd_reads_hostile_standard_input(instance_location: str) -> None:
    code, output = sqlcmd(instance_location, "-b", stdin="SELECT 'a\x00b'\nGO\n/* open")
    assert code == 1
    assert "Msg 113, Level 15" in output
