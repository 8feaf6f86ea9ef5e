"""The transport's fault matrix (NET-2..NET-6, TICK-2c, TICK-3a): two in-memory brokers wired
through AdjacentConnection + Outbound + Inbound over two seeded FaultyLinks on a manual clock.
In every cell — drop, duplicate, reorder, corrupt at 0/1/10/30 % and a cut mid-fragment — every
message is delivered exactly once and in order per dialog, both ways (the targets answer on
the same dialogs, a quarter as many messages, so acks ride on return traffic). 1,000 messages over 100 dialogs per
cell by default; ``pytest --transport-matrix=full`` runs 10,000."""

from __future__ import annotations

import pytest

from .transport_harness import Pair

CELLS = [
    (kind, rate)
    for kind in ("drop", "duplicate", "reorder", "corrupt")
    for rate in (0.0, 0.01, 0.10, 0.30)
] + [("cut", 0.02)]


@pytest.fixture
def messages(request: pytest.FixtureRequest) -> int:
    return 10_000 if request.config.getoption("--transport-matrix") == "full" else 1_000


@pytest.mark.parametrize(("kind", "rate"), CELLS, ids=[f"{k}-{int(r * 100)}%" for k, r in CELLS])
def test_fault_matrix_net2_net3_exactly_once_in_order(
    kind: str, rate: float, messages: int, record_property: pytest.RecordProperty
) -> None:
    # NET-2/NET-3: exactly once, in order, per dialog; NET-4 retries; NET-5 fragments;
    # NET-6 a corrupt frame closes the connection and what it carried is sent again
    dialogs = 100
    result = Pair(
        seed=CELLS.index((kind, rate)) + 1, messages=messages, dialogs=dialogs, **{kind: rate}
    ).run()
    assert len(result.delivered) == 2 * dialogs  # each dialog's two sides
    assert sum(map(len, result.delivered.values())) == messages + messages // 4
    assert result.exactly_once_in_order
    assert result.bodies_ok
    report = (
        f"{kind} {rate:.0%}: drained at {result.drained_at:.3f} s (manual clock), "
        f"{result.retransmissions} retransmitted of {result.fragments_sent} fragments sent, "
        f"{result.connections} connections, {result.duplicates_seen} duplicates re-acked, "
        f"link {result.link}"
    )
    print(report)
    record_property("transport_matrix", report)
    if rate and kind in ("drop", "corrupt", "cut"):
        assert result.retransmissions > 0
    if kind == "cut":
        assert result.link["cuts"] > 0 and result.connections > 1


def test_corrupt_frames_close_the_connection_and_are_sent_again_net6() -> None:
    # NET-6: a frame that fails its checksum is discarded (never delivered), the connection
    # closes, and the sender's retries bring the message again
    result = Pair(seed=7, messages=200, dialogs=10, corrupt=0.10).run()
    assert result.link["corrupted"] > 0 and result.connections > 1
    assert result.exactly_once_in_order and result.bodies_ok


def test_faulty_link_is_seeded_and_its_faults_hit_whole_frames() -> None:
    from servicebroker import FramingError
    from servicebroker.testing.link import FaultyLink, LinkStatistics
    from servicebroker.transport.framing import Frame, FrameDecoder, FrameType, encode_frame

    frames = b"".join(encode_frame(Frame(FrameType.ACK, bytes([i]) * 20)) for i in range(200))

    def run(seed: int, **faults: float) -> tuple[bytes, LinkStatistics]:
        link = FaultyLink(seed, **faults)
        link.send(frames, 0.0)
        return link.deliver(1.0), link.statistics()

    assert run(3, drop=0.2, duplicate=0.2, reorder=0.2) == run(
        3, drop=0.2, duplicate=0.2, reorder=0.2
    )
    clean, _ = run(3)
    assert clean == frames
    delivered, stats = run(4, corrupt=0.5)
    # NET-6: a corrupted frame fails its checksum
    with pytest.raises(FramingError, match="fails its checksum"):
        FrameDecoder().feed(delivered)
    assert stats.corrupted > 0


def test_cut_mid_fragment_ends_the_stream_inside_a_frame() -> None:
    from servicebroker import FramingError
    from servicebroker.testing.link import FaultyLink
    from servicebroker.transport.framing import Frame, FrameDecoder, FrameType, encode_frame

    link = FaultyLink(1, cut=1.0)
    link.send(encode_frame(Frame(FrameType.MESSAGE, b"x" * 100)) * 3, 0.0)
    data = link.deliver(1.0)
    assert link.cut and link.ended and 0 < len(data) < 112
    decoder = FrameDecoder()
    assert decoder.feed(data) == []
    with pytest.raises(FramingError, match="ended inside a frame"):
        decoder.eof()


def test_net4_total_loss_then_recovery_drains_without_an_error() -> None:
    # NET-4 / NET-7: under 100 % loss the messages wait and are retried with growing waits
    # (4 s doubling to 64 s); when the link recovers, everything is delivered exactly once
    pair = Pair(seed=11, messages=100, dialogs=10, drop=1.0)
    lost = pair.run(until=300.0)
    assert lost.delivered == {} and len(pair.a.unacked) == 100
    # the retries of the first messages: at 4, 12, 28, 60, 124, 188, 252 s after the first
    # send, so at least 7 rounds by 300 s, and no more than that many resends each
    assert 7 * 4 <= lost.retransmissions <= 7 * 100 * 5
    pair.forward.drop = pair.backward.drop = 0.0
    result = pair.run()
    assert result.exactly_once_in_order and result.bodies_ok
    assert result.drained_at <= 300.0 + 64.0 + 60.0
