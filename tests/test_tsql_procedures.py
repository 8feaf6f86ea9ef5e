"""Stored procedures, EXEC and dynamic SQL in T-SQL (create-procedure-transact-sql.md,
execute-transact-sql.md, sp-executesql-transact-sql.md), and a T-SQL procedure as a queue's
activation procedure (ACT-1..9): Microsoft's internal-activation tutorial, every lesson,
unchanged through ``servicebroker sqlcmd``. Each test runs on a folder instance and on a
PostgreSQL one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from servicebroker import Instance, ManualClock, TSqlError
from servicebroker.cli import main
from servicebroker.testing.waiting import eventually

DATA = Path(__file__).parent / "data" / "tsql"

PROCS = """
CREATE PROCEDURE dbo.AddUp @a INT, @b INT = 10, @sum INT OUTPUT
AS
BEGIN
    SET @sum = @a + @b;
    IF @sum > 100 RETURN 1;
    RETURN 0;
END
GO
CREATE PROCEDURE Fails
AS
    PRINT 'before';
    SELECT CAST('x' AS INT);
    PRINT 'never';
GO
"""


@pytest.fixture
def procs(instance: Instance) -> Instance:
    instance.execute(PROCS)
    return instance


def test_exec_binds_positional_named_default_and_output_arguments(procs: Instance) -> None:
    results = procs.execute(
        "DECLARE @s INT, @rc INT;\n"
        "EXEC dbo.AddUp 1, 2, @s OUTPUT; SELECT @s AS s;\n"
        "EXEC AddUp @a = 5, @sum = @s OUTPUT; SELECT @s AS s;\n"  # @b takes its default
        "EXECUTE @rc = addup 90, DEFAULT, @s OUT; SELECT @s AS s, @rc AS rc;\n"
        "EXEC AddUp 1, 2, @s; SELECT @s AS not_output;"  # without OUTPUT: not copied back
    )
    assert [r.values for r in results.result_sets] == [[[3]], [[15]], [[100, 0]], [[100]]]


def test_exec_errors_are_sql_servers(procs: Instance) -> None:
    cases = {
        "EXEC NoSuchProc": (2812, "Could not find stored procedure 'NoSuchProc'."),
        "DECLARE @s INT; EXEC AddUp @b = 1, @sum = @s": (
            201,
            "Procedure or function 'AddUp' expects parameter '@a', which was not supplied.",
        ),
        "DECLARE @s INT; EXEC AddUp 1, 2, @s, 4": (
            8144,
            "Procedure or function AddUp has too many arguments specified.",
        ),
        "EXEC AddUp @a = 1, @c = 2": (8145, "@c is not a parameter for procedure AddUp."),
        "CREATE PROCEDURE AddUp AS RETURN": (
            2714,
            "There is already an object named 'AddUp' in the database.",
        ),
        "DROP PROCEDURE Nope": (
            3701,
            "Cannot drop the procedure 'Nope', because it does not exist or you do not have "
            "permission.",
        ),
    }
    for text, (number, message) in cases.items():
        with pytest.raises(TSqlError) as caught:
            procs.execute(text)
        assert (caught.value.number, caught.value.message) == (number, message), text


def test_an_error_in_a_procedure_names_it_and_its_line(procs: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        procs.execute("EXEC Fails;\nPRINT 'after'")
    error = caught.value
    assert (error.number, error.procedure, error.line) == (245, "Fails", 4)
    # a conversion error ends the batch: the procedure's and the caller's next statements
    assert error.results.messages == ["before"]  # type: ignore[attr-defined]
    results = procs.execute(
        "BEGIN TRY EXEC Fails; END TRY\n"
        "BEGIN CATCH SELECT ERROR_PROCEDURE() AS p, ERROR_LINE() AS l, ERROR_NUMBER() AS n; "
        "END CATCH"
    )
    assert results.result_sets[0].values == [["Fails", 4, 245]]


def test_alter_create_or_alter_and_drop(procs: Instance) -> None:
    procs.execute("ALTER PROCEDURE Fails AS SELECT 1 AS one")
    assert procs.execute("EXEC Fails").result_sets[0].values == [[1]]
    procs.execute("CREATE OR ALTER PROCEDURE Fails AS SELECT 2 AS two")
    procs.execute("CREATE OR ALTER PROCEDURE Fresh AS SELECT 3 AS three")
    assert procs.execute("EXEC Fails; EXEC Fresh").result_sets[1].values == [[3]]
    listed = procs.execute(
        "SELECT name FROM sys.objects WHERE type_desc = 'SQL_STORED_PROCEDURE' ORDER BY name"
    )
    assert listed.result_sets[0].values == [["AddUp"], ["Fails"], ["Fresh"]]
    assert procs.execute("SELECT OBJECT_ID('dbo.Fresh') AS id").result_sets[0].values[0][0]
    procs.execute("DROP PROCEDURE Fresh; DROP PROCEDURE IF EXISTS Fresh")
    with pytest.raises(TSqlError) as caught:
        procs.execute("ALTER PROCEDURE Fresh AS RETURN")
    assert caught.value.number == 208


def test_dynamic_sql_and_sp_executesql(procs: Instance) -> None:
    results = procs.execute(
        "DECLARE @t NVARCHAR(100) = N'SELECT 41 + 1 AS answer';\n"
        "EXEC (@t);\n"
        "DECLARE @out INT;\n"
        "EXEC sp_executesql N'SET @o = @i * 2', N'@i INT, @o INT OUTPUT', @i = 21, @o = @out OUTPUT;\n"
        "SELECT @out AS doubled;\n"
        "EXEC ('DECLARE @x INT = 1; SELECT @x AS own_variables');"
    )
    assert [r.values for r in results.result_sets] == [[[42]], [[42]], [[1]]]


def sqlcmd(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["sqlcmd", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_the_internal_activation_tutorial_runs_unchanged(
    instance_location: str, tmp_path: Path
) -> None:
    """Lessons 1–4 of Microsoft's internal-activation tutorial through sqlcmd: the request sent
    in lesson 3 activates TargetActivProc (a T-SQL stored procedure) in the sqlcmd process,
    whose reply the next batch receives within its TIMEOUT 5000."""
    prelude = tmp_path / "prelude.sql"
    prelude.write_text("CREATE DATABASE AdventureWorks2008R2;\nGO\n")
    lessons = [str(DATA / f"internal_activation_lesson{n}.sql") for n in (1, 2, 3, 4)]
    code, out = sqlcmd("-S", instance_location, "-b", "-i", str(prelude), "-i", lessons[0])
    assert code == 0, out
    code, out = sqlcmd("-S", instance_location, "-b", "-i", lessons[1])
    assert (code, out) == (0, "Changed database context to 'AdventureWorks2008R2'.\n")
    code, out = sqlcmd("-S", instance_location, "-b", "-i", lessons[2])
    width = 100  # the NVARCHAR(100) variables' display width
    assert (code, out) == (
        0,
        "Changed database context to 'AdventureWorks2008R2'.\n"
        f"{'SentRequestMsg'.ljust(width)}\n{'-' * width}\n"
        f"{'<RequestMsg>Message for Target service.</RequestMsg>'.ljust(width)}\n\n"
        "(1 row affected)\n"
        f"{'ReceivedReplyMsg'.ljust(width)}\n{'-' * width}\n"
        f"{'<ReplyMsg>Message for Initiator service.</ReplyMsg>'.ljust(width)}\n\n"
        "(1 row affected)\n",
    )
    code, out = sqlcmd("-S", instance_location, "-b", "-i", lessons[3])
    assert (code, out) == (0, "Changed database context to 'AdventureWorks2008R2'.\n")
    with Instance.open(instance_location) as instance:
        left = instance.execute(
            "SELECT COUNT(*) AS n FROM sys.objects WHERE name IN "
            "(N'TargetActivProc', N'TargetQueueIntAct', N'InitiatorQueueIntAct')",
            database="AdventureWorks2008R2",
        )
        assert left.result_sets[0].values == [[0]]


def test_activation_runs_a_tsql_procedure_on_the_brokers_clock(
    instance: Instance, clock: ManualClock
) -> None:
    """The tutorial's procedure activated in a started instance, through the Python API: it
    replies, and ends (its WAITFOR … TIMEOUT 5000 passes) once the broker's clock moves 5 s."""
    instance.execute("CREATE DATABASE AdventureWorks2008R2")
    for n in (1, 2):
        instance.execute((DATA / f"internal_activation_lesson{n}.sql").read_text())
    instance.start()
    broker = instance.database("AdventureWorks2008R2")
    instance.execute(
        "DECLARE @h UNIQUEIDENTIFIER;\n"
        "BEGIN DIALOG @h FROM SERVICE [//AWDB/InternalAct/InitiatorService]\n"
        "    TO SERVICE N'//AWDB/InternalAct/TargetService'\n"
        "    ON CONTRACT [//AWDB/InternalAct/SampleContract] WITH ENCRYPTION = OFF;\n"
        "SEND ON CONVERSATION @h MESSAGE TYPE [//AWDB/InternalAct/RequestMessage]\n"
        "    (N'<RequestMsg>hi</RequestMsg>');",
        database="AdventureWorks2008R2",
    )
    eventually(lambda: len(broker.peek("InitiatorQueueIntAct")) == 1, timeout=30)
    (reply,) = broker.peek("InitiatorQueueIntAct")
    assert reply.message_type_name == "//AWDB/InternalAct/ReplyMessage"
    assert reply.message_body.decode("utf-16-le") == (
        "<ReplyMsg>Message for Initiator service.</ReplyMsg>"
    )
    assert [t.procedure_name for t in broker.views.dm_broker_activated_tasks()] != []
    # the procedure commits its reply and loops back into WAITFOR: the clock moves only once it
    # waits there, or its 5 s would count from after the move
    eventually(
        lambda: (
            [
                m.tasks_waiting
                for m in broker.views.dm_broker_queue_monitors()
                if m.queue_name == "TargetQueueIntAct"
            ]
            == [1]
        ),
        what="the procedure waiting in RECEIVE again",
        timeout=30,
    )
    clock.advance(6)  # the procedure's WAITFOR times out: it rolls back and leaves its loop
    eventually(lambda: broker.views.dm_broker_activated_tasks() == [], timeout=30)


