"""The other databases of one instance as the engine sees them: which of them holds a service
that is not in this database (AutoCreatedLocal across the databases of an instance, as SQL
Server's ``LOCAL`` address reaches every database of the instance), and what carries a message
to it once the commit that sent it is durable.

An instance (``servicebroker.tsql.instance.Instance``) joins each process's
:data:`neighbourhoods` with a :class:`Neighbourhood` of its databases. The engine asks it two
things only, by ``service_broker_guid``: at commit, where a dialog to a service not here goes
(:meth:`Neighbourhood.holder_of` — a database of the instance: the message becomes a transport
row for that broker instance, as for another instance, NET-3); and after the commit, that such
rows were committed (:meth:`Neighbourhood.committed`: the instance's link carries them now).
A broker opened alone (``Broker.open``, no instance) belongs to none, and a message to a service
not in its database waits in its transmission queue, as before.
"""

from __future__ import annotations

import threading
from typing import Protocol

__all__ = ["Neighbourhood", "Neighbourhoods", "neighbourhoods"]


class Neighbourhood(Protocol):
    """The databases of one instance, each a broker instance (its ``service_broker_guid``)."""

    def member(self, broker_instance: str) -> bool:
        """True when ``broker_instance`` (a GUID as lower-case text) is a database of this
        instance."""
        ...

    def holder_of(self, service_name: str, asking: str) -> str | None:
        """The broker instance (GUID text) of the database of this instance, other than
        ``asking``, that has a service named ``service_name`` (compared byte for byte, RTE-2);
        None when none has."""
        ...

    def committed(self, broker_instance: str) -> None:
        """Database ``broker_instance`` committed messages for other databases of the instance
        (transport rows): carry them now. Never raises (the commit is done; what cannot be
        carried now waits and is carried later)."""
        ...


class Neighbourhoods:
    """The neighbourhoods of this process (one per open instance). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hoods: list[Neighbourhood] = []

    def join(self, hood: Neighbourhood) -> None:
        """Add ``hood`` (an instance opened)."""
        with self._lock:
            self._hoods.append(hood)

    def leave(self, hood: Neighbourhood) -> None:
        """Remove ``hood`` (its instance closed); nothing when it is not there."""
        with self._lock:
            self._hoods = [h for h in self._hoods if h is not hood]

    def of(self, broker_instance: str | None) -> Neighbourhood | None:
        """The neighbourhood database ``broker_instance`` (GUID text) belongs to, or None."""
        if broker_instance is None:
            return None
        with self._lock:
            hoods = list(self._hoods)
        return next((h for h in hoods if h.member(broker_instance)), None)

    def committed(self, broker_instance: str | None) -> None:
        """Tell the neighbourhood of ``broker_instance`` that it committed messages for its
        neighbours (:meth:`Neighbourhood.committed`)."""
        hood = self.of(broker_instance)
        if hood is not None and broker_instance is not None:
            hood.committed(broker_instance)


neighbourhoods = Neighbourhoods()
"""This process's neighbourhoods: the one registry the engine reads."""
