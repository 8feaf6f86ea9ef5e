"""What statements do to the session beside their own work, as SQL Server does it: @@ERROR and
@@ROWCOUNT after each statement (error-transact-sql.md, rowcount-transact-sql.md), RAISERROR
beside SET XACT_ABORT and with message numbers (raiserror-transact-sql.md,
set-xact-abort-transact-sql.md), and the literal and CAST forms whose defaults matter (TOP n,
float constants, CAST to a type without a length: 30, cast-and-convert-transact-sql.md)."""

from __future__ import annotations

import pytest

from servicebroker import Instance, TSqlError


def test_if_resets_error_once_its_condition_is_read(instance: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        instance.execute("SELECT 1/0;\nIF @@ERROR <> 0 PRINT CAST(@@ERROR AS VARCHAR(10));")
    assert caught.value.number == 8134
    assert caught.value.results.messages == ["0"]  # type: ignore[attr-defined]


def test_rowcount_after_each_kind_of_statement(instance: Instance) -> None:
    results = instance.execute(
        "DECLARE @v INT;\n"
        "SELECT name FROM sys.databases;\n"
        "SET @v = 3;\n"
        "SELECT @@ROWCOUNT AS after_set;\n"
        "PRINT 'x';\n"
        "SELECT @@ROWCOUNT AS after_print;\n"
        "SET NOCOUNT ON;\n"
        "SELECT @@ROWCOUNT AS after_option;"
    )
    assert [r.values for r in results.result_sets[1:]] == [[[1]], [[0]], [[0]]]


def test_xact_abort_does_not_apply_to_raiserror(instance: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        instance.execute(
            "SET XACT_ABORT ON;\n"
            "BEGIN TRAN;\n"
            "RAISERROR('x', 16, 1);\n"
            "PRINT CONCAT('still ', @@TRANCOUNT);\n"
            "ROLLBACK;"
        )
    assert caught.value.number == 50000
    assert caught.value.results.messages == ["still 1"]  # type: ignore[attr-defined]


def test_raiserror_with_a_message_number(instance: Instance) -> None:
    with pytest.raises(TSqlError) as caught:
        instance.execute("RAISERROR(50001, 16, 1)")
    assert caught.value.number == 18054
    assert caught.value.message.startswith(
        "Error 50001, severity 16, state 1 was raised, but no message with that error number "
        "was found in sys.messages."
    )
    with pytest.raises(TSqlError) as caught:
        instance.execute("RAISERROR(2627, 16, 1)")
    assert (caught.value.number, caught.value.message) == (
        2732,
        "Error number 2627 is invalid. The number must be from 13000 through 2147483647 and it "
        "cannot be 50000.",
    )


def test_raiserror_formats_widths_and_flags(instance: Instance) -> None:
    results = instance.execute("RAISERROR('%5d|%-5s|%05d|%x|%%', 10, 1, 42, N'ab', 7, 255)")
    assert results.messages == ["   42|ab   |00007|ff|%"]


def test_top_without_parentheses_float_constants_and_cast_lengths(instance: Instance) -> None:
    results = instance.execute(
        "SELECT TOP 1 name FROM sys.databases ORDER BY name;\n"
        "SELECT 1.0E0 / 4 AS quarter, 2e1 AS twenty;\n"
        "SELECT CAST(12345 AS VARCHAR) AS a, CAST('abcdef' AS NVARCHAR) AS b, "
        "CAST(REPLICATE('x', 40) AS VARCHAR) AS c;"
    )
    top, floats, casts = results.result_sets
    assert top.values == [["master"]]
    assert floats.values == [[0.25, 20.0]]
    assert casts.values == [["12345", "abcdef", "x" * 30]]
