"""The application's own tables in T-SQL (create-table-transact-sql.md, insert-transact-sql.md,
update-transact-sql.md, delete-transact-sql.md): translated to the database underneath and run
in the session's transaction, so a RECEIVE and the rows it leads to commit or roll back
together (docs/tsql.md). Each test runs on a folder instance and on a PostgreSQL one."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from servicebroker import Instance, ManualClock, TSqlError
from servicebroker.tsql.output import format_event

TABLE = """
CREATE TABLE dbo.Orders (
    id INT IDENTITY(1,1) PRIMARY KEY,
    customer NVARCHAR(50) NOT NULL,
    amount DECIMAL(10, 2),
    placed DATETIME
);
"""


def test_insert_update_delete_count_their_rows(instance: Instance) -> None:
    results = instance.execute(
        TABLE
        + "INSERT INTO dbo.Orders (customer, amount) VALUES (N'ann', 10), ('bob', 3), ('cy', 1);\n"
        "UPDATE Orders SET amount = amount * 2 WHERE amount < 5;\n"
        "SELECT @@ROWCOUNT AS updated;\n"
        "DELETE FROM Orders WHERE customer = 'cy';\n"
        "SELECT customer, amount FROM Orders ORDER BY customer;"
    )
    assert results.row_counts == [3, 2, 1, 1, 2]
    updated, rows = results.result_sets
    assert updated.values == [[2]]
    assert rows.names == ["customer", "amount"]
    assert [[c, float(a)] for c, a in rows.values] == [["ann", 10.0], ["bob", 6.0]]


def test_select_star_names_the_tables_columns_in_their_order(instance: Instance) -> None:
    """SELECT * FROM one table: its columns, named and in CREATE TABLE's order (as SQL Server's
    result set shows them), with rows or without."""
    results = instance.execute(
        TABLE + "INSERT INTO Orders (customer, amount) VALUES (N'ann', 10);\n"
        "SELECT * FROM Orders;\nSELECT * FROM dbo.Orders WHERE customer = 'nobody';"
    )
    some, none = results.result_sets
    assert some.names == none.names == ["id", "customer", "amount", "placed"]
    assert [[i, c, float(a), p] for i, c, a, p in some.values] == [[1, "ann", 10.0, None]]
    assert none.values == []


def test_a_result_set_carries_the_declared_types_and_star_lists_every_joined_table(
    instance: Instance,
) -> None:
    """A SELECT's columns have the types CREATE TABLE declared (create-table-transact-sql.md),
    not the database's: sqlcmd prints ``VARCHAR(8)`` 8 wide, BIT as 0/1, DECIMAL(10, 2) with
    its two places, DATETIME as SQL Server shows it; ``SELECT *`` over a join lists the
    columns of each table in FROM and JOIN order (select-transact-sql.md)."""
    results = instance.execute(
        TABLE + "CREATE TABLE Tags (order_id INT, tag VARCHAR(8), urgent BIT);\n"
        "INSERT INTO Orders (customer, amount, placed) VALUES (N'ann', 10, '2026-01-02T03:04:05');\n"
        "INSERT INTO Tags VALUES (1, 'gift', 1);\n"
        "SELECT tag, urgent, id + 1 AS next_id FROM Tags t JOIN Orders o ON o.id = t.order_id;\n"
        "SELECT * FROM Orders o JOIN Tags ON Tags.order_id = o.id;\n"
        "SELECT Tags.*, o.amount FROM Orders o JOIN Tags ON Tags.order_id = o.id;"
    )
    picked, star, tags = results.result_sets
    assert [str(t) for _, t in picked.columns] == ["varchar(8)", "bit", "int"]
    assert format_event(picked).splitlines() == [
        "tag      urgent next_id    ",
        "-------- ------ -----------",
        "gift          1           2",
    ]
    assert star.names == ["id", "customer", "amount", "placed", "order_id", "tag", "urgent"]
    assert [str(t) for _, t in star.columns] == [
        "int", "nvarchar(50)", "decimal", "datetime", "int", "varchar(8)", "bit",
    ]  # fmt: skip
    assert star.values == [
        [1, "ann", Decimal("10.00"), datetime(2026, 1, 2, 3, 4, 5), 1, "gift", 1]
    ]
    assert tags.names == ["order_id", "tag", "urgent", "amount"]
    amount = format_event(tags).splitlines()[2].split()[-1]
    assert amount == "10.00"


def test_insert_select_from_a_table_variable_or_a_view_and_the_identity_column(
    instance: Instance,
) -> None:
    """INSERT … SELECT reads a table variable or a catalog view as well as the application's
    tables, and INSERT without a column list gives every column but the identity one its value
    (insert-transact-sql.md); a count that does not match is Msg 213 (no column list) or
    Msg 121 (more items than the insert list), and nothing is inserted."""
    results = instance.execute(
        TABLE + "DECLARE @new TABLE (who NVARCHAR(50), amount DECIMAL(10, 2));\n"
        "INSERT INTO @new VALUES (N'ann', 1.5), (N'bob', 2);\n"
        "INSERT INTO Orders VALUES (N'cy', 3, NULL);\n"
        "INSERT INTO Orders SELECT who, amount, NULL FROM @new WHERE amount > 1.75;\n"
        "INSERT INTO Orders (customer) SELECT name FROM sys.service_queues;\n"
        "INSERT INTO Orders SELECT customer, amount, placed FROM Orders WHERE id = 1;\n"
        "SELECT id, customer, amount FROM Orders ORDER BY id;"
    )
    assert results.row_counts[:5] == [2, 1, 1, 1, 1]
    (rows,) = results.result_sets
    assert rows.values == [
        [1, "cy", Decimal("3.00")],
        [2, "bob", Decimal("2.00")],
        [3, "sys_event_notifications", None],
        [4, "cy", Decimal("3.00")],
    ]
    for text, number in (
        ("INSERT INTO Orders SELECT who FROM @new", 213),
        ("INSERT INTO Orders VALUES (N'dee')", 213),
        ("INSERT INTO Orders (customer) SELECT who, amount FROM @new", 121),
    ):
        with pytest.raises(TSqlError) as caught:
            instance.execute(
                "DECLARE @new TABLE (who NVARCHAR(50), amount INT);\n"
                "INSERT INTO @new VALUES (N'dee', 4);\n" + text
            )
        assert caught.value.number == number, text
    assert instance.execute("SELECT COUNT(*) FROM Orders").result_sets[0].values == [[4]]


def test_table_constraints_as_set_up_scripts_write_them(instance: Instance) -> None:
    """CREATE TABLE's constraints as scripts write them (create-table-transact-sql.md):
    ``CONSTRAINT pk PRIMARY KEY CLUSTERED (id)``, ``PRIMARY KEY NONCLUSTERED`` on a column,
    ``UNIQUE NONCLUSTERED (…)``, a key of two columns, an IDENTITY column that is not the key:
    each keeps its meaning (a duplicate key is Msg 2627), on either backend."""
    results = instance.execute(
        "CREATE TABLE a (id INT IDENTITY(1,1), n INT, CONSTRAINT pk_a PRIMARY KEY CLUSTERED (id));\n"
        "CREATE TABLE b (id INT NOT NULL PRIMARY KEY NONCLUSTERED, label VARCHAR(20)"
        " DEFAULT 'CLUSTERED', CONSTRAINT uq_b UNIQUE NONCLUSTERED (label));\n"
        "CREATE TABLE c (x INT, y INT, PRIMARY KEY (x, y));\n"
        "CREATE TABLE d (id INT IDENTITY(1,1), n INT);\n"
        "INSERT INTO a (n) VALUES (5), (6); INSERT INTO b (id) VALUES (1);\n"
        "INSERT INTO c VALUES (1, 2), (2, 1); INSERT INTO d (n) VALUES (7), (8);\n"
        "SELECT id, n FROM a; SELECT id, label FROM b; SELECT id, n FROM d;"
    )
    a, b, d = results.result_sets
    assert a.values == [[1, 5], [2, 6]] and d.values == [[1, 7], [2, 8]]
    assert b.values == [[1, "CLUSTERED"]]
    for duplicate in (
        "INSERT INTO c VALUES (1, 2)",
        "INSERT INTO b (id, label) VALUES (2, 'CLUSTERED')",
    ):
        with pytest.raises(TSqlError) as caught:
            instance.execute(duplicate)
        assert caught.value.number == 2627, duplicate


def test_variables_are_parameters_and_select_assigns_from_the_last_row(instance: Instance) -> None:
    results = instance.execute(
        TABLE + "DECLARE @who NVARCHAR(50) = N'ann', @n INT, @last NVARCHAR(50) = N'none';\n"
        "INSERT INTO Orders (customer, amount) VALUES (@who, 5), (@who + N'-2', 7);\n"
        "SELECT @n = COUNT(*) FROM Orders WHERE customer LIKE @who + N'%';\n"
        "SELECT @last = customer FROM Orders ORDER BY id;\n"
        "SELECT @last = customer FROM Orders WHERE customer = N'nobody';\n"  # no row: unchanged
        "SELECT @n AS n, @last AS last_one;"
    )
    assert results.result_sets[0].values == [[2, "ann-2"]]


def test_getdate_in_a_statement_reads_the_brokers_clock(
    instance: Instance, clock: ManualClock
) -> None:
    results = instance.execute(
        TABLE + "INSERT INTO Orders (customer, placed) VALUES ('ann', GETDATE());\n"
        "SELECT placed FROM Orders;"
    )
    (placed,) = results.result_sets[0].values[0]
    assert str(placed)[:19] == datetime.fromtimestamp(clock.now()).isoformat(" ")[:19]


def test_a_statement_run_again_reads_its_variables_and_the_clock_afresh(
    instance: Instance, clock: ManualClock
) -> None:
    """A statement in a loop (or a procedure run by every activation) is translated once and
    run many times: each run takes the variables' and GETDATE()'s values of that moment."""
    instance.execute(TABLE)
    instance.execute(
        "CREATE PROCEDURE Place @who NVARCHAR(50), @amount INT AS\n"
        "INSERT INTO Orders (customer, amount, placed) VALUES (@who, @amount, GETDATE());"
    )
    instance.execute(
        "DECLARE @i INT = 0;\n"
        "WHILE @i < 3 BEGIN INSERT INTO Orders (customer, amount) VALUES (N'loop', @i); "
        "SET @i += 1; END"
    )
    instance.execute("EXEC Place N'ann', 7")
    clock.advance(60)
    instance.execute("EXEC Place @who = N'bob', @amount = 9")
    rows = (
        instance.execute("SELECT customer, amount, placed FROM Orders ORDER BY id")
        .result_sets[0]
        .values
    )
    assert [[c, int(a)] for c, a, _ in rows] == [
        ["loop", 0], ["loop", 1], ["loop", 2], ["ann", 7], ["bob", 9]
    ]  # fmt: skip
    ann, bob = (datetime.fromisoformat(str(row[2])) for row in rows[3:])
    assert (bob - ann).total_seconds() == pytest.approx(60, abs=1)


def test_float_keeps_its_53_bits_and_tinyint_its_range_on_either_backend(
    instance: Instance,
) -> None:
    """T-SQL's FLOAT is float(53) and TINYINT holds 0 to 255 (float-and-real-transact-sql.md,
    int-bigint-smallint-and-tinyint-transact-sql.md): a column of each keeps what it is given,
    on SQLite and on PostgreSQL."""
    rows = (
        instance.execute(
            "CREATE TABLE Readings (f FLOAT, t TINYINT);\n"
            "INSERT INTO Readings (f, t) VALUES (0.1E0 + 1.0E0 / 3.0E0, 200);\n"
            "SELECT f, t FROM Readings;"
        )
        .result_sets[0]
        .values
    )
    assert [[float(f), int(t)] for f, t in rows] == [[0.1 + 1 / 3, 200]]


def test_exists_and_joins_read_the_tables(instance: Instance) -> None:
    results = instance.execute(
        TABLE + "CREATE TABLE Customers (name NVARCHAR(50) PRIMARY KEY, city NVARCHAR(50));\n"
        "INSERT INTO Customers VALUES ('ann', 'Oslo'), ('bob', 'Lima');\n"
        "INSERT INTO Orders (customer, amount) VALUES ('ann', 1), ('ann', 2), ('bob', 5);\n"
        "IF EXISTS (SELECT * FROM Orders WHERE amount > 4) PRINT 'a big order';\n"
        "SELECT c.city, SUM(o.amount) AS total FROM Orders o JOIN Customers c ON c.name = "
        "o.customer GROUP BY c.city ORDER BY c.city;"
    )
    assert results.messages == ["a big order"]
    assert [[c, float(t)] for c, t in results.result_sets[0].values] == [
        ["Lima", 5.0],
        ["Oslo", 3.0],
    ]


def test_a_rollback_undoes_the_rows_and_the_receive_together(instance: Instance) -> None:
    """SEND and RECEIVE commit in the same transaction as the application's data: rolled
    back, the message is on the queue again and the row is gone."""
    instance.execute(
        TABLE + "CREATE QUEUE q; CREATE SERVICE [//s] ON QUEUE q ([DEFAULT]);\n"
        "DECLARE @h UNIQUEIDENTIFIER;\n"
        "BEGIN DIALOG @h FROM SERVICE [//s] TO SERVICE '//s' WITH ENCRYPTION = OFF;\n"
        "SEND ON CONVERSATION @h (N'order');"
    )
    results = instance.execute(
        "BEGIN TRANSACTION;\n"
        "DECLARE @body NVARCHAR(100);\n"
        "RECEIVE TOP (1) @body = message_body FROM q;\n"
        "INSERT INTO Orders (customer) VALUES (@body);\n"
        "ROLLBACK;\n"
        "SELECT (SELECT COUNT(*) FROM q) AS on_queue, (SELECT COUNT(*) FROM Orders) AS orders;"
    )
    assert results.result_sets[0].values == [[1, 0]]
    results = instance.execute(
        "BEGIN TRANSACTION;\n"
        "DECLARE @body NVARCHAR(100);\n"
        "RECEIVE TOP (1) @body = message_body FROM q;\n"
        "INSERT INTO Orders (customer) VALUES (@body);\n"
        "COMMIT;\n"
        "SELECT (SELECT COUNT(*) FROM q) AS on_queue, (SELECT customer FROM Orders) AS who;"
    )
    assert results.result_sets[0].values == [[0, "order"]]


def test_what_would_translate_approximately_is_refused_by_name(instance: Instance) -> None:
    """LEN ignores trailing blanks in T-SQL and LENGTH does not: refused, never run
    approximately; the batch ends (docs/tsql.md)."""
    with pytest.raises(TSqlError) as caught:
        instance.execute(TABLE + "SELECT LEN(customer) FROM Orders;\nPRINT 'not reached'")
    assert caught.value.number == 40000
    assert "LENGTH" in caught.value.message and "not supported" in caught.value.message
    assert caught.value.results.messages == []  # type: ignore[attr-defined]


def test_a_failed_statement_ends_the_transaction_it_ran_in(instance: Instance) -> None:
    """A duplicate key fails the statement and, as the database underneath aborts the
    transaction, the session's transaction with it: @@TRANCOUNT is 0 (docs/tsql.md: a
    deliberate difference from SQL Server, which keeps it)."""
    with pytest.raises(TSqlError) as caught:
        instance.execute(
            "CREATE TABLE t (k INT PRIMARY KEY);\n"
            "BEGIN TRANSACTION;\n"
            "INSERT INTO t VALUES (1);\n"
            "INSERT INTO t VALUES (1);\n"
            "SELECT @@TRANCOUNT AS depth, (SELECT COUNT(*) FROM t) AS rows_left;"
        )
    assert (caught.value.number, caught.value.severity, caught.value.line) == (2627, 14, 4)
    assert caught.value.message.startswith("Violation of PRIMARY KEY constraint")
    assert caught.value.results.result_sets[0].values == [[0, 0]]  # type: ignore[attr-defined]
