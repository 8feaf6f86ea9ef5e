"""The one exception hierarchy of servicebroker.

Every error the broker raises is a :class:`BrokerError`; each message names the object at fault
(a queue, a service, a conversation handle, a message type) and says what was wrong with it.
"""

from __future__ import annotations

__all__ = [
    "BrokerError",
    "CatalogError",
    "ConversationError",
    "IntegrityConflict",
    "LockTimeoutError",
    "MessageValidationError",
    "QueueDisabledError",
    "StorageError",
    "TransactionError",
]


class BrokerError(Exception):
    """Base class of every error raised by servicebroker."""


class CatalogError(BrokerError):
    """A catalog object (message type, contract, queue, service) is missing, duplicated, in use,
    or was given a bad name or value."""


class ConversationError(BrokerError):
    """A dialog statement (BEGIN DIALOG, SEND, END CONVERSATION, MOVE CONVERSATION, BEGIN
    CONVERSATION TIMER, RECEIVE WHERE) named an unknown conversation or group, or the
    conversation's state forbids the statement (for example SEND after END CONVERSATION)."""


class MessageValidationError(BrokerError):
    """A message body failed its message type's validation (DLG-3) or the message type is not
    allowed on the conversation's contract for the sending side (DLG-2)."""


class QueueDisabledError(BrokerError):
    """RECEIVE or GET CONVERSATION GROUP on a queue whose STATUS is OFF, or a waiting RECEIVE
    ended because the queue was turned OFF or dropped (QUE-3)."""


class LockTimeoutError(BrokerError):
    """A statement waited longer than the broker's ``lock_timeout`` for a conversation group
    locked by another transaction (DLG-9)."""


class TransactionError(BrokerError):
    """The transaction was used after it ended, or from a state that does not allow it."""


class StorageError(BrokerError):
    """The storage URL or database file is unusable (bad URL, newer schema, unsupported
    platform)."""


class IntegrityConflict(StorageError):
    """A database constraint refused a statement (a duplicate key in the application's SQL run
    through ``tx.execute``, or a catalog row another process changed at the same time); the
    transaction must be rolled back."""
