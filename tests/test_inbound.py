"""The message dispatcher (servicebroker.transport.inbound), pure: NET-5 reassembly and
fragment acks, out-of-order messages held and released, TICK-2c clean-up, the memory bound."""

from __future__ import annotations

import uuid

from servicebroker.transport.inbound import Completed, Dropped, Inbound
from servicebroker.transport.outbound import Outbound
from servicebroker.transport.settings import TransportSettings
from servicebroker.transport.wire import Ack, Fragment, MessageHeader

CONV = (7).to_bytes(16, "big")


def fragments(body: bytes, sequence: int = 0, size: int = 10) -> list[Fragment]:
    out = Outbound(TransportSettings(fragment_size=size, slow_start_fragments=1000))
    out.offer(
        MessageHeader(
            CONV, True, sequence, uuid.uuid4().bytes, "//a", "//b", "//c", "//t", "N",
            uuid.UUID(int=1), None, 5, None, 0, 1,
        ),
        body,
        0.0,
    )  # fmt: skip
    return out.frames_due(0.0, 1 << 30)


def test_net5_reassembles_in_any_order_with_fragment_acks() -> None:
    # NET-5: a message is complete only with all its fragments; each fragment held is acked
    body = bytes(range(95))
    parts = fragments(body)
    inbound = Inbound()
    results: list[object] = []
    for f in reversed(parts):
        results.extend(inbound.on_fragment(f, 1.0))
    acks = [r for r in results if isinstance(r, Ack)]
    done = [r for r in results if isinstance(r, Completed)]
    assert sorted(a.fragment for a in acks if a.fragment is not None) == list(range(10))
    assert len(done) == 1 and done[0].body == body and done[0].key == (CONV, True, 0)
    assert inbound.buffered_bytes == 0


def test_duplicate_fragment_is_acked_again_not_stored_twice() -> None:
    parts = fragments(b"x" * 30)
    inbound = Inbound()
    inbound.on_fragment(parts[0], 0.0)
    again = inbound.on_fragment(parts[0], 0.0)
    assert again == [Ack(CONV, True, 0, 0)]
    assert inbound.statistics().duplicate_fragments == 1
    assert inbound.buffered_bytes == 10


def test_single_fragment_message_completes_without_a_fragment_ack() -> None:
    # NET-3: its ack comes after the commit
    (only,) = fragments(b"small", size=100)
    (result,) = Inbound().on_fragment(only, 0.0)
    assert isinstance(result, Completed) and result.body == b"small"


def test_out_of_order_held_until_released() -> None:
    (second,) = fragments(b"two", sequence=1, size=100)
    inbound = Inbound()
    (c,) = inbound.on_fragment(second, 0.0)
    assert isinstance(c, Completed)
    inbound.hold(c, 0.0)
    assert inbound.held_count == 1
    assert inbound.release(CONV, True, 2) is None
    assert inbound.release(CONV, True, 1) == c
    assert inbound.held_count == 0


def test_tick2c_cleanup_drops_out_of_order_and_stale_messages() -> None:
    # TICK-2c: the dispatcher deletes every out-of-order message and every message not
    # picked up within 10 seconds of arrival from its buffers
    inbound = Inbound()
    (held,) = inbound.on_fragment(fragments(b"late", sequence=3, size=100)[0], 0.0)
    assert isinstance(held, Completed)
    inbound.hold(held, 0.0)
    partial = fragments(b"y" * 50, sequence=5)
    inbound.on_fragment(partial[0], 0.0)
    fresh = fragments(b"z" * 50, sequence=6)
    inbound.on_fragment(fresh[0], 5.0)
    assert inbound.cleanup(9.9) == 1  # the held one; the partial is not yet stale
    assert inbound.cleanup(10.0) == 1  # now the partial started at 0 is
    assert inbound.buffered_bytes == 10  # the one started at 5 s remains
    assert inbound.cleanup(15.0) == 1
    assert inbound.buffered_bytes == 0 and inbound.statistics().messages_dropped == 3


def test_memory_bound_drops_the_oldest_message_in_progress_and_says_so() -> None:
    inbound = Inbound(TransportSettings(reassembly_bytes=25))
    old = fragments(b"a" * 40, sequence=0)
    new = fragments(b"b" * 40, sequence=1)
    inbound.on_fragment(old[0], 0.0)
    inbound.on_fragment(old[1], 0.0)
    out = inbound.on_fragment(new[0], 1.0)
    dropped = [r for r in out if isinstance(r, Dropped)]
    assert len(dropped) == 1 and dropped[0].sequence == 0
    assert "reassembly_bytes" in dropped[0].reason
    assert inbound.buffered_bytes == 10
