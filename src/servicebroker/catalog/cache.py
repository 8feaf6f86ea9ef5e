"""The catalog cache: one :class:`~servicebroker.catalog.model.CatalogSnapshot` per broker,
re-read when the stored ``catalog_version`` moves, and the one way catalog statements are run
(:meth:`CatalogCache.change`: in a write transaction, bumping the version). A transaction's
first statement reads the stored version (``snapshot(conn, fresh=True)``; RECEIVE and SEND
have it read with their own storage call and start from :meth:`CatalogCache.cached`), so it
sees every change committed before, by any process; background readers check it at most once
per the storage's poll interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import CatalogError, IntegrityConflict
from ..storage.base import Storage, StorageConnection
from .model import CatalogSnapshot

__all__ = ["CatalogCache"]

T = TypeVar("T")


class CatalogCache:
    """The catalog snapshot of one broker.

    Args:
        storage: the broker's storage; its ``poll_interval`` (real seconds) bounds how stale a
            snapshot may be when another process changed the catalog.
    """

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._lock = threading.Lock()
        self._snapshot: CatalogSnapshot | None = None
        self._checked = float("-inf")
        self._epoch = 0
        self._dropped_queues: set[str] = set()

    def snapshot(self, conn: StorageConnection, *, fresh: bool = False) -> CatalogSnapshot:
        """The catalog as ``conn`` sees it. Changes made through this broker are seen at once;
        those of other processes within the storage's poll interval (the stored version is
        checked at most that often, or always with ``fresh``).

        Raises:
            StorageError: the catalog cannot be read.
        """
        now = time.monotonic()
        with self._lock:
            epoch = self._epoch
            cached = self._snapshot
            if (
                not fresh
                and cached is not None
                and now - self._checked < self._storage.poll_interval
            ):
                return cached
        version = conn.catalog_version()
        if cached is None or cached.version != version:
            cached = CatalogSnapshot.from_rows(conn.load_catalog())
        with self._lock:
            if self._snapshot is None or cached.version >= self._snapshot.version:
                self._snapshot = cached
                # a change made here meanwhile (epoch moved) must not be hidden by this read
                if self._epoch == epoch:
                    self._checked = now
        return cached

    def cached(self) -> CatalogSnapshot | None:
        """The snapshot held now, without reading anything (None before the first read): what a
        transaction starts from when its first statement checks the stored version itself
        (:meth:`~servicebroker.storage.base.StorageConnection.receive_first_group`)."""
        with self._lock:
            return self._snapshot

    def current(self, *, fresh: bool = False) -> CatalogSnapshot:
        """:meth:`snapshot` on a connection of its own."""
        with self._storage.connection() as conn:
            return self.snapshot(conn, fresh=fresh)

    def invalidate(self) -> None:
        """This broker changed the catalog: the next reader checks the stored version."""
        with self._lock:
            self._epoch += 1
            self._checked = float("-inf")

    def change(self, statement: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one catalog statement ``statement(conn, snapshot, *args, **kwargs)`` in a write
        transaction of its own, bump the catalog version and commit; returns what it returns.

        Raises:
            CatalogError: what the statement raises, or a constraint the database refused
                (nothing is written).
        """
        conn = self._storage.connect()
        try:
            conn.begin_write(exclusive=True)
            snap = self.snapshot(conn, fresh=True)
            result = statement(conn, snap, *args, **kwargs)
            conn.bump_catalog_version()
            conn.commit()
        except IntegrityConflict as exc:
            conn.rollback()
            raise CatalogError(f"catalog change refused by the database: {exc}") from exc
        except BaseException:
            conn.rollback()
            raise
        finally:
            self._storage.release(conn)
        self.invalidate()  # this broker's own change: seen at once
        return result

    def note_dropped_queue(self, name: str) -> None:
        """Remember that queue ``name`` was dropped here, so a RECEIVE waiting on it can say so
        (QUE-3) rather than "does not exist"."""
        with self._lock:
            self._dropped_queues.add(name)

    def was_dropped(self, name: str) -> bool:
        """True when this broker dropped a queue called ``name``."""
        with self._lock:
            return name in self._dropped_queues
