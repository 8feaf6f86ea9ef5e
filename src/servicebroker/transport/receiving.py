"""The receiving side of a broker's transport (NET-2, NET-3, NET-7, FWD-1..3, RTE-4): what the
connections bring — fragments, acknowledgements, refusals — and what is done with them.

A reader thread hands a connection's events to :meth:`ReceivingSide._on_events`. Each fragment
is first placed (:func:`~.forwarding.next_hop`): for this broker it goes to the message
dispatcher (:class:`~.inbound.Inbound`), whose complete messages the dispatcher thread commits to
their queues in one write transaction per batch and acknowledges only after the commit (NET-3);
for a service elsewhere it is forwarded (:class:`~.forwarding.Forwarder`, when the endpoint has
MESSAGE_FORWARDING) or refused (FWD-1, error 9792). Acknowledgements delete the acknowledged
rows and pin the dialog to the instance that made them (RTE-4) — or, for a conversation side
this broker forwards, go back the way its fragments came, as refusals do. The transmitter
(:class:`~.service.TransportService`) shares the state kept here.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from ..catalog import CatalogSnapshot
from ..catalog.routing import RouteChooser
from ..dialogs import ERROR, error_body
from ..engine.context import BrokerContext
from ..engine.delivery import Applier
from ..errors import DialogSecurityError
from .adjacent import (
    AckReceived,
    AdjacentConnection,
    ConnectionClosed,
    Event,
    FragmentReceived,
    RefusalReceived,
)
from .arrival import ArrivalSecurity, Outcome, Verdict, take_acknowledgements, take_arrival
from .destinations import Destinations
from .dialog_protection import DialogKey, KeyRing, protect_outgoing
from .forwarding import Forwarder, Source, next_hop
from .inbound import Completed, Inbound
from .outbound import Outbound
from .peer import PeerConnection
from .pending import MessageKey, PendingRows
from .sealing import Sealer
from .settings import TransportSettings
from .wire import Ack, Fragment, MessageHeader, Refusal

__all__ = [
    "ReceivingSide",
    "TransportCounters",
    "TransportState",
    "in_sequence",
    "send_fragment",
    "send_refusal",
]

log = logging.getLogger("servicebroker.transport.service")


@dataclass
class TransportCounters:
    """The transport's counters (see :class:`~.service.TransportStatistics`)."""

    received: int = 0
    duplicates: int = 0
    refused: int = 0
    rejected: int = 0
    acknowledged: int = 0
    accepted: int = 0
    refused_logins: int = 0
    failures: int = 0


@dataclass
class TransportState:
    """What the threads share, under the transport's lock: the Outbound of each address, the
    messages offered (key → address) and their targets, the connections made and accepted,
    the statuses written (NET-7)."""

    outbound: dict[str, Outbound] = field(default_factory=dict)
    offered: dict[MessageKey, str] = field(default_factory=dict)  # key -> address
    targets: dict[MessageKey, tuple[str, str | None]] = field(default_factory=dict)
    outgoing: dict[str, PeerConnection] = field(default_factory=dict)
    accepted: list[PeerConnection] = field(default_factory=list)
    statuses: dict[MessageKey, str] = field(default_factory=dict)


def in_sequence(
    inbox: list[tuple[PeerConnection, Completed]],
) -> list[tuple[PeerConnection, Completed]]:
    """``inbox`` with each conversation side's messages in sequence order, in the places that
    side's messages had (other sides' order kept): a message that completed before its
    predecessor in one batch is then taken right after it in the same commit (NET-2), not
    held back after the commit until TICK-2c deletes it and the sender retries."""
    sides: dict[tuple[bytes, bool], list[tuple[PeerConnection, Completed]]] = {}
    for entry in inbox:
        h = entry[1].header
        sides.setdefault((h.conversation_id, h.is_initiator), []).append(entry)
    for entries in sides.values():
        entries.sort(key=lambda e: e[1].header.sequence)
        entries.reverse()  # popped from the end below, lowest sequence first
    out = []
    for entry in inbox:
        h = entry[1].header
        out.append(sides[(h.conversation_id, h.is_initiator)].pop())
    return out


