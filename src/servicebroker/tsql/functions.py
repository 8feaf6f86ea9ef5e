"""T-SQL's scalar functions (ISNULL, COALESCE, CONCAT, LEN, SUBSTRING, QUOTENAME, GETDATE,
DATEADD, DATEDIFF, NEWID, OBJECT_ID, DB_NAME, ERROR_MESSAGE(), XACT_STATE(), …) on evaluated
arguments, with SQL Server's NULL rules and errors (174 a wrong argument count, 155 an unknown
datepart). A datepart (``DATEADD(day, …)``) arrives as its word, in a VARCHAR.
"""

from __future__ import annotations

import calendar
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal

from .comparison import compare
from .identity import IDENTITY_FUNCTIONS
from .json_functions import JSON_FUNCTIONS
from .scope import Scope, arity, fail, to_type
from .types import (
    BIGINT,
    DATETIME,
    DATETIME2,
    INT,
    NVARCHAR,
    SYSNAME,
    UNIQUEIDENTIFIER,
    UNTYPED_NULL,
    SqlType,
    Typed,
    fit_date,
    precedence_of,
)

__all__ = ["AGGREGATES", "DATEPART_FUNCTIONS", "FUNCTIONS"]

AGGREGATES = {"COUNT", "COUNT_BIG", "SUM", "MIN", "MAX", "AVG"}


def _text(value: Typed, scope: Scope) -> str | None:
    if value.value is None:
        return None
    return str(to_type(value, SqlType("NVARCHAR"), scope))


def _int(value: Typed, scope: Scope) -> int | None:
    if value.value is None:
        return None
    result = to_type(value, BIGINT, scope)
    assert isinstance(result, int)
    return result


_DATEPARTS = {
    "year": "year", "yy": "year", "yyyy": "year",
    "quarter": "quarter", "qq": "quarter", "q": "quarter",
    "month": "month", "mm": "month", "m": "month",
    "dayofyear": "day", "dy": "day", "y": "day",
    "day": "day", "dd": "day", "d": "day",
    "week": "week", "wk": "week", "ww": "week",
    "hour": "hour", "hh": "hour",
    "minute": "minute", "mi": "minute", "n": "minute",
    "second": "second", "ss": "second", "s": "second",
    "millisecond": "millisecond", "ms": "millisecond",
    "microsecond": "microsecond", "mcs": "microsecond",
}  # fmt: skip


def _datepart(value: Typed, scope: Scope) -> str:
    word = (_text(value, scope) or "").lower()
    if word not in _DATEPARTS:
        raise fail(155, f"'{word}' is not a recognized datepart option.", scope, severity=15)
    return _DATEPARTS[word]


class _DateOverflow(Exception):
    """DATEADD left the years 1 to 9999 (Msg 517)."""


def _date_add(part: str, number: int, when: datetime) -> datetime:
    """``when`` plus ``number`` ``part``s, the day of month cut to the month's last.

    Raises:
        _DateOverflow: the result is outside the years 1 to 9999.
    """
    if part in ("year", "quarter", "month"):
        months = number * {"year": 12, "quarter": 3, "month": 1}[part]
        month0 = when.month - 1 + months
        year = when.year + month0 // 12
        month = month0 % 12 + 1
        if not 1 <= year <= 9999:
            raise _DateOverflow
        day = min(when.day, calendar.monthrange(year, month)[1])
        return when.replace(year=year, month=month, day=day)
    seconds = {
        "day": 86400.0,
        "week": 7 * 86400.0,
        "hour": 3600.0,
        "minute": 60.0,
        "second": 1.0,
        "millisecond": 0.001,
        "microsecond": 0.000001,
    }[part]
    try:
        return when + timedelta(seconds=number * seconds)
    except OverflowError:
        raise _DateOverflow from None


