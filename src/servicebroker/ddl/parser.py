"""The Service Broker DDL in its T-SQL form, parsed (:mod:`servicebroker.syntax`) into
statement records that :mod:`.run` runs against the broker (docs/ddl.md).

The statements: CREATE / ALTER / DROP MESSAGE TYPE, CREATE / ALTER / DROP XML SCHEMA
COLLECTION, CREATE / DROP CONTRACT, CREATE / ALTER / DROP QUEUE, CREATE / ALTER / DROP SERVICE,
CREATE / DROP EVENT NOTIFICATION, CREATE / ALTER / DROP BROKER PRIORITY and ALTER DATABASE …
SET ENABLE_BROKER | NEW_BROKER | ERROR_BROKER_CONVERSATIONS | HONOR_BROKER_PRIORITY ON | OFF
(DISABLE_BROKER is refused), in the forms of Microsoft's reference pages: keywords in any
case, ``[bracketed]`` and ``"quoted"`` names, ``'…'`` and ``N'…'`` strings,
``[database.][schema.]`` prefixes on queue, procedure and XML schema collection names, options
in any order, ``--`` and ``/* */`` comments, ``;`` optional. ``USE database`` and ``GO``
lines are accepted and do nothing (a broker is one database). Any other statement (CREATE TABLE,
DECLARE, SEND, …) is refused as "not a Service Broker DDL statement", naming its line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Transformer, Tree, UnexpectedInput
from lark.exceptions import UnexpectedToken, VisitError

from ..errors import CatalogError
from ..syntax import name_text, parse, string_text

__all__ = ["BROKER_DATABASE_OPTIONS", "DDL_RULES", "DdlStatement", "ddl_statement", "parse_ddl"]

VALIDATION_NAMES = ("NONE", "EMPTY", "WELL_FORMED_XML", "JSON")
"""VALIDATION = … values accepted without a schema collection (JSON is this broker's own,
DLG-3); VALID_XML takes WITH SCHEMA COLLECTION name."""


@dataclass(frozen=True)
class DdlStatement:
    """One parsed statement.

    Attributes:
        statement: the statement's kind in T-SQL words, e.g. ``"CREATE QUEUE"``,
            ``"ALTER DATABASE"``; ``"USE"`` for a USE line (which does nothing).
        name: the object's name (brackets, quotes and schema prefix removed).
        options: what the statement says, as the keyword arguments of the Broker method that
            runs it (e.g. ``{"status": True, "activation": {...}}``).
        line, column: where the statement starts (1-based).
        text: the statement's source text, on one line, cut at 80 characters.
    """

    statement: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    line: int = 1
    column: int = 1
    text: str = ""

    @property
    def where(self) -> str:
        """``line L, column C (TEXT)`` for error messages."""
        return f"line {self.line}, column {self.column} ({self.text})"


class _QName(str):
    """A [database.][schema.]name: the name, with all its ``parts``."""

    parts: tuple[str, ...]

    def __new__(cls, parts: list[str]) -> _QName:
        self = super().__new__(cls, parts[-1])
        self.parts = tuple(parts)
        return self


class _Refused(Exception):
    """A statement the grammar accepts but this broker refuses, at a token."""

    def __init__(self, token: Token | None, message: str) -> None:
        super().__init__(message)
        self.token = token


def _fail(token: Token | None, message: str) -> _Refused:
    return _Refused(token, message)


def _onoff(token: Token) -> bool:
    return str(token).upper() == "ON"


class _Build(Transformer[Token, Any]):
    """Tree → values: names to strings, options to ``(key, value, token)`` triples, statements
    to ``(statement, name, options)``."""

    # -- names -------------------------------------------------------------------------
    def name(self, items: list[Token]) -> str:
        return name_text(items[0])

    def qname(self, items: list[str]) -> str:
        return _QName(items)  # one namespace here: the database and schema prefixes are dropped

    def authorization(self, items: list[str]) -> tuple[str, str, None]:
        return ("authorization", items[0], None)

    # -- message types and contracts ---------------------------------------------------
    def validation(self, items: list[Any]) -> list[tuple[str, str, Token]]:
        tok = items[0]
        value = str(tok).upper()
        if value == "VALID_XML":
            if len(items) < 2:
                raise _fail(tok, "VALIDATION = VALID_XML needs WITH SCHEMA COLLECTION name")
            return [("validation", value, tok), ("xml_schema_collection", items[1], tok)]
        if value not in VALIDATION_NAMES or len(items) > 1:
            raise _fail(
                tok,
                f"VALIDATION must be one of {', '.join(VALIDATION_NAMES)} or VALID_XML WITH "
                f"SCHEMA COLLECTION name, got {' '.join(str(t) for t in items)!r}",
            )
        return [("validation", value, tok)]

    # -- XML schema collections --------------------------------------------------------
    def xml_schema_source(self, items: list[Token]) -> tuple[str, str, Token]:
        tok = items[0]
        if tok.type == "VARIABLE":  # a T-SQL batch evaluates it (tsql/xml_schema_sources.py)
            return ("variable", str(tok), tok)
        return ("schemas", _string(tok), tok)

    def usage(self, items: list[Any]) -> tuple[str, str, Token]:
        message_type, tok = items
        who = str(tok).upper()
        if who not in ("INITIATOR", "TARGET", "ANY"):
            raise _fail(tok, f"SENT BY must be INITIATOR, TARGET or ANY, got {str(tok)!r}")
        return (message_type, who, tok)

    # -- queues ------------------------------------------------------------------------
    def onoff(self, items: list[Token]) -> Token:
        return items[0]

    def status(self, items: list[Token]) -> tuple[str, bool, Token]:
        return ("status", _onoff(items[0]), items[0])

    def retention(self, items: list[Token]) -> tuple[str, bool, Token]:
        return ("retention", _onoff(items[0]), items[0])

    def poison_message_handling(self, items: list[Any]) -> tuple[str, bool, Token]:
        _, value, tok = items[0]
        return ("poison_message_handling", value, tok)

    def procedure_name(self, items: list[Any]) -> tuple[str, str, None]:
        value = items[0]
        if isinstance(value, Token):  # a string literal
            value = _string(value)
        elif ":" not in value:  # a T-SQL name: its last part, registered with the broker
            value = value.parts[-1]
        return ("procedure_name", str(value), None)

    def max_queue_readers(self, items: list[Token]) -> tuple[str, int, Token]:
        return ("max_queue_readers", int(items[0]), items[0])

    def execute_as(self, items: list[Token]) -> tuple[str, str, Token]:
        tok = items[0]
        if tok.type == "STRING":
            return ("execute_as", _string(tok), tok)
        who = str(tok).upper()
        if who not in ("SELF", "OWNER"):
            raise _fail(tok, f"EXECUTE AS must be SELF, OWNER or 'user_name', got {str(tok)!r}")
        return ("execute_as", who, tok)

    def activation(self, items: list[Any]) -> tuple[str, dict[str, Any], None]:
        return ("activation", _options(items, "ACTIVATION"), None)

    def activation_drop(self, items: list[Any]) -> tuple[str, bool, None]:
        return ("drop_activation", True, None)

    def queue_options(self, items: list[Any]) -> list[Any]:
        return items

    def filegroup(self, items: list[Any]) -> tuple[str, None, None]:
        return ("", None, None)  # ON filegroup | [DEFAULT]: no filegroups here

    def rebuild(self, items: list[Any]) -> tuple[str, str, None]:
        return ("", "REBUILD", None)

    def reorganize(self, items: list[Any]) -> tuple[str, str, None]:
        return ("", "REORGANIZE", None)

    def move_to(self, items: list[Any]) -> tuple[str, str, None]:
        return ("", "MOVE TO", None)

    # -- services ----------------------------------------------------------------------
    def contracts(self, items: list[str]) -> tuple[str, list[str], None]:
        return ("contracts", items, None)

    def on_queue(self, items: list[Any]) -> tuple[str, str, None]:
        return ("queue", items[-1], None)

    def add_contract(self, items: list[str]) -> tuple[str, str]:
        return ("add", items[0])

    def drop_contract_of_service(self, items: list[str]) -> tuple[str, str]:
        return ("drop", items[0])

    def service_changes(self, items: list[tuple[str, str]]) -> list[tuple[str, Any, None]]:
        adds = [n for verb, n in items if verb == "add"]
        drops = [n for verb, n in items if verb == "drop"]
        return [("add_contracts", adds, None), ("drop_contracts", drops, None)]

    # -- event notifications -----------------------------------------------------------
    def scope_queue(self, items: list[str]) -> tuple[str, str, None]:
        return ("queue", items[0], None)

    def scope_server(self, items: list[Any]) -> tuple[str, None, None]:
        raise _fail(None, "only event notifications ON QUEUE exist here (not ON SERVER)")

    def scope_database(self, items: list[Any]) -> tuple[str, None, None]:
        raise _fail(None, "only event notifications ON QUEUE exist here (not ON DATABASE)")

    def fan_in(self, items: list[Any]) -> tuple[str, None, None]:
        return ("", None, None)  # WITH FAN_IN: one database, nothing to fan in

    def event_types(self, items: list[Token]) -> tuple[str, str, Token]:
        if len(items) > 1:
            raise _fail(
                items[1],
                "one event type per event notification here: write one CREATE EVENT "
                "NOTIFICATION for QUEUE_ACTIVATION and another for BROKER_QUEUE_DISABLED",
            )
        return ("event", str(items[0]).upper(), items[0])

    # -- broker priorities -------------------------------------------------------------
    def priority_option(self, items: list[Any]) -> tuple[str, object, Token]:
        key_tok, value = items
        key = str(key_tok).lower()
        if isinstance(value, Token):
            if value.type == "ANY":
                value = "ANY"
            elif value.type == "DEFAULT":
                value = 5 if key == "priority_level" else "ANY"
            elif value.type == "INT":
                value = int(value)
            elif value.type == "STRING":
                value = _string(value)
        if key == "priority_level" and not isinstance(value, int):
            raise _fail(key_tok, "PRIORITY_LEVEL must be a number from 1 to 10 or DEFAULT")
        if key != "priority_level" and isinstance(value, int):
            raise _fail(key_tok, f"{key.upper()} must be a name or ANY")
        return (key, value, key_tok)

    # -- ALTER DATABASE ----------------------------------------------------------------
    def database_option(self, items: list[Token]) -> tuple[str, object, Token]:
        key_tok = items[0]
        key = str(key_tok).upper()
        value = items[1] if len(items) > 1 else None
        if key == "HONOR_BROKER_PRIORITY":
            if value is None or value.type not in ("ON", "OFF"):
                raise _fail(value or key_tok, "HONOR_BROKER_PRIORITY must be ON or OFF")
            return ("honor_broker_priority", _onoff(value), key_tok)
        if key in _BROKER_OPTIONS:
            if value is not None:
                raise _fail(value, f"{key} takes no value")
            return (key.lower(), True, key_tok)
        raise _fail(
            key_tok,
            f"ALTER DATABASE … SET {key} is not a Service Broker option (the Service Broker "
            f"options: {', '.join((*_BROKER_OPTIONS, 'HONOR_BROKER_PRIORITY'))})",
        )

    def termination(self, items: list[Any]) -> tuple[str, None, None]:
        return ("", None, None)  # WITH ROLLBACK IMMEDIATE | NO_WAIT …: nothing waits here

    # -- routes, endpoints, certificates, logins (the transport's catalog) -------------
    def route_option(self, items: list[Token]) -> tuple[str, object, Token]:
        key_tok, value = items
        key = str(key_tok).lower()
        if key == "lifetime":
            if value.type != "INT":
                raise _fail(value, "LIFETIME must be a number of seconds")
            return (key, int(value), key_tok)
        if value.type != "STRING":
            raise _fail(value, f"{key.upper()} must be a string ('…')")
        return (key, _string(value), key_tok)

    def endpoint_state(self, items: list[Token]) -> tuple[str, str, Token]:
        return ("state", str(items[0]).upper(), items[0])

    def tcp_part(self, items: list[Any]) -> list[Any]:
        return items

    def listener_port(self, items: list[Token]) -> tuple[str, int, Token]:
        return ("listener_port", int(items[0]), items[0])

    def listener_ip(self, items: list[Token]) -> tuple[str, str, Token]:
        tok = items[0]
        if tok.type == "STRING":
            return ("listener_ip", _string(tok), tok)
        return ("listener_ip", str(tok).upper() if tok.type == "ALL" else str(tok), tok)

    def broker_part(self, items: list[Any]) -> list[Any]:
        return [t for item in items for t in (item if isinstance(item, list) else [item])]

    def cert_auth(self, items: list[str]) -> tuple[str, str, None]:
        return ("authentication_certificate", items[0], None)

    def authentication(self, items: list[Any]) -> tuple[str, str, None]:
        windows = [t for t in items if isinstance(t, Token)]
        certs = [t for t in items if isinstance(t, tuple)]
        if windows or len(certs) != 1:
            raise _fail(
                windows[0] if windows else None,
                "AUTHENTICATION must be CERTIFICATE certificate_name here (no Windows "
                "authentication: the transport authenticates with certificates, SEC-1)",
            )
        return certs[0]

    def encryption(self, items: list[Token]) -> list[tuple[str, str, Token]]:
        value = str(items[0]).upper()
        out = [("encryption", value, items[0])]
        if len(items) > 1:
            if value == "DISABLED":
                raise _fail(items[1], "ENCRYPTION = DISABLED takes no ALGORITHM")
            out.append(("algorithm", " ".join(str(t).upper() for t in items[1:]), items[1]))
        return out

    def message_forwarding(self, items: list[Token]) -> tuple[str, bool, Token]:
        value = str(items[0]).upper()
        if value not in ("ENABLED", "DISABLED"):
            raise _fail(items[0], f"MESSAGE_FORWARDING must be ENABLED or DISABLED, got {value}")
        return ("message_forwarding", value == "ENABLED", items[0])

    def message_forward_size(self, items: list[Token]) -> tuple[str, int, Token]:
        return ("message_forward_size", int(items[0]), items[0])

    def key_option(self, items: list[Token]) -> tuple[str, str, Token]:
        if len(items) > 1:
            raise _fail(
                items[0],
                "DECRYPTION BY PASSWORD is not supported: the private key file must be an "
                "unencrypted PEM key (protect it with the file's permissions)",
            )
        return ("private_key_file", _string(items[0]), items[0])

    def private_key(self, items: list[Any]) -> list[Any]:
        return items

    # -- users, remote service bindings, GRANT / REVOKE (SEC-3, SEC-4) -------------------
    def user_certificate(self, items: list[str]) -> tuple[str, str, None]:
        return ("certificate", items[0], None)

    def binding_user(self, items: list[str]) -> tuple[str, str, None]:
        return ("user", items[0], None)

    def anonymous(self, items: list[Token]) -> tuple[str, bool, Token]:
        return ("anonymous", _onoff(items[0]), items[0])

    def service_securable(self, items: list[str]) -> tuple[str, str, None]:
        return ("on", f"SERVICE::{items[0]}", None)

    def queue_securable(self, items: list[str]) -> tuple[str, str, None]:
        return ("on", f"QUEUE::{items[0]}", None)


_BROKER_OPTIONS = ("ENABLE_BROKER", "DISABLE_BROKER", "NEW_BROKER", "ERROR_BROKER_CONVERSATIONS")
BROKER_DATABASE_OPTIONS = frozenset((*_BROKER_OPTIONS, "HONOR_BROKER_PRIORITY"))
"""The ALTER DATABASE … SET options that are Service Broker's (the rest are refused here)."""


