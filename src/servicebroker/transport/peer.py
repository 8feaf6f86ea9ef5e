"""One TCP connection to another broker instance: the thin I/O shell around the pure
:class:`~servicebroker.transport.adjacent.AdjacentConnection` (NET-1, NET-8, SEC-1).

:func:`connect` and :func:`accept` run the opening on a blocking socket — each side's HELLO in
the clear (it carries the broker instance and the ENCRYPTION setting), then the TLS handshake
with both certificates (mutual TLS, :mod:`.tls`; encrypted, or integrity-only when the
ENCRYPTION matrix says so), then the accepting side's LOGIN verdict —
and return a :class:`PeerConnection` whose reader thread feeds every byte received to the
state machine and hands the events to the transport service. Writes go through
:meth:`PeerConnection.send`, one at a time.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import uuid
from collections.abc import Callable

from ..catalog.routing import parse_tcp_address
from ..clock import Clock
from ..errors import TransportError
from .adjacent import (
    AdjacentConnection,
    ConnectionClosed,
    ConnectionState,
    Event,
    LoggedIn,
    LoginRefused,
    PeerHello,
)
from .audit import AuditBrokerLogin, LoginFailure, audit_login, handshake_status
from .settings import TransportSettings
from .tls import EndpointSecurity, check_cipher, handshake_failure, peer_thumbprint
from .wire import Ack

__all__ = ["PeerConnection", "accept", "connect"]

log = logging.getLogger(__name__)


_READ = 256 * 1024


class PeerConnection:
    """An open, logged-in connection.

    Args:
        sock: the socket (TLS-wrapped when the connection is encrypted).
        adjacent: its protocol state, LOGGED_IN.
        address: ``TCP://host:port`` — the destination for a connection this broker made, the
            peer's socket address for one it accepted.
        clock: the broker clock (``now`` of every event).
        peer_certificate: the SHA-1 thumbprint of the certificate the peer presented.
        received: events the handshake read behind its last one (taken first by :meth:`read`).
        peer_certificate_der: the certificate the peer presented (DER bytes), so that a
            REVOKE CONNECT can tell whether it is still trusted (SEC-1).
    """

    def __init__(
        self,
        sock: socket.socket,
        adjacent: AdjacentConnection,
        address: str,
        clock: Clock,
        peer_certificate: str | None,
        received: list[Event] | None = None,
        peer_certificate_der: bytes | None = None,
    ) -> None:
        self.sock = sock
        self.peer_certificate_der = peer_certificate_der
        self._received = received or []
        self.adjacent = adjacent
        self.address = address
        self.clock = clock
        self.peer_certificate = peer_certificate
        self.connection_id = uuid.uuid4()
        self._lock = threading.Lock()  # the protocol state (adjacent)
        self._send_lock = threading.Lock()  # the socket's writing side, frames in order

    @property
    def peer_instance(self) -> uuid.UUID | None:
        """The peer's service_broker_guid (from its HELLO)."""
        return self.adjacent.peer_instance

    @property
    def open(self) -> bool:
        """True while the connection is logged in."""
        return self.adjacent.state is ConnectionState.LOGGED_IN

    def send(self, *makes: Callable[[AdjacentConnection, float], bytes]) -> bool:
        """Run each ``make(adjacent, now)`` (``now`` broker-clock seconds; each returns frame
        bytes: MESSAGE, ACK, REFUSAL, NET-3) under the state lock and write the bytes they
        return in one write, in order; False when the connection is (or becomes) closed — a
        failed write closes it (NET-8), it never raises.

        The protocol state is locked only while the frames are made: the write holds the
        send lock alone, so the reader thread goes on taking the peer's frames while a write
        waits for room (two brokers writing to each other at once never block each other)."""
        with self._send_lock:
            with self._lock:
                if not self.open:
                    return False
                try:
                    now = self.clock.now()
                    data = b"".join(make(self.adjacent, now) for make in makes)
                except TransportError as exc:
                    self._fail(f"sending failed: {exc}")
                    return False
            try:
                if data:
                    self.sock.sendall(data)
                return True
            except OSError as exc:
                with self._lock:
                    self._fail(f"sending failed: {exc}")
                return False

    def queue_ack(self, ack: Ack) -> None:
        """Keep ``ack`` to ride on the next frame to the peer (NET-3), under the state lock
        (the transmitter takes the pending acks under it too)."""
        with self._lock:
            self.adjacent.queue_ack(ack)

    @property
    def pending_acks(self) -> bool:
        """True while acknowledgements wait for a frame to the peer."""
        with self._lock:
            return bool(self.adjacent.pending_acks)

    def read(self, handle: Callable[[PeerConnection, list[Event]], None]) -> None:
        """The reader thread's loop (NET-8): every byte received becomes events for ``handle``, until
        the connection closes; the last event is always one :class:`ConnectionClosed`, also
        when this side closed it (:meth:`close`, a write that failed), so the transport
        tears the connection down and connects again (TICK-3a)."""
        received, self._received = self._received, []
        if received:
            handle(self, received)
        while True:
            try:
                data = self.sock.recv(_READ)
            except (OSError, ValueError) as exc:
                with self._lock:
                    events: list[Event] = [self._fail(f"receiving failed: {exc}")]
                handle(self, events)
                return
            with self._lock:
                now = self.clock.now()
                was_closed = self.adjacent.state is ConnectionState.CLOSED
                events = (
                    self.adjacent.receive_data(data, now)
                    if data
                    else self.adjacent.receive_eof(now)
                )
                if was_closed:  # closed by this side: the state machine says nothing more
                    status = self.adjacent.closed_status or "the connection was closed"
                    events = [ConnectionClosed(status)]
            if not was_closed and self.adjacent.state is ConnectionState.CLOSED:
                self._goodbye()  # acks of what was committed here, and why we close
            if events:
                handle(self, events)
            if self.adjacent.state is ConnectionState.CLOSED:
                self._shutdown()
                return

    def close(self, status: str) -> None:
        """Close saying ``status`` (the CLOSE frame, then the socket; NET-8, TICK-4a). The CLOSE frame is
        left out when a write has waited for room for a second (a peer that reads nothing):
        the socket's shutdown ends that write."""
        writing = self._send_lock.acquire(timeout=1.0)
        try:
            with self._lock:
                data = self.adjacent.close(status, self.clock.now())
            if writing and data:
                with contextlib.suppress(OSError):
                    self.sock.sendall(data)
        finally:
            if writing:
                self._send_lock.release()
        self._shutdown()

    def _goodbye(self) -> None:
        """After this side closed on what the peer sent (a bad frame, its end of stream): write
        :meth:`AdjacentConnection.goodbye`'s last frames, unless a write has waited a second
        for room (a peer that reads nothing)."""
        if not self._send_lock.acquire(timeout=1.0):
            return
        try:
            with self._lock:
                data = self.adjacent.goodbye(self.clock.now())
            if data:
                with contextlib.suppress(OSError):
                    self.sock.sendall(data)
        finally:
            self._send_lock.release()

    def _fail(self, status: str) -> ConnectionClosed:
        if self.adjacent.state is not ConnectionState.CLOSED:
            self.adjacent.close(status, self.clock.now())
        self._shutdown()
        return ConnectionClosed(status)

    def _shutdown(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _events_until(
    sock: socket.socket,
    adjacent: AdjacentConnection,
    clock: Clock,
    done: Callable[[Event], bool],
) -> tuple[Event, list[Event]]:
    """Read until an event ``done`` accepts (or the connection closes), reading no further
    than the frame that gives it while HELLO is awaited (the TLS handshake follows on the same
    socket); returns that event and the events that came after it in the same read (frames
    the peer sent right behind its LOGIN), for the connection to take first."""
    while True:
        data = sock.recv(1) if adjacent.state is ConnectionState.CONNECTING else sock.recv(_READ)
        events = (
            adjacent.receive_data(data, clock.now()) if data else adjacent.receive_eof(clock.now())
        )
        for i, event in enumerate(events):
            if done(event) or isinstance(event, ConnectionClosed):
                return event, events[i + 1 :]


def connect(
    address: str,
    our_instance: uuid.UUID,
    security: EndpointSecurity,
    settings: TransportSettings,
    clock: Clock,
) -> PeerConnection:
    """Open a connection to the endpoint at ``address`` and log in (NET-8, SEC-1): HELLO in
    the clear, TLS with this endpoint's certificate, the peer's LOGIN. A failed login is
    logged as an Audit Broker Login event (:mod:`.audit`).

    Args:
        address: ``TCP://host:port`` (the route's address).
        our_instance: this database's ``service_broker_guid`` (sent in HELLO).
        security: this endpoint's TLS contexts and ENCRYPTION (:func:`.tls.security_from_catalog`).
        settings: ``handshake_timeout`` bounds each wait of the opening, in real seconds.
        clock: the broker clock (the connection's times).

    Raises:
        TransportError: the connection could not be made or was refused; the message is the
            ``transmission_status`` the waiting messages show (NET-7): connection refused,
            or "Connection handshake failed. …" (certificate not granted, expired, from
            another CA, none presented; ENCRYPTION REQUIRED against DISABLED; the login
            refused) — a :class:`LoginFailure` then, with its Audit Broker Login subclass.
    """
    host, port = parse_tcp_address(address)
    try:
        raw = socket.create_connection((host, port), timeout=settings.handshake_timeout)
    except OSError as exc:
        raise TransportError(
            f"Connection attempt failed with error: '{exc.strerror or exc}' ({address})"
        ) from None
    adjacent = AdjacentConnection(
        our_instance,
        is_accept=False,
        encryption=security.encryption,
        settings=settings,
        now=clock.now(),
        peer_name=address,
    )
    sock: socket.socket = raw
    try:
        raw.sendall(adjacent.start(clock.now()))
        hello, _ = _events_until(raw, adjacent, clock, lambda e: isinstance(e, PeerHello))
        if not isinstance(hello, PeerHello):
            raise _closed_failure(hello, adjacent, address)
        if hello.encrypt is None:
            raise LoginFailure(
                handshake_status(adjacent.encryption_refusal(), address),
                AuditBrokerLogin.NEGOTIATE_FAILURE,
            )
        sock = _secure(raw, hello.encrypt, security, server=False, address=address)
        try:
            verdict, behind = _events_until(
                sock, adjacent, clock, lambda e: isinstance(e, LoggedIn | LoginRefused)
            )
        except OSError as exc:  # TLS 1.3: the peer's refusal of our certificate comes here
            raise handshake_failure(exc, address) from None
        if isinstance(verdict, LoginRefused):
            raise LoginFailure(
                handshake_status(verdict.status, address), AuditBrokerLogin.AUTHORIZATION_FAILURE
            )
        if not isinstance(verdict, LoggedIn):
            raise _closed_failure(verdict, adjacent, address)
        sock.settimeout(None)
        audit_login(log, AuditBrokerLogin.LOGIN_SUCCESS, address, _how(hello.encrypt), accept=False)
        return PeerConnection(sock, adjacent, address, clock, _thumbprint(sock), behind, _der(sock))
    except (OSError, TransportError) as exc:
        _close(sock, raw)
        failure = _as_failure(exc, address)
        audit_login(log, failure.subclass, address, str(failure), accept=False)
        raise failure from None


def accept(
    raw: socket.socket,
    peer_address: str,
    our_instance: uuid.UUID,
    security: EndpointSecurity,
    settings: TransportSettings,
    clock: Clock,
) -> PeerConnection | None:
    """Open an accepted connection: HELLO, TLS with the peer's certificate required and
    verified against the certificates granted CONNECT (encrypted or not, as the ENCRYPTION
    matrix says), then LOGIN. A refused peer gets nothing but the refusal (the TLS alert, or
    a LOGIN refusal when the ENCRYPTION settings exclude each other); every login, accepted
    or refused, is logged as SQL Server's Audit Broker Login event with its subclass
    (:mod:`.audit`), SEC-1.

    Args:
        raw: the accepted TCP socket (closed here when the login is refused).
        peer_address: ``TCP://ip:port`` of the peer's socket (for logs and the view).
        our_instance, security, settings, clock: as for :func:`connect`.

    Returns:
        The logged-in :class:`PeerConnection`, or None for a refused peer.
    """
    raw.settimeout(settings.handshake_timeout)
    adjacent = AdjacentConnection(
        our_instance,
        is_accept=True,
        encryption=security.encryption,
        settings=settings,
        now=clock.now(),
        peer_name=peer_address,
    )
    sock: socket.socket = raw
    try:
        hello, _ = _events_until(raw, adjacent, clock, lambda e: isinstance(e, PeerHello))
        if not isinstance(hello, PeerHello):
            raise _closed_failure(hello, adjacent, peer_address)
        raw.sendall(adjacent.start(clock.now()))
        if hello.encrypt is None:
            refusal = adjacent.encryption_refusal()
            raw.sendall(adjacent.login(False, refusal, clock.now()))
            raise LoginFailure(
                handshake_status(refusal, peer_address), AuditBrokerLogin.NEGOTIATE_FAILURE
            )
        sock = _secure(raw, hello.encrypt, security, server=True, address=peer_address)
        sock.sendall(adjacent.login(True, "", clock.now()))
        sock.settimeout(None)
        audit_login(
            log, AuditBrokerLogin.LOGIN_SUCCESS, peer_address, _how(hello.encrypt), accept=True
        )
        return PeerConnection(
            sock, adjacent, peer_address, clock, _thumbprint(sock), None, _der(sock)
        )
    except (OSError, TransportError) as exc:
        failure = _as_failure(exc, peer_address)
        audit_login(log, failure.subclass, peer_address, str(failure), accept=True)
        _close(sock, raw)
        return None


def _close(sock: socket.socket, raw: socket.socket) -> None:
    """Close a connection whose login failed: the TLS socket (which took over the raw one's
    file descriptor) if the handshake went that far, else the raw socket."""
    for s in (sock, raw):
        with contextlib.suppress(OSError):
            s.close()


def _as_failure(exc: OSError | TransportError, address: str) -> LoginFailure:
    """``exc`` as a :class:`LoginFailure`: an I/O error or another transport error during the
    login is a Login Protocol Error (the connection broke, or timed out, mid-way)."""
    if isinstance(exc, LoginFailure):
        return exc
    return LoginFailure(
        handshake_status(f"An error occurred during the login: {exc}", address),
        AuditBrokerLogin.LOGIN_PROTOCOL_ERROR,
    )


def _how(encrypt: bool) -> str:
    return "certificates verified, " + (
        "encrypted (AES)" if encrypt else "not encrypted (ENCRYPTION DISABLED: integrity only)"
    )


def _closed_failure(event: Event, adjacent: AdjacentConnection, address: str) -> LoginFailure:
    """The failure of a handshake that ended before its HELLO or LOGIN: a bad frame is a
    Message Format Error, anything else (the peer closed, a frame out of place) a Login
    Protocol Error."""
    status = event.status if isinstance(event, ConnectionClosed) else type(event).__name__
    subclass = (
        AuditBrokerLogin.MESSAGE_FORMAT_ERROR
        if adjacent.bad_frames
        else AuditBrokerLogin.LOGIN_PROTOCOL_ERROR
    )
    return LoginFailure(handshake_status(status, address), subclass)


def _secure(
    raw: socket.socket,
    encrypt: bool,
    security: EndpointSecurity,
    *,
    server: bool,
    address: str,
) -> ssl.SSLSocket:
    """The TLS handshake over ``raw`` after the HELLOs (SEC-1): mutual certificate
    authentication always; encrypted or integrity-only as the two endpoints' cipher suites
    make it, which must be what the ENCRYPTION matrix decided (``encrypt``).

    Raises:
        LoginFailure: the handshake failed (:func:`.tls.handshake_failure`), or chose a cipher
            the matrix did not say (:func:`.tls.check_cipher`).
    """
    ctx = security.server if server else security.client
    try:
        sock = ctx.wrap_socket(raw, server_side=server)
    except OSError as exc:
        raise handshake_failure(exc, address) from None
    try:
        check_cipher(sock, encrypt=encrypt, address=address)
    except LoginFailure:
        sock.close()
        raise
    return sock


def _thumbprint(sock: socket.socket) -> str | None:
    return peer_thumbprint(sock) if isinstance(sock, ssl.SSLSocket) else None


def _der(sock: socket.socket) -> bytes | None:
    return sock.getpeercert(binary_form=True) if isinstance(sock, ssl.SSLSocket) else None