def test_an_activated_procedure_that_throws_logs_sql_servers_error(
    instance: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    """THROW ends an activated procedure's batch (throw-transact-sql.md): the error goes to the
    log as SQL Server writes it to its error log — the procedure, Msg, Level, State, Line and
    text — never as a Python traceback; the message it received is rolled back to the queue."""
    instance.execute("CREATE DATABASE Shop")
    instance.execute(
        "CREATE QUEUE iq; CREATE QUEUE tq; CREATE SERVICE I ON QUEUE iq;\n"
        "CREATE SERVICE T ON QUEUE tq ([DEFAULT]);\nGO\n"
        "CREATE PROCEDURE Fails AS\nBEGIN\n  BEGIN TRAN;\n"
        "  RECEIVE TOP (1) message_body FROM tq;\n"
        "  THROW 50001, N'refused by the procedure', 7;\nEND\nGO\n"
        "ALTER QUEUE tq WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = Fails,\n"
        "    MAX_QUEUE_READERS = 1, EXECUTE AS SELF);",
        database="Shop",
    )
    instance.start()
    broker = instance.database("Shop")
    with caplog.at_level("WARNING", logger="servicebroker"):
        instance.execute(
            "DECLARE @h UNIQUEIDENTIFIER;\n"
            "BEGIN DIALOG @h FROM SERVICE I TO SERVICE 'T' WITH ENCRYPTION = OFF;\n"
            "SEND ON CONVERSATION @h (0x01);",
            database="Shop",
        )
        eventually(lambda: "Msg 50001" in caplog.text, timeout=30)
    assert (
        "activated procedure Fails in database Shop: Msg 50001, Level 16, State 7, Line 5: "
        "refused by the procedure" in caplog.text
    )
    assert "Traceback" not in caplog.text and "_BatchAbort" not in caplog.text
    assert len(broker.peek("tq")) == 1  # the RECEIVE was rolled back with the batch


def test_variables_are_the_batchs_declared_once(instance: Instance) -> None:
    """A DECLARE runs once per batch however often a loop passes it (it keeps the value), a
    DECLARE in a branch that does not run still declares, and a name declared twice is Msg 134
    before anything of the batch runs (declare-local-variable-transact-sql.md)."""
    results = instance.execute(
        "DECLARE @i INT = 0;\n"
        "WHILE @i < 3 BEGIN DECLARE @kept INT; SET @kept = ISNULL(@kept, 0) + 1; SET @i += 1; END\n"
        "IF 1 = 0 BEGIN DECLARE @never INT; END\n"
        "SET @never = 7;\n"
        "SELECT @kept AS kept, @never AS never;"
    )
    assert results.result_sets[0].values == [[3, 7]]
    with pytest.raises(TSqlError) as caught:
        instance.execute("PRINT 'not run';\nDECLARE @a INT;\nDECLARE @a INT;")
    assert (caught.value.number, caught.value.line) == (134, 3)
    assert caught.value.results.messages == []  # type: ignore[attr-defined]
