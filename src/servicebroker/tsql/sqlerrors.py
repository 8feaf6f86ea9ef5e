"""SQL Server's error numbers and texts (``sysmessages.tsv``, transcribed from Microsoft's
"Database Engine events and errors" pages), and the translation of the broker's own errors
(:class:`~servicebroker.errors.BrokerError` and its kinds) into the :class:`TSqlError` SQL Server
raises for the same fault: an unknown conversation handle is Msg 8426, a SEND after END is
8429, a disabled queue 9617, a missing object 208 or 15151, an existing one 2714, a permission
denied 229. An error with no SQL Server counterpart keeps the broker's text under Msg 50000
(docs/tsql.md).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from ..errors import (
    BrokerError,
    CatalogError,
    ConversationError,
    MessageValidationError,
    PermissionDeniedError,
    QueueDisabledError,
    StorageError,
    TransactionError,
    TSqlError,
)

__all__ = ["broker_error", "has_message", "severity_of", "sql_message"]

_PLACEHOLDER = re.compile(r"%(?:\.\*ls|ls|S_MSG|I64d|[-+ 0#]?\d*(?:\.\d+)?[lh]?[sdiuxXo])")


@functools.cache
def _messages() -> dict[int, tuple[int, str]]:
    text = resources.files(__package__).joinpath("sysmessages.tsv").read_text(encoding="utf-8")
    out: dict[int, tuple[int, str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        number, severity, message = line.split("\t", 2)
        out[int(number)] = (int(severity), message)
    return out


def has_message(number: int) -> bool:
    """Whether sys.messages (the table here) has message ``number``."""
    return number in _messages()


def severity_of(number: int) -> int:
    """SQL Server's severity of error ``number`` (16 for one not in the table)."""
    return _messages().get(number, (16, ""))[0]


def sql_message(number: int, *args: object) -> str:
    """The text of error ``number`` with ``args`` put in its placeholders in order, as
    FORMATMESSAGE and RAISERROR(number, …) make it.

    Raises:
        KeyError: no message ``number`` in the table.
    """
    template = _messages()[number][1]
    values = iter(args)

    def put(match: re.Match[str]) -> str:
        value = next(values, None)
        return "" if value is None else str(value)

    return _PLACEHOLDER.sub(put, template)


def _error(number: int, line: int, *args: object) -> TSqlError:
    return TSqlError(number, sql_message(number, *args), severity=severity_of(number), line=line)


_QUOTED = r"'([^']*)'"
_KINDS = {
    "message type": "message type",
    "contract": "contract",
    "queue": "queue",
    "service": "service",
    "route": "route",
    "event notification": "event notification",
    "broker priority": "broker priority",
    "certificate": "certificate",
    "login": "login",
    "endpoint": "endpoint",
    "remote service binding": "remote service binding",
    "database principal": "user",
    "user": "user",
}


def broker_error(exc: BrokerError, line: int, database: str = "") -> TSqlError:
    """The error SQL Server raises where the broker raised ``exc`` (module docstring), in the
    statement at ``line`` of a session on ``database`` (which Msg 229 names)."""
    if isinstance(exc, TSqlError):
        return exc
    inner = exc.__cause__ if isinstance(exc.__cause__, BrokerError) else exc
    text = str(inner)
    statement = str(exc).split(" at line", 1)[0] if inner is not exc else ""
    found = _match(inner, text, statement, line, database)
    if found is not None:
        return found
    return TSqlError(50000, str(exc), severity=16, line=line)


