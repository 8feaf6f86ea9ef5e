"""The payloads of the adjacent broker protocol's frames (NET-1..NET-8): what a HELLO, LOGIN,
MESSAGE, ACK, REFUSAL, PING and CLOSE frame carries, with ``encode_*`` / ``decode_*`` for each.

Microsoft publishes no wire format; this one is ours (docs/transport.md). Numbers are
big-endian; a string is a 2-byte length and that many bytes of UTF-8; a body piece is a 4-byte
length and its bytes; an optional number is a 1-byte flag and the number. Decoding a payload that
is not right (too short, bytes left over, a string that is not UTF-8, a value out of range)
raises :class:`~servicebroker.errors.FramingError` naming the field at fault.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from ..errors import FramingError

__all__ = [
    "DEFAULT_HOPS",
    "ENCRYPTION_SETTINGS",
    "PROTOCOL_VERSION",
    "Ack",
    "Close",
    "Fragment",
    "Hello",
    "Login",
    "MessageHeader",
    "Refusal",
    "decode_acks",
    "decode_close",
    "decode_fragment",
    "decode_hello",
    "decode_login",
    "decode_refusal",
    "encode_acks",
    "encode_close",
    "encode_fragment",
    "encode_hello",
    "encode_login",
    "encode_refusal",
]

ENCRYPTION_SETTINGS = ("DISABLED", "SUPPORTED", "REQUIRED")
"""The ENCRYPTION settings of a Service Broker endpoint (CREATE ENDPOINT, SEC-1), as HELLO
carries them."""

PROTOCOL_VERSION = 1
"""The version of the adjacent broker and dialog protocols HELLO announces."""
DEFAULT_HOPS = 32
"""Hops a message may take through forwarders (FWD-3) unless told otherwise."""

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_ACK = struct.Struct(">16sBqq")


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """The dialog protocol's header of one message, carried by each of its fragments.

    Attributes:
        conversation_id: the conversation's id (16 bytes), the same at both ends.
        is_initiator: True when the SENDER of this message is the initiator's side.
        sequence: the message_sequence_number the sender gave it (NET-2); -1 for an
            unsequenced message the broker makes (an Error, NET-2).
        message_id: the message's id (16 bytes).
        from_service, to_service, contract, message_type: names, byte for byte.
        validation: the sender's validation of the message type ("N", "X", "E" …).
        from_broker_instance: the sending broker's service_broker_guid.
        to_broker_instance: the target broker's service_broker_guid, or None before known.
        priority: the conversation's priority, 1..10.
        lifetime: the dialog's expiry (broker-clock seconds) or None.
        message_size: body bytes; fragment_count: fragments of the body (at least 1).
        time_to_live: seconds a forwarder may still hold it (FWD-3) or None.
        hops_remaining: forwarders it may still pass (FWD-3), default 32.
        encrypted: whether the body is sealed by dialog security (SEC-2).
        security: the dialog security header (:mod:`.dialog_security`) the first secured
            message each way carries (the wrapped session key, the signature); b"" on others
            (their sealed body names the key by the dialog).
    """

    conversation_id: bytes
    is_initiator: bool
    sequence: int
    message_id: bytes
    from_service: str
    to_service: str
    contract: str
    message_type: str
    validation: str
    from_broker_instance: uuid.UUID
    to_broker_instance: uuid.UUID | None
    priority: int
    lifetime: float | None
    message_size: int
    fragment_count: int
    time_to_live: float | None = None
    hops_remaining: int = DEFAULT_HOPS
    encrypted: bool = False
    security: bytes = b""


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledgement (NET-3) of message ``sequence`` sent by side ``is_initiator`` of
    ``conversation_id``: ``fragment=None`` means the message is committed at the receiver
    (durable: the sender deletes it); an int means that fragment is held (good only while
    the connection lives, NET-5). ``by`` is the broker instance that made the acknowledgement
    (the final destination, which a forwarder passes it on from unchanged): the initiator pins
    its dialog to it (RTE-4); None: the peer that sent it."""

    conversation_id: bytes
    is_initiator: bool
    sequence: int
    fragment: int | None = None
    by: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Fragment:
    """Fragment ``index`` (from 0) of the message ``header`` describes, its ``data`` bytes,
    and the acknowledgements that ride along (NET-3)."""

    header: MessageHeader
    index: int
    data: bytes
    acks: tuple[Ack, ...] = ()