class ReceivingSide:
    """The state a broker's transport shares between its threads, and its receiving side (see
    the module); :class:`~.service.TransportService` adds the life cycle and the transmitter.

    Args:
        context: the broker's shared parts (storage, clock, catalog).
        committed: called after a commit that put messages on queues, with (queues that got
            messages, queues where a message arrived on an empty queue).
        settings: the transport's settings (:class:`TransportSettings`).
    """

    def __init__(
        self,
        context: BrokerContext,
        committed: Callable[[set[int], frozenset[int]], None],
        settings: TransportSettings | None = None,
    ) -> None:
        self._context = context
        self._committed = committed
        self.settings = settings or TransportSettings()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._state = TransportState()
        self._inbound = Inbound(self.settings)
        self._destinations = Destinations(self.settings)
        self._counters = TransportCounters()
        self._instance: uuid.UUID | None = None
        self._stopping = False
        self._pending = PendingRows()
        self._full_windows: set[str] = set()  # addresses whose window left rows unoffered
        self._acked_since_read: set[MessageKey] = set()
        self._inbox: list[tuple[PeerConnection, Completed]] = []
        self._ackbox: list[tuple[PeerConnection, Ack]] = []
        self._forwarder = Forwarder()
        self._sealer = Sealer(context.storage, KeyRing())  # dialog security (SEC-2)
        self._routing: tuple[CatalogSnapshot, RouteChooser] | None = None

    def _learn_catalog(self, catalog: CatalogSnapshot, now: float) -> None:
        """The catalog as the transmitter last read it (each pass): the routes and services
        fragments are placed by, and MESSAGE_FORWARD_SIZE. Call under the lock."""
        chooser = RouteChooser(catalog.routes.values(), local_services=catalog.services, now=now)
        self._routing = (catalog, chooser)
        endpoint = catalog.service_broker_endpoint
        if endpoint is not None:
            self._forwarder.set_limit(endpoint.message_forward_size)

    def _place(
        self, conn: PeerConnection, fragment: Fragment, now: float
    ) -> tuple[bool, Refusal | None]:
        """Whether ``fragment`` is for this broker (True), else forward it (FWD-1..3) or
        refuse it: (False, the refusal to send back, or None). Call under the lock."""
        if self._routing is None or self._instance is None:
            return True, None
        catalog, chooser = self._routing
        h = fragment.header
        hop = next_hop(
            h, instance=self._instance, local_services=catalog.services, routes=chooser, now=now
        )
        if hop.is_local:
            return True, None
        endpoint = catalog.service_broker_endpoint
        if endpoint is None or not endpoint.message_forwarding:
            name = endpoint.name if endpoint is not None else "?"
            refusal = self._forwarder.disabled(h, name, self._instance)
            log.warning("transport: %s", refusal.status)
            return False, refusal
        if hop.address is None:
            refusal = self._forwarder.no_route(h, self._instance)
            log.warning("transport: %s", refusal.status)
            return False, refusal
        source = Source(conn.peer_instance, conn.address)
        discard = self._forwarder.receive(fragment, source=source, address=hop.address, now=now)
        if discard is not None:
            log.info(
                "forwarder dropped fragment %d of message %s for %r: %s (FWD-2/3)",
                fragment.index,
                h.message_id.hex(),
                h.to_service,
                discard.value,
            )
        else:
            self._destinations.add(hop.address)
        return False, None

    def _connection_to(self, source: Source) -> PeerConnection | None:
        """An open connection to the adjacent broker ``source`` (made, else accepted), or
        None. Call under the lock."""
        for conn in [*self._state.outgoing.values(), *self._state.accepted]:
            if conn.open and conn.peer_instance == source.instance:
                return conn
        return None

    # -- events from a connection ------------------------------------------------------
    def _on_events(self, conn: PeerConnection, events: list[Event]) -> None:
        now = self._context.clock.now()
        completed: list[Completed] = []
        acks: list[Ack] = []
        refusals: list[Refusal] = []
        answers: list[tuple[PeerConnection, Refusal]] = []
        closed: str | None = None
        with self._lock:
            by = self._instance
            for event in events:
                if isinstance(event, FragmentReceived):
                    here, refusal = self._place(conn, event.fragment, now)
                    if refusal is not None:
                        answers.append((conn, refusal))
                    if not here:
                        continue
                    for item in self._inbound.on_fragment(event.fragment, now):
                        if isinstance(item, Completed):
                            completed.append(item)
                        elif isinstance(item, Ack):
                            conn.queue_ack(dataclasses.replace(item, by=by))
                        else:
                            log.warning("message dispatcher dropped a message: %s", item.reason)
                elif isinstance(event, AckReceived):
                    if not self._relay_ack(event.ack, now):
                        acks.append(event.ack)
                elif isinstance(event, RefusalReceived):
                    refusal = event.refusal
                    key = (refusal.conversation_id, refusal.is_initiator, refusal.sequence)
                    source = (
                        None
                        if key in self._state.offered
                        else self._forwarder.relay_refusal(refusal, now)
                    )
                    back = None if source is None else self._connection_to(source)
                    if back is not None:
                        answers.append((back, refusal))
                    elif source is None:
                        refusals.append(refusal)
                elif isinstance(event, ConnectionClosed):
                    closed = event.status
            self._inbox.extend((conn, c) for c in completed)
            self._ackbox.extend((conn, a) for a in acks)
            self._cond.notify_all()
        for to, refusal in answers:
            to.send(partial(send_refusal, refusal))
        if refusals:
            self._take_refusals(refusals, now)
        if closed is not None:
            self._closed(conn, closed, now)

    def _relay_ack(self, ack: Ack, now: float) -> bool:
        """Pass ``ack`` back towards the sender when its conversation side is one this broker
        forwards and the message is not one of its own (FWD-2: only the final destination
        acknowledges); True when it was (or its way back is closed: the sender retries).
        Call under the lock."""
        if (ack.conversation_id, ack.is_initiator, ack.sequence) in self._state.offered:
            return False
        source = self._forwarder.relay_ack(ack, now)
        if source is None:
            return False
        back = self._connection_to(source)
        if back is not None:
            back.queue_ack(ack)
        return True

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
                self._take_messages(in_sequence(inbox), clock.now())
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
            security = ArrivalSecurity(self._sealer.keys, self._sealer.wall_now())
            work = list(reversed(inbox))
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
        self._context.statistics.delivered(applier.tally()[0])
        self._committed(applier.woken_queues, frozenset(applier.arrived_on_empty))
        for conn, item, outcome in answers:
            h = item.header
            verdict = outcome.verdict
            if verdict in (Verdict.DELIVERED, Verdict.DUPLICATE):
                self._counters.received += verdict is Verdict.DELIVERED
                self._counters.duplicates += verdict is Verdict.DUPLICATE
                by = self._instance
                self._ack_back(conn, Ack(h.conversation_id, h.is_initiator, h.sequence, None, by))
            elif verdict is Verdict.LATER:
                with self._lock:
                    self._inbound.hold(item, now)
            elif verdict is Verdict.REFUSED:
                self._counters.refused += 1
                if outcome.rejected:
                    self._counters.rejected += 1
                    log.warning("transport: dialog security refused a message: %s", outcome.status)
                refusal = Refusal(h.conversation_id, h.is_initiator, h.sequence, outcome.status)
                conn.send(partial(send_refusal, refusal))
            else:
                self._counters.refused += 1
                assert outcome.error is not None
                errors.append((conn, h, error_body(*outcome.error), outcome.key))
        for conn, h, body, key in errors:
            self._error_back(conn, h, body, key, applier.catalog)

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
        self,
        conn: PeerConnection,
        h: MessageHeader,
        body: bytes,
        key: DialogKey | None,
        catalog: CatalogSnapshot,
    ) -> None:
        """Send the sender the broker's Error for its dialog (unsequenced, NET-2), sealed with
        the dialog's session key when it is secured (SEC-2), by the certificates of
        ``catalog`` (the snapshot the commit that made the Error read)."""
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
                header, body = protect_outgoing(
                    header, body, key, catalog, self._sealer.keys, self._sealer.wall_now()
                )
            except DialogSecurityError as exc:  # never in clear: the sender's retry asks again
                log.warning("transport: the Error for a secured dialog is not sent: %s", exc)
                return
        fragment = Fragment(header, 0, body)
        conn.send(partial(send_fragment, fragment))

    def _take_acks(self, ackbox: list[tuple[PeerConnection, Ack]], now: float) -> None:
        done: list[tuple[MessageKey, uuid.UUID]] = []
        with self._lock:
            for conn, ack in ackbox:
                # RTE-4: the instance that made the ack (through a forwarder), else the peer
                peer = ack.by or conn.peer_instance or uuid.UUID(int=0)
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


def send_fragment(fragment: Fragment, adjacent: AdjacentConnection, now: float) -> bytes:
    """The MESSAGE frame of ``fragment`` on ``adjacent`` (for :meth:`PeerConnection.send`)."""
    return adjacent.send_fragment(fragment, now)


def send_refusal(refusal: Refusal, adjacent: AdjacentConnection, now: float) -> bytes:
    """The REFUSAL frame of ``refusal`` on ``adjacent`` (for :meth:`PeerConnection.send`)."""
    return adjacent.send_refusal(refusal, now)
