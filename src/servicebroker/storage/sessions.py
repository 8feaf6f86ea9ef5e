"""Session accounting of a storage: how many database sessions are handed out and idle, the
failures seen — the figures that show no failure path leaks a session — and the commits written
from the storage's copies of their endpoints
(:meth:`servicebroker.storage.base.Storage.statistics`, the view
``broker.views.dm_broker_storage_sessions()``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..errors import StorageError

__all__ = ["SessionAccounting", "StorageStatistics"]


@dataclass(frozen=True)
class StorageStatistics:
    """A storage's sessions and failures at one moment.

    Attributes:
        backend: ``"sqlite"`` or ``"postgresql"``.
        database: the database as error messages name it (no password).
        sessions_in_use: sessions handed out to transactions and readers, not given back yet.
        sessions_idle: open sessions waiting in the pool.
        max_sessions: the most sessions handed out at once (PostgreSQL's ``pool_size``; None:
            no limit, SQLite).
        requests_waiting: callers waiting for a session now.
        failures: storage failures met since the storage was opened — by transactions and
            readers, and by the storage's own sessions (change listener, queue activity,
            leadership), including a ROLLBACK that failed on a lost session.
        last_failure: the message of the latest, or None.
        commits_from_copies: commits that tried to write from the storage's copies of their
            endpoints instead of reading them first (PostgreSQL: one round trip fewer; 0 on
            SQLite), whatever became of them.
        copies_out_of_date: of those, the commits whose copies the server found changed
            (SQLSTATE SB002: by another process, or by an arrival or a timer meanwhile):
            rolled back and written again reading the rows, never an error of the
            application's.
    """

    backend: str
    database: str
    sessions_in_use: int
    sessions_idle: int
    max_sessions: int | None
    requests_waiting: int
    failures: int
    last_failure: str | None
    commits_from_copies: int
    copies_out_of_date: int


class SessionAccounting:
    """Thread-safe counters a backend keeps: sessions handed out, and failures raised."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_use = 0
        self.failures = 0
        self.last_failure: str | None = None
        self.commits_from_copies = 0
        self.copies_out_of_date = 0

    def handed_out(self) -> None:
        """A session went to a caller (:meth:`Storage.connect`)."""
        with self._lock:
            self.in_use += 1

    def given_back(self) -> None:
        """A session came back (:meth:`Storage.release`), whatever state it was in."""
        with self._lock:
            self.in_use -= 1

    def wrote_from_copies(self, *, out_of_date: bool = False) -> None:
        """A commit wrote from the storage's copies of its endpoints (``out_of_date``: and
        the server found them changed)."""
        with self._lock:
            if out_of_date:
                self.copies_out_of_date += 1
            else:
                self.commits_from_copies += 1

    def failed(self, error: StorageError) -> StorageError:
        """Count ``error`` (about to be raised) and return it."""
        with self._lock:
            self.failures += 1
            self.last_failure = str(error)
        return error
