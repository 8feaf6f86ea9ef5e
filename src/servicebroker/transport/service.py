"""The transport of one broker: its Service Broker endpoint's listener, the connections to other
instances, and the transmitter that sends the transport's rows of the transmission queue
(NET-1..8, RTE-2/4, SEC-1, FWD-1..3, TICK-2c, TICK-3a/b, TICK-4a/b/c) — the thin threaded shell
around the pure protocol (:mod:`.outbound`, :mod:`.inbound`, :mod:`.adjacent`,
:mod:`.destinations`, :mod:`.forwarding`) and the storage side (:mod:`.arrival`); what the
connections bring is handled by :mod:`.receiving`, whose state this class shares.

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
from functools import partial

from ..catalog.routing import format_tcp_address
from ..engine.context import BrokerContext
from ..errors import TransportError
from .audit import LoginFailure
from .destinations import Destinations
from .forwarding import Forwarder, ForwardingStatistics, HeldFragment
from .outbound import Outbound
from .peer import PeerConnection, accept, connect
from .pending import MessageKey, header_of, key_of, plan_offers, stale_offers
from .receiving import ReceivingSide, send_fragment
from .settings import TransportSettings
from .tls import EndpointSecurity, security_from_catalog

__all__ = ["TransportService", "TransportStatistics"]

log = logging.getLogger(__name__)

_POLL = 0.05  # real seconds between looks at the transmission queue for new rows
_BATCH = 2000  # rows read per level per look
_MAX_OFFERED = 20_000  # messages on their way at most (all destinations); more wait unread
_THREADS = ("transport listener", "transport transmitter", "transport dispatcher")
_INLINE_BYTES = 16 * 1024  # a larger body is read alone when its message is offered
_FRAME_BYTES = 1024 * 1024  # fragment bytes written per destination per pass


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


class TransportService(ReceivingSide):
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
        super().__init__(context, committed, settings)
        self._start_thread = start_thread
        self._join_thread = join_thread
        self._start_lock = threading.Lock()
        self._security: EndpointSecurity | None = None
        self._listener: socket.socket | None = None
        self._listener_address: str | None = None
        self._running = False
        self._start_status: str | None = None
        self._wanted = False

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
        with self._lock:
            self._wanted = True
            if self._running:
                return True
            self._stopping = False
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
        with self._lock:
            self._security = security
            self._instance = catalog.service_broker_guid
            self._learn_catalog(catalog, self._context.clock.now())
            self._listener = listener
            host, port = listener.getsockname()[:2]
            self._listener_address = format_tcp_address(host, port)
            self._running = True
            self._start_status = None
            self._pending.read_all()
        for name, target in zip(
            _THREADS, (self._listen, self._transmit, self._dispatch), strict=True
        ):
            self._start_thread(name, target)
        return True

    def stop(self) -> None:
        """Stop the endpoint (``broker.stop()``): close the listener and every connection
        (NET-8), wait up to 5 real seconds for each of the transport's threads to end; what
        was on its way is sent again after the next :meth:`start` (NET-3: nothing is lost)."""
        with self._lock:
            self._wanted = False
            self._stopping = True
            self._running = False
            listener, self._listener = self._listener, None
            connections = [*self._state.outgoing.values(), *self._state.accepted]
            now = self._context.clock.now()
            for address in self._state.outgoing:  # what was on the wire goes again (NET-5)
                outbound = self._state.outbound.get(address)  # none: it only forwarded
                if outbound is not None:
                    outbound.on_disconnect(now)
            # a new start connects at once, as a first one does (TICK-3a suppresses after a
            # disconnection or failure while running, not across a restart)
            self._destinations = Destinations(self.settings)
            for address, outbound in self._state.outbound.items():
                if outbound.pending_count:
                    self._destinations.add(address)
            self._state.outgoing.clear()
            self._state.accepted.clear()
            self._forwarder = Forwarder()  # held in memory only (FWD-2): the senders retry
            self._cond.notify_all()
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
        """TICK-2c: drop out-of-order and stale (10 s) buffered messages."""
        with self._lock:
            dropped = self._inbound.cleanup(now)
        if dropped:
            log.info("message dispatcher dropped %d buffered messages (TICK-2c)", dropped)

    def connect_pending(self, now: float) -> None:
        """TICK-3a (every 2nd tick): connect to each destination with pending messages that
        is not suppressed — the transmitter's next pass does it, so this only wakes it;
        ``now`` (broker-clock seconds) is the timer's and not needed."""
        with self._lock:
            self._cond.notify_all()

    def reclassify(self, now: float) -> None:
        """TICK-3b: every message on its way whose row left the transmission queue (END
        CONVERSATION, an expired lifetime, DROP SERVICE), or whose route now gives another
        address (ALTER / DROP ROUTE, an expired route), is taken back — the latter offered
        again by route, or waiting with the status of no route; the transport's rows are all
        read again (on PostgreSQL a row committed out of id order is found at once anyway:
        see :mod:`.pending`)."""
        with self._lock:
            ids = {k: self._pending.id_of(k) for k in self._state.offered}
        known = [i for i in ids.values() if i is not None]
        with self._context.storage.connection() as conn:
            catalog = self._context.catalog.snapshot(conn, fresh=True)
            there = conn.transmission_remote_ids(min(known), max(known)) if known else set()
        with self._lock:
            state = self._state

            def gone(key: MessageKey) -> bool:
                tid = ids.get(key)
                return tid is not None and tid not in there

            for key in stale_offers(
                state.offered, state.targets, gone=gone, catalog=catalog, now=now
            ):
                state.outbound[state.offered.pop(key)].withdraw(key)
                del state.targets[key]
                if gone(key):
                    self._pending.gone(key)
            self._pending.read_all()
            self._cond.notify_all()

    def close_idle(self, now: float) -> None:
        """TICK-4a: close connections idle for 90 s."""
        with self._lock:
            idle = [
                c
                for c in [*self._state.outgoing.values(), *self._state.accepted]
                if c.adjacent.is_idle(now)
            ]
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
        with self._lock:
            dropped = self._forwarder.cleanup(now)
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
        with self._lock:
            return [*self._state.outgoing.values(), *self._state.accepted]

    def forwarded_messages(self) -> list[HeldFragment]:
        """The fragments this broker holds to forward (FWD-2), by next-hop address, each
        address's in arrival order: what ``dm_broker_forwarded_messages()`` shows."""
        with self._lock:
            return self._forwarder.held()

    def forwarding_statistics(self) -> ForwardingStatistics:
        """The forwarder's counters and what it holds (FWD-1..3, TICK-4b)."""
        with self._lock:
            return self._forwarder.statistics()

    def statistics(self) -> TransportStatistics:
        """A snapshot of the counters since the broker was opened (:class:`TransportStatistics`;
        NET-2 duplicates, NET-3 acknowledgements, NET-7 refusals, SEC-1 refused logins)."""
        c = self._counters
        return TransportStatistics(
            self._running,
            self._start_status,
            self._listener_address,
            c.received,
            c.duplicates,
            c.refused,
            self._sealer.sealed,
            c.rejected,
            c.acknowledged,
            c.accepted,
            c.refused_logins,
            c.failures,
        )

    # -- listener --------------------------------------------------------------------------
    def _listen(self) -> None:
        listener = self._listener
        while listener is not None and not self._stopping:
            try:
                raw, peer = listener.accept()
            except OSError:
                return
            address = format_tcp_address(peer[0], peer[1])
            threading.Thread(
                target=self._accept, args=(raw, address), name="transport accept", daemon=True
            ).start()

    def _accept(self, raw: socket.socket, address: str) -> None:
        security, instance = self._security, self._instance
        if security is None or instance is None:
            raw.close()
            return
        conn = accept(raw, address, instance, security, self.settings, self._context.clock)
        with self._lock:
            if conn is None:
                self._counters.refused_logins += 1
                return
            self._counters.accepted += 1
            self._state.accepted.append(conn)
        conn.read(self._on_events)

    # -- transmitter ---------------------------------------------------------------------
    def _transmit(self) -> None:
        clock = self._context.clock
        while not self._stopping:
            now = clock.now()
            self._fill(now)
            self._send_due(now)
            with self._lock:
                if self._stopping:
                    return
                due = [ob.next_due(now) for ob in self._state.outbound.values()]
                times = [t for t in due if t is not None]
                wait = _POLL
                if times:
                    wait = min(wait, clock.max_real_wait(max(min(times) - now, 0.0)))
                self._cond.wait(max(wait, 0.001))

    def _fill(self, now: float) -> None:
        """Offer the transport's rows not yet on their way to the Outbound of their route's
        address (RTE-2, PRI-14), reading only what is new (:mod:`.pending`); rows with no
        route get the status saying so (NET-7)."""
        storage, pending = self._context.storage, self._pending
        with storage.connection() as conn:
            with self._lock:
                last = pending.last
            mark = conn.transmission_remote_mark(last)
            catalog = self._context.catalog.snapshot(conn)
            with self._lock:
                self._learn_catalog(catalog, now)  # what the receiving side places fragments by
                read = pending.next_read(mark)
                if read is None or len(self._state.offered) >= _MAX_OFFERED:
                    return
                self._acked_since_read.clear()
            rows = conn.transmission_remote(_BATCH, inline_bytes=_INLINE_BYTES, after=read.after)
            with self._lock:
                pending.learn(rows, read)
                plan = plan_offers(
                    rows,
                    skip=lambda k: k in self._state.offered or k in self._acked_since_read,
                    pending_bytes={a: o.pending_bytes for a, o in self._state.outbound.items()},
                    window_bytes=self.settings.window_bytes,
                    catalog=catalog,
                    now=now,
                    aging_interval=self._context.priority_aging_interval,
                )
                self._full_windows = plan.full_windows
            bodies = {  # a large body is read alone, once its message goes (NET-5)
                row.transmission_id: conn.transmission_remote_body(row.transmission_id)
                for row, _ in plan.offers
                if row.message_body is None
            }
        assert self._instance is not None
        offers = []
        for row, address in plan.offers:
            body = row.message_body if row.message_body is not None else bodies[row.transmission_id]
            if body is not None:  # None: acknowledged (and deleted) since the rows were read
                offers.append(((row, address), header_of(row, catalog, self._instance), body))
        ready, waiting = self._sealer.seal(offers, catalog, now)  # SEC-2: sealed, or waits
        with self._lock:
            for offer in ready:
                row, address = offer.tag
                key = key_of(row)
                if key in self._acked_since_read:
                    continue  # acknowledged (and deleted) since the rows were read
                outbound = self._state.outbound.setdefault(address, Outbound(self.settings))
                outbound.offer(offer.header, offer.body, now)
                self._state.offered[key] = address
                self._state.targets[key] = (row.to_service_name, row.to_broker_instance)
                self._destinations.add(address)
        unsent = [*plan.unrouted, *((key_of(row), s) for (row, _), s in waiting)]
        if unsent:
            self._set_statuses(unsent)

    def _send_due(self, now: float) -> None:
        with self._lock:
            work = []
            for address, outbound in self._state.outbound.items():
                if not outbound.pending_count:
                    continue
                conn = self._connection_for(address, now)
                if conn is None:
                    continue
                frames = outbound.frames_due(now, _FRAME_BYTES)
                if frames:
                    work.append((conn, frames))
            # forwarded fragments: in arrival order, level 5 whatever their priority (PRI-11)
            for address in self._forwarder.addresses():
                conn = self._connection_for(address, now)
                if conn is not None:
                    work.append((conn, self._forwarder.take(address, now, _FRAME_BYTES)))
            conns = [*self._state.outgoing.values(), *self._state.accepted]
        for conn, frames in work:
            conn.send(*(partial(send_fragment, frame) for frame in frames))
        for conn in conns:
            if conn.pending_acks:
                conn.send(lambda a, n: a.flush_acks(n))

    def _connection_for(self, address: str, now: float) -> PeerConnection | None:
        """The open connection this broker made to ``address``; else None, and a connection
        attempt starts unless one is under way or the address is suppressed (TICK-3a). Call
        under the lock."""
        conn = self._state.outgoing.get(address)
        if conn is not None and conn.open:
            return conn
        if self._destinations.should_connect(address, now):
            self._destinations.on_connecting(address, now)
            threading.Thread(
                target=self._connect, args=(address,), name="transport connect", daemon=True
            ).start()
        return None

    def _connect(self, address: str) -> None:
        clock = self._context.clock
        security, instance = self._security, self._instance
        if security is None or instance is None:
            return
        try:
            conn = connect(address, instance, security, self.settings, clock)
        except TransportError as exc:
            status = str(exc)
            if not isinstance(exc, LoginFailure):  # a login failure's audit record says it
                log.warning("transport: %s", status)
            with self._lock:
                self._destinations.on_failed(address, clock.now(), status)
                self._counters.failures += 1
                keys = [k for k, a in self._state.offered.items() if a == address]
            self._set_statuses([(k, status) for k in keys])
            return
        with self._lock:
            if self._stopping:
                conn.close("the broker is stopping")
                return
            self._state.outgoing[address] = conn
            self._destinations.on_connected(address, clock.now())
            self._cond.notify_all()
        conn.read(self._on_events)
