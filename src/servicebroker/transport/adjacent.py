"""The adjacent broker protocol (NET-1, NET-8, SEC-1): one connection between two broker
instances, sans I/O — bytes and ``now`` in, events and bytes out, as h11 does for HTTP.

Both sides :meth:`~AdjacentConnection.start` by sending a HELLO (service_broker_guid, protocol
version, ENCRYPTION setting). The accepting side's shell checks the TLS peer and its CONNECT grant
and calls :meth:`~AdjacentConnection.login`; a peer whose ENCRYPTION cannot be matched (REQUIRED
against DISABLED, SEC-1) is refused whatever the shell says. The connecting side gets
:class:`LoggedIn` or :class:`LoginRefused`. Once LOGGED_IN, MESSAGE frames carry fragments with
acknowledgements riding along (NET-3); a dedicated ACK frame goes only when acks are still pending
(:meth:`~AdjacentConnection.flush_acks`). A bad frame of any kind closes the connection with a
:class:`ConnectionClosed` event saying why; :meth:`~AdjacentConnection.receive_data` never
raises.

States (sys.dm_broker_connections): NEW → CONNECTING (HELLO sent) → CONNECTED (the peer's HELLO
received) → LOGGED_IN → CLOSED.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from ..errors import FramingError, TransportError
from .framing import Frame, FrameDecoder, FrameType, encode_frame
from .settings import TransportSettings
from .wire import (
    ENCRYPTION_SETTINGS,
    PROTOCOL_VERSION,
    Ack,
    Close,
    Fragment,
    Hello,
    Login,
    Refusal,
    decode_acks,
    decode_close,
    decode_fragment,
    decode_hello,
    decode_login,
    decode_refusal,
    encode_acks,
    encode_close,
    encode_fragment,
    encode_hello,
    encode_login,
    encode_refusal,
)

__all__ = [
    "ENCRYPTION_SETTINGS",
    "AckReceived",
    "AdjacentConnection",
    "ConnectionClosed",
    "ConnectionState",
    "ConnectionStatistics",
    "Event",
    "FragmentReceived",
    "LoggedIn",
    "LoginRefused",
    "LoginState",
    "PeerHello",
    "RefusalReceived",
    "encryption_algorithm",
    "negotiate_encryption",
]


class ConnectionState(enum.IntEnum):
    """``state`` / ``state_desc`` of sys.dm_broker_connections (NET-8)."""

    NEW = 1
    CONNECTING = 2
    CONNECTED = 3
    LOGGED_IN = 4
    CLOSED = 5


class LoginState(enum.IntEnum):
    """``login_state`` of sys.dm_broker_connections; :attr:`desc` is ``login_state_desc``.
    This protocol passes through INITIAL, WAIT_LOGIN_NEGOTIATE (HELLO sent),
    WAIT_VALIDATION (HELLOs exchanged, the login decision awaited), ONLINE and ERROR."""

    INITIAL = 0
    WAIT_LOGIN_NEGOTIATE = 1
    ONE_ISC = 2
    ONE_ASC = 3
    TWO_ISC = 4
    TWO_ASC = 5
    WAIT_ISC_CONFIRM = 6
    WAIT_ASC_CONFIRM = 7
    WAIT_REJECT = 8
    WAIT_PRE_MASTER_SECRET = 9
    WAIT_VALIDATION = 10
    WAIT_ARBITRATION = 11
    ONLINE = 12
    ERROR = 13

    @property
    def desc(self) -> str:
        """The login_state_desc text of sys.dm_broker_connections."""
        return _LOGIN_DESC[self]


# sys.dm_broker_connections (docs/relational-databases/system-dynamic-management-views/
# sys-dm-broker-connections-transact-sql.md): login_state_desc
_LOGIN_DESC = {
    LoginState.INITIAL: "Connection handshake is initializing.",
    LoginState.WAIT_LOGIN_NEGOTIATE: "Connection handshake is waiting for Login Negotiate message.",
    LoginState.ONE_ISC: "Connection handshake has initialized and sent security context for "
    "authentication.",
    LoginState.ONE_ASC: "Connection handshake has received and accepted security context for "
    "authentication.",
    LoginState.TWO_ISC: "Connection handshake has initialized and sent security context for "
    "authentication. There is an optional mechanism available for authenticating the peers.",
    LoginState.TWO_ASC: "Connection handshake has received and sent accepted security context "
    "for authentication. There is an optional mechanism available for authenticating the peers.",
    LoginState.WAIT_ISC_CONFIRM: "Connection handshake is waiting for Initialize Security "
    "Context Confirmation message.",
    LoginState.WAIT_ASC_CONFIRM: "Connection handshake is waiting for Accept Security Context "
    "Confirmation message.",
    LoginState.WAIT_REJECT: "Connection handshake is waiting for SSPI rejection message for "
    "failed authentication.",
    LoginState.WAIT_PRE_MASTER_SECRET: "Connection handshake is waiting for Pre-Master Secret "
    "message.",
    LoginState.WAIT_VALIDATION: "Connection handshake is waiting for Validation message.",
    LoginState.WAIT_ARBITRATION: "Connection handshake is waiting for Arbitration message.",
    LoginState.ONLINE: "Connection handshake is complete and is online (ready) for message "
    "exchange.",
    LoginState.ERROR: "Connection is in error.",
}


def negotiate_encryption(ours: str, theirs: str) -> bool | None:
    """SEC-1's ENCRYPTION matrix: True (encrypt), False (plain) or None (refuse the login).

    As CREATE ENDPOINT defines ENCRYPTION (https://learn.microsoft.com/en-us/sql/t-sql/
    statements/create-endpoint-transact-sql): DISABLED with DISABLED or SUPPORTED is plain;
    SUPPORTED or REQUIRED on both sides is encrypted; REQUIRED against DISABLED is refused.
    The decision is the same on both sides (it is symmetric). A plain connection is still
    authenticated by both certificates and integrity-protected (the shell's TLS with a NULL
    cipher, :mod:`.tls`); it is only not encrypted.

    Raises:
        TransportError: either value is not DISABLED, SUPPORTED or REQUIRED.
    """
    for side, value in (("ours", ours), ("theirs", theirs)):
        if value not in ENCRYPTION_SETTINGS:
            raise TransportError(
                f"ENCRYPTION ({side}) must be DISABLED, SUPPORTED or REQUIRED, got {value!r}"
            )
    if "DISABLED" in (ours, theirs):
        return None if "REQUIRED" in (ours, theirs) else False
    return True


def encryption_algorithm(encrypted: bool | None) -> tuple[int, str]:
    """``encryption_algorithm`` and ``encryption_algorithm_desc`` of sys.dm_broker_connections
    for a connection the ENCRYPTION matrix made ``encrypted`` (None: not decided yet):
    (3, "AES") encrypted (TLS with AES-GCM); (1, "NONE") not encrypted — the value 1 is
    "SIGNING ONLY" (every record still carries its HMAC) and the text is the desc of DISABLED;
    (0, "NONE") before the HELLOs.
    https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/
    sys-dm-broker-connections-transact-sql"""
    if encrypted is None:
        return 0, "NONE"
    return (3, "AES") if encrypted else (1, "NONE")


@dataclass(frozen=True, slots=True)
class PeerHello:
    """The peer's HELLO arrived; ``encrypt`` is the negotiated outcome (None: refused)."""

    hello: Hello
    encrypt: bool | None


