"""Stored procedures and dynamic SQL in a session: CREATE [OR ALTER] / ALTER / DROP PROCEDURE
(kept by :mod:`.procedures`), EXEC[UTE] [@rc =] procedure with positional and named arguments,
DEFAULT and OUTPUT (execute-transact-sql.md), EXEC (@text) and ``sp_executesql`` with
parameters (sp-executesql-transact-sql.md).

A procedure runs in the caller's session and transaction with variables of its own; an error
inside it names the procedure and its line within the procedure's batch, as SQL Server's do.
Dynamic SQL runs as a batch of its own with variables of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, cast

from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .build import build_batch
from .databases import refuse_in_written_transaction
from .evaluate import evaluate
from .procedures import ProcedureStore
from .scope import Scope, to_type
from .security import procedure_context
from .system_procedures import run_system_procedure
from .triggers import TriggerStore
from .types import INT, SqlType, Typed

__all__ = ["CALL_STATEMENTS", "Caller"]


class Caller(Scope, Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    database: str

    def procedures_here(self) -> ProcedureStore: ...
    def triggers_here(self) -> TriggerStore: ...
    def open_transaction(self) -> Transaction | None: ...
    def declare(self, name: str, type_: SqlType) -> None: ...
    def assign(self, name: str, value: Typed) -> None: ...
    def frame(self, procedure: str | None = None) -> AbstractContextManager[None]: ...
    def run_body(self, statements: tuple[n.Statement, ...] | list[n.Statement]) -> int: ...


def _create_procedure(session: Caller, s: n.CreateProcedure) -> None:
    refuse_in_written_transaction(cast(Any, session), f"{s.mode} PROCEDURE", s.line)
    if s.mode != "ALTER" and session.triggers_here().exists(s.name, session.open_transaction()):
        # one namespace of objects: a trigger has the name
        raise TSqlError(
            2714,
            f"There is already an object named '{s.name.split('.')[-1]}' in the database.",
            line=s.line,
        )
    session.procedures_here().put(s)


def _drop_procedure(session: Caller, s: n.DropProcedure) -> None:
    refuse_in_written_transaction(cast(Any, session), "DROP PROCEDURE", s.line)
    for name in s.names:
        session.procedures_here().drop(name, if_exists=s.if_exists, line=s.line)


def _execute(session: Caller, s: n.Execute) -> None:
    if s.procedure.split(".")[-1].casefold() == "sp_executesql":
        rc = _sp_executesql(session, s)
    elif (system := run_system_procedure(cast(Any, session), s)) is not None:
        rc = system  # sp_configure, sp_addrolemember, … (system_procedures.py)
    else:
        procedure = session.procedures_here().get(s.procedure, session.open_transaction())
        if procedure is None:
            raise TSqlError(2812, f"Could not find stored procedure '{s.procedure}'.", line=s.line)
        rc = _call(session, procedure, s)
    if s.return_variable is not None:
        session.assign(s.return_variable, Typed(rc, INT))


def _bind(
    session: Caller,
    name: str,
    parameters: tuple[n.Parameter, ...],
    arguments: tuple[n.Argument, ...],
    line: int,
) -> list[tuple[n.Parameter, Typed, n.Argument | None]]:
    """Each parameter with its value (the argument's, evaluated in the caller, or the default)
    and the argument that gave it."""
    positional: list[n.Argument] = []
    named: dict[str, n.Argument] = {}
    for argument in arguments:
        if argument.name is None:
            if named:
                raise TSqlError(
                    119,
                    f"Must pass parameter number {len(positional) + len(named) + 1} and subsequent "
                    f"parameters as '@name = value'. After the form '@name = value' has been "
                    f"used, all subsequent parameters must be passed in the form '@name = value'.",
                    severity=15,
                    line=line,
                )
            positional.append(argument)
        else:
            named[argument.name.casefold()] = argument
    if len(positional) > len(parameters):
        raise TSqlError(
            8144, f"Procedure or function {name} has too many arguments specified.", line=line
        )
    known = {p.name.casefold() for p in parameters}
    for key, argument in named.items():
        if key not in known:
            raise TSqlError(
                8145, f"{argument.name} is not a parameter for procedure {name}.", line=line
            )
    bound: list[tuple[n.Parameter, Typed, n.Argument | None]] = []
    for i, parameter in enumerate(parameters):
        given: n.Argument | None = (
            positional[i] if i < len(positional) else named.get(parameter.name.casefold())
        )
        if given is None or given.value is None:
            if given is None and parameter.default is None:
                raise TSqlError(
                    201,
                    f"Procedure or function '{name}' expects parameter '{parameter.name}', which "
                    f"was not supplied.",
                    line=line,
                )
            value = (
                evaluate(parameter.default, session)
                if parameter.default is not None
                else Typed(None, parameter.type)
            )
        else:
            value = evaluate(given.value, session)
        bound.append((parameter, value, given))
    return bound


def _run_with(
    session: Caller,
    name: str | None,
    bound: list[tuple[n.Parameter, Typed, n.Argument | None]],
    body: tuple[n.Statement, ...] | list[n.Statement],
) -> int:
    outputs: list[tuple[str, Typed]] = []
    with session.frame(name):
        for parameter, value, _ in bound:
            session.declare(parameter.name, parameter.type)
            session.assign(parameter.name, value)
        rc = session.run_body(body)
        for parameter, _, argument in bound:
            if parameter.output and argument is not None and argument.output:
                outputs.append((_target(argument), session.variable(parameter.name, 1)))
    for variable, value in outputs:
        session.assign(variable, value)
    return rc


def _target(argument: n.Argument) -> str:
    if not isinstance(argument.value, n.Variable):
        raise TSqlError(
            179,
            "Cannot use the OUTPUT option when passing a constant to a stored procedure.",
            severity=15,
        )
    return argument.value.name


def _call(session: Caller, procedure: n.CreateProcedure, s: n.Execute) -> int:
    name = procedure.name.split(".")[-1]
    bound = _bind(session, name, procedure.parameters, s.arguments, s.line)
    with procedure_context(cast(Any, session), procedure.execute_as, s.line):  # WITH EXECUTE AS
        return _run_with(session, name, bound, procedure.body)


_OUTPUT = re.compile(r"\s+out(put)?\b", re.I)


def _sp_executesql(session: Caller, s: n.Execute) -> int:
    arguments = list(s.arguments)
    if not arguments or arguments[0].value is None:
        raise TSqlError(
            201,
            "Procedure or function 'sp_executesql' expects parameter '@statement', which was "
            "not supplied.",
            line=s.line,
        )
    statement = to_type(evaluate(arguments[0].value, session), SqlType("NVARCHAR"), session)
    text = "" if statement is None else str(statement)
    parameters: tuple[n.Parameter, ...] = ()
    if (
        len(arguments) > 1
        and arguments[1].value is not None
        and arguments[1].name in (None, "@params")
    ):
        declared = to_type(evaluate(arguments[1].value, session), SqlType("NVARCHAR"), session)
        parameters = _parameters(str(declared or ""), s.line)
        arguments = arguments[2:]
    else:
        arguments = arguments[1:]
    body = build_batch(text)
    bound = _bind(session, "sp_executesql", parameters, tuple(arguments), s.line)
    return _run_with(session, None, bound, body)


def _parameters(declaration: str, line: int) -> tuple[n.Parameter, ...]:
    """sp_executesql's ``@params`` (``N'@a INT, @b NVARCHAR(10) OUTPUT'``) as parameters."""
    if not declaration.strip():
        return ()
    parts = [p for p in re.split(r",(?![^(]*\))", declaration) if p.strip()]
    params = []
    for part in parts:
        output = bool(_OUTPUT.search(part))
        statements = build_batch("DECLARE " + _OUTPUT.sub("", part))
        declare = statements[0] if len(statements) == 1 else None
        if not isinstance(declare, n.Declare) or len(declare.items) != 1:
            raise TSqlError(
                102, f"Incorrect syntax near '{part.strip()[:40]}'.", severity=15, line=line
            )
        ((name, type_, default),) = declare.items
        params.append(n.Parameter(name, type_, default, output))
    return tuple(params)


def _execute_string(session: Caller, s: n.ExecuteString) -> None:
    text = to_type(evaluate(s.text, session), SqlType("NVARCHAR"), session)
    body = build_batch("" if text is None else str(text))
    with session.frame(None):
        session.run_body(body)


CALL_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.CreateProcedure: _create_procedure,
    n.DropProcedure: _drop_procedure,
    n.Execute: _execute,
    n.ExecuteString: _execute_string,
}
"""The runner of each procedure and dynamic-SQL statement's node type."""
