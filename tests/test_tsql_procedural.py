"""The T-SQL interpreter's procedural core, on both backends, against what SQL Server returns:
variables, control of flow, PRINT / RAISERROR / THROW, TRY…CATCH and the ERROR_ functions,
transactions and XACT_ABORT, SET NOCOUNT, @@ROWCOUNT and @@ERROR, and queries on the catalog
views. The scalar functions and the types are tests/test_tsql_functions.py.

Each test cites the page of the SQL Server documentation (MicrosoftDocs/sql-docs, docs/t-sql/…)
that says what SQL Server does."""

from __future__ import annotations

from typing import Any

import pytest

from servicebroker import Instance, TSqlError
from servicebroker.tsql import Results


def run(instance: Instance, text: str) -> Results:
    return instance.execute(text)


def failing(instance: Instance, text: str) -> tuple[TSqlError, Results]:
    """The error ``text`` raises to the client, and what ran (all its batches)."""
    with pytest.raises(TSqlError) as info:
        instance.execute(text)
    results: Results = info.value.results  # type: ignore[attr-defined]
    return info.value, results


def sets(results: Results) -> list[list[list[Any]]]:
    """Each result set's rows of plain values."""
    return [result.values for result in results.result_sets]


# -- variables ------------------------------------------------------------------------------
def test_declare_with_initial_values_several_per_statement(instance: Instance) -> None:
    """language-elements/declare-local-variable-transact-sql.md: several variables in one
    DECLARE, each with an optional initial value; a variable without one is NULL; names are
    matched without regard to case."""
    results = run(
        instance,
        "DECLARE @a INT = 1, @b NVARCHAR(20) = N'two', @c INT, @D DATETIME = '2024-01-02'\n"
        "DECLARE @e INT = @a + 41\n"
        "SELECT @a AS a, @B AS b, @c AS c, @d AS d, @e AS e",
    )
    (row,) = results.result_sets[0].values
    assert row[:3] == [1, "two", None]
    assert row[3].isoformat() == "2024-01-02T00:00:00"
    assert row[4] == 42
    assert results.result_sets[0].names == ["a", "b", "c", "d", "e"]


def test_declare_inside_a_loop_declares_once(instance: Instance) -> None:
    """language-elements/declare-local-variable-transact-sql.md: a variable's scope is the
    batch from its DECLARE on; a DECLARE in a WHILE body declares it once, so the variable
    keeps its value from one iteration to the next, and an initial value is assigned each
    time the DECLARE runs."""
    results = run(
        instance,
        "DECLARE @i INT = 0\n"
        "WHILE @i < 3\n"
        "BEGIN\n"
        "  DECLARE @kept INT\n"
        "  DECLARE @reset INT = 10\n"
        "  SET @kept = ISNULL(@kept, 0) + 1\n"
        "  SET @reset += 1\n"
        "  SET @i += 1\n"
        "END\n"
        "SELECT @kept AS kept, @reset AS reset",
    )
    assert sets(results) == [[[3, 11]]]
    assert results.errors == []


def test_redeclaring_a_variable_is_msg_134(instance: Instance) -> None:
    """language-elements/declare-local-variable-transact-sql.md ("Variable names must be unique
    within a query batch"): Msg 134, level 15, a compile error — nothing of the batch runs;
    the next batch runs, and may declare the name again (variables last one batch)."""
    error, results = failing(
        instance,
        "PRINT 'before'\nDECLARE @a INT = 1\nDECLARE @A NVARCHAR(5)\nPRINT 'after'\nGO\n"
        "DECLARE @a INT = 2\nPRINT @a",
    )
    assert (error.number, error.severity, error.state, error.line) == (134, 15, 1, 3)
    assert error.message == (
        "The variable name '@A' has already been declared. Variable names must be unique "
        "within a query batch or stored procedure."
    )
    assert results.messages == ["2"]


