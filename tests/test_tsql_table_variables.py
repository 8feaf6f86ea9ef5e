"""Table variables in T-SQL (MicrosoftDocs/sql-docs, docs/t-sql/language-elements/
declare-local-variable-transact-sql.md, the table form, and docs/t-sql/data-types/
table-transact-sql.md: batch scope, "not affected by transaction rollbacks"), RECEIVE … INTO a
table variable (docs/t-sql/statements/receive-transact-sql.md, INTO table_variable), and SAVE
TRANSACTION / ROLLBACK TRANSACTION savepoint_name (docs/t-sql/language-elements/
save-transaction-transact-sql.md, rollback-transaction-transact-sql.md). Each test runs on a
folder instance and on a PostgreSQL one.
"""

from __future__ import annotations

import pytest

from servicebroker import Instance, TSqlError

SETUP = """
CREATE MESSAGE TYPE Req VALIDATION = NONE;
CREATE CONTRACT C (Req SENT BY INITIATOR);
CREATE QUEUE iq; CREATE QUEUE tq;
CREATE SERVICE [//I] ON QUEUE iq;
CREATE SERVICE [//T] ON QUEUE tq (C);
CREATE TABLE audit (n INT);
"""


@pytest.fixture
def db(instance: Instance) -> Instance:
    instance.execute("CREATE DATABASE d")
    instance.execute(SETUP, database="d")
    return instance


def values(instance: Instance, text: str) -> list[list[object]]:
    results = instance.execute(text, database="d")
    return [row for r in results.result_sets for row in r.values]


def test_declare_insert_update_delete_select(db: Instance) -> None:
    results = db.execute(
        """
        DECLARE @t TABLE (id INT IDENTITY(10, 5) PRIMARY KEY, n NVARCHAR(10) NOT NULL
                          DEFAULT N'x', v INT);
        INSERT @t (v) VALUES (1), (2);
        INSERT INTO @t (n, v) SELECT name, 3 FROM sys.databases WHERE name = 'd';
        UPDATE @t SET v = v * 10, n = n + N'!' WHERE id > 10;
        SELECT @@ROWCOUNT AS updated;
        DELETE FROM @t WHERE v = 1;
        SELECT a.id, a.n, a.v FROM @t AS a ORDER BY a.id DESC;
        SELECT COUNT(*) AS c, SUM(v) AS s FROM @t WHERE EXISTS (SELECT 1 FROM @t WHERE v = 30);
        """,
        database="d",
    )
    updated, rows, totals = results.result_sets
    assert updated.values == [[2]]
    assert rows.names == ["id", "n", "v"] and rows.values == [[20, "d!", 30], [15, "x!", 20]]
    assert totals.values == [[2, 50]]
    assert results.row_counts == [2, 1, 2, 1, 1, 2, 1]


def test_rollback_does_not_undo_a_table_variable_and_the_batch_is_its_scope(
    db: Instance,
) -> None:
    assert values(
        db,
        """
        DECLARE @t TABLE (n INT);
        BEGIN TRAN;
        INSERT @t VALUES (1);
        INSERT audit VALUES (1);
        ROLLBACK;
        SELECT (SELECT COUNT(*) FROM @t) AS kept, (SELECT COUNT(*) FROM audit) AS undone;
        """,
    ) == [[1, 0]]
    with pytest.raises(TSqlError) as caught:
        db.execute("DECLARE @t TABLE (n INT)\nGO\nSELECT * FROM @t", database="d")
    assert (caught.value.number, caught.value.message) == (
        1087,
        'Must declare the table variable "@t".',
    )


