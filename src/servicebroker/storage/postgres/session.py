"""psycopg behind the storage's errors: :class:`Session` wraps one psycopg connection so that
every statement and COMMIT raises a :class:`~servicebroker.errors.StorageError` subclass
(:mod:`..failures`) instead of a bare driver exception, and remembers a lost connection.

Classification by SQLSTATE: connection exceptions (class 08), the server shutting down, crashing
or starting (57P01..57P03), too many connections (53300) and libpq's own errors without a
SQLSTATE (connection refused, server closed the connection) are
:class:`~servicebroker.errors.DatabaseUnavailableError`; disk full (53100) is
:class:`~servicebroker.errors.StorageFullError`; I/O errors (58030) and a read-only (standby)
server (25006) are :class:`~servicebroker.errors.StorageIOError`; integrity violations (class
23) are :class:`~servicebroker.errors.IntegrityConflict`. A connection lost while COMMIT was
under way leaves the outcome unknown (the server may have committed before the connection
went); an error the server returned for COMMIT means it rolled back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...errors import BrokerError, ConversationError, Outcome
from ..failures import CopiesChanged, Failure, storage_failure
from ..sessions import SessionAccounting

__all__ = ["Result", "Session", "classify", "database_label", "has_rows"]

_BY_SQLSTATE = {
    "57P01": Failure.UNAVAILABLE,  # admin_shutdown (also pg_terminate_backend)
    "57P02": Failure.UNAVAILABLE,  # crash_shutdown
    "57P03": Failure.UNAVAILABLE,  # cannot_connect_now (starting up, shutting down)
    "57P05": Failure.UNAVAILABLE,  # idle_session_timeout
    "53300": Failure.UNAVAILABLE,  # too_many_connections
    "53100": Failure.FULL,  # disk_full
    "58030": Failure.IO,  # io_error
    "25006": Failure.IO,  # read_only_sql_transaction (a standby)
    "55P03": Failure.BUSY,  # lock_not_available (lock_timeout)
    "40P01": Failure.CONFLICT,  # deadlock_detected
}


_AFTER_COMMIT = frozenset({"54000", "57014"})
"""What the statements that share COMMIT's round trip after it (``pg_advisory_unlock_all``,
``pg_notify``) may raise while COMMIT itself succeeded: a full NOTIFY queue, a cancel. After
them the outcome is unknown; any other server error there is COMMIT's own (a deferred
constraint or trigger), so the transaction rolled back."""

REFUSED_IN_SERVER = "SB001"
"""The SQLSTATE of the broker's own refusals raised by its server functions (migration 18):
not a database failure; the statement's message is the broker's."""

COPIES_CHANGED = "SB002"
"""SQLSTATE of servicebroker_lock_unchanged (migration 19): a commit's copies of its endpoints
were out of date (:class:`~servicebroker.storage.failures.CopiesChanged`)."""


def classify(exc: BaseException) -> Failure:
    """The :class:`Failure` a psycopg exception is (by SQLSTATE; libpq's own errors, which
    have none, are a connection that failed)."""
    import psycopg

    state = getattr(exc, "sqlstate", None)
    if state:
        if state.startswith("23"):
            return Failure.CONSTRAINT
        if state.startswith("08"):
            return Failure.UNAVAILABLE
        return _BY_SQLSTATE.get(state, Failure.STATEMENT)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return Failure.UNAVAILABLE
    return Failure.STATEMENT


def database_label(url: str, schema: str | None = None) -> str:
    """``PostgreSQL database 'name' at host:port`` (and the schema when known) from a libpq
    URL: what error messages call the database — never with its password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except Exception:  # an unparsable URL: say so without repeating it
        return "PostgreSQL database (unparsable URL)"
    host = params.get("host") or params.get("hostaddr") or "the local socket"
    port = params.get("port") or 5432
    name = params.get("dbname") or params.get("user") or "(default)"
    label = f"PostgreSQL database {name!r} at {host}:{port}"
    return f"{label} (schema {schema})" if schema else label


def has_rows(cursor: Any) -> bool:
    """Whether psycopg ``cursor``'s current result is a query's (rows, maybe none), read from
    its result status: ``cursor.description`` would build a column object per column, at
    every access (a quarter of a SEND's client time, measured with benchmarks/hotspots.py)."""
    from psycopg import pq

    res = cursor.pgresult
    return res is not None and (res.nfields > 0 or res.status == pq.ExecStatus.TUPLES_OK)