def test_set_and_compound_assignment(instance: Instance) -> None:
    """language-elements/set-local-variable-transact-sql.md and compound-operators-transact-sql.md:
    SET @v = expr and += -= *= /= %=; += on a string appends; an operation with NULL is NULL."""
    results = run(
        instance,
        "DECLARE @i INT = 5, @s NVARCHAR(20) = N'ab', @n INT\n"
        "SET @i += 3\n"  # 8
        "SET @i -= 1\n"  # 7
        "SET @i *= 2\n"  # 14
        "SET @i /= 3\n"  # 4
        "SET @i %= 3\n"  # 1
        "SET @s += N'cd'\n"
        "SET @n += 1\n"
        "SELECT @i AS i, @s AS s, @n AS n\n"
        "SET @i = @i * 10 + LEN(@s)\n"
        "SELECT @i",
    )
    assert sets(results) == [[[1, "abcd", None]], [[14]]]


def test_select_assignment_last_row_wins_no_row_leaves_unchanged(instance: Instance) -> None:
    """language-elements/select-local-variable-transact-sql.md: SELECT @v = expr assigns; from
    a FROM that returns several rows the variable keeps the last row's value; when no row
    comes back it keeps its value; an assignment returns no result set."""
    run(instance, "CREATE DATABASE alpha\nCREATE DATABASE zeta")
    results = run(
        instance,
        "DECLARE @name SYSNAME = N'unchanged', @x INT, @y NVARCHAR(10)\n"
        "SELECT @x = 6 * 7, @y = N'constant'\n"
        "SELECT @name = name FROM sys.databases WHERE name = 'nothing'\n"
        "SELECT @name AS after_no_row, @@ROWCOUNT AS no_rows\n"
        "SELECT @name = name FROM sys.databases ORDER BY name\n"
        "SELECT @name AS last_ascending, @@ROWCOUNT AS three\n"
        "SELECT @name = name FROM sys.databases ORDER BY name DESC\n"
        "SELECT @name AS last_descending, @x AS x, @y AS y",
    )
    assert sets(results) == [
        [["unchanged", 0]],
        [["zeta", 3]],
        [["alpha", 42, "constant"]],
    ]


# -- control of flow ------------------------------------------------------------------------
def test_if_else_null_condition_nested_and_semicolon_before_else(instance: Instance) -> None:
    """language-elements/if-else-transact-sql.md: a condition that is NULL (UNKNOWN) is not
    true, so ELSE runs — and NOT of UNKNOWN is UNKNOWN too; ``; ELSE`` is allowed; an ELSE
    belongs to the nearest IF; BEGIN…END makes one statement of several
    (language-elements/begin-end-transact-sql.md)."""
    results = run(
        instance,
        "DECLARE @n INT = NULL\n"
        "IF @n = 1 PRINT 'eq' ELSE PRINT 'null is not true'\n"
        "IF NOT (@n = 1) PRINT 'not eq' ELSE PRINT 'not null is not true'\n"
        "IF @n IS NULL PRINT 'is null';\n"
        "IF 1 = 1 PRINT 'then'; ELSE PRINT 'else';\n"
        "IF 1 = 1\n"
        "  IF 2 = 3 PRINT 'inner then'\n"
        "  ELSE PRINT 'inner else'\n"
        "IF 1 = 0 BEGIN PRINT 'x'; PRINT 'y' END ELSE BEGIN PRINT 'block 1'; PRINT 'block 2' END\n"
        "IF 'a' = 'a' AND (@n = 1 OR 1 = 1) PRINT 'and/or'",
    )
    assert results.messages == [
        "null is not true",
        "not null is not true",
        "is null",
        "then",
        "inner else",
        "block 1",
        "block 2",
        "and/or",
    ]


