"""The message dispatcher's batch order (NET-2): a dialog's message can complete at the target
just before its predecessor — through a forwarder most of all — and both land in one batch of
the dispatcher. Microsoft: a dialog's messages are delivered exactly once, in order
(https://learn.microsoft.com/en-us/sql/database-engine/service-broker/conversations)."""

from __future__ import annotations

import uuid
from typing import cast

from servicebroker.transport.inbound import Completed
from servicebroker.transport.peer import PeerConnection
from servicebroker.transport.receiving import in_sequence
from servicebroker.transport.wire import MessageHeader


def completed(conversation: bytes, initiator: bool, seq: int) -> Completed:
    h = MessageHeader(
        conversation, initiator, seq, uuid.uuid4().bytes, "//a", "//b", "C", "M", "N",
        uuid.UUID(int=1), None, 5, None, 0, 1,
    )  # fmt: skip
    return Completed(h, b"")


def test_net2_a_batch_is_taken_in_sequence_order_per_conversation_side() -> None:
    """NET-2 (in order, exactly once): the batch is taken with each conversation side's
    messages in sequence order, in the places that side's messages had (other sides keep
    theirs), so a message that completed before its predecessor is taken right after it in the
    same commit instead of held back until TICK-2c deletes it and its sender retries."""
    conn = cast(PeerConnection, object())
    d1, d2 = b"1" * 16, b"2" * 16
    order = [(d1, True, 4), (d2, True, 7), (d1, True, 3), (d1, False, 0), (d2, True, 6)]
    inbox = [(conn, completed(*key)) for key in order]
    taken = [
        (e[1].header.conversation_id, e[1].header.is_initiator, e[1].header.sequence)
        for e in in_sequence(inbox)
    ]
    assert taken == [(d1, True, 3), (d2, True, 6), (d1, True, 4), (d1, False, 0), (d2, True, 7)]
