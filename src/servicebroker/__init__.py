"""servicebroker: SQL Server Service Broker re-built in Python.

Dialogs under contracts, exactly-once in-order delivery per conversation, conversation-group
locks held to the end of the transaction, activation — on SQLite (the embedded default: one
file, nothing to start) and on PostgreSQL (readers and senders in many processes on many hosts),
with a PySpark data source in :mod:`servicebroker.spark` (imported only when used).

:class:`Instance` (the T-SQL interpreter's instance, :mod:`servicebroker.tsql`) is imported
when first named: a process that only sends and receives — a Spark worker, an activated reader
— does not load the T-SQL stack, which is 60 % of this package's import time.
"""

from __future__ import annotations

import typing

from .broker import ActivationContext, Broker
from .catalog import Activation
from .catalog.routing import RouteChoice
from .clock import Clock, ManualClock, SystemClock
from .dialogs import DIALOG_TIMER, END_DIALOG, ERROR, parse_error_body
from .engine.transaction import Transaction
from .errors import (
    BrokerError,
    CatalogError,
    CertificateError,
    ClockError,
    ConversationError,
    DatabaseUnavailableError,
    DeadlockError,
    DialogSecurityError,
    FramingError,
    IntegrityConflict,
    LockTimeoutError,
    MessageValidationError,
    Outcome,
    PermissionDeniedError,
    QueueDisabledError,
    StorageError,
    StorageFullError,
    StorageIOError,
    StreamClaimError,
    TransactionError,
    TransportError,
    TSqlError,
)
from .messages import Message
from .transport.settings import TransportSettings

if typing.TYPE_CHECKING:
    from .tsql import Instance

__all__ = [
    "DIALOG_TIMER",
    "END_DIALOG",
    "ERROR",
    "Activation",
    "ActivationContext",
    "Broker",
    "BrokerError",
    "CatalogError",
    "CertificateError",
    "Clock",
    "ClockError",
    "ConversationError",
    "DatabaseUnavailableError",
    "DeadlockError",
    "DialogSecurityError",
    "FramingError",
    "Instance",
    "IntegrityConflict",
    "LockTimeoutError",
    "ManualClock",
    "Message",
    "MessageValidationError",
    "Outcome",
    "PermissionDeniedError",
    "QueueDisabledError",
    "RouteChoice",
    "StorageError",
    "StorageFullError",
    "StorageIOError",
    "StreamClaimError",
    "SystemClock",
    "TSqlError",
    "Transaction",
    "TransactionError",
    "TransportError",
    "TransportSettings",
    "parse_error_body",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> typing.Any:
    """``Instance``, imported on first use (PEP 562)."""
    if name == "Instance":
        from .tsql import Instance

        return Instance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, ``Instance`` among them before its import."""
    return sorted({*globals(), *__all__})
