"""The T-SQL interpreter's scalar functions, types and predicates, on both backends, against
what SQL Server returns (the default collation SQL_Latin1_General_CP1_CI_AS: strings compare
without regard to case or trailing blanks, VARCHAR is code page 1252). The procedural core is
tests/test_tsql_procedural.py.

Each test cites the page of the SQL Server documentation (MicrosoftDocs/sql-docs, docs/t-sql/…)
that says what SQL Server does."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from servicebroker import Instance, ManualClock, TSqlError


def row(instance: Instance, select: str, *, database: str = "master") -> list[Any]:
    """The one row of the one result set of ``select``."""
    results = instance.execute(select, database=database)
    (only,) = results.result_sets
    (values,) = only.values
    return values


def failing(instance: Instance, text: str) -> tuple[TSqlError, list[str]]:
    """The error ``text`` raises to the client and the messages that were printed."""
    with pytest.raises(TSqlError) as info:
        instance.execute(text)
    return info.value, info.value.results.messages  # type: ignore[attr-defined]


def when(text: str) -> datetime:
    return datetime.fromisoformat(text)


# -- conversions ------------------------------------------------------------------------------
def test_cast_and_convert(instance: Instance) -> None:
    """functions/cast-and-convert-transact-sql.md: a number string to INT; a decimal to INT
    truncates; to a shorter string cuts it, but an int that does not fit a VARCHAR is '*';
    CONVERT's date styles 120 (ODBC canonical), 121 (with milliseconds) and 126 (ISO 8601);
    numeric to numeric rounds half away from zero."""
    dt = "CAST('2024-02-29 13:14:15.123' AS DATETIME)"
    values = row(
        instance,
        "SELECT CAST('42' AS INT), CAST(' -7 ' AS INT), CAST(3.7 AS INT), CAST(-3.7 AS INT),"
        " CAST(42 AS NVARCHAR(10)), CAST('abcdef' AS VARCHAR(3)), CAST(12345 AS VARCHAR(3)),"
        f" CONVERT(VARCHAR(23), {dt}, 121), CONVERT(VARCHAR(19), {dt}, 120),"
        f" CONVERT(NVARCHAR(30), {dt}, 126), CONVERT(VARCHAR(10), {dt}, 120),"
        " CAST(2.345 AS DECIMAL(5, 2)), CAST(-2.345 AS DECIMAL(5, 2)), CONVERT(INT, '12'),"
        f" {dt}",
    )
    assert values[:7] == [42, -7, 3, -3, "42", "abc", "*"]
    assert values[7:11] == [
        "2024-02-29 13:14:15.123",
        "2024-02-29 13:14:15",
        "2024-02-29T13:14:15.123",
        "2024-02-29",
    ]
    assert [str(v) for v in values[11:13]] == ["2.35", "-2.35"]
    assert values[13:] == [12, when("2024-02-29 13:14:15.123")]


def test_numbers_that_do_not_fit_are_errors(instance: Instance) -> None:
    """functions/cast-and-convert-transact-sql.md ("Truncating and rounding results"): an int
    too long for an NVARCHAR, or a value with more integer digits than a DECIMAL holds, is
    arithmetic overflow, Msg 8115."""
    error, _ = failing(instance, "SELECT CAST(12345 AS NVARCHAR(3))")
    assert (error.number, error.message) == (
        8115,
        "Arithmetic overflow error converting expression to data type nvarchar.",
    )
    error, _ = failing(instance, "SELECT CAST(123456 AS DECIMAL(5, 2))")
    assert (error.number, error.message) == (
        8115,
        "Arithmetic overflow error converting int to data type numeric.",
    )


def test_int_from_a_non_number_string_is_msg_245_and_ends_the_batch(
    instance: Instance,
) -> None:
    """functions/cast-and-convert-transact-sql.md, data-types/data-type-precedence-transact-sql.md:
    a VARCHAR that is not a number converted to INT — by CAST, by an assignment, or by mixing it
    with an int (int has the higher precedence) — is Msg 245, which ends the batch; the next
    batch runs."""
    error, messages = failing(
        instance,
        "PRINT 'one'\nSELECT CAST('abc' AS INT)\nPRINT 'never'\nGO\n"
        "PRINT 'two'\nDECLARE @i INT = 'x1'\nPRINT 'never'\nGO\n"
        "PRINT 'three'\nSELECT 'x' + 1\nPRINT 'never'\nGO\nPRINT 'four'",
    )
    assert (error.number, error.severity, error.line) == (245, 16, 2)
    assert (
        error.message
        == "Conversion failed when converting the varchar value 'abc' to data type int."
    )
    assert messages == ["one", "two", "three", "four"]
    errors = error.results.errors  # type: ignore[attr-defined]
    assert [(e.number, e.line, e.message) for e in errors][1:] == [
        (245, 2, "Conversion failed when converting the varchar value 'x1' to data type int."),
        (245, 2, "Conversion failed when converting the varchar value 'x' to data type int."),
    ]


# -- types ------------------------------------------------------------------------------------
def test_uniqueidentifier_from_a_string_shown_upper_case(instance: Instance) -> None:
    """data-types/uniqueidentifier-transact-sql.md: a string in the form
    xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (braces allowed) converts to uniqueidentifier, and it
    is written back in upper case; another string is Msg 8169."""
    text = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    results = instance.execute(
        f"DECLARE @g UNIQUEIDENTIFIER = '{text}'\n"
        "PRINT @g\n"
        "SELECT @g, CAST(@g AS NVARCHAR(36)), CAST('{6F9619FF-8B86-D011-B42D-00C04FC964FF}'"
        " AS UNIQUEIDENTIFIER), CASE WHEN @g = '6F9619FF-8B86-D011-B42D-00C04FC964FF'"
        " THEN 1 ELSE 0 END, DATALENGTH(@g)",
    )
    assert results.messages == [text.upper()]
    assert results.result_sets[0].values == [
        [uuid.UUID(text), text.upper(), uuid.UUID(text), 1, 16]
    ]
    error, _ = failing(instance, "SELECT CAST('not a guid' AS UNIQUEIDENTIFIER)")
    assert error.number == 8169
    assert error.message == (
        "Conversion failed when converting from a character string to uniqueidentifier."
    )


def test_nvarchar_n_truncates_on_assignment(instance: Instance) -> None:
    """data-types/nchar-and-nvarchar-transact-sql.md, char-and-varchar-transact-sql.md,
    language-elements/set-local-variable-transact-sql.md: a value longer than a variable's
    length is cut to it, without an error — by DECLARE, SET and SELECT alike; a type without a
    length in DECLARE has length 1; CHAR and NCHAR are padded with blanks to their length."""
    results = instance.execute(
        "DECLARE @s NVARCHAR(5) = N'abcdefgh', @t NVARCHAR(3), @v VARCHAR(2), @one NCHAR,\n"
        "  @c CHAR(5) = 'ab', @nc NCHAR(3) = N'x'\n"
        "SET @t = N'123456789'\n"
        "SELECT @v = 'wxyz'\n"
        "SET @one = N'xyz'\n"
        "SET @s += N'more'\n"
        "SELECT @s, LEN(@s), @t, @v, @one, @c + '|', LEN(@c), DATALENGTH(@c), DATALENGTH(@nc),"
        " CAST('ab' AS CHAR(4)) + '|', CASE WHEN @c = 'ab' THEN 1 ELSE 0 END",
    )
    assert results.result_sets[0].values == [
        ["abcde", 5, "123", "wx", "x", "ab   |", 2, 5, 6, "ab  |", 1]
    ]
    assert results.errors == []


def test_varbinary_and_string_encodings(instance: Instance) -> None:
    """functions/cast-and-convert-transact-sql.md, data-types/binary-and-varbinary-transact-sql.md:
    an NVARCHAR becomes VARBINARY as UTF-16LE, a VARCHAR as its code page (1252: é is 0xE9,
    € is 0x80); a VARBINARY read as NVARCHAR is UTF-16LE, as VARCHAR the code page."""
    values = row(
        instance,
        "SELECT CAST(N'AB' AS VARBINARY(10)), CAST('AB' AS VARBINARY(10)),"
        " CAST('é€' AS VARBINARY(4)), CAST(N'é€' AS VARBINARY(4)),"
        " CAST(0x410042004300 AS NVARCHAR(10)), CAST(0xAC20 AS NVARCHAR(1)),"
        " CAST(0x414243 AS VARCHAR(10)), CAST(0xE980 AS VARCHAR(2)),"
        " DATALENGTH(CAST(N'abc' AS VARBINARY(100))), CAST(N'abc' AS VARBINARY(2))",
    )
    assert values == [
        b"A\x00B\x00",
        b"AB",
        b"\xe9\x80",
        b"\xe9\x00\xac\x20",
        "ABC",
        "€",
        "ABC",
        "é€",
        6,
        b"a\x00",
    ]


def test_date_and_time_types_hold_what_sql_server_holds(
    instance: Instance, clock: ManualClock
) -> None:
    """data-types/datetime-transact-sql.md ("Rounding of datetime fractional second precision":
    .999 → the next second, .995–.998 → .997, .992–.994 → .993, .990–.991 → .990),
    smalldatetime-transact-sql.md (29.998 seconds round down, 29.999 up), date-transact-sql.md
    (no time); a time alone is on 1900-01-01; GETDATE() is a datetime, SYSDATETIME() keeps the
    clock's fraction (functions/sysdatetime-transact-sql.md)."""
    clock.advance(0.0042)  # datetime: 4.2 ms cut to 4 ms, 1.2 ticks → .003
    values = row(
        instance,
        "SELECT CAST('1998-01-01 23:59:59.999' AS DATETIME),"
        " CAST('1998-01-01 23:59:59.995' AS DATETIME), CAST('1998-01-01 23:59:59.998' AS DATETIME),"
        " CAST('1998-01-01 23:59:59.994' AS DATETIME), CAST('1998-01-01 23:59:59.991' AS DATETIME),"
        " CONVERT(VARCHAR(23), CAST('2024-05-06 07:08:09.125' AS DATETIME), 121),"
        " CAST('2024-01-02 13:14:29.998' AS SMALLDATETIME),"
        " CAST('2024-01-02 13:14:29.999' AS SMALLDATETIME), CAST('2024-01-02 13:14:15' AS DATE),"
        " CAST('13:14:15' AS DATETIME), DATEADD(ms, 2, CAST('2024-01-01' AS DATETIME)),"
        " GETDATE(), SYSDATETIME()",
    )
    assert values[:6] == [
        when("1998-01-02 00:00:00"),
        when("1998-01-01 23:59:59.997"),
        when("1998-01-01 23:59:59.997"),
        when("1998-01-01 23:59:59.993"),
        when("1998-01-01 23:59:59.990"),
        "2024-05-06 07:08:09.127",
    ]
    assert values[6:11] == [
        when("2024-01-02 13:14"),
        when("2024-01-02 13:15"),
        when("2024-01-02"),
        when("1900-01-01 13:14:15"),
        when("2024-01-01 00:00:00.003"),
    ]
    local = datetime.fromtimestamp(clock.now())
    assert values[11:] == [local.replace(microsecond=3000), local]


