"""What evaluating T-SQL reads (:class:`Scope`: the variables, the current row, ``@@`` values,
the clock's now, the error a CATCH block handles, a way to run a subquery) and the helpers every
evaluation module shares: SQL Server's errors at the scope's line and the implicit conversion
of an assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..errors import TSqlError
from . import nodes as n
from .types import ConversionFailed, SqlType, Typed, convert

__all__ = ["ErrorContext", "Scope", "arity", "fail", "to_type"]


@dataclass(frozen=True)
class ErrorContext:
    """The error a CATCH block handles (ERROR_NUMBER() and the rest read it)."""

    number: int
    message: str
    severity: int
    state: int
    line: int
    procedure: str | None


class Scope(Protocol):
    """What evaluation reads (the session implements it; a query's row scope wraps it).

    ``variable(name, line)`` the value of ``@name`` (Msg 137 when undeclared); ``global_variable``
    ``@@ROWCOUNT`` and the like; ``column(parts)`` the current row's column (Msg 207 when there is
    none); ``now()`` / ``utc_now()`` the broker's clock as naive datetimes; ``caught()`` the error
    a CATCH block handles; ``xact_state()`` XACT_STATE(); ``cursor_status(kind, name)`` CURSOR_STATUS(); ``subquery(select, outer)`` a subquery's rows (``outer``: the row scope its outer references read);
    ``object_id``, ``database_id``, ``database_name`` OBJECT_ID, DB_ID and DB_NAME;
    ``aggregate(call)`` COUNT / SUM / … over the current group (Msg 147 outside one);
    ``column_updated(column)`` a trigger's UPDATE (column) (Msg 140 outside one); ``line`` the
    batch line of the statement running.
    """

    def variable(self, name: str, line: int) -> Typed: ...
    def global_variable(self, name: str) -> Typed: ...
    def column(self, parts: tuple[str, ...]) -> Typed: ...
    def now(self) -> datetime: ...
    def utc_now(self) -> datetime: ...
    def caught(self) -> ErrorContext | None: ...
    def xact_state(self) -> int: ...
    def cursor_status(self, kind: str, name: str) -> int: ...
    def subquery(self, select: n.SelectCore, outer: Scope | None = None) -> list[list[Typed]]: ...
    def object_id(self, name: str) -> int | None: ...
    def database_id(self, name: str | None) -> int | None: ...
    def database_name(self, database_id: int | None) -> str | None: ...
    def aggregate(self, call: n.FunctionCall) -> Typed: ...
    def column_updated(self, column: str) -> bool: ...
    @property
    def line(self) -> int: ...


def fail(number: int, message: str, scope: Scope, severity: int = 16) -> TSqlError:
    """SQL Server's error ``number`` with ``message`` at the scope's line (to raise)."""
    return TSqlError(number, message, severity=severity, line=scope.line)


def arity(args: list[Typed], scope: Scope, count: int | tuple[int, int], name: str) -> list[Typed]:
    """``args`` when a call of function ``name`` has ``count`` of them (a number, or the
    fewest and most); else Msg 174."""
    low, high = (count, count) if isinstance(count, int) else count
    if not low <= len(args) <= high:
        raise fail(
            174,
            f"The {name.lower()} function requires {low if low == high else f'{low} to {high}'} argument(s).",
            scope,
            severity=15,
        )
    return args


def to_type(value: Typed, target: SqlType, scope: Scope) -> object:
    """``value`` converted to ``target`` (an assignment's implicit conversion), or SQL Server's
    conversion error."""
    try:
        return convert(value.value, value.type, target)
    except ConversionFailed as exc:
        raise fail(exc.number, str(exc), scope) from None
