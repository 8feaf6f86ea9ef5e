"""The transport of one broker: its Service Broker endpoint's listener, the connections to other
instances, and the transmitter that sends the transport's rows of the transmission queue
(NET-1..8, RTE-2/4, SEC-1, TICK-2c, TICK-3a/b, TICK-4a/c) — the thin threaded shell around the
pure protocol (:mod:`.outbound`, :mod:`.inbound`, :mod:`.adjacent`, :mod:`.destinations`) and
the storage side (:mod:`.arrival`).

Threads (supervised by the broker): the listener accepts connections (each gets a reader
thread); the transmitter reads the transport's rows, chooses each one's route, offers it to the
:class:`~.outbound.Outbound` of its address and writes the fragments due, connecting when a
destination has messages and is not suppressed. A reader thread takes a connection's events:
complete messages are committed to their queues in one write transaction per batch and
acknowledged only after the commit (NET-3); acknowledgements delete the acknowledged rows.
Every time read is the broker clock's.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from ..context import BrokerContext
from ..delivery import Applier
from ..dialogs import ERROR, error_body
from ..errors import DialogSecurityError, TransportError
from .adjacent import (
    AckReceived,
    AdjacentConnection,
    ConnectionClosed,
    Event,
    FragmentReceived,
    RefusalReceived,
)
from .arrival import ArrivalSecurity, Outcome, Verdict, take_acknowledgements, take_arrival
from .audit import LoginFailure
from .destinations import Destinations
from .dialog_protection import DialogKey, KeyRing, protect_outgoing
from .inbound import Completed, Inbound
from .outbound import Outbound
from .peer import PeerConnection, accept, connect
from .pending import MessageKey, PendingRows, header_of, key_of, plan_offers, stale_offers
from .routing import format_tcp_address
from .sealing import Sealer
from .settings import TransportSettings
from .tls import EndpointSecurity, security_from_catalog
from .wire import Ack, Fragment, MessageHeader, Refusal

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
    rejected: int
    acknowledged: int
    connections_accepted: int
    connections_refused: int
    connection_failures: int


@dataclass
class _Counters:
    received: int = 0
    duplicates: int = 0
    refused: int = 0
    rejected: int = 0
    acknowledged: int = 0
    accepted: int = 0
    refused_logins: int = 0
    failures: int = 0


@dataclass
class _State:
    """What the threads share, under :attr:`TransportService._lock`."""

    outbound: dict[str, Outbound] = field(default_factory=dict)
    offered: dict[MessageKey, str] = field(default_factory=dict)  # key -> address
    targets: dict[MessageKey, tuple[str, str | None]] = field(default_factory=dict)
    outgoing: dict[str, PeerConnection] = field(default_factory=dict)
    accepted: list[PeerConnection] = field(default_factory=list)
    statuses: dict[MessageKey, str] = field(default_factory=dict)


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
        self._context = context
        self._committed = committed
        self._start_thread = start_thread
        self._join_thread = join_thread
        self.settings = settings or TransportSettings()
        self._lock = threading.RLock()
        self._start_lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._state = _State()
        self._inbound = Inbound(self.settings)
        self._destinations = Destinations(self.settings)
        self._counters = _Counters()
        self._security: EndpointSecurity | None = None
        self._listener: socket.socket | None = None
        self._listener_address: str | None = None
        self._instance: uuid.UUID | None = None
        self._running = False
        self._stopping = False
        self._start_status: str | None = None
        self._wanted = False
        self._pending = PendingRows()
        self._full_windows: set[str] = set()  # addresses whose window left rows unoffered
        self._acked_since_read: set[MessageKey] = set()
        self._inbox: list[tuple[PeerConnection, Completed]] = []
        self._sealer = Sealer(context.storage, KeyRing())
        self._ackbox: list[tuple[PeerConnection, Ack]] = []

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
                self._state.outbound[address].on_disconnect(now)
            # a new start connects at once, as a first one does (TICK-3a suppresses after a
            # disconnection or failure while running, not across a restart)
            self._destinations = Destinations(self.settings)
            for address, outbound in self._state.outbound.items():
                if outbound.pending_count:
                    self._destinations.add(address)
            self._state.outgoing.clear()
            self._state.accepted.clear()
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
            with self._lock:
                read = pending.next_read(mark)
                if read is None or len(self._state.offered) >= _MAX_OFFERED:
                    return
                self._acked_since_read.clear()
            rows = conn.transmission_remote(_BATCH, inline_bytes=_INLINE_BYTES, after=read.after)
            catalog = self._context.catalog.snapshot(conn)
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
            if body is not None:
                offers.append(((row, address), header_of(row, catalog, self._instance), body))
        ready, waiting = self._sealer.seal(offers, catalog, now)  # SEC-2: sealed, or waits
        with self._lock:
            for offer in ready:
                row, address = offer.tag  # type: ignore[misc]
                key = key_of(row)
                if key in self._acked_since_read:
                    continue  # acknowledged (and deleted) since the rows were read
                outbound = self._state.outbound.setdefault(address, Outbound(self.settings))
                outbound.offer(offer.header, offer.body, now)
                self._state.offered[key] = address
                self._state.targets[key] = (row.to_service_name, row.to_broker_instance)
                self._destinations.add(address)
        unsent = [*plan.unrouted, *((key_of(tag[0]), s) for tag, s in waiting)]  # type: ignore[index]
        if unsent:
            self._set_statuses(unsent)

    def _send_due(self, now: float) -> None:
        with self._lock:
            work = []
            for address, outbound in self._state.outbound.items():
                if not outbound.pending_count:
                    continue
                conn = self._state.outgoing.get(address)
                if conn is None or not conn.open:
                    if self._destinations.should_connect(address, now):
                        self._destinations.on_connecting(address, now)
                        threading.Thread(
                            target=self._connect,
                            args=(address,),
                            name="transport connect",
                            daemon=True,
                        ).start()
                    continue
                frames = outbound.frames_due(now, _FRAME_BYTES)
                if frames:
                    work.append((conn, frames))
            conns = [*self._state.outgoing.values(), *self._state.accepted]
        for conn, frames in work:
            conn.send(*(partial(_send_fragment, frame) for frame in frames))
        for conn in conns:
            if conn.pending_acks:
                conn.send(lambda a, n: a.flush_acks(n))

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

    # -- events from a connection ------------------------------------------------------
    def _on_events(self, conn: PeerConnection, events: list[Event]) -> None:
        now = self._context.clock.now()
        completed: list[Completed] = []
        acks: list[Ack] = []
        refusals: list[Refusal] = []
        closed: str | None = None
        with self._lock:
            for event in events:
                if isinstance(event, FragmentReceived):
                    for item in self._inbound.on_fragment(event.fragment, now):
                        if isinstance(item, Completed):
                            completed.append(item)
                        elif isinstance(item, Ack):
                            conn.queue_ack(item)
                        else:
                            log.warning("message dispatcher dropped a message: %s", item.reason)
                elif isinstance(event, AckReceived):
                    acks.append(event.ack)
                elif isinstance(event, RefusalReceived):
                    refusals.append(event.refusal)
                elif isinstance(event, ConnectionClosed):
                    closed = event.status
            self._inbox.extend((conn, c) for c in completed)
            self._ackbox.extend((conn, a) for a in acks)
            self._cond.notify_all()
        if refusals:
            self._take_refusals(refusals, now)
        if closed is not None:
            self._closed(conn, closed, now)

    def _dispatch(self) -> None:
        """The message dispatcher's loop: commit what the connections brought — complete
        messages, acknowledgements — in one write transaction each per pass (group commit:
        whatever arrives during a commit goes into the next)."""
        clock = self._context.clock
        while not self._stopping:
            with self._lock:
                while not self._inbox and not self._ackbox and not self._stopping:
                    self._cond.wait(0.5)
                inbox, self._inbox = self._inbox, []
                ackbox, self._ackbox = self._ackbox, []
            if inbox:
                self._take_messages(inbox, clock.now())
            if ackbox:
                self._take_acks(ackbox, clock.now())
            if inbox or ackbox:
                with self._lock:
                    self._cond.notify_all()

    def _take_messages(self, inbox: list[tuple[PeerConnection, Completed]], now: float) -> None:
        """Commit complete messages (and the held ones they release) in one write
        transaction, then answer each (NET-2, NET-3, NET-7)."""
        storage = self._context.storage
        answers: list[tuple[PeerConnection, Completed, Outcome]] = []
        errors: list[tuple[PeerConnection, MessageHeader, bytes, DialogKey | None]] = []
        with storage.connection() as db:
            db.begin_write()
            applier = Applier(db, self._context.catalog.snapshot(db), now)
            work = list(reversed(inbox))
            security = ArrivalSecurity(self._sealer.keys, self._sealer.wall_now())
            while work:
                conn, item = work.pop()
                h = item.header
                outcome = take_arrival(applier, h, item.body, security)
                answers.append((conn, item, outcome))
                if outcome.verdict is Verdict.DELIVERED:
                    with self._lock:
                        later = self._inbound.release(
                            h.conversation_id, h.is_initiator, h.sequence + 1
                        )
                    if later is not None:
                        work.append((conn, later))
            applier.finish()
            db.commit()
        self._committed(applier.woken_queues, frozenset(applier.arrived_on_empty))
        for conn, item, outcome in answers:
            h = item.header
            verdict = outcome.verdict
            if verdict in (Verdict.DELIVERED, Verdict.DUPLICATE):
                self._counters.received += verdict is Verdict.DELIVERED
                self._counters.duplicates += verdict is Verdict.DUPLICATE
                self._ack_back(conn, Ack(h.conversation_id, h.is_initiator, h.sequence, None))
            elif verdict is Verdict.LATER:
                with self._lock:
                    self._inbound.hold(item, now)
            elif verdict is Verdict.REFUSED:
                self._counters.refused += 1
                if outcome.rejected:
                    self._counters.rejected += 1
                    log.warning("transport: dialog security refused a message: %s", outcome.status)
                refusal = Refusal(h.conversation_id, h.is_initiator, h.sequence, outcome.status)
                conn.send(partial(_send_refusal, refusal))
            else:
                self._counters.refused += 1
                assert outcome.error is not None
                errors.append((conn, h, error_body(*outcome.error), outcome.key))
        for conn, h, body, key in errors:
            self._error_back(conn, h, body, key)

    def _ack_back(self, conn: PeerConnection, ack: Ack) -> None:
        """Queue an acknowledgement to ride on the next fragment to the peer (NET-3): on the
        connection this broker sends to it on, else the one the message came on."""
        with self._lock:
            target = conn
            peer = conn.peer_instance
            for out in self._state.outgoing.values():
                if out.open and out.peer_instance == peer:
                    target = out
                    break
            target.queue_ack(ack)

    def _error_back(
        self, conn: PeerConnection, h: MessageHeader, body: bytes, key: DialogKey | None
    ) -> None:
        """Send the sender the broker's Error for its dialog (unsequenced, NET-2), sealed with
        the dialog's session key when it is secured (SEC-2)."""
        assert self._instance is not None
        header = MessageHeader(
            conversation_id=h.conversation_id,
            is_initiator=not h.is_initiator,
            sequence=-1,
            message_id=uuid.uuid4().bytes,
            from_service=h.to_service,
            to_service=h.from_service,
            contract=h.contract,
            message_type=ERROR,
            validation="X",
            from_broker_instance=self._instance,
            to_broker_instance=h.from_broker_instance,
            priority=h.priority,
            lifetime=h.lifetime,
            message_size=len(body),
            fragment_count=1,
        )
        if key is not None:
            try:
                with self._context.storage.connection() as db:
                    catalog = self._context.catalog.snapshot(db)
                header, body = protect_outgoing(
                    header, body, key, catalog, self._sealer.keys, self._sealer.wall_now()
                )
            except DialogSecurityError as exc:  # never in clear: the sender's retry asks again
                log.warning("transport: the Error for a secured dialog is not sent: %s", exc)
                return
        fragment = Fragment(header, 0, body)
        conn.send(partial(_send_fragment, fragment))

    def _take_acks(self, ackbox: list[tuple[PeerConnection, Ack]], now: float) -> None:
        done: list[tuple[MessageKey, uuid.UUID]] = []
        with self._lock:
            for conn, ack in ackbox:
                peer = conn.peer_instance or uuid.UUID(int=0)
                key = (ack.conversation_id, ack.is_initiator, ack.sequence)
                address = self._state.offered.get(key)
                outbound = self._state.outbound.get(address) if address else None
                if outbound is not None:
                    done.extend((k, peer) for k in outbound.on_ack(ack, now))
                elif ack.fragment is None and address is None:
                    done.append((key, peer))  # acknowledged again after a restart: delete it
        if not done:
            return
        storage = self._context.storage
        with storage.connection() as db:
            db.begin_write()
            applier = Applier(db, self._context.catalog.snapshot(db), now)
            take_acknowledgements(applier, ((c, i, n, peer) for (c, i, n), peer in done))
            applier.finish()
            db.commit()
        with self._lock:  # forgotten only once deleted: a fill meanwhile must not offer it again
            for key, _ in done:
                self._state.offered.pop(key, None)
                self._state.targets.pop(key, None)
                self._state.statuses.pop(key, None)
                self._acked_since_read.add(key)
                self._pending.gone(key)
            self._counters.acknowledged += len(done)
            # read everything again once half a full window is acknowledged
            half = self.settings.window_bytes // 2
            if any(self._state.outbound[a].pending_bytes < half for a in self._full_windows):
                self._full_windows = set()
                self._pending.read_all()

    def _take_refusals(self, refusals: list[Refusal], now: float) -> None:
        updates = []
        with self._lock:
            for refusal in refusals:
                key = (refusal.conversation_id, refusal.is_initiator, refusal.sequence)
                address = self._state.offered.get(key)
                outbound = self._state.outbound.get(address) if address else None
                if outbound is not None:
                    outbound.on_refusal(refusal, now)
                updates.append((key, refusal.status))
        self._set_statuses(updates)

    def _set_statuses(self, updates: list[tuple[MessageKey, str]]) -> None:
        """Record why messages wait (NET-7), writing only changes."""
        with self._lock:
            changed = [(k, s) for k, s in updates if self._state.statuses.get(k) != s]
            for k, s in changed:
                self._state.statuses[k] = s
        if not changed:
            return
        with self._context.storage.connection() as db:
            db.begin_write()
            db.set_transmission_message_statuses(changed)
            db.commit()

    def _closed(self, conn: PeerConnection, status: str, now: float) -> None:
        with self._lock:
            if self._state.outgoing.get(conn.address) is conn:
                del self._state.outgoing[conn.address]
                outbound = self._state.outbound.get(conn.address)
                if outbound is not None:
                    outbound.on_disconnect(now)
                self._destinations.on_disconnected(conn.address, now)
            if conn in self._state.accepted:
                self._state.accepted.remove(conn)
        log.info("transport: connection with %s closed: %s", conn.address, status)


def _send_fragment(fragment: Fragment, adjacent: AdjacentConnection, now: float) -> bytes:
    return adjacent.send_fragment(fragment, now)


def _send_refusal(refusal: Refusal, adjacent: AdjacentConnection, now: float) -> bytes:
    return adjacent.send_refusal(refusal, now)
