"""The statements that speak to the client or wait: PRINT, RAISERROR (print-transact-sql.md,
raiserror-transact-sql.md: severity 10 and below a message, 11 and above an error, printf-style
arguments), THROW (throw-transact-sql.md: ends the batch; alone, in CATCH, throws again) and
WAITFOR DELAY | TIME (waitfor-transact-sql.md, on the broker's clock).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Protocol

from ..clock import Clock
from ..errors import TSqlError
from . import nodes as n
from .evaluate import evaluate
from .results import ResultSet
from .scope import Scope, to_type
from .sqlerrors import has_message, sql_message
from .types import INT, NVARCHAR, SqlType
from .waits import wait_on_clock

__all__ = ["SIGNAL_STATEMENTS", "Signalling"]


class Signalling(Scope, Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    @property
    def clock(self) -> Clock: ...

    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...


def _print(session: Signalling, s: n.Print) -> None:
    value = evaluate(s.expr, session)
    text = to_type(value, SqlType("NVARCHAR", 8000), session)
    session.emit("" if text is None else str(text))


def _raiserror(session: Signalling, s: n.RaisError) -> None:
    message = evaluate(s.message, session)
    severity = to_type(evaluate(s.severity, session), INT, session)
    state = to_type(evaluate(s.state, session), INT, session)
    args = [evaluate(a, session).value for a in s.args]
    assert isinstance(severity, int) and isinstance(state, int)
    if isinstance(message.value, int):
        number = message.value
        if number < 13000 or number == 50000:
            raise TSqlError(
                2732,
                sql_message(2732, number, 13000, 2147483647),
                line=s.line,
            )
        if has_message(number):
            text = sql_message(number, *args)
        else:  # no sp_addmessage here: a user-defined number is one sys.messages lacks
            text = (
                f"Error {number}, severity {severity}, state {state} was raised, but no message "
                f"with that error number was found in sys.messages. If error is larger than "
                f"50000, make sure the user-defined message is added using sp_addmessage."
            )
            number = 18054
    else:
        number = 50000
        try:
            text = _format(str(to_type(message, NVARCHAR, session) or ""), args)
        except _Mismatch as mismatch:
            raise TSqlError(2786, sql_message(2786, mismatch.position), line=s.line) from None
    if severity <= 10:
        session.emit(text)
        return
    error = TSqlError(number, text, severity=min(severity, 25), state=state, line=s.line)
    error.raiserror = True  # type: ignore[attr-defined]  # SET XACT_ABORT does not apply to it
    raise error


def _throw(session: Signalling, s: n.Throw) -> None:
    if s.number is None:
        caught = session.caught()
        if caught is None:
            raise TSqlError(
                10704,
                "To rethrow an error, a THROW statement must be used inside a CATCH block. Insert the THROW statement inside a CATCH block, or add error parameters to the THROW statement.",
                severity=15,
                line=s.line,
            )
        error = TSqlError(
            caught.number,
            caught.message,
            severity=caught.severity,
            state=caught.state,
            line=caught.line,
            procedure=caught.procedure,
        )
    else:
        assert s.message is not None and s.state is not None
        number = to_type(evaluate(s.number, session), INT, session)
        state = to_type(evaluate(s.state, session), INT, session)
        text = to_type(evaluate(s.message, session), NVARCHAR, session)
        assert isinstance(number, int) and isinstance(state, int)
        if number < 50000:
            raise TSqlError(
                35100,
                f"Error number {number} in the THROW statement is outside the valid range. Specify an error number in the valid range of 50000 to 2147483647.",
                line=s.line,
            )
        error = TSqlError(number, str(text), severity=16, state=state, line=s.line)
    error.ends_batch = True  # type: ignore[attr-defined]
    raise error


_TIME = re.compile(r"\s*(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,3}))?)?\s*")


def _waitfor_delay(session: Signalling, s: n.WaitforDelay) -> None:
    """WAITFOR DELAY 'hh:mm[:ss[.mmm]]' (at most 23:59:59.997) or TIME 'hh:mm[:ss]' (the next
    such time of day), on the broker's clock.

    Raises:
        TSqlError: Msg 148, a time string that is not a time of day.
    """
    text = str(to_type(evaluate(s.expr, session), NVARCHAR, session) or "")
    match = _TIME.fullmatch(text)
    hours, minutes, secs = (int(match.group(i) or 0) for i in (1, 2, 3)) if match else (99, 0, 0)
    if match is None or hours > 23 or minutes > 59 or secs > 59:
        raise TSqlError(
            148,
            f"Incorrect time syntax in time string '{text}' used with WAITFOR.",
            severity=15,
            line=s.line,
        )
    fraction = int((match.group(4) or "0").ljust(3, "0")) / 1000
    seconds = hours * 3600 + minutes * 60 + secs + fraction
    if s.kind == "TIME":
        now = session.now()
        target = now.replace(hour=hours, minute=minutes, second=secs, microsecond=0)
        seconds = (target - now).total_seconds() % 86400
    wait_on_clock(session.clock, seconds)


class _Mismatch(Exception):
    """A RAISERROR argument whose type its format specification does not take (Msg 2786)."""

    def __init__(self, position: int) -> None:
        self.position = position


_SPEC = re.compile(r"%([-+ 0#]*)(\*|\d+)?(?:\.(\*|\d+))?(?:h|l|I64)?([sdiuxXo%])")


def _format(text: str, args: list[object]) -> str:
    """RAISERROR's printf-style message (raiserror-transact-sql.md): ``%[flags][width]
    [.precision]type`` with types d, i, u, s, x, X, o and ``%%``; a width or precision of
    ``*`` takes the next argument; a missing argument prints ``(null)``."""
    values = iter(args)
    seen = 0

    def put(match: re.Match[str]) -> str:
        nonlocal seen
        flags, width, precision, kind = match.groups()
        if kind == "%":
            return "%"
        seen += 1
        position = seen
        if width == "*":
            width = str(next(values, 0))
        if precision == "*":
            precision = str(next(values, 0))
        value = next(values, None)
        if value is None:
            return "(null)"
        spec = "%" + flags + (width or "") + (f".{precision}" if precision else "")
        wanted_number = kind in "diuxXo"
        if wanted_number != isinstance(value, int | Decimal | float) or isinstance(value, bool):
            raise _Mismatch(position)
        if kind in "diu":
            return str((spec + "d") % int(value))  # type: ignore[call-overload]
        if kind in "xXo":
            return str((spec + kind) % int(value))  # type: ignore[call-overload]
        return str((spec + "s") % (value,))

    return _SPEC.sub(put, text)


SIGNAL_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.Print: _print,
    n.RaisError: _raiserror,
    n.Throw: _throw,
    n.WaitforDelay: _waitfor_delay,
}
"""The runner of each of these statements' node type."""
