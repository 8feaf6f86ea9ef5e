"""Dialogs between the databases of one instance: the instance as the engine's
:class:`~servicebroker.engine.neighbours.Neighbourhood` (which database holds a service, by
``service_broker_guid``) and the shell that runs the link between its databases
(:func:`servicebroker.transport.local_link.carry`) — at once after a commit that sent to another
database, and on every timer tick of a database whose background work runs.

"Completing a Conversation Between Databases" (docs/database-engine/service-broker/
completing-a-conversation-between-databases.md): a dialog from a service of one database to a
service of another database of the instance needs no route or endpoint of the user's
(AutoCreatedLocal); the initiator's database is TRUSTWORTHY ON so that its dialog may act in the
target database (here: as dbo there). A new dialog from a database that is not TRUSTWORTHY waits
in its transmission queue with SQL Server's status (Msg 916) until it is.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Protocol

from ..broker import Broker
from ..catalog import DBO
from ..errors import BrokerError
from ..transport.local_link import Admission, Carried, carry
from .sqlerrors import sql_message

__all__ = ["Databases", "InstanceLink", "untrusted_status"]


class Databases(Protocol):
    """What the link reads of its instance (:class:`~servicebroker.tsql.instance.Instance`)."""

    def database_names(self) -> list[str]: ...
    def is_open(self, name: str) -> bool: ...
    def database(self, name: str) -> Broker: ...
    def option(self, database: str, key: str) -> str | None: ...


log = logging.getLogger(__name__)

LOGIN = "sa"
"""The server principal every session of an instance runs as (``SUSER_SNAME()``)."""


def untrusted_status(database: str) -> str:
    """The ``transmission_status`` of a new dialog's message whose sending database is not
    TRUSTWORTHY, for a service of ``database`` (SQL Server's words: the impersonation context
    of a database that is not trusted does not reach another database, Msg 916)."""
    return (
        "An exception occurred while enqueueing a message in the target queue. Error: 916, "
        f"State: 3. {sql_message(916, LOGIN, database)}"
    )


def _nothing(step: str) -> None:
    """No fault: the default :attr:`InstanceLink.step`."""


class InstanceLink:
    """The databases of one :class:`~servicebroker.tsql.instance.Instance` as a neighbourhood,
    and the link between them (see the module). Thread-safe.

    Attributes:
        step: called by :func:`~servicebroker.transport.local_link.carry` at each of its steps
            (``"read"``, ``"taken"``, ``"answered"``); a test injects a failure there.
    """

    def __init__(self, instance: Databases) -> None:
        self._instance = instance
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}  # broker instance (GUID text): database name
        self._strangers: set[str] = set()  # broker instances known not to be databases here
        self._busy: dict[str, bool] = {}  # database carrying now: asked again meanwhile
        self.step: Callable[[str], None] = _nothing

    # -- the neighbourhood (engine.neighbours) ---------------------------------------------
    def forget(self) -> None:
        """The instance's databases changed (CREATE / DROP DATABASE, NEW_BROKER): read them
        again on the next question."""
        with self._lock:
            self._names = {}
            self._strangers = set()

    def _refresh(self, *, opening: bool = True) -> dict[str, str]:
        """Read the databases' broker instances again (``opening``: opening those not open
        yet; else only the open ones — a timer tick never opens a database)."""
        names: dict[str, str] = {}
        for name in self._instance.database_names():
            if not opening and not self._instance.is_open(name):
                continue
            try:
                names[str(self._instance.database(name).service_broker_guid)] = name
            except BrokerError as exc:  # a database dropped meanwhile, or unreadable now
                log.info("instance link: database %r is not readable now: %s", name, exc)
        with self._lock:
            self._names = names
            self._strangers = set()
        return names

    def name_of(self, broker_instance: str) -> str | None:
        """The name of the database whose ``service_broker_guid`` is ``broker_instance``."""
        with self._lock:
            name = self._names.get(broker_instance)
            if name is not None or broker_instance in self._strangers:
                return name
        name = self._refresh().get(broker_instance)
        if name is None:
            with self._lock:
                self._strangers.add(broker_instance)
        return name

    def member(self, broker_instance: str) -> bool:
        """True when ``broker_instance`` is a database of this instance."""
        return self.name_of(broker_instance) is not None

    def holder_of(self, service_name: str, asking: str) -> str | None:
        """The broker instance of the database, other than ``asking``, that has the service
        ``service_name`` (byte for byte); None when none has. Databases in name order."""
        with self._lock:
            known = dict(self._names)
        if not known:
            known = self._refresh()
        for guid, name in sorted(known.items(), key=lambda item: item[1].casefold()):
            if guid == asking:
                continue
            try:
                services = self._instance.database(name).views.services()
            except BrokerError:
                continue
            if any(s.name == service_name for s in services):
                return guid
        return None

    def committed(self, broker_instance: str) -> None:
        """Database ``broker_instance`` committed messages for its neighbours: carry them now
        (never raises; what fails waits for the next commit or tick)."""
        name = self.name_of(broker_instance)
        if name is not None:
            self.carry_from(name)

    # -- the link -------------------------------------------------------------------------
    def carry_from(self, database: str, *, opening: bool = True) -> Carried:
        """Carry what ``database`` holds for the other databases of the instance to them
        (:func:`~servicebroker.transport.local_link.carry`), again while another caller asked
        meanwhile. A failure is logged and left for the next call (never raises).
        ``opening`` False (a timer tick): only the databases open now take part."""
        key = database.casefold()
        with self._lock:
            if key in self._busy:
                self._busy[key] = True  # the running one goes once more
                return Carried()
            self._busy[key] = False
        total = Carried()
        try:
            while True:
                total = _add(total, self._carry_once(database, opening))
                with self._lock:
                    if not self._busy[key]:
                        return total
                    self._busy[key] = False
        except Exception as exc:  # the commit is done: the rows wait for the next call
            log.warning("instance link: messages of database %r wait: %s", database, exc)
            return total
        finally:
            with self._lock:
                self._busy.pop(key, None)

    def _carry_once(self, database: str, opening: bool) -> Carried:
        source = self._instance.database(database)
        with self._lock:
            known = dict(self._names)
        if not known:
            known = self._refresh(opening=opening)
        own = str(source.service_broker_guid)
        destinations = {
            uuid.UUID(guid): self._instance.database(name).transport.local_end()
            for guid, name in known.items()
            if guid != own and (opening or self._instance.is_open(name))
        }
        if not destinations:
            return Carried()
        trusted: list[bool] = []

        def admit(guid: uuid.UUID) -> Admission:
            if not trusted:  # read once, and only when there is something to carry
                trusted.append(self._instance.option(database, "TRUSTWORTHY") == "ON")
            if trusted[0]:
                return Admission(DBO)
            return Admission(refuse_new=untrusted_status(known[str(guid)]))

        return carry(source.transport.local_end(), destinations, admit, step=self.step)

    def attach(self, database: str, broker: Broker) -> None:
        """Carry ``broker``'s messages for its neighbours on each of its timer ticks (while
        its background work runs: ``sqlcmd``, ``serve -S``): what was refused, failed or sent
        by another process goes then."""

        def tick(now: float) -> None:
            self.carry_from(database, opening=False)

        broker.timer.tasks.register("instance link", 1, tick)


def _add(a: Carried, b: Carried) -> Carried:
    return Carried(
        a.delivered + b.delivered,
        a.duplicates + b.duplicates,
        a.refused + b.refused,
        a.errors + b.errors,
        a.later + b.later,
    )
