"""Event notifications (EVT-1): QUEUE_ACTIVATION for external activation (ACT-8) and
BROKER_QUEUE_DISABLED for poison-message handling (POI-1).

Each notification is a message of type ``http://schemas.microsoft.com/SQL/Notifications/
EventNotification`` on a dialog under the built-in contract ``…/PostEventNotification``, from the
built-in ``…/EventNotificationService`` to the registration's service, with SQL Server's XML
body::

    <EVENT_INSTANCE><EventType>QUEUE_ACTIVATION</EventType><PostTime>…</PostTime>
      <SPID>…</SPID><ServerName>…</ServerName><LoginName>…</LoginName><UserName>dbo</UserName>
      <DatabaseName>…</DatabaseName><SchemaName>dbo</SchemaName><ObjectName>queue</ObjectName>
      <ObjectType>QUEUE</ObjectType></EVENT_INSTANCE>

One dialog is reused per registration while it is open; when the receiving side ends it, the
next notification begins a new one.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .catalog import (
    EVENT_NOTIFICATION,
    EVENT_NOTIFICATION_SERVICE,
    POST_EVENT_NOTIFICATION,
    EventNotificationDef,
    QueueDef,
)
from .errors import BrokerError

if TYPE_CHECKING:
    from .broker import Broker

__all__ = ["event_instance", "external_notification_due", "raise_event"]

SYSTEM_QUEUE = "sys_event_notifications"


def external_notification_due(
    *,
    last_notified: float | None,
    last_receive: float | None,
    now: float,
    timeout: float,
    rearmed: bool = False,
) -> bool:
    """ACT-8: raise another QUEUE_ACTIVATION notification? Yes if none was raised yet, if an
    application called RECEIVE on the queue since the last one (``rearmed``: seen in this
    process; ``last_receive`` later than ``last_notified``: seen from another), or if the
    response time-out (``timeout`` seconds) expired; otherwise the broker stays quiet."""
    if last_notified is None or rearmed:
        return True
    if last_receive is not None and last_receive > last_notified:
        return True
    return now - last_notified >= timeout


def event_instance(event_type: str, post_time: float, database_name: str, queue_name: str) -> bytes:
    """The XML body of an event notification about a queue (EVT-1), UTF-8 encoded."""
    root = ET.Element("EVENT_INSTANCE")
    stamp = datetime.fromtimestamp(post_time, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    for tag, value in (
        ("EventType", event_type),
        ("PostTime", stamp),
        ("SPID", str(threading.get_ident() % 32768)),
        ("ServerName", socket.gethostname()),
        ("LoginName", os.environ.get("USER", "servicebroker")),
        ("UserName", "dbo"),
        ("DatabaseName", database_name),
        ("SchemaName", "dbo"),
        ("ObjectName", queue_name),
        ("ObjectType", "QUEUE"),
    ):
        ET.SubElement(root, tag).text = value
    text: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=False)
    return text


def _clean_system_queue(broker: Broker) -> None:
    """End our side of notification dialogs the receivers ended (EndDialog/Error arrived)."""
    with broker.transaction() as tx:
        for _ in range(100):
            messages = tx.receive(SYSTEM_QUEUE)
            if not messages:
                return
            for handle in dict.fromkeys(m.conversation_handle for m in messages):
                tx.end_conversation(handle)


def raise_event(broker: Broker, queue: QueueDef, event_type: str) -> int:
    """Send ``event_type`` about ``queue`` to every service registered for it; returns how many
    notifications were sent. A registration whose service cannot take it is skipped (the message
    waits in the transmission queue like any other)."""
    catalog = broker._catalog_now()
    registrations = catalog.notifications(queue.queue_id, event_type)
    if not registrations:
        return 0
    _clean_system_queue(broker)
    body = event_instance(event_type, broker.clock.now(), broker.database_name, queue.name)
    sent = 0
    for en in registrations:
        try:
            _send(broker, en, body)
            sent += 1
        except BrokerError:
            continue
    return sent


def _send(broker: Broker, en: EventNotificationDef, body: bytes) -> None:
    with broker.transaction() as tx:
        handle: uuid.UUID | None = None
        if en.conversation_handle is not None:
            row = tx._conn.get_endpoint(en.conversation_handle)
            if row is not None and row.state in ("SO", "CO"):
                handle = uuid.UUID(bytes=en.conversation_handle)
        if handle is None:
            handle = tx.begin_dialog(
                EVENT_NOTIFICATION_SERVICE, en.to_service, contract=POST_EVENT_NOTIFICATION
            )
            tx._remember_notification_dialog(en.event_notification_id, handle)
        tx.send(handle, EVENT_NOTIFICATION, body)
