"""One TCP connection to another broker instance: the thin I/O shell around the pure
:class:`~servicebroker.transport.adjacent.AdjacentConnection` (NET-1, NET-8, SEC-1).

:func:`connect` and :func:`accept` run the opening on a blocking socket — each side's HELLO in
the clear (it carries the broker instance and the ENCRYPTION setting), then the TLS handshake
with both certificates (mutual TLS, :mod:`.tls`), then the accepting side's LOGIN verdict —
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
from .routing import parse_tcp_address
from .settings import TransportSettings
from .tls import EndpointSecurity, peer_thumbprint

__all__ = ["HANDSHAKE_SECONDS", "PeerConnection", "accept", "connect"]

log = logging.getLogger(__name__)

HANDSHAKE_SECONDS = 10.0
"""Real seconds a connection's opening may take on the socket before it fails (connect, HELLO,
TLS, LOGIN)."""

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
    """

    def __init__(
        self,
        sock: socket.socket,
        adjacent: AdjacentConnection,
        address: str,
        clock: Clock,
        peer_certificate: str | None,
    ) -> None:
        self.sock = sock
        self.adjacent = adjacent
        self.address = address
        self.clock = clock
        self.peer_certificate = peer_certificate
        self.connection_id = uuid.uuid4()
        self._lock = threading.Lock()

    @property
    def peer_instance(self) -> uuid.UUID | None:
        """The peer's service_broker_guid (from its HELLO)."""
        return self.adjacent.peer_instance

    @property
    def open(self) -> bool:
        """True while the connection is logged in."""
        return self.adjacent.state is ConnectionState.LOGGED_IN

    def send(self, make: Callable[[AdjacentConnection, float], bytes]) -> bool:
        """Run ``make(adjacent, now)`` and write the bytes it returns, under the connection's
        lock; False when the connection is (or becomes) closed."""
        with self._lock:
            if not self.open:
                return False
            try:
                data = make(self.adjacent, self.clock.now())
                if data:
                    self.sock.sendall(data)
                return True
            except (OSError, TransportError) as exc:
                self._fail(f"sending failed: {exc}")
                return False

    def read(self, handle: Callable[[PeerConnection, list[Event]], None]) -> None:
        """The reader thread's loop: every byte received becomes events for ``handle``, until
        the connection closes; the last event is always one :class:`ConnectionClosed`, also
        when this side closed it (:meth:`close`, a write that failed), so the transport
        tears the connection down and connects again (TICK-3a)."""
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
            if events:
                handle(self, events)
            if self.adjacent.state is ConnectionState.CLOSED:
                self._shutdown()
                return

    def close(self, status: str) -> None:
        """Close saying ``status`` (the CLOSE frame, then the socket)."""
        with self._lock:
            try:
                data = self.adjacent.close(status, self.clock.now())
                if data:
                    self.sock.sendall(data)
            except OSError:
                pass
        self._shutdown()

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
) -> Event:
    """Read until an event ``done`` accepts (or the connection closes), reading no further
    than the frame that gives it (HELLO is followed by the TLS handshake on the same socket)."""
    while True:
        data = sock.recv(1) if adjacent.state is ConnectionState.CONNECTING else sock.recv(_READ)
        events = (
            adjacent.receive_data(data, clock.now()) if data else adjacent.receive_eof(clock.now())
        )
        for event in events:
            if done(event) or isinstance(event, ConnectionClosed):
                return event


