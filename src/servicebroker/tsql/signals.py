"""The statements that speak to the client or wait: PRINT, RAISERROR (print-transact-sql.md,
raiserror-transact-sql.md: severity 10 and below a message, 11 and above an error, printf-style
arguments), THROW (throw-transact-sql.md: ends the batch; alone, in CATCH, throws again) and
WAITFOR DELAY | TIME (waitfor-transact-sql.md, on the broker's clock).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, Protocol

from ..clock import Clock
from ..errors import TSqlError
from . import nodes as n
from .evaluate import evaluate
from .results import ResultSet
from .scope import Scope, to_type
from .sqlerrors import sql_message
from .types import INT, NVARCHAR, SqlType
from .waits import wait_on_clock

__all__ = ["SIGNAL_STATEMENTS", "Signalling"]


class Signalling(Scope, Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    @property
    def clock(self) -> Clock: ...

    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...


def print_(session: Signalling, s: n.Print) -> None:
    value = evaluate(s.expr, session)
    text = to_type(value, SqlType("NVARCHAR", 8000), session)
    session.emit("" if text is None else str(text))


def raiserror(session: Signalling, s: n.RaisError) -> None:
    message = evaluate(s.message, session)
    severity = to_type(evaluate(s.severity, session), INT, session)
    state = to_type(evaluate(s.state, session), INT, session)
    args = [evaluate(a, session).value for a in s.args]
    if isinstance(message.value, int):
        number = message.value
        text = sql_message(number, *args) if number < 50000 else f"Error {number}"
    else:
        number = 50000
        text = _format(str(to_type(message, NVARCHAR, session) or ""), args)
    assert isinstance(severity, int) and isinstance(state, int)
    if severity <= 10:
        session.emit(text)
        return
    error = TSqlError(number, text, severity=min(severity, 25), state=state, line=s.line)
    raise error


def throw(session: Signalling, s: n.Throw) -> None:
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


def waitfor_delay(session: Signalling, s: n.WaitforDelay) -> None:
    text = str(to_type(evaluate(s.expr, session), NVARCHAR, session) or "")
    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        raise TSqlError(
            148,
            f"Incorrect time syntax in time string '{text}' used with WAITFOR.",
            severity=15,
            line=s.line,
        ) from None
    while len(parts) < 3:
        parts.insert(0, 0.0)
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    if s.kind == "TIME":
        now = session.now()
        target = now.replace(
            hour=int(parts[0]), minute=int(parts[1]), second=int(parts[2]), microsecond=0
        )
        seconds = (target - now).total_seconds() % 86400
    wait_on_clock(session.clock, seconds)


def _format(text: str, args: list[object]) -> str:
    """RAISERROR's printf-style message with its arguments (%s, %d, %i, %u, %x, %%)."""
    out = []
    i = 0
    arg = 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and i + 1 < len(text):
            j = i + 1
            while j < len(text) and text[j] in "-+ 0#123456789.*lhI64":
                j += 1
            if j < len(text) and text[j] in "sdiuxXo":
                value = args[arg] if arg < len(args) else None
                arg += 1
                if value is None:
                    out.append("(null)")
                elif text[j] in "xX":
                    out.append(format(int(value), text[j]))  # type: ignore[call-overload]
                elif isinstance(value, Decimal | float):
                    out.append(str(int(value)) if text[j] in "diu" else str(value))
                else:
                    out.append(str(value))
                i = j + 1
                continue
            if text[j : j + 1] == "%":
                out.append("%")
                i = j + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


SIGNAL_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.Print: print_,
    n.RaisError: raiserror,
    n.Throw: throw,
    n.WaitforDelay: waitfor_delay,
}
"""The runner of each of these statements' node type."""
