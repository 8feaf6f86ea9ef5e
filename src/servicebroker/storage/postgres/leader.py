"""Leadership of a PostgreSQL broker database: of all started brokers on it (any process, any
host) one holds the leader advisory lock, on a session of its own, and only its broker runs the
timer and the queue monitors. A dead leader's session ends, the server frees the lock, and
another broker takes it on its next try."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from ..queries import load_backend_queries

__all__ = ["Leadership"]

_Q = load_backend_queries(__package__ or "servicebroker.storage.postgres", "format")


class Leadership:
    """The leader lock of one storage.

    Args:
        url: the libpq URL its own session connects to.
        key: the database's leader advisory-lock key.
    """

    def __init__(self, url: str, key: int) -> None:
        self._url = url
        self._key = key
        self._lock = threading.Lock()
        self._session: Any = None
        self._leading = False

    def try_lead(self) -> bool:
        """Hold (or try to take) the leader lock; True while this storage leads. Never raises:
        an unreachable server means not leading (the session is opened again next time)."""
        import psycopg

        with self._lock:
            try:
                if self._session is None or self._session.closed:
                    self._session = psycopg.connect(self._url, autocommit=True)
                    self._leading = False
                if self._leading:
                    self._session.execute("SELECT 1")  # still connected: still the leader
                    return True
                row = self._session.execute(_Q["advisory_try_lock"], (self._key,)).fetchone()
                self._leading = bool(row is not None and row[0])
                return self._leading
            except psycopg.Error:
                if self._session is not None:
                    self._session.close()
                self._session, self._leading = None, False
                return False

    def resign(self) -> None:
        """Give leadership up: unlock (so another storage's next :meth:`try_lead` has it at
        once, not when the server notices the session ended), then close the session."""
        import psycopg

        with self._lock:
            if self._session is not None:
                if self._leading and not self._session.closed:
                    # a lost session: the server frees the lock with it
                    with contextlib.suppress(psycopg.Error):
                        self._session.execute(_Q["advisory_unlock"], (self._key,))
                self._session.close()
            self._session, self._leading = None, False