_string = string_text


def _options(items: list[Any], where: str) -> dict[str, Any]:
    """Options as a dict; an option given twice is an error naming it."""
    options: dict[str, Any] = {}
    for item in items:
        if isinstance(item, list):
            for key, value, tok in item:
                _put(options, key, value, tok, where)
        elif isinstance(item, tuple) and len(item) == 3:
            _put(options, *item, where)
    return options


def _put(options: dict[str, Any], key: str, value: Any, tok: Token | None, where: str) -> None:
    if not key:
        return  # accepted, no effect here
    if key in options and key not in ("add_contracts", "drop_contracts"):
        raise _fail(tok, f"{where}: {key.upper()} is given twice")
    options[key] = value


_STATEMENTS = {
    "create_message_type": "CREATE MESSAGE TYPE",
    "alter_message_type": "ALTER MESSAGE TYPE",
    "drop_message_type": "DROP MESSAGE TYPE",
    "create_contract": "CREATE CONTRACT",
    "drop_contract": "DROP CONTRACT",
    "create_queue": "CREATE QUEUE",
    "alter_queue": "ALTER QUEUE",
    "drop_queue": "DROP QUEUE",
    "create_service": "CREATE SERVICE",
    "alter_service": "ALTER SERVICE",
    "drop_service": "DROP SERVICE",
    "create_event_notification": "CREATE EVENT NOTIFICATION",
    "drop_event_notification": "DROP EVENT NOTIFICATION",
    "create_priority": "CREATE BROKER PRIORITY",
    "alter_priority": "ALTER BROKER PRIORITY",
    "drop_priority": "DROP BROKER PRIORITY",
    "alter_database": "ALTER DATABASE",
    "use": "USE",
    "create_route": "CREATE ROUTE",
    "alter_route": "ALTER ROUTE",
    "drop_route": "DROP ROUTE",
    "create_endpoint": "CREATE ENDPOINT",
    "alter_endpoint": "ALTER ENDPOINT",
    "drop_endpoint": "DROP ENDPOINT",
    "create_certificate": "CREATE CERTIFICATE",
    "drop_certificate": "DROP CERTIFICATE",
    "create_login": "CREATE LOGIN",
    "drop_login": "DROP LOGIN",
    "grant_connect": "GRANT CONNECT",
    "revoke_connect": "REVOKE CONNECT",
    "create_user": "CREATE USER",
    "drop_user": "DROP USER",
    "create_binding": "CREATE REMOTE SERVICE BINDING",
    "drop_binding": "DROP REMOTE SERVICE BINDING",
    "grant_permission": "GRANT",
    "revoke_permission": "REVOKE",
    "create_xml_schema_collection": "CREATE XML SCHEMA COLLECTION",
    "alter_xml_schema_collection": "ALTER XML SCHEMA COLLECTION",
    "drop_xml_schema_collection": "DROP XML SCHEMA COLLECTION",
}


