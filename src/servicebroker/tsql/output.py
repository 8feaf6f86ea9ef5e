"""What sqlcmd prints (sqlcmd-utility.md): a result set as its column names, a line of dashes and
its rows, each column as wide as its type displays (``nvarchar(100)`` 100 characters, ``int``
11, ``uniqueidentifier`` 36, a MAX type 256, as ``-y`` / ``-Y`` default), numbers to the right,
a blank line, then ``(N rows affected)`` unless SET NOCOUNT ON; messages as their text; errors
as ``Msg N, Level L, State S, Server S, [Procedure P, ]Line L`` and the message.
"""

from __future__ import annotations

from ..errors import TSqlError
from .results import ResultSet
from .types import SqlType, display

__all__ = ["format_event", "width_of"]

MAX_WIDTH = 256
"""The display width of a MAX type (sqlcmd's ``-y`` default, SQLCMDMAXVARTYPEWIDTH)."""

_WIDTHS = {
    "BIGINT": 20,
    "INT": 11,
    "SMALLINT": 6,
    "TINYINT": 3,
    "BIT": 1,
    "UNIQUEIDENTIFIER": 36,
    "DATETIME": 23,
    "DATETIME2": 27,
    "SMALLDATETIME": 19,
    "DATE": 10,
    "TIME": 16,
    "DATETIMEOFFSET": 34,
    "FLOAT": 24,
    "REAL": 14,
    "MONEY": 21,
    "SMALLMONEY": 12,
}


def width_of(type_: SqlType) -> int:
    """The characters sqlcmd gives a column of ``type_``."""
    if type_.name in _WIDTHS:
        return _WIDTHS[type_.name]
    if type_.name == "DECIMAL":
        return (type_.length or 18) + 2
    if type_.length is None:
        return MAX_WIDTH
    if type_.is_binary:
        return min(2 + 2 * type_.length, MAX_WIDTH * 2)
    return type_.length


def _right(type_: SqlType) -> bool:
    return type_.is_numeric


def format_event(event: ResultSet | str | int | TSqlError, *, server: str = "") -> str:
    """The text sqlcmd prints for one event (no final newline)."""
    if isinstance(event, str):
        return event
    if isinstance(event, int):
        return f"({event} row{'' if event == 1 else 's'} affected)"
    if isinstance(event, TSqlError):
        return event.sqlcmd_text(server)
    widths = [max(len(name), width_of(type_)) for name, type_ in event.columns]
    lines = [
        " ".join(name.ljust(w) for (name, _), w in zip(event.columns, widths, strict=True)),
        " ".join("-" * w for w in widths),
    ]
    for row in event.rows:
        cells = []
        for value, (_, type_), w in zip(row, event.columns, widths, strict=True):
            text = display(value.value, value.type)[:w]
            cells.append(text.rjust(w) if _right(type_) else text.ljust(w))
        lines.append(" ".join(cells))
    lines.append("")
    return "\n".join(lines)