def test_while_with_break_and_continue(instance: Instance) -> None:
    """language-elements/while-transact-sql.md: CONTINUE restarts the loop, BREAK leaves the
    innermost loop; a NULL condition ends the loop."""
    results = run(
        instance,
        "DECLARE @i INT = 0, @out NVARCHAR(100) = N'', @j INT, @pairs INT = 0, @k INT\n"
        "WHILE @i < 10\n"
        "BEGIN\n"
        "  SET @i += 1\n"
        "  IF @i % 2 = 0 CONTINUE\n"
        "  IF @i > 7 BREAK\n"
        "  SET @out = @out + CAST(@i AS NVARCHAR(10)) + N','\n"
        "END\n"
        "SET @i = 0\n"
        "WHILE @i < 3\n"
        "BEGIN\n"
        "  SET @i += 1\n"
        "  SET @j = 0\n"
        "  WHILE 1 = 1\n"
        "  BEGIN\n"
        "    SET @j += 1\n"
        "    IF @j > @i BREAK\n"
        "    SET @pairs += 1\n"
        "  END\n"
        "END\n"
        "WHILE @k < 5 SET @k = 99\n"
        "SELECT @out AS odd, @i AS i, @pairs AS pairs, @k AS k",
    )
    assert sets(results) == [[["1,3,5,7,", 3, 6, None]]]


def test_return_ends_the_batch_and_the_next_batch_runs(instance: Instance) -> None:
    """language-elements/return-transact-sql.md: RETURN exits unconditionally; the statements
    after it do not run — from inside a block too; the next batch runs."""
    results = run(
        instance,
        "PRINT 'one'\nRETURN\nPRINT 'never'\nGO\n"
        "PRINT 'two'\nIF 1 = 1 BEGIN PRINT 'in block'; RETURN; END\nPRINT 'never 2'\nGO\n"
        "DECLARE @i INT = 0\nWHILE 1 = 1 BEGIN SET @i += 1; IF @i = 3 RETURN END\nPRINT 'never 3'\n"
        "GO\nPRINT 'three'",
    )
    assert results.messages == ["one", "two", "in block", "three"]
    assert results.errors == []


def test_print(instance: Instance) -> None:
    """language-elements/print-transact-sql.md: PRINT returns a message of a string, a
    variable, or an expression converted to a string; a NULL prints an empty line."""
    results = run(
        instance,
        "DECLARE @n INT, @d DATETIME = '2024-01-02 03:04:05'\n"
        "PRINT 'text'\nPRINT N'ünï'\nPRINT 42\nPRINT 'a' + 'b'\nPRINT @n\n"
        "PRINT @d\nPRINT 'count: ' + CAST(7 AS VARCHAR(5))",
    )
    assert results.messages == ["text", "ünï", "42", "ab", "", "Jan  2 2024  3:04AM", "count: 7"]
    assert results.result_sets == [] and results.row_counts == []


# -- errors ---------------------------------------------------------------------------------
def test_raiserror_severity_10_and_below_is_a_message(instance: Instance) -> None:
    """language-elements/raiserror-transact-sql.md: severity 0–10 is an informational message
    (not an error: @@ERROR stays 0, a CATCH block is not entered); %s and %d take the
    arguments, a NULL argument is (null), %% is a percent sign."""
    results = run(
        instance,
        "RAISERROR('info %s %d%%', 10, 1, N'abc', 42)\n"
        "RAISERROR(N'null arg %s.', 0, 1, NULL) WITH NOWAIT\n"
        "PRINT 'error ' + CAST(@@ERROR AS VARCHAR(10))\n"
        "BEGIN TRY RAISERROR('low', 10, 1); PRINT 'still in try' END TRY\n"
        "BEGIN CATCH PRINT 'caught' END CATCH",
    )
    assert results.messages == [
        "info abc 42%",
        "null arg (null).",
        "error 0",
        "low",
        "still in try",
    ]
    assert results.errors == []