@dataclass(frozen=True, slots=True)
class Refusal:
    """The receiver cannot take message ``sequence`` of side ``is_initiator`` now (NET-7);
    ``status`` is what the sender shows as its transmission_status."""

    conversation_id: bytes
    is_initiator: bool
    sequence: int
    status: str


@dataclass(frozen=True, slots=True)
class Hello:
    """A connection's opening (NET-8): the sender's service_broker_guid, protocol version,
    ENCRYPTION setting (DISABLED, SUPPORTED or REQUIRED, SEC-1) and a name for logs."""

    broker_instance: uuid.UUID
    protocol_version: int
    encryption: str
    peer_name: str


@dataclass(frozen=True, slots=True)
class Login:
    """The accepting side's verdict on a connection (NET-8, SEC-1)."""

    accepted: bool
    status: str


@dataclass(frozen=True, slots=True)
class Close:
    """The sender closes the connection, saying why."""

    status: str


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> None:
        self.parts.append(_U8.pack(v))

    def string(self, field: str, s: str) -> None:
        data = s.encode("utf-8")
        if len(data) > 0xFFFF:
            raise FramingError(f"{field} is {len(data)} bytes of UTF-8, beyond 65535")
        self.parts.append(_U16.pack(len(data)) + data)

    def guid(self, field: str, v: bytes) -> None:
        if len(v) != 16:
            raise FramingError(f"{field} must be 16 bytes, got {len(v)}")
        self.parts.append(bytes(v))

    def opt_float(self, v: float | None) -> None:
        self.parts.append(b"\0" if v is None else b"\1" + _F64.pack(v))

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, what: str, data: bytes) -> None:
        self.what = what
        self.data = memoryview(data)
        self.pos = 0

    def take(self, field: str, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise FramingError(
                f"{self.what} payload ends inside {field} ({len(self.data)} bytes, "
                f"{field} needs {n} at offset {self.pos})"
            )
        out = bytes(self.data[self.pos : end])
        self.pos = end
        return out

    def unpack(self, field: str, fmt: struct.Struct) -> int:
        value: int = fmt.unpack(self.take(field, fmt.size))[0]
        return value

    def flag(self, field: str) -> bool:
        v = self.unpack(field, _U8)
        if v > 1:
            raise FramingError(f"{self.what} field {field} must be 0 or 1, got {v}")
        return v == 1

    def string(self, field: str) -> str:
        raw = self.take(field, self.unpack(field, _U16))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FramingError(f"{self.what} field {field} is not UTF-8: {raw[:40]!r}") from None

    def opt_float(self, field: str) -> float | None:
        if not self.flag(field):
            return None
        value: float = _F64.unpack(self.take(field, 8))[0]
        return value

    def end(self) -> None:
        if self.pos != len(self.data):
            raise FramingError(
                f"{self.what} payload has {len(self.data) - self.pos} bytes beyond its last field"
            )


def _write_header(w: _Writer, h: MessageHeader) -> None:
    w.guid("conversation_id", h.conversation_id)
    w.u8(bool(h.is_initiator))
    w.parts.append(_I64.pack(h.sequence))
    w.guid("message_id", h.message_id)
    for field in ("from_service", "to_service", "contract", "message_type", "validation"):
        w.string(field, getattr(h, field))
    w.parts.append(h.from_broker_instance.bytes)
    if h.to_broker_instance is None:
        w.u8(0)
    else:
        w.parts.append(b"\1" + h.to_broker_instance.bytes)
    w.u8(h.priority)
    w.opt_float(h.lifetime)
    w.parts.append(_U64.pack(h.message_size) + _U32.pack(h.fragment_count))
    w.opt_float(h.time_to_live)
    w.parts.append(_U16.pack(h.hops_remaining))
    w.u8(bool(h.encrypted))
    if len(h.security) > 0xFFFF:
        raise FramingError(f"security header is {len(h.security)} bytes, beyond 65535")
    w.parts.append(_U16.pack(len(h.security)) + h.security)


def _read_header(r: _Reader) -> MessageHeader:
    conversation_id = r.take("conversation_id", 16)
    is_initiator = r.flag("is_initiator")
    sequence = r.unpack("sequence", _I64)
    if sequence < -1:
        raise FramingError(f"{r.what} field sequence must be -1 or more, got {sequence}")
    message_id = r.take("message_id", 16)
    from_service = r.string("from_service")
    to_service = r.string("to_service")
    contract = r.string("contract")
    message_type = r.string("message_type")
    validation = r.string("validation")
    from_instance = uuid.UUID(bytes=r.take("from_broker_instance", 16))
    to_instance = (
        uuid.UUID(bytes=r.take("to_broker_instance", 16)) if r.flag("to_broker_instance") else None
    )
    priority = r.unpack("priority", _U8)
    if not 1 <= priority <= 10:
        raise FramingError(f"{r.what} field priority must be 1..10, got {priority}")
    lifetime = r.opt_float("lifetime")
    message_size = r.unpack("message_size", _U64)
    fragment_count = r.unpack("fragment_count", _U32)
    if fragment_count < 1:
        raise FramingError(f"{r.what} field fragment_count must be 1 or more, got 0")
    time_to_live = r.opt_float("time_to_live")
    hops = r.unpack("hops_remaining", _U16)
    encrypted = r.flag("encrypted")
    security = r.take("security", r.unpack("security length", _U16))
    return MessageHeader(
        conversation_id,
        is_initiator,
        sequence,
        message_id,
        from_service,
        to_service,
        contract,
        message_type,
        validation,
        from_instance,
        to_instance,
        priority,
        lifetime,
        message_size,
        fragment_count,
        time_to_live,
        hops,
        encrypted,
        security,
    )


def _write_acks(w: _Writer, acks: tuple[Ack, ...] | list[Ack]) -> None:
    if len(acks) > 0xFFFF:
        raise FramingError(f"{len(acks)} acks in one frame, beyond 65535")
    w.parts.append(_U16.pack(len(acks)))
    for a in acks:
        if len(a.conversation_id) != 16:
            raise FramingError(
                f"ack conversation_id must be 16 bytes, got {len(a.conversation_id)}"
            )
        fragment = -1 if a.fragment is None else a.fragment
        w.parts.append(_ACK.pack(a.conversation_id, bool(a.is_initiator), a.sequence, fragment))
        w.parts.append(b"\0" if a.by is None else b"\1" + a.by.bytes)


def _read_acks(r: _Reader) -> tuple[Ack, ...]:
    count = r.unpack("ack count", _U16)
    acks = []
    for i in range(count):
        conv, side, seq, fragment = _ACK.unpack(r.take(f"ack {i}", _ACK.size))
        if side > 1 or fragment < -1 or seq < -1:
            raise FramingError(
                f"{r.what} ack {i} is not right (is_initiator {side}, sequence {seq}, "
                f"fragment {fragment})"
            )
        by = uuid.UUID(bytes=r.take(f"ack {i} by", 16)) if r.flag(f"ack {i} by") else None
        acks.append(Ack(conv, side == 1, seq, None if fragment == -1 else fragment, by))
    return tuple(acks)


def encode_fragment(fragment: Fragment) -> bytes:
    """The payload of a MESSAGE frame: header, fragment index, data, piggybacked acks.

    Raises:
        FramingError: an id is not 16 bytes, a string beyond 65535 bytes of UTF-8 (naming
            it), or a number out of range (priority beyond 255, a negative size …).
    """
    w = _Writer()
    try:
        _write_header(w, fragment.header)
        w.parts.append(_U32.pack(fragment.index) + _U32.pack(len(fragment.data)))
        w.parts.append(bytes(fragment.data))
        _write_acks(w, fragment.acks)
    except struct.error as error:
        raise FramingError(
            f"message {fragment.header.message_id.hex()} fragment {fragment.index} has a "
            f"number out of range for the wire: {error}"
        ) from None
    return w.done()


def decode_fragment(payload: bytes) -> Fragment:
    """The :class:`Fragment` a MESSAGE frame's payload carries.

    Raises:
        FramingError: the payload is not right, naming the field (module docstring), or the
            index is not below the header's fragment_count.
    """
    r = _Reader("MESSAGE", payload)
    header = _read_header(r)
    index = r.unpack("fragment index", _U32)
    if index >= header.fragment_count:
        raise FramingError(
            f"MESSAGE fragment index {index} is beyond the message's {header.fragment_count} "
            "fragments"
        )
    data = r.take("fragment data", r.unpack("fragment data length", _U32))
    acks = _read_acks(r)
    r.end()
    return Fragment(header, index, data, acks)


def encode_acks(acks: tuple[Ack, ...] | list[Ack]) -> bytes:
    """The payload of a dedicated ACK frame (NET-3): a count and the acks."""
    w = _Writer()
    _write_acks(w, acks)
    return w.done()


def decode_acks(payload: bytes) -> tuple[Ack, ...]:
    """The acks of an ACK frame's payload. Raises FramingError naming the field at fault."""
    r = _Reader("ACK", payload)
    acks = _read_acks(r)
    r.end()
    return acks


def encode_refusal(refusal: Refusal) -> bytes:
    """The payload of a REFUSAL frame (NET-7).

    Raises:
        FramingError: a text field longer than 65,535 bytes in UTF-8 (naming the field).
    """
    w = _Writer()
    w.guid("conversation_id", refusal.conversation_id)
    w.u8(bool(refusal.is_initiator))
    w.parts.append(_I64.pack(refusal.sequence))
    w.string("status", refusal.status)
    return w.done()


def decode_refusal(payload: bytes) -> Refusal:
    """The :class:`Refusal` of a REFUSAL frame. Raises FramingError naming the field at fault."""
    r = _Reader("REFUSAL", payload)
    conv = r.take("conversation_id", 16)
    side = r.flag("is_initiator")
    seq = r.unpack("sequence", _I64)
    status = r.string("status")
    r.end()
    return Refusal(conv, side, seq, status)


def encode_hello(hello: Hello) -> bytes:
    """The payload of a HELLO frame (NET-8).

    Raises:
        FramingError: a text field longer than 65,535 bytes in UTF-8 (naming the field).
    """
    w = _Writer()
    w.parts.append(hello.broker_instance.bytes + _U16.pack(hello.protocol_version))
    w.string("encryption", hello.encryption)
    w.string("peer_name", hello.peer_name)
    return w.done()


def decode_hello(payload: bytes) -> Hello:
    """The :class:`Hello` of a HELLO frame.

    Raises:
        FramingError: the payload is not right, naming the field; encryption is not
            DISABLED, SUPPORTED or REQUIRED.
    """
    r = _Reader("HELLO", payload)
    instance = uuid.UUID(bytes=r.take("broker_instance", 16))
    version = r.unpack("protocol_version", _U16)
    encryption = r.string("encryption")
    if encryption not in ENCRYPTION_SETTINGS:
        raise FramingError(
            f"HELLO field encryption must be DISABLED, SUPPORTED or REQUIRED, got {encryption!r}"
        )
    name = r.string("peer_name")
    r.end()
    return Hello(instance, version, encryption, name)


def encode_login(login: Login) -> bytes:
    """The payload of a LOGIN frame (SEC-1: the acceptor's verdict).

    Raises:
        FramingError: a text field longer than 65,535 bytes in UTF-8 (naming the field).
    """
    w = _Writer()
    w.u8(bool(login.accepted))
    w.string("status", login.status)
    return w.done()


def decode_login(payload: bytes) -> Login:
    """The :class:`Login` of a LOGIN frame. Raises FramingError naming the field at fault."""
    r = _Reader("LOGIN", payload)
    accepted = r.flag("accepted")
    status = r.string("status")
    r.end()
    return Login(accepted, status)


def encode_close(close: Close) -> bytes:
    """The payload of a CLOSE frame (NET-8: why the connection ends).

    Raises:
        FramingError: a text field longer than 65,535 bytes in UTF-8 (naming the field).
    """
    w = _Writer()
    w.string("status", close.status)
    return w.done()


def decode_close(payload: bytes) -> Close:
    """The :class:`Close` of a CLOSE frame. Raises FramingError naming the field at fault."""
    r = _Reader("CLOSE", payload)
    status = r.string("status")
    r.end()
    return Close(status)
