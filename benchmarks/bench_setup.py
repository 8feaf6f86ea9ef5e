"""The broker the SEND/RECEIVE benchmarks share (imported by the scripts beside it)."""

from __future__ import annotations

import uuid

from servicebroker import Broker

TARGET_QUEUE = "tq"
"""The queue the dialogs' messages arrive on."""


def open_dialogs(broker: Broker, count: int) -> list[uuid.UUID]:
    """Create message type ``M``, contract ``C`` (M sent by the initiator), queues ``iq`` and
    ``tq``, services ``//i`` and ``//t`` on them, and begin ``count`` dialogs from ``//i`` to
    ``//t`` — each its own conversation group — in one transaction; returns their handles."""
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "INITIATOR"})
    broker.create_queue("iq")
    broker.create_queue(TARGET_QUEUE)
    broker.create_service("//i", queue="iq")
    broker.create_service("//t", queue=TARGET_QUEUE, contracts=["C"])
    with broker.transaction() as tx:
        return [tx.begin_dialog("//i", "//t", contract="C") for _ in range(count)]