class Result:
    """A statement's outcome, its rows read while the statement's errors were still being
    turned into the storage's (so reading them never raises the driver's own).

    Attributes:
        rowcount: the rows the statement returned or changed.
    """

    __slots__ = ("_rows", "rowcount")

    def __init__(self, cursor: Any) -> None:
        self.rowcount = int(cursor.rowcount)
        self._rows: list[tuple[Any, ...]] = cursor.fetchall() if has_rows(cursor) else []

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row ([] for a statement without rows)."""
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        """The first row, or None."""
        return self._rows[0] if self._rows else None


class Session:
    """One psycopg connection (autocommit) raising the storage's errors.

    Args:
        conn: the psycopg connection.
        database: the database as messages name it (:func:`database_label`).
        accounting: where failures are counted.

    Attributes:
        raw: the psycopg connection (for the pool to take back).
        lost: True once the connection was found lost: it is closed, never reused.
    """

    __slots__ = ("_accounting", "_pending", "_readers", "database", "lost", "raw")

    def __init__(self, conn: Any, database: str, accounting: SessionAccounting) -> None:
        self.raw = conn
        self.database = database
        self._accounting = accounting
        self.lost = False
        self._pending: list[tuple[str | bytes, Sequence[Any] | None]] = []
        self._readers: dict[int, list[list[tuple[Any, ...]]]] = {}  # pending index: its rows

    def defer(self, sql: str | bytes, params: Sequence[Any] | None = None) -> None:
        """Send ``sql`` (one statement) with the next statement that needs an answer — the
        next :meth:`execute`, :meth:`executemany` or :meth:`execute_all` — in the same round
        trip, in order (psycopg's pipeline mode). For statements of an open write transaction
        whose result nobody reads: BEGIN and its locks, writes before COMMIT. Their errors are
        raised by that next call (the caller then rolls the transaction back whole)."""
        self._pending.append((sql, params))

    def read_later(
        self, sql: str | bytes, params: Sequence[Any] | None = None
    ) -> Callable[[], list[tuple[Any, ...]]]:
        """Send the query ``sql`` with the next statement that needs an answer (as
        :meth:`defer`); the function returned gives its rows once that went (running the
        deferred statements now, in one round trip, if none has).

        Raises (the function):
            StorageError: as :meth:`execute`.
        """
        got: list[list[tuple[Any, ...]]] = []
        self._pending.append((sql, params))
        self._readers[len(self._pending) - 1] = got

        def rows() -> list[tuple[Any, ...]]:
            if not got:
                self.execute_all([])
            if not got:  # discarded with its transaction: read it alone
                got.append(self.execute(sql, params).fetchall())
            return got[0]

        return rows

    def discard_deferred(self) -> None:
        """Forget the deferred statements (the transaction is rolled back without them)."""
        self._pending.clear()
        self._readers.clear()

    def failure(self, exc: BaseException, *, commit: bool = False, what: str = "") -> BrokerError:
        """The error for ``exc`` raised on this session (``commit``: by a COMMIT), counted —
        or, for the broker's own refusal raised inside the server (SQLSTATE SB001, e.g. by
        servicebroker_finish_received), a :class:`ConversationError` with its message."""
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate == REFUSED_IN_SERVER:
            diag = getattr(exc, "diag", None)
            return ConversationError(str(getattr(diag, "message_primary", None) or exc))
        if sqlstate == COPIES_CHANGED:
            self._accounting.wrote_from_copies(out_of_date=True)
            return CopiesChanged(f"{self.database}: {exc}", database=self.database)
        kind = classify(exc)
        if kind is Failure.UNAVAILABLE or self.raw.broken:
            self.lost = True
            kind = Failure.UNAVAILABLE
        unknown = self.lost or getattr(exc, "sqlstate", None) in _AFTER_COMMIT
        outcome = Outcome.UNKNOWN if commit and unknown else Outcome.ROLLED_BACK
        return self._accounting.failed(
            storage_failure(
                kind,
                database=self.database,
                detail=f"{what}{exc}",
                outcome=outcome,
                during="COMMIT" if commit else None,
            )
        )

    def execute(
        self,
        sql: str | bytes,
        params: Sequence[Any] | dict[str, Any] | None = None,
        *,
        commit: bool = False,
        binary: bool = False,
    ) -> Result:
        """Run ``sql`` (one statement; several only when ``params`` is None, ``sql`` is bytes
        and nothing is deferred: the simple protocol — :meth:`execute_all` otherwise); returns
        its :class:`Result`.

        Args:
            commit: ``sql`` contains the transaction's COMMIT: a lost connection leaves the
                outcome unknown.
            binary: the rows come in PostgreSQL's binary format (the same Python values;
                ``bytea`` columns are not hex-encoded and decoded on the way: RECEIVE's
                message bodies).

        Raises:
            StorageError: a subclass as classified.
            ConversationError: a server function of the broker refused (SQLSTATE SB001), in
                ``sql`` or in a deferred statement sent with it.
        """
        import psycopg

        try:
            if self._pending:
                return Result(self._with_deferred([(sql, params)], binary=binary)[-1])
            return Result(self.raw.execute(sql, params, binary=binary))
        except psycopg.Error as exc:
            self.discard_deferred()
            raise self.failure(exc, commit=commit) from exc

    def execute_all(self, statements: Sequence[str], *, commit: bool = False) -> None:
        """Run ``statements`` (each one statement without parameters), after the deferred
        ones, in one round trip: the simple protocol when nothing is deferred, else a pipeline.

        Raises:
            StorageError, ConversationError: as :meth:`execute`; the first failing statement's
                error (those after it did not run), e.g. ``servicebroker_finish_received``'s
                refusal deferred to COMMIT's pipeline.
        """
        import psycopg

        try:
            if self._pending:
                self._with_deferred([(sql, None) for sql in statements])
            elif statements:
                self.raw.execute("; ".join(statements).encode())
        except psycopg.Error as exc:
            self.discard_deferred()
            raise self.failure(exc, commit=commit) from exc

    def execute_reads(
        self, statements: Sequence[tuple[str | bytes, Sequence[Any] | None]]
    ) -> list[list[tuple[Any, ...]]]:
        """Run ``statements`` after the deferred ones in one round trip (a pipeline); returns
        each one's rows, in order.

        Raises:
            StorageError: as :meth:`execute`.
        """
        import psycopg

        try:
            cursors = self._with_deferred(list(statements))
            return [cur.fetchall() for cur in cursors[-len(statements) :]]
        except psycopg.Error as exc:
            raise self.failure(exc) from exc

    def executemany(self, sql: str, rows: Iterable[Sequence[Any] | dict[str, Any]]) -> None:
        """Run ``sql`` once per parameter set (pipelined by psycopg: one round trip, with the
        deferred statements)."""
        import psycopg

        try:
            if self._pending:
                self._with_deferred([(sql, params) for params in rows])
                return
            with self.raw.cursor() as cur:
                cur.executemany(sql, list(rows))
        except psycopg.Error as exc:
            self.discard_deferred()
            raise self.failure(exc) from exc

    def _with_deferred(
        self, statements: list[tuple[str | bytes, Any]], *, binary: bool = False
    ) -> list[Any]:
        """The deferred statements, then ``statements``, in one pipeline (one by one where the
        client library has no pipeline mode); returns their cursors (``binary``: the rows of
        ``statements`` in binary format)."""
        import psycopg

        queue, self._pending = [*self._pending, *statements], []
        readers, self._readers = self._readers, {}
        # a statement whose result nobody reads runs on one shared cursor: psycopg keeps a
        # cursor's adapters while its SQL stays the same (a commit's many inserts)
        read = {*readers, *range(len(queue) - len(statements), len(queue))}
        shared = self.raw.cursor()
        cursors: list[Any] = []
        with self.raw.pipeline() if psycopg.Pipeline.is_supported() else contextlib.nullcontext():
            first = len(queue) - len(statements)
            for index, (sql, params) in enumerate(queue):
                cur = self.raw.cursor() if index in read else shared
                cursors.append(cur.execute(sql, params, binary=binary and index >= first))
        for index, got in readers.items():
            got.append(cursors[index].fetchall())
        return cursors

    def rollback(self) -> None:
        """Roll back the open transaction (nothing deferred is sent) through psycopg, which
        also forgets the statements it prepared on the session and deallocates them: after a
        pipeline that failed part-way, psycopg may count as prepared a statement whose PREPARE
        the server skipped.

        Raises:
            StorageError: as :meth:`execute`.
        """
        import psycopg

        self.discard_deferred()
        try:
            if self.raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                # the failure ended the transaction (at COMMIT): psycopg's rollback would
                # return at once, so one is opened for it to roll back and forget with
                self.raw.execute("BEGIN")
            self.raw.rollback()
        except psycopg.Error as exc:
            raise self.failure(exc) from exc

    @property
    def closed(self) -> bool:
        """True once the connection is closed."""
        return bool(self.raw.closed)

    def close(self) -> None:
        """Close the connection (the server rolls back what was open and frees its locks)."""
        self.lost = True
        self.raw.close()
