"""The BROKER PRIORITY statements in their T-SQL text form (PRI-2), parsed with lark:

    CREATE BROKER PRIORITY name FOR CONVERSATION
        SET (CONTRACT_NAME = c | ANY, LOCAL_SERVICE_NAME = s | ANY,
             REMOTE_SERVICE_NAME = N'remote' | ANY, PRIORITY_LEVEL = 1..10 | DEFAULT);
    ALTER BROKER PRIORITY name FOR CONVERSATION SET (…);
    DROP BROKER PRIORITY name;
    ALTER DATABASE name SET HONOR_BROKER_PRIORITY ON | OFF;   (PRI-16; the name is ignored)

Keywords are case-insensitive; names are plain or [bracketed] identifiers, or string literals
('…' or N'…'); ``USE database;`` and ``GO`` lines (as in seed 004's scripts) are accepted and
ignored, since a broker is one database.
"""

from __future__ import annotations

from dataclasses import dataclass

from lark import Lark, Token, Transformer, UnexpectedInput
from lark.exceptions import VisitError

from ..errors import CatalogError

__all__ = ["PriorityStatement", "parse_ddl"]

_GRAMMAR = r"""
start: (statement _SEP?)*
?statement: create | alter | drop | alter_database | use | go
alter_database: _ALTER _DATABASE name _SET _HONOR_BROKER_PRIORITY ONOFF
create: _CREATE _BROKER _PRIORITY name _FOR _CONVERSATION (_SET "(" option ("," option)* ")")?
alter: _ALTER _BROKER _PRIORITY name _FOR _CONVERSATION _SET "(" option ("," option)* ")"
drop: _DROP _BROKER _PRIORITY name
use: _USE name
go: _GO
option: OPTION_NAME "=" value
?value: name | INT | ANY | DEFAULT
name: IDENT | BRACKETED | STRING
_SEP: ";"
_CREATE: /create\b/i
_ALTER: /alter\b/i
_DROP: /drop\b/i
_BROKER: /broker\b/i
_PRIORITY: /priority\b/i
_FOR: /for\b/i
_CONVERSATION: /conversation\b/i
_SET: /set\b/i
_DATABASE: /database\b/i
_HONOR_BROKER_PRIORITY.2: /honor_broker_priority\b/i
ONOFF.2: /(on|off)\b/i
_USE: /use\b/i
_GO: /go\b/i
ANY.2: /any\b/i
DEFAULT.2: /default\b/i
OPTION_NAME.2: /(contract_name|local_service_name|remote_service_name|priority_level)\b/i
IDENT: /[A-Za-z_][A-Za-z0-9_@#$]*/
BRACKETED: /\[([^\]]|\]\])*\]/
STRING.3: /N?'([^']|'')*'/i
INT: /[0-9]+/
COMMENT: /--[^\n]*/
%import common.WS
%ignore WS
%ignore COMMENT
"""

_PARSER = Lark(_GRAMMAR, parser="lalr")


@dataclass(frozen=True)
class PriorityStatement:
    """One parsed statement: ``verb`` is CREATE, ALTER or DROP (a BROKER PRIORITY ``name``) or
    ALTER DATABASE; ``options`` maps the keyword arguments of the Broker method
    (contract_name, local_service_name, remote_service_name, priority_level; for ALTER
    DATABASE honor_broker_priority) to their values ("ANY" for ANY; DEFAULT gives level 5)."""

    verb: str
    name: str
    options: dict[str, object]


class _Build(Transformer[Token, list[PriorityStatement]]):
    def start(self, items: list[PriorityStatement | None]) -> list[PriorityStatement]:
        return [i for i in items if i is not None]

    def name(self, items: list[Token]) -> str:
        text = str(items[0])
        if items[0].type == "BRACKETED":
            return text[1:-1].replace("]]", "]")
        if items[0].type == "STRING":
            body = text[1:] if text[0] in "Nn" else text
            return body[1:-1].replace("''", "'")
        return text

    def option(self, items: list[object]) -> tuple[str, object, Token]:
        key = str(items[0]).lower()
        value = items[1]
        token = items[0]
        assert isinstance(token, Token)
        if isinstance(value, Token):
            if value.type == "ANY":
                value = "ANY"
            elif value.type == "DEFAULT":
                value = 5 if key == "priority_level" else "ANY"
            elif value.type == "INT":
                value = int(value)
        if key == "priority_level" and not isinstance(value, int):
            raise CatalogError(
                f"line {token.line}, column {token.column}: PRIORITY_LEVEL must be a number from 1 to 10 or DEFAULT"
            )
        if key != "priority_level" and isinstance(value, int):
            raise CatalogError(
                f"line {token.line}, column {token.column}: {key.upper()} must be a name or ANY"
            )
        return key, value, token

    def _statement(self, verb: str, items: list[object]) -> PriorityStatement:
        name = items[0]
        assert isinstance(name, str)
        options: dict[str, object] = {}
        for item in items[1:]:
            assert isinstance(item, tuple)
            key, value, token = item
            if key in options:
                raise CatalogError(
                    f"line {token.line}, column {token.column}: {key.upper()} is given twice"
                )
            options[key] = value
        return PriorityStatement(verb, name, options)

    def create(self, items: list[object]) -> PriorityStatement:
        return self._statement("CREATE", items)

    def alter(self, items: list[object]) -> PriorityStatement:
        return self._statement("ALTER", items)

    def drop(self, items: list[object]) -> PriorityStatement:
        return self._statement("DROP", items)

    def alter_database(self, items: list[object]) -> PriorityStatement:
        name, onoff = items
        assert isinstance(name, str)
        return PriorityStatement(
            "ALTER DATABASE", name, {"honor_broker_priority": str(onoff).lower() == "on"}
        )

    def use(self, items: list[object]) -> None:
        return None

    def go(self, items: list[object]) -> None:
        return None


def parse_ddl(text: str) -> list[PriorityStatement]:
    """Parse CREATE/ALTER/DROP BROKER PRIORITY statements (module docstring).

    Raises:
        CatalogError: a syntax error, naming the line and column, or a bad option value.
    """
    if not isinstance(text, str):
        raise CatalogError(f"DDL must be a string, got {type(text).__name__}")
    try:
        tree = _PARSER.parse(text)
        result: list[PriorityStatement] = _Build().transform(tree)
    except VisitError as exc:  # a bad value found while building the statements
        if isinstance(exc.orig_exc, CatalogError):
            raise exc.orig_exc from None
        raise
    except UnexpectedInput as exc:
        context = exc.get_context(text, span=30).strip().splitlines()[0] if text else ""
        raise CatalogError(
            f"DDL syntax error at line {exc.line}, column {exc.column}: unexpected input near {context!r}"
        ) from None
    return result
