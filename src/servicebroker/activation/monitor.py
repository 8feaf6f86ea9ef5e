"""The queue monitor's decisions, pure (ACT-1..9, TICK-2a): state, inputs and ``now`` in, new
state and actions out. No locks, no storage, no threads: :mod:`.service` gathers the inputs
and carries the actions out.

Activation is two steps (ACT-1): :func:`activation_necessary` decides whether a new reader would
have useful work (ACT-5); :func:`internal_activation_occurs` (ACT-7, ACT-9) whether a reader is
started, and :func:`external_notification_due` (ACT-8) whether a QUEUE_ACTIVATION notification
is raised. :func:`decide` is one monitor check; :func:`on_received`, :func:`on_altered`,
:func:`on_launch_failed` and :func:`on_exit` are the other events that change a monitor
(ACT-4b, ACT-4e, ACT-9).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

__all__ = [
    "EMPTY_RECEIVE_WINDOW",
    "Actions",
    "ActivatedTask",
    "CheckInputs",
    "MonitorInputs",
    "MonitorState",
    "QueueMonitor",
    "Reason",
    "Trigger",
    "activation_necessary",
    "decide",
    "external_notification_due",
    "internal_activation_occurs",
    "monitor_state",
    "on_altered",
    "on_exit",
    "on_launch_failed",
    "on_received",
]

EMPTY_RECEIVE_WINDOW = 5.0
"""ACT-5b: seconds since a RECEIVE without WHERE last came back empty before messages count as
accumulating ("a few seconds"; the broker setting ``empty_receive_window``)."""


class Trigger(enum.Enum):
    """Why a queue monitor checks (ACT-4, TICK-2a)."""

    MESSAGE_ARRIVED = "a new message arrived"  # ACT-4a
    RECEIVE = "a RECEIVE ran"  # ACT-4b
    ROLLBACK = "a receiving transaction rolled back"  # ACT-4c
    PROCEDURES_EXITED = "all activated procedures exited"  # ACT-4d
    QUEUE_ALTERED = "the queue was altered"  # ACT-4e
    TICK = "timer tick"  # TICK-2a
    POLL = "a look for other processes' commits"  # ACT-4a by polling, between ticks


@dataclass(frozen=True)
class MonitorInputs:
    """What a monitor knows when it decides (ACT-3), all processes included.

    ``has_unread``: the queue holds messages ready for RECEIVE (locked groups count).
    ``arrived_on_empty``: the message that triggered the check arrived on a queue without unread
    messages. ``running``: activated procedures running for the queue. ``waiting``: sessions
    waiting in RECEIVE or GET CONVERSATION GROUP without WHERE. ``last_empty_rowset_time``: when
    such a call last returned nothing (broker-clock seconds, or None). ``now``: broker time.
    ``window``: :data:`EMPTY_RECEIVE_WINDOW` or the broker's setting.
    """

    has_unread: bool
    arrived_on_empty: bool
    running: int
    waiting: int
    last_empty_rowset_time: float | None
    now: float
    window: float = EMPTY_RECEIVE_WINDOW


class Reason(enum.Enum):
    """Why activation is necessary (ACT-5)."""

    NEW_WORK = "5a: a message arrived on a queue without unread messages, no reader running"
    ACCUMULATING = "5b: unread messages accumulate, nobody waits, no recent empty RECEIVE"


def activation_necessary(trigger: Trigger, m: MonitorInputs) -> Reason | None:
    """ACT-5: would a new queue reader have useful work?

    (a) a new message arrived on a queue that held no unread messages and no activated
    procedure runs; or (b) unread messages wait, nobody waits in RECEIVE or GET CONVERSATION
    GROUP without WHERE, and no such call came back empty within the last ``window`` seconds —
    messages accumulate because the readers cannot keep up. Counting waiting readers (not
    messages) is what keeps a queue of one locked conversation at one busy reader plus one
    waiting one (ACT-6).
    """
    if trigger is Trigger.MESSAGE_ARRIVED and m.arrived_on_empty and m.running == 0:
        return Reason.NEW_WORK
    if not m.has_unread or m.waiting > 0:
        return None
    if m.last_empty_rowset_time is None or m.now - m.last_empty_rowset_time >= m.window:
        return Reason.ACCUMULATING
    return None


def internal_activation_occurs(
    reason: Reason,
    *,
    running: int,
    max_queue_readers: int,
    suppressed: bool,
    last_activated: float | None,
    now: float,
    interval: float,
    at_tick: bool = True,
) -> bool:
    """ACT-7: start a new instance while fewer than MAX_QUEUE_READERS run — unless the monitor
    stopped re-activating after a procedure exited without receiving anything (ACT-9). Readers
    for an accumulating queue (5b) are added one per timer interval at most, so the count
    follows the load instead of jumping to the maximum; new work on an idle queue (5a) starts a
    reader at once.

    While readers run, a 5b reader is added only at a timer notification (``at_tick``,
    TICK-2a: each monitor adjusts its readers to the load). The other checks come at the
    moments a running reader hands a group over: the RECEIVE that just took it (ACT-4b) runs
    while the reader that committed has not yet entered its next RECEIVE, so nobody counts as
    waiting for an instant, and a start then would add a reader with nothing to do — a third on
    one conversation (ACT-6). With no reader running there is no hand-over: every check may
    start one.
    """
    if suppressed or running >= max_queue_readers:
        return False
    if reason is Reason.NEW_WORK:
        return True
    if running > 0 and not at_tick:
        return False
    return last_activated is None or now - last_activated >= interval


def monitor_state(
    *, running: int, has_unread: bool, received_since_activation: bool, notified: bool = False
) -> str:
    """The ``dm_broker_queue_monitors.state`` of a monitor: INACTIVE when nothing runs and
    nothing waits, NOTIFIED when it activated a procedure or raised a QUEUE_ACTIVATION
    notification and no RECEIVE has run since, RECEIVES_OCCURRING when readers are receiving."""
    if notified and has_unread and not received_since_activation:
        return "NOTIFIED"
    if running == 0 and not has_unread:
        return "INACTIVE"
    if running and not received_since_activation:
        return "NOTIFIED"
    if running:
        return "RECEIVES_OCCURRING"
    return "INACTIVE"


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


@dataclass(frozen=True)
class MonitorState:
    """What one queue monitor remembers between checks.

    ``running``: readers started and not yet exited (reserved at the decision); ``peak`` the
    most at once; ``activations`` how many were started; ``last_activated`` when the last was
    (broker seconds); ``suppressed``: a procedure exited without receiving, so no new one is
    started until new work arrives or the queue is altered (ACT-9), ``suppressed_at`` the
    message sequence then; ``received_since_activation``: a RECEIVE returned messages since the
    last start or notification; ``seen_unread``: whether the queue held unread messages at the
    last check (None before the first); ``last_notified``: when a QUEUE_ACTIVATION notification
    was last raised; ``rearmed``: a RECEIVE ran since (ACT-8).
    """

    running: int = 0
    peak: int = 0
    activations: int = 0
    last_activated: float | None = None
    suppressed: bool = False
    suppressed_at: int = 0
    received_since_activation: bool = False
    seen_unread: bool | None = None
    last_notified: float | None = None
    rearmed: bool = False


@dataclass(frozen=True)
class CheckInputs:
    """What one check reads from storage and the catalog (every process included).

    ``trigger`` why it checks; ``has_unread``, ``arrived_on_empty``, ``waiting``,
    ``last_empty_rowset_time`` as in :class:`MonitorInputs`; ``message_sequence``: the highest
    queuing order given so far (read only while the monitor is suppressed, else None);
    ``last_receive``: the latest RECEIVE on the queue from any process (read only for external
    activation); ``internal``/``external``: the queue has an activation procedure / a
    QUEUE_ACTIVATION notification (ACT-2); ``max_queue_readers``; ``window`` (ACT-5b),
    ``interval`` (ACT-7: seconds between 5b starts), ``external_timeout`` (ACT-8), seconds.
    """

    trigger: Trigger
    has_unread: bool
    arrived_on_empty: bool
    waiting: int
    last_empty_rowset_time: float | None
    message_sequence: int | None
    last_receive: float | None
    internal: bool
    external: bool
    max_queue_readers: int
    window: float = EMPTY_RECEIVE_WINDOW
    interval: float = 5.0
    external_timeout: float = 60.0


@dataclass(frozen=True)
class Actions:
    """What a check decided: start one reader (its slot already counted in the new state's
    ``running``), raise a QUEUE_ACTIVATION notification, and why activation was necessary."""

    start_reader: bool = False
    raise_notification: bool = False
    reason: Reason | None = None


def decide(state: MonitorState, inputs: CheckInputs, now: float) -> tuple[MonitorState, Actions]:
    """One monitor check (ACT-4, TICK-2a): the new state and what to do.

    - Unread messages where the monitor last saw none count as a new arrival (ACT-4a, seen by
      polling when another process committed them); a new arrival lifts an ACT-9 suppression,
      as do messages that arrived since the suppression began (``message_sequence``).
    - ACT-5 decides whether activation is necessary; then, for external activation, ACT-8
      whether a notification is due (raising it re-arms nothing until a RECEIVE runs, and
      clears ``received_since_activation``); for internal activation, ACT-7/ACT-9 whether a
      reader starts (reserving its slot: ``running`` + 1, never above MAX_QUEUE_READERS).
    """
    trigger, arrived_on_empty = inputs.trigger, inputs.arrived_on_empty
    if inputs.has_unread and state.seen_unread is False and trigger is not Trigger.MESSAGE_ARRIVED:
        trigger, arrived_on_empty = Trigger.MESSAGE_ARRIVED, True
    suppressed = state.suppressed
    if trigger is Trigger.MESSAGE_ARRIVED:
        suppressed = False  # new work: the procedure may be useful again (ACT-9)
    elif (
        suppressed
        and inputs.message_sequence is not None
        and inputs.message_sequence > state.suppressed_at
    ):
        suppressed = False  # messages arrived since, maybe from another process (ACT-9)
    state = replace(state, seen_unread=inputs.has_unread, suppressed=suppressed)
    reason = activation_necessary(
        trigger,
        MonitorInputs(
            has_unread=inputs.has_unread,
            arrived_on_empty=arrived_on_empty,
            running=state.running,
            waiting=inputs.waiting,
            last_empty_rowset_time=inputs.last_empty_rowset_time,
            now=now,
            window=inputs.window,
        ),
    )
    if reason is None:
        return state, Actions()
    notify = inputs.external and external_notification_due(
        last_notified=state.last_notified,
        last_receive=inputs.last_receive,
        now=now,
        timeout=inputs.external_timeout,
        rearmed=state.rearmed,
    )
    if notify:
        state = replace(state, last_notified=now, rearmed=False, received_since_activation=False)
    start = (
        inputs.internal
        and internal_activation_occurs(
            reason,
            running=state.running,
            max_queue_readers=inputs.max_queue_readers,
            suppressed=state.suppressed,
            last_activated=state.last_activated,
            now=now,
            interval=inputs.interval,
            at_tick=trigger is Trigger.TICK,
        )
        and state.running < inputs.max_queue_readers
    )
    if start:
        state = replace(
            state,
            running=state.running + 1,
            peak=max(state.peak, state.running + 1),
            activations=state.activations + 1,
            last_activated=now,
            received_since_activation=False,
        )
    return state, Actions(start_reader=start, raise_notification=notify, reason=reason)


def on_received(state: MonitorState) -> MonitorState:
    """A RECEIVE returned messages on the queue (ACT-4b): readers are receiving, and external
    activation is re-armed (ACT-8)."""
    return replace(state, received_since_activation=True, rearmed=True)


def on_altered(state: MonitorState) -> MonitorState:
    """ALTER QUEUE (ACT-4e): a suppressed procedure may be activated again (ACT-9)."""
    return replace(state, suppressed=False)


def on_launch_failed(state: MonitorState) -> MonitorState:
    """A reserved reader could not be started (its procedure cannot be imported)."""
    return replace(state, running=max(0, state.running - 1))


def on_exit(state: MonitorState, *, useful: bool, message_sequence: int | None) -> MonitorState:
    """An activated procedure returned (ACT-9). One that received nothing suppresses the
    monitor until work arrives after ``message_sequence`` (the highest queuing order when it
    exited) or the queue is altered: the broker never stops a procedure, it only stops
    starting new ones that would find nothing."""
    state = replace(state, running=max(0, state.running - 1))
    if not useful and message_sequence is not None:
        state = replace(state, suppressed=True, suppressed_at=message_sequence)
    return state


@dataclass(frozen=True)
class QueueMonitor:
    """One queue monitor (a ``dm_broker_queue_monitors`` row, ACT-2, ACT-3)."""

    queue_id: int
    queue_name: str
    state: str
    last_empty_rowset_time: float | None
    last_activated_time: float | None
    tasks_waiting: int
    running: int
    peak_running: int
    activations: int
    suppressed: bool


@dataclass(frozen=True)
class ActivatedTask:
    """A running activated procedure (a ``dm_broker_activated_tasks`` row, ACT-7)."""

    spid: int
    queue_id: int
    queue_name: str
    procedure_name: str
    started: float