@pytest.mark.parametrize(
    ("statement", "number"),
    [
        ("INSERT @t (id) VALUES (NULL)", 515),
        ("INSERT @t (id, s) VALUES (1, 'x'), (1, 'y')", 2627),
        ("INSERT @t (id, s) VALUES (2, 'far too long')", 8152),
        ("INSERT @t (id, nope) VALUES (3, 1)", 207),
        ("INSERT @t VALUES (4)", 213),
        ("INSERT @t (id, s) VALUES (5)", 109),
        ("INSERT @t EXEC some_procedure", 2812),
        ("UPDATE @t SET id = NULL", 515),
    ],
)
def test_what_sql_server_refuses_is_refused_and_nothing_changes(
    db: Instance, statement: str, number: int
) -> None:
    with pytest.raises(TSqlError) as caught:
        db.execute(
            "DECLARE @t TABLE (id INT PRIMARY KEY, s VARCHAR(3));\n"
            "INSERT @t VALUES (9, 'ok');\n"
            f"{statement};\n"
            "SELECT id, s FROM @t;",
            database="d",
        )
    assert caught.value.number == number
    shown = caught.value.results.result_sets
    assert [r.values for r in shown] in ([[[9, "ok"]]], [])


def test_insert_exec_takes_the_rows_of_every_result_set(db: Instance) -> None:
    """INSERT … EXEC (insert-transact-sql.md, execute_statement): the rows of each result set
    the procedure (or sp_executesql) returns go into the table variable or the table, not to
    the client; a column count that differs is Msg 213, an INSERT … EXEC inside one Msg 8164."""
    db.execute(
        "CREATE PROCEDURE two AS BEGIN SELECT 1 AS a, 'x' AS b; SELECT 2, 'y'; END\nGO\n"
        "CREATE PROCEDURE nested AS BEGIN\n"
        "  DECLARE @t TABLE (a INT, b VARCHAR(5)); INSERT INTO @t EXEC two; END",
        database="d",
    )
    results = db.execute(
        "DECLARE @t TABLE (a INT, b VARCHAR(5));\n"
        "INSERT INTO @t EXEC two;\n"
        "INSERT @t (b, a) EXEC sp_executesql N'SELECT ''z'', @n', N'@n INT', @n = 3;\n"
        "SELECT a, b FROM @t ORDER BY a;\n"
        "CREATE TABLE kept (id INT IDENTITY(1,1), a INT, b VARCHAR(5));\n"
        "INSERT INTO kept EXEC two;\n"
        "SELECT id, a, b FROM kept;",
        database="d",
    )
    # each inner SELECT prints its count, then the INSERT its own
    assert results.row_counts == [1, 1, 2, 1, 1, 3, 1, 1, 2, 2]
    rows, kept = results.result_sets
    assert rows.values == [[1, "x"], [2, "y"], [3, "z"]]
    assert kept.values == [[1, 1, "x"], [2, 2, "y"]]
    for text, number in (
        ("DECLARE @w TABLE (a INT); INSERT INTO @w EXEC two", 213),
        ("DECLARE @u TABLE (a INT); INSERT INTO @u EXEC nested", 8164),
    ):
        with pytest.raises(TSqlError) as caught:
            db.execute(text, database="d")
        assert caught.value.number == number, text


def test_receive_into_a_table_variable_then_loop_over_it(db: Instance) -> None:
    """The activation-procedure pattern: RECEIVE … INTO @t, then a loop over @t."""
    db.execute(
        """
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE [//I] TO SERVICE '//T' ON CONTRACT C WITH ENCRYPTION = OFF;
        SEND ON CONVERSATION @h MESSAGE TYPE Req (CAST(N'one' AS VARBINARY(MAX)));
        SEND ON CONVERSATION @h MESSAGE TYPE Req (CAST(N'two' AS VARBINARY(MAX)));
        """,
        database="d",
    )
    results = db.execute(
        """
        DECLARE @msgs TABLE (seq BIGINT, type_name SYSNAME, body VARBINARY(MAX));
        WAITFOR (RECEIVE message_sequence_number, message_type_name, message_body
                 FROM tq INTO @msgs), TIMEOUT 1000;
        PRINT CONCAT('received ', @@ROWCOUNT);
        DECLARE @seq BIGINT = -1;
        WHILE EXISTS (SELECT 1 FROM @msgs WHERE seq > @seq)
        BEGIN
            SELECT TOP (1) @seq = seq FROM @msgs WHERE seq > @seq ORDER BY seq;
            SELECT type_name, CAST(body AS NVARCHAR(10)) AS text FROM @msgs WHERE seq = @seq;
        END
        """,
        database="d",
    )
    assert results.messages == ["received 2"]
    assert [r.values for r in results.result_sets] == [[["Req", "one"]], [["Req", "two"]]]
    # the rows RECEIVE put into @msgs are counted as an INSERT's: (2 rows affected) first
    assert results.row_counts[0] == 2
    assert values(db, "SELECT COUNT(*) FROM tq") == [[0]]


