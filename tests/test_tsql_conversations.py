"""The conversation statements in T-SQL (docs/tsql.md): BEGIN DIALOG, SEND, RECEIVE in its forms,
GET CONVERSATION GROUP, END CONVERSATION (WITH ERROR, WITH CLEANUP), MOVE CONVERSATION, and the
errors SQL Server raises for them, by number and text (begin-dialog-conversation-transact-sql.md,
send-transact-sql.md, receive-transact-sql.md, end-conversation-transact-sql.md,
move-conversation-transact-sql.md). Each test runs on a folder instance and a PostgreSQL one.
"""

from __future__ import annotations

import uuid

import pytest

from servicebroker import Instance, TSqlError

SETUP = """
CREATE MESSAGE TYPE [//t/Req] VALIDATION = NONE;
CREATE MESSAGE TYPE [//t/Resp] VALIDATION = NONE;
CREATE CONTRACT [//t/C] ([//t/Req] SENT BY INITIATOR, [//t/Resp] SENT BY TARGET);
CREATE QUEUE iq;
CREATE QUEUE tq;
CREATE SERVICE [//t/I] ON QUEUE iq;
CREATE SERVICE [//t/T] ON QUEUE tq ([//t/C]);
"""

BEGIN = """
DECLARE @h UNIQUEIDENTIFIER;
BEGIN DIALOG CONVERSATION @h FROM SERVICE [//t/I] TO SERVICE '//t/T' ON CONTRACT [//t/C]
    WITH ENCRYPTION = OFF;
"""


@pytest.fixture
def ready(instance: Instance) -> Instance:
    instance.execute(SETUP)
    return instance


def test_send_then_receive_returns_the_receive_columns(ready: Instance) -> None:
    ready.execute(BEGIN + "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Req] (N'hello');")
    results = ready.execute("RECEIVE TOP (1) * FROM tq")
    (rows,) = results.result_sets
    assert rows.names[:6] == [
        "status",
        "priority",
        "queuing_order",
        "conversation_group_id",
        "conversation_handle",
        "message_sequence_number",
    ]
    row = dict(zip(rows.names, rows.values[0], strict=True))
    assert row["message_type_name"] == "//t/Req"
    assert row["service_name"] == "//t/T"
    assert row["message_body"] == "hello".encode("utf-16-le")  # an NVARCHAR body is UTF-16LE
    assert results.row_counts == [1]
    assert ready.execute("RECEIVE * FROM tq").row_counts == [0]  # taken once


def test_receive_into_variables_keeps_them_when_no_row_comes(ready: Instance) -> None:
    results = ready.execute(
        "DECLARE @body NVARCHAR(100) = N'unchanged', @type SYSNAME;\n"
        "RECEIVE TOP (1) @body = message_body, @type = message_type_name FROM tq;\n"
        "SELECT @body AS body, @@ROWCOUNT AS n;"
    )
    assert results.result_sets[0].values == [["unchanged", 0]]


def test_a_varchar_body_is_the_code_page_and_cast_reads_it_back(ready: Instance) -> None:
    results = ready.execute(
        BEGIN + "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Req] ('café');\n"
        "DECLARE @b VARBINARY(MAX);\n"
        "RECEIVE @b = message_body FROM tq;\n"
        "SELECT CAST(@b AS VARCHAR(10)) AS text, DATALENGTH(@b) AS bytes;"
    )
    assert results.result_sets[0].values == [["café", 4]]


def test_receive_where_names_the_conversation(ready: Instance) -> None:
    results = ready.execute(
        BEGIN + "DECLARE @other UNIQUEIDENTIFIER;\n"
        "BEGIN DIALOG @other FROM SERVICE [//t/I] TO SERVICE '//t/T' ON CONTRACT [//t/C];\n"
        "SEND ON CONVERSATION (@h, @other) MESSAGE TYPE [//t/Req] (0x01);\n"
        "DECLARE @target UNIQUEIDENTIFIER;\n"
        "SELECT @target = conversation_handle FROM tq WHERE message_sequence_number = 0\n"
        "    AND conversation_group_id = conversation_group_id;\n"
        "RECEIVE conversation_handle FROM tq WHERE conversation_handle = @target;\n"
        "SELECT COUNT(*) AS left_on_queue FROM tq;"
    )
    received, left = results.result_sets
    assert len(received.values) == 1
    assert left.values == [[1]]


def test_get_conversation_group_then_receive_that_group(ready: Instance) -> None:
    results = ready.execute(
        BEGIN + "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Req] (0x02);\n"
        "DECLARE @g UNIQUEIDENTIFIER;\n"
        "BEGIN TRANSACTION;\n"
        "GET CONVERSATION GROUP @g FROM tq;\n"
        "RECEIVE message_body FROM tq WHERE conversation_group_id = @g;\n"
        "COMMIT;\n"
        "SELECT CASE WHEN @g IS NULL THEN 0 ELSE 1 END AS got_group;"
    )
    body, got = results.result_sets
    assert body.values == [[b"\x02"]]
    assert got.values == [[1]]


def test_end_conversation_with_error_sends_the_error_message(ready: Instance) -> None:
    results = ready.execute(
        BEGIN + "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Req] (0x03);\n"
        "DECLARE @t UNIQUEIDENTIFIER;\n"
        "RECEIVE TOP (1) @t = conversation_handle FROM tq;\n"
        "END CONVERSATION @t WITH ERROR = 31472 DESCRIPTION = N'the order was refused';\n"
        "RECEIVE message_type_name, CAST(message_body AS XML) AS body FROM iq;"
    )
    (error,) = results.result_sets
    ((type_name, body),) = error.values
    assert type_name == "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    assert "<Code>31472</Code>" in body and "the order was refused" in body


