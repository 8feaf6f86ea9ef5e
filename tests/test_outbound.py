"""The sending half of the dialog protocol (servicebroker.transport.outbound), pure: NET-4
retries on the manual clock, NET-5 fragments and soft acks, NET-3 whole-message acks, NET-7
refusals, PRI-18 blocks of fragments."""

from __future__ import annotations

import itertools
import uuid

import pytest

from servicebroker import TransportError
from servicebroker.transport.outbound import Outbound, TransportSettings
from servicebroker.transport.wire import Ack, MessageHeader, Refusal

SENDER = uuid.UUID(int=1)


def header(conv: int, sequence: int) -> MessageHeader:
    return MessageHeader(
        conv.to_bytes(16, "big"), True, sequence, uuid.uuid4().bytes, "//a", "//b", "//c",
        "//t", "N", SENDER, None, 5, None, 0, 1,
    )  # fmt: skip


def send_times(out: Outbound, until: float) -> list[float]:
    """The clock times at which frames_due gives something, stepping by next_due."""
    now, times = 0.0, []
    while now <= until:
        if out.frames_due(now, 1 << 20):
            times.append(now)
        nxt = out.next_due(now)
        assert nxt is not None and nxt > now
        now = nxt
    return times


def test_net4_retry_schedule_under_total_loss_then_recovery() -> None:
    # NET-4: no acknowledgement -> resent after 4 s, the wait doubling to 64 s; every message
    # waits, never an error (NET-7); an ack after the loss ends removes it
    out = Outbound()
    out.offer(header(1, 0), b"hello", 0.0)
    times = send_times(out, 400.0)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert times[0] == 0.0
    assert gaps[:7] == [4.0, 8.0, 16.0, 32.0, 64.0, 64.0, 64.0]
    assert out.statistics().retransmissions == len(times) - 1
    assert out.on_ack(Ack((1).to_bytes(16, "big"), True, 0), 400.0) == [
        ((1).to_bytes(16, "big"), True, 0)
    ]
    assert out.pending_count == 0 and out.next_due(400.0) is None


def test_retry_settings_are_read() -> None:
    out = Outbound(TransportSettings(retry_initial=1.0, retry_max=3.0))
    out.offer(header(1, 0), b"x", 0.0)
    times = send_times(out, 10.0)
    assert times[:5] == [0.0, 1.0, 3.0, 6.0, 9.0]


def test_offer_is_idempotent_and_counts_the_window() -> None:
    out = Outbound()
    out.offer(header(1, 0), b"a" * 10, 0.0)
    out.offer(header(1, 0), b"a" * 10, 0.0)
    out.offer(header(1, 1), b"b" * 5, 0.0)
    assert out.pending_count == 2 and out.pending_bytes == 15
    with pytest.raises(TransportError, match="body must be bytes"):
        out.offer(header(1, 2), "text", 0.0)  # type: ignore[arg-type]


def test_net5_large_message_in_fragments_only_lost_ones_resent() -> None:
    # NET-5: a large body travels in fragments; fragments the receiver holds are not resent
    settings = TransportSettings(fragment_size=100, slow_start_fragments=100)
    out = Outbound(settings)
    body = bytes(range(250)) * 2  # 500 bytes: 5 fragments
    out.offer(header(1, 0), body, 0.0)
    first = out.frames_due(0.0, 1 << 20)
    assert [f.index for f in first] == [0, 1, 2, 3, 4]
    assert b"".join(f.data for f in first) == body
    assert all(f.header.fragment_count == 5 and f.header.message_size == 500 for f in first)
    conv = (1).to_bytes(16, "big")
    for i in (0, 1, 3):
        assert out.on_ack(Ack(conv, True, 0, i), 1.0) == []
    again = out.frames_due(4.0, 1 << 20)
    assert [f.index for f in again] == [2, 4]
    # the connection drops: fragment acks are forgotten, everything is due at once
    out.on_disconnect(5.0)
    assert out.next_due(5.0) == 5.0
    assert [f.index for f in out.frames_due(5.0, 1 << 20)] == [0, 1, 2, 3, 4]