def _statement(tree: Tree[Token], text: str) -> DdlStatement:
    kind = _STATEMENTS[str(tree.data)]
    children = [_Build().transform(c) if isinstance(c, Tree) else c for c in tree.children]
    children = [c for c in children if not (isinstance(c, Token) and c.type == "ON")]
    names = [c for c in children if isinstance(c, str) and not isinstance(c, Token)]
    name = names[0] if names else ""
    rest = [c for c in children if not (isinstance(c, str) and not isinstance(c, Token))]
    if kind == "CREATE CONTRACT":
        options: dict[str, Any] = {}
        usages: dict[str, str] = {}
        for item in rest:
            message_type, who, tok = item
            if message_type == "authorization":
                options["authorization"] = who
            elif message_type in usages:
                raise _fail(tok, f"message type {message_type!r} is listed twice")
            else:
                usages[message_type] = who
        options["messages"] = usages
    elif kind == "DROP EVENT NOTIFICATION":
        options = _options(rest, kind)
        options["names"] = names
    elif kind == "CREATE CERTIFICATE":
        (path,) = [_string(c) for c in rest if isinstance(c, Token) and c.type == "STRING"]
        options = _options(rest, kind)
        options["certificate_file"] = path
    elif kind == "CREATE LOGIN":
        options = {"certificate": names[1]}
    elif kind in ("GRANT CONNECT", "REVOKE CONNECT"):
        options = {"logins": names[1:]}
    elif kind in ("GRANT", "REVOKE"):  # GRANT SEND ON SERVICE::s TO u [, …]: no object name
        options = _options(rest, kind)
        options["permission"] = next(str(c).upper() for c in rest if isinstance(c, Token))
        options["principals"], name = names, ""
    elif kind == "CREATE REMOTE SERVICE BINDING":
        options = _options(rest, kind)
        (options["to_service"],) = [
            _string(c) for c in rest if isinstance(c, Token) and c.type == "STRING"
        ]
    elif kind == "CREATE EVENT NOTIFICATION":
        strings = [_string(c) for c in rest if isinstance(c, Token) and c.type == "STRING"]
        options = _options(rest, kind)
        options["to_service"], options["broker_instance"] = strings
    else:
        options = _options(rest, kind)
        if kind == "CREATE SERVICE":
            options["queue"] = names[1]
        elif kind == "ALTER XML SCHEMA COLLECTION" and "schemas" in options:
            options["add"] = options.pop("schemas")
    meta = tree.meta
    source = " ".join(text[meta.start_pos : meta.end_pos].split())
    return DdlStatement(
        kind,
        name,
        options,
        meta.line,
        meta.column,
        source if len(source) <= 80 else source[:79] + "…",
    )