@dataclass(frozen=True, slots=True)
class LoggedIn:
    """The accepting side accepted this (connecting) side's login: LOGGED_IN."""


@dataclass(frozen=True, slots=True)
class LoginRefused:
    """The accepting side refused the login; ``status`` says why (for transmission_status)."""

    status: str


@dataclass(frozen=True, slots=True)
class FragmentReceived:
    """A MESSAGE frame's fragment (its piggybacked acks come as :class:`AckReceived` first)."""

    fragment: Fragment


@dataclass(frozen=True, slots=True)
class AckReceived:
    """An acknowledgement, dedicated or piggybacked (NET-3)."""

    ack: Ack


@dataclass(frozen=True, slots=True)
class RefusalReceived:
    """The peer cannot take a message now (NET-7)."""

    refusal: Refusal


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The connection is closed (by the peer, by a bad frame, or at its end); ``status`` says
    why. Nothing more comes from it."""

    status: str


Event = (
    PeerHello
    | LoggedIn
    | LoginRefused
    | FragmentReceived
    | AckReceived
    | RefusalReceived
    | ConnectionClosed
)
"""What :meth:`AdjacentConnection.receive_data` returns."""


@dataclass(frozen=True, slots=True)
class ConnectionStatistics:
    """One row of dm_broker_connections' counters (times are broker-clock seconds or None)."""

    state: ConnectionState
    login_state: LoginState
    is_accept: bool
    peer_instance: uuid.UUID | None
    encrypted: bool | None
    connect_time: float
    login_time: float | None
    last_activity_time: float
    total_bytes_sent: int
    total_bytes_received: int
    total_fragments_sent: int
    total_fragments_received: int
    total_sends: int
    total_receives: int
    closed_status: str | None
    bad_frames: int = 0

    @property
    def state_desc(self) -> str:
        """NEW, CONNECTING, CONNECTED, LOGGED_IN or CLOSED."""
        return self.state.name

    @property
    def login_state_desc(self) -> str:
        """The login_state_desc text."""
        return self.login_state.desc

    @property
    def encryption_algorithm(self) -> int:
        """0 before the HELLOs, 1 signing only (not encrypted), 3 AES (:func:`encryption_algorithm`)."""
        return encryption_algorithm(self.encrypted)[0]

    @property
    def encryption_algorithm_desc(self) -> str:
        """ "AES" encrypted, "NONE" not (:func:`encryption_algorithm`)."""
        return encryption_algorithm(self.encrypted)[1]


