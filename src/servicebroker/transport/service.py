"""The transport of one broker: its Service Broker endpoint's listener, the connections to other
instances, and the transmitter that sends the transport's rows of the transmission queue
(NET-1..8, RTE-2/4, SEC-1, FWD-1..3, TICK-2c, TICK-3a/b, TICK-4a/b/c) — the thin threaded shell
around the pure protocol (:mod:`.outbound`, :mod:`.inbound`, :mod:`.adjacent`,
:mod:`.destinations`, :mod:`.forwarding`) and the storage side (:mod:`.arrival`). The state the
threads share is one :class:`~.state.TransportState`, held by this class, its
:class:`~.transmitter.Transmitter` and its :class:`~.receiving.ReceivingSide` alike.

Threads (supervised by the broker): the listener accepts connections (each gets a reader
thread); the transmitter reads the transport's rows, chooses each one's route, offers it to the
:class:`~.outbound.Outbound` of its address and writes the fragments due, connecting when a
destination has messages and is not suppressed, and passes on the fragments this broker
forwards (PRI-11: in arrival order, whatever their priority). A reader thread takes a
connection's events (:mod:`.receiving`): complete messages are committed to their queues in one
write transaction per batch and acknowledged only after the commit (NET-3); acknowledgements
delete the acknowledged rows; fragments for services elsewhere are forwarded (FWD-1).
Every time read is the broker clock's.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..catalog.routing import format_tcp_address
from ..engine.context import BrokerContext
from ..errors import StorageError, TransportError
from .destinations import Destinations
from .forwarding import Forwarder, ForwardingStatistics, HeldFragment
from .local_link import LocalEnd
from .peer import PeerConnection, accept
from .pending import MessageKey, stale_offers
from .receiving import ReceivingSide
from .settings import TransportSettings
from .state import TransportState
from .tls import security_from_catalog
from .transmitter import Transmitter

__all__ = ["TransportService", "TransportStatistics"]

log = logging.getLogger(__name__)

_THREADS = ("transport listener", "transport transmitter", "transport dispatcher")


@dataclass(frozen=True)
class TransportStatistics:
    """What the transport has done in this process.

    Attributes:
        running: the listener and transmitter run.
        start_status: why the last start failed (TICK-4c retries it), or None.
        listener_address: ``TCP://ip:port`` listened on, or None.
        messages_received: messages committed from other instances.
        duplicates: copies of messages already taken, acknowledged again (NET-2).
        refused: messages refused (NET-7) or answered with an Error.
        sealed: messages sealed by dialog security as they left (SEC-2).
        rejected: messages dialog security refused (SEC-2: altered, forged, moved, or without
            the certificates they need), never delivered; a subset of ``refused``.
        acknowledged: own messages acknowledged by other instances (NET-3).
        connections_accepted / connections_refused / connection_failures: counts.
        transmitter_passes: the transmitter's looks at the transmission queue for rows to
            offer (one per pass, whether or not it read rows).
    """

    running: bool
    start_status: str | None
    listener_address: str | None
    messages_received: int
    duplicates: int
    refused: int
    sealed: int
    rejected: int
    acknowledged: int
    connections_accepted: int
    connections_refused: int
    connection_failures: int
    transmitter_passes: int


class TransportService:
    """The transport of one broker (see the module).

    Args:
        context: the broker's shared parts (storage, clock, catalog).
        committed: called after a commit that put messages on queues, with (queues that got
            messages, queues where a message arrived on an empty queue), to wake waiters and
            monitors.
        start_thread: starts a supervised thread ``(name, target)``.
        join_thread: waits ``(name, timeout)`` real seconds for a supervised thread to end.
        settings: the transport's settings (:class:`TransportSettings`).
    """

    def __init__(
        self,
        context: BrokerContext,
        committed: Callable[[set[int], frozenset[int]], None],
        start_thread: Callable[[str, Callable[[], None]], None],
        join_thread: Callable[[str, float], None],
        settings: TransportSettings | None = None,
    ) -> None:
        self.settings = settings or TransportSettings()
        self._context = context
        self._committed = committed
        self._state = TransportState(context, self.settings)
        self._receiving = ReceivingSide(self._state, committed)
        self._transmitter = Transmitter(self._state, self._receiving.on_events)
        self._start_thread = start_thread
        self._join_thread = join_thread
        self._start_lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._listener_address: str | None = None
        self._running = False
        self._start_status: str | None = None
        self._wanted = False

    def local_end(self) -> LocalEnd:
        """This broker as one end of the link between the databases of an instance
        (:mod:`.local_link`)."""
        return LocalEnd(self._context, self._committed)

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> bool:
        """Start the listener and the transmitter when the broker has a STARTED Service Broker
        endpoint; returns whether the transport runs. A start that fails (the private key
        cannot be read, the port is taken) is logged, kept as :attr:`start_status` and
        retried by TICK-4c (:meth:`retry_start`). One start runs at a time (the broker's and
        TICK-4c's never both bind the port)."""
        with self._start_lock:
            return self._start()

    def _start(self) -> bool:
        with self._state.lock:
            self._wanted = True
            if self._running:
                return True
            self._state.stopping = False
        with self._context.storage.connection() as conn:
            catalog = self._context.catalog.snapshot(conn, fresh=True)
        endpoint = catalog.service_broker_endpoint
        if endpoint is None or endpoint.state != "STARTED":
            return False
        try:
            security = security_from_catalog(catalog)
            ip = endpoint.listener_ip
            listener = socket.create_server(
                ("" if ip.upper() == "ALL" else ip, endpoint.listener_port)  # ALL: every address
            )
        except (TransportError, OSError) as exc:
            self._start_status = f"the endpoint {endpoint.name!r} did not start: {exc}"
            log.error("%s (retried every 25 s, TICK-4c)", self._start_status)
            return False
        with self._state.lock:
            self._state.security = security
            self._state.security_version = catalog.version
            self._state.instance = catalog.service_broker_guid
            self._state.learn_catalog(catalog, self._context.clock.now())
            self._listener = listener
            host, port = listener.getsockname()[:2]
            self._listener_address = format_tcp_address(host, port)
            self._running = True
            self._start_status = None
            self._state.pending.read_all()
        for name, target in zip(
            _THREADS, (self._listen, self._transmitter.run, self._receiving.dispatch), strict=True
        ):
            self._start_thread(name, target)
        return True

    def stop(self) -> None:
        """Stop the endpoint (``broker.stop()``): close the listener and every connection
        (NET-8), wait up to 5 real seconds for each of the transport's threads to end; what
        was on its way is sent again after the next :meth:`start` (NET-3: nothing is lost)."""
        with self._state.lock:
            self._wanted = False
            self._state.stopping = True
            self._running = False
            listener, self._listener = self._listener, None
            connections = self._state.connections()
            now = self._context.clock.now()
            for address in self._state.outgoing:  # what was on the wire goes again (NET-5)
                outbound = self._state.outbound.get(address)  # none: it only forwarded
                if outbound is not None:
                    outbound.on_disconnect(now)
            # a new start connects at once, as a first one does (TICK-3a suppresses after a
            # disconnection or failure while running, not across a restart)
            self._state.destinations = Destinations(self.settings)
            for address, outbound in self._state.outbound.items():
                if outbound.pending_count:
                    self._state.destinations.add(address)
            self._state.outgoing.clear()
            self._state.accepted.clear()
            self._state.forwarder = Forwarder()  # held in memory only (FWD-2): the senders retry
            self._state.cond.notify_all()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in connections:
            conn.close("the broker is stopping")
        for name in _THREADS:  # ended before a new start runs them again
            self._join_thread(name, 5.0)

    @property
    def running(self) -> bool:
        """True while the listener and transmitter run (``start()`` succeeded, no ``stop()``)."""
        return self._running

    @property
    def listener_address(self) -> str | None:
        """``TCP://ip:port`` the endpoint listens on (the real port when 0 was asked)."""
        return self._listener_address

    # -- periodic tasks (each a plain step taking the broker clock's now) ----------------
    def dispatcher_cleanup(self, now: float) -> None:
        """TICK-2c: drop out-of-order and stale (10 s) buffered messages, and forget the
        dialog sides refused with an Error half an hour (broker clock) before ``now``."""
        self._receiving.forget_refused(now)
        with self._state.lock:
            dropped = self._state.inbound.cleanup(now)
        if dropped:
            log.info("message dispatcher dropped %d buffered messages (TICK-2c)", dropped)

    def connect_pending(self, now: float) -> None:
        """TICK-3a (every 2nd tick): connect to each destination with pending messages that
        is not suppressed — the transmitter's next pass does it, so this only wakes it;
        ``now`` (broker-clock seconds) is the timer's and not needed."""
        with self._state.lock:
            self._state.cond.notify_all()

    def reclassify(self, now: float) -> None:
        """TICK-3b: every message on its way whose row left the transmission queue (END
        CONVERSATION, an expired lifetime, DROP SERVICE), or whose route now gives another
        address (ALTER / DROP ROUTE, an expired route), is taken back — the latter offered
        again by route, or waiting with the status of no route; the transport's rows are all
        read again (on PostgreSQL a row committed out of id order is found at once anyway:
        see :mod:`.pending`). A message whose row id is no longer known — a read since the
        offer found no row for it, as after END CONVERSATION WITH CLEANUP emptied the queue —
        is taken back too: its row is gone, or the full read that follows offers it again."""
        with self._state.lock:
            ids = {k: self._state.pending.id_of(k) for k in self._state.offered}
        known = [i for i in ids.values() if i is not None]
        with self._context.storage.connection() as conn:
            catalog = self._context.catalog.snapshot(conn, fresh=True)
            there = conn.transmission_remote_ids(min(known), max(known)) if known else set()
        with self._state.lock:
            state = self._state

            def gone(key: MessageKey) -> bool:
                tid = ids.get(key)
                return tid is None or tid not in there

            for key in stale_offers(
                state.offered, state.targets, gone=gone, catalog=catalog, now=now
            ):
                state.outbound[state.offered.pop(key)].withdraw(key)
                del state.targets[key]
                if gone(key):
                    self._state.pending.gone(key)
            self._state.pending.read_all()
            self._state.cond.notify_all()

    def close_idle(self, now: float) -> None:
        """TICK-4a: close connections idle for 90 s."""
        with self._state.lock:
            idle = [c for c in self._state.connections() if c.adjacent.is_idle(now)]
        for conn in idle:
            conn.close("idle")

    def forget_closed(self, now: float) -> None:
        """TICK-4: forget closed dialogs with other instances remembered for half an hour
        (:data:`~servicebroker.engine.closing.CLOSED_REMEMBERED`; NET-2, SEC-2)."""
        with self._context.storage.connection() as db:
            db.begin_write()
            db.forget_closed_conversations(now)
            db.commit()

    def forwarder_cleanup(self, now: float) -> None:
        """TICK-4b: delete the forwarded fragments not passed on within 60 s of their arrival
        (FWD-3); their senders send them again (NET-4)."""
        with self._state.lock:
            dropped = self._state.forwarder.cleanup(now)
        if dropped:
            log.info("forwarder deleted %d fragments not forwarded within 60 s (TICK-4b)", dropped)

    def retry_start(self, now: float) -> None:
        """TICK-4c: start the transport again if its start failed (or an endpoint was
        created since the broker started)."""
        if self._wanted and not self._running:
            self.start()

    # -- views -----------------------------------------------------------------------------
    def connections(self) -> list[PeerConnection]:
        """The open connections, made and accepted (NET-8): what ``dm_broker_connections()``
        shows."""
        with self._state.lock:
            return self._state.connections()

    def forwarded_messages(self) -> list[HeldFragment]:
        """The fragments this broker holds to forward (FWD-2), by next-hop address, each
        address's in arrival order: what ``dm_broker_forwarded_messages()`` shows."""
        with self._state.lock:
            return self._state.forwarder.held()

    def forwarding_statistics(self) -> ForwardingStatistics:
        """The forwarder's counters and what it holds (FWD-1..3, TICK-4b)."""
        with self._state.lock:
            return self._state.forwarder.statistics()

    def statistics(self) -> TransportStatistics:
        """A snapshot of the counters since the broker was opened (:class:`TransportStatistics`;
        NET-2 duplicates, NET-3 acknowledgements, NET-7 refusals, SEC-1 refused logins)."""
        c = self._state.counters
        return TransportStatistics(
            self._running,
            self._start_status,
            self._listener_address,
            c.received,
            c.duplicates,
            c.refused,
            self._state.sealer.sealed,
            c.rejected,
            c.acknowledged,
            c.accepted,
            c.refused_logins,
            c.failures,
            c.passes,
        )

    # -- listener --------------------------------------------------------------------------
    def _listen(self) -> None:
        listener = self._listener
        while listener is not None and not self._state.stopping:
            try:
                raw, peer = listener.accept()
            except OSError:
                return
            address = format_tcp_address(peer[0], peer[1])
            threading.Thread(
                target=self._accept, args=(raw, address), name="transport accept", daemon=True
            ).start()

    def _accept(self, raw: socket.socket, address: str) -> None:
        # SEC-1: the grants and ENCRYPTION as they are now, not as the transmitter's last pass
        # read them (a GRANT CONNECT made a moment ago admits this peer)
        try:
            with self._context.storage.connection() as db:
                self._transmitter.refresh_security(self._context.catalog.snapshot(db, fresh=True))
        except StorageError as exc:  # the grants as the transmitter last read them
            log.warning("transport: the endpoint's security was not read again: %s", exc)
        security, instance = self._state.security, self._state.instance
        if security is None or instance is None:
            raw.close()
            return
        conn = accept(raw, address, instance, security, self.settings, self._context.clock)
        with self._state.lock:
            if conn is None:
                self._state.counters.refused_logins += 1
                return
            self._state.counters.accepted += 1
            self._state.accepted.append(conn)
        conn.read(self._receiving.on_events)