def test_integer_division_truncates_toward_zero_and_divide_by_zero(instance: Instance) -> None:
    """language-elements/divide-transact-sql.md, modulo-transact-sql.md: an integer divided by an
    integer is the integer part, truncated toward zero; % has the sign of the dividend; a
    divide by zero is Msg 8134, which ends its statement only (the batch goes on)."""
    error, messages = failing(
        instance,
        "SELECT 7 / 2, -7 / 2, 7 / -2, 1 / 3 * 3, 7 % 3, -7 % 3, 7 % -3\n"
        "SELECT 1 / 0\n"
        "PRINT 'after'\n"
        "DECLARE @zero INT = 0\n"
        "PRINT 5 % @zero\n"
        "PRINT 'end'",
    )
    results = error.results  # type: ignore[attr-defined]
    assert results.result_sets[0].values == [[3, -3, -3, 0, 1, -1, 1]]
    assert (error.number, error.severity, error.line, error.message) == (
        8134,
        16,
        2,
        "Divide by zero error encountered.",
    )
    assert [(e.number, e.line) for e in results.errors] == [(8134, 2), (8134, 5)]
    assert messages == ["after", "end"]


def test_decimal_arithmetic_keeps_the_digits(instance: Instance) -> None:
    """data-types/precision-scale-and-length-transact-sql.md: e1 + e2 has scale max(s1, s2),
    e1 * e2 scale s1 + s2, e1 / e2 scale max(6, s1 + p2 + 1) (an int is decimal(10, 0)); a
    DECIMAL variable keeps its scale, rounding what is assigned; an int variable is
    decimal(10, 0), an integer constant decimal of its own digits (``1.0 / 3`` is 0.333333)."""
    values = row(
        instance,
        "DECLARE @d DECIMAL(10, 2) = 1.005, @three INT = 3, @six NUMERIC(9, 6) = 1.0\n"
        "SELECT 1.5 + 2.25, 2.25 * 2, 1.25 * 1.5, 10 / 4.0, 1.0 / @three, 1.0 / 3, @six / 3, @d,"
        " @d + 0.001, 5.5 - 10, CASE WHEN 1.5 < 1.55 AND 1.55 > 1.5 AND 2 = 2.0 THEN 1 ELSE 0 END",
    )
    assert [str(v) for v in values] == [
        "3.75",
        "4.50",
        "1.875",
        "2.500000",
        "0.333333333333",
        "0.333333",
        "0.33333333",
        "1.01",
        "1.011",
        "-4.5",
        "1",
    ]


