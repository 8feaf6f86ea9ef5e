"""Cursors in T-SQL (MicrosoftDocs/sql-docs, docs/t-sql/language-elements/
declare-cursor-transact-sql.md, open-transact-sql.md, fetch-transact-sql.md,
close-transact-sql.md, deallocate-transact-sql.md, docs/t-sql/functions/
fetch-status-transact-sql.md and cursor-status-transact-sql.md): the maintenance loop over
sys.conversation_endpoints ending each conversation WITH CLEANUP, scrolling, and SQL Server's
errors for misuse. Each test runs on a folder instance and on a PostgreSQL one.
"""

from __future__ import annotations

import pytest

from servicebroker import Instance, TSqlError

SETUP = """
CREATE QUEUE iq; CREATE QUEUE tq;
CREATE SERVICE [//I] ON QUEUE iq;
CREATE SERVICE [//T] ON QUEUE tq ([DEFAULT]);
"""


@pytest.fixture
def db(instance: Instance) -> Instance:
    instance.execute("CREATE DATABASE d")
    instance.execute(SETUP, database="d")
    return instance


def test_the_maintenance_loop_ends_every_conversation_with_cleanup(db: Instance) -> None:
    db.execute(
        "DECLARE @h UNIQUEIDENTIFIER, @i INT = 0;\nWHILE @i < 3\nBEGIN\n"
        "  BEGIN DIALOG @h FROM SERVICE [//I] TO SERVICE '//T' WITH ENCRYPTION = OFF;\n"
        "  SEND ON CONVERSATION @h (0x01);\n  SET @i += 1;\nEND",
        database="d",
    )
    results = db.execute(
        """
        SET NOCOUNT ON;
        DECLARE @handle UNIQUEIDENTIFIER, @ended INT = 0;
        DECLARE endpoints CURSOR LOCAL FAST_FORWARD FOR
            SELECT conversation_handle FROM sys.conversation_endpoints;
        OPEN endpoints;
        FETCH NEXT FROM endpoints INTO @handle;
        WHILE @@FETCH_STATUS = 0
        BEGIN
            END CONVERSATION @handle WITH CLEANUP;
            SET @ended += 1;
            FETCH NEXT FROM endpoints INTO @handle;
        END
        SELECT @@FETCH_STATUS AS fetch_status, CURSOR_STATUS('local', 'endpoints') AS open_;
        CLOSE endpoints;
        SELECT CURSOR_STATUS('local', 'endpoints') AS closed, @ended AS ended;
        DEALLOCATE endpoints;
        SELECT CURSOR_STATUS('local', 'endpoints') AS gone;
        """,
        database="d",
    )
    assert [r.values for r in results.result_sets] == [[[-1, 1]], [[-1, 6]], [[-3]]]
    (left,) = db.execute(
        "SELECT COUNT(*) FROM sys.conversation_endpoints", database="d"
    ).result_sets
    assert left.values == [[0]]
    (queued,) = db.execute("SELECT COUNT(*) FROM tq", database="d").result_sets
    assert queued.values == [[0]]


def test_a_scroll_cursor_over_a_table_variable(db: Instance) -> None:
    results = db.execute(
        """
        DECLARE @t TABLE (n INT);
        INSERT @t VALUES (1), (2), (3), (4);
        DECLARE @n INT;
        DECLARE c SCROLL CURSOR FOR SELECT n FROM @t ORDER BY n;
        OPEN c;
        DELETE FROM @t;  -- STATIC: the rows were read at OPEN
        SELECT @@CURSOR_ROWS AS rows_;
        FETCH LAST FROM c INTO @n; PRINT @n;
        FETCH PRIOR FROM c INTO @n; PRINT @n;
        FETCH ABSOLUTE 1 FROM c INTO @n; PRINT @n;
        FETCH RELATIVE 2 FROM c INTO @n; PRINT @n;
        FETCH ABSOLUTE -1 FROM c INTO @n; PRINT @n;
        FETCH NEXT FROM c INTO @n; PRINT @@FETCH_STATUS;
        FETCH FIRST FROM c;
        CLOSE c; DEALLOCATE c;
        """,
        database="d",
    )
    assert results.messages == ["4", "3", "1", "3", "4", "-1"]
    rows, fetched = results.result_sets
    assert rows.values == [[4]] and (fetched.names, fetched.values) == (["n"], [[1]])


def test_a_global_cursor_outlives_its_batch_a_local_one_does_not(db: Instance) -> None:
    results = db.execute(
        "DECLARE g CURSOR FOR SELECT name FROM sys.databases WHERE name = 'd';\n"
        "DECLARE l CURSOR LOCAL FOR SELECT 1;\nOPEN g;\nGO\n"
        "SELECT CURSOR_STATUS('global', 'g') AS g, CURSOR_STATUS('local', 'l') AS l;\n"
        "FETCH NEXT FROM g;\nCLOSE g;\nDEALLOCATE g;",
        database="d",
    )
    statuses, row = results.result_sets
    assert statuses.values == [[1, -3]] and row.values == [["d"]]


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("FETCH NEXT FROM nope;", 16916),
        ("DECLARE c CURSOR LOCAL FOR SELECT 1; FETCH NEXT FROM c;", 16917),
        ("DECLARE c CURSOR LOCAL FOR SELECT 1; OPEN c; OPEN c;", 16905),
        ("DECLARE c CURSOR LOCAL FOR SELECT 1; DECLARE c CURSOR LOCAL FOR SELECT 2;", 16915),
        (
            "DECLARE @a INT; DECLARE c CURSOR LOCAL FOR SELECT 1, 2; OPEN c;"
            " FETCH NEXT FROM c INTO @a;",
            16924,
        ),
        ("DECLARE c CURSOR LOCAL FORWARD_ONLY FOR SELECT 1; OPEN c; FETCH LAST FROM c;", 16911),
        ("DECLARE c CURSOR LOCAL FOR SELECT 1; CLOSE c;", 16917),
    ],
)
def test_misuse_is_sql_servers_error(db: Instance, text: str, number: int) -> None:
    with pytest.raises(TSqlError) as caught:
        db.execute(text, database="d")
    assert caught.value.number == number