def test_pri18_small_message_travels_between_fragments_of_a_large_one() -> None:
    # PRI-18: messages travel in blocks of fragments; a small message goes between the
    # fragments of a large one
    settings = TransportSettings(fragment_size=10, fragments_per_block=2, slow_start_fragments=50)
    out = Outbound(settings)
    out.offer(header(1, 0), b"L" * 60, 0.0)  # 6 fragments
    out.offer(header(2, 0), b"small", 0.0)
    sent = [(f.header.conversation_id[-1], f.index) for f in out.frames_due(0.0, 1 << 20)]
    assert sent[:3] == [(1, 0), (1, 1), (2, 0)]
    assert sorted(sent) == [(1, i) for i in range(6)] + [(2, 0)]


def test_max_bytes_bounds_a_call_but_always_progresses() -> None:
    settings = TransportSettings(fragment_size=100, slow_start_fragments=100)
    out = Outbound(settings)
    out.offer(header(1, 0), b"x" * 1000, 0.0)
    assert len(out.frames_due(0.0, 250)) == 3
    assert len(out.frames_due(0.0, 0)) == 1


def test_send_window_starts_small_and_grows_with_acks() -> None:
    out = Outbound(TransportSettings(slow_start_fragments=2))
    for seq in range(5):
        out.offer(header(1, seq), b"m", 0.0)
    assert [f.header.sequence for f in out.frames_due(0.0, 1 << 20)] == [0, 1]
    assert out.next_due(0.0) == 4.0  # full window: the next retry
    conv = (1).to_bytes(16, "big")
    out.on_ack(Ack(conv, True, 0), 0.1)
    assert out.send_window == 3
    assert [f.header.sequence for f in out.frames_due(0.1, 1 << 20)] == [2, 3]


def test_net3_whole_ack_removes_and_duplicate_acks_are_ignored() -> None:
    out = Outbound()
    out.offer(header(1, 0), b"x", 0.0)
    out.frames_due(0.0, 1 << 20)
    conv = (1).to_bytes(16, "big")
    assert out.on_ack(Ack(conv, True, 0), 1.0) == [(conv, True, 0)]
    assert out.on_ack(Ack(conv, True, 0), 1.0) == []
    assert out.on_ack(Ack(conv, False, 0), 1.0) == []  # the other side's message
    stats = out.statistics()
    assert stats.messages_acked == 1 and stats.pending_count == 0 and stats.fragments_sent == 1


def test_net7_refusal_keeps_the_message_with_its_status_and_retries() -> None:
    out = Outbound()
    out.offer(header(1, 0), b"x", 0.0)
    out.frames_due(0.0, 1 << 20)
    conv = (1).to_bytes(16, "big")
    status = "The target service name could not be found."
    assert out.on_refusal(Refusal(conv, True, 0, status), 0.5) == status
    assert out.status((conv, True, 0)) == status
    assert out.pending_count == 1
    assert out.frames_due(3.9, 1 << 20) == []
    assert len(out.frames_due(4.0, 1 << 20)) == 1


def test_settings_are_checked_naming_the_setting() -> None:
    with pytest.raises(TransportError, match="retry_initial"):
        TransportSettings(retry_initial=0)
    with pytest.raises(TransportError, match="retry_max"):
        TransportSettings(retry_initial=10, retry_max=5)
    with pytest.raises(TransportError, match="fragment_size"):
        TransportSettings(fragment_size=4 * 1024 * 1024)
    with pytest.raises(TransportError, match="window_bytes"):
        TransportSettings(window_bytes=1.5)  # type: ignore[arg-type]
    defaults = TransportSettings()
    assert (defaults.retry_initial, defaults.retry_max, defaults.stale_after) == (4.0, 64.0, 10.0)
    assert (defaults.idle_after, defaults.suppress_after_disconnect) == (90.0, 15.0)
    assert defaults.suppress_after_failure == 60.0


def test_a_withdrawn_message_is_no_longer_sent_nor_counted() -> None:
    """TICK-3b: a message taken back (its route goes elsewhere now) leaves the window and
    is never sent again from here; a late acknowledgement of it changes nothing."""
    out = Outbound()
    out.offer(header(1, 0), b"x" * 10, 0.0)
    out.offer(header(2, 0), b"y" * 20, 0.0)
    assert len(out.frames_due(0.0, 1 << 20)) == 2
    key = ((1).to_bytes(16, "big"), True, 0)
    assert out.withdraw(key) is True
    assert out.withdraw(key) is False
    assert (out.pending_count, out.pending_bytes) == (1, 20)
    assert [f.header.conversation_id for f in out.frames_due(5.0, 1 << 20)] == [
        (2).to_bytes(16, "big")
    ]  # only the other message's retry
    assert out.on_ack(Ack(*key), 6.0) == []