# -- comparison and predicates ----------------------------------------------------------------
def _truth(instance: Instance, conditions: list[str]) -> list[int]:
    select = ", ".join(f"CASE WHEN {c} THEN 1 ELSE 0 END" for c in conditions)
    return row(instance, f"DECLARE @null INT\nSELECT {select}")


def test_string_comparison_ignores_case_and_trailing_blanks(instance: Instance) -> None:
    """language-elements/comparison-operators-transact-sql.md and the default collation
    (SQL_Latin1_General_CP1_CI_AS): = and < compare without regard to case; trailing blanks
    are ignored (ANSI padding), leading blanks are not."""
    assert _truth(
        instance,
        [
            "'abc' = 'ABC   '",
            "'abc' = '   abc'",
            "'a' < 'B'",
            "'B' > 'a'",
            "N'x' = 'X'",
            "'abc' <> 'abd'",
            "'' = '   '",
        ],
    ) == [1, 0, 1, 1, 1, 1, 1]


def test_like(instance: Instance) -> None:
    """language-elements/like-transact-sql.md: % any string, _ one character, [a-c] one of a
    range, [^a-c] one not in it, [%] a literal %; case is ignored; the trailing blanks of the
    value are ignored in ASCII (VARCHAR) LIKE but kept in Unicode LIKE, and the pattern's
    are always significant; a NULL is UNKNOWN."""
    assert _truth(
        instance,
        [
            "'abc' LIKE 'a%'",
            "'abc' LIKE '%c'",
            "'abc' LIKE 'a_c'",
            "'abc' LIKE 'a_'",
            "'abc' LIKE '[a-c]bc'",
            "'dbc' LIKE '[a-c]bc'",
            "'dbc' LIKE '[^a-c]bc'",
            "'ABC' LIKE 'abc'",
            "'abc' NOT LIKE 'x%'",
            "'50%' LIKE '50[%]'",
            "'500' LIKE '50[%]'",
            "'abc  ' LIKE 'abc'",
            "N'abc  ' LIKE N'abc'",
            "'abc' LIKE 'abc '",
            "NOT (@null LIKE '%')",
        ],
    ) == [1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0, 0, 0]


