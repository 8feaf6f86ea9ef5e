"""Messages as a queue holds them (QUE-2) and message-body validation (DLG-3)."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
import xml.parsers.expat
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from .errors import MessageValidationError

__all__ = [
    "MAX_XML_DEPTH",
    "VALIDATIONS",
    "BodySchema",
    "Message",
    "coerce_body",
    "fast_uuid",
    "new_id",
    "validate_body",
]

VALIDATIONS = {"NONE": "N", "EMPTY": "E", "WELL_FORMED_XML": "X", "VALID_XML": "X", "JSON": "J"}
"""DLG-3: message type validation names and the one-letter code a queue row shows (QUE-2):
VALID_XML (WITH SCHEMA COLLECTION) shows X, as SQL Server shows it."""


class BodySchema(Protocol):
    """What a VALID_XML message type validates its bodies against: an XML schema collection
    (:class:`~servicebroker.catalog.xml_schemas.XmlSchemaCollectionDef`)."""

    @property
    def name(self) -> str:
        """The collection's name, for the error message."""
        ...

    def check(self, body: bytes) -> str | None:
        """None when ``body`` is valid; else the validator's first error ("line L: text")."""
        ...


_POOL_SIZE = 4096
_pool = threading.local()
_new_object = object.__new__
_set = object.__setattr__
_UUID = uuid.UUID
_SAFE_UNKNOWN = uuid.SafeUUID.unknown
_time_ns = time.time_ns


