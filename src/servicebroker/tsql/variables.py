"""Local variables (declare-local-variable-transact-sql.md, set-local-variable-transact-sql.md)
and the system functions read as ``@@name`` (rowcount-transact-sql.md, trancount-transact-sql.md,
error-transact-sql.md, …): a batch's, procedure's, trigger's or dynamic SQL's variables, each
declared once with its type, NULL until assigned, every value converted to that type."""

from __future__ import annotations

from typing import Protocol

from ..errors import TSqlError
from .scope import Scope, to_type
from .types import INT, NVARCHAR, SqlType, Typed

__all__ = ["Counters", "Variables", "system_variable"]


class Variables:
    """The local variables of one batch (or procedure, trigger, dynamic SQL)."""

    def __init__(self) -> None:
        self._types: dict[str, SqlType] = {}
        self._values: dict[str, Typed] = {}

    def value(self, name: str, line: int) -> Typed:
        """The value of ``name`` (with its ``@``).

        Raises:
            TSqlError: Msg 137, not declared.
        """
        value = self._values.get(name.casefold())
        if value is None:
            raise _undeclared(name, line)
        return value

    def declare(self, name: str, type_: SqlType, line: int) -> None:
        """DECLARE ``name`` of ``type_``, NULL.

        Raises:
            TSqlError: Msg 134, declared before in this batch or procedure.
        """
        key = name.casefold()
        if key in self._types:
            raise TSqlError(
                134,
                f"The variable name '{name}' has already been declared. Variable names must be "
                f"unique within a query batch or stored procedure.",
                severity=15,
                line=line,
            )
        self._types[key] = type_
        self._values[key] = Typed(None, type_)

    def assign(self, name: str, value: Typed, scope: Scope) -> None:
        """SET / SELECT ``name`` = ``value``, converted to the variable's type as T-SQL
        converts it (``scope``: where conversion errors are raised).

        Raises:
            TSqlError: Msg 137, not declared; a conversion's error.
        """
        key = name.casefold()
        type_ = self._types.get(key)
        if type_ is None:
            raise _undeclared(name, scope.line)
        self._values[key] = Typed(to_type(value, type_, scope), type_)


def _undeclared(name: str, line: int) -> TSqlError:
    return TSqlError(
        137, f'Must declare the scalar variable "{name}".', severity=15, state=2, line=line
    )


class Counters(Protocol):
    """What ``@@name`` reads of the session."""

    rowcount: int
    trancount: int
    error: int

    def cursor_counters(self) -> tuple[int, int]: ...


def system_variable(session: Counters, name: str, line: int) -> Typed:
    """``@@name`` (``name`` upper case, without ``@@``): ROWCOUNT, TRANCOUNT, ERROR, SERVERNAME,
    VERSION, SPID, FETCH_STATUS, CURSOR_ROWS.

    Raises:
        TSqlError: Msg 137, another name.
    """
    if name == "ROWCOUNT":
        return Typed(session.rowcount, INT)
    if name == "TRANCOUNT":
        return Typed(session.trancount, INT)
    if name == "ERROR":
        return Typed(session.error, INT)
    if name == "SERVERNAME":
        return Typed("servicebroker", NVARCHAR)
    if name == "VERSION":
        return Typed("servicebroker (SQL Server Service Broker in Python)", NVARCHAR)
    if name == "SPID":
        return Typed(51, SqlType("SMALLINT"))
    if name in ("FETCH_STATUS", "CURSOR_ROWS"):
        fetch_status, cursor_rows = session.cursor_counters()
        return Typed(fetch_status if name[0] == "F" else cursor_rows, INT)
    raise _undeclared(f"@@{name}", line)