def test_in_between_is_null_and_exists(instance: Instance) -> None:
    """language-elements/in-transact-sql.md (NOT IN a list with a NULL is never true),
    between-transact-sql.md (inclusive; a reversed range holds nothing), queries/is-null-
    transact-sql.md (= NULL is UNKNOWN), language-elements/exists-transact-sql.md."""
    assert _truth(
        instance,
        [
            "2 IN (1, 2, 3)",
            "'B' IN ('a', 'b')",
            "4 NOT IN (1, 2, NULL)",
            "4 IN (1, NULL) OR NOT (4 IN (1, NULL))",
            "5 BETWEEN 1 AND 5",
            "5 NOT BETWEEN 6 AND 9",
            "'b' BETWEEN 'A' AND 'C'",
            "5 BETWEEN 9 AND 1",
            "@null IS NULL",
            "@null IS NOT NULL",
            "@null = NULL",
            "NOT (@null = NULL)",
            "EXISTS (SELECT * FROM sys.databases WHERE name = 'MASTER')",
            "NOT EXISTS (SELECT 1 FROM sys.databases WHERE name = 'none')",
            "'master' IN (SELECT name FROM sys.databases)",
        ],
    ) == [1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1]


def test_case_both_forms(instance: Instance) -> None:
    """language-elements/case-transact-sql.md: the simple form compares with =, so a NULL
    operand matches no WHEN; the searched form takes the first true condition; with no match
    and no ELSE the result is NULL."""
    assert row(
        instance,
        "SELECT CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' END,"
        " CASE 'B' WHEN 'b' THEN 'bee' END, CASE 9 WHEN 1 THEN 'one' END,"
        " CASE NULL WHEN NULL THEN 'null' ELSE 'else' END,"
        " CASE WHEN 1 = 0 THEN 'a' WHEN 2 > 1 THEN 'b' WHEN 3 > 1 THEN 'c' END,"
        " CASE WHEN NULL = NULL THEN 'x' END",
    ) == ["two", "bee", None, "else", "b", None]


