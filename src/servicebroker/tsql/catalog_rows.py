"""The rows FROM reads in a database of an instance: the catalog views and DMVs
(``sys.services``, ``sys.conversation_endpoints``, ``sys.dm_broker_queue_monitors``, …, from
:attr:`Broker.views <servicebroker.Broker.views>`), ``sys.databases`` and ``sys.objects``, and a
queue (``SELECT … FROM queue``: every message, nothing locked, QUE-1).

Column types come from the view rows' annotations, so a NULL still has its type.
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..broker import Broker
from ..errors import BrokerError, TSqlError
from ..messages import Message
from .queries import Row, RowSource
from .security_views import SECURITY_VIEWS
from .types import (
    BIGINT,
    BIT,
    DATETIME,
    INT,
    SYSNAME,
    UNIQUEIDENTIFIER,
    VARBINARY_MAX,
    SqlType,
    Typed,
)

__all__ = ["QUEUE_COLUMNS", "CatalogRows", "message_row", "procedure_id"]

QUEUE_COLUMNS: tuple[tuple[str, SqlType], ...] = (
    ("status", SqlType("TINYINT")),
    ("priority", SqlType("TINYINT")),
    ("queuing_order", BIGINT),
    ("conversation_group_id", UNIQUEIDENTIFIER),
    ("conversation_handle", UNIQUEIDENTIFIER),
    ("message_sequence_number", BIGINT),
    ("service_name", SqlType("NVARCHAR", 512)),
    ("service_id", INT),
    ("service_contract_name", SqlType("NVARCHAR", 256)),
    ("service_contract_id", INT),
    ("message_type_name", SqlType("NVARCHAR", 256)),
    ("message_type_id", INT),
    ("validation", SqlType("NCHAR", 2)),
    ("message_body", VARBINARY_MAX),
    ("message_enqueue_time", DATETIME),
)
"""A queue's columns, as SELECT * FROM a queue and RECEIVE * return them
(receive-transact-sql.md, querying-queues.md)."""


def message_row(message: Message) -> Row:
    """A message as a queue row."""
    enqueued = message.message_enqueue_time
    return {
        "status": Typed(message.status, QUEUE_COLUMNS[0][1]),
        "priority": Typed(message.priority, QUEUE_COLUMNS[1][1]),
        "queuing_order": Typed(message.queuing_order, BIGINT),
        "conversation_group_id": Typed(message.conversation_group_id, UNIQUEIDENTIFIER),
        "conversation_handle": Typed(message.conversation_handle, UNIQUEIDENTIFIER),
        "message_sequence_number": Typed(message.message_sequence_number, BIGINT),
        "service_name": Typed(message.service_name, QUEUE_COLUMNS[6][1]),
        "service_id": Typed(message.service_id, INT),
        "service_contract_name": Typed(message.service_contract_name, QUEUE_COLUMNS[8][1]),
        "service_contract_id": Typed(message.service_contract_id, INT),
        "message_type_name": Typed(message.message_type_name, QUEUE_COLUMNS[10][1]),
        "message_type_id": Typed(message.message_type_id, INT),
        "validation": Typed(message.validation, QUEUE_COLUMNS[12][1]),
        "message_body": Typed(message.message_body, VARBINARY_MAX),
        "message_enqueue_time": Typed(
            enqueued.replace(tzinfo=None) if enqueued is not None else None, DATETIME
        ),
    }


def _sql_type(annotation: Any) -> SqlType:
    """The T-SQL type of a view row field's annotation."""
    text = str(annotation)
    if "bool" in text:
        return BIT
    if "int" in text:
        return INT
    if "UUID" in text:
        return UNIQUEIDENTIFIER
    if "datetime" in text:
        return DATETIME
    if "bytes" in text:
        return VARBINARY_MAX
    if "float" in text:
        return SqlType("FLOAT")
    return SYSNAME if "str" in text else SqlType("NVARCHAR")


def _value(value: object) -> object:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, str | int | float | bytes | uuid.UUID) or value is None:
        return value
    return str(value)


def dataclass_rows(rows: Sequence[Any], row_type: type[Any]) -> RowSource:
    """View rows (frozen dataclasses of ``row_type``) as a row source."""
    hints = typing.get_type_hints(row_type)
    columns = tuple(
        (f.name, _sql_type(hints.get(f.name, str))) for f in dataclasses.fields(row_type)
    )
    out = []
    for row in rows:
        out.append({name: Typed(_value(getattr(row, name)), type_) for name, type_ in columns})
    return RowSource(columns, out)


