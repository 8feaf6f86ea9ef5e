"""Event notifications (EVT-1): a registration whose notification cannot be sent is logged by
name and skipped; the others are still sent."""

from __future__ import annotations

import logging

import pytest

from servicebroker import Broker, ConversationError
from servicebroker.activation import notifications as event_notifications
from servicebroker.catalog import EventNotificationDef
from servicebroker.engine.context import BrokerContext

from .conftest import Pair
from .test_activation import NOTIFY, add_activator_service, notifications, send


def test_a_registration_that_cannot_be_sent_is_logged_and_the_others_are_sent(
    broker: Broker, pair: Pair, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # rule EVT-1, rule POI-1
    add_activator_service(broker)
    for name in ("refused", "delivered"):
        broker.create_event_notification(
            name, queue=pair.tq, event="BROKER_QUEUE_DISABLED", to_service=NOTIFY
        )
    real = event_notifications._send

    def refuse_one(context: BrokerContext, en: EventNotificationDef, body: bytes) -> None:
        if en.name == "refused":
            raise ConversationError("the far service refused the dialog")
        real(context, en, body)

    monkeypatch.setattr(event_notifications, "_send", refuse_one)
    send(broker, pair, 1, 1)
    with caplog.at_level(logging.WARNING, logger="servicebroker.activation.notifications"):
        for _ in range(5):  # POI-1: the fifth rollback in a row disables the queue
            tx = broker.transaction()
            assert tx.receive(pair.tq)
            tx.rollback()
    (n,) = notifications(broker)
    assert n["EventType"] == "BROKER_QUEUE_DISABLED" and n["ObjectName"] == pair.tq
    (record,) = [r for r in caplog.records if "refused" in r.getMessage()]
    assert "BROKER_QUEUE_DISABLED" in record.getMessage()
    assert "the far service refused the dialog" in record.getMessage()
