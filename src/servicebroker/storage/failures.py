"""How a failure of the database underneath reaches the application: always a
:class:`~servicebroker.errors.StorageError` subclass whose message names the database, says what
failed and what became of the transaction (:class:`~servicebroker.errors.Outcome`).

Each backend classifies its driver's exceptions into a :class:`Failure` (``sqlite.session``,
``postgres.session``) and decides the outcome: a failure before COMMIT, or a COMMIT the database
refused, rolled the transaction back; a connection lost (or, on SQLite, an I/O error) while
COMMIT was under way leaves it unknown. :func:`storage_failure` builds the error.
"""

from __future__ import annotations

import enum
import errno

from ..errors import (
    DatabaseUnavailableError,
    DeadlockError,
    IntegrityConflict,
    Outcome,
    StorageError,
    StorageFullError,
    StorageIOError,
)

__all__ = ["DATABASE_FAILURES", "CopiesChanged", "Failure", "os_failure", "storage_failure"]

DATABASE_FAILURES: tuple[type[StorageError], ...] = (
    DatabaseUnavailableError,
    StorageFullError,
    StorageIOError,
    DeadlockError,
)
"""The errors that say the database underneath failed, or picked the transaction as a deadlock
victim — not that it refused the application's statement (a constraint, bad SQL, a lock
time-out): a rollback they cause is not the message's fault, so poison-message handling does
not count it."""


class CopiesChanged(StorageError):
    """A commit that wrote from the storage's copies of its endpoints
    (:meth:`~servicebroker.storage.base.StorageConnection.lock_conversations` with
    ``cached=True``) found them changed when it locked them: nothing of the write transaction
    was committed, the group locks are kept, and the caller rolls back and commits again
    without copies. Never reaches the application: the engine commits again at once."""


class Failure(enum.Enum):
    """What kind of failure a driver exception is; the value says it in a message."""

    UNAVAILABLE = "the connection to the database was lost or refused"
    FULL = "the disk or the database is full"
    IO = "the operating system reported an I/O error or a read-only file"
    BUSY = "the database stayed locked beyond the busy time-out"
    CORRUPT = "the file is not a usable servicebroker database (damaged, or not SQLite)"
    CONSTRAINT = "a constraint refused the statement"
    CONFLICT = "the transaction deadlocked with a concurrent one and was rolled back; retry it"
    STATEMENT = "a statement failed"


_ERROR_CLASS: dict[Failure, type[StorageError]] = {
    Failure.UNAVAILABLE: DatabaseUnavailableError,
    Failure.FULL: StorageFullError,
    Failure.IO: StorageIOError,
    Failure.CONSTRAINT: IntegrityConflict,
    Failure.CONFLICT: DeadlockError,
}


def storage_failure(
    kind: Failure,
    *,
    database: str,
    detail: str,
    outcome: Outcome = Outcome.ROLLED_BACK,
    during: str | None = None,
    opening: bool = False,
) -> StorageError:
    """The error to raise for a failure of ``database``.

    Args:
        kind: the failure's classification.
        database: the database as users know it (``SQLite database /path/x.db``,
            ``PostgreSQL database 'x' at host:5432``; never a password).
        detail: the driver's own words (one line).
        outcome: what became of the transaction: :attr:`Outcome.UNKNOWN` only when ``kind``
            struck during COMMIT and the database could not say whether it committed.
        during: the statement under way when it is worth naming (``"COMMIT"``), or None.
        opening: the failure came while opening the database or a session of its own, outside
            any transaction: the message says nothing was written.

    Returns:
        A :class:`DatabaseUnavailableError`, :class:`StorageFullError`,
        :class:`StorageIOError`, :class:`IntegrityConflict` or plain :class:`StorageError`
        carrying ``database`` and ``outcome``.
    """
    where = f" during {during}" if during else ""
    first_line = detail.strip().splitlines()[0] if detail.strip() else "no detail given"
    if outcome is Outcome.UNKNOWN:
        then = (
            "the transaction's outcome is unknown: it may have committed; check for its "
            "effects before retrying"
        )
    elif opening:
        then = "nothing was written"
    else:
        then = "the transaction was rolled back"
    cls = _ERROR_CLASS.get(kind, StorageError)
    return cls(
        f"{database}: {kind.value}{where} ({first_line}); {then}",
        database=database,
        outcome=outcome,
    )


def os_failure(exc: OSError, *, database: str, what: str) -> StorageError:
    """The error for an ``OSError`` on one of the backend's own files (SQLite's lock and
    activity files).

    Args:
        exc: what the ``os``/``fcntl`` call raised.
        database: the database as messages name it.
        what: the file, as the message names it (``"activity file /x.db-sbactivity"``).

    Returns:
        :class:`StorageFullError` for ENOSPC/EDQUOT, :class:`StorageIOError` for
        EROFS/EIO/EACCES/EPERM, else a plain :class:`StorageError`; outcome rolled back.
    """
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        kind = Failure.FULL
    elif exc.errno in (errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM):
        kind = Failure.IO
    else:
        kind = Failure.STATEMENT
    return storage_failure(kind, database=database, detail=f"{what}: {exc.strerror or exc}")
