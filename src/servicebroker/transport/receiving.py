"""The receiving side of a broker's transport (NET-2, NET-3, NET-7, FWD-1..3, RTE-4): what the
connections bring — fragments, acknowledgements, refusals — and what is done with them.

A reader thread hands a connection's events to :meth:`ReceivingSide.on_events`. Each fragment
is first placed (:func:`~.forwarding.next_hop`): for this broker it goes to the message
dispatcher (:class:`~.inbound.Inbound`), whose complete messages the dispatcher thread
(:meth:`ReceivingSide.dispatch`) commits to their queues in one write transaction per batch and
acknowledges only after the commit (NET-3); for a service elsewhere it is forwarded
(:class:`~.forwarding.Forwarder`, when the endpoint has MESSAGE_FORWARDING) or refused (FWD-1,
error 9792). Acknowledgements delete the acknowledged rows and pin the dialog to the instance
that made them (RTE-4) — or, for a conversation side this broker forwards, go back the way its
fragments came, as refusals do.

An Error ends a dialog for good at both ends. A message this side answers with an Error is
remembered (:class:`RefusedDialogs`): a later copy of it, or a later message of that dialog
side, is answered with the same Error and never enqueued — also once the cause is gone (a
GRANT SEND made since). An Error that arrives here for one of this broker's dialogs withdraws
what the transmitter still holds of it in memory whose rows the Error deleted (no resend after
the Error). The state is the transport's :class:`~.state.TransportState`, shared with the
transmitter (:mod:`.transmitter`) by composition.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from functools import partial

from ..catalog import CatalogSnapshot
from ..dialogs import ERROR, error_body
from ..engine.closing import CLOSED_REMEMBERED
from ..engine.delivery import Applier
from ..errors import DialogSecurityError
from ..storage.base import StorageConnection
from .adjacent import (
    AckReceived,
    ConnectionClosed,
    Event,
    FragmentReceived,
    RefusalReceived,
)
from .arrival import ArrivalSecurity, Outcome, Verdict, take_acknowledgements, take_arrival
from .dialog_protection import DialogKey, protect_outgoing
from .forwarding import Source, next_hop
from .inbound import Completed
from .peer import PeerConnection
from .pending import MessageKey
from .state import TransportState
from .transmitter import send_fragment, send_refusal
from .wire import Ack, Fragment, MessageHeader, Refusal

__all__ = ["ReceivingSide", "RefusedDialogs", "in_sequence"]

log = logging.getLogger("servicebroker.transport.service")

_REFUSED_KEPT = 100_000  # dialog sides remembered as refused with an Error, at most


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


class RefusedDialogs:
    """The dialog sides this broker answered with an Error (NET-2, SEC-4; SQL Server: once a
    dialog errored at the target, its later messages are answered with an Error, never
    delivered). Kept in memory for
    :data:`~servicebroker.engine.delivery.CLOSED_REMEMBERED` seconds of the broker clock (the
    sender, which has the Error, stops sending), at most 100,000 sides (the oldest go first).
    Not thread-safe: the dispatcher thread alone uses it."""

    def __init__(self) -> None:
        self._sides: dict[tuple[bytes, bool], tuple[int, Outcome, float]] = {}

    def record(self, header: MessageHeader, outcome: Outcome, now: float) -> None:
        """Remember that the message ``header`` (sequenced) was answered with ``outcome`` (an
        Error verdict) at ``now`` (broker-clock seconds); the first Error of a side stays."""
        side = (header.conversation_id, header.is_initiator)
        if side in self._sides or header.sequence < 0:
            return
        if len(self._sides) >= _REFUSED_KEPT:
            del self._sides[next(iter(self._sides))]
        self._sides[side] = (header.sequence, outcome, now + CLOSED_REMEMBERED)

    def answer(self, header: MessageHeader) -> Outcome | None:
        """The Error to answer ``header`` with: its side's recorded one when ``header`` is a
        copy of the refused message or a later message of that side; else None (take it)."""
        kept = self._sides.get((header.conversation_id, header.is_initiator))
        if kept is None or header.sequence < kept[0]:
            return None
        return kept[1]

    def forget(self, now: float) -> int:
        """Forget the sides remembered until ``now`` or earlier; returns how many."""
        old = [side for side, (_, _, until) in self._sides.items() if until <= now]
        for side in old:
            del self._sides[side]
        return len(old)

    def __len__(self) -> int:
        return len(self._sides)


class ReceivingSide:
    """The receiving side of a broker's transport (see the module).

    Args:
        state: the transport's shared state.
        committed: called after a commit that put messages on queues, with (queues that got
            messages, queues where a message arrived on an empty queue).
    """

    def __init__(
        self,
        state: TransportState,
        committed: Callable[[set[int], frozenset[int]], None],
    ) -> None:
        self._state = state
        self._committed = committed
        self._inbox: list[tuple[PeerConnection, Completed]] = []
        self._ackbox: list[tuple[PeerConnection, Ack]] = []
        self._refused = RefusedDialogs()

    def forget_refused(self, now: float) -> int:
        """Forget the dialog sides refused with an Error more than half an hour (broker clock)
        before ``now`` (:class:`RefusedDialogs`); returns how many."""
        with self._state.lock:
            return self._refused.forget(now)

    def _place(
        self, conn: PeerConnection, fragment: Fragment, now: float
    ) -> tuple[bool, Refusal | None]:
        """Whether ``fragment`` is for this broker (True), else forward it (FWD-1..3) or
        refuse it: (False, the refusal to send back, or None). Call under the lock."""
        if self._state.routing is None or self._state.instance is None:
            return True, None
        catalog, chooser = self._state.routing
        h = fragment.header
        hop = next_hop(
            h,
            instance=self._state.instance,
            local_services=catalog.services,
            routes=chooser,
            now=now,
        )
        if hop.is_local:
            return True, None
        endpoint = catalog.service_broker_endpoint
        if endpoint is None or not endpoint.message_forwarding:
            name = endpoint.name if endpoint is not None else "?"
            refusal = self._state.forwarder.disabled(h, name, self._state.instance)
            log.warning("transport: %s", refusal.status)
            return False, refusal
        if hop.address is None:
            refusal = self._state.forwarder.no_route(h, self._state.instance)
            log.warning("transport: %s", refusal.status)
            return False, refusal
        source = Source(conn.peer_instance, conn.address)
        discard = self._state.forwarder.receive(
            fragment, source=source, address=hop.address, now=now
        )
        if discard is not None:
            log.info(
                "forwarder dropped fragment %d of message %s for %r: %s (FWD-2/3)",
                fragment.index,
                h.message_id.hex(),
                h.to_service,
                discard.value,
            )
        else:
            self._state.destinations.add(hop.address)
        return False, None

    # -- events from a connection ------------------------------------------------------
    def on_events(self, conn: PeerConnection, events: list[Event]) -> None:
        """Take ``events`` a reader thread read from ``conn``: fragments placed (for here, to
        forward, or refused, FWD-1), complete messages and acknowledgements handed to the
        dispatcher, refusals recorded as statuses (NET-7) or passed back (FWD-2), a closed
        connection torn down (:meth:`closed`)."""
        now = self._state.context.clock.now()
        completed: list[Completed] = []
        acks: list[Ack] = []
        refusals: list[Refusal] = []
        answers: list[tuple[PeerConnection, Refusal]] = []
        closed: str | None = None
        with self._state.lock:
            by = self._state.instance
            for event in events:
                if isinstance(event, FragmentReceived):
                    here, refusal = self._place(conn, event.fragment, now)
                    if refusal is not None:
                        answers.append((conn, refusal))
                    if not here:
                        continue
                    for item in self._state.inbound.on_fragment(event.fragment, now):
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
                        else self._state.forwarder.relay_refusal(refusal, now)
                    )
                    back = None if source is None else self._state.connection_to(source.instance)
                    if back is not None:
                        answers.append((back, refusal))
                    elif source is None:
                        refusals.append(refusal)
                elif isinstance(event, ConnectionClosed):
                    closed = event.status
            self._inbox.extend((conn, c) for c in completed)
            self._ackbox.extend((conn, a) for a in acks)
            self._state.cond.notify_all()
        for to, refusal in answers:
            to.send(partial(send_refusal, refusal))
        if refusals:
            self._take_refusals(refusals, now)
        if closed is not None:
            self.closed(conn, closed, now)

    def _relay_ack(self, ack: Ack, now: float) -> bool:
        """Pass ``ack`` back towards the sender when its conversation side is one this broker
        forwards and the message is not one of its own (FWD-2: only the final destination
        acknowledges); True when it was (or its way back is closed: the sender retries).
        Call under the lock."""
        if (ack.conversation_id, ack.is_initiator, ack.sequence) in self._state.offered:
            return False
        source = self._state.forwarder.relay_ack(ack, now)
        if source is None:
            return False
        back = self._state.connection_to(source.instance)
        if back is not None:
            back.queue_ack(ack)
        return True

    def dispatch(self) -> None:
        """The message dispatcher's loop: commit what the connections brought — complete
        messages, acknowledgements — in one write transaction each per pass (group commit:
        whatever arrives during a commit goes into the next)."""
        clock = self._state.context.clock
        while not self._state.stopping:
            with self._state.lock:
                while not self._inbox and not self._ackbox and not self._state.stopping:
                    self._state.cond.wait(0.5)
                inbox, self._inbox = self._inbox, []
                ackbox, self._ackbox = self._ackbox, []
            if inbox:
                self._take_messages(in_sequence(inbox), clock.now())
            if ackbox:
                self._take_acks(ackbox, clock.now())
            if inbox or ackbox:
                with self._state.lock:
                    self._state.cond.notify_all()

    def _take_messages(self, inbox: list[tuple[PeerConnection, Completed]], now: float) -> None:
        """Commit complete messages (and the held ones they release) in one write
        transaction, then answer each (NET-2, NET-3, NET-7)."""
        storage = self._state.context.storage
        answers: list[tuple[PeerConnection, Completed, Outcome]] = []
        errors: list[tuple[PeerConnection, MessageHeader, bytes, DialogKey | None]] = []
        with storage.connection() as db:
            db.begin_write()
            applier = Applier(db, self._state.context.catalog.snapshot(db, fresh=True), now)
            security = ArrivalSecurity(self._state.sealer.keys, self._state.sealer.wall_now())
            work = list(reversed(inbox))
            while work:
                conn, item = work.pop()
                h = item.header
                with self._state.lock:
                    refused = self._refused.answer(h)
                if refused is not None:  # NET-2: the Error again, never its queue
                    outcome = refused
                else:
                    outcome = take_arrival(applier, h, item.body, security)
                answers.append((conn, item, outcome))
                if outcome.verdict is Verdict.DELIVERED:
                    with self._state.lock:
                        later = self._state.inbound.release(
                            h.conversation_id, h.is_initiator, h.sequence + 1
                        )
                    if later is not None:
                        work.append((conn, later))
            applier.finish()
            errored = {  # this broker's dialog sides an Error ended
                (item.header.conversation_id, not item.header.is_initiator)
                for _, item, outcome in answers
                if outcome.verdict is Verdict.DELIVERED and item.header.message_type == ERROR
            }
            if errored:  # before the commit: once the Error can be received, none goes again
                self._withdraw_ended(errored, db)
            db.commit()
        self._state.context.statistics.delivered(applier.tally()[0])
        self._committed(applier.woken_queues, frozenset(applier.arrived_on_empty))
        for conn, item, outcome in answers:
            h = item.header
            verdict = outcome.verdict
            if verdict in (Verdict.DELIVERED, Verdict.DUPLICATE):
                self._state.counters.received += verdict is Verdict.DELIVERED
                self._state.counters.duplicates += verdict is Verdict.DUPLICATE
                by = self._state.instance
                self._ack_back(conn, Ack(h.conversation_id, h.is_initiator, h.sequence, None, by))
            elif verdict is Verdict.LATER:
                with self._state.lock:
                    self._state.inbound.hold(item, now)
            elif verdict is Verdict.REFUSED:
                self._state.counters.refused += 1
                if outcome.rejected:
                    self._state.counters.rejected += 1
                    log.warning("transport: dialog security refused a message: %s", outcome.status)
                refusal = Refusal(h.conversation_id, h.is_initiator, h.sequence, outcome.status)
                conn.send(partial(send_refusal, refusal))
            else:
                self._state.counters.refused += 1
                assert outcome.error is not None
                with self._state.lock:  # its later copies get this Error, never a queue
                    self._refused.record(h, outcome, now)
                errors.append((conn, h, error_body(*outcome.error), outcome.key))
        for conn, h, body, key in errors:
            self._error_back(conn, h, body, key, applier.catalog)

    def _withdraw_ended(self, sides: set[tuple[bytes, bool]], db: StorageConnection) -> None:
        """An Error ended these dialog sides of this broker (conversation_id, is_initiator):
        withdraw from the transmitter what it holds in memory of their messages whose rows
        the Error deleted from the transmission queue, so that none is sent again (NET-2:
        nothing of a dialog goes after its Error). A row read before and offered after is
        kept out too (:meth:`TransportState.forget`). ``db`` is the write transaction that
        took the Error, not committed yet (its deletions are what it reads); should it roll
        back, TICK-3b's full read offers the rows again."""
        state = self._state
        with state.lock:
            ids = {k: state.pending.id_of(k) for k in state.offered if (k[0], k[1]) in sides}
        known = [i for i in ids.values() if i is not None]
        there = db.transmission_remote_ids(min(known), max(known)) if known else set()
        with state.lock:
            for key, tid in ids.items():
                address = state.offered.get(key)
                if address is None or (tid is not None and tid in there):
                    continue
                state.outbound[address].withdraw(key)
                state.forget(key)

    def _ack_back(self, conn: PeerConnection, ack: Ack) -> None:
        """Queue an acknowledgement to ride on the next fragment to the peer (NET-3): on the
        connection this broker sends to it on, else the one the message came on."""
        with self._state.lock:
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
        assert self._state.instance is not None
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
            from_broker_instance=self._state.instance,
            to_broker_instance=h.from_broker_instance,
            priority=h.priority,
            lifetime=h.lifetime,
            message_size=len(body),
            fragment_count=1,
        )
        if key is not None:
            try:
                header, body = protect_outgoing(
                    header,
                    body,
                    key,
                    catalog,
                    self._state.sealer.keys,
                    self._state.sealer.wall_now(),
                )
            except DialogSecurityError as exc:  # never in clear: the sender's retry asks again
                log.warning("transport: the Error for a secured dialog is not sent: %s", exc)
                return
        fragment = Fragment(header, 0, body)
        conn.send(partial(send_fragment, fragment))

    def _take_acks(self, ackbox: list[tuple[PeerConnection, Ack]], now: float) -> None:
        done: list[tuple[MessageKey, uuid.UUID]] = []
        with self._state.lock:
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
        storage = self._state.context.storage
        with storage.connection() as db:
            db.begin_write()
            applier = Applier(db, self._state.context.catalog.snapshot(db), now)
            take_acknowledgements(applier, ((c, i, n, peer) for (c, i, n), peer in done))
            applier.finish()
            db.commit()
        # forgotten only once deleted: a fill meanwhile must not offer it again
        with self._state.lock:
            for key, _ in done:
                self._state.forget(key)
            self._state.counters.acknowledged += len(done)
            # read everything again once half a full window is acknowledged
            half = self._state.settings.window_bytes // 2
            if any(self._state.outbound[a].pending_bytes < half for a in self._state.full_windows):
                self._state.full_windows = set()
                self._state.pending.read_all()

    def _take_refusals(self, refusals: list[Refusal], now: float) -> None:
        updates = []
        with self._state.lock:
            for refusal in refusals:
                key = (refusal.conversation_id, refusal.is_initiator, refusal.sequence)
                address = self._state.offered.get(key)
                outbound = self._state.outbound.get(address) if address else None
                if outbound is not None:
                    outbound.on_refusal(refusal, now)
                updates.append((key, refusal.status))
        self._state.set_statuses(updates)

    def closed(self, conn: PeerConnection, status: str, now: float) -> None:
        """``conn`` closed saying ``status`` at ``now`` (broker-clock seconds): unlist it; for a
        connection this broker made, what was on the wire goes again (NET-5) once the address
        is no longer suppressed (TICK-3a)."""
        with self._state.lock:
            if self._state.outgoing.get(conn.address) is conn:
                del self._state.outgoing[conn.address]
                outbound = self._state.outbound.get(conn.address)
                if outbound is not None:
                    outbound.on_disconnect(now)
                self._state.destinations.on_disconnected(conn.address, now)
            if conn in self._state.accepted:
                self._state.accepted.remove(conn)
        log.info("transport: connection with %s closed: %s", conn.address, status)
