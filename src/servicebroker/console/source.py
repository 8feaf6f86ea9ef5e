"""The broker the console reads: opened on first use, never started, and — for an SQLite file —
opened again when the file is replaced.

``make demo`` deletes ``demo-output/flights.db`` and makes a new one; a console started before
(or beside) it must neither create the file first (the demo refuses an existing database) nor
keep reading the deleted one. So for an SQLite URL the console waits while the file does not
exist (:class:`DatabaseMissing`, shown on the pages) and, on each use, compares the file's
identity (device and inode) with the one it opened: a new file is opened, and the old broker
is closed at the next replacement or at shutdown (a request may still be reading it).
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from collections.abc import Callable
from typing import Protocol

from ..engine.operations import Operations
from ..engine.transaction import Transaction
from ..engine.transmission import TransmissionService
from ..errors import StorageError
from ..messages import Message
from ..storage import sqlite_path
from ..views import Views

__all__ = ["BrokerSource", "ConsoleBroker", "DatabaseMissing"]


class ConsoleBroker(Protocol):
    """What the console uses of a :class:`~servicebroker.broker.Broker` (the pages read
    through it; the admin actions write through it). Only :mod:`.app` names the Broker class
    (it opens one through :class:`BrokerSource`)."""

    @property
    def database(self) -> str: ...

    @property
    def views(self) -> Views: ...

    @property
    def operations(self) -> Operations: ...

    @property
    def transmission(self) -> TransmissionService: ...

    def peek_after(self, queue: str, after: int, *, top: int) -> list[Message]: ...

    def transaction(self, *, principal: str | None = None) -> Transaction: ...

    def alter_queue(self, name: str, *, status: bool | None = None) -> None: ...

    def close(self) -> None: ...


class DatabaseMissing(StorageError):
    """The console's SQLite database file does not exist (yet): the console does not create
    it."""


def _without_password(url: str) -> str:
    """``url`` without the password a PostgreSQL URL may hold."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}@{host}"))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class BrokerSource:
    """Hands out the console's broker for ``url``.

    Args:
        url: the storage URL (``sqlite:///path.db``, a file path or ``postgresql://…``).
        open_broker: opens a broker on a URL (``Broker.open``; the console's app passes it).
        broker: an open broker to hand out instead (never reopened nor closed here).

    Raises:
        StorageError: (from :meth:`get`) ``url`` is a bad SQLite URL.
    """

    def __init__(
        self,
        url: str,
        open_broker: Callable[[str], ConsoleBroker],
        broker: ConsoleBroker | None = None,
    ) -> None:
        self.url = url
        self._open = open_broker
        self._given = broker
        self._path = sqlite_path(url) if broker is None else None
        self._lock = threading.Lock()
        self._broker: ConsoleBroker | None = None
        self._opened_identity: tuple[int, int] | None = None
        self._retired: list[ConsoleBroker] = []

    def get(self) -> ConsoleBroker:
        """The broker to read now: opened on first use, reopened when the SQLite file was
        replaced.

        Raises:
            DatabaseMissing: the SQLite file does not exist.
            StorageError: the database cannot be opened.
        """
        if self._given is not None:
            return self._given
        with self._lock:
            if self._path is not None:
                now = _identity(self._path)
                if now is None:
                    raise DatabaseMissing(
                        f"no broker database at {self._path} (yet): the console waits for it "
                        f"and does not create it",
                        database=f"SQLite database {self._path}",
                    )
                if self._broker is not None and now != self._opened_identity:
                    for old in self._retired:
                        old.close()
                    self._retired = [self._broker]
                    self._broker = None
                if self._broker is None:
                    self._opened_identity = now
            if self._broker is None:
                self._broker = self._open(self.url)
            return self._broker

    @property
    def label(self) -> str:
        """The database as the pages name it, without opening anything: the open broker's
        ``database`` (never a password), else the URL without its password."""
        current = self._given or self._broker
        return current.database if current is not None else _without_password(self.url)

    @property
    def operations(self) -> Operations:
        """The current broker's operator read model (``get().operations``): a source can be
        handed to what reads a broker's ``operations`` — ``metrics_app(source)`` — and follows
        a replaced file.

        Raises:
            DatabaseMissing: the SQLite file does not exist.
            StorageError: the database cannot be opened.
        """
        return self.get().operations

    def close(self) -> None:
        """Close the brokers this source opened."""
        with self._lock:
            for b in [*self._retired, *([self._broker] if self._broker else [])]:
                b.close()
            self._retired = []
            self._broker = None
