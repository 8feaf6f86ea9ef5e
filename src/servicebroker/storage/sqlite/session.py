"""SQLite's driver behind the storage's errors: :class:`Session` wraps one ``sqlite3``
connection so that every statement, fetch and COMMIT raises a
:class:`~servicebroker.errors.StorageError` subclass (:mod:`..failures`) instead of a bare
``sqlite3`` exception, and remembers when the connection must not be used again.

Classification by SQLite's primary result code: ``SQLITE_FULL`` is a full disk (or
``max_page_count``); ``SQLITE_IOERR``, ``SQLITE_READONLY`` and ``SQLITE_CANTOPEN`` are I/O
errors; ``SQLITE_CORRUPT``/``SQLITE_NOTADB`` a damaged file; ``SQLITE_BUSY``/``SQLITE_LOCKED`` a
lock held beyond the busy time-out; constraints are :class:`~servicebroker.errors.IntegrityConflict`.
An I/O error raised by COMMIT leaves the outcome unknown: SQLite may have written the commit
record before the failing ``fsync`` (a later recovery of the WAL can then find it); a full disk
stops the commit record being written, so the transaction is rolled back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ...errors import Outcome, StorageError
from ..failures import Failure, storage_failure
from ..sessions import SessionAccounting

__all__ = ["Rows", "Session", "classify"]

_PRIMARY = {
    13: Failure.FULL,  # SQLITE_FULL
    10: Failure.IO,  # SQLITE_IOERR (and its extended codes)
    8: Failure.IO,  # SQLITE_READONLY
    14: Failure.IO,  # SQLITE_CANTOPEN
    11: Failure.CORRUPT,  # SQLITE_CORRUPT
    26: Failure.CORRUPT,  # SQLITE_NOTADB
    5: Failure.BUSY,  # SQLITE_BUSY
    6: Failure.BUSY,  # SQLITE_LOCKED
    19: Failure.CONSTRAINT,  # SQLITE_CONSTRAINT
}


_SQLITE_IOERR = 10


def classify(exc: BaseException) -> Failure:
    """The :class:`Failure` an ``sqlite3`` exception is (by its primary result code)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return Failure.CONSTRAINT
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return Failure.STATEMENT
    return _PRIMARY.get(code & 0xFF, Failure.STATEMENT)


class Session:
    """One ``sqlite3`` connection raising the storage's errors.

    Args:
        conn: the connection (autocommit mode: ``isolation_level=None``).
        database: the database as messages name it (``SQLite database <path>``).
        accounting: where failures are counted.

    Attributes:
        broken: True once an I/O error or a damaged file was seen: close it, never pool it.
    """

    __slots__ = ("_accounting", "_conn", "broken", "database")

    def __init__(
        self, conn: sqlite3.Connection, database: str, accounting: SessionAccounting
    ) -> None:
        self._conn = conn
        self.database = database
        self._accounting = accounting
        self.broken = False

    @staticmethod
    def opening_failure(
        exc: BaseException, database: str, accounting: SessionAccounting
    ) -> StorageError:
        """The error for ``exc`` raised while opening a connection to ``database``, counted."""
        return accounting.failed(storage_failure(classify(exc), database=database, detail=str(exc)))

    def failure(self, exc: BaseException, *, commit: bool = False) -> StorageError:
        """The error for ``exc`` raised by this connection (``commit``: by COMMIT), counted."""
        kind = classify(exc)
        code = getattr(exc, "sqlite_errorcode", 0)
        # only an I/O error (not a read-only file) may come after the commit record was written
        written = kind is Failure.IO and isinstance(code, int) and code & 0xFF == _SQLITE_IOERR
        outcome = Outcome.UNKNOWN if commit and written else Outcome.ROLLED_BACK
        if kind in (Failure.IO, Failure.CORRUPT):
            self.broken = True
        return self._accounting.failed(
            storage_failure(
                kind,
                database=self.database,
                detail=str(exc),
                outcome=outcome,
                during="COMMIT" if commit else None,
            )
        )

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Rows:
        """Run one statement; its rows are read through the returned :class:`Rows`.

        Raises:
            StorageError: a subclass as classified (IntegrityConflict for a constraint).
        """
        try:
            return Rows(self._conn.execute(sql, params), self)
        except sqlite3.Error as exc:
            raise self.failure(exc) from exc

    def executemany(self, sql: str, rows: Iterable[Sequence[Any] | dict[str, Any]]) -> None:
        """Run one statement per parameter set."""
        try:
            self._conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise self.failure(exc) from exc

    def commit(self) -> None:
        """COMMIT; a failure says whether the transaction's outcome is known.

        Raises:
            StorageError: with :attr:`~servicebroker.errors.StorageError.outcome`
                ``UNKNOWN`` for an I/O error, else ``ROLLED_BACK``.
        """
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self.failure(exc, commit=True) from exc

    @property
    def in_transaction(self) -> bool:
        """True while a database transaction is open on the connection."""
        return self._conn.in_transaction

    def close(self) -> None:
        """Close the connection (never raises: a failing close has nothing left to lose)."""
        try:
            self._conn.close()
        except sqlite3.Error:
            self.broken = True


class Rows:
    """A statement's rows, read with the storage's errors (SQLite reads lazily: a fetch can
    meet an I/O error too)."""

    __slots__ = ("_cursor", "_session")

    def __init__(self, cursor: sqlite3.Cursor, session: Session) -> None:
        self._cursor = cursor
        self._session = session

    @property
    def rowcount(self) -> int:
        """Rows the statement changed (INSERT, UPDATE, DELETE)."""
        return int(self._cursor.rowcount)

    def fetchone(self) -> Any:
        """The next row, or None."""
        try:
            return self._cursor.fetchone()
        except sqlite3.Error as exc:
            raise self._session.failure(exc) from exc

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        try:
            return self._cursor.fetchall()
        except sqlite3.Error as exc:
            raise self._session.failure(exc) from exc

    def __iter__(self) -> Iterator[Any]:
        cursor = self._cursor
        while True:
            try:
                row = cursor.fetchone()
            except sqlite3.Error as exc:
                raise self._session.failure(exc) from exc
            if row is None:
                return
            yield row

    def close(self) -> None:
        """Stop reading."""
        self._cursor.close()