def test_raiserror_severity_11_to_16_is_error_50000(instance: Instance) -> None:
    """language-elements/raiserror-transact-sql.md: a message string raises error 50000 with the
    severity and state given, its printf arguments put in; the batch goes on and @@ERROR is
    50000."""
    error, results = failing(
        instance,
        "PRINT 'before'\n"
        "RAISERROR('bad %s is %d', 16, 3, N'thing', 7)\n"
        "PRINT 'after ' + CAST(@@ERROR AS VARCHAR(10))\n"
        "RAISERROR('eleven', 11, 1)",
    )
    assert (error.number, error.severity, error.state, error.line) == (50000, 16, 3, 2)
    assert error.message == "bad thing is 7"
    assert results.messages == ["before", "after 50000"]
    assert [(e.number, e.severity, e.message, e.line) for e in results.errors] == [
        (50000, 16, "bad thing is 7", 2),
        (50000, 11, "eleven", 4),
    ]


def test_raiserror_with_a_message_number(instance: Instance) -> None:
    """language-elements/raiserror-transact-sql.md: RAISERROR(msg_id, …) raises that message of
    sys.messages with its arguments put in, and @@ERROR is msg_id; 15009 is "The object '%s'
    does not exist in database '%s' or is invalid for this operation."."""
    error, results = failing(
        instance,
        "RAISERROR(15009, 16, 1, N'dbo.t', N'db')\nPRINT CAST(@@ERROR AS VARCHAR(10))",
    )
    assert (error.number, error.severity, error.state) == (15009, 16, 1)
    assert error.message == (
        "The object 'dbo.t' does not exist in database 'db' or is invalid for this operation."
    )
    assert results.messages == ["15009"]


def test_throw_ends_the_batch(instance: Instance) -> None:
    """language-elements/throw-transact-sql.md: THROW number, message, state raises the error
    with severity 16 and ends the batch; the next batch runs; a number below 50000 is Msg
    35100. (The statement before a THROW must end with a semicolon.)"""
    error, results = failing(
        instance,
        "PRINT 'before';\nTHROW 50001, 'x', 1\nPRINT 'never'\nGO\n"
        "PRINT 'next batch';\nTHROW 49999, 'low', 1",
    )
    assert (error.number, error.severity, error.state, error.line, error.message) == (
        50001,
        16,
        1,
        2,
        "x",
    )
    assert results.messages == ["before", "next batch"]
    assert [e.number for e in results.errors] == [50001, 35100]


def test_try_catch_and_the_error_functions(instance: Instance) -> None:
    """language-elements/try-catch-transact-sql.md and functions/error-number-transact-sql.md
    (ERROR_MESSAGE, ERROR_SEVERITY, ERROR_STATE, ERROR_LINE, ERROR_PROCEDURE): an error of
    severity 11 and above in TRY goes to CATCH, the rest of TRY skipped; the functions return
    the caught error there and NULL outside a CATCH block; the batch goes on."""
    results = run(
        instance,
        "BEGIN TRY\n"
        "  PRINT 'in try'\n"
        "  SELECT 1 / 0 AS never\n"
        "  PRINT 'not reached'\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        "  SELECT ERROR_NUMBER() AS n, ERROR_MESSAGE() AS m, ERROR_SEVERITY() AS s,\n"
        "         ERROR_STATE() AS st, ERROR_LINE() AS l, ERROR_PROCEDURE() AS p\n"
        "END CATCH\n"
        "SELECT ERROR_NUMBER() AS outside, ERROR_MESSAGE() AS m\n"
        "BEGIN TRY\n"
        "  RAISERROR('custom %d', 15, 7, 3)\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        "  SELECT ERROR_NUMBER(), ERROR_MESSAGE(), ERROR_SEVERITY(), ERROR_STATE(), ERROR_LINE()\n"
        "END CATCH\n"
        "PRINT 'after'",
    )
    assert results.messages == ["in try", "after"]
    assert results.result_sets[-3].values == [
        [8134, "Divide by zero error encountered.", 16, 1, 3, None]
    ]
    assert results.result_sets[-3].names == ["n", "m", "s", "st", "l", "p"]
    assert results.result_sets[-2].values == [[None, None]]
    assert results.result_sets[-1].values == [[50000, "custom 3", 15, 7, 12]]
    assert results.errors == []