# -- scalar functions -------------------------------------------------------------------------
def test_isnull_coalesce_nullif(instance: Instance) -> None:
    """functions/isnull-transact-sql.md (the type of the first argument, so the replacement is
    cut to it; with the NULL constant first, the replacement's type), coalesce-transact-sql.md
    (the first non-NULL, in the type of highest precedence), nullif-transact-sql.md (NULL when
    equal — as strings compare)."""
    assert row(
        instance,
        "DECLARE @short VARCHAR(2), @n INT\n"
        "SELECT ISNULL(@short, 'abcdef'), ISNULL(@n, 5), ISNULL(7, 5), ISNULL(NULL, 'whole'),"
        " COALESCE(@n, NULL, 3, 4), COALESCE(@n, @short), COALESCE(NULL, 'x'),"
        " NULLIF(1, 1), NULLIF(1, 2), NULLIF('a', 'A  ')",
    ) == ["ab", 5, 7, "whole", 3, None, "x", None, 1, None]


def test_concat_len_datalength(instance: Instance) -> None:
    """functions/concat-transact-sql.md (NULL is an empty string; numbers converted), string
    + NULL is NULL (CONCAT_NULL_YIELDS_NULL), len-transact-sql.md (trailing blanks not counted,
    leading ones are), datalength-transact-sql.md (bytes: 2 a character in NVARCHAR)."""
    assert row(
        instance,
        "SELECT CONCAT('a', NULL, 1, N'b', 2.5), 'a' + NULL, LEN('abc  '), LEN('  abc'),"
        " LEN(''), LEN(NULL), LEN(N'ab  '), DATALENGTH(N'abc  '), DATALENGTH('abc  '),"
        " DATALENGTH(N''), DATALENGTH(1), DATALENGTH(CAST(1 AS BIGINT)), DATALENGTH(NULL)",
    ) == ["a1b2.5", None, 3, 5, 0, None, 2, 10, 5, 0, 4, 8, None]


def test_string_functions(instance: Instance) -> None:
    """functions/substring-transact-sql.md (a start before 1 counts the characters before
    it), left-, right-, replace- (case-insensitive under the collation), charindex- (1-based,
    0 when absent, an optional start), upper-, lower-, ltrim-, rtrim-, replicate- (a negative
    count is NULL) and quotename-transact-sql.md (the closing character doubled; an unknown
    quote character is NULL)."""
    assert row(
        instance,
        "DECLARE @none VARCHAR(5)\n"
        "SELECT SUBSTRING('abcdef', 2, 3), SUBSTRING('abcdef', 0, 3), SUBSTRING('abcdef', -1, 3),"
        " SUBSTRING('abc', 5, 2), LEFT('abcdef', 2), RIGHT('abcdef', 2), RIGHT('ab', 5),"
        " LEFT('ab', 0), REPLACE('aXbxc', 'x', '-'), CHARINDEX('c', 'abcabc'),"
        " CHARINDEX('C', 'abcabc', 4), CHARINDEX('z', 'abc'), UPPER('abc'), LOWER('ABC'),"
        " LTRIM('  a ') + '|', RTRIM('  a  ') + '|', REPLICATE('ab', 3), REPLICATE('ab', 0),"
        " REPLICATE('x', -1), QUOTENAME('a]b'), QUOTENAME('it''s', ''''), QUOTENAME('abc', '\"'),"
        " QUOTENAME('x', 'z'), SUBSTRING(@none, 1, 2)",
    ) == [
        "bcd",
        "ab",
        "a",
        "",
        "ab",
        "ef",
        "ab",
        "",
        "a-b-c",
        3,
        6,
        0,
        "ABC",
        "abc",
        "a |",
        "  a|",
        "ababab",
        "",
        None,
        "[a]]b]",
        "'it''s'",
        '"abc"',
        None,
        None,
    ]


