"""The adjacent broker protocol (servicebroker.transport.adjacent), without sockets: NET-8's
states and login states, SEC-1's ENCRYPTION matrix, NET-3's acks riding on return traffic,
TICK-4a idleness, and bad frames of every kind closing the connection without raising."""

from __future__ import annotations

import struct
import uuid
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servicebroker import TransportError
from servicebroker.transport.adjacent import (
    AckReceived,
    AdjacentConnection,
    ConnectionClosed,
    ConnectionState,
    FragmentReceived,
    LoggedIn,
    LoginRefused,
    LoginState,
    PeerHello,
    negotiate_encryption,
)
from servicebroker.transport.framing import Frame, FrameType, encode_frame
from servicebroker.transport.settings import TransportSettings
from servicebroker.transport.wire import Ack, Fragment, MessageHeader

A, B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)


def pair(
    enc_a: str = "REQUIRED", enc_b: str = "REQUIRED", now: float = 100.0
) -> tuple[AdjacentConnection, AdjacentConnection]:
    """A connecting side ``a`` and an accepting side ``b``, HELLOs exchanged."""
    a = AdjacentConnection(A, is_accept=False, encryption=enc_a, now=now)
    b = AdjacentConnection(B, is_accept=True, encryption=enc_b, now=now)
    assert a.state is ConnectionState.NEW and a.login_state is LoginState.INITIAL
    hello_a, hello_b = a.start(now), b.start(now)
    assert a.state is ConnectionState.CONNECTING
    assert a.login_state is LoginState.WAIT_LOGIN_NEGOTIATE
    (event,) = b.receive_data(hello_a, now)
    assert isinstance(event, PeerHello) and event.hello.broker_instance == A
    (event,) = a.receive_data(hello_b, now)
    assert isinstance(event, PeerHello) and a.peer_instance == B
    assert a.state is b.state is ConnectionState.CONNECTED
    assert b.login_state is LoginState.WAIT_VALIDATION
    return a, b


def logged_in(now: float = 100.0) -> tuple[AdjacentConnection, AdjacentConnection]:
    a, b = pair(now=now)
    assert a.receive_data(b.login(True, "", now + 1), now + 1) == [LoggedIn()]
    return a, b


def fragment(seq: int = 0) -> Fragment:
    h = MessageHeader(
        b"c" * 16, True, seq, b"m" * 16, "//a", "//b", "//c", "//t", "N", A, B, 5, None, 3, 1
    )
    return Fragment(h, 0, b"abc")


def test_net8_states_through_login() -> None:
    # NET-8: NEW -> CONNECTING -> CONNECTED -> LOGGED_IN -> CLOSED, with the login states of
    # sys.dm_broker_connections
    a, b = logged_in(now=100.0)
    for side in (a, b):
        stats = side.statistics()
        assert stats.state_desc == "LOGGED_IN" and stats.login_state is LoginState.ONLINE
        assert stats.login_state_desc.startswith("Connection handshake is complete")
        assert stats.connect_time == 100.0 and stats.login_time == 101.0
        assert stats.encrypted is True
    assert b.statistics().is_accept and not a.statistics().is_accept
    closing = a.close("shutting down", 102.0)
    assert a.state is ConnectionState.CLOSED
    assert b.receive_data(closing, 102.0) == [ConnectionClosed("shutting down")]
    assert b.state is ConnectionState.CLOSED


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        ("DISABLED", "DISABLED", False),
        ("DISABLED", "SUPPORTED", False),
        ("DISABLED", "REQUIRED", None),
        ("SUPPORTED", "DISABLED", False),
        ("SUPPORTED", "SUPPORTED", True),
        ("SUPPORTED", "REQUIRED", True),
        ("REQUIRED", "DISABLED", None),
        ("REQUIRED", "SUPPORTED", True),
        ("REQUIRED", "REQUIRED", True),
    ],
)
def test_sec1_encryption_matrix(ours: str, theirs: str, expected: bool | None) -> None:
    # SEC-1: SUPPORTED encrypts if the peer supports it, REQUIRED refuses a DISABLED peer
    assert negotiate_encryption(ours, theirs) is expected
    a, b = pair(ours, theirs)
    events = a.receive_data(b.login(True, "", 101.0), 101.0)
    if expected is None:
        assert isinstance(events[0], LoginRefused) and "ENCRYPTION" in events[0].status
        assert a.state is b.state is ConnectionState.CLOSED
        assert a.login_state is LoginState.ERROR
    else:
        assert events == [LoggedIn()] and a.encrypted is b.encrypted is expected


