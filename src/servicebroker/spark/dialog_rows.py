"""Rows that become SENDs, BEGIN DIALOGs, conversation timers and END CONVERSATIONs: the column
rules both ``servicebroker`` writers (batch and streaming) share.

A row's columns (any may be missing from the DataFrame unless said otherwise):

- ``conversation_handle`` (string): an existing conversation to act on (a reply). Or
- ``conversation_key``: rows with one key go, in the order they come, on one new dialog
  (BEGIN DIALOG FROM ``from_service`` TO ``to_service`` ON CONTRACT ``contract``, each a column
  or an option; a dialog takes the values of its first row), joining the conversation group of
  ``group_key`` if given (RELATED_CONVERSATION_GROUP, DLG-1: the group id is derived from the
  FROM service and the key, so it is the same in every partition, job and run).
- ``message_type_name``, ``message_body`` (binary or string): the message SENT, if the type is
  not null.
- ``conversation_timer`` (double, seconds): BEGIN CONVERSATION TIMER on the conversation
  (DLG-6), after the row's message.
- ``end_conversation`` (boolean): END CONVERSATION after the row's message (DLG-3), or alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .options import SparkOptionError, clock_at, required

__all__ = [
    "FIELDS",
    "DialogRows",
    "WriteOptions",
    "group_id_for",
    "parse_write_options",
    "record_once",
    "row_tuple",
]

GROUP_NAMESPACE = uuid.UUID("5b6e0c1e-8a4f-4d1e-9d2a-6f1c3b7a9e10")

FIELDS = (
    "conversation_handle",
    "conversation_key",
    "group_key",
    "from_service",
    "to_service",
    "contract",
    "message_type_name",
    "message_body",
    "conversation_timer",
    "end_conversation",
)
"""The columns a writer reads, in the order of the tuples it passes around."""


@dataclass(frozen=True)
class WriteOptions:
    """Parsed write options (service names and contract may be overridden per row).

    Attributes:
        url: the broker URL.
        from_service, to_service, contract: BEGIN DIALOG's defaults for new dialogs.
        write_id: this write's id (the batch writer records (write_id, partition) once).
        columns: which of :data:`FIELDS` the DataFrame has.
        query: the ``queryName`` option: the streaming writer's name for its commits when
            Spark's own query id is not at hand.
        clock: the ``clock`` option: the broker time (epoch seconds) the writer's statements
            run at (a simulated clock), else None (the system clock).
    """

    url: str
    from_service: str | None
    to_service: str | None
    contract: str
    write_id: str
    columns: frozenset[str]
    query: str | None = None
    clock: float | None = None


def parse_write_options(options: Mapping[str, str], columns: Iterable[str]) -> WriteOptions:
    """Typed write options, checked against the DataFrame's ``columns``.

    Raises:
        SparkOptionError: a missing url; neither a ``conversation_handle`` nor a
            ``conversation_key`` column; nothing to do (no ``message_type_name``,
            ``end_conversation`` or ``conversation_timer`` column); one of
            ``message_type_name`` and ``message_body`` without the other; new dialogs (a ``conversation_key`` column and no
            ``conversation_handle`` column) without a FROM or TO service as option or column.
    """
    url = required(options, "url", "the broker URL")
    have = frozenset(c for c in columns if c in FIELDS)
    if not {"conversation_handle", "conversation_key"} & have:
        raise SparkOptionError(
            "servicebroker data source: the DataFrame needs a conversation_handle column (act on "
            "existing conversations) or a conversation_key column (begin dialogs)"
        )
    if not {"message_type_name", "end_conversation", "conversation_timer"} & have:
        raise SparkOptionError(
            "servicebroker data source: the DataFrame lacks column(s) message_type_name, "
            "message_body (or end_conversation / conversation_timer)"
        )
    missing = [c for c in ("message_type_name", "message_body") if c not in have]
    if len(missing) == 1:
        raise SparkOptionError(
            f"servicebroker data source: the DataFrame lacks column(s) {missing[0]} (a message "
            f"is a message_type_name and a message_body)"
        )
    from_service = options.get("from_service")
    to_service = options.get("to_service")
    if "conversation_key" in have and "conversation_handle" not in have:
        if from_service is None and "from_service" not in have:
            raise SparkOptionError(
                "servicebroker data source: give option 'from_service' or a from_service column"
            )
        if to_service is None and "to_service" not in have:
            raise SparkOptionError(
                "servicebroker data source: give option 'to_service' or a to_service column"
            )
    return WriteOptions(
        url,
        from_service,
        to_service,
        options.get("contract", "DEFAULT"),
        uuid.uuid4().hex,
        have,
        options.get("queryname"),
        clock_at(options),
    )


def group_id_for(from_service: str, key: str) -> uuid.UUID:
    """The conversation group id of a ``group_key`` sent from ``from_service``: the same in
    every job and partition. A group belongs to one queue (DLG-1), so the FROM service is part
    of it: one plane flying from three airports has a group at each."""
    return uuid.uuid5(GROUP_NAMESPACE, f"{from_service}\x00{key}")


def row_tuple(row: Any, columns: frozenset[str]) -> tuple[Any, ...]:
    """A Spark Row as a tuple of :data:`FIELDS` (None where the DataFrame lacks the column)."""
    return tuple(row[f] if f in columns else None for f in FIELDS)


class DialogRows:
    """Applies rows (tuples of :data:`FIELDS`) to one broker transaction, in order.

    Args:
        tx: the transaction (:class:`servicebroker.Transaction`).
        opts: the write options.

    Attributes:
        dialogs: dialogs begun, by conversation key.
        sent: messages sent.
        ended: conversations ended.
    """

    def __init__(self, tx: Any, opts: WriteOptions) -> None:
        self.tx = tx
        self.opts = opts
        self.dialogs: dict[Any, uuid.UUID] = {}
        self.sent = 0
        self.ended = 0

    def apply(self, row: tuple[Any, ...]) -> None:
        """One row: begin its dialog if new, SEND, set the timer, END (see the module docstring).

        Raises:
            SparkOptionError: a row with neither a handle nor a key, or a body without a type.
            BrokerError: what the statement raises (a closed conversation, an unknown message
                type …): the transaction is not committed.
        """
        (handle, key, group_key, from_s, to_s, contract, mt, body, timer, end) = row
        tx = self.tx
        if handle is None:
            if key is None:
                raise SparkOptionError(
                    "servicebroker data source: a row has neither a conversation_handle nor a "
                    "conversation_key"
                )
            handle = self.dialogs.get(key)
            if handle is None:
                from_service = from_s or self.opts.from_service
                handle = tx.begin_dialog(
                    from_service,
                    to_s or self.opts.to_service,
                    contract=contract or self.opts.contract,
                    related_conversation_group=None
                    if group_key is None
                    else group_id_for(str(from_service), str(group_key)),
                )
                self.dialogs[key] = handle
        if mt is not None:
            tx.send(
                handle, mt, b"" if body is None else body if isinstance(body, str) else bytes(body)
            )
            self.sent += 1
        elif body is not None:
            raise SparkOptionError(
                f"servicebroker data source: a row for conversation {handle} has a message_body "
                f"but no message_type_name"
            )
        if timer is not None:
            tx.begin_conversation_timer(handle, float(timer))
        if end:
            tx.end_conversation(handle)
            self.ended += 1


def record_once(tx: Any, paramstyle: str, query_id: str, batch_id: int, now: float) -> bool:
    """Record in ``tx`` that ``query_id`` committed ``batch_id`` (the broker's
    ``stream_commits`` table); False, with ``tx`` rolled back, when an earlier transaction did.

    Raises:
        StorageError: the database failed.
    """
    from ..errors import IntegrityConflict
    from ..storage.queries import portable_sql

    try:
        tx.execute(
            portable_sql(
                "INSERT INTO stream_commits (query_id, batch_id, committed_at) VALUES (?, ?, ?)",
                paramstyle,
            ),
            (query_id, batch_id, now),
        )
    except IntegrityConflict:
        tx.rollback()
        return False
    return True