def test_receive_into_a_table_of_other_shape_is_refused_and_keeps_the_messages(
    db: Instance,
) -> None:
    db.execute(
        "DECLARE @h UNIQUEIDENTIFIER;\n"
        "BEGIN DIALOG @h FROM SERVICE [//I] TO SERVICE '//T' ON CONTRACT C"
        " WITH ENCRYPTION = OFF;\nSEND ON CONVERSATION @h MESSAGE TYPE Req (0x01);",
        database="d",
    )
    with pytest.raises(TSqlError) as caught:
        db.execute(
            "DECLARE @t TABLE (body VARBINARY(MAX));\n"
            "RECEIVE message_type_name, message_body FROM tq INTO @t;",
            database="d",
        )
    assert caught.value.number == 213
    assert values(db, "SELECT COUNT(*) FROM tq") == [[1]]


def test_save_tran_and_rollback_to_the_savepoint(db: Instance) -> None:
    """The work after the savepoint is undone — a SEND, a RECEIVE (its message back on the
    queue), a row of the application's table — and @@TRANCOUNT stays 1."""
    db.execute(
        "DECLARE @h UNIQUEIDENTIFIER;\n"
        "BEGIN DIALOG @h FROM SERVICE [//I] TO SERVICE '//T' ON CONTRACT C"
        " WITH ENCRYPTION = OFF;\nSEND ON CONVERSATION @h MESSAGE TYPE Req (0x01);",
        database="d",
    )
    results = db.execute(
        """
        DECLARE @h UNIQUEIDENTIFIER = (SELECT conversation_handle FROM sys.conversation_endpoints
                                       WHERE is_initiator = 1);
        DECLARE @name NVARCHAR(40) = N'step';
        BEGIN TRAN outer_tran;
        INSERT audit VALUES (1);
        SAVE TRANSACTION @name;
        INSERT audit VALUES (2);
        SEND ON CONVERSATION @h MESSAGE TYPE Req (0x02);
        RECEIVE message_body FROM tq;
        ROLLBACK TRAN step;
        SELECT @@TRANCOUNT AS trancount, XACT_STATE() AS state;
        RECEIVE message_body FROM tq;
        COMMIT;
        """,
        database="d",
    )
    first, counts, again = results.result_sets
    assert first.values == [[b"\x01"]] and again.values == [[b"\x01"]]
    assert counts.values == [[1, 1]]
    assert values(db, "SELECT n FROM audit") == [[1]]
    assert values(db, "SELECT COUNT(*) FROM tq") == [[0]]  # neither 0x02 nor 0x01 is left


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("SAVE TRAN a;", 628),
        ("BEGIN TRAN; SAVE TRAN a; ROLLBACK TRAN b;", 6401),
        ("BEGIN TRAN t1; SAVE TRAN a; ROLLBACK TRAN a; ROLLBACK TRAN t1; ROLLBACK;", 3903),
    ],
)
def test_savepoint_errors(db: Instance, text: str, number: int) -> None:
    with pytest.raises(TSqlError) as caught:
        db.execute(text + "\nIF @@TRANCOUNT > 0 ROLLBACK;", database="d")
    assert caught.value.number == number