def parse_ddl(text: str) -> list[DdlStatement]:
    """Parse a T-SQL script of Service Broker DDL into statements, all of it before any runs
    (module docstring; docs/ddl.md). USE lines come back as ``USE`` statements; GO lines and
    ``;`` are separators.

    Raises:
        CatalogError: not a string; a syntax error, naming the line, the column and the
            statement; a statement that is not Service Broker DDL; a value this broker refuses
            (ON SERVER, a Service Broker ALTER DATABASE option it does not have, a variable
            as an XML schema collection's schemas).
    """
    if not isinstance(text, str):
        raise CatalogError(f"DDL must be a string, got {type(text).__name__}")
    try:
        tree = parse(text, "start")
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    statements = []
    for child in tree.children:
        if isinstance(child, Token):  # GO: a batch separator, alone on its line
            line_text = text.split("\n")[(child.line or 1) - 1]
            if re.sub(r"--.*$", "", line_text).strip().rstrip(";").strip().upper() != "GO":
                raise CatalogError(
                    f"line {child.line}, column {child.column}: GO must stand alone on its "
                    f"line (it separates batches; it is not a statement)"
                )
            continue
        statement = ddl_statement(child, text)
        if "variable" in statement.options:
            raise CatalogError(
                f"line {statement.line}, column {statement.column}: {statement.statement} … "
                f"{statement.options['variable']}: a variable has a value only in a T-SQL "
                f"batch (servicebroker sqlcmd, Instance.execute); here write the schemas as "
                f"a string literal N'…'"
            )
        statements.append(statement)
    return statements


