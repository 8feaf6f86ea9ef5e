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

import logging
import os
import socket
import threading
import uuid
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from ..catalog import (
    EVENT_NOTIFICATION,
    EVENT_NOTIFICATION_SERVICE,
    POST_EVENT_NOTIFICATION,
    EventNotificationDef,
    QueueDef,
)
from ..dialogs import State
from ..engine.context import BrokerContext
from ..engine.transaction import Transaction
from ..errors import BrokerError

__all__ = ["event_instance", "raise_event"]

log = logging.getLogger(__name__)

SYSTEM_QUEUE = "sys_event_notifications"


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


def _clean_system_queue(context: BrokerContext) -> None:
    """End our side of notification dialogs the receivers ended (EndDialog/Error arrived)."""
    with Transaction(context) as tx:
        for _ in range(100):
            messages = tx.receive(SYSTEM_QUEUE)
            if not messages:
                return
            for handle in dict.fromkeys(m.conversation_handle for m in messages):
                tx.end_conversation(handle)


def raise_event(context: BrokerContext, queue: QueueDef, event_type: str) -> int:
    """Send ``event_type`` about ``queue`` to every service registered for it (EVT-1); returns
    how many notifications were sent. A registration whose notification cannot be sent is
    logged with its name and the error, and skipped; the others are still sent.

    Raises:
        StorageError: the database failed.
    """
    catalog = context.catalog.current()
    registrations = catalog.notifications(queue.queue_id, event_type)
    if not registrations:
        return 0
    _clean_system_queue(context)
    body = event_instance(
        event_type, context.clock.now(), context.storage.database_name, queue.name
    )
    sent = 0
    for en in registrations:
        try:
            _send(context, en, body)
            sent += 1
        except BrokerError as exc:
            log.warning(
                "event notification %s (%s on queue %s) to service %s not sent: %s",
                en.name,
                event_type,
                queue.name,
                en.to_service,
                exc,
            )
    return sent


def _send(context: BrokerContext, en: EventNotificationDef, body: bytes) -> None:
    with Transaction(context) as tx:
        handle: uuid.UUID | None = None
        if en.conversation_handle is not None:
            known = uuid.UUID(bytes=en.conversation_handle)
            if tx.conversation_state(known) in (State.SO, State.CO):
                handle = known
        if handle is None:
            handle = tx.begin_dialog(
                EVENT_NOTIFICATION_SERVICE, en.to_service, contract=POST_EVENT_NOTIFICATION
            )
            tx.remember_notification_dialog(en.event_notification_id, handle)
        tx.send(handle, EVENT_NOTIFICATION, body)
