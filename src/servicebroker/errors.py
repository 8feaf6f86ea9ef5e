"""The one exception hierarchy of servicebroker.

Every error the broker raises is a :class:`BrokerError`; each message names the object at fault
(a queue, a service, a conversation handle, a message type) and says what was wrong with it.
"""

from __future__ import annotations

import enum

__all__ = [
    "BrokerError",
    "CatalogError",
    "CertificateError",
    "ClockError",
    "ConversationError",
    "DatabaseUnavailableError",
    "DeadlockError",
    "DialogSecurityError",
    "FramingError",
    "IntegrityConflict",
    "LockTimeoutError",
    "MessageValidationError",
    "Outcome",
    "PermissionDeniedError",
    "QueueDisabledError",
    "StorageError",
    "StorageFullError",
    "StorageIOError",
    "StreamClaimError",
    "TSqlError",
    "TransactionError",
    "TransportError",
]


class BrokerError(Exception):
    """Base class of every error raised by servicebroker."""


class CatalogError(BrokerError):
    """A catalog object (message type, contract, queue, service) is missing, duplicated, in use,
    or was given a bad name or value."""


class CertificateError(CatalogError):
    """A certificate or private key file cannot be read, is not PEM, does not parse, or the key
    does not match the certificate (CREATE CERTIFICATE, CREATE ENDPOINT); the message names
    the file or the certificate at fault."""


class ConversationError(BrokerError):
    """A dialog statement (BEGIN DIALOG, SEND, END CONVERSATION, MOVE CONVERSATION, BEGIN
    CONVERSATION TIMER, RECEIVE WHERE) named an unknown conversation or group, or the
    conversation's state forbids the statement (for example SEND after END CONVERSATION)."""


class MessageValidationError(BrokerError):
    """A message body failed its message type's validation (DLG-3) or the message type is not
    allowed on the conversation's contract for the sending side (DLG-2)."""


class PermissionDeniedError(BrokerError):
    """The principal a transaction acts as lacks a permission the statement needs (SEC-4):
    SEND on the target service (SEND, or BEGIN DIALOG's first message), RECEIVE on the queue
    (RECEIVE, WAITFOR RECEIVE, GET CONVERSATION GROUP). Nothing was enqueued or dequeued; the
    message names the permission, the securable and the principal, as "The SEND permission
    was denied on SERVICE::'//x/Svc' for principal 'alice'".

    Args:
        permission: "SEND" or "RECEIVE".
        securable: ``"SERVICE::name"`` or ``"QUEUE::name"``.
        principal: the principal's name.
    """

    def __init__(self, permission: str, securable: str, principal: str) -> None:
        kind, _, name = securable.partition("::")
        super().__init__(
            f"The {permission} permission was denied on {kind}::{name!r} for principal "
            f"{principal!r}"
        )
        self.permission = permission
        self.securable = securable
        self.principal = principal


class QueueDisabledError(BrokerError):
    """RECEIVE or GET CONVERSATION GROUP on a queue whose STATUS is OFF, or a waiting RECEIVE
    ended because the queue was turned OFF or dropped (QUE-3)."""


class LockTimeoutError(BrokerError):
    """A statement waited longer than the broker's ``lock_timeout`` for a conversation group
    locked by another transaction (DLG-9)."""


class StreamClaimError(BrokerError):
    """A stream reader cannot go on with its claims: its unacknowledged batch was released
    after its claim time-out (others may have received those messages), or the offset it
    resumes from is older than what it acknowledged (a checkpoint from another run)."""


class ClockError(BrokerError, ValueError):
    """A :class:`~servicebroker.clock.ManualClock` given a start that is not a finite number of
    seconds, a move by a negative, NaN or infinite amount, or a time before its own (a
    ``ValueError`` too)."""


class TransactionError(BrokerError):
    """The transaction was used after it ended, or from a state that does not allow it."""


class Outcome(enum.Enum):
    """What became of the transaction a :class:`StorageError` interrupted."""

    ROLLED_BACK = "rolled back"
    """Nothing of it was committed: the database rolled it back (or it never began). Retrying
    it cannot apply it twice."""

    UNKNOWN = "unknown"
    """The connection was lost (or the disk failed) while COMMIT was under way: the transaction
    may or may not have committed. Check for its effects before retrying — for example a row
    the application wrote with ``tx.execute`` in the same transaction (see
    docs/reliability.md)."""


