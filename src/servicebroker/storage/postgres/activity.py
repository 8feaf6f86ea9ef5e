"""Queue activity every process sees, on PostgreSQL (ACT-3, ACT-5b, ACT-8): how many sessions
wait in RECEIVE or GET CONVERSATION GROUP without WHERE on a queue, when such a call last came
back empty, and when a RECEIVE last ran.

It lives in two unlogged tables, written on a session of its own: a waiting count belongs to a
session (``pg_stat_activity`` tells which are alive), so a killed process's waits vanish with it;
a lost session is opened again with this process's waits published again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..failures import storage_failure
from ..queries import load_backend_queries
from ..sessions import SessionAccounting
from .session import classify

__all__ = ["PostgresActivity"]

_Q = load_backend_queries(__package__ or "servicebroker.storage.postgres", "format")


class PostgresActivity:
    """Queue activity every process sees (ACT-3, ACT-5b): see the module docstring.

    Raises (every method):
        StorageError: the server cannot be reached (a subclass, see :mod:`.session`).

    Args:
        url: the libpq URL its own session connects to.
        database: the database as error messages name it.
        accounting: where failures are counted (the storage's).
    """

    def __init__(self, url: str, database: str, accounting: SessionAccounting) -> None:
        self._url = url
        self._database = database
        self._accounting = accounting
        self._lock = threading.Lock()
        self._conn: Any = None
        self._counts: dict[int, int] = {}
        self._tokens: dict[int, int] = {}
        self._next = 0
        self._noted: dict[tuple[str, int], float] = {}

    def _session(self) -> Any:
        """The activity session, opened again (with this process's waits published again) when
        it was lost."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            import psycopg

            self._conn = psycopg.connect(self._url, autocommit=True)
            for queue_id, count in self._counts.items():
                if count:
                    self._conn.execute(_Q["set_waiting"], (queue_id, count))
        return self._conn

    def _execute(self, name: str, params: Sequence[Any]) -> Any:
        """Run named query ``name`` on the activity session, once more on a new session if the
        old one was lost.

        Raises:
            StorageError: the server cannot be reached.
        """
        import psycopg

        try:
            try:
                return self._session().execute(_Q[name], params)
            except psycopg.OperationalError:
                if self._conn is not None:
                    self._conn.close()
                return self._session().execute(_Q[name], params)
        except psycopg.Error as exc:
            raise self._accounting.failed(
                storage_failure(
                    classify(exc), database=self._database, detail=f"queue activity: {exc}"
                )
            ) from exc

    def begin_wait(self, queue_id: int) -> int | None:
        """Count one more session of this process waiting on the queue; returns a token."""
        with self._lock:
            count = self._counts.get(queue_id, 0) + 1
            self._execute("set_waiting", (queue_id, count))  # counted only once published
            self._counts[queue_id] = count
            self._next += 1
            self._tokens[self._next] = queue_id
            return self._next

    def end_wait(self, token: int | None) -> None:
        """The wait of ``token`` ended."""
        if token is None:
            return
        with self._lock:
            queue_id = self._tokens.pop(token, None)
            if queue_id is None:
                return
            self._counts[queue_id] = max(0, self._counts.get(queue_id, 0) - 1)
            self._execute("set_waiting", (queue_id, self._counts[queue_id]))

    def waiting(self, queue_id: int) -> int:
        """Sessions of every live process waiting on the queue now."""
        with self._lock:
            row = self._execute("count_waiting", (queue_id,)).fetchone()
            return int(row[0]) if row else 0

    def _note(self, name: str, queue_id: int, when: float, coarse: float = 0.0) -> None:
        with self._lock:
            if self._noted.get((name, queue_id), float("-inf")) + coarse >= when:
                return
            self._noted[(name, queue_id)] = when
            self._execute(name, (queue_id, when))

    def _last(self, name: str, queue_id: int) -> float | None:
        with self._lock:
            row = self._execute(name, (queue_id,)).fetchone()
            return None if row is None or row[0] is None else float(row[0])

    def note_empty(self, queue_id: int, when: float) -> None:
        """A RECEIVE or GET CONVERSATION GROUP on the queue came back empty at ``when``."""
        self._note("note_empty", queue_id, when)

    def last_empty(self, queue_id: int) -> float | None:
        """The latest empty result on the queue from any process, or None."""
        return self._last("last_empty", queue_id)

    def note_receive(self, queue_id: int, when: float) -> None:
        """A RECEIVE ran on the queue at ``when`` (written at most once per broker-clock second
        per process: it re-arms QUEUE_ACTIVATION notifications, ACT-8, whose spacing is a
        minute, so a write per RECEIVE would only cost a round trip)."""
        self._note("note_receive", queue_id, when, coarse=1.0)

    def last_receive(self, queue_id: int) -> float | None:
        """The latest RECEIVE on the queue from any process, or None."""
        return self._last("last_receive", queue_id)

    def forget(self, queue_id: int) -> None:
        """Drop a queue's activity (DROP QUEUE)."""
        with self._lock:
            self._execute("forget_activity", (queue_id,))
            self._execute("forget_waiters", (queue_id,))
            self._noted = {k: v for k, v in self._noted.items() if k[1] != queue_id}

    def close(self) -> None:
        """Close the activity session (its waiting counts vanish with it)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