class CatalogRows:
    """The row sources of one database (``broker``) of an instance; ``databases`` gives
    ``sys.databases``' rows (the instance's), ``current`` the database's T-SQL name."""

    def __init__(
        self,
        broker: Broker,
        current: str,
        databases: Callable[[], RowSource],
        other: Callable[[str], CatalogRows],
        modules: Callable[[], list[tuple[str, str]]],
    ) -> None:
        self._broker = broker
        self._modules = modules
        self._current = current
        self._databases = databases
        self._other = other

    @property
    def broker(self) -> Broker:
        """The broker of the database whose rows these are."""
        return self._broker

    def has(self, parts: tuple[str, ...]) -> bool:
        """Whether ``parts`` names a view or a queue (else it is the application's table)."""
        if len(parts) == 3 and parts[0].casefold() != self._current.casefold():
            return self._other(parts[0]).has(parts[1:])
        if len(parts) > 1 and parts[-2].casefold() == "sys":
            return True
        return any(
            q.name.casefold() == parts[-1].casefold() for q in self._broker.views.service_queues()
        )

    def rows(self, parts: tuple[str, ...], line: int) -> RowSource:
        """The rows of ``[database.][schema.]name`` (module docstring).

        Raises:
            TSqlError: Msg 208, no such view or queue.
        """
        if len(parts) == 3 and parts[0].casefold() != self._current.casefold():
            return self._other(parts[0]).rows(parts[1:], line)
        name = parts[-1]
        schema = parts[-2].casefold() if len(parts) > 1 else "dbo"
        if schema == "sys":
            return self._view(name, parts, line)
        try:
            messages = self._broker.peek(name)
        except BrokerError:
            raise TSqlError(208, f"Invalid object name '{'.'.join(parts)}'.", line=line) from None
        return RowSource(QUEUE_COLUMNS, [message_row(m) for m in messages])

    def _view(self, name: str, parts: tuple[str, ...], line: int) -> RowSource:
        key = name.casefold()
        if key == "databases":
            return self._databases()
        if key == "objects":
            return self._objects()
        if key == "triggers":
            return self._triggers()
        if key in SECURITY_VIEWS:  # what the security statements and sp_configure record
            return SECURITY_VIEWS[key](self._broker, lambda: self._other("master").broker)
        method = getattr(self._broker.views, key, None) if not key.startswith("_") else None
        if method is None or not callable(method):
            raise TSqlError(208, f"Invalid object name '{'.'.join(parts)}'.", line=line)
        rows = method()
        hints = typing.get_type_hints(method)
        row_type = typing.get_args(hints.get("return"))[0]
        return dataclass_rows(rows, row_type)

    def _objects(self) -> RowSource:
        columns = (
            ("name", SYSNAME),
            ("object_id", INT),
            ("schema_id", INT),
            ("type", SqlType("CHAR", 2)),
            ("type_desc", SqlType("NVARCHAR", 60)),
        )
        rows = [
            {
                "name": Typed(q.name, SYSNAME),
                "object_id": Typed(q.object_id, INT),
                "schema_id": Typed(1, INT),
                "type": Typed("SQ", columns[3][1]),
                "type_desc": Typed("SERVICE_QUEUE", columns[4][1]),
            }
            for q in self._broker.views.service_queues()
        ]
        rows.extend(
            {
                "name": Typed(name, SYSNAME),
                "object_id": Typed(procedure_id(name), INT),
                "schema_id": Typed(1, INT),
                "type": Typed(f"{kind:<2}", columns[3][1]),
                "type_desc": Typed(
                    "SQL_STORED_PROCEDURE" if kind == "P" else "SQL_TRIGGER", columns[4][1]
                ),
            }
            for name, kind in self._modules()
        )
        return RowSource(columns, rows)

    def _triggers(self) -> RowSource:
        """sys.triggers (sys-triggers-transact-sql.md): the DML triggers, all AFTER, enabled."""
        flag = SqlType("BIT")
        columns = (
            ("name", SYSNAME),
            ("object_id", INT),
            ("parent_class_desc", SqlType("NVARCHAR", 60)),
            ("type", SqlType("CHAR", 2)),
            ("type_desc", SqlType("NVARCHAR", 60)),
            ("is_disabled", flag),
            ("is_instead_of_trigger", flag),
        )
        rows = [
            {
                "name": Typed(name, SYSNAME),
                "object_id": Typed(procedure_id(name), INT),
                "parent_class_desc": Typed("OBJECT_OR_COLUMN", columns[2][1]),
                "type": Typed("TR", columns[3][1]),
                "type_desc": Typed("SQL_TRIGGER", columns[4][1]),
                "is_disabled": Typed(0, flag),
                "is_instead_of_trigger": Typed(0, flag),
            }
            for name, kind in self._modules()
            if kind == "TR"
        ]
        return RowSource(columns, rows)

    def object_id(self, name: str) -> int | None:
        """OBJECT_ID(name) for a queue, a stored procedure or a trigger of this database
        (None for anything else)."""
        last = name.split(".")[-1].strip("[]")
        for q in self._broker.views.service_queues():
            if q.name.casefold() == last.casefold():
                return q.object_id
        for module, _ in self._modules():
            if module.casefold() == last.casefold():
                return procedure_id(module)
        return None


def procedure_id(name: str) -> int:
    """A stored procedure's object_id: stable for its name (case aside), positive, and apart
    from the queues' small ids."""
    return 1_000_000_000 + zlib.crc32(name.casefold().encode()) % 1_000_000_000