def test_encryption_setting_is_checked() -> None:
    with pytest.raises(TransportError, match="ENCRYPTION"):
        negotiate_encryption("ON", "REQUIRED")
    with pytest.raises(TransportError, match="ENCRYPTION"):
        AdjacentConnection(A, is_accept=False, encryption="yes", now=0.0)


def test_login_refused_by_the_shell_shows_its_status() -> None:
    # SEC-1: a peer whose certificate has no CONNECT grant gets nothing but the refusal
    a, b = pair()
    status = "Connection handshake failed. The login 'peer' does not have CONNECT permission."
    events = a.receive_data(b.login(False, status, 101.0), 101.0)
    assert events == [LoginRefused(status), ConnectionClosed(status)]
    with pytest.raises(TransportError, match="cannot send a fragment"):
        b.send_fragment(fragment(), 101.0)


def test_only_the_accepting_side_decides_the_login() -> None:
    a, _ = pair()
    with pytest.raises(TransportError, match="accepting side"):
        a.login(True, "", 101.0)


def test_net3_acks_ride_on_return_traffic_else_a_dedicated_frame() -> None:
    # NET-3: an acknowledgement rides in the header of a message going back; else a
    # dedicated one is sent
    a, b = logged_in()
    assert b.flush_acks(102.0) == b""  # nothing pending: nothing sent
    b.queue_ack(Ack(b"c" * 16, True, 0))
    events = a.receive_data(b.send_fragment(fragment(), 102.0), 102.0)
    assert events[0] == AckReceived(Ack(b"c" * 16, True, 0))
    assert isinstance(events[1], FragmentReceived)
    assert b.flush_acks(102.0) == b""  # it rode along
    b.queue_ack(Ack(b"c" * 16, True, 1))
    assert a.receive_data(b.flush_acks(103.0), 103.0) == [AckReceived(Ack(b"c" * 16, True, 1))]
    assert b.statistics().total_fragments_sent == 1
    assert a.statistics().total_fragments_received == 1
    assert a.statistics().total_bytes_received == b.statistics().total_bytes_sent


def test_tick4a_idle_after_90_seconds_without_traffic() -> None:
    # TICK-4a: connections idle for the last 90 seconds are closed
    a, b = logged_in(now=0.0)
    assert not a.is_idle(90.0)  # the login at 1.0 was traffic
    assert a.is_idle(91.0)
    a.receive_data(b.send_fragment(fragment(), 50.0), 50.0)
    assert not a.is_idle(139.0) and a.is_idle(140.0)
    short = AdjacentConnection(
        A,
        is_accept=False,
        encryption="REQUIRED",
        now=0.0,
        settings=TransportSettings(idle_after=5.0),
    )
    assert short.is_idle(5.0)


def test_handshake_timeout() -> None:
    a, _ = pair(now=0.0)
    assert not a.handshake_expired(29.9) and a.handshake_expired(30.0)