DDL_RULES = frozenset(_STATEMENTS)
"""The grammar's rule names that are Service Broker DDL statements (what
:func:`ddl_statement` builds)."""


def ddl_statement(tree: Tree[Token], text: str) -> DdlStatement:
    """The statement record of one DDL statement's parse ``tree`` (a rule of
    :data:`DDL_RULES`, from :func:`servicebroker.syntax.parse`) in the source ``text``.

    Raises:
        CatalogError: a value this broker refuses, naming the line, the column and the
            statement.
    """
    try:
        return _statement(tree, text)
    except (_Refused, VisitError) as exc:
        refused = exc.orig_exc if isinstance(exc, VisitError) else exc
        if not isinstance(refused, _Refused):
            raise
        tok = refused.token
        at = tok if tok is not None and tok.line is not None else tree.meta
        line, column = at.line, at.column
        head = " ".join(text[tree.meta.start_pos : tree.meta.end_pos].split())[:60]
        raise CatalogError(f"line {line}, column {column}: {refused} (in: {head})") from None


# -- syntax errors ---------------------------------------------------------------------

_TOKENS = re.compile(
    r"--[^\n]*|/\*.*?\*/|N?'(?:[^']|'')*'|\[(?:[^\]]|\]\])*\]|\"(?:[^\"]|\"\")*\"|[^\W\d][\w@#$]*|\S",
    re.S | re.I,
)
_STARTS = {"CREATE", "ALTER", "DROP", "USE", "GO", "GRANT", "REVOKE"}
_SB_OBJECTS = {
    "XML",
    "MESSAGE",
    "CONTRACT",
    "QUEUE",
    "SERVICE",
    "EVENT",
    "BROKER",
    "ROUTE",
    "ENDPOINT",
    "CERTIFICATE",
    "LOGIN",
    "USER",
    "REMOTE",
}
_CONVERSATION_WORDS = {
    "BEGIN",
    "SEND",
    "RECEIVE",
    "END",
    "WAITFOR",
    "GET",
    "MOVE",
}
_PUNCTUATION = {"LPAR": "(", "RPAR": ")", "EQUAL": "=", "COMMA": ",", "DOT": ".", "SEMICOLON": ";"}