def test_throw_without_arguments_rethrows_in_catch(instance: Instance) -> None:
    """language-elements/throw-transact-sql.md: THROW without parameters in a CATCH block
    re-raises the caught error as it was (number, message, severity, state, line); an outer
    CATCH gets it; uncaught, it ends the batch."""
    error, results = failing(
        instance,
        "BEGIN TRY\n"
        "  BEGIN TRY\n"
        "    SELECT CAST('x' AS INT)\n"
        "  END TRY\n"
        "  BEGIN CATCH\n"
        "    PRINT 'inner: ' + ERROR_MESSAGE();\n"
        "    THROW;\n"
        "  END CATCH\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        "  SELECT ERROR_NUMBER() AS n, ERROR_SEVERITY() AS s, ERROR_LINE() AS l\n"
        "END CATCH\n"
        "BEGIN TRY\n"
        "  THROW 50010, N'mine', 4\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        "  PRINT 'caught';\n"
        "  THROW;\n"
        "END CATCH\n"
        "PRINT 'never'\n"
        "GO\n"
        "PRINT 'next batch'",
    )
    assert (error.number, error.message, error.severity, error.state, error.line) == (
        50010,
        "mine",
        16,
        4,
        14,
    )
    assert results.messages == [
        "inner: Conversion failed when converting the varchar value 'x' to data type int.",
        "caught",
        "next batch",
    ]
    assert sets(results)[-1] == [[245, 16, 3]]


# -- transactions ---------------------------------------------------------------------------
def test_transactions_trancount_and_xact_state(instance: Instance) -> None:
    """language-elements/begin-transaction-transact-sql.md, commit-transaction-transact-sql.md,
    rollback-transaction-transact-sql.md, functions/trancount-transact-sql.md,
    functions/xact-state-transact-sql.md: BEGIN TRAN adds 1 to @@TRANCOUNT, COMMIT takes 1,
    ROLLBACK sets it to 0; XACT_STATE() is 1 in a transaction, 0 outside; a COMMIT or ROLLBACK
    with no transaction is Msg 3902 / 3903 and the batch goes on; an error that does not doom
    the transaction leaves it committable (XACT_STATE() 1 in CATCH)."""
    error, results = failing(
        instance,
        "SET NOCOUNT ON\n"
        "SELECT @@TRANCOUNT, XACT_STATE()\n"
        "BEGIN TRAN\n"
        "SELECT @@TRANCOUNT, XACT_STATE()\n"
        "BEGIN TRANSACTION\n"
        "SELECT @@TRANCOUNT, XACT_STATE()\n"
        "COMMIT\n"
        "SELECT @@TRANCOUNT, XACT_STATE()\n"
        "BEGIN TRAN\n"
        "ROLLBACK\n"
        "SELECT @@TRANCOUNT, XACT_STATE()\n"
        "COMMIT TRAN\n"
        "ROLLBACK TRANSACTION\n"
        "BEGIN TRAN\n"
        "BEGIN TRY RAISERROR('x', 16, 1) END TRY\n"
        "BEGIN CATCH SELECT XACT_STATE(), @@TRANCOUNT END CATCH\n"
        "COMMIT\n"
        "SELECT @@TRANCOUNT, XACT_STATE()",
    )
    assert (error.number, error.severity, error.line) == (3902, 16, 12)
    assert error.message == "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION."
    assert [(e.number, e.line) for e in results.errors] == [(3902, 12), (3903, 13)]
    assert sets(results) == [
        [[0, 0]],
        [[1, 1]],
        [[2, 1]],
        [[1, 1]],
        [[0, 0]],
        [[1, 1]],
        [[0, 0]],
    ]


def _dialogs(instance: Instance) -> None:
    run(instance, "CREATE QUEUE q\nCREATE SERVICE [//s] ON QUEUE q ([DEFAULT])")