def _forget_pool_after_fork() -> None:
    """In a forked child: drop the pool inherited from the parent, whose unused ids the parent
    goes on handing out; the child's first :func:`new_id` fills a pool of its own."""
    global _pool
    _pool = threading.local()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def new_id() -> bytes:
    """16 bytes laid out as a version-7 UUID (RFC 9562) for message ids, handles and group ids:
    the first 48 bits are the wall clock in milliseconds, the other 74 free bits random, drawn
    from a per-thread pool of ``os.urandom`` bytes so that a send costs no system call.

    Ids made at about the same time sort together, so a commit's new rows land on a few index
    pages instead of one random page each (what SQL Server's ``NEWSEQUENTIALID`` is for): the
    database writes far fewer pages per message. The wall clock here only orders ids; no
    outcome depends on it (the broker's clock drives every timer).

    The pool is per thread and per process: a child made by ``os.fork()`` (or a ``fork``
    multiprocessing start) starts from a fresh pool, so it never repeats its parent's ids."""
    pool = getattr(_pool, "data", None)
    pos = getattr(_pool, "pos", _POOL_SIZE)
    if pool is None or pos >= _POOL_SIZE:
        raw = bytearray(os.urandom(10 * _POOL_SIZE))
        for i in range(0, len(raw), 10):
            raw[i] = (raw[i] & 0x0F) | 0x70
            raw[i + 2] = (raw[i + 2] & 0x3F) | 0x80
        _pool.data = pool = bytes(raw)
        pos = 0
    _pool.pos = pos + 1
    return (_time_ns() // 1_000_000).to_bytes(6, "big") + pool[10 * pos : 10 * pos + 10]


def fast_uuid(value: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=value)`` without the argument checks (value is 16 stored bytes)."""
    u = _new_object(_UUID)
    _set(u, "int", int.from_bytes(value, "big"))
    _set(u, "is_safe", _SAFE_UNKNOWN)
    return u


@dataclass(frozen=True, slots=True)
class Message:
    """One row of a service queue, with the columns of SQL Server's queue (QUE-2).

    ``status``: 0 retained received, 1 ready, 2 not yet complete, 3 retained sent.
    ``priority``: the receiving endpoint's level, 1..10 (PRI-8). ``queuing_order``: grows with
    each message put on the queue. ``message_sequence_number``: the message's place in its
    conversation's send order. ``validation``: E, N, X or J (JSON). ``message_body``: bytes
    (possibly empty, never None). Handles and group ids are :class:`uuid.UUID`.
    ``message_enqueue_time``: when the message entered the queue, a UTC datetime on the
    broker's clock (None for a message queued before the column existed).
    """

    status: int
    priority: int
    queuing_order: int
    conversation_group_id: uuid.UUID
    conversation_handle: uuid.UUID
    message_sequence_number: int
    service_name: str
    service_id: int
    service_contract_name: str
    service_contract_id: int
    message_type_name: str
    message_type_id: int
    validation: str
    message_body: bytes
    message_id: uuid.UUID
    queue_name: str
    message_enqueue_time: datetime | None = None


def coerce_body(body: object, *, where: str) -> bytes:
    """The bytes of a message body given as bytes, bytearray, memoryview or str (UTF-8).

    Raises:
        MessageValidationError: the body is None (DLG-2: may be empty, never NULL) or of
            another type, or a str holding a lone surrogate (it has no UTF-8 form); ``where``
            names the conversation in the message.
    """
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        try:
            return body.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: not text
            raise MessageValidationError(
                f"SEND on {where}: the str message body is not valid Unicode text (a lone "
                f"surrogate U+{ord(body[exc.start]):04X} at character {exc.start}); send bytes"
            ) from None
    if body is None:
        raise MessageValidationError(f"SEND on {where}: the message body may be empty but not None")
    raise MessageValidationError(
        f"SEND on {where}: the message body must be bytes or str, not {type(body).__name__}"
    )


def validate_body(
    validation: str, body: bytes, *, message_type_name: str, schema: BodySchema | None = None
) -> None:
    """Check ``body`` against a message type's validation (DLG-3).

    ``validation`` is one of NONE, EMPTY, WELL_FORMED_XML, VALID_XML (against ``schema``, the
    type's XML schema collection) and JSON. An empty body passes WELL_FORMED_XML and VALID_XML
    (create-message-type-transact-sql.md says nothing of empty bodies for them; SQL Server
    validates the XML a body holds, and an empty one holds none: docs/tsql.md).

    Raises:
        MessageValidationError: the body fails; the message names the message type (and for
            VALID_XML the collection and the validator's first error, with its line).
    """
    if validation == "NONE":
        return
    if validation == "VALID_XML":
        if body:
            _check_xml(body, message_type_name)
            problem = "it has no XML schema collection" if schema is None else schema.check(body)
            if problem is not None:
                collection = "" if schema is None else f" {schema.name!r}"
                raise MessageValidationError(
                    f"message type {message_type_name!r} requires XML valid against XML schema "
                    f"collection{collection}: {problem}"
                )
        return
    if validation == "EMPTY":
        if body:
            raise MessageValidationError(
                f"message type {message_type_name!r} has VALIDATION = EMPTY but the body has "
                f"{len(body)} bytes"
            )
        return
    if validation == "WELL_FORMED_XML":
        if body:
            _check_xml(body, message_type_name)
        return
    if validation == "JSON":
        try:
            json.loads(body, parse_constant=_not_json)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MessageValidationError(
                f"message type {message_type_name!r} requires a JSON body: {exc}"
            ) from None
        except RecursionError:
            raise MessageValidationError(
                f"message type {message_type_name!r} requires a JSON body: the body is nested "
                f"too deeply to be checked"
            ) from None
        return
    raise MessageValidationError(
        f"message type {message_type_name!r} has unknown validation {validation!r}"
    )


MAX_XML_DEPTH = 128
"""The deepest element nesting a WELL_FORMED_XML body may have: SQL Server's xml type holds at
most 128 levels (docs/limits.md)."""


def _not_json(constant: str) -> object:
    """``json.loads``' hook for NaN, Infinity and -Infinity, which RFC 8259 does not allow."""
    raise ValueError(f"{constant} is not a JSON value (RFC 8259 allows only finite numbers)")


def _check_xml(body: bytes, message_type_name: str) -> None:
    """Parse ``body`` with expat (whose limit on entity amplification refuses a "billion
    laughs" body), refusing elements nested deeper than :data:`MAX_XML_DEPTH`."""
    parser = xml.parsers.expat.ParserCreate()
    depth = [0]

    def start(name: str, attributes: object) -> None:
        depth[0] += 1
        if depth[0] > MAX_XML_DEPTH:
            raise _TooDeep

    def end(name: str) -> None:
        depth[0] -= 1

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(body, True)
    except xml.parsers.expat.ExpatError as exc:
        raise MessageValidationError(
            f"message type {message_type_name!r} requires well-formed XML: {exc}"
        ) from None
    except _TooDeep:
        raise MessageValidationError(
            f"message type {message_type_name!r}: the XML body nests elements more than "
            f"{MAX_XML_DEPTH} levels deep"
        ) from None


class _TooDeep(Exception):
    """Raised inside expat's handler when the nesting passes :data:`MAX_XML_DEPTH`."""


@dataclass(slots=True)
class Outgoing:
    """One message leaving an endpoint, before it reaches a queue: its message type (id, name
    and QUE-2 validation letter), body, 16-byte message id and the sender's sequence number
    (-1 for a message the broker puts on the local queue: DialogTimer, lifetime Error)."""

    message_type_id: int
    message_type_name: str
    validation: str
    body: bytes
    message_id: bytes
    sequence: int
