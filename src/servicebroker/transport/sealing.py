"""The transmitter's side of dialog security (SEC-2, NET-7): before the transport's messages are
offered, each is sealed with its dialog's session key — made by the initiator when its first
message leaves, and written to the endpoint before that message goes, so a restart reuses it —
or held back with the transmission_status saying what dialog security lacks.

:class:`Sealer` is the thin storage shell around :mod:`.dialog_protection`'s decisions; it keeps
each dialog side's key once read (a key never changes once made).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..catalog import CatalogSnapshot
from ..engine.delivery import Applier
from ..errors import DialogSecurityError
from ..storage.base import Storage
from ..storage.rows import EndpointRow
from .dialog_protection import (
    DialogKey,
    KeyRing,
    dialog_key_of,
    is_secured,
    keep_dialog_key,
    new_dialog_key,
    protect_outgoing,
)
from .wire import MessageHeader

__all__ = ["SealedOffer", "Sealer"]

_Side = tuple[bytes, bool]
T = TypeVar("T")
_CACHE_LIMIT = 50_000


@dataclass(frozen=True, slots=True)
class SealedOffer(Generic[T]):
    """One message ready to offer: ``header`` and ``body`` as they leave (sealed when the
    dialog is secured); ``tag`` is the caller's (its row and address)."""

    tag: T
    header: MessageHeader
    body: bytes


class Sealer:
    """Seals the transport's messages (see the module).

    Args:
        storage: the broker's storage (endpoint rows are read, and new keys written, in it).
        keys: the certificates' keys (:class:`~.dialog_protection.KeyRing`).
        wall_clock: seconds since the epoch (certificates' validity); ``time.time`` unless a
            test says otherwise.
    """

    def __init__(
        self, storage: Storage, keys: KeyRing, wall_clock: Callable[[], float] = time.time
    ) -> None:
        self._storage = storage
        self.keys = keys
        self._wall_clock = wall_clock
        self._known: dict[_Side, DialogKey | None] = {}
        self.sealed = 0
        """Messages sealed so far (SEC-2; a retry seals again and counts again)."""

    def wall_now(self) -> float:
        """The wall clock's now, seconds since the epoch (certificates' dates)."""
        return self._wall_clock()

    def seal(
        self,
        offers: Sequence[tuple[T, MessageHeader, bytes]],
        catalog: CatalogSnapshot,
        now: float,
    ) -> tuple[list[SealedOffer[T]], list[tuple[T, str]]]:
        """Seal ``offers`` — (tag, header, plain body) of messages for other instances — at
        ``now`` (broker-clock seconds). Returns the offers ready to go, and (tag, status) of
        those that wait because dialog security lacks a binding or a certificate (NET-7).

        Raises:
            StorageError: the endpoint rows could not be read, or a new key written.
        """
        if len(self._known) > _CACHE_LIMIT:
            self._known.clear()  # before choosing what to read: every side here is read again
        sides = {(h.conversation_id, h.is_initiator) for _, h, _ in offers}
        unknown = [s for s in sides if s not in self._known]
        refused: dict[_Side, str] = {}
        if unknown:
            refused = self._learn(unknown, catalog, now)
        ready: list[SealedOffer[T]] = []
        waiting: list[tuple[T, str]] = []
        wall_now = self.wall_now()
        for tag, header, body in offers:
            side = (header.conversation_id, header.is_initiator)
            if side in refused:
                waiting.append((tag, refused[side]))
                continue
            if side not in self._known:
                continue  # its endpoint is gone: TICK-3b takes its rows back (never unsealed)
            key = self._known[side]
            if key is None:
                ready.append(SealedOffer(tag, header, body))
                continue
            try:
                sealed_header, sealed = protect_outgoing(
                    header, body, key, catalog, self.keys, wall_now
                )
            except DialogSecurityError as exc:
                waiting.append((tag, str(exc)))
                continue
            ready.append(SealedOffer(tag, sealed_header, sealed))
            self.sealed += 1
        return ready, waiting

    def _learn(self, sides: list[_Side], catalog: CatalogSnapshot, now: float) -> dict[_Side, str]:
        """Read the endpoints of ``sides``; make and write the keys initiators lack, in one
        write transaction that reads those endpoints again, locked (a side whose binding or
        certificates are missing is refused there, with its status)."""
        wall_now = self.wall_now()
        refused: dict[_Side, str] = {}
        wanting: list[_Side] = []
        with self._storage.connection() as conn:
            for side in sides:
                row = conn.get_far_endpoint(side[0], side[1])
                if row is None:
                    # closed here, its END not yet acknowledged: sealed with the key it had
                    closed = conn.closed_conversation(side[0], side[1])
                    if closed is not None:
                        self._known[side] = dialog_key_of(closed)
                    continue  # else gone with its rows (TICK-3b takes the offer back)
                key = dialog_key_of(row)
                if key is None and _wants_key(row):
                    wanting.append(side)  # made (or refused) once, in the write below
                    continue
                self._known[side] = key
            if wanting:
                conn.begin_write()
                applier = Applier(conn, catalog, now)
                for side in wanting:
                    row = applier.side(*side)
                    if row is None:
                        continue
                    key = dialog_key_of(row)
                    if key is None:
                        try:
                            key = new_dialog_key(row, catalog, now, wall_now)
                        except DialogSecurityError as exc:
                            refused[side] = str(exc)
                            continue
                        keep_dialog_key(row, key)
                        applier.touch(row)
                    self._known[side] = key
                applier.finish()
                conn.commit()
        return refused


def _wants_key(row: EndpointRow) -> bool:
    """An initiator's dialog with another instance that is secured (SEC-2) and has no key."""
    return bool(row.is_initiator) and is_secured(row)