def test_getdate_and_getutcdate_follow_the_clock(instance: Instance, clock: ManualClock) -> None:
    """functions/getdate-transact-sql.md, getutcdate-transact-sql.md: the server's local time
    and UTC, here the instance's clock; CURRENT_TIMESTAMP is GETDATE()."""
    local = datetime.fromtimestamp(clock.now())
    utc = datetime.fromtimestamp(clock.now(), UTC).replace(tzinfo=None)
    assert row(instance, "SELECT GETDATE(), GETUTCDATE(), CURRENT_TIMESTAMP") == [
        local,
        utc,
        local,
    ]
    clock.advance(90.5)
    later = local + timedelta(seconds=90.5)
    offset = round((local - utc).total_seconds() / 60)
    assert row(
        instance,
        "SELECT GETDATE(), CONVERT(VARCHAR(23), GETDATE(), 121), CONVERT(VARCHAR(23),"
        " GETUTCDATE(), 121), DATEDIFF(minute, GETUTCDATE(), GETDATE())",
    ) == [
        later,
        later.strftime("%Y-%m-%d %H:%M:%S.500"),
        (utc + timedelta(seconds=90.5)).strftime("%Y-%m-%d %H:%M:%S.500"),
        offset,
    ]


def test_dateadd_and_datediff(instance: Instance) -> None:
    """functions/dateadd-transact-sql.md (a month added to the 31st ends on the last day of a
    shorter month) and datediff-transact-sql.md (the boundaries of the datepart crossed: one
    day from 23:59 to 00:01, one year from Dec 31 to Jan 1; weeks start on Sunday)."""
    assert row(
        instance,
        "SELECT DATEADD(day, 1, '2024-02-28'), DATEADD(month, 1, CAST('2024-01-31' AS DATETIME)),"
        " DATEADD(year, -1, CAST('2024-02-29' AS DATETIME)), DATEADD(hh, 25, '2024-01-01'),"
        " DATEADD(mi, -90, '2024-01-01'), DATEADD(second, 30, '2024-01-01 00:00:45')",
    ) == [
        when("2024-02-29"),
        when("2024-02-29"),
        when("2023-02-28"),
        when("2024-01-02 01:00"),
        when("2023-12-31 22:30"),
        when("2024-01-01 00:01:15"),
    ]
    assert row(
        instance,
        "SELECT DATEDIFF(day, '2024-01-31 23:59', '2024-02-01 00:01'),"
        " DATEDIFF(year, '2023-12-31', '2024-01-01'), DATEDIFF(month, '2024-01-31', '2024-02-01'),"
        " DATEDIFF(second, '2024-01-01 00:00:00', '2024-01-01 01:00:00'),"
        " DATEDIFF(hour, '2024-01-01 10:59', '2024-01-01 11:00'),"
        " DATEDIFF(day, '2024-03-01', '2024-02-01'), DATEDIFF(week, '2024-01-06', '2024-01-07')",
    ) == [1, 1, 1, 3600, 1, -29, 1]


def test_newid(instance: Instance) -> None:
    """functions/newid-transact-sql.md: a unique uniqueidentifier each call (a version 4
    GUID), 16 bytes, written as 36 upper-case characters."""
    first, second, text, size = row(
        instance, "SELECT NEWID(), NEWID(), CAST(NEWID() AS NVARCHAR(36)), DATALENGTH(NEWID())"
    )
    assert isinstance(first, uuid.UUID) and isinstance(second, uuid.UUID)
    assert first != second and first.version == 4
    assert re.fullmatch(
        r"[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}", text
    )
    assert size == 16


def test_db_name_and_db_id(instance: Instance) -> None:
    """functions/db-name-transact-sql.md, db-id-transact-sql.md: without an argument the current
    database; master is database 1; an unknown name or id is NULL; names match without regard
    to case."""
    instance.execute("CREATE DATABASE Shop")
    assert row(
        instance,
        "SELECT DB_NAME(), DB_ID() - DB_ID('SHOP'), DB_NAME(DB_ID('shop')), DB_ID('master'),"
        " DB_NAME(1), DB_ID('nope'), DB_NAME(999)",
        database="shop",
    ) == ["Shop", 0, "Shop", 1, "master", None, None]
    assert row(instance, "SELECT DB_NAME(), DB_ID()") == ["master", 1]


