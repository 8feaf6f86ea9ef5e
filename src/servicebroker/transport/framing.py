"""Framing of the adjacent broker protocol (NET-1, NET-6), sans I/O: bytes in, frames out.

Microsoft publishes no wire format for Service Broker; this one is ours. A connection between
two broker instances carries frames, each::

    magic  b"SB"        2 bytes
    version             1 byte   (FRAME_VERSION)
    type                1 byte   (FrameType)
    length              4 bytes  big-endian, the payload's size in bytes
    payload             length bytes
    checksum            4 bytes  big-endian CRC-32 (zlib) of everything before it

:func:`encode_frame` makes one; a :class:`FrameDecoder` takes the bytes of a connection in
whatever pieces the socket gives (:meth:`FrameDecoder.feed`) and returns the whole frames they
complete. A frame that is not right — bad magic, another version, an unknown type, a length
beyond the decoder's limit (refused from the header, before anything is allocated), a checksum
that does not match, or bytes cut off at the end of the connection (:meth:`FrameDecoder.eof`) —
raises :class:`~servicebroker.errors.FramingError` saying which, and the decoder refuses
everything after it: the connection is closed, and what it carried is sent again by the dialog
protocol's retries (NET-4), never delivered half.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass
from typing import NoReturn

from ..errors import FramingError

__all__ = [
    "FRAME_OVERHEAD",
    "FRAME_VERSION",
    "MAGIC",
    "MAX_PAYLOAD",
    "Frame",
    "FrameDecoder",
    "FrameType",
    "encode_frame",
]

MAGIC = b"SB"
FRAME_VERSION = 1
MAX_PAYLOAD = 4 * 1024 * 1024
"""The default limit of a frame's payload (bytes): a message larger than a frame travels in
fragments (NET-5), so a connection never needs more than one frame of memory."""

_HEADER = struct.Struct(">2sBBI")
_CHECKSUM = struct.Struct(">I")
FRAME_OVERHEAD = _HEADER.size + _CHECKSUM.size
"""Bytes a frame adds to its payload (header and checksum): 12."""


class FrameType(enum.IntEnum):
    """What a frame carries; the adjacent broker and dialog protocols give the payloads
    their meaning."""

    HELLO = 1
    """Opening a connection: the sender's broker instance and protocol versions."""
    LOGIN = 2
    """The connection's authentication outcome."""
    MESSAGE = 3
    """A dialog message or one fragment of one (NET-5)."""
    ACK = 4
    """A dedicated acknowledgement (NET-3), when no message goes back to carry it."""
    PING = 5
    """Keeps an idle connection known to be alive."""
    CLOSE = 6
    """The sender closes the connection, saying why."""
    REFUSAL = 7
    """The receiver cannot take a message now (NET-7): the sender keeps it and retries."""


_TYPES = frozenset(t.value for t in FrameType)


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: its ``type`` and ``payload`` (bytes)."""

    type: FrameType
    payload: bytes


def encode_frame(frame: Frame, *, max_payload: int = MAX_PAYLOAD) -> bytes:
    """The bytes of ``frame`` on the wire (module docstring).

    Raises:
        FramingError: the payload is longer than ``max_payload`` bytes, or not bytes, or the
            type is not a :class:`FrameType`.
    """
    if not isinstance(frame.type, FrameType):
        raise FramingError(f"frame type must be a FrameType, got {frame.type!r}")
    if not isinstance(frame.payload, (bytes, bytearray, memoryview)):
        raise FramingError(f"frame payload must be bytes, got {type(frame.payload).__name__}")
    size = len(frame.payload)
    if size > max_payload:
        raise FramingError(
            f"{frame.type.name} frame of {size} bytes is beyond the frame limit of "
            f"{max_payload} bytes (a larger message travels in fragments)"
        )
    head = _HEADER.pack(MAGIC, FRAME_VERSION, frame.type, size)
    checksum = zlib.crc32(frame.payload, zlib.crc32(head))
    return b"".join((head, frame.payload, _CHECKSUM.pack(checksum)))  # the payload copied once


class FrameDecoder:
    """Turns a connection's bytes into frames, as they arrive.

    Args:
        max_payload: the largest payload accepted, in bytes; a header announcing more is
            refused at once (nothing of that size is ever buffered).

    The decoder holds at most one incomplete frame (header, payload and checksum) between
    calls. After a :class:`~servicebroker.errors.FramingError` it is closed: every later call
    raises the same error.
    """

    def __init__(self, *, max_payload: int = MAX_PAYLOAD) -> None:
        if isinstance(max_payload, bool) or not isinstance(max_payload, int) or max_payload < 0:
            raise FramingError(f"max_payload must be a number of bytes >= 0, got {max_payload!r}")
        self._max_payload = max_payload
        self._buffer = bytearray()
        self._failed: FramingError | None = None
        self.frames_decoded = 0
        """Whole frames returned so far."""

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a returned frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """Take the next ``data`` of the connection; return the frames it completes, in order.

        Raises:
            FramingError: a frame is not right (module docstring), or the decoder failed before.
        """
        self._check_open()
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= _HEADER.size:
            magic, version, kind, size = _HEADER.unpack_from(self._buffer)
            if magic != MAGIC:
                self._fail(f"not a servicebroker frame (it begins {bytes(magic)!r}, not {MAGIC!r})")
            if version != FRAME_VERSION:
                self._fail(f"frame version {version} is not spoken here (only {FRAME_VERSION})")
            if kind not in _TYPES:
                self._fail(f"unknown frame type {kind}")
            if size > self._max_payload:
                self._fail(
                    f"{FrameType(kind).name} frame announces {size} bytes, beyond the frame "
                    f"limit of {self._max_payload} bytes"
                )
            end = _HEADER.size + size
            if len(self._buffer) < end + _CHECKSUM.size:
                break
            (checksum,) = _CHECKSUM.unpack_from(self._buffer, end)
            if zlib.crc32(memoryview(self._buffer)[:end]) != checksum:
                self._fail(f"{FrameType(kind).name} frame of {size} bytes fails its checksum")
            payload = bytes(memoryview(self._buffer)[_HEADER.size : end])  # copied once
            frames.append(Frame(FrameType(kind), payload))
            del self._buffer[: end + _CHECKSUM.size]
        self.frames_decoded += len(frames)
        return frames

    def eof(self) -> None:
        """The connection ended: nothing may be left half received.

        Raises:
            FramingError: bytes of an incomplete frame remain, or the decoder failed before.
        """
        self._check_open()
        if self._buffer:
            self._fail(f"the connection ended inside a frame ({len(self._buffer)} bytes of it)")

    def _check_open(self) -> None:
        if self._failed is not None:
            raise self._failed

    def _fail(self, reason: str) -> NoReturn:
        self._failed = FramingError(reason)
        self._buffer.clear()
        raise self._failed