_BEGIN_DIALOG = (
    "BEGIN DIALOG @h FROM SERVICE [//s] TO SERVICE '//s' ON CONTRACT [DEFAULT] "
    "WITH ENCRYPTION = OFF\n"
)


def test_xact_abort_rolls_back_and_ends_the_batch(instance: Instance) -> None:
    """statements/set-xact-abort-transact-sql.md: with XACT_ABORT OFF a divide by zero ends its
    statement only and the transaction stays open; under SET XACT_ABORT ON the same error
    rolls the whole transaction back and ends the batch; the next batch runs, with no
    transaction; a committed transaction's work stays, a rolled back one's does not."""
    _dialogs(instance)
    error, results = failing(
        instance,
        "DECLARE @h UNIQUEIDENTIFIER, @i INT\n"
        "BEGIN TRAN\n"
        "SET @i = 1 / 0\n"
        "PRINT CONCAT('without XACT_ABORT: ', @@TRANCOUNT)\n"
        "ROLLBACK\n"
        "SET XACT_ABORT ON\n"
        "BEGIN TRAN\n" + _BEGIN_DIALOG + "SET @i = 1 / 0\n"
        "PRINT 'never'\n"
        "GO\n"
        "SET NOCOUNT ON\n"
        "SELECT @@TRANCOUNT AS tc, COUNT(*) AS endpoints FROM sys.conversation_endpoints\n"
        "DECLARE @h UNIQUEIDENTIFIER\n"
        "BEGIN TRAN\n" + _BEGIN_DIALOG + "COMMIT\n"
        "BEGIN TRAN\n" + _BEGIN_DIALOG + "ROLLBACK\n"
        "SELECT COUNT(*) AS endpoints FROM sys.conversation_endpoints",
    )
    assert (error.number, error.line, error.message) == (
        8134,
        3,
        "Divide by zero error encountered.",
    )
    assert [(e.number, e.line) for e in results.errors] == [(8134, 3), (8134, 9)]
    assert results.messages == ["without XACT_ABORT: 1"]
    assert sets(results) == [[[0, 0]], [[1]]]


def test_xact_abort_in_try_dooms_the_transaction(instance: Instance) -> None:
    """functions/xact-state-transact-sql.md: under XACT_ABORT ON an error in TRY leaves an
    uncommittable transaction: XACT_STATE() is -1 in CATCH until it is rolled back."""
    results = run(
        instance,
        "SET XACT_ABORT ON\n"
        "BEGIN TRY\n"
        "  BEGIN TRAN\n"
        "  SELECT 1 / 0\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        "  SELECT XACT_STATE() AS doomed, @@TRANCOUNT AS tc\n"
        "  ROLLBACK\n"
        "  SELECT XACT_STATE() AS after_rollback, @@TRANCOUNT AS tc\n"
        "END CATCH",
    )
    assert sets(results)[-2:] == [[[-1, 1]], [[0, 0]]]


# -- SET NOCOUNT, @@ROWCOUNT, @@ERROR ------------------------------------------------------
def test_set_nocount_and_rowcount(instance: Instance) -> None:
    """statements/set-nocount-transact-sql.md: with NOCOUNT OFF each SELECT is followed by its
    "(N rows affected)" count, with ON none; functions/rowcount-transact-sql.md: @@ROWCOUNT is
    the rows the last statement returned, whether NOCOUNT is ON or not."""
    run(instance, "CREATE DATABASE alpha\nCREATE DATABASE zeta")
    results = run(
        instance,
        "SELECT name FROM sys.databases ORDER BY name\n"
        "SELECT @@ROWCOUNT AS rc\n"
        "SET NOCOUNT ON\n"
        "SELECT name FROM sys.databases WHERE name LIKE 'a%'\n"
        "SELECT @@ROWCOUNT AS rc\n"
        "SET NOCOUNT OFF\n"
        "PRINT 'p'\n"
        "SELECT name FROM sys.databases WHERE name = 'none'",
    )
    assert sets(results) == [[["alpha"], ["master"], ["zeta"]], [[3]], [["alpha"]], [[1]], []]
    assert results.row_counts == [3, 1, 0]
    kinds = [type(e).__name__ for e in results.events]
    assert kinds == [
        *("ResultSet", "int", "ResultSet", "int"),  # NOCOUNT OFF
        *("ResultSet", "ResultSet"),  # NOCOUNT ON
        *("str", "ResultSet", "int"),  # OFF again
    ]


