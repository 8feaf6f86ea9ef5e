"""A transaction's working copies of the endpoints its statements use (DLG-9): each read once,
with its conversation group locked for the rest of the transaction, before a statement checks
the endpoint's state.

A statement naming conversations the transaction has not used yet reads them — and tries
their groups' locks — in one storage call (:meth:`WorkingCopies.endpoints_for`), waiting only
for groups another transaction holds; a statement it refuses keeps no lock it took. The
conversations a RECEIVE took messages of are loaded together the first time a statement needs
one of them (their groups are held already).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from ..dialogs import State
from ..errors import ConversationError
from ..storage.base import StorageConnection
from ..storage.rows import EndpointRow
from .receive import Receiving, to_handle

__all__ = ["WorkingCopies"]


class WorkingCopies:
    """The endpoints one transaction works on, by handle.

    Args:
        conn: the transaction's storage connection.
        receiving: the transaction's receiving side (its group locks, what it received).
        endpoints: the working copies by 16-byte handle, shared with the transaction (its
            commit writes them) and its receiving side.
        by_handle: the same rows by the handle object a statement was given (a cache).
        locked_group_of: per 16-byte handle, the group it was in when locked (the commit
            refuses a row a concurrent MOVE put in another group).
    """

    def __init__(
        self,
        conn: StorageConnection,
        receiving: Receiving,
        endpoints: dict[bytes, EndpointRow],
        by_handle: dict[object, EndpointRow],
        locked_group_of: dict[bytes, bytes],
    ) -> None:
        self._conn = conn
        self._receiving = receiving
        self._endpoints = endpoints
        self._by_handle = by_handle
        self._locked_group_of = locked_group_of

    def endpoint(self, handle: object, statement: str, *, closed: bool = False) -> EndpointRow:
        """The working copy of a local endpoint, its group locked for this transaction; a
        stored closed (CD) one only when ``closed`` (END CONVERSATION WITH CLEANUP).

        Raises:
            ConversationError: ``handle`` is not a UUID, or no such (open) endpoint; the
                message starts with ``statement``.
            LockTimeoutError: its group stayed locked by another transaction.
        """
        known = self._by_handle.get(handle) if isinstance(handle, uuid.UUID) else None
        if known is not None:
            return known
        row = self._load(handle, statement, closed=closed)
        if isinstance(handle, uuid.UUID):
            self._by_handle[handle] = row
        return row

    def endpoints_for(self, handles: Sequence[object], statement: str) -> list[EndpointRow]:
        """:meth:`endpoint` of each handle; those the transaction has not used yet are read
        (and their groups locked) in one query first.

        Raises:
            ConversationError, LockTimeoutError: as :meth:`endpoint`; an unknown handle is
                refused before any group is waited for, and the locks taken are given back.
        """
        wanted_handles = [h if isinstance(h, uuid.UUID) else to_handle(h) for h in handles]
        unknown = [h for h in wanted_handles if h not in self._by_handle]
        if len(unknown) > 1:
            wanted = {h.bytes for h in unknown}
            if not wanted.isdisjoint(self._receiving.unloaded):
                self.load_received()
            missing = [b for b in wanted if b not in self._endpoints]
            if missing:
                held = self._conn.held_groups()
                pairs = self._conn.get_endpoints_and_lock(missing)
                live = {row.conversation_handle for row, _ in pairs if row.state != State.CD}
                for h in wanted_handles:  # refused before anything is waited for or adopted
                    b = h.bytes
                    if b in wanted and b not in self._endpoints and b not in live:
                        self._unlock_new([row for row, locked in pairs if locked], held)
                        raise ConversationError(
                            f"{statement}: conversation handle {uuid.UUID(bytes=b)} does not exist"
                        )
                for row, locked in pairs:
                    self._adopt(row, locked, statement)
        return [self.endpoint(h, statement) for h in wanted_handles]

    def load_received(self) -> None:
        """Every conversation received from and not loaded yet, in one query (their groups
        are held already)."""
        for loaded in self._receiving.load_received():
            self._locked_group_of[loaded.conversation_handle] = loaded.conversation_group_id

    def _load(self, handle: object, statement: str, *, closed: bool) -> EndpointRow:
        h = to_handle(handle)
        known = self._endpoints.get(h.bytes)
        if known is None and h.bytes in self._receiving.unloaded:
            self.load_received()
            known = self._endpoints.get(h.bytes)
        if known is not None:
            return known
        held = self._conn.held_groups()
        row, locked = self._conn.get_endpoint_and_lock(h.bytes)
        if row is None or (row.state == State.CD and not closed):
            if locked and row is not None:
                self._unlock_new([row], held)
            raise ConversationError(f"{statement}: conversation handle {h} does not exist")
        return self._adopt(row, locked, statement)

    def _unlock_new(self, rows: Iterable[EndpointRow], held: frozenset[bytes]) -> None:
        """Release the groups of ``rows`` that this statement locked (not in ``held`` before
        it) and no endpoint of the transaction is in: a refused statement keeps no lock it took."""
        mine = {row.conversation_group_id for row in self._endpoints.values()}
        for group in {row.conversation_group_id for row in rows} - held - mine:
            self._conn.unlock_group(group)

    def _adopt(self, row: EndpointRow, locked: bool, statement: str) -> EndpointRow:
        """Make ``row`` the transaction's working copy, once its group is locked (waiting for
        it when ``locked`` is False, DLG-9)."""
        self._receiving.lock_group(
            row.conversation_group_id,
            f"{statement} on conversation {uuid.UUID(bytes=row.conversation_handle)}",
            row.queue_id,
            locked=locked,
        )
        self._locked_group_of[row.conversation_handle] = row.conversation_group_id
        # the commit re-reads the row and refuses it if a concurrent MOVE changed its group
        self._endpoints[row.conversation_handle] = row
        return row