def _words(text: str) -> list[tuple[int, str]]:
    """(position, word) of each token outside comments."""
    return [
        (m.start(), m.group())
        for m in _TOKENS.finditer(text)
        if not m.group().startswith(("--", "/*"))
    ]


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _syntax_error(text: str, exc: UnexpectedInput) -> CatalogError:
    pos = exc.pos_in_stream if exc.pos_in_stream is not None else len(text)
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        pos = len(text)
    words = _words(text)
    before = [(p, w) for p, w in words if p < pos]
    at = next((w for p, w in words if p >= pos), "")
    # the statement the error is in: the last CREATE / ALTER / DROP / USE outside parentheses
    depth, start = 0, None
    for p, w in before:
        if w == "(":
            depth += 1
        elif w == ")":
            depth = max(depth - 1, 0)
        elif depth == 0 and w.upper() in _STARTS:
            start = p
    expected: set[str] = set(getattr(exc, "expected", None) or ())
    at_start = "_CREATE" in expected or (isinstance(exc, UnexpectedToken) and not before)
    prev = before[-1][1].upper() if before else ""
    line, column = _line_col(text, pos)
    word = at.upper()
    if at_start and re.match(r"[^\W\d]", at):
        head = " ".join(text[pos : pos + 60].split())
        if word in _CONVERSATION_WORDS:
            why = (
                "it is a Service Broker conversation statement or T-SQL control flow: run "
                "T-SQL batches with servicebroker sqlcmd or Instance.execute (docs/tsql.md), "
                "or conversations through the Python API (broker.transaction())"
            )
        else:
            why = (
                "execute_ddl runs Service Broker DDL only; T-SQL batches, tables and variables "
                "run with servicebroker sqlcmd or Instance.execute (docs/tsql.md)"
            )
        return CatalogError(
            f"line {line}, column {column}: not a Service Broker DDL statement: {head!r}: {why}"
        )
    if prev in ("CREATE", "ALTER", "DROP") and start == before[-1][0] and word:
        line, column = _line_col(text, start)
        if prev == "ALTER" and word == "CONTRACT":
            why = "T-SQL has no ALTER CONTRACT: DROP CONTRACT and CREATE CONTRACT again"
        elif word not in _SB_OBJECTS and (word, prev) != ("DATABASE", "ALTER"):
            why = "execute_ddl runs Service Broker DDL only"
        else:
            why = ""
        if why:
            return CatalogError(
                f"line {line}, column {column}: not a Service Broker DDL statement: "
                f"{prev} {word}: {why}"
            )
    where = f"line {line}, column {column}"
    near = " ".join(text[pos : pos + 30].split())
    near = f"input near {near!r}" if near else "end of text"
    statement = ""
    if start is not None:
        statement = " ".join(text[start:pos].split())
        statement = f" in {statement[:60] + ('…' if len(statement) > 60 else '')!r}"
    wanted = sorted(_PUNCTUATION.get(e, e.lstrip("_")) for e in expected)
    hint = f"; expected {', '.join(wanted[:10])}" if wanted and len(wanted) <= 10 else ""
    return CatalogError(f"DDL syntax error at {where}{statement}: unexpected {near}{hint}")
