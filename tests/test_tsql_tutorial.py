"""Microsoft's tutorial "Completing a Conversation in a Single Database" run unchanged through
``servicebroker sqlcmd`` (docs/tsql.md): every lesson's code blocks as the pages give them
(tests/data/tsql/single_database_lesson*.sql, each naming its page and commit), on a folder
instance and on a PostgreSQL instance; the output compared with what sqlcmd prints on SQL
Server, and the state afterwards with what the pages say (lesson 2: the request and the reply
are received and both ends closed; lesson 3: the objects are gone).

The tutorial works in the AdventureWorks2008R2 sample database, which it presumes exists; the
prelude creates it (an empty database is all the tutorial uses of it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from servicebroker import Instance
from servicebroker.cli import main

DATA = Path(__file__).parent / "data" / "tsql"
LESSONS = [
    DATA.parent / "tutorial_lesson1.sql",  # the DDL tests' copy of lesson 1: the same five blocks
    DATA / "single_database_lesson2.sql",
    DATA / "single_database_lesson3.sql",
]


def column(name: str, width: int, value: str) -> str:
    """One single-column result set as sqlcmd prints it: the name and the value padded to the
    column's width (an NVARCHAR(100) variable's), dashes, a blank line, the row count."""
    return f"{name.ljust(width)}\n{'-' * width}\n{value.ljust(width)}\n\n(1 row affected)\n"


EXPECTED_LESSON_2 = (
    "Changed database context to 'AdventureWorks2008R2'.\n"
    + column("SentRequestMsg", 100, "<RequestMsg>Message for Target service.</RequestMsg>")
    + column("ReceivedRequestMsg", 100, "<RequestMsg>Message for Target service.</RequestMsg>")
    + column("SentReplyMsg", 100, "<ReplyMsg>Message for Initiator service.</ReplyMsg>")
    + column("ReceivedReplyMsg", 100, "<ReplyMsg>Message for Initiator service.</ReplyMsg>")
)


def sqlcmd(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["sqlcmd", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_every_lesson_runs_unchanged_through_sqlcmd(instance_location: str, tmp_path: Path) -> None:
    prelude = tmp_path / "prelude.sql"
    prelude.write_text("CREATE DATABASE AdventureWorks2008R2;\nGO\n")
    code, out = sqlcmd("-S", instance_location, "-b", "-i", str(prelude), "-i", str(LESSONS[0]))
    assert code == 0, out
    # lesson 1: USE master, ALTER DATABASE … ENABLE_BROKER, USE AdventureWorks2008R2, the DDL
    assert out == (
        "Changed database context to 'master'.\n"
        "Changed database context to 'AdventureWorks2008R2'.\n"
    )
    with Instance.open(instance_location) as instance:
        services = instance.execute(
            "SELECT name FROM sys.services WHERE name LIKE N'//AWDB/%' ORDER BY name",
            database="AdventureWorks2008R2",
        )
        assert services.result_sets[0].values == [
            ["//AWDB/1DBSample/InitiatorService"],
            ["//AWDB/1DBSample/TargetService"],
        ]

    code, out = sqlcmd("-S", instance_location, "-b", "-i", str(LESSONS[1]))
    assert (code, out) == (0, EXPECTED_LESSON_2)
    with Instance.open(instance_location) as instance:
        broker = instance.database("AdventureWorks2008R2")  # the Python API sees the same database
        assert broker.peek("TargetQueue1DB") == [] and broker.peek("InitiatorQueue1DB") == []
        assert [e.state_desc for e in broker.views.conversation_endpoints()] == []
        assert broker.views.transmission_queue() == []

    code, out = sqlcmd("-S", instance_location, "-b", "-i", str(LESSONS[2]))
    assert (code, out) == (0, "Changed database context to 'AdventureWorks2008R2'.\n")
    with Instance.open(instance_location) as instance:
        left = instance.execute(
            "SELECT (SELECT COUNT(*) FROM sys.services WHERE name LIKE N'//AWDB/%') AS services,"
            " (SELECT COUNT(*) FROM sys.service_queues WHERE name LIKE N'%1DB') AS queues,"
            " (SELECT COUNT(*) FROM sys.service_contracts WHERE name LIKE N'//AWDB/%') AS contracts,"
            " (SELECT COUNT(*) FROM sys.service_message_types WHERE name LIKE N'//AWDB/%') AS types",
            database="AdventureWorks2008R2",
        )
        assert left.result_sets[0].values == [[0, 0, 0, 0]]


def test_lesson_2_repeats_as_the_page_says(instance_location: str, tmp_path: Path) -> None:
    """ "You can repeat the steps in this lesson as many times as you want": three rounds, each
    with its own conversation, each printing the same four result sets."""
    prelude = tmp_path / "prelude.sql"
    prelude.write_text("CREATE DATABASE AdventureWorks2008R2;\nGO\n")
    assert sqlcmd("-S", instance_location, "-b", "-i", str(prelude), "-i", str(LESSONS[0]))[0] == 0
    for _ in range(3):
        assert sqlcmd("-S", instance_location, "-b", "-i", str(LESSONS[1])) == (
            0,
            EXPECTED_LESSON_2,
        )


def test_the_instance_api_runs_lesson_2_and_returns_its_result_sets(instance: Instance) -> None:
    instance.execute("CREATE DATABASE AdventureWorks2008R2")
    instance.execute(LESSONS[0].read_text())
    results = instance.execute(LESSONS[1].read_text())
    assert [r.names for r in results.result_sets] == [
        ["SentRequestMsg"],
        ["ReceivedRequestMsg"],
        ["SentReplyMsg"],
        ["ReceivedReplyMsg"],
    ]
    assert [r.values[0][0] for r in results.result_sets] == [
        "<RequestMsg>Message for Target service.</RequestMsg>",
        "<RequestMsg>Message for Target service.</RequestMsg>",
        "<ReplyMsg>Message for Initiator service.</ReplyMsg>",
        "<ReplyMsg>Message for Initiator service.</ReplyMsg>",
    ]
    assert results.row_counts == [1, 1, 1, 1]
    assert results.messages == ["Changed database context to 'AdventureWorks2008R2'."]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_batch_that_fails_stops_sqlcmd_b_with_exit_1(
    backend: str, instance_location: str, tmp_path: Path
) -> None:
    """sqlcmd -b: the first failing batch ends the run, exit status 1; without -b every batch
    runs and the status is 0 (sqlcmd-utility.md)."""
    script = tmp_path / "s.sql"
    script.write_text("PRINT 'one'\nGO\nSELECT * FROM no_such_queue\nGO\nPRINT 'three'\nGO\n")
    code, out = sqlcmd("-S", instance_location, "-b", "-i", str(script))
    assert code == 1
    assert out == (
        "one\nMsg 208, Level 16, State 1, Server instance, Line 1\n"
        "Invalid object name 'no_such_queue'.\n"
    )
    code, out = sqlcmd("-S", instance_location, "-i", str(script))
    assert code == 0 and out.endswith("three\n")