def _date_diff(part: str, start: datetime, end: datetime) -> int:
    if part == "year":
        return end.year - start.year
    if part == "quarter":
        return (end.year - start.year) * 4 + (end.month - 1) // 3 - (start.month - 1) // 3
    if part == "month":
        return (end.year - start.year) * 12 + end.month - start.month
    if part == "day":
        return (end.date() - start.date()).days
    if part == "week":
        return (
            (end.date() - start.date()).days + (start.weekday() + 1) % 7 - (end.weekday() + 1) % 7
        ) // 7
    unit = {"hour": 3600, "minute": 60, "second": 1, "millisecond": 0.001, "microsecond": 0.000001}[
        part
    ]
    floor = {"hour": "%Y%m%d%H", "minute": "%Y%m%d%H%M", "second": "%Y%m%d%H%M%S"}
    if part in floor:
        s = datetime.strptime(start.strftime(floor[part]), floor[part])
        e = datetime.strptime(end.strftime(floor[part]), floor[part])
        return int((e - s).total_seconds() // unit)
    return int((end - start).total_seconds() / unit)


def _isnull(args: list[Typed], scope: Scope) -> Typed:
    value, fallback = arity(args, scope, 2, "ISNULL")
    if value.value is not None:
        return value
    if value is UNTYPED_NULL:  # ISNULL(NULL, x) has x's type (isnull-transact-sql.md)
        return fallback
    return Typed(
        to_type(fallback, value.type, scope) if fallback.value is not None else None, value.type
    )


def _coalesce(args: list[Typed], scope: Scope) -> Typed:
    values = arity(args, scope, (2, 255), "COALESCE")
    typed = [v for v in values if v is not UNTYPED_NULL]  # the NULL constant has no type
    if not typed:
        raise fail(
            4127,
            "At least one of the arguments to COALESCE must be a typed NULL.",
            scope,
        )
    result_type = typed[0].type
    for v in typed[1:]:
        result_type = precedence_of(result_type, v.type)
    for v in values:
        if v.value is not None:
            return Typed(to_type(v, result_type, scope), result_type)
    return Typed(None, result_type)


def _concat(args: list[Typed], scope: Scope) -> Typed:
    values = arity(args, scope, (2, 254), "CONCAT")
    unicode_ = any(v.type.is_unicode for v in values)
    text = "".join(_text(v, scope) or "" for v in values)
    return Typed(text, SqlType("NVARCHAR" if unicode_ else "VARCHAR"))


def _string_function(
    fn: Callable[[str, list[Typed]], object],
    count: int | tuple[int, int],
    name: str,
    result: SqlType | None = None,
) -> Callable[[list[Typed], Scope], Typed]:
    def run(args: list[Typed], scope: Scope) -> Typed:
        values = arity(args, scope, count, name)
        first = values[0]
        type_ = result or (first.type if first.type.is_character else NVARCHAR)
        if any(v.value is None for v in values):
            return Typed(None, type_)
        text = _text(first, scope)
        assert text is not None
        return Typed(fn(text, values[1:]), type_)

    return run


def _substring(text: str, rest: list[Typed]) -> str:
    start, length = (int(v.value) for v in rest)  # type: ignore[call-overload]
    begin = max(start, 1)
    end = start + length
    return text[begin - 1 : max(end - 1, begin - 1)]


def _charindex(args: list[Typed], scope: Scope) -> Typed:
    values = arity(args, scope, (2, 3), "CHARINDEX")
    if any(v.value is None for v in values):
        return Typed(None, INT)
    needle = (_text(values[0], scope) or "").casefold()
    haystack = (_text(values[1], scope) or "").casefold()
    start = max(_int(values[2], scope) or 1, 1) if len(values) > 2 else 1
    return Typed(haystack.find(needle, start - 1) + 1, INT)


def _quotename(args: list[Typed], scope: Scope) -> Typed:
    values = arity(args, scope, (1, 2), "QUOTENAME")
    if values[0].value is None:
        return Typed(None, SqlType("NVARCHAR", 258))
    text = _text(values[0], scope) or ""
    quote = (_text(values[1], scope) or "[") if len(values) > 1 else "["
    if len(text) > 128:
        return Typed(None, SqlType("NVARCHAR", 258))
    pairs = {
        "[": ("[", "]"),
        "]": ("[", "]"),
        "'": ("'", "'"),
        '"': ('"', '"'),
        "(": ("(", ")"),
        ")": ("(", ")"),
        "<": ("<", ">"),
        ">": ("<", ">"),
        "{": ("{", "}"),
        "}": ("{", "}"),
        "`": ("`", "`"),
    }
    if quote[:1] not in pairs:
        return Typed(None, SqlType("NVARCHAR", 258))
    open_, close = pairs[quote[:1]]
    return Typed(open_ + text.replace(close, close * 2) + close, SqlType("NVARCHAR", 258))


def _len(args: list[Typed], scope: Scope) -> Typed:
    (value,) = arity(args, scope, 1, "LEN")
    if value.value is None:
        return Typed(None, INT)
    if isinstance(value.value, bytes):
        return Typed(len(value.value), INT)
    return Typed(len((_text(value, scope) or "").rstrip(" ")), INT)


def _datalength(args: list[Typed], scope: Scope) -> Typed:
    (value,) = arity(args, scope, 1, "DATALENGTH")
    v = value.value
    if v is None:
        return Typed(None, INT)
    if isinstance(v, bytes):
        return Typed(len(v), INT)
    if isinstance(v, str):
        return Typed(len(v) * (2 if value.type.is_unicode else 1), INT)
    if isinstance(v, uuid.UUID):
        return Typed(16, INT)
    if isinstance(v, int):
        return Typed(
            {"BIGINT": 8, "SMALLINT": 2, "TINYINT": 1, "BIT": 1}.get(value.type.name, 4), INT
        )
    return Typed(8, INT)


def _date_type(value: Typed) -> SqlType:
    """The type a date argument is read as: its own date type, or DATETIME for a string."""
    return value.type if value.type.is_date else DATETIME


def _dateadd(args: list[Typed], scope: Scope) -> Typed:
    if len(args) != 3:
        raise fail(174, "The dateadd function requires 3 argument(s).", scope, severity=15)
    part = _datepart(args[0], scope)
    number = args[1]
    when = args[2]
    if number.value is None or when.value is None:
        return Typed(None, DATETIME)
    type_ = _date_type(when)
    when_value = to_type(when, type_, scope)
    assert isinstance(when_value, datetime)
    try:
        added = _date_add(part, _int(number, scope) or 0, when_value)
    except _DateOverflow:
        raise fail(
            517, f"Adding a value to a '{type_.name.lower()}' column caused an overflow.", scope
        ) from None
    return Typed(fit_date(added, type_.name), type_)


def _datediff(args: list[Typed], scope: Scope) -> Typed:
    if len(args) != 3:
        raise fail(174, "The datediff function requires 3 argument(s).", scope, severity=15)
    part = _datepart(args[0], scope)
    start = args[1]
    end = args[2]
    if start.value is None or end.value is None:
        return Typed(None, INT)
    s = to_type(start, _date_type(start), scope)
    e = to_type(end, _date_type(end), scope)
    assert isinstance(s, datetime) and isinstance(e, datetime)
    return Typed(_date_diff(part, s, e), INT)


def _error_function(field: str) -> Callable[[list[Typed], Scope], Typed]:
    def run(args: list[Typed], scope: Scope) -> Typed:
        arity(args, scope, 0, f"ERROR_{field.upper()}")
        caught = scope.caught()
        type_ = NVARCHAR if field in ("message", "procedure") else INT
        if caught is None:
            return Typed(None, type_)
        return Typed(getattr(caught, field), type_)

    return run


def _object_id(args: list[Typed], scope: Scope) -> Typed:
    values = arity(args, scope, (1, 2), "OBJECT_ID")
    name = _text(values[0], scope)
    if name is None:
        return Typed(None, INT)
    return Typed(scope.object_id(name), INT)


def _db_id(args: list[Typed], scope: Scope) -> Typed:
    values = arity(args, scope, (0, 1), "DB_ID")
    name = _text(values[0], scope) if values else None
    return Typed(scope.database_id(name), SqlType("SMALLINT"))


def _db_name(args: list[Typed], scope: Scope) -> Typed:
    values = arity(args, scope, (0, 1), "DB_NAME")
    number = _int(values[0], scope) if values else None
    return Typed(scope.database_name(number), SYSNAME)


def _abs(args: list[Typed], scope: Scope) -> Typed:
    (value,) = arity(args, scope, 1, "ABS")
    if value.value is None:
        return value
    return Typed(abs(value.value), value.type)  # type: ignore[arg-type]


def _count(value: Typed) -> int:
    number = value.value
    assert isinstance(number, int | Decimal | float)
    return int(number)


def _replicate(text: str, rest: list[Typed]) -> str | None:
    count = _count(rest[0])
    return (
        None if count < 0 else text * count
    )  # a negative count is NULL (replicate-transact-sql.md)


def _nullif(args: list[Typed], scope: Scope) -> Typed:
    a, b = arity(args, scope, 2, "NULLIF")
    if compare("=", a, b, scope) is True:
        return Typed(None, a.type)
    return a


def _now(args: list[Typed], scope: Scope) -> Typed:
    return Typed(fit_date(scope.now(), "DATETIME"), DATETIME)


def _utc_now(args: list[Typed], scope: Scope) -> Typed:
    return Typed(fit_date(scope.utc_now(), "DATETIME"), DATETIME)


def _sys_now(args: list[Typed], scope: Scope) -> Typed:
    return Typed(scope.now(), DATETIME2)  # SYSDATETIME(): datetime2(7), no rounding


def _sys_utc_now(args: list[Typed], scope: Scope) -> Typed:
    return Typed(scope.utc_now(), DATETIME2)


def _xact_state(args: list[Typed], scope: Scope) -> Typed:
    return Typed(scope.xact_state(), SqlType("SMALLINT"))


def _cursor_status(args: list[Typed], scope: Scope) -> Typed:
    """CURSOR_STATUS('local' | 'global' | 'variable', name) (cursor-status-transact-sql.md)."""
    kind, name = (_text(a, scope) or "" for a in arity(args, scope, 2, "cursor_status"))
    return Typed(scope.cursor_status(kind, name), SqlType("SMALLINT"))


def _newid(args: list[Typed], scope: Scope) -> Typed:
    return Typed(uuid.uuid4(), UNIQUEIDENTIFIER)


def _constant(value: object, type_: SqlType) -> Callable[[list[Typed], Scope], Typed]:
    return lambda args, scope: Typed(value, type_)


FUNCTIONS: Mapping[str, Callable[[list[Typed], Scope], Typed]] = {
    "ISNULL": _isnull,
    "COALESCE": _coalesce,
    "NULLIF": _nullif,
    "CONCAT": _concat,
    "LEN": _len,
    "DATALENGTH": _datalength,
    "UPPER": _string_function(lambda s, r: s.upper(), 1, "UPPER"),
    "LOWER": _string_function(lambda s, r: s.lower(), 1, "LOWER"),
    "LTRIM": _string_function(lambda s, r: s.lstrip(" "), 1, "LTRIM"),
    "RTRIM": _string_function(lambda s, r: s.rstrip(" "), 1, "RTRIM"),
    "TRIM": _string_function(lambda s, r: s.strip(" "), 1, "TRIM"),
    "REVERSE": _string_function(lambda s, r: s[::-1], 1, "REVERSE"),
    "SUBSTRING": _string_function(_substring, 3, "SUBSTRING"),
    "LEFT": _string_function(lambda s, r: s[: max(_count(r[0]), 0)], 2, "LEFT"),
    "RIGHT": _string_function(
        lambda s, r: s[len(s) - max(_count(r[0]), 0) :] if _count(r[0]) > 0 else "", 2, "RIGHT"
    ),
    "REPLACE": _string_function(
        lambda s, r: (
            re.sub(re.escape(str(r[0].value)), lambda m: str(r[1].value), s, flags=re.I)
            if r[0].value
            else s
        ),
        3,
        "REPLACE",
    ),
    "REPLICATE": _string_function(_replicate, 2, "REPLICATE"),
    "CHARINDEX": _charindex,
    "QUOTENAME": _quotename,
    "GETDATE": _now,
    "SYSDATETIME": _sys_now,
    "CURRENT_TIMESTAMP": _now,
    "GETUTCDATE": _utc_now,
    "SYSUTCDATETIME": _sys_utc_now,
    "DATEADD": _dateadd,
    "DATEDIFF": _datediff,
    "NEWID": _newid,
    "OBJECT_ID": _object_id,
    "DB_ID": _db_id,
    "DB_NAME": _db_name,
    "ERROR_NUMBER": _error_function("number"),
    "ERROR_MESSAGE": _error_function("message"),
    "ERROR_SEVERITY": _error_function("severity"),
    "ERROR_STATE": _error_function("state"),
    "ERROR_LINE": _error_function("line"),
    "ERROR_PROCEDURE": _error_function("procedure"),
    "XACT_STATE": _xact_state,
    "CURSOR_STATUS": _cursor_status,
    "ABS": _abs,
    **IDENTITY_FUNCTIONS,  # USER_NAME, SUSER_SNAME, SUSER_NAME, ORIGINAL_LOGIN
    **JSON_FUNCTIONS,  # JSON_VALUE, JSON_QUERY, ISJSON
    "SCHEMA_NAME": _constant("dbo", SYSNAME),
}

DATEPART_FUNCTIONS = frozenset({"DATEADD", "DATEDIFF", "DATEPART", "DATENAME"})
"""The functions whose first argument is a datepart word, not an expression."""
