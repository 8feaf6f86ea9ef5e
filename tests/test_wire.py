"""The payloads of the adjacent broker protocol's frames (servicebroker.transport.wire): each
round-trips, and a bad payload is refused with a FramingError naming the field."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servicebroker import FramingError
from servicebroker.transport import wire
from servicebroker.transport.wire import Ack, Close, Fragment, Hello, Login, MessageHeader, Refusal

IDS = st.binary(min_size=16, max_size=16)
NAMES = st.text(max_size=40)
TIMES = st.none() | st.floats(allow_nan=False, allow_infinity=False)
ACKS = st.builds(Ack, IDS, st.booleans(), st.integers(-1, 2**40), st.none() | st.integers(0, 2**31))
HEADERS = st.builds(
    MessageHeader, IDS, st.booleans(), st.integers(-1, 2**62), IDS, NAMES, NAMES, NAMES, NAMES,
    st.sampled_from(["N", "X", "E"]), st.uuids(), st.none() | st.uuids(), st.integers(1, 10),
    TIMES, st.integers(0, 2**40), st.just(3), TIMES, st.integers(0, 65535), st.booleans(),
)  # fmt: skip


@settings(max_examples=200)
@given(
    header=HEADERS,
    index=st.integers(0, 2),
    data=st.binary(max_size=100),
    acks=st.lists(ACKS, max_size=5),
)
def test_fragment_round_trips_net3_acks_ride_along(
    header: MessageHeader, index: int, data: bytes, acks: list[Ack]
) -> None:
    # NET-3: acknowledgements ride in the header of a message going back
    fragment = Fragment(header, index, data, tuple(acks))
    assert wire.decode_fragment(wire.encode_fragment(fragment)) == fragment


@given(acks=st.lists(ACKS, max_size=20))
def test_acks_round_trip(acks: list[Ack]) -> None:
    assert wire.decode_acks(wire.encode_acks(acks)) == tuple(acks)


def test_other_payloads_round_trip() -> None:
    hello = Hello(uuid.uuid4(), wire.PROTOCOL_VERSION, "SUPPORTED", "TCP://a:4022")
    assert wire.decode_hello(wire.encode_hello(hello)) == hello
    assert wire.decode_login(wire.encode_login(Login(False, "no grant"))) == Login(
        False, "no grant"
    )
    assert wire.decode_close(wire.encode_close(Close("idle"))) == Close("idle")
    refusal = Refusal(b"c" * 16, False, 9, "The target queue is disabled.")
    assert wire.decode_refusal(wire.encode_refusal(refusal)) == refusal


def test_header_defaults_for_the_forwarder() -> None:
    # FWD-3 (next issue): a time to live and a hop count travel with each message
    h = MessageHeader(
        b"c" * 16, True, 0, b"m" * 16, "a", "b", "c", "d", "N", uuid.uuid4(), None, 5, None, 1, 1
    )
    assert h.hops_remaining == wire.DEFAULT_HOPS == 32 and h.time_to_live is None
    assert h.encrypted is False


def sample_fragment() -> bytes:
    h = MessageHeader(
        b"c" * 16, True, 0, b"m" * 16, "a", "b", "c", "d", "N", uuid.uuid4(), None, 5, None, 3, 1
    )
    return wire.encode_fragment(Fragment(h, 0, b"abc", (Ack(b"c" * 16, False, 1),)))


@pytest.mark.parametrize("cut", [1, 16, 17, 30, 60])
def test_truncated_payload_names_the_field(cut: int) -> None:
    payload = sample_fragment()
    with pytest.raises(FramingError, match=r"MESSAGE payload ends inside \w"):
        wire.decode_fragment(payload[:cut])


def test_bad_payloads_name_the_field() -> None:
    payload = sample_fragment()
    with pytest.raises(FramingError, match="beyond its last field"):
        wire.decode_fragment(payload + b"\0")
    with pytest.raises(FramingError, match="is_initiator must be 0 or 1"):
        wire.decode_fragment(payload[:16] + b"\x07" + payload[17:])
    hello = wire.encode_hello(Hello(uuid.uuid4(), 1, "SUPPORTED", "x"))
    with pytest.raises(FramingError, match="encryption must be DISABLED, SUPPORTED or REQUIRED"):
        wire.decode_hello(hello.replace(b"SUPPORTED", b"SOMETIME!"))
    with pytest.raises(FramingError, match="status is not UTF-8"):
        wire.decode_close(b"\x00\x02\xff\xfe")
    with pytest.raises(FramingError, match="conversation_id must be 16 bytes"):
        wire.encode_refusal(Refusal(b"short", True, 0, ""))
