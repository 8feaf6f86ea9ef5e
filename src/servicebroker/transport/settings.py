"""The transport's settings (NET-4, NET-5, TICK-2c, TICK-3a, TICK-4a): every number Microsoft
leaves open, with the default RULES.md gives. One frozen :class:`TransportSettings` is shared by
the outbound, inbound, adjacent-connection and destination state machines."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ..errors import TransportError
from .framing import MAX_PAYLOAD

__all__ = ["TransportSettings"]

_HEADER_ROOM = 64 * 1024
"""Bytes of a MESSAGE frame's payload kept free for the message header and piggybacked acks."""


@dataclass(frozen=True, slots=True)
class TransportSettings:
    """Settings of the transport; seconds are broker-clock seconds, sizes are bytes.

    Attributes:
        fragment_size: body bytes per fragment (NET-5); a body of n bytes travels in
            ``max(1, ceil(n / fragment_size))`` fragments. Default 256 KiB; at most
            ``max_payload`` minus 64 KiB (room for the header and acks).
        fragments_per_block: fragments one message sends before the next message with
            fragments waiting gets its turn (PRI-18: blocks of fragments). Default 4.
        slow_start_fragments: fragments an :class:`~.outbound.Outbound` may have in flight
            at the start of a connection; each acknowledged fragment adds one. Default 2.
        retry_initial: seconds before an unacknowledged message is sent again (NET-4), 4.
        retry_max: the wait doubles after each retry up to this many seconds (NET-4), 64.
        window_bytes: body bytes an :class:`~.outbound.Outbound` should hold at most; the
            caller stops offering beyond it. Default 64 MiB.
        reassembly_bytes: fragment bytes an :class:`~.inbound.Inbound` holds for messages in
            progress; beyond it the oldest message in progress is dropped. Default 256 MiB.
        stale_after: seconds a buffered message or fragment may wait before TICK-2c drops it, 10.
        idle_after: seconds without traffic after which a connection is idle (TICK-4a), 90.
        handshake_timeout: seconds a connection may take from its start to LOGGED_IN, 30
            (``AdjacentConnection.handshake_expired``); on a socket, each wait of the
            opening (connect, HELLO, TLS, LOGIN) fails after that many real seconds — a
            socket cannot wait on the broker clock.
        suppress_after_disconnect: seconds a destination is not connected to again after a
            disconnection (TICK-3a), 15.
        suppress_after_failure: seconds after a failed connection attempt (TICK-3a), 60.
        max_payload: the frame payload limit of a connection (bytes), framing.MAX_PAYLOAD.
        acks_per_frame: acknowledgements at most in one frame (piggybacked or dedicated), 1000.

    Raises:
        TransportError: a setting is not a positive finite number (naming it and its value),
            ``retry_max < retry_initial``, or ``fragment_size`` leaves no header room.
    """

    fragment_size: int = 256 * 1024
    fragments_per_block: int = 4
    slow_start_fragments: int = 2
    retry_initial: float = 4.0
    retry_max: float = 64.0
    window_bytes: int = 64 * 1024 * 1024
    reassembly_bytes: int = 256 * 1024 * 1024
    stale_after: float = 10.0
    idle_after: float = 90.0
    handshake_timeout: float = 30.0
    suppress_after_disconnect: float = 15.0
    suppress_after_failure: float = 60.0
    max_payload: int = MAX_PAYLOAD
    acks_per_frame: int = 1000

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            ok = (
                not isinstance(value, bool)
                and isinstance(value, (int, float))
                and math.isfinite(value)
                and value > 0
            )
            if ok and field.type == "int":
                ok = isinstance(value, int)
            if not ok:
                raise TransportError(
                    f"transport setting {field.name} must be a positive finite "
                    f"{'whole ' if field.type == 'int' else ''}number, got {value!r}"
                )
        if self.retry_max < self.retry_initial:
            raise TransportError(
                f"transport setting retry_max ({self.retry_max}) is below retry_initial "
                f"({self.retry_initial})"
            )
        if self.fragment_size > self.max_payload - _HEADER_ROOM:
            raise TransportError(
                f"transport setting fragment_size ({self.fragment_size} bytes) leaves no room "
                f"for the header in a frame of {self.max_payload} bytes (at most "
                f"{self.max_payload - _HEADER_ROOM})"
            )