class AdjacentConnection:
    """One connection's protocol state (NET-8), for either side.

    Args:
        our_instance: this broker's service_broker_guid.
        is_accept: True on the side that accepted the connection (it decides the login).
        encryption: this endpoint's ENCRYPTION: DISABLED, SUPPORTED or REQUIRED (SEC-1).
        settings: a :class:`TransportSettings` (frame limit, idle_after, handshake_timeout).
        now: broker-clock seconds, the connect_time.
        peer_name: a name for this side in HELLO (logs), e.g. the endpoint's address.

    Raises:
        TransportError: ``encryption`` is not one of the three values.
    """

    def __init__(
        self,
        our_instance: uuid.UUID,
        *,
        is_accept: bool,
        encryption: str,
        settings: TransportSettings | None = None,
        now: float,
        peer_name: str = "",
    ) -> None:
        if encryption not in ENCRYPTION_SETTINGS:
            raise TransportError(
                f"ENCRYPTION must be DISABLED, SUPPORTED or REQUIRED, got {encryption!r}"
            )
        self.our_instance = our_instance
        self.is_accept = is_accept
        self.encryption = encryption
        self.settings = settings or TransportSettings()
        self.peer_name = peer_name
        self.state = ConnectionState.NEW
        self.login_state = LoginState.INITIAL
        self.peer_hello: Hello | None = None
        self.encrypted: bool | None = None
        self.closed_status: str | None = None
        self.connect_time = now
        self.login_time: float | None = None
        self.last_activity_time = now
        self.total_bytes_sent = 0
        self.total_bytes_received = 0
        self.total_fragments_sent = 0
        self.total_fragments_received = 0
        self.total_sends = 0
        self.total_receives = 0
        self.bad_frames = 0
        """Frames refused (bad magic, type, length, checksum, payload), NET-6; at most one
        per connection, since the first closes it."""
        self._decoder = FrameDecoder(max_payload=self.settings.max_payload)
        self._acks: dict[Ack, None] = {}
        self._hello_sent = False
        self._was_logged_in = False
        self._said_goodbye = False

    @property
    def peer_instance(self) -> uuid.UUID | None:
        """The peer's service_broker_guid, once its HELLO arrived."""
        return None if self.peer_hello is None else self.peer_hello.broker_instance

    @property
    def pending_acks(self) -> int:
        """Acknowledgements queued and not yet sent."""
        return len(self._acks)

    def _out(self, frames: list[Frame], now: float) -> bytes:
        data = b"".join(encode_frame(f, max_payload=self.settings.max_payload) for f in frames)
        if data:
            self.total_sends += 1
            self.total_bytes_sent += len(data)
            self.last_activity_time = now
        return data

    def start(self, now: float) -> bytes:
        """Open the connection: this side's HELLO (bytes to send). NEW → CONNECTING.

        Raises:
            TransportError: the connection was started before.
        """
        if self._hello_sent or self.state is ConnectionState.CLOSED:
            raise TransportError(f"connection is {self.state.name}, it cannot start again")
        self._hello_sent = True
        if self.state is ConnectionState.NEW:
            self.state = ConnectionState.CONNECTING
            self.login_state = LoginState.WAIT_LOGIN_NEGOTIATE
        hello = Hello(self.our_instance, PROTOCOL_VERSION, self.encryption, self.peer_name)
        return self._out([Frame(FrameType.HELLO, encode_hello(hello))], now)

    def login(self, accepted: bool, status: str, now: float) -> bytes:
        """The accepting side's verdict, after TLS and the CONNECT grant check (SEC-1): the
        LOGIN frame to send (and a CLOSE after a refusal). A peer whose ENCRYPTION does not
        match ours is refused whatever ``accepted`` says, with a status saying so.

        Raises:
            TransportError: this is the connecting side, or the peer's HELLO has not come.
        """
        if not self.is_accept:
            raise TransportError("only the accepting side of a connection decides its login")
        if self.state is not ConnectionState.CONNECTED:
            raise TransportError(
                f"connection is {self.state.name}: login needs the peer's HELLO first"
            )
        if accepted and self.encrypted is None:
            accepted, status = False, self.encryption_refusal()
        if accepted:
            self.state = ConnectionState.LOGGED_IN
            self.login_state = LoginState.ONLINE
            self.login_time = now
            return self._out([Frame(FrameType.LOGIN, encode_login(Login(True, status)))], now)
        data = self._out(
            [
                Frame(FrameType.LOGIN, encode_login(Login(False, status))),
                Frame(FrameType.CLOSE, encode_close(Close(status))),
            ],
            now,
        )
        self._closed(status, error=True)
        return data

    def encryption_refusal(self) -> str:
        """The status of a login the ENCRYPTION matrix refuses (SEC-1), from this side's view:
        "Connection handshake failed. There is no compatible encryption: this endpoint's
        ENCRYPTION is … and the peer's is …"."""
        theirs = self.peer_hello.encryption if self.peer_hello is not None else "?"
        return (
            f"Connection handshake failed. There is no compatible encryption: this endpoint's "
            f"ENCRYPTION is {self.encryption} and the peer's is {theirs} (REQUIRED and DISABLED "
            f"cannot talk, SEC-1)"
        )

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        """Take ``data`` the peer sent (any piece of the stream) at ``now``; the events it
        completes. A bad frame or a frame out of place closes the connection: the last event
        is then :class:`ConnectionClosed` with the reason. Never raises; after CLOSED, []."""
        if self.state is ConnectionState.CLOSED:
            return []
        self.total_receives += 1
        self.total_bytes_received += len(data)
        self.last_activity_time = now
        events: list[Event] = []
        try:
            for frame in self._decoder.feed(data):
                self._on_frame(frame, now, events)
                if self.closed_status is not None:
                    break
        except (FramingError, TransportError) as error:
            if isinstance(error, FramingError):
                self.bad_frames += 1  # NET-6: counted (Broker:Corrupted Message)
            events.append(self._closed(str(error), error=True))
        return events

    def receive_eof(self, now: float) -> list[Event]:
        """The peer's stream ended: [:class:`ConnectionClosed`] (saying whether a frame was cut
        off), or [] if already closed."""
        if self.state is ConnectionState.CLOSED:
            return []
        try:
            self._decoder.eof()
        except FramingError as error:
            return [self._closed(str(error), error=True)]
        return [self._closed("the peer closed the connection", error=False)]

    def _on_frame(self, frame: Frame, now: float, events: list[Event]) -> None:
        kind = frame.type
        if kind is FrameType.HELLO:
            if self.peer_hello is not None:
                raise TransportError("the peer sent a second HELLO")
            hello = decode_hello(frame.payload)
            if hello.protocol_version != PROTOCOL_VERSION:
                raise TransportError(
                    f"the peer speaks protocol version {hello.protocol_version}, "
                    f"not {PROTOCOL_VERSION}"
                )
            self.peer_hello = hello
            self.encrypted = negotiate_encryption(self.encryption, hello.encryption)
            if self.state in (ConnectionState.NEW, ConnectionState.CONNECTING):
                self.state = ConnectionState.CONNECTED
                self.login_state = LoginState.WAIT_VALIDATION
            events.append(PeerHello(hello, self.encrypted))
        elif kind is FrameType.LOGIN:
            if (
                self.is_accept
                or self.peer_hello is None
                or self.state is not ConnectionState.CONNECTED
            ):
                raise TransportError(
                    f"a LOGIN frame came out of place (connection {self.state.name})"
                )
            login = decode_login(frame.payload)
            if login.accepted:
                self.state = ConnectionState.LOGGED_IN
                self.login_state = LoginState.ONLINE
                self.login_time = now
                events.append(LoggedIn())
            else:
                events.append(LoginRefused(login.status))
                events.append(self._closed(login.status, error=True))
        elif kind is FrameType.CLOSE:
            events.append(self._closed(decode_close(frame.payload).status, error=False))
        elif kind is FrameType.PING:
            return
        else:
            if self.state is not ConnectionState.LOGGED_IN:
                raise TransportError(
                    f"a {kind.name} frame came before the login (connection {self.state.name})"
                )
            if kind is FrameType.MESSAGE:
                fragment = decode_fragment(frame.payload)
                self.total_fragments_received += 1
                events.extend(AckReceived(a) for a in fragment.acks)
                events.append(FragmentReceived(fragment))
            elif kind is FrameType.ACK:
                events.extend(AckReceived(a) for a in decode_acks(frame.payload))
            elif kind is FrameType.REFUSAL:
                events.append(RefusalReceived(decode_refusal(frame.payload)))

    def _closed(self, status: str, *, error: bool) -> ConnectionClosed:
        self._was_logged_in = self.state is ConnectionState.LOGGED_IN
        self.state = ConnectionState.CLOSED
        if error or self.login_state is not LoginState.ONLINE:
            self.login_state = LoginState.ERROR
        self.closed_status = status
        return ConnectionClosed(status)

    def _check_logged_in(self, what: str) -> None:
        if self.state is not ConnectionState.LOGGED_IN:
            raise TransportError(f"cannot send {what}: connection is {self.state.name}")

    def queue_ack(self, ack: Ack) -> None:
        """Keep ``ack`` to ride on the next fragment sent (or :meth:`flush_acks`), NET-3."""
        self._acks[ack] = None

    def _take_acks(self) -> tuple[Ack, ...]:
        taken: list[Ack] = []
        for ack in self._acks:
            if len(taken) >= self.settings.acks_per_frame:
                break
            taken.append(ack)
        for ack in taken:
            del self._acks[ack]
        return tuple(taken)

    def send_fragment(self, fragment: Fragment, now: float) -> bytes:
        """The MESSAGE frame of ``fragment`` with the pending acks riding along (NET-3).

        Raises:
            TransportError: the connection is not LOGGED_IN.
            FramingError: the fragment does not fit a frame or a field is not right.
        """
        self._check_logged_in("a fragment")
        acks = self._take_acks()
        payload = encode_fragment(Fragment(fragment.header, fragment.index, fragment.data, acks))
        self.total_fragments_sent += 1
        return self._out([Frame(FrameType.MESSAGE, payload)], now)

    def _ack_frames(self) -> list[Frame]:
        """Dedicated ACK frames for every pending ack, ``acks_per_frame`` to a frame."""
        frames = []
        while self._acks:
            frames.append(Frame(FrameType.ACK, encode_acks(self._take_acks())))
        return frames

    def flush_acks(self, now: float) -> bytes:
        """Dedicated ACK frames for the acks still pending (b"" when none: acks ride on
        return traffic where there is some, NET-3).

        Raises:
            TransportError: the connection is not LOGGED_IN.
        """
        if not self._acks:
            return b""
        self._check_logged_in("acknowledgements")
        return self._out(self._ack_frames(), now)

    def send_refusal(self, refusal: Refusal, now: float) -> bytes:
        """The REFUSAL frame of ``refusal`` (NET-7). Raises TransportError unless LOGGED_IN."""
        self._check_logged_in("a refusal")
        return self._out([Frame(FrameType.REFUSAL, encode_refusal(refusal))], now)

    def ping(self, now: float) -> bytes:
        """A PING frame (keeps the peer's idle clock from running out)."""
        self._check_logged_in("a ping")
        return self._out([Frame(FrameType.PING, b"")], now)

    def close(self, status: str, now: float) -> bytes:
        """Close the connection saying ``status``: the CLOSE frame (b"" if already closed or
        never started). → CLOSED."""
        if self.state is ConnectionState.CLOSED:
            return b""
        started = self._hello_sent
        self._closed(status, error=False)
        self._said_goodbye = True
        if not started:
            return b""
        return self._out([Frame(FrameType.CLOSE, encode_close(Close(status)))], now)

    def goodbye(self, now: float) -> bytes:
        """After this side closed on something the peer sent (a bad frame, its end of
        stream): the last bytes to send before the socket closes — dedicated ACK frames for
        the acks still pending (messages committed here, which the peer need not send again,
        NET-3) and a CLOSE frame with the reason. Our direction of the stream is still sound.
        b"" if the connection is open, was never logged in, or said goodbye already."""
        if (
            self.state is not ConnectionState.CLOSED
            or not self._was_logged_in
            or self._said_goodbye
        ):
            return b""
        self._said_goodbye = True
        frames = self._ack_frames()
        frames.append(Frame(FrameType.CLOSE, encode_close(Close(self.closed_status or ""))))
        return self._out(frames, now)

    def is_idle(self, now: float) -> bool:
        """True when nothing was sent or received for ``idle_after`` seconds (TICK-4a)."""
        return now - self.last_activity_time >= self.settings.idle_after

    def handshake_expired(self, now: float) -> bool:
        """True when the connection is not LOGGED_IN ``handshake_timeout`` seconds after its
        connect_time (the shell closes it and counts a failed attempt, TICK-3a)."""
        return (
            self.state not in (ConnectionState.LOGGED_IN, ConnectionState.CLOSED)
            and now - self.connect_time >= self.settings.handshake_timeout
        )

    def statistics(self) -> ConnectionStatistics:
        """The connection's row for dm_broker_connections (:class:`ConnectionStatistics`)."""
        return ConnectionStatistics(
            self.state,
            self.login_state,
            self.is_accept,
            self.peer_instance,
            self.encrypted,
            self.connect_time,
            self.login_time,
            self.last_activity_time,
            self.total_bytes_sent,
            self.total_bytes_received,
            self.total_fragments_sent,
            self.total_fragments_received,
            self.total_sends,
            self.total_receives,
            self.closed_status,
            self.bad_frames,
        )
