"""Savepoints of a transaction: SAVE TRANSACTION marks the transaction's state, ROLLBACK
TRANSACTION to that mark undoes what its statements did since, and the transaction goes on
(save-transaction-transact-sql.md, rollback-transaction-transact-sql.md).

A transaction's statements change nothing stored before the commit: they record operations
(:mod:`.recorded`), keep working copies of the endpoints they touch, and remember the messages
they received (still on their queues, under the transaction's group locks). So a savepoint is a
copy of that bookkeeping — the length of the operation log, the working copies' fields, the
groups created, what was received — and rolling back to it puts the copies back: the SENDs,
BEGIN DIALOGs, END CONVERSATIONs, timers and MOVEs recorded since are gone, and the messages
received since are received again by the next RECEIVE. The application's own SQL (``tx.execute``)
is rolled back by the database's SAVEPOINT (SQLite and PostgreSQL), or, when it had not written
yet at the savepoint, by rolling its write transaction back whole.

The conversation-group locks taken since the savepoint stay until the transaction ends (the
transaction may RECEIVE from those groups again; docs/tsql.md says where SQL Server, which
releases locks taken after a savepoint, differs).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from itertools import count
from typing import TYPE_CHECKING

from ..errors import BrokerError, TransactionError
from ..storage.base import StorageConnection
from ..storage.rows import EndpointRow
from .receive import ReceivedMark, Receiving

if TYPE_CHECKING:
    from .recorded import RecordedOp

__all__ = ["Savepoints"]

_NAMES = count(1)
"""Numbers for the database savepoints (``sb_savepoint_N``): never a user's text in SQL."""


@dataclass(frozen=True)
class _Savepoint:
    name: str
    ops: int
    endpoints: dict[bytes, EndpointRow]
    new_groups: dict[bytes, int]
    locked_group_of: dict[bytes, bytes]
    received: ReceivedMark
    database: str | None  # the database's SAVEPOINT name; None: no write yet at the savepoint


class Savepoints:
    """The savepoints of one transaction, over the bookkeeping it shares (the same mutable
    objects the transaction holds: its operation log, working copies by handle and by UUID,
    the groups it creates, the group of each endpoint it locked, its RECEIVE side and its
    storage connection)."""

    def __init__(
        self,
        conn: StorageConnection,
        ops: list[RecordedOp],
        endpoints: dict[bytes, EndpointRow],
        by_handle: dict[object, EndpointRow],
        new_groups: dict[bytes, int],
        locked_group_of: dict[bytes, bytes],
        receiving: Receiving,
    ) -> None:
        self._conn = conn
        self._ops = ops
        self._endpoints = endpoints
        self._by_handle = by_handle
        self._new_groups = new_groups
        self._locked_group_of = locked_group_of
        self._receiving = receiving
        self._marks: list[_Savepoint] = []

    @property
    def names(self) -> tuple[str, ...]:
        """The savepoints' names, oldest first (a name may be there more than once)."""
        return tuple(mark.name for mark in self._marks)

    def save(self, name: str) -> None:
        """SAVE TRANSACTION ``name``: mark the transaction's state now.

        Raises:
            BrokerError: ``name`` is not a non-empty string.
            StorageError: the database refused its SAVEPOINT.
        """
        if not isinstance(name, str) or not name:
            raise BrokerError(f"a savepoint's name must be a non-empty string, got {name!r}")
        database = None
        if self._conn.in_write:  # the application wrote: the database marks its changes too
            database = f"sb_savepoint_{next(_NAMES)}"
            self._conn.execute_app(f"SAVEPOINT {database}", ())
        self._marks.append(
            _Savepoint(
                name,
                len(self._ops),
                {h: replace(row) for h, row in self._endpoints.items()},
                dict(self._new_groups),
                dict(self._locked_group_of),
                self._receiving.mark(),
                database,
            )
        )

    def rollback_to(self, name: str) -> None:
        """ROLLBACK TRANSACTION ``name``: undo what was done since the latest savepoint of that
        name, which stays (the savepoints after it go).

        Raises:
            TransactionError: no savepoint of that name.
            StorageError: the database failed its ROLLBACK TO SAVEPOINT.
        """
        found = [i for i, mark in enumerate(self._marks) if mark.name == name]
        if not found:
            raise TransactionError(f"no savepoint named {name!r} in this transaction")
        mark = self._marks[found[-1]]
        del self._marks[found[-1] + 1 :]
        if mark.database is not None:
            self._conn.execute_app(f"ROLLBACK TO SAVEPOINT {mark.database}", ())
        elif self._conn.in_write:  # the application's first write came after the savepoint
            self._conn.rollback()
        del self._ops[mark.ops :]
        for handle in list(self._endpoints):
            saved = mark.endpoints.get(handle)
            if saved is None:  # begun or first used since: as if never touched
                del self._endpoints[handle]
                continue
            row = self._endpoints[handle]
            for f in fields(row):  # in place: the UUID index holds the same object
                setattr(row, f.name, getattr(saved, f.name))
        kept = {id(row) for row in self._endpoints.values()}
        for key in [k for k, row in self._by_handle.items() if id(row) not in kept]:
            del self._by_handle[key]
        self._new_groups.clear()
        self._new_groups.update(mark.new_groups)
        self._locked_group_of.clear()
        self._locked_group_of.update(mark.locked_group_of)
        self._receiving.restore(mark.received)
