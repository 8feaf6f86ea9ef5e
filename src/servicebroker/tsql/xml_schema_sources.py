"""CREATE XML SCHEMA COLLECTION name AS @variable and ALTER XML SCHEMA COLLECTION name ADD
@variable (create-xml-schema-collection-transact-sql.md: "Expression: Is a string constant or
scalar variable. Is varchar, varbinary, nvarchar, or xml type"): the variable's value becomes
the statement's schemas and the statement runs as the DDL runner runs it, on the session's
database. A literal's statement never comes here (it is DDL like any other, :mod:`.databases`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from ..broker import Broker
from ..ddl.run import run_ddl
from ..errors import TSqlError
from . import nodes as n
from .sqlerrors import sql_message
from .types import Typed

__all__ = ["XML_SCHEMA_STATEMENTS", "schemas_of"]


class XmlSchemaSession(Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    broker: Broker

    def variable(self, name: str, line: int) -> Typed: ...


def schemas_of(value: Typed, line: int) -> str | bytes:
    """A variable's value as an XML schema collection's schemas: the text of a character or
    xml value, the bytes of a binary one.

    Raises:
        TSqlError: Msg 6361, a NULL; Msg 6352, a value of another type.
    """
    if value.value is None:
        raise TSqlError(6361, sql_message(6361), line=line)
    if value.type.is_character or value.type.name == "XML":
        return str(value.value)
    if value.type.is_binary and isinstance(value.value, bytes):
        return value.value
    raise TSqlError(6352, sql_message(6352), line=line)


def _run(session: XmlSchemaSession, s: n.XmlSchemaSource) -> None:
    schemas = schemas_of(session.variable(s.variable, s.line), s.line)
    key = "schemas" if s.statement.statement.startswith("CREATE") else "add"
    options = {k: v for k, v in s.statement.options.items() if k != "variable"}
    options[key] = schemas
    run_ddl(session.broker, [dataclasses.replace(s.statement, options=options)])


XML_SCHEMA_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {n.XmlSchemaSource: _run}
"""The runner of each of these statements' node type."""
