"""The storage contract's part for the transmission queue (QUE-3, NET-3, NET-7): the rows of
messages waiting for a queue of this database (``is_remote`` 0: a disabled or missing queue,
PRI-14) and for the transport (``is_remote`` 1: another broker instance has not acknowledged
them). :class:`~servicebroker.storage.base.StorageConnection` includes it; every backend gives
it through the shared named queries (:mod:`.named`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from .rows import TransmissionListRow, TransmissionRow, TransportMark, TransportRow

__all__ = ["TransmissionStore"]


class TransmissionStore(Protocol):
    """The transmission queue's rows (see the module docstring); the write methods run in the
    connection's write transaction."""

    def insert_transmissions(self, rows: Iterable[Sequence[Any]]) -> None:
        """Hold messages in the transmission queue, in the given order: each row has the
        fields of a :class:`TransmissionRow` but its ``transmission_id``, in order (the ids
        come next in insert order). In the write transaction."""
        ...

    def transmission_pending(self, limit: int) -> list[TransmissionRow]:
        """For each level 10 down to 1, its oldest ``limit`` rows (by ``transmission_id``):
        every row the first ``limit`` to leave can come from (PRI-14, PRI-18); the caller
        merges them. Only the rows waiting for a queue of this database (not the
        transport's: :meth:`transmission_remote`)."""
        ...

    def transmission_remote(
        self, limit: int, *, inline_bytes: int, after: int | None = None
    ) -> list[TransportRow]:
        """The transport's rows (messages for other instances): with ``after`` None, for each
        level 10 down to 1 its oldest ``limit`` (as :meth:`transmission_pending`); else the
        first ``limit`` rows whose ``transmission_id`` is above ``after``, by id. A body
        longer than ``inline_bytes`` is left out (``message_body`` None; its size is given):
        :meth:`transmission_remote_body` reads it."""
        ...

    def transmission_remote_ids(self, low: int, high: int) -> set[int]:
        """The ids of the transport's rows between ``low`` and ``high`` (inclusive): which of
        the messages on their way are still in the transmission queue."""
        ...

    def transmission_remote_body(self, transmission_id: int) -> bytes | None:
        """The body of the transport's row ``transmission_id`` (None: the row is gone)."""
        ...

    def transmission_exists_of(self, *, remote: bool) -> bool:
        """True when the transmission queue holds a row waiting for a queue of this database
        (or, ``remote``, a row for the transport)."""
        ...

    def transmission_remote_mark(self, known_up_to: int) -> TransportMark:
        """The highest ``transmission_id`` among the transport's rows (None when there are
        none) and how many of them have an id at or below ``known_up_to``: the transport
        reads the rows above what it read, and all of them again when a row appeared below
        (PostgreSQL commits ids out of order) or went away."""
        ...

    def delete_transmission_messages(self, keys: Iterable[tuple[bytes, bool, int]]) -> None:
        """Remove the transport's rows of these (conversation_id, is_initiator,
        message_sequence_number): the far instance acknowledged them (NET-3); in the write
        transaction."""
        ...

    def set_transmission_message_statuses(
        self, updates: Iterable[tuple[tuple[bytes, bool, int], str]]
    ) -> None:
        """Set the ``transmission_status`` of the transport's rows, each given as
        ((conversation_id, is_initiator, message_sequence_number), status): why the far
        instance did not take it (NET-7); in the write transaction."""
        ...

    def transmission_exists(self) -> bool:
        """True when the transmission queue holds any row."""
        ...

    def transmission_count(self) -> int:
        """How many rows the transmission queue holds."""
        ...

    def transmission_waiting(self, conversation_id: bytes, is_initiator: bool) -> bool:
        """True when a message sent by that side of the conversation waits in the transmission
        queue (a later one must wait behind it, DLG-2)."""
        ...

    def lock_transmission(self, transmission_id: int) -> bool:
        """Lock a transmission row for the write transaction, after its sender's endpoint;
        False when it is gone (a concurrent commit delivered or dropped it: skip it)."""
        ...

    def delete_transmission(self, transmission_id: int) -> None:
        """Remove a delivered or dropped transmission row; in the write transaction."""
        ...

    def set_transmission_status(self, transmission_id: int, status: str) -> None:
        """Set a row's ``transmission_status`` (why it still waits); in the write
        transaction."""
        ...

    def delete_transmission_of_endpoint(self, conversation_id: bytes, is_initiator: bool) -> None:
        """Drop the unsent messages of one side of a conversation (END CONVERSATION WITH ERROR
        or WITH CLEANUP, DLG-4); in the write transaction."""
        ...

    def list_transmission(self) -> list[TransmissionListRow]:
        """Every transmission row for the ``transmission_queue`` view: priority descending,
        then transmission_id."""
        ...
