"""``diagnose RUNTIME``: the problems a running broker has now, as ssbdiagnose's runtime report
looks for the events that stop conversations
(docs/tools/ssbdiagnose/ssbdiagnose-utility-service-broker.md): messages waiting in the
transmission queue and why (their ``transmission_status``, how long), disabled queues (poison
message handling or ALTER QUEUE), conversation endpoints in ERROR or past their lifetime, queue
monitors NOTIFIED with no reader, activated queues no started broker monitors, and stream claims
past their time-out that nobody released.

:func:`runtime_findings` is pure: the queues' figures, the transmission queue, the conversation
endpoints, the stream claims and ``now`` in; findings out. :func:`check_runtime` reads them from
a broker: the queues from :func:`servicebroker.engine.operations.overview` (every process's monitors).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from ..clock import Clock
from ..engine.claims import GroupClaim
from ..engine.operations import Operations, overview
from ..views import ConversationEndpointRow, TransmissionQueueRow, Views
from .findings import Finding, finding


class _Watched(Protocol):
    """What RUNTIME reads of a broker (a :class:`~servicebroker.Broker` has it)."""

    @property
    def operations(self) -> Operations: ...
    @property
    def views(self) -> Views: ...
    @property
    def clock(self) -> Clock: ...


__all__ = [
    "WAITING_AFTER",
    "QueueFigures",
    "check_runtime",
    "classify_status",
    "runtime_findings",
]

WAITING_AFTER = 60.0
"""Seconds a message on its way (``transmission_status`` "") may wait in the transmission queue
before RUNTIME reports it: the transport retries a message at +4, +8, … s (NET-4), so a minute
means its connection is not getting through."""

BEHIND = "waiting behind earlier messages of the conversation"
_QUEUE_OFF = re.compile(r"queue (['\"])(?P<name>.*)\1 is disabled", re.IGNORECASE)


class QueueFigures(Protocol):
    """What RUNTIME reads of a queue (:class:`servicebroker.engine.operations.QueueOverview` has it)."""

    @property
    def queue_name(self) -> str: ...
    @property
    def is_receive_enabled(self) -> bool: ...
    @property
    def is_activation_enabled(self) -> bool: ...
    @property
    def activation_procedure(self) -> str | None: ...
    @property
    def ready_messages(self) -> int: ...
    @property
    def poison_events(self) -> int: ...
    @property
    def monitor_state(self) -> str | None: ...
    @property
    def readers_running(self) -> int: ...
    @property
    def tasks_waiting(self) -> int: ...


def classify_status(status: str) -> str | None:
    """The RUNTIME code of a transmission queue row's ``transmission_status`` text, or None for
    "" (on its way: reported only after :data:`WAITING_AFTER`) and for a message waiting behind
    an earlier one of its conversation (reported with that one).

    Returns:
        ``SBD-RUN-TRANSMISSION-QUEUE-DISABLED`` (the target queue is OFF, here or at the far
        broker), ``…-SERVICE-MISSING`` (no such target service), ``…-NO-ROUTE`` (RTE-2), or
        ``…-FAILING`` (anything else: the transport's connection, login or dialog security).
    """
    if status == "" or status == BEHIND:
        return None
    lowered = status.lower()
    if _QUEUE_OFF.search(status):
        return "SBD-RUN-TRANSMISSION-QUEUE-DISABLED"
    if "target service" in lowered and ("does not exist" in lowered or "not be found" in lowered):
        return "SBD-RUN-TRANSMISSION-SERVICE-MISSING"
    if lowered.startswith("no route matches"):
        return "SBD-RUN-TRANSMISSION-NO-ROUTE"
    return "SBD-RUN-TRANSMISSION-FAILING"


def check_runtime(broker: _Watched, *, waiting_after: float = WAITING_AFTER) -> list[Finding]:
    """ssbdiagnose's RUNTIME report on ``broker``'s database, now (on the brokers' clock, as
    :attr:`~servicebroker.engine.operations.Overview.taken_at` reads it).

    Args:
        broker: the broker to read (it need not be started: what every process publishes and
            the storage's rows are read; nothing is locked or written).
        waiting_after: seconds before a message on its way is reported (default
            :data:`WAITING_AFTER`).

    Returns:
        The findings (see :func:`runtime_findings`); empty for a healthy broker.

    Raises:
        StorageError: the database cannot be read.
    """
    seen = overview(broker)  # its time is the brokers' (the demo's clock follows 2013)
    return runtime_findings(
        seen.queues,
        broker.views.transmission_queue(),
        broker.views.conversation_endpoints(),
        broker.views.conversation_group_claims(),
        now=seen.taken_at,
        waiting_after=waiting_after,
    )


def runtime_findings(
    queues: Sequence[QueueFigures],
    transmission: Sequence[TransmissionQueueRow],
    endpoints: Sequence[ConversationEndpointRow],
    claims: Sequence[GroupClaim],
    *,
    now: datetime,
    waiting_after: float = WAITING_AFTER,
) -> list[Finding]:
    """The RUNTIME checks, pure.

    Args:
        queues: every queue's figures (:class:`QueueFigures`; ``monitor_state`` None when no
            started broker monitors the queue).
        transmission: the rows of ``sys.transmission_queue``.
        endpoints: the rows of ``sys.conversation_endpoints``.
        claims: the stream readers' conversation-group claims.
        now: the broker clock's time (UTC datetime).
        waiting_after: seconds before a message on its way (status "") is reported.

    Returns:
        Findings grouped so that a thousand stuck messages make one finding per target and
        reason, not a thousand: the transmission queue's, then the queues', the endpoints'
        and the claims'.
    """
    out = _transmission_findings(transmission, now, waiting_after)
    for q in queues:
        out.extend(_queue_findings(q))
    out.extend(_endpoint_findings(endpoints, now))
    out.extend(_claim_findings(claims, now))
    return out


@dataclass
class _Stuck:
    """Rows of one (code, from service, to service, status) group."""

    code: str
    from_service: str
    to_service: str
    status: str
    messages: int = 0
    conversations: int = 0
    oldest: datetime | None = None

    def add(self, row: TransmissionQueueRow, *, head: bool) -> None:
        self.messages += 1
        self.conversations += head
        if row.enqueue_time is not None and (self.oldest is None or row.enqueue_time < self.oldest):
            self.oldest = row.enqueue_time


def _transmission_findings(
    rows: Sequence[TransmissionQueueRow], now: datetime, waiting_after: float
) -> list[Finding]:
    """Each conversation's messages are counted under the reason its first one waits."""
    by_conversation: dict[object, list[TransmissionQueueRow]] = {}
    for row in rows:
        by_conversation.setdefault(row.conversation_handle, []).append(row)
    groups: dict[tuple[str, str, str, str], _Stuck] = {}
    for conv_rows in by_conversation.values():
        conv_rows.sort(key=lambda r: r.message_sequence_number)
        head = next((r for r in conv_rows if r.transmission_status != BEHIND), conv_rows[0])
        code = classify_status(head.transmission_status)
        if code is None:
            started = min(
                (r.enqueue_time for r in conv_rows if r.enqueue_time is not None), default=None
            )
            if started is None or now - started < timedelta(seconds=waiting_after):
                continue
            code = "SBD-RUN-TRANSMISSION-WAITING"
        key = (code, head.from_service_name, head.to_service_name, head.transmission_status)
        group = groups.setdefault(key, _Stuck(*key))
        for r in conv_rows:
            group.add(r, head=r is head)
    return [_stuck_finding(g, now) for g in groups.values()]


_FIXES = {
    "SBD-RUN-TRANSMISSION-QUEUE-DISABLED": "ALTER QUEUE [{queue}] WITH STATUS = ON at the broker "
    "that holds it (broker.alter_queue({queue!r}, status=True)); the messages are delivered "
    "then. If poison handling turned it OFF, fix what made its transactions roll back first.",
    "SBD-RUN-TRANSMISSION-SERVICE-MISSING": "CREATE SERVICE [{to}] (with the contract), or "
    "CREATE ROUTE to the broker that holds it; the messages are delivered then.",
    "SBD-RUN-TRANSMISSION-NO-ROUTE": "CREATE ROUTE … WITH SERVICE_NAME = '{to}', ADDRESS = "
    "'TCP://host:port' (broker.create_route).",
    "SBD-RUN-TRANSMISSION-FAILING": "Fix what the status says (the far broker's endpoint, the "
    "CONNECT grant, certificates, the remote service binding); the transport retries by itself. "
    "`servicebroker diagnose CONFIGURATION FROM SERVICE … TO SERVICE …` checks the set-up.",
    "SBD-RUN-TRANSMISSION-WAITING": "Check that a broker is started on this database with its "
    "endpoint STARTED and that the far broker is reachable (dm_broker_connections); "
    "`diagnose CONFIGURATION` checks the routes, endpoint and certificates.",
}


def _stuck_finding(g: _Stuck, now: datetime) -> Finding:
    waited = f"{(now - g.oldest).total_seconds():.0f} s" if g.oldest is not None else "?"
    since = g.oldest.strftime("%Y-%m-%d %H:%M:%S UTC") if g.oldest is not None else "?"
    match = _QUEUE_OFF.search(g.status)
    queue = match.group("name") if match else None
    why = g.status or "on their way to another broker, not yet acknowledged"
    return finding(
        g.code,
        f"{g.messages} message(s) of {g.conversations} conversation(s) from {g.from_service!r} "
        f"to {g.to_service!r} wait in the transmission queue, the oldest since {since} "
        f"({waited}): {why}",
        _FIXES[g.code].format(queue=queue or "<queue>", to=g.to_service),
        from_service=g.from_service,
        to_service=g.to_service,
        queue=queue,
        messages=g.messages,
        transmission_status=g.status,
        oldest=since,
    )


def _queue_findings(q: QueueFigures) -> list[Finding]:
    out = []
    if not q.is_receive_enabled:
        poison = (
            f"; poison message handling turned it OFF {q.poison_events} time(s)"
            if q.poison_events
            else ""
        )
        out.append(
            finding(
                "SBD-RUN-QUEUE-DISABLED",
                f"Queue {q.queue_name!r} is OFF (STATUS = OFF){poison}: RECEIVE fails and "
                f"messages sent to it wait in the transmission queue ({q.ready_messages} "
                "message(s) on it).",
                f"Find the cause (a poison message: peek the queue; fix the procedure), then "
                f"ALTER QUEUE [{q.queue_name}] WITH STATUS = ON — "
                f"broker.alter_queue({q.queue_name!r}, status=True).",
                queue=q.queue_name,
                poison_events=q.poison_events,
                ready_messages=q.ready_messages,
            )
        )
    if q.monitor_state == "NOTIFIED" and q.readers_running == 0 and q.ready_messages:
        out.append(
            finding(
                "SBD-RUN-MONITOR-NOTIFIED-NO-READERS",
                f"The monitor of queue {q.queue_name!r} is NOTIFIED (a QUEUE_ACTIVATION was "
                f"raised or a procedure started) but no reader is running or has RECEIVEd "
                f"since; {q.ready_messages} message(s) wait.",
                "Check the external activator (servicebroker activator) or the event "
                "notification's service; the activated procedure's log shows why it ended.",
                queue=q.queue_name,
                ready_messages=q.ready_messages,
                tasks_waiting=q.tasks_waiting,
            )
        )
    elif (
        q.is_receive_enabled
        and q.is_activation_enabled
        and q.activation_procedure is not None
        and q.monitor_state is None
        and q.ready_messages
    ):
        out.append(
            finding(
                "SBD-RUN-QUEUE-UNMONITORED",
                f"Queue {q.queue_name!r} has activation ON and {q.ready_messages} message(s), "
                "but no started broker monitors it: nothing activates its procedure "
                f"{q.activation_procedure!r}.",
                "Start a broker on this database (broker.start(), or `servicebroker serve`).",
                queue=q.queue_name,
                ready_messages=q.ready_messages,
            )
        )
    return out


def _endpoint_findings(rows: Sequence[ConversationEndpointRow], now: datetime) -> list[Finding]:
    errored: dict[tuple[str, str, str], list[ConversationEndpointRow]] = {}
    expired: dict[tuple[str, str, str], list[ConversationEndpointRow]] = {}
    for r in rows:
        key = (r.service_name, r.far_service, r.service_contract_name)
        if r.state == "ER":
            errored.setdefault(key, []).append(r)
        elif r.state != "CD" and r.lifetime is not None and r.lifetime <= now:
            expired.setdefault(key, []).append(r)
    out = []
    for (service, far, contract), group in errored.items():
        out.append(
            finding(
                "SBD-RUN-ENDPOINT-ERROR",
                f"{len(group)} conversation endpoint(s) of service {service!r} with {far!r} on "
                f"contract {contract!r} are in ERROR (e.g. {_handles(group)}): an Error message "
                "waits on their queue and the endpoints stay until the application ends them.",
                "RECEIVE the Error message and END CONVERSATION; or END CONVERSATION … WITH "
                "CLEANUP (tx.end_conversation(handle, cleanup=True)).",
                service=service,
                far_service=far,
                contract=contract,
                endpoints=len(group),
                conversation_handles=_handles(group),
            )
        )
    for (service, far, contract), group in expired.items():
        out.append(
            finding(
                "SBD-RUN-ENDPOINT-LIFETIME-PASSED",
                f"{len(group)} conversation endpoint(s) of service {service!r} with {far!r} on "
                f"contract {contract!r} are past their LIFETIME but not in ERROR (e.g. "
                f"{_handles(group)}): no started broker has run the timer since.",
                "Start a broker on this database (its timer errors them, DLG lifetimes); "
                "or END CONVERSATION … WITH CLEANUP.",
                service=service,
                far_service=far,
                contract=contract,
                endpoints=len(group),
                conversation_handles=_handles(group),
            )
        )
    return out


def _handles(group: Iterable[ConversationEndpointRow], shown: int = 3) -> str:
    handles = [str(r.conversation_handle) for r in group]
    more = f" and {len(handles) - shown} more" if len(handles) > shown else ""
    return ", ".join(handles[:shown]) + more


def _claim_findings(claims: Sequence[GroupClaim], now: datetime) -> list[Finding]:
    by_queue: dict[tuple[str, str], list[GroupClaim]] = {}
    for c in claims:
        if isinstance(c.expires_at, datetime) and c.expires_at <= now:
            by_queue.setdefault((c.queue_name, c.reader), []).append(c)
    return [
        finding(
            "SBD-RUN-CLAIM-EXPIRED",
            f"Stream reader {reader!r} holds {len(group)} conversation group claim(s) on queue "
            f"{queue!r} past their time-out (the oldest expired "
            f"{min(_expiry(c) for c in group):%Y-%m-%d %H:%M:%S} UTC): no started broker has "
            "released them, so RECEIVE skips those groups.",
            "Start a broker on this database (it releases expired claims every second), or "
            "restart the streaming query so that it acknowledges its batch.",
            queue=queue,
            reader=reader,
            claims=len(group),
        )
        for (queue, reader), group in by_queue.items()
    ]


def _expiry(claim: GroupClaim) -> datetime:
    assert isinstance(claim.expires_at, datetime)
    return claim.expires_at