def _match(
    exc: BrokerError, text: str, statement: str, line: int, database: str
) -> TSqlError | None:
    if isinstance(exc, StorageError):
        m = re.search(
            r'no such table: (?:\w+\.)?([^\s);]+)|relation "([^"]+)" does not exist', text
        )
        if m:
            return _error(208, line, m.group(1) or m.group(2))
        m = re.search(
            r"UNIQUE constraint failed: ([\w.]+)|duplicate key value violates unique constraint \"([^\"]+)\"",
            text,
        )
        if m:
            constraint = m.group(1) or m.group(2)
            return _error(
                2627,
                line,
                "PRIMARY KEY",
                constraint,
                constraint.split(".")[0],
                "not reported by the database underneath",
            )
        m = re.search(
            r'NOT NULL constraint failed: (\w+)\.(\w+)|null value in column "([^"]+)" of relation "([^"]+)"',
            text,
        )
        if m:
            column, table = (m.group(2), m.group(1)) if m.group(1) else (m.group(3), m.group(4))
            return _error(515, line, column, table, "INSERT")
        return None
    if isinstance(exc, PermissionDeniedError):
        return _error(229, line, exc.permission, exc.securable, database, "dbo")
    if isinstance(exc, QueueDisabledError):
        m = re.search(r"queue " + _QUOTED, text)
        name = m.group(1) if m else ""
        if "does not exist" in text or "was dropped" in text:
            return _error(208, line, name)
        return _error(9617, line, name)
    if isinstance(exc, MessageValidationError):
        m = re.search(r"message type " + _QUOTED + r" is not sent by the (\w+)", text)
        if m:
            return _error(8432 if m.group(2) == "initiator" else 8434, line, m.group(1))
        m = re.search(r"message type " + _QUOTED + r" is not (?:in|part of|allowed)", text)
        if m:
            return _error(8431, line, m.group(1))
        m = re.search(r"message type " + _QUOTED, text)
        return TSqlError(
            9615, sql_message(9615, m.group(1) if m else "", text, "", 1, 0), line=line
        )
    if isinstance(exc, ConversationError):
        m = re.search(
            r"conversation handle ([0-9a-fA-F-]{36}) (?:does not exist|is not on this queue)", text
        )
        if m:
            return _error(8426, line, m.group(1).upper())
        m = re.search(
            r"conversation group ([0-9a-fA-F-]{36}) (?:does not exist|is not on this)", text
        )
        if m:
            return _error(8436, line, m.group(1).upper())
        m = re.search(r"state (\w\w)\b", text)
        if re.search(r"\bSEND\b", text) and m:
            return _error(8429, line, m.group(1))
        if "LIFETIME" in text:
            return _error(8489, line)
        if "CONVERSATION TIMER" in text and m:
            return _error(8458, line, m.group(1))
        if "MOVE CONVERSATION" in text and m:
            return _error(8438, line, m.group(1))
        return None
    if isinstance(exc, TransactionError):
        return None
    if isinstance(exc, CatalogError):
        return _catalog(text, statement, line)
    return None


def _xml_schema_collection(text: str, statement: str, line: int) -> TSqlError | None:
    """The XML schema collection statements' errors (6310, 6314, 6328, 6335, 6347, 6348,
    15151, and 9400 for schemas that are not XML); None for the others (a schema libxml2 does
    not compile keeps the broker's text: docs/tsql.md)."""
    m = re.search(r"XML schema collection " + _QUOTED + r" (already exists|does not exist)", text)
    if m:
        name = m.group(1)
        if m.group(2) == "already exists":
            return _error(6348, line, name)
        if statement.startswith("DROP XML"):
            return _error(15151, line, "drop", "xml schema collection", name)
        return _error(6347 if statement.startswith("ALTER XML") else 6314, line, name)
    m = re.search(
        r"cannot drop XML schema collection " + _QUOTED + r": it is used by message type "
        r"'(.*)'(?: and \d+ more)?$",
        text,
    )
    if m:
        return _error(6328, line, m.group(1), "message type", m.group(2))
    if not text.startswith("XML schema collection "):
        return None
    m = re.search(r"the (\w+) " + _QUOTED + r" of namespace '(.*)' exists already", text)
    if m:
        return _error(6310, line, m.group(3), m.group(2), m.group(1))
    m = re.search(r"nest elements more than (\d+) levels deep", text)
    if m:
        return _error(6335, line, m.group(1))
    m = re.search(r"': (XML parsing: .*)$", text)
    if m:
        return TSqlError(9400, m.group(1), severity=16, line=line)
    return None


def _catalog(text: str, statement: str, line: int) -> TSqlError | None:
    if "XML schema collection" in text:
        found = _xml_schema_collection(text, statement, line)
        if found is not None:
            return found
    m = re.search(r"^(?:\w[\w ]*?: )?([a-z ]+?) " + _QUOTED + r" already exists", text)
    if m:
        name = m.group(2)
        if m.group(1) in ("user", "database principal"):
            return _error(15023, line, name)
        if m.group(1) == "login":
            return _error(15025, line, name)
        return _error(2714, line, name)
    m = re.search(r"([a-z ]+?) " + _QUOTED + r" does not exist", text)
    if m:
        kind = _KINDS.get(m.group(1).strip().split(":")[-1].strip(), m.group(1).strip())
        name = m.group(2)
        if statement.startswith("DROP"):
            return _error(15151, line, "drop", kind, name)
        if kind == "service":
            return _error(8423, line, name)
        if kind == "contract":
            return _error(8425, line, name)
        if kind == "message type":
            return _error(8428, line, name)
        if kind == "queue":
            return _error(208, line, name)
        return _error(15151, line, "find", kind, name)
    m = re.search(
        r"service " + _QUOTED + r" does not (?:take|support|accept) contract " + _QUOTED, text
    )
    if m:
        return _error(8408, line, m.group(1), m.group(2))
    return None