def bad_frames() -> dict[str, bytes]:
    good = encode_frame(Frame(FrameType.PING, b""))
    head = struct.pack(">2sBBI", b"SB", 1, 99, 0)
    unknown = head + struct.pack(">I", zlib.crc32(head))
    oversized = struct.pack(">2sBBI", b"SB", 1, FrameType.MESSAGE, 2**31)
    wrong_sum = good[:-1] + bytes([good[-1] ^ 0xFF])
    garbage_payload = encode_frame(Frame(FrameType.MESSAGE, b"\x01\x02"))
    return {
        "unknown frame type": unknown,
        "announces": oversized,
        "fails its checksum": wrong_sum,
        "not a servicebroker frame": b"GET / HTTP/1.1\r\n\r\n",
        "MESSAGE payload ends inside": garbage_payload,
        "second HELLO": encode_frame(Frame(FrameType.HELLO, b"")) + b"",
    }


@pytest.mark.parametrize("reason", list(bad_frames()))
def test_bad_frames_close_the_connection_with_a_clear_status_never_raise(reason: str) -> None:
    # NET-6 and the issue: truncated, oversized, unknown type, wrong checksum … close the
    # connection with a clear status, never crash, never allocate beyond the frame limit
    a, _ = logged_in()
    data = bad_frames()[reason]
    if reason == "second HELLO":
        data = AdjacentConnection(B, is_accept=True, encryption="REQUIRED", now=0.0).start(0.0)
    events = a.receive_data(data, 102.0)
    assert isinstance(events[-1], ConnectionClosed)
    assert reason in events[-1].status, events[-1].status
    assert a.state is ConnectionState.CLOSED and a.login_state is LoginState.ERROR
    assert a.closed_status == events[-1].status
    assert a.statistics().bad_frames == (0 if reason == "second HELLO" else 1)  # NET-6: counted
    assert a.receive_data(b"more", 103.0) == []


def test_truncated_frame_at_the_end_of_the_stream_closes_with_a_status() -> None:
    a, b = logged_in()
    data = b.send_fragment(fragment(), 102.0)
    assert a.receive_data(data[:20], 102.0) == []
    (event,) = a.receive_eof(102.0)
    assert isinstance(event, ConnectionClosed) and "ended inside a frame" in event.status


def test_message_before_login_is_a_protocol_error() -> None:
    _, b = logged_in()
    c = AdjacentConnection(A, is_accept=False, encryption="REQUIRED", now=0.0)
    c.start(0.0)
    events = c.receive_data(b.send_fragment(fragment(), 1.0), 1.0)
    assert isinstance(events[-1], ConnectionClosed) and "before the login" in events[-1].status


def test_goodbye_after_a_bad_frame_sends_the_pending_acks_and_close_net3() -> None:
    # NET-3: messages committed before the bad frame are acknowledged all the same, so the
    # peer need not send them again; then CLOSE says why
    a, b = logged_in()
    b.queue_ack(Ack(b"c" * 16, True, 4))
    events = b.receive_data(b"garbage that is no frame", 102.0)
    assert isinstance(events[-1], ConnectionClosed)
    farewell = b.goodbye(102.0)
    assert b.goodbye(102.0) == b""  # once
    got = a.receive_data(farewell, 102.0)
    assert got[0] == AckReceived(Ack(b"c" * 16, True, 4))
    assert isinstance(got[1], ConnectionClosed) and "not a servicebroker frame" in got[1].status
    fresh = AdjacentConnection(A, is_accept=False, encryption="REQUIRED", now=0.0)
    assert fresh.goodbye(0.0) == b""  # open, never logged in: nothing


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(FrameType), payload=st.binary(max_size=200), logged=st.booleans())
def test_any_payload_in_a_sound_frame_never_raises(
    kind: FrameType, payload: bytes, logged: bool
) -> None:
    # a payload that does not decode closes the connection with a status; nothing escapes
    if logged:
        a, _ = logged_in()
    else:
        a = AdjacentConnection(A, is_accept=True, encryption="SUPPORTED", now=0.0)
    events = a.receive_data(encode_frame(Frame(kind, payload)), 102.0)
    for event in events:
        if isinstance(event, ConnectionClosed):
            assert event.status and a.state is ConnectionState.CLOSED