def test_error_is_the_last_statements_error_number(instance: Instance) -> None:
    """functions/error-transact-sql.md: @@ERROR is the error number of the last statement, 0
    when it succeeded — so it is reset by each statement and must be saved at once."""
    error, results = failing(
        instance,
        "DECLARE @saved INT\n"
        "SELECT 1 / 0\n"
        "SET @saved = @@ERROR\n"
        "SELECT @saved AS saved, @@ERROR AS now\n"
        "RAISERROR('x', 16, 1)\n"
        "SELECT @@ERROR AS e1, @@ERROR AS e2\n"
        "SELECT @@ERROR AS e3",
    )
    assert error.number == 8134
    assert [e.number for e in results.errors] == [8134, 50000]
    assert sets(results)[-3:] == [[[8134, 0]], [[50000, 50000]], [[0]]]


# -- queries ----------------------------------------------------------------------------------
def _services(instance: Instance) -> None:
    run(
        instance,
        "CREATE QUEUE q1\nCREATE QUEUE q2\n"
        "CREATE SERVICE [//a/S1] ON QUEUE q1\nCREATE SERVICE [//a/S2] ON QUEUE q1\n"
        "CREATE SERVICE [//b/S3] ON QUEUE q2\nCREATE DATABASE alpha",
    )


def test_select_from_catalog_views(instance: Instance) -> None:
    """queries/select-transact-sql.md (WHERE, ORDER BY, TOP, GROUP BY, aggregates),
    functions/count-transact-sql.md, catalog-views/sys-databases-transact-sql.md,
    sys-services-transact-sql.md: COUNT(*) counts the rows (0 when none); GROUP BY gives a row
    per group; ORDER BY may name a select-list alias or position, DESC reverses; TOP (n) keeps
    the first n rows of the order; names compare without regard to case."""
    _services(instance)
    results = run(
        instance,
        "SET NOCOUNT ON\n"
        "DECLARE @n INT = 2\n"
        "SELECT name FROM sys.databases WHERE name = 'MASTER' OR name = 'Alpha' ORDER BY name DESC\n"
        "SELECT TOP (@n) name FROM sys.services WHERE name LIKE '//%' ORDER BY name DESC\n"
        "SELECT COUNT(*) AS c FROM sys.services WHERE name LIKE '//%'\n"
        "SELECT COUNT(*) AS c FROM sys.services WHERE name = 'none'\n"
        "SELECT LEFT(name, 4) AS prefix, COUNT(*) AS c FROM sys.services WHERE name LIKE '//%'\n"
        "  GROUP BY LEFT(name, 4) ORDER BY c DESC\n"
        "SELECT name AS n FROM sys.services WHERE service_queue_id = "
        "(SELECT object_id FROM sys.service_queues WHERE name = 'q1') ORDER BY 1 DESC\n"
        "SELECT q.name FROM sys.service_queues AS q WHERE q.name IN ('q1', 'Q2') ORDER BY q.name",
    )
    assert sets(results) == [
        [["master"], ["alpha"]],
        [["//b/S3"], ["//a/S2"]],
        [[3]],
        [[0]],
        [["//a/", 2], ["//b/", 1]],
        [["//a/S2"], ["//a/S1"]],
        [["q1"], ["q2"]],
    ]
    assert results.result_sets[4].names == ["prefix", "c"]
