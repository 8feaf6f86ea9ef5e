"""T-SQL's data types and SQL Server's conversions between them (cast-and-convert-transact-sql.md,
data-type-precedence-transact-sql.md), on Python values: ``None`` is NULL; the integer types
and BIT are :class:`int`; DECIMAL, NUMERIC and MONEY :class:`~decimal.Decimal`; FLOAT and REAL
:class:`float`; the character types and XML :class:`str`; the binary types :class:`bytes`;
UNIQUEIDENTIFIER :class:`uuid.UUID`; the date and time types :class:`~datetime.datetime`.

A value travels with its type (:class:`Typed`), for SQL Server converts by type: an NVARCHAR
becomes VARBINARY as UTF-16LE, a VARCHAR as its code page (Windows-1252, the default
collation's); a VARBINARY read as NVARCHAR is decoded as UTF-16LE. Conversions that SQL Server
refuses raise :class:`ConversionFailed`, which the interpreter reports with SQL Server's number.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import NamedTuple

from .xml_values import XmlSyntaxError, normalize

__all__ = [
    "BIGINT",
    "BIT",
    "DATETIME",
    "DATETIME2",
    "INT",
    "NVARCHAR",
    "NVARCHAR_MAX",
    "SYSNAME",
    "UNIQUEIDENTIFIER",
    "UNTYPED_NULL",
    "VARBINARY_MAX",
    "VARCHAR",
    "XML",
    "ConversionFailed",
    "SqlType",
    "Typed",
    "convert",
    "decimal_shape",
    "display",
    "fit_date",
    "parse_type",
    "precedence_of",
]

CODE_PAGE = "cp1252"
"""The code page of VARCHAR values (SQL_Latin1_General_CP1_CI_AS, SQL Server's default)."""

_INTEGERS = {"BIGINT": 8, "INT": 4, "SMALLINT": 2, "TINYINT": 1, "BIT": 1}
_CHARS = {"CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "TEXT", "NTEXT", "SYSNAME"}
_BINARIES = {"BINARY", "VARBINARY", "IMAGE"}
_EXACT = {"DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY"}
_APPROX = {"FLOAT", "REAL"}
_DATES = {"DATETIME", "DATETIME2", "SMALLDATETIME", "DATE", "DATETIMEOFFSET", "TIME"}
KNOWN = (
    set(_INTEGERS) | _CHARS | _BINARIES | _EXACT | _APPROX | _DATES | {"UNIQUEIDENTIFIER", "XML"}
)
"""Every type name the interpreter knows."""

# data-type-precedence-transact-sql.md: the higher wins when two types meet
_PRECEDENCE = [
    "XML",
    "DATETIMEOFFSET",
    "DATETIME2",
    "DATETIME",
    "SMALLDATETIME",
    "DATE",
    "TIME",
    "FLOAT",
    "REAL",
    "DECIMAL",
    "NUMERIC",
    "MONEY",
    "SMALLMONEY",
    "BIGINT",
    "INT",
    "SMALLINT",
    "TINYINT",
    "BIT",
    "NTEXT",
    "TEXT",
    "IMAGE",
    "UNIQUEIDENTIFIER",
    "NVARCHAR",
    "NCHAR",
    "VARCHAR",
    "CHAR",
    "VARBINARY",
    "BINARY",
]


class ConversionFailed(Exception):
    """A value SQL Server cannot convert: ``number`` is its error (245, 8114, 8169, 241, …)
    and the message its text."""

    def __init__(self, number: int, message: str) -> None:
        super().__init__(message)
        self.number = number


@dataclass(frozen=True)
class SqlType:
    """A T-SQL data type: ``name`` upper case (``"NVARCHAR"``), ``length`` in characters for the
    character types and bytes for the binary ones (``None``: MAX, or no length), the precision
    of a DECIMAL (and the digits of an integer constant), ``scale`` for DECIMAL."""

    name: str
    length: int | None = None
    scale: int | None = None

    @property
    def is_unicode(self) -> bool:
        """NCHAR, NVARCHAR, SYSNAME, XML: text kept as UTF-16 when it becomes bytes."""
        return self.name in ("NCHAR", "NVARCHAR", "NTEXT", "SYSNAME", "XML")

    @property
    def is_character(self) -> bool:
        """A character type."""
        return self.name in _CHARS

    @property
    def is_binary(self) -> bool:
        """BINARY or VARBINARY."""
        return self.name in _BINARIES

    @property
    def is_integer(self) -> bool:
        """An integer type (BIT included)."""
        return self.name in _INTEGERS

    @property
    def is_numeric(self) -> bool:
        """A number type: integer, exact or approximate."""
        return self.name in _INTEGERS or self.name in _EXACT or self.name in _APPROX

    @property
    def is_date(self) -> bool:
        """A date or time type."""
        return self.name in _DATES

    def __str__(self) -> str:
        if self.name in ("VARCHAR", "NVARCHAR", "VARBINARY", "CHAR", "NCHAR", "BINARY"):
            return f"{self.name.lower()}({'max' if self.length is None else self.length})"
        return self.name.lower()


INT = SqlType("INT")
BIGINT = SqlType("BIGINT")
BIT = SqlType("BIT")
VARCHAR = SqlType("VARCHAR", 8000)
NVARCHAR = SqlType("NVARCHAR", 4000)
NVARCHAR_MAX = SqlType("NVARCHAR")
SYSNAME = SqlType("NVARCHAR", 128)
VARBINARY_MAX = SqlType("VARBINARY")
UNIQUEIDENTIFIER = SqlType("UNIQUEIDENTIFIER")
DATETIME = SqlType("DATETIME")
DATETIME2 = SqlType("DATETIME2")
XML = SqlType("XML")
DECIMAL = SqlType("DECIMAL", 18, 0)
FLOAT = SqlType("FLOAT")


class Typed(NamedTuple):
    """A value and its T-SQL type (``value`` None: NULL of that type)."""

    value: object
    type: SqlType


UNTYPED_NULL = Typed(None, INT)
"""The NULL constant as evaluated: an INT NULL, told apart (by identity) where SQL Server gives
the constant no type of its own — ISNULL(NULL, x) and COALESCE(NULL, x) take x's type."""


def parse_type(name: str, size: str | None = None, scale: int | None = None) -> SqlType:
    """The type ``name(size[, scale])`` as a declaration writes it (``size`` ``"MAX"`` or a
    number as text). SYSNAME is NVARCHAR(128); a character or binary type without a size has
    length 1 (as DECLARE reads it); DECIMAL defaults to (18, 0).

    Raises:
        KeyError: an unknown type name (the interpreter's Msg 2715).
        ValueError: a size that is not a number or MAX, or MAX on a type without it.
    """
    upper = name.upper()
    if upper not in KNOWN:
        raise KeyError(name)
    if upper == "SYSNAME":
        return SYSNAME
    if upper in ("TEXT", "NTEXT", "IMAGE"):
        return SqlType({"TEXT": "VARCHAR", "NTEXT": "NVARCHAR", "IMAGE": "VARBINARY"}[upper])
    if upper in ("CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "BINARY", "VARBINARY"):
        if size is None:
            return SqlType(upper, 1)
        if size.upper() == "MAX":
            if upper in ("CHAR", "NCHAR", "BINARY"):
                raise ValueError(f"{upper} cannot be MAX")
            return SqlType(upper)
        return SqlType(upper, int(size))
    if upper in ("DECIMAL", "NUMERIC"):
        return SqlType("DECIMAL", int(size) if size else 18, scale or 0)
    return SqlType(upper)


_EXACT_SHAPES = {
    "BIGINT": (19, 0),
    "INT": (10, 0),
    "SMALLINT": (5, 0),
    "TINYINT": (3, 0),
    "BIT": (1, 0),
    "MONEY": (19, 4),
    "SMALLMONEY": (10, 4),
}


def decimal_shape(t: SqlType) -> tuple[int, int] | None:
    """The precision and scale of exact numeric type ``t`` as a DECIMAL (INT is (10, 0), MONEY
    (19, 4), an integer constant its digits; precision-scale-and-length-transact-sql.md), or
    None for another type."""
    if t.name == "DECIMAL":
        return (t.length or 38, t.scale or 0)
    if t.name in _INTEGERS and t.length is not None:
        return (t.length, 0)  # an integer constant: its own digits
    return _EXACT_SHAPES.get(t.name)


def precedence_of(a: SqlType, b: SqlType) -> SqlType:
    """The type an operation on ``a`` and ``b`` is done in (the one of higher precedence); two
    character types give the Unicode one when either is; a DECIMAL and another exact numeric
    give the DECIMAL that holds both (the integer digits of the wider, the larger scale)."""
    if a.name == "DECIMAL" or b.name == "DECIMAL":
        shape_a, shape_b = decimal_shape(a), decimal_shape(b)
        if shape_a is not None and shape_b is not None:
            scale = max(shape_a[1], shape_b[1])
            integral = max(shape_a[0] - shape_a[1], shape_b[0] - shape_b[1])
            return SqlType("DECIMAL", min(38, integral + scale), scale)
    ra = _PRECEDENCE.index(a.name) if a.name in _PRECEDENCE else len(_PRECEDENCE)
    rb = _PRECEDENCE.index(b.name) if b.name in _PRECEDENCE else len(_PRECEDENCE)
    if a.is_character and b.is_character:
        unicode_ = a.is_unicode or b.is_unicode
        if a.length is None or b.length is None:
            return SqlType("NVARCHAR" if unicode_ else "VARCHAR")
        longest = max(a.length, b.length)
        return SqlType("NVARCHAR" if unicode_ else "VARCHAR", longest)
    return a if ra <= rb else b


_GUID = re.compile(
    r"\s*\{?([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
)
_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*$")
_DATE_FORMATS = (
    "%Y-%m-%d %H:%M:%S.%f",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S.%f",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
    "%Y%m%d %H:%M:%S",
    "%Y%m%d",
    "%H:%M:%S.%f",  # a time alone is on 1900-01-01, as SQL Server takes it
    "%H:%M:%S",
    "%H:%M",
)


def _text_of(value: object, source: SqlType) -> str:
    """A value's text as CAST(… AS NVARCHAR) writes it (style 0)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        if source.is_binary:
            raise AssertionError("binary text is decoded by the caller")
        return value.decode("utf-8", "replace")
    if isinstance(value, uuid.UUID):
        return str(value).upper()
    if isinstance(value, datetime):
        # style 0: mon dd yyyy hh:miAM
        hour = value.hour % 12 or 12
        return (
            f"{value.strftime('%b')} {value.day:2d} {value.year} {hour:2d}:{value.minute:02d}"
            f"{'AM' if value.hour < 12 else 'PM'}"
        )
    if isinstance(value, float):
        return repr(value) if value != int(value) or abs(value) >= 1e15 else str(int(value))
    return str(value)


def _type_desc(t: SqlType) -> str:
    return str(t)


def _numeric_name(t: SqlType) -> str:
    """A type's name as SQL Server's arithmetic overflow message writes it."""
    return "numeric" if t.name == "DECIMAL" else t.name.lower()


def convert(value: object, source: SqlType, target: SqlType, *, style: int | None = None) -> object:
    """``value`` of type ``source`` as type ``target`` (CAST, CONVERT, and the implicit
    conversion of an assignment). Character targets are cut to their length, as an assignment
    cuts them.

    Raises:
        ConversionFailed: SQL Server's conversion errors (245 varchar to int, 8169 text to
            uniqueidentifier, 241 text to datetime, 8114 text to numeric, 9400-range XML
            parse errors as 9400).
    """
    if value is None:
        return None
    name = target.name
    if name in _CHARS or name == "XML":
        if isinstance(value, bytes) and source.is_binary:
            if name == "XML":
                text = _xml_text(value)
            elif target.is_unicode:
                text = value[: len(value) - len(value) % 2].decode("utf-16-le", "replace")
            else:
                text = value.decode(CODE_PAGE, "replace")
        elif isinstance(value, datetime) and style is not None and style in (120, 121, 126, 127):
            text = value.strftime(
                "%Y-%m-%dT%H:%M:%S.%f" if style in (126, 127) else "%Y-%m-%d %H:%M:%S.%f"
            )[:-3]
            if style == 120:
                text = text[:19]
        else:
            text = _text_of(value, source)
        if name == "XML":  # kept as SQL Server keeps xml: parsed, then serialized (xml_values)
            try:
                return normalize(text) if text.strip() else ""
            except XmlSyntaxError as exc:
                raise ConversionFailed(9400, str(exc)) from None
        if target.length is not None and len(text) > target.length:
            # a number that does not fit: an int is '*' in CHAR and VARCHAR, an error in NCHAR
            # and NVARCHAR, as any other number is (cast-and-convert-transact-sql.md,
            # "Truncating and rounding results")
            if isinstance(value, int) and not isinstance(value, bool) and not target.is_unicode:
                return "*"
            if isinstance(value, int | Decimal | float) and not isinstance(value, bool):
                what = "expression" if isinstance(value, int) else _numeric_name(source)
                raise ConversionFailed(
                    8115,
                    f"Arithmetic overflow error converting {what} to data type {name.lower()}.",
                )
            text = text[: target.length]
        if name in ("CHAR", "NCHAR") and target.length is not None:
            text = text.ljust(target.length)  # fixed length: padded with blanks (char-and-varchar)
        return text
    if name in _BINARIES:
        if isinstance(value, bytes):
            data = value
        elif isinstance(value, str):
            data = (
                value.encode("utf-16-le", "surrogatepass")
                if source.is_unicode
                else value.encode(CODE_PAGE, "replace")
            )
        elif isinstance(value, uuid.UUID):
            data = value.bytes_le
        elif isinstance(value, bool | int):
            size = _INTEGERS.get(source.name, 4)
            data = int(value).to_bytes(size, "big", signed=True)
        else:
            raise ConversionFailed(
                529,
                f"Explicit conversion from data type {_type_desc(source)} to {_type_desc(target)} is not allowed.",
            )
        if target.length is not None:
            data = data[: target.length]
        return data
    if name in _INTEGERS:
        if isinstance(value, bytes):
            number = int.from_bytes(value[-_INTEGERS[name] :], "big", signed=True) if value else 0
        elif isinstance(value, str):
            if name == "BIT" and value.strip().upper() in ("TRUE", "FALSE"):
                return 1 if value.strip().upper() == "TRUE" else 0
            if not _INT_TEXT.match(value):
                raise ConversionFailed(
                    245,
                    f"Conversion failed when converting the {_type_desc(source).split('(')[0]} "
                    f"value '{value}' to data type {name.lower()}.",
                )
            number = int(value)
        elif isinstance(value, (Decimal, float, int)):
            number = int(value)
        else:
            raise ConversionFailed(
                529,
                f"Explicit conversion from data type {_type_desc(source)} to {name.lower()} is not allowed.",
            )
        if name == "BIT":
            return 1 if number else 0
        bits = _INTEGERS[name] * 8
        if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)) or (
            name == "TINYINT" and number < 0
        ):
            raise ConversionFailed(
                8115,
                f"Arithmetic overflow error converting expression to data type {name.lower()}.",
            )
        return number
    if name in _EXACT:
        try:
            exact = Decimal(value.strip()) if isinstance(value, str) else Decimal(str(value))
        except (InvalidOperation, TypeError):
            raise ConversionFailed(
                8114, f"Error converting data type {_type_desc(source)} to numeric."
            ) from None
        if not exact.is_finite():
            raise ConversionFailed(
                8114, f"Error converting data type {_type_desc(source)} to numeric."
            )
        if target.scale is not None:
            # numeric to numeric rounds, half away from zero (cast-and-convert-transact-sql.md)
            exact = exact.quantize(Decimal(1).scaleb(-target.scale), rounding=ROUND_HALF_UP)
        if (
            name == "DECIMAL"
            and target.length is not None
            and exact != 0
            and exact.adjusted() >= target.length - (target.scale or 0)
        ):
            raise ConversionFailed(
                8115,
                f"Arithmetic overflow error converting {_numeric_name(source)} to data type numeric.",
            )
        return exact
    if name in _APPROX:
        try:
            return float(value.strip()) if isinstance(value, str) else float(value)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            raise ConversionFailed(
                8114, f"Error converting data type {_type_desc(source)} to float."
            ) from None
    if name == "UNIQUEIDENTIFIER":
        if isinstance(value, uuid.UUID):
            return value
        if isinstance(value, bytes):
            if len(value) < 16:
                raise ConversionFailed(
                    8169,
                    "Conversion failed when converting from a character string to uniqueidentifier.",
                )
            return uuid.UUID(bytes_le=value[:16])
        if isinstance(value, str):
            match = _GUID.match(value)
            if match is None:
                raise ConversionFailed(
                    8169,
                    "Conversion failed when converting from a character string to uniqueidentifier.",
                )
            return uuid.UUID(match.group(1))
        raise ConversionFailed(
            529,
            f"Explicit conversion from data type {_type_desc(source)} to uniqueidentifier is not allowed.",
        )
    if name in _DATES:
        if isinstance(value, datetime):
            return fit_date(value, name)
        if isinstance(value, str):
            text = value.strip()
            for fmt in _DATE_FORMATS:
                try:
                    return fit_date(datetime.strptime(text, fmt), name)
                except ValueError:
                    continue
            raise ConversionFailed(
                241, "Conversion failed when converting date and/or time from character string."
            )
        raise ConversionFailed(
            529,
            f"Explicit conversion from data type {_type_desc(source)} to {name.lower()} is not allowed.",
        )
    raise ConversionFailed(
        529,
        f"Explicit conversion from data type {_type_desc(source)} to {_type_desc(target)} is not allowed.",
    )


def fit_date(value: datetime, name: str) -> datetime:
    """``value`` as date and time type ``name`` holds it: a DATE has no time, a SMALLDATETIME
    is rounded to the minute (29.999 seconds and up go up), a DATETIME to its ticks of 1/300
    second, shown as .000, .003 or .007, after finer fractions are cut
    (datetime-transact-sql.md, smalldatetime-…, date-…)."""
    if name == "DATE":
        return value.replace(hour=0, minute=0, second=0, microsecond=0)
    if name == "SMALLDATETIME":
        minute = value.replace(second=0, microsecond=0)
        late = value.second * 1_000_000 + value.microsecond >= 29_999_000
        return minute + timedelta(minutes=1) if late else minute
    if name == "DATETIME":
        # finer fractions are cut to the millisecond, which is rounded to ticks of 1/300 s
        ticks = (value.microsecond // 1000 * 3 + 5) // 10
        milliseconds = (ticks * 10 + 1) // 3  # the tick as SQL Server shows it, to the ms
        return value.replace(microsecond=0) + timedelta(milliseconds=milliseconds)
    return value


def _xml_text(body: bytes) -> str:
    """The text of an XML value stored as bytes: UTF-16 when it says so (a BOM, or ``<`` as
    UTF-16LE), else UTF-8 (SQL Server's reading of varbinary as xml)."""
    if body.startswith(b"\xff\xfe"):
        return body[2:].decode("utf-16-le", "replace")
    if body.startswith(b"\xfe\xff"):
        return body[2:].decode("utf-16-be", "replace")
    if len(body) >= 2 and body[1:2] == b"\x00" and body[0:1] != b"\x00":
        return body.decode("utf-16-le", "replace")
    return body.decode("utf-8", "replace")


def display(value: object, type_: SqlType) -> str:
    """A value as sqlcmd prints it in a result set: NULL, upper-case GUIDs, ``0x`` binaries,
    ``yyyy-mm-dd hh:mm:ss.mmm`` dates."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return "0x" + value.hex().upper()
    if isinstance(value, uuid.UUID):
        return str(value).upper()
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, bool):
        return "1" if value else "0"
    return _text_of(value, type_)
