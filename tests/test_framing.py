"""The adjacent broker protocol's framing (servicebroker.transport.framing), without sockets:
frames survive any split of the byte stream, and every bad frame — truncated, oversized, of an
unknown type, corrupt — is refused with a FramingError, never delivered, never allocated."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servicebroker import FramingError, TransportError
from servicebroker.transport.framing import (
    FRAME_OVERHEAD,
    Frame,
    FrameDecoder,
    FrameType,
    encode_frame,
)

FRAMES = st.lists(st.builds(Frame, st.sampled_from(FrameType), st.binary(max_size=300)), max_size=8)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=200)
@given(frames=FRAMES, cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_frames_survive_any_split_of_the_stream(frames: list[Frame], cuts: list[int]) -> None:
    # rule NET-1: the adjacent broker protocol carries frames over TCP, which delivers a byte
    # stream in pieces of any size
    wire = b"".join(encode_frame(f) for f in frames)
    decoder = FrameDecoder()
    got = [frame for piece in split(wire, cuts) for frame in decoder.feed(piece)]
    decoder.eof()
    assert got == frames
    assert decoder.buffered == 0 and decoder.frames_decoded == len(frames)


@settings(max_examples=300)
@given(
    frame=st.builds(Frame, st.sampled_from(FrameType), st.binary(min_size=1, max_size=200)),
    position=st.integers(0, 10_000),
    flip=st.integers(1, 255),
)
def test_a_corrupt_frame_is_never_delivered(frame: Frame, position: int, flip: int) -> None:
    # rule NET-6: "a message that fails [its checksum] is discarded, not acknowledged" — any
    # changed byte is refused (or, in the length, leaves the frame incomplete at the end)
    wire = bytearray(encode_frame(frame))
    wire[position % len(wire)] ^= flip
    decoder = FrameDecoder()
    with pytest.raises(FramingError):
        assert decoder.feed(bytes(wire)) == []
        decoder.eof()


def test_each_bad_frame_names_what_is_wrong() -> None:
    good = encode_frame(Frame(FrameType.MESSAGE, b"body"))
    cases = {
        b"XX" + good[2:]: r"not a servicebroker frame \(it begins b'XX'",
        good[:2] + b"\x09" + good[3:]: r"frame version 9 is not spoken here",
        good[:3] + b"\x63" + good[4:]: r"unknown frame type 99",
        good[:-1] + bytes([good[-1] ^ 1]): r"MESSAGE frame of 4 bytes fails its checksum",
    }
    for wire, message in cases.items():
        with pytest.raises(FramingError, match=message):
            FrameDecoder().feed(wire)
    decoder = FrameDecoder()
    assert decoder.feed(good[:-3]) == []
    with pytest.raises(FramingError, match=r"the connection ended inside a frame \(13 bytes"):
        decoder.eof()


def test_an_oversized_frame_is_refused_from_its_header() -> None:
    # a header announcing 4 GB is refused before any of it arrives: nothing is buffered for it
    decoder = FrameDecoder(max_payload=1024)
    header = b"SB\x01\x03\xff\xff\xff\xff"
    with pytest.raises(FramingError, match=r"MESSAGE frame announces 4294967295 bytes, beyond"):
        decoder.feed(header)
    assert decoder.buffered == 0
    with pytest.raises(FramingError, match="beyond the frame limit of 1024 bytes"):
        encode_frame(Frame(FrameType.MESSAGE, b"x" * 1025), max_payload=1024)
    assert len(encode_frame(Frame(FrameType.MESSAGE, b"x" * 1024), max_payload=1024)) == (
        1024 + FRAME_OVERHEAD
    )


def test_a_failed_decoder_stays_closed() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FramingError) as first:
        decoder.feed(b"nonsense, not a frame")
    good = encode_frame(Frame(FrameType.PING, b""))
    with pytest.raises(FramingError) as again:
        decoder.feed(good)  # the connection is closed: nothing after the bad frame is read
    assert again.value is first.value
    assert isinstance(first.value, TransportError)


def test_bad_arguments_are_framing_errors() -> None:
    with pytest.raises(FramingError, match="max_payload"):
        FrameDecoder(max_payload=-1)
    with pytest.raises(FramingError, match="payload must be bytes"):
        encode_frame(Frame(FrameType.PING, "text"))  # type: ignore[arg-type]
    with pytest.raises(FramingError, match="type must be a FrameType"):
        encode_frame(Frame(3, b""))  # type: ignore[arg-type]
