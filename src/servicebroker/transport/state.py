"""The state a broker's transport shares between its threads (NET-1..8, SEC-1, FWD-1..3): one
:class:`TransportState` that the transmitter (:mod:`.transmitter`), the receiving side
(:mod:`.receiving`) and the life cycle (:mod:`.service`) each hold — by composition, none of
them inheriting from another.

Everything here is read and changed under :attr:`TransportState.lock` (a re-entrant lock);
:attr:`TransportState.cond` (on the same lock) wakes the transmitter and the dispatcher. The
attributes are the interface: plain containers of the sans-I/O parts (:class:`~.outbound.Outbound`
per address, :class:`~.inbound.Inbound`, :class:`~.destinations.Destinations`,
:class:`~.forwarding.Forwarder`, :class:`~.pending.PendingRows`) and the few operations more than
one side needs are methods.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass

from ..catalog import CatalogSnapshot
from ..catalog.routing import RouteChooser
from ..engine.context import BrokerContext
from .destinations import Destinations
from .dialog_protection import KeyRing
from .forwarding import Forwarder
from .inbound import Inbound
from .outbound import Outbound
from .peer import PeerConnection
from .pending import MessageKey, PendingRows
from .sealing import Sealer
from .settings import TransportSettings
from .tls import EndpointSecurity

__all__ = ["TransportCounters", "TransportState"]


@dataclass
class TransportCounters:
    """The transport's counters since the broker opened (what
    :class:`~.service.TransportStatistics` shows): messages ``received`` (committed),
    ``duplicates`` (NET-2), ``refused`` (NET-7 or an Error), ``rejected`` (by dialog security,
    SEC-2), own messages ``acknowledged`` (NET-3), connections ``accepted``, logins refused
    (``refused_logins``, SEC-1), connection ``failures`` and the transmitter's ``passes`` over
    the transmission queue."""

    received: int = 0
    duplicates: int = 0
    refused: int = 0
    rejected: int = 0
    acknowledged: int = 0
    accepted: int = 0
    refused_logins: int = 0
    failures: int = 0
    passes: int = 0


class TransportState:
    """What the transport's threads share (see the module). Call every method under
    :attr:`lock` unless it says otherwise.

    Args:
        context: the broker's shared parts (storage, clock, catalog, statistics).
        settings: the transport's settings.

    Attributes:
        context, settings: as given.
        lock, cond: the transport's lock and its condition (wakes the transmitter and the
            dispatcher).
        outbound: the :class:`Outbound` of each destination address.
        offered: each message on its way (key → address).
        targets: each message on its way → (to_service, to_broker_instance), TICK-3b.
        statuses: the transmission_status last written for a message (NET-7).
        outgoing: the connection this broker made to each address.
        accepted: the connections this broker accepted.
        inbound: the message dispatcher (reassembly, messages held, TICK-2c).
        destinations: the connection plan (TICK-3a).
        forwarder: the fragments held to forward (FWD-2), in memory only.
        counters: :class:`TransportCounters`.
        pending: the incremental reads of the transport's rows.
        full_windows: addresses whose window left rows unoffered at the last read.
        acked_since_read: keys acknowledged (or withdrawn for good) since the last read: a
            row read before that must not be offered.
        sealer: dialog security's sealing of outgoing messages (SEC-2).
        instance: this database's service_broker_guid once started, else None.
        stopping: True from ``stop()`` until the next start.
        routing: the catalog as the transmitter last read it and its route chooser.
        security: the endpoint's TLS contexts (SEC-1), once started.
        security_version: the catalog version :attr:`security` was last checked against.
    """

    def __init__(self, context: BrokerContext, settings: TransportSettings) -> None:
        self.context = context
        self.settings = settings
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.outbound: dict[str, Outbound] = {}
        self.offered: dict[MessageKey, str] = {}
        self.targets: dict[MessageKey, tuple[str, str | None]] = {}
        self.statuses: dict[MessageKey, str] = {}
        self.outgoing: dict[str, PeerConnection] = {}
        self.accepted: list[PeerConnection] = []
        self.inbound = Inbound(settings)
        self.destinations = Destinations(settings)
        self.forwarder = Forwarder()
        self.counters = TransportCounters()
        self.pending = PendingRows()
        self.full_windows: set[str] = set()
        self.acked_since_read: set[MessageKey] = set()
        self.sealer = Sealer(context.storage, KeyRing())
        self.instance: uuid.UUID | None = None
        self.stopping = False
        self.routing: tuple[CatalogSnapshot, RouteChooser] | None = None
        self.security: EndpointSecurity | None = None
        self.security_version: int | None = None

    def connections(self) -> list[PeerConnection]:
        """The connections listed, made then accepted (open or closing)."""
        return [*self.outgoing.values(), *self.accepted]

    def connection_to(self, instance: uuid.UUID | None) -> PeerConnection | None:
        """An open connection to the adjacent broker ``instance`` (made, else accepted), or
        None."""
        for conn in self.connections():
            if conn.open and conn.peer_instance == instance:
                return conn
        return None

    def learn_catalog(self, catalog: CatalogSnapshot, now: float) -> None:
        """Keep ``catalog`` (read by the transmitter each pass) as what fragments are placed by
        — its routes (as of ``now``, broker-clock seconds) and services — and its endpoint's
        MESSAGE_FORWARD_SIZE as the forwarder's limit (FWD-1, FWD-2)."""
        chooser = RouteChooser(catalog.routes.values(), local_services=catalog.services, now=now)
        self.routing = (catalog, chooser)
        endpoint = catalog.service_broker_endpoint
        if endpoint is not None:
            self.forwarder.set_limit(endpoint.message_forward_size)

    def forget(self, key: MessageKey) -> None:
        """Message ``key``'s row left the transmission queue (acknowledged, NET-3, or ended
        with its dialog): forget it everywhere, and keep it from being offered by a read that
        began before (:attr:`acked_since_read`). Its Outbound, if any, is the caller's."""
        self.offered.pop(key, None)
        self.targets.pop(key, None)
        self.statuses.pop(key, None)
        self.acked_since_read.add(key)
        self.pending.gone(key)

    def set_statuses(self, updates: list[tuple[MessageKey, str]]) -> None:
        """Record why messages wait (NET-7): write each (key, transmission_status) that
        changed, in a write transaction of its own. Takes the lock itself; call it without
        holding the lock when possible (it writes to storage).

        Raises:
            StorageError: the write failed.
        """
        with self.lock:
            changed = [(k, s) for k, s in updates if self.statuses.get(k) != s]
            for k, s in changed:
                self.statuses[k] = s
        if not changed:
            return
        with self.context.storage.connection() as db:
            db.begin_write()
            db.set_transmission_message_statuses(changed)
            db.commit()