def test_send_on_an_unknown_handle_is_msg_8426(ready: Instance) -> None:
    handle = uuid.uuid4()
    with pytest.raises(TSqlError) as caught:
        ready.execute(f"SEND ON CONVERSATION '{handle}' (0x00)")
    error = caught.value
    assert (error.number, error.severity, error.line) == (8426, 16, 1)
    assert error.message == f'The conversation handle "{str(handle).upper()}" is not found.'


def test_send_after_end_conversation_is_msg_8429(ready: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        ready.execute(
            BEGIN + "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Req] (0x00);\n"
            "END CONVERSATION @h;\n"
            "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Req] (0x00);"
        )
    assert caught.value.number == 8429
    assert caught.value.line == 7
    assert caught.value.message.startswith(
        "The conversation endpoint is not in a valid state for SEND. The current endpoint "
        "state is '"
    )


def test_a_message_type_the_initiator_may_not_send_is_msg_8432(ready: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        ready.execute(BEGIN + "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Resp] (0x00);")
    assert caught.value.number == 8432
    assert "'//t/Resp' is marked SENT BY TARGET" in caught.value.message


def test_an_unknown_from_service_is_msg_8423(ready: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        ready.execute(
            "DECLARE @h UNIQUEIDENTIFIER;\n"
            "BEGIN DIALOG @h FROM SERVICE [//t/Nobody] TO SERVICE '//t/T' ON CONTRACT [//t/C];"
        )
    assert (caught.value.number, caught.value.message) == (
        8423,
        'The service "//t/Nobody" is not found.',
    )


def test_a_statement_error_lets_the_batch_go_on(ready: Instance) -> None:
    """An error that ends its statement only: the batch's next statements run and @@ERROR holds
    the number (the client still gets the error)."""
    with pytest.raises(TSqlError) as caught:
        ready.execute(f"SEND ON CONVERSATION '{uuid.uuid4()}' (0x00);\nSELECT @@ERROR AS error;")
    results = caught.value.results  # type: ignore[attr-defined]
    assert results.result_sets[0].values == [[8426]]


def test_try_catch_sees_the_broker_error(ready: Instance) -> None:
    results = ready.execute(
        "BEGIN TRY\n"
        f"    SEND ON CONVERSATION '{uuid.uuid4()}' (0x00);\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        "    SELECT ERROR_NUMBER() AS number, ERROR_SEVERITY() AS severity, ERROR_LINE() AS line;\n"
        "END CATCH"
    )
    assert results.result_sets[0].values == [[8426, 16, 2]]


def test_rollback_puts_the_received_message_back(ready: Instance) -> None:
    results = ready.execute(
        BEGIN + "SEND ON CONVERSATION @h MESSAGE TYPE [//t/Req] (0x04);\n"
        "BEGIN TRANSACTION;\n"
        "RECEIVE message_body FROM tq;\n"
        "SELECT @@TRANCOUNT AS depth;\n"
        "ROLLBACK TRANSACTION;\n"
        "SELECT COUNT(*) AS on_queue, @@TRANCOUNT AS depth FROM tq;"
    )
    received, depth, after = results.result_sets
    assert received.values == [[b"\x04"]]
    assert depth.values == [[1]]
    assert after.values == [[1, 0]]


def test_ddl_errors_are_sql_servers(ready: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        ready.execute("CREATE QUEUE tq")
    assert (caught.value.number, caught.value.message) == (
        2714,
        "There is already an object named 'tq' in the database.",
    )
    with pytest.raises(TSqlError) as caught:
        ready.execute("DROP QUEUE no_such_queue")
    assert (caught.value.number, caught.value.message) == (
        15151,
        "Cannot drop the queue 'no_such_queue', because it does not exist or you do not have "
        "permission.",
    )


def test_an_unknown_queue_is_msg_208_and_another_databases_queue_is_refused(
    ready: Instance,
) -> None:
    for text in (
        "RECEIVE * FROM no_such_queue",
        "DECLARE @g UNIQUEIDENTIFIER; GET CONVERSATION GROUP @g FROM no_such_queue",
    ):
        with pytest.raises(TSqlError) as caught:
            ready.execute(text)
        assert (caught.value.number, caught.value.message) == (
            208,
            "Invalid object name 'no_such_queue'.",
        ), text
    ready.execute("CREATE DATABASE Other")
    with pytest.raises(TSqlError) as caught:
        ready.execute(
            "DECLARE @g UNIQUEIDENTIFIER; GET CONVERSATION GROUP @g FROM Other.dbo.tq",
        )
    assert caught.value.number == 40000
    assert "another database" in caught.value.message


def test_dialog_options_with_or_without_commas(ready: Instance) -> None:
    """begin-dialog-conversation-transact-sql.md writes its options with or without commas
    between them (its example E: RELATED_CONVERSATION_GROUP = @g LIFETIME = 600)."""
    results = ready.execute(
        "DECLARE @h UNIQUEIDENTIFIER, @g UNIQUEIDENTIFIER = NEWID();\n"
        "BEGIN DIALOG @h FROM SERVICE [//t/I] TO SERVICE '//t/T' ON CONTRACT [//t/C]\n"
        "    WITH RELATED_CONVERSATION_GROUP = @g LIFETIME = 600, ENCRYPTION = OFF;\n"
        "SELECT COUNT(*) AS n FROM sys.conversation_endpoints WHERE conversation_group_id = @g;"
    )
    assert results.result_sets[0].values == [[1]]


def test_a_table_variable_is_declared(ready: Instance) -> None:
    """Table variables run now (tests/test_tsql_table_variables.py)."""
    results = ready.execute("DECLARE @t TABLE (a INT, b NVARCHAR(10));\nPRINT 'reached'")
    assert results.messages == ["reached"]