# -- JSON ---------------------------------------------------------------------------------------
JSON_INFO = """DECLARE @j NVARCHAR(MAX) = N'{"info": {"type": 1, "address": {"town": "Bristol",
    "county": "Avon"}, "tags": ["Sport", "Water polo"], "price": 1.50, "ok": true, "gone": null},
    "type": "Basic"}';
"""


def test_json_value_and_json_query_in_lax_and_strict_mode(instance: Instance) -> None:
    """json-value-transact-sql.md's table of paths, lax and strict: a scalar as text (a number
    as written), NULL in lax mode where strict mode raises 13608 (no such property), 13623 (not
    a scalar) or 13624 (JSON_QUERY: not an object or array); text that is not JSON is 13609
    and a bad path 13607 in either mode (json-path-expressions-sql-server.md)."""
    values = row(
        instance,
        JSON_INFO + "SELECT JSON_VALUE(@j, '$.info.type'), JSON_VALUE(@j, '$.info.address.town'),"
        " JSON_VALUE(@j, '$'), JSON_VALUE(@j, '$.info.\"address\"'), JSON_VALUE(@j, '$.info.tags'),"
        " JSON_VALUE(@j, '$.info.type[0]'), JSON_VALUE(@j, 'lax $.info.none'),"
        " JSON_VALUE(@j, '$.info.tags[1]'), JSON_VALUE(@j, '$.info.price'),"
        " JSON_VALUE(@j, '$.info.ok'), JSON_VALUE(@j, 'strict $.info.gone'),"
        " JSON_QUERY(@j, '$.info.tags'), JSON_QUERY(@j, '$.info.type'), JSON_QUERY(@j, 'lax $.x'),"
        " JSON_VALUE(NULL, '$.a')",
    )
    assert values == [
        "1", "Bristol", None, None, None, None, None, "Water polo", "1.50", "true", None,
        '["Sport","Water polo"]', None, None, None,
    ]  # fmt: skip
    for path, number in (
        ("JSON_VALUE(@j, 'strict $')", 13623),
        ("JSON_VALUE(@j, 'strict $.info.tags')", 13623),
        ("JSON_VALUE(@j, 'strict $.info.type[0]')", 13608),
        ("JSON_VALUE(@j, 'strict $.info.none')", 13608),
        ("JSON_QUERY(@j, 'strict $.type')", 13624),
        ("JSON_VALUE(@j, '$.info..type')", 13607),
        ("JSON_VALUE(@j, 'info.type')", 13607),
        ("JSON_VALUE(N'{not valid}', 'lax $.x')", 13609),
    ):
        error, _ = failing(instance, JSON_INFO + f"SELECT {path}")
        assert error.number == number, path
    error, _ = failing(instance, "SELECT JSON_VALUE(N'{not valid}', '$.x')")
    assert str(error) == (
        "JSON text is not properly formatted. Unexpected character 'n' is found at position 1."
    )


def test_isjson_and_json_in_a_message_body(instance: Instance) -> None:
    """isjson-transact-sql.md: 1 for JSON text (an object or an array), 0 otherwise, NULL for
    NULL, never an error; an activation procedure reads a JSON body it RECEIVEs (cast from
    varbinary) with JSON_VALUE."""
    assert row(
        instance, "SELECT ISJSON(N'{\"a\": [1, 2]}'), ISJSON(N'[]'), ISJSON(N'{x'), ISJSON(N'1'),"
        " ISJSON(NULL), ISJSON(N'')",
    ) == [1, 1, 0, 0, None, 0]  # fmt: skip
    values = row(
        instance,
        "CREATE QUEUE q; CREATE SERVICE s ON QUEUE q ([DEFAULT]);"
        "DECLARE @h UNIQUEIDENTIFIER, @body VARBINARY(MAX);"
        "BEGIN DIALOG @h FROM SERVICE s TO SERVICE 's' WITH ENCRYPTION = OFF;"
        'SEND ON CONVERSATION @h (CAST(\'{"order": {"id": 7, "sku": "A-1"}}\' AS VARBINARY(MAX)));'
        "RECEIVE TOP (1) @body = message_body FROM q;"
        "DECLARE @text VARCHAR(MAX) = CAST(@body AS VARCHAR(MAX));"
        "SELECT ISJSON(@text), CAST(JSON_VALUE(@text, '$.order.id') AS INT),"
        " JSON_VALUE(@text, '$.order.sku')",
    )
    assert values == [1, 7, "A-1"]