class StorageError(BrokerError):
    """The database underneath failed or is unusable: a bad URL, a newer schema, an unsupported
    platform, or a failure while working — see the subclasses for the connection lost
    (:class:`DatabaseUnavailableError`), a full disk (:class:`StorageFullError`) and I/O
    errors (:class:`StorageIOError`).

    Args:
        message: what went wrong, naming the database.
        database: the database as the message names it (never with a password), or None.
        outcome: what became of the interrupted transaction (default: rolled back).

    Attributes:
        database: as given.
        outcome: an :class:`Outcome`; :attr:`Outcome.UNKNOWN` only when the failure struck
            during COMMIT.
    """

    def __init__(
        self,
        message: str,
        *,
        database: str | None = None,
        outcome: Outcome = Outcome.ROLLED_BACK,
    ) -> None:
        super().__init__(message)
        self.database = database
        self.outcome = outcome

    def __reduce__(self) -> tuple[object, ...]:  # keep the attributes across processes
        return (_rebuild, (type(self), str(self), self.database, self.outcome))


def _rebuild(
    cls: type[StorageError], message: str, database: str | None, outcome: Outcome
) -> StorageError:
    return cls(message, database=database, outcome=outcome)


class DatabaseUnavailableError(StorageError):
    """The database cannot be reached: the connection was lost, the server shut down or is
    starting up, or it refused a new connection. A Broker recovers by itself once the server
    is back; retry the transaction then (after checking its effects when :attr:`outcome` is
    :attr:`Outcome.UNKNOWN`)."""


class StorageFullError(StorageError):
    """The disk (or the database's size limit) is full: nothing more can be written until
    space is freed. Stored messages are intact."""


class StorageIOError(StorageError):
    """The operating system reported an I/O error, or the database file or its file system is
    read-only."""


class DeadlockError(StorageError):
    """The database chose this transaction as the victim of a deadlock with a concurrent one
    (PostgreSQL, whose commits run in parallel) and rolled it back: run it again. Like a
    database failure, it does not count towards poison-message handling (POI-1)."""


class IntegrityConflict(StorageError):
    """A database constraint refused a statement (a duplicate key in the application's SQL run
    through ``tx.execute``, or a catalog row another process changed at the same time); the
    transaction must be rolled back."""


class TransportError(BrokerError):
    """The transport between broker instances failed: a connection, a peer, a frame."""


class FramingError(TransportError):
    """Bytes on a connection are not a right frame (bad magic or version, unknown type, a
    length beyond the limit, a failed checksum, a frame cut off): the connection is closed and
    its dialogs' messages are sent again (NET-4, NET-6)."""


class DialogSecurityError(TransportError):
    """Dialog security (SEC-2, SEC-3) failed for a message: a session key that cannot be made,
    wrapped or unwrapped, a signature that does not verify, a certificate missing or expired, or
    a sealed body that fails its integrity check. The message is not delivered; the text says
    what failed and names the certificate or conversation."""


class TSqlError(BrokerError):
    """A T-SQL statement failed as SQL Server fails it (``servicebroker sqlcmd``,
    :meth:`servicebroker.Instance.execute`): SQL Server's error ``number`` and text, its
    ``severity`` (level: 11–16 the statement's or the batch's error, 20 and above fatal to the
    session), ``state``, the batch ``line`` and the stored ``procedure`` it was raised in
    (``None`` outside one). ``str()`` is the message text alone; :meth:`sqlcmd_text` is the
    ``Msg N, Level L, State S, …`` form sqlcmd prints."""

    def __init__(
        self,
        number: int,
        message: str,
        *,
        severity: int = 16,
        state: int = 1,
        line: int = 1,
        procedure: str | None = None,
    ) -> None:
        super().__init__(message)
        self.number = number
        self.message = message
        self.severity = severity
        self.state = state
        self.line = line
        self.procedure = procedure

    def sqlcmd_text(self, server: str = "") -> str:
        """The two lines sqlcmd prints for this error: ``Msg N, Level L, State S, [Server S,]
        [Procedure P, ]Line L`` and the message."""
        where = f"Server {server}, " if server else ""
        if self.procedure:
            where += f"Procedure {self.procedure}, "
        return (
            f"Msg {self.number}, Level {self.severity}, State {self.state}, {where}"
            f"Line {self.line}\n{self.message}"
        )
