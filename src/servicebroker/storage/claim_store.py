"""The storage contract's part for stream readers and their conversation-group claims (issue
14, :mod:`servicebroker.engine.claims`): tables ``stream_readers``, ``conversation_group_claims``,
``claimed_messages`` (migration 0013_group_claims; the same migration's
``stream_commits`` is written by the Spark sink as application SQL inside its transaction).
:class:`~servicebroker.storage.base.StorageConnection` includes it; every backend gives it
through the shared named queries (:mod:`.named`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .rows import GroupClaimRow, MessageRow, StreamReaderRow

__all__ = ["ClaimStore"]


class ClaimStore(Protocol):
    """Stream readers and their claims (see the module docstring); the write methods run in
    the connection's write transaction."""

    def stream_reader(self, reader: str, *, for_update: bool = False) -> StreamReaderRow | None:
        """The stream reader named ``reader``, or None; ``for_update`` (in the write
        transaction): its row locked until the transaction ends, so two writers of one reader
        take turns."""
        ...

    def renew_stream_reader(self, reader: str, now: float) -> None:
        """Set only the reader's ``renewed`` to ``now`` (broker-clock seconds), in the write
        transaction."""
        ...

    def put_stream_reader(self, row: StreamReaderRow) -> None:
        """Insert or replace a stream reader's row, in the write transaction."""
        ...

    def list_stream_readers(self) -> list[StreamReaderRow]:
        """Every stream reader, by name."""
        ...

    def expired_stream_readers(self, now: float) -> list[str]:
        """Readers holding an unacknowledged batch whose ``renewed + claim_timeout`` is
        ``now`` or earlier."""
        ...

    def ready_groups(self, queue_id: int, limit: int) -> list[bytes]:
        """The queue's groups that have ready messages and no claim, in the order RECEIVE
        takes them (level, then head: PRI-12, PRI-13), whether locked or not; at most
        ``limit`` (-1: all)."""
        ...

    def group_claimed(self, group_id: bytes) -> bool:
        """True while a stream reader claims the group. A claimed group is skipped by
        :meth:`lock_next_group` and :meth:`queue_has_ready`, and :meth:`group_messages` and
        :meth:`conversation_messages` return nothing of it."""
        ...

    def insert_group_claims(self, rows: Iterable[tuple[bytes, int, str, int, float]]) -> None:
        """Claim groups — (group id, queue id, reader, batch, claimed_at) each — in the write
        transaction, which holds their group locks."""
        ...

    def insert_claimed_messages(
        self, reader: str, batch: int, rows: Iterable[tuple[int, int, MessageRow]]
    ) -> None:
        """Copy a batch's messages — (part, position, message row) each — in the write
        transaction."""
        ...

    def claimed_messages(self, reader: str, low: int, high: int, part: int) -> list[MessageRow]:
        """The copies of ``reader``'s batches after ``low`` up to ``high`` for task ``part``,
        by batch, then position."""
        ...

    def claimed_counts(self, reader: str, low: int, high: int) -> list[tuple[int, int, int]]:
        """(batch, part, messages) of ``reader``'s batches after ``low`` up to ``high``."""
        ...

    def claimed_orders(self, reader: str, up_to: int) -> list[tuple[int, int]]:
        """(queue id, queuing order) of the messages of ``reader``'s batches up to ``up_to``."""
        ...

    def drop_claims(self, reader: str, up_to: int) -> None:
        """Delete ``reader``'s claims and message copies of batches up to ``up_to``, in the
        write transaction."""
        ...

    def list_group_claims(self) -> list[GroupClaimRow]:
        """Rows for the ``conversation_group_claims`` view."""
        ...
