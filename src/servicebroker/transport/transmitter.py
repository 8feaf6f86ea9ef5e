"""The sending side of a broker's transport (NET-2..5, NET-7, RTE-2/3, PRI-14, FWD-2, SEC-1,
TICK-3a): the transmitter thread and the frames it writes.

Each pass of :meth:`Transmitter.run` reads the catalog snapshot and the transport's rows of the
transmission queue that are new (:mod:`.pending`), chooses each one's route, offers it to the
:class:`~.outbound.Outbound` of its address and writes the fragments due, connecting when a
destination has messages and is not suppressed (TICK-3a); it passes on the fragments this broker
forwards (PRI-11: in arrival order). When the catalog's version moves it reads the endpoint's
security again (SEC-1): a GRANT CONNECT, a new certificate or an ALTER ENDPOINT … ENCRYPTION
takes effect for the next connection, and a connection the endpoint no longer allows (REVOKE
CONNECT, a dropped certificate or login; another ENCRYPTION or certificate of its own) is
closed. :func:`send_fragment` and :func:`send_refusal` make the MESSAGE and REFUSAL frames of a
:meth:`~.peer.PeerConnection.send`. Every time read is the broker clock's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial

from ..catalog import CatalogSnapshot
from ..errors import TransportError
from .adjacent import AdjacentConnection, Event
from .audit import LoginFailure
from .certificates import granted_by
from .outbound import Outbound
from .peer import PeerConnection, connect
from .pending import header_of, key_of, plan_offers
from .state import TransportState
from .tls import granted_certificates, same_identity, security_from_catalog
from .wire import Fragment, Refusal

__all__ = ["Transmitter", "send_fragment", "send_refusal"]

log = logging.getLogger("servicebroker.transport.service")

_POLL = 0.05  # real seconds between looks at the transmission queue for new rows
_BATCH = 2000  # rows read per level per look
_MAX_OFFERED = 20_000  # messages on their way at most (all destinations); more wait unread
_INLINE_BYTES = 16 * 1024  # a larger body is read alone when its message is offered
_FRAME_BYTES = 1024 * 1024  # fragment bytes written per destination per pass


def send_fragment(fragment: Fragment, adjacent: AdjacentConnection, now: float) -> bytes:
    """The MESSAGE frame of ``fragment`` on ``adjacent`` at ``now`` (broker-clock seconds), for
    :meth:`PeerConnection.send` (NET-3: the acks pending ride on it).

    Raises:
        TransportError: the connection is not logged in, or the frame is too large.
    """
    return adjacent.send_fragment(fragment, now)


def send_refusal(refusal: Refusal, adjacent: AdjacentConnection, now: float) -> bytes:
    """The REFUSAL frame of ``refusal`` on ``adjacent`` at ``now`` (broker-clock seconds), for
    :meth:`PeerConnection.send` (NET-7, FWD-1).

    Raises:
        TransportError: the connection is not logged in.
    """
    return adjacent.send_refusal(refusal, now)


class Transmitter:
    """The transmitter of one broker (see the module).

    Args:
        state: the transport's shared state.
        on_events: the receiving side's handler of a connection's events (each connection
            this broker makes is read by a thread of its own calling it).
    """

    def __init__(
        self,
        state: TransportState,
        on_events: Callable[[PeerConnection, list[Event]], None],
    ) -> None:
        self._state = state
        self._on_events = on_events
        self._refreshing = threading.Lock()  # one reading of the security at a time

    def run(self) -> None:
        """The transmitter thread's loop, until the transport stops: offer what is new, write
        what is due, then wait for the next retry, a wake-up, or at most 50 ms (real)."""
        state = self._state
        clock = state.context.clock
        while not state.stopping:
            now = clock.now()
            self.fill(now)
            self.send_due(now)
            with state.lock:
                if state.stopping:
                    return
                due = [ob.next_due(now) for ob in state.outbound.values()]
                times = [t for t in due if t is not None]
                wait = _POLL
                if times:
                    wait = min(wait, clock.max_real_wait(max(min(times) - now, 0.0)))
                state.cond.wait(max(wait, 0.001))

    def fill(self, now: float) -> None:
        """Offer the transport's rows not yet on their way to the Outbound of their route's
        address (RTE-2, PRI-14), reading only what is new (:mod:`.pending`); rows with no
        route get the status saying so (NET-7). ``now``: broker-clock seconds.

        Raises:
            StorageError: reading the rows or writing statuses failed (the thread's supervisor
                restarts it).
        """
        state = self._state
        storage, pending = state.context.storage, state.pending
        with storage.connection() as conn:
            with state.lock:
                last = pending.last
            mark = conn.transmission_remote_mark(last)
            catalog = state.context.catalog.snapshot(conn)
            self.refresh_security(catalog)
            with state.lock:
                state.learn_catalog(catalog, now)  # what the receiving side places fragments by
                state.counters.passes += 1
                read = pending.next_read(mark)
                if read is None or len(state.offered) >= _MAX_OFFERED:
                    return
                state.acked_since_read.clear()
            rows = conn.transmission_remote(_BATCH, inline_bytes=_INLINE_BYTES, after=read.after)
            with state.lock:
                pending.learn(rows, read)
                plan = plan_offers(
                    rows,
                    skip=lambda k: k in state.offered or k in state.acked_since_read,
                    pending_bytes={a: o.pending_bytes for a, o in state.outbound.items()},
                    window_bytes=state.settings.window_bytes,
                    catalog=catalog,
                    now=now,
                    aging_interval=state.context.priority_aging_interval,
                )
                state.full_windows = plan.full_windows
            bodies = {  # a large body is read alone, once its message goes (NET-5)
                row.transmission_id: conn.transmission_remote_body(row.transmission_id)
                for row, _ in plan.offers
                if row.message_body is None
            }
        instance = state.instance
        assert instance is not None
        offers = []
        for row, address in plan.offers:
            body = row.message_body if row.message_body is not None else bodies[row.transmission_id]
            if body is not None:  # None: acknowledged (and deleted) since the rows were read
                offers.append(((row, address), header_of(row, catalog, instance), body))
        ready, waiting = state.sealer.seal(offers, catalog, now)  # SEC-2: sealed, or waits
        with state.lock:
            for offer in ready:
                row, address = offer.tag
                key = key_of(row)
                if key in state.acked_since_read:
                    continue  # acknowledged (and deleted) since the rows were read
                outbound = state.outbound.setdefault(address, Outbound(state.settings))
                outbound.offer(offer.header, offer.body, now)
                state.offered[key] = address
                state.targets[key] = (row.to_service_name, row.to_broker_instance)
                state.destinations.add(address)
        unsent = [*plan.unrouted, *((key_of(row), s) for (row, _), s in waiting)]
        if unsent:
            state.set_statuses(unsent)

    def refresh_security(self, catalog: CatalogSnapshot) -> None:
        """SEC-1 on a running transport: when ``catalog``'s version is not the one the
        endpoint's security was last checked against, read the security again — the next
        connection made or accepted trusts exactly the certificates granted CONNECT now and
        uses the endpoint's ENCRYPTION now — and close each connection the endpoint no longer
        allows: all of them when its ENCRYPTION or its own certificate changed, else those
        whose peer certificate is no longer granted (REVOKE CONNECT, DROP CERTIFICATE, DROP
        LOGIN). Contexts that cannot be made (an unreadable private key) are logged and the
        old ones kept; the connections are still checked against the grants."""
        with self._refreshing:  # a second caller waits for the contexts the first makes
            self._refresh_security(catalog)

    def _refresh_security(self, catalog: CatalogSnapshot) -> None:
        state = self._state
        with state.lock:
            current = state.security
            if current is None or catalog.version == state.security_version:
                return
            state.security_version = catalog.version
        granted = granted_certificates(catalog)
        same = same_identity(current, catalog)
        if same and granted == current.granted:
            return
        security = current
        try:
            security = security_from_catalog(catalog)
        except TransportError as exc:
            log.error("transport: the endpoint's security was not read again: %s", exc)
        with state.lock:
            if state.security is current:
                state.security = security
            drop = [
                c
                for c in state.connections()
                if not same
                or c.peer_certificate_der is None
                or not granted_by(c.peer_certificate_der, granted)
            ]
        for conn in drop:
            reason = (
                "the endpoint's ENCRYPTION or certificate changed"
                if not same
                else "the peer's certificate is no longer granted CONNECT on this endpoint"
            )
            log.warning("transport: closing the connection with %s: %s", conn.address, reason)
            conn.close(reason)

    def send_due(self, now: float) -> None:
        """Write each destination's fragments due at ``now`` (broker-clock seconds) on its
        connection (connecting if needed, TICK-3a), the forwarded fragments (PRI-11), and an ACK
        frame on each connection whose acks found no fragment to ride on (NET-3)."""
        state = self._state
        with state.lock:
            work = []
            for address, outbound in state.outbound.items():
                if not outbound.pending_count:
                    continue
                conn = self.connection_for(address, now)
                if conn is None:
                    continue
                frames = outbound.frames_due(now, _FRAME_BYTES)
                if frames:
                    work.append((conn, frames))
            # forwarded fragments: in arrival order, level 5 whatever their priority (PRI-11)
            for address in state.forwarder.addresses():
                conn = self.connection_for(address, now)
                if conn is not None:
                    work.append((conn, state.forwarder.take(address, now, _FRAME_BYTES)))
            conns = state.connections()
        for conn, frames in work:
            conn.send(*(partial(send_fragment, frame) for frame in frames))
        for conn in conns:
            if conn.pending_acks:
                conn.send(lambda a, n: a.flush_acks(n))

    def connection_for(self, address: str, now: float) -> PeerConnection | None:
        """The open connection this broker made to ``address``; else None, and a connection
        attempt starts unless one is under way or the address is suppressed (TICK-3a). Call
        under the lock."""
        state = self._state
        conn = state.outgoing.get(address)
        if conn is not None and conn.open:
            return conn
        if state.destinations.should_connect(address, now):
            state.destinations.on_connecting(address, now)
            threading.Thread(
                target=self.connect, args=(address,), name="transport connect", daemon=True
            ).start()
        return None

    def connect(self, address: str) -> None:
        """Connect to ``address`` (a thread of its own) and read the connection until it closes;
        a failure is the status of the messages waiting for it (NET-7) and suppresses the
        address for a while (TICK-3a)."""
        state = self._state
        clock = state.context.clock
        security, instance = state.security, state.instance
        if security is None or instance is None:
            return
        try:
            conn = connect(address, instance, security, state.settings, clock)
        except TransportError as exc:
            status = str(exc)
            if not isinstance(exc, LoginFailure):  # a login failure's audit record says it
                log.warning("transport: %s", status)
            with state.lock:
                state.destinations.on_failed(address, clock.now(), status)
                state.counters.failures += 1
                keys = [k for k, a in state.offered.items() if a == address]
            state.set_statuses([(k, status) for k in keys])
            return
        with state.lock:
            if state.stopping:
                conn.close("the broker is stopping")
                return
            state.outgoing[address] = conn
            state.destinations.on_connected(address, clock.now())
            state.cond.notify_all()
        conn.read(self._on_events)