def connect(
    address: str,
    our_instance: uuid.UUID,
    security: EndpointSecurity,
    settings: TransportSettings,
    clock: Clock,
) -> PeerConnection:
    """Open a connection to the endpoint at ``address`` (``TCP://host:port``) and log in.

    Raises:
        TransportError: the connection could not be made or was refused; the message is the
            ``transmission_status`` the waiting messages show (NET-7): connection refused,
            the handshake failed (certificate not granted, expired, another CA, ENCRYPTION
            mismatch), or the login was refused.
    """
    host, port = parse_tcp_address(address)
    try:
        raw = socket.create_connection((host, port), timeout=HANDSHAKE_SECONDS)
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
    try:
        raw.sendall(adjacent.start(clock.now()))
        hello = _events_until(raw, adjacent, clock, lambda e: isinstance(e, PeerHello))
        if isinstance(hello, ConnectionClosed):
            raise TransportError(f"Connection handshake failed: {hello.status} ({address})")
        assert isinstance(hello, PeerHello)
        sock = _secure(raw, hello, security, server=False, address=address)
        verdict = _events_until(
            sock, adjacent, clock, lambda e: isinstance(e, LoggedIn | LoginRefused)
        )
        if not isinstance(verdict, LoggedIn):
            status = verdict.status if isinstance(verdict, LoginRefused | ConnectionClosed) else ""
            raise TransportError(f"Connection handshake failed: {status} ({address})")
        sock.settimeout(None)
        return PeerConnection(sock, adjacent, address, clock, _thumbprint(sock))
    except (OSError, TransportError) as exc:
        raw.close()
        if isinstance(exc, TransportError):
            raise
        raise TransportError(f"Connection handshake failed: {exc} ({address})") from None


def accept(
    raw: socket.socket,
    peer_address: str,
    our_instance: uuid.UUID,
    security: EndpointSecurity,
    settings: TransportSettings,
    clock: Clock,
) -> PeerConnection | None:
    """Open an accepted connection: HELLO, TLS with the peer's certificate required and
    verified against the certificates granted CONNECT, then LOGIN. A refused peer gets
    nothing but the refusal; the refusal is logged as SQL Server's Audit Broker Login event
    (None is returned)."""
    raw.settimeout(HANDSHAKE_SECONDS)
    adjacent = AdjacentConnection(
        our_instance,
        is_accept=True,
        encryption=security.encryption,
        settings=settings,
        now=clock.now(),
        peer_name=peer_address,
    )
    try:
        hello = _events_until(raw, adjacent, clock, lambda e: isinstance(e, PeerHello))
        if not isinstance(hello, PeerHello):
            raise TransportError(getattr(hello, "status", "no HELLO"))
        raw.sendall(adjacent.start(clock.now()))
        if hello.encrypt is None:
            raw.sendall(adjacent.login(False, "", clock.now()))
            raise TransportError(adjacent.closed_status or "ENCRYPTION mismatch")
        sock = _secure(raw, hello, security, server=True, address=peer_address)
        sock.sendall(adjacent.login(True, "", clock.now()))
        sock.settimeout(None)
        return PeerConnection(sock, adjacent, peer_address, clock, _thumbprint(sock))
    except (OSError, TransportError) as exc:
        log.warning(
            "Audit Broker Login: login failed for a connection from %s: %s", peer_address, exc
        )
        raw.close()
        return None


def _secure(
    raw: socket.socket, hello: PeerHello, security: EndpointSecurity, *, server: bool, address: str
) -> socket.socket:
    """The TLS handshake over ``raw`` after the HELLOs (SEC-1)."""
    if hello.encrypt is None:
        raise TransportError(
            f"Connection handshake failed: this endpoint's ENCRYPTION is {security.encryption} "
            f"and the peer's is {hello.hello.encryption} ({address})"
        )
    if not hello.encrypt:
        raise TransportError(
            "Connection handshake failed: ENCRYPTION DISABLED on both endpoints is not supported "
            f"by this version; set SUPPORTED or REQUIRED ({address})"
        )
    ctx = security.server if server else security.client
    try:
        return ctx.wrap_socket(raw, server_side=server)
    except ssl.SSLError as exc:
        raise TransportError(
            f"Connection handshake failed: the certificate exchange failed: "
            f"{exc.reason or exc} ({address})"
        ) from None


def _thumbprint(sock: socket.socket) -> str | None:
    return peer_thumbprint(sock) if isinstance(sock, ssl.SSLSocket) else None
