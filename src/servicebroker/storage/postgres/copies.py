"""The copies of conversation endpoints a PostgreSQL storage keeps between the commits of its
process, so that a commit can write without reading its endpoints first (issue 29: a SEND
transaction's commit in one round trip).

A commit that locked its conversations (``lock_conversations``) reads them again, with their
row versions (PostgreSQL's ``xmin``), in the round trip of its COMMIT; once committed they are
kept here. The next commit over the same conversations works on copies of them and sends
``servicebroker_lock_unchanged`` (migration 19) ahead of its writes: it locks the rows as the
read would have and refuses the transaction (SQLSTATE SB002,
:class:`~servicebroker.storage.failures.CopiesChanged`) if any changed meanwhile — whoever
changed it, in whichever process — and the commit runs again, reading. A copy is only ever a
guess, checked by the server (and by the commit, against the groups its statements locked),
never trusted.

A row version is PostgreSQL's 32-bit transaction id of the row's last change. Ids come back
only after about four billion transactions, or when a server that lost commits (a restart
from a backup, a failover) hands theirs out again: the copies are dropped whenever a session
of the storage is lost, as it is then.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..rows import EndpointRow

__all__ = ["ConversationCopy", "EndpointCopies"]


@dataclass(frozen=True, slots=True)
class ConversationCopy:
    """Every endpoint of one conversation in this database as a commit left it.

    Attributes:
        rows: the endpoints (one or two), never handed out: callers get copies.
        versions: each row's version (``xmin``) then, in the order of ``rows``.
    """

    rows: tuple[EndpointRow, ...]
    versions: tuple[int, ...]

    def working_rows(self) -> list[EndpointRow]:
        """Copies of :attr:`rows` for a commit to change."""
        return [copy.copy(row) for row in self.rows]


class EndpointCopies:
    """Copies of conversations' endpoints by conversation id (16 bytes), shared by the
    connections of one storage (thread-safe), at most ``capacity`` conversations (the oldest
    kept go first).

    Args:
        capacity: the most conversations kept, > 0.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._by_conversation: dict[bytes, ConversationCopy] = {}
        self._lock = threading.Lock()
        self.local_waiting = False
        """Whether the last commit that read its rows found a local message waiting in the
        transmission queue: copies are not used then (the check would refuse them)."""

    def get_all(self, conversation_ids: Sequence[bytes]) -> list[ConversationCopy] | None:
        """The copies of every one of the conversations, or None unless all are kept."""
        with self._lock:
            got = [self._by_conversation.get(c) for c in conversation_ids]
        if any(c is None for c in got):
            return None
        return [c for c in got if c is not None]

    def keep(
        self, conversation_ids: Iterable[bytes], rows: Iterable[tuple[EndpointRow, int]]
    ) -> None:
        """Keep ``rows`` (each an endpoint with its version, as just committed) as the copies
        of ``conversation_ids``; a conversation none of whose rows is given has no endpoint
        left and is forgotten."""
        found: dict[bytes, list[tuple[EndpointRow, int]]] = {}
        for row, version in rows:
            found.setdefault(row.conversation_id, []).append((row, version))
        with self._lock:
            for conversation_id in conversation_ids:
                self._by_conversation.pop(conversation_id, None)
                pairs = found.get(conversation_id)
                if pairs:
                    pairs.sort(key=lambda pair: pair[0].endpoint_id)
                    self._by_conversation[conversation_id] = ConversationCopy(
                        tuple(row for row, _ in pairs), tuple(v for _, v in pairs)
                    )
            while len(self._by_conversation) > self._capacity:
                del self._by_conversation[next(iter(self._by_conversation))]

    def forget(self, conversation_ids: Iterable[bytes]) -> None:
        """Drop the copies of these conversations (a commit found them changed)."""
        with self._lock:
            for conversation_id in conversation_ids:
                self._by_conversation.pop(conversation_id, None)

    def clear(self) -> None:
        """Drop every copy."""
        with self._lock:
            self._by_conversation.clear()
