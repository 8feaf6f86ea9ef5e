"""A seeded, faulty, in-memory link for the transport's tests (NET-4, NET-6): one direction of
a connection, carrying whole frames' bytes with drop, duplicate, reorder, corrupt, delay and
cut-mid-fragment faults on a manual clock.

:meth:`FaultyLink.send` takes the bytes a sans-I/O connection produced (one or more whole
frames, see :mod:`servicebroker.transport.framing`), splits them into frames and decides each
frame's fate with its own ``random.Random(seed)``; :meth:`FaultyLink.deliver` returns the bytes
due at ``now``. Corruption flips one byte after the frame's header (payload or checksum), so it
exercises the CRC-32 (NET-6). A cut delivers the first part of a MESSAGE frame and then ends the
stream (:attr:`FaultyLink.cut` turns True; the receiver sees eof inside a frame).
"""

from __future__ import annotations

import heapq
import random
import struct
from dataclasses import dataclass

from ..errors import TransportError
from ..transport.framing import FRAME_OVERHEAD, FrameType

__all__ = ["FaultyLink", "LinkStatistics"]

_HEADER = struct.Struct(">2sBBI")
_DIALOG_FRAMES = frozenset({FrameType.MESSAGE, FrameType.ACK, FrameType.REFUSAL})


@dataclass(frozen=True, slots=True)
class LinkStatistics:
    """What a :class:`FaultyLink` did to the frames it carried."""

    frames: int
    dropped: int
    duplicated: int
    reordered: int
    corrupted: int
    cuts: int


class FaultyLink:
    """One direction of a connection, in memory, with faults.

    Args:
        seed: the seed of the link's own random.Random (the same seed, the same faults).
        drop, duplicate, reorder, corrupt: probabilities (0..1) per frame.
        cut: probability per MESSAGE frame that the stream ends in its middle.
        delay: seconds every frame takes (broker clock).
        reorder_delay: extra seconds a reordered frame takes (later frames overtake it).
        handshake_faults: drop, duplicate and reorder HELLO, LOGIN, PING and CLOSE frames too
            (default False: those faults model losses the dialog protocol must survive, and
            only MESSAGE, ACK and REFUSAL frames meet them; corruption and cuts hit every
            frame).

    Raises:
        TransportError: a probability outside 0..1 or a negative delay (naming it).
    """

    def __init__(
        self,
        seed: int,
        *,
        drop: float = 0.0,
        duplicate: float = 0.0,
        reorder: float = 0.0,
        corrupt: float = 0.0,
        cut: float = 0.0,
        delay: float = 0.001,
        reorder_delay: float = 0.01,
        handshake_faults: bool = False,
    ) -> None:
        for name, p in (
            ("drop", drop),
            ("duplicate", duplicate),
            ("reorder", reorder),
            ("corrupt", corrupt),
            ("cut", cut),
        ):
            if not 0.0 <= p <= 1.0:
                raise TransportError(f"link {name} probability must be within 0..1, got {p!r}")
        if delay < 0 or reorder_delay < 0:
            raise TransportError(f"link delays must be >= 0, got {delay!r}, {reorder_delay!r}")
        self.random = random.Random(seed)
        self.drop, self.duplicate, self.reorder = drop, duplicate, reorder
        self.corrupt, self.cut_probability = corrupt, cut
        self.delay, self.reorder_delay = delay, reorder_delay
        self.handshake_faults = handshake_faults
        self.cut = False
        """True once the stream was cut: nothing more is carried until :meth:`reset`."""
        self._queue: list[tuple[float, int, bytes]] = []
        self._ticket = 0
        self._counts = dict.fromkeys(
            ("frames", "dropped", "duplicated", "reordered", "corrupted", "cuts"), 0
        )

    def reset(self) -> None:
        """A new connection over the same link: nothing in flight, not cut."""
        self._queue.clear()
        self.cut = False

    def _put(self, when: float, data: bytes) -> None:
        self._ticket += 1
        heapq.heappush(self._queue, (when, self._ticket, data))

    def send(self, data: bytes, now: float) -> None:
        """Carry ``data`` (whole frames) sent at ``now``; each frame meets its fate.

        Raises:
            TransportError: ``data`` does not split into whole frames.
        """
        pos = 0
        rnd = self.random
        while pos < len(data):
            if len(data) - pos < _HEADER.size:
                raise TransportError(f"link got {len(data) - pos} bytes that are not a frame")
            kind, size = _HEADER.unpack_from(data, pos)[2:]
            end = pos + size + FRAME_OVERHEAD
            frame = bytearray(data[pos:end])
            pos = end
            if self.cut:
                continue
            self._counts["frames"] += 1
            faulty = self.handshake_faults or kind in _DIALOG_FRAMES
            if rnd.random() < self.drop and faulty:
                self._counts["dropped"] += 1
                continue
            if rnd.random() < self.corrupt:
                self._counts["corrupted"] += 1
                at = rnd.randrange(_HEADER.size, len(frame))
                frame[at] ^= 1 << rnd.randrange(8)
            when = now + self.delay
            if rnd.random() < self.reorder and faulty:
                self._counts["reordered"] += 1
                when += self.reorder_delay
            if kind == FrameType.MESSAGE and rnd.random() < self.cut_probability:
                self._counts["cuts"] += 1
                self._put(when, bytes(frame[: rnd.randrange(1, len(frame))]))
                self.cut = True
                continue
            self._put(when, bytes(frame))
            if rnd.random() < self.duplicate and faulty:
                self._counts["duplicated"] += 1
                self._put(when, bytes(frame))

    def next_delivery(self) -> float | None:
        """When the next frame arrives, or None when nothing is in flight."""
        return self._queue[0][0] if self._queue else None

    def deliver(self, now: float) -> bytes:
        """The bytes arriving by ``now``, in arrival order."""
        out = []
        while self._queue and self._queue[0][0] <= now:
            out.append(heapq.heappop(self._queue)[2])
        return b"".join(out)

    @property
    def ended(self) -> bool:
        """True when the stream was cut and everything sent before the cut has arrived: the
        receiver should see the end of the stream."""
        return self.cut and not self._queue

    def statistics(self) -> LinkStatistics:
        """What the link did so far (:class:`LinkStatistics`)."""
        return LinkStatistics(**self._counts)
