"""DML triggers in T-SQL (create-trigger-transact-sql.md, drop-trigger-transact-sql.md, "Use the
inserted and deleted tables", sys-triggers-transact-sql.md): AFTER INSERT, UPDATE, DELETE on the
application's tables, fired by the statements the interpreter runs, in their transaction, with
the statement's rows in ``inserted`` and ``deleted`` — the common case being a trigger that
begins a dialog and SENDs. Each test runs on a folder instance and a PostgreSQL one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from servicebroker import Instance, TSqlError
from servicebroker.cli import main

SETUP = """
CREATE MESSAGE TYPE [//shop/Order] VALIDATION = WELL_FORMED_XML;
CREATE CONTRACT [//shop/C] ([//shop/Order] SENT BY INITIATOR);
CREATE QUEUE ShopQueue;
CREATE QUEUE ShippingQueue;
CREATE SERVICE [//shop/Shop] ON QUEUE ShopQueue;
CREATE SERVICE [//shop/Shipping] ON QUEUE ShippingQueue ([//shop/C]);
CREATE TABLE Orders (id INT PRIMARY KEY, item NVARCHAR(40) NOT NULL, quantity INT NOT NULL);
GO
CREATE TRIGGER dbo.trOrdersShip ON dbo.Orders AFTER INSERT
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @h UNIQUEIDENTIFIER, @body XML;
    SELECT @body = (SELECT id, item, quantity FROM inserted FOR XML RAW('order'), ROOT('orders'));
    BEGIN DIALOG CONVERSATION @h FROM SERVICE [//shop/Shop] TO SERVICE '//shop/Shipping'
        ON CONTRACT [//shop/C] WITH ENCRYPTION = OFF;
    SEND ON CONVERSATION @h MESSAGE TYPE [//shop/Order] (@body);
END
GO
"""

AUDIT = """
CREATE TABLE Stock (id INT PRIMARY KEY, item VARCHAR(20), level INT);
CREATE TABLE Audit (n INT IDENTITY(1,1) PRIMARY KEY, id INT, what VARCHAR(10),
                    old_level INT, new_level INT, rows_seen INT);
GO
CREATE TRIGGER trStock ON Stock FOR INSERT, UPDATE, DELETE
AS
    DECLARE @rows INT = @@ROWCOUNT;
    SET NOCOUNT ON;
    INSERT INTO Audit (id, what, new_level, rows_seen) SELECT id, 'inserted', level, @rows FROM inserted;
    INSERT INTO Audit (id, what, old_level, rows_seen) SELECT id, 'deleted', level, @rows FROM deleted;
    PRINT 'trancount ' + CAST(@@TRANCOUNT AS VARCHAR(5));
GO
"""


def _audit(instance: Instance) -> list[list[object]]:
    rows = instance.execute(
        "SELECT id, what, old_level, new_level, rows_seen FROM Audit ORDER BY n"
    )
    return rows.result_sets[0].values


def test_an_insert_trigger_begins_a_dialog_and_sends_with_the_rows_inserted(
    instance: Instance,
) -> None:
    instance.execute(SETUP)
    results = instance.execute(
        "INSERT INTO Orders (id, item, quantity) VALUES (1, N'widget', 3), (2, N'gadget', 1)"
    )
    assert results.row_counts == [2]  # the trigger's own counts are off (SET NOCOUNT ON)
    received = instance.execute(
        "RECEIVE CAST(message_body AS XML) AS body, message_type_name FROM ShippingQueue"
    )
    ((body, message_type),) = received.result_sets[0].values
    assert message_type == "//shop/Order"
    assert body == (
        '<orders><order id="1" item="widget" quantity="3" />'
        '<order id="2" item="gadget" quantity="1" /></orders>'
    )


def test_the_trigger_commits_and_rolls_back_with_the_statement_that_fired_it(
    instance: Instance,
) -> None:
    instance.execute(SETUP)
    instance.execute(
        "BEGIN TRAN; INSERT INTO Orders VALUES (7, N'lamp', 1); ROLLBACK;\n"
        "BEGIN TRAN; INSERT INTO Orders VALUES (8, N'desk', 2); COMMIT;"
    )
    orders = instance.execute("SELECT id FROM Orders")
    assert orders.result_sets[0].values == [[8]]
    queued = instance.execute("SELECT CAST(message_body AS XML) AS body FROM ShippingQueue")
    assert queued.result_sets[0].values == [
        ['<orders><order id="8" item="desk" quantity="2" /></orders>']
    ]


def test_inserted_and_deleted_hold_the_statements_rows(instance: Instance) -> None:
    instance.execute(AUDIT)
    results = instance.execute(
        "INSERT INTO Stock VALUES (1, 'bolt', 10), (2, 'nut', 20);\n"
        "UPDATE Stock SET level = level - 1;\n"
        "DELETE FROM Stock WHERE id = 1;\n"
        "UPDATE Stock SET level = 0 WHERE id = 99;"  # no row: AFTER triggers fire all the same
    )
    # the trigger's messages come before its statement's count, as sqlcmd shows them
    assert results.events[:2] == ["trancount 1", 2]
    assert results.row_counts == [2, 2, 1, 0]
    assert sorted(_audit(instance), key=lambda r: (r[1], r[0], str(r[2]), str(r[3]))) == sorted(
        [
            [1, "inserted", None, 10, 2],
            [2, "inserted", None, 20, 2],
            [1, "inserted", None, 9, 2],  # UPDATE: the new rows …
            [2, "inserted", None, 19, 2],
            [1, "deleted", 10, None, 2],  # … and the old ones
            [2, "deleted", 20, None, 2],
            [1, "deleted", 9, None, 1],  # DELETE
        ],
        key=lambda r: (r[1], r[0], str(r[2]), str(r[3])),
    )
    inside = instance.execute("BEGIN TRAN; INSERT INTO Stock VALUES (3, 'pin', 1); COMMIT")
    assert inside.messages == ["trancount 1"]


def test_a_rollback_in_a_trigger_undoes_the_statement_and_ends_the_batch(
    instance: Instance,
) -> None:
    instance.execute(
        "CREATE TABLE Payments (id INT PRIMARY KEY, amount INT);\nGO\n"
        "CREATE TRIGGER trNoNegative ON Payments AFTER INSERT AS\n"
        "IF EXISTS (SELECT * FROM inserted WHERE amount < 0)\n"
        "BEGIN\n"
        "    RAISERROR('A payment cannot be negative.', 16, 1);\n"
        "    ROLLBACK TRANSACTION;\n"
        "END\n"
    )
    with pytest.raises(TSqlError) as caught:
        instance.execute(
            "INSERT INTO Payments VALUES (1, 5);\n"
            "INSERT INTO Payments VALUES (2, -5);\n"
            "PRINT 'not reached';"
        )
    results = caught.value.results  # type: ignore[attr-defined]
    assert [(e.number, e.procedure) for e in results.errors] == [
        (50000, "trNoNegative"),
        (3609, None),
    ]
    assert results.errors[1].message == (
        "The transaction ended in the trigger. The batch has been aborted."
    )
    assert "not reached" not in results.messages
    assert instance.execute("SELECT id FROM Payments").result_sets[0].values == [[1]]


def test_an_error_in_a_trigger_rolls_back_and_reaches_catch(instance: Instance) -> None:
    instance.execute(
        "CREATE TABLE Items (id INT PRIMARY KEY, code VARCHAR(10));\nGO\n"
        "CREATE TRIGGER trCheck ON Items AFTER INSERT AS\n"
        "    DECLARE @n INT = (SELECT CAST(code AS INT) FROM inserted);\n"
    )
    with pytest.raises(TSqlError) as caught:
        instance.execute("INSERT INTO Items VALUES (1, 'abc'); PRINT 'not reached'")
    assert caught.value.number == 245 and caught.value.procedure == "trCheck"
    results = instance.execute(
        "BEGIN TRY\n"
        "    BEGIN TRAN;\n"
        "    INSERT INTO Items VALUES (2, 'xyz');\n"
        "    COMMIT;\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        "    SELECT ERROR_NUMBER() AS n, ERROR_PROCEDURE() AS p, XACT_STATE() AS state;\n"
        "    IF @@TRANCOUNT > 0 ROLLBACK;\n"
        "END CATCH;\n"
        "INSERT INTO Items VALUES (3, '42');"
    )
    assert results.result_sets[0].values == [[245, "trCheck", -1]]
    assert instance.execute("SELECT id FROM Items").result_sets[0].values == [[3]]


def test_nested_triggers_fire_and_a_trigger_does_not_fire_itself(instance: Instance) -> None:
    instance.execute(
        "CREATE TABLE A (id INT PRIMARY KEY, touched INT);\n"
        "CREATE TABLE B (id INT PRIMARY KEY);\nGO\n"
        "CREATE TRIGGER trA ON A AFTER INSERT, UPDATE AS\n"
        "    SET NOCOUNT ON;\n"
        "    UPDATE A SET touched = touched + 1 WHERE id IN (SELECT id FROM inserted);\n"
        "    INSERT INTO B SELECT id FROM inserted;\n"
        "GO\n"
        "CREATE TRIGGER trB ON B AFTER INSERT AS PRINT 'B got ' + CAST(@@ROWCOUNT AS VARCHAR(5));\n"
    )
    results = instance.execute("INSERT INTO A VALUES (1, 0)")
    assert results.messages == ["B got 1"]  # trA's UPDATE of A did not fire trA again
    assert instance.execute("SELECT touched FROM A").result_sets[0].values == [[1]]


def test_create_alter_drop_and_their_errors(instance: Instance) -> None:
    instance.execute(AUDIT)
    instance.execute("CREATE PROCEDURE Helper AS RETURN;")
    cases = {
        "CREATE TRIGGER trStock ON Stock AFTER INSERT AS RETURN": (
            2714,
            "There is already an object named 'trStock' in the database.",
        ),
        "CREATE TRIGGER Helper ON Stock AFTER INSERT AS RETURN": (
            2714,
            "There is already an object named 'Helper' in the database.",
        ),
        "CREATE PROCEDURE trStock AS RETURN": (
            2714,
            "There is already an object named 'trStock' in the database.",
        ),
        "CREATE TRIGGER trX ON NoTable AFTER INSERT AS RETURN": (
            8197,
            "The object 'NoTable' does not exist or is invalid for this operation.",
        ),
        "ALTER TRIGGER trNone ON Stock AFTER INSERT AS RETURN": (
            208,
            "Invalid object name 'trNone'.",
        ),
        "DROP TRIGGER trNone": (
            3701,
            "Cannot drop the trigger 'trNone', because it does not exist or you do not have "
            "permission.",
        ),
        "CREATE TRIGGER trI ON Stock INSTEAD OF INSERT AS RETURN": (
            40000,
            "An INSTEAD OF trigger is not supported by servicebroker's T-SQL (docs/tsql.md "
            "lists what runs).",
        ),
        "CREATE TRIGGER trD ON DATABASE FOR CREATE_TABLE AS RETURN": (
            40000,
            "A DDL or logon trigger (ON DATABASE, ON ALL SERVER) is not supported by "
            "servicebroker's T-SQL (docs/tsql.md lists what runs).",
        ),
        "UPDATE Stock SET level = 1 FROM Stock JOIN Audit ON Audit.id = Stock.id": (
            40000,
            "An UPDATE with FROM on a table with an UPDATE trigger is not supported by "
            "servicebroker's T-SQL (docs/tsql.md lists what runs).",
        ),
    }
    for text, (number, message) in cases.items():
        with pytest.raises(TSqlError) as caught:
            instance.execute(text)
        assert (caught.value.number, caught.value.message) == (number, message), text
    listed = instance.execute(
        "SELECT name, type_desc, is_instead_of_trigger FROM sys.triggers;\n"
        "SELECT name FROM sys.objects WHERE type = 'TR';\n"
        "SELECT CASE WHEN OBJECT_ID('dbo.trStock') IS NOT NULL THEN 1 ELSE 0 END AS found;"
    )
    assert [r.values for r in listed.result_sets] == [
        [["trStock", "SQL_TRIGGER", False]],
        [["trStock"]],
        [[1]],
    ]
    instance.execute(
        "CREATE OR ALTER TRIGGER trStock ON Stock AFTER DELETE AS PRINT 'deleted only'"
    )
    assert instance.execute("INSERT INTO Stock VALUES (1, 'a', 1)").messages == []
    assert instance.execute("DELETE FROM Stock").messages == ["deleted only"]
    instance.execute("DROP TRIGGER trStock; DROP TRIGGER IF EXISTS trStock")
    assert instance.execute("INSERT INTO Stock VALUES (2, 'b', 1)").messages == []
    instance.execute(
        "CREATE TRIGGER trAgain ON Stock AFTER INSERT AS PRINT 'again'\nGO\nDROP TABLE Stock"
    )
    # a table's triggers go with it
    assert instance.execute("SELECT name FROM sys.triggers").result_sets[0].values == []


def test_a_stored_procedure_runs_inside_a_transaction_that_wrote(instance: Instance) -> None:
    """EXEC, OBJECT_ID and sys.objects inside a transaction that has written read the stored
    modules in that transaction (on SQLite a transaction of their own waited 60 s for the
    write lock it holds, then failed)."""
    instance.execute(
        "CREATE TABLE T (id INT);\nGO\nCREATE PROCEDURE P AS SELECT COUNT(*) AS n FROM T;"
    )
    results = instance.execute(
        "BEGIN TRAN;\n"
        "INSERT INTO T VALUES (1);\n"
        "EXEC P;\n"
        "SELECT name FROM sys.objects WHERE type = 'P';\n"
        "COMMIT;"
    )
    assert [r.values for r in results.result_sets] == [[[1]], [["P"]]]


def test_a_trigger_made_in_one_session_fires_in_another_and_after_reopening(
    instance_location: str, tmp_path: Path
) -> None:
    script = tmp_path / "setup.sql"
    script.write_text(AUDIT.replace("PRINT 'trancount '", "PRINT 'fired, trancount '"))
    runner = CliRunner()
    made = runner.invoke(main, ["sqlcmd", "-S", instance_location, "-i", str(script), "-b"])
    assert made.exit_code == 0, made.output
    fired = runner.invoke(
        main,
        ["sqlcmd", "-S", instance_location, "-Q", "INSERT INTO Stock VALUES (5, 'gear', 2)"],
    )
    assert fired.exit_code == 0, fired.output
    assert fired.output.splitlines() == ["fired, trancount 1", "(1 row affected)"]


def test_a_trigger_joins_inserted_with_the_applications_tables(instance: Instance) -> None:
    """``inserted`` and ``deleted`` in statements on the application's tables: a join, an
    UPDATE … FROM, a subquery (the database underneath has them as temporary tables for as
    long as the trigger runs)."""
    instance.execute(
        "CREATE TABLE Products (id INT PRIMARY KEY, name VARCHAR(20), sold INT);\n"
        "CREATE TABLE Lines (order_id INT, product_id INT, quantity INT);\n"
        "INSERT INTO Products VALUES (1, 'bolt', 0), (2, 'nut', 0), (3, 'pin', 0);\nGO\n"
        "CREATE TRIGGER trLines ON Lines AFTER INSERT, DELETE AS\n"
        "    SET NOCOUNT ON;\n"
        "    DECLARE @first VARCHAR(20);\n"
        "    SELECT @first = MIN(p.name) FROM Products p JOIN inserted i ON i.product_id = p.id;\n"
        "    IF @first IS NOT NULL PRINT 'first: ' + @first;\n"
        "    UPDATE Products SET sold = sold + i.quantity FROM inserted i\n"
        "        WHERE i.product_id = Products.id;\n"
        "    UPDATE Products SET sold = 0 WHERE id IN (SELECT product_id FROM deleted);\n"
    )
    results = instance.execute("INSERT INTO Lines VALUES (1, 2, 5), (1, 3, 7)")
    assert results.messages == ["first: nut"]
    sold = instance.execute("SELECT id, sold FROM Products ORDER BY id")
    assert sold.result_sets[0].values == [[1, 0], [2, 5], [3, 7]]
    instance.execute("DELETE FROM Lines WHERE product_id = 3")
    sold = instance.execute("SELECT id, sold FROM Products ORDER BY id")
    assert sold.result_sets[0].values == [[1, 0], [2, 5], [3, 0]]


def test_an_update_trigger_sees_the_rows_its_where_chose(instance: Instance) -> None:
    instance.execute(
        "CREATE TABLE T (id INT PRIMARY KEY, v INT);\n"
        "INSERT INTO T VALUES (1, 0), (2, 0), (3, 0);\nGO\n"
        "CREATE TRIGGER trT ON T AFTER UPDATE AS\n"
        "    DECLARE @old INT, @new INT, @ids VARCHAR(20);\n"
        "    SELECT @old = COUNT(*) FROM deleted;\n"
        "    SELECT @new = SUM(v) FROM inserted;\n"
        "    PRINT CAST(@old AS VARCHAR(5)) + ' row(s), new sum ' + CAST(@new AS VARCHAR(5));\n"
    )
    results = instance.execute(
        "DECLARE @cap INT = 100;\nUPDATE T SET v = v + 7 WHERE id = 1 OR id = 2 AND v > @cap"
    )
    assert results.messages == ["1 row(s), new sum 7"]
    rows = instance.execute("SELECT id, v FROM T ORDER BY id").result_sets[0].values
    assert rows == [[1, 7], [2, 0], [3, 0]]


def test_update_of_a_column_says_what_the_statement_wrote(instance: Instance) -> None:
    """UPDATE (column) (update-trigger-functions-transact-sql.md): true for every column of an
    INSERT, for the columns an UPDATE's SET names (even when no row changed), false for a
    DELETE's; outside a trigger, Msg 140."""
    instance.execute(
        "CREATE TABLE Orders (id INT PRIMARY KEY, status VARCHAR(10), note VARCHAR(20));\nGO\n"
        "CREATE TRIGGER trStatus ON Orders AFTER INSERT, UPDATE, DELETE AS\n"
        "    IF UPDATE(status) PRINT 'status written'\n"
        "    ELSE PRINT 'status not written';\n"
        "    IF (UPDATE(note) OR UPDATE([id])) PRINT 'note or id written';\n"
    )
    said = [
        instance.execute(text).messages
        for text in (
            "INSERT INTO Orders VALUES (1, 'new', NULL)",
            "UPDATE Orders SET note = 'gift' WHERE id = 1",
            "UPDATE Orders SET Status = 'paid' WHERE id = 99",
            "DELETE FROM Orders",
        )
    ]
    assert said == [
        ["status written", "note or id written"],
        ["status not written", "note or id written"],
        ["status written"],
        ["status not written"],
    ]
    with pytest.raises(TSqlError) as caught:
        instance.execute("IF UPDATE(status) PRINT 'no'")
    assert (caught.value.number, caught.value.message) == (
        140,
        "Can only use IF UPDATE within a CREATE TRIGGER statement.",
    )


def test_ddl_in_a_transaction_that_changed_tables_is_refused_at_once(instance: Instance) -> None:
    """DDL commits on its own here (docs/tsql.md): inside a transaction that has changed the
    application's tables it would wait for that transaction's locks (60 s, then fail), so it
    is refused at once; before any change, and after COMMIT, it runs."""
    instance.execute("CREATE TABLE T (id INT)")
    with pytest.raises(TSqlError) as caught:
        instance.execute(
            "BEGIN TRAN;\nCREATE QUEUE BeforeAnyChange;\nINSERT INTO T VALUES (1);\nGO\n"
            "CREATE QUEUE Refused\nGO\n"
            "CREATE PROCEDURE RefusedToo AS RETURN\nGO\n"
            "CREATE TRIGGER trRefused ON T AFTER INSERT AS RETURN\nGO\n"
            "COMMIT;\nCREATE QUEUE AfterCommit;"
        )
    errors = caught.value.results.errors  # type: ignore[attr-defined]
    assert [(e.number, e.message.split(" inside ")[0]) for e in errors] == [
        (40000, "CREATE QUEUE"),
        (40000, "CREATE PROCEDURE"),
        (40000, "CREATE TRIGGER"),
    ]
    names = instance.execute(
        "SELECT name FROM sys.service_queues WHERE is_ms_shipped = 0 ORDER BY name"
    )
    assert names.result_sets[0].values == [["AfterCommit"], ["BeforeAnyChange"]]
    assert instance.execute("SELECT COUNT(*) AS n FROM T").result_sets[0].values == [[1]]
