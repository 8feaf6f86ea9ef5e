"""Microsoft's single-database tutorial ("Completing a Conversation in a Single Database") as
written: its DDL through ``broker.execute_ddl`` and ``servicebroker ddl``, its conversation
through the Python API, and the command line's ``ddl`` command (docs/ddl.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from servicebroker import Broker, CatalogError
from servicebroker.cli import main

from .test_ddl import CONTRACT, DATA, INITIATOR, LESSON_1, REPLY, REQUEST, TARGET, user_queues

# -- Microsoft's single-database tutorial ------------------------------------------------


def lesson_2_dialog(broker: Broker) -> None:
    """Lesson 2's three batches through the Python API: BEGIN DIALOG and SEND the request,
    RECEIVE it and SEND the reply and END CONVERSATION, RECEIVE the reply and END."""
    with broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(handle, REQUEST, "<RequestMsg>Message for Target service.</RequestMsg>")
    with broker.transaction() as tx:
        (request,) = tx.receive("TargetQueue1DB", top=1)
        assert request.message_type_name == REQUEST
        assert request.message_body == b"<RequestMsg>Message for Target service.</RequestMsg>"
        tx.send(
            request.conversation_handle,
            REPLY,
            "<ReplyMsg>Message for Initiator service.</ReplyMsg>",
        )
        tx.end_conversation(request.conversation_handle)
    with broker.transaction() as tx:
        reply = tx.receive("InitiatorQueue1DB", top=1)
        assert [(m.message_type_name, m.message_body) for m in reply] == [
            (REPLY, b"<ReplyMsg>Message for Initiator service.</ReplyMsg>")
        ]
        tx.end_conversation(reply[0].conversation_handle)


def test_the_tutorial_lesson_1_ddl_runs_as_written(broker: Broker) -> None:
    # Lesson 1: Creating the Conversation Objects
    # (docs/database-engine/service-broker/lesson-1-creating-the-conversation-objects.md):
    # "In this lesson, you will learn to build all the objects that enable a database to
    # support a conversation in the database." USE and GO do nothing; the other 8 statements run.
    assert broker.execute_ddl(LESSON_1) == 8
    cat = broker.catalog
    assert cat.message_type(REQUEST).validation == "WELL_FORMED_XML"
    assert cat.message_type(REPLY).validation == "WELL_FORMED_XML"
    contract = cat.contract(CONTRACT)
    assert {cat.message_types_by_id[i].name: who for i, who in contract.sent_by.items()} == {
        REQUEST: "INITIATOR",
        REPLY: "TARGET",
    }
    assert cat.service(TARGET).contract_ids == {contract.service_contract_id}
    assert cat.service(INITIATOR).contract_ids == frozenset()
    assert cat.queue("TargetQueue1DB").status and cat.queue("InitiatorQueue1DB").status
    # Lesson 2 (lesson-2-beginning-a-conversation-and-transmitting-messages.md): "In this
    # lesson, you will learn to start a conversation, complete a simple request-reply message
    # cycle, and then end the conversation."
    lesson_2_dialog(broker)
    assert broker.views.conversation_endpoints() == [] or all(
        e.state == "CD" for e in broker.views.conversation_endpoints()
    )
    # Lesson 3 (lesson-3-dropping-the-conversation-objects.md), its DROP statements
    assert broker.execute_ddl((DATA / "tutorial_lesson3.sql").read_text(encoding="utf-8")) == 7
    assert user_queues(broker) == set()
    assert not {TARGET, INITIATOR} & set(broker.catalog.services)


def test_the_tutorial_batches_that_are_not_ddl_are_refused_and_nothing_runs(
    broker: Broker,
) -> None:
    # Lesson 2's batch starts with DECLARE: T-SQL variables and control flow are not DDL; the
    # conversation statements run through the Python API (lesson_2_dialog above)
    lesson_2 = (DATA / "tsql" / "single_database_lesson2.sql").read_text(encoding="utf-8")
    with pytest.raises(
        CatalogError,
        match=r"line 8, column 5: not a Service Broker DDL statement: 'DECLARE @InitDlgHandle",
    ):
        broker.execute_ddl(lesson_2)
    # Lesson 3 as written guards each DROP with IF EXISTS (SELECT … FROM sys.services …)
    with pytest.raises(CatalogError, match=r"line 2, column 1: not a Service Broker DDL"):
        broker.execute_ddl(
            "USE AdventureWorks2008R2;\nIF EXISTS (SELECT * FROM sys.services\n"
            "WHERE name = N'//AWDB/1DBSample/TargetService')\n"
            "DROP SERVICE [//AWDB/1DBSample/TargetService];"
        )
    # a script that fails to parse runs nothing, not even the statements before the error
    with pytest.raises(CatalogError, match="line 2"):
        broker.execute_ddl("CREATE QUEUE q1;\nSEND ON CONVERSATION @h (N'x');")
    assert "q1" not in broker.catalog.queues


def test_servicebroker_ddl_builds_the_tutorial_catalog(url: str) -> None:
    runner = CliRunner()
    ran = runner.invoke(main, ["ddl", str(DATA / "tutorial_lesson1.sql"), "--url", url])
    assert ran.exit_code == 0, ran.output
    assert ran.output == "8 statements ran\n"
    sent = runner.invoke(
        main,
        [
            "send",
            "--url",
            url,
            "--from-service",
            INITIATOR,
            "--to-service",
            TARGET,
            "--contract",
            CONTRACT,
            "--message-type",
            REQUEST,
            "--body",
            "<RequestMsg>Message for Target service.</RequestMsg>",
        ],
    )
    assert sent.exit_code == 0, sent.output
    got = runner.invoke(main, ["receive", "TargetQueue1DB", "--url", url, "--json"])
    assert got.exit_code == 0, got.output
    (row,) = [json.loads(line) for line in got.output.splitlines()]
    assert (row["message_type_name"], row["message_body"]) == (
        REQUEST,
        "<RequestMsg>Message for Target service.</RequestMsg>",
    )


def test_servicebroker_ddl_reads_stdin_and_fails_in_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "ddl.db")
    runner = CliRunner()
    ok = runner.invoke(main, ["ddl", "-", "--url", db], input="CREATE QUEUE q\nGO\n")
    assert (ok.exit_code, ok.output) == (0, "1 statement ran\n")
    again = runner.invoke(main, ["ddl", "-", "--url", db], input="CREATE QUEUE q2\nCREATE QUEUE q")
    assert again.exit_code == 1
    assert again.output.count("\n") == 1
    assert "Error: CREATE QUEUE at line 2, column 1 (CREATE QUEUE q) failed: queue 'q'" in (
        again.output
    )
    assert "(1 statement(s) before it ran)" in again.output
    bad = runner.invoke(main, ["ddl", "-", "--url", db], input=b"CREATE QUEUE \xff\n")
    assert bad.exit_code == 1 and "is not UTF-8" in bad.output and "Traceback" not in bad.output
    # SQL Server Management Studio's "Unicode" files: UTF-16 with a byte order mark
    utf16 = runner.invoke(
        main, ["ddl", "-", "--url", db], input="CREATE QUEUE [ü]".encode("utf-16")
    )
    assert utf16.exit_code == 0, utf16.output
    with Broker.open(db) as b:
        assert {"q", "q2", "ü"} <= set(b.catalog.queues)


def test_servicebroker_ddl_as_a_process_prints_no_traceback(tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("CREATE TABLE t (a int);\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "servicebroker.cli", "ddl", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "line 1, column 1: not a Service Broker DDL statement: CREATE TABLE" in done.stderr
