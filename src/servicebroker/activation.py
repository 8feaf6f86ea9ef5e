"""Queue monitors and activation (ACT-1..9, TICK-2a).

Activation is two steps (ACT-1): :func:`activation_necessary` decides whether a new reader would
have useful work (ACT-5), then :func:`internal_activation_occurs` (ACT-7, ACT-9) whether one is
started. Both are pure functions of a :class:`MonitorInputs` snapshot and ``now``; the
:class:`ActivationService` is the thin shell that gathers the inputs — waits and empty RECEIVEs
from every process through the storage's activity store — on each ACT-4 event and each timer
tick, and runs procedures on their own threads.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .catalog import ActivationContext, CatalogSnapshot, Procedure, QueueDef, resolve_procedure
from .errors import BrokerError
from .notifications import external_notification_due, raise_event

if TYPE_CHECKING:
    from .broker import Broker

__all__ = [
    "EMPTY_RECEIVE_WINDOW",
    "ActivatedTask",
    "ActivationService",
    "MonitorInputs",
    "QueueMonitor",
    "Reason",
    "Trigger",
    "activation_necessary",
    "internal_activation_occurs",
    "monitor_state",
]

log = logging.getLogger(__name__)

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
) -> bool:
    """ACT-7: start a new instance while fewer than MAX_QUEUE_READERS run — unless the monitor
    stopped re-activating after a procedure exited without receiving anything (ACT-9). Readers
    for an accumulating queue (5b) are added one per timer interval at most, so the count
    follows the load instead of jumping to the maximum; new work on an idle queue (5a) starts a
    reader at once."""
    if suppressed or running >= max_queue_readers:
        return False
    if reason is Reason.NEW_WORK:
        return True
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


class _Monitor:
    __slots__ = (
        "activations",
        "last_activated",
        "last_notified",
        "peak",
        "rearmed",
        "received_since_activation",
        "running",
        "seen_unread",
        "suppressed",
        "suppressed_at",
    )

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.activations = 0
        self.last_activated: float | None = None
        self.suppressed = False
        self.suppressed_at = 0
        self.received_since_activation = False
        self.seen_unread: bool | None = None
        self.last_notified: float | None = None
        self.rearmed = False


def monitored(catalog: CatalogSnapshot, queue: QueueDef) -> tuple[bool, bool]:
    """(internal, external): whether the queue has a monitor for internal activation
    (activation STATUS ON with a procedure) and for external activation (a QUEUE_ACTIVATION
    event notification) (ACT-2)."""
    internal = queue.activation_enabled and bool(queue.activation_procedure)
    external = bool(catalog.notifications(queue.queue_id, "QUEUE_ACTIVATION"))
    return internal, external


class ActivationService:
    """The monitors of one broker and the activated procedures it started.

    Args:
        broker: the broker.
        empty_receive_window: ACT-5b's window, seconds (default 5).
    """

    def __init__(
        self,
        broker: Broker,
        empty_receive_window: float = EMPTY_RECEIVE_WINDOW,
        interval: float = 5.0,
        external_activation_timeout: float = 60.0,
    ) -> None:
        self._broker = broker
        self.empty_receive_window = empty_receive_window
        self.interval = interval
        self.external_activation_timeout = external_activation_timeout
        self.notifications_raised = 0
        self._lock = threading.Lock()
        self._monitors: dict[int, _Monitor] = {}
        self._tasks: dict[int, ActivatedTask] = {}
        self._received: dict[int, bool] = {}
        self._threads: list[threading.Thread] = []
        self._procedures: dict[str, Procedure] = {}
        self._check_lock = threading.Lock()
        self.enabled = False

    def register_procedure(self, queue_name: str, procedure: Procedure | None) -> None:
        """Remember a callable procedure given to create_queue/alter_queue in this process."""
        with self._lock:
            if procedure is None:
                self._procedures.pop(queue_name, None)
            else:
                self._procedures[queue_name] = procedure

    def _monitor(self, queue_id: int) -> _Monitor:
        mon = self._monitors.get(queue_id)
        if mon is None:
            mon = self._monitors[queue_id] = _Monitor()
        return mon

    # -- ACT-4 events --------------------------------------------------------------------
    def received(self, queue_id: int) -> None:
        """A RECEIVE returned messages on the queue (ACT-4b); marks the calling activated
        procedure as useful (ACT-9)."""
        ident = threading.get_ident()
        with self._lock:
            mon = self._monitor(queue_id)
            mon.received_since_activation = True
            mon.rearmed = True  # ACT-8: a RECEIVE re-arms external activation
            if ident in self._received:
                self._received[ident] = True

    def altered(self, queue_id: int) -> None:
        """ALTER QUEUE (ACT-4e): the monitor may re-activate a suppressed procedure (ACT-9)."""
        with self._lock:
            self._monitor(queue_id).suppressed = False
        self.check({queue_id}, Trigger.QUEUE_ALTERED)

    def check(
        self,
        queue_ids: set[int] | None = None,
        trigger: Trigger = Trigger.TICK,
        arrived_on_empty: frozenset[int] = frozenset(),
    ) -> None:
        """Decide for each queue (all monitored ones when None) and activate where it occurs."""
        if not self.enabled:
            return
        broker = self._broker
        catalog = broker._catalog_now()
        starts: list[QueueDef] = []
        notify: list[QueueDef] = []
        with self._check_lock:
            for queue in catalog.queues_by_id.values():
                if queue_ids is not None and queue.queue_id not in queue_ids:
                    continue
                internal, external = monitored(catalog, queue)
                if queue.status and (internal or external):
                    start, raise_ = self._decide(
                        queue, trigger, queue.queue_id in arrived_on_empty, internal, external
                    )
                    if start:
                        starts.append(queue)
                    if raise_:
                        notify.append(queue)
        # act outside the lock, on the task handlers: a notification's own commit makes
        # monitors check again; the reader slot of a start was reserved by the decision
        for queue in notify:
            broker.tasks.submit(functools.partial(self._notify, queue))
        for queue in starts:
            broker.tasks.submit(functools.partial(self._launch, queue))

    def _decide(
        self,
        queue: QueueDef,
        trigger: Trigger,
        arrived_on_empty: bool,
        internal: bool,
        external: bool,
    ) -> tuple[bool, bool]:
        """(start a procedure, raise a QUEUE_ACTIVATION notification) for one queue."""
        broker = self._broker
        activity = broker._storage.activity
        has_unread = broker._queue_has_ready(queue.queue_id)
        with self._lock:
            mon = self._monitor(queue.queue_id)
            if has_unread and mon.seen_unread is False and trigger is not Trigger.MESSAGE_ARRIVED:
                # messages appeared since the monitor last saw the queue empty: committed by
                # another process (ACT-4a seen by polling)
                trigger, arrived_on_empty = Trigger.MESSAGE_ARRIVED, True
            mon.seen_unread = has_unread
            if trigger is Trigger.MESSAGE_ARRIVED:
                mon.suppressed = False  # new work: the procedure may be useful again (ACT-9)
            suppressed_at = mon.suppressed_at if mon.suppressed else None
        if suppressed_at is not None and broker._message_sequence() > suppressed_at:
            with self._lock:
                mon.suppressed = False  # messages arrived since, maybe from another process (ACT-9)
        with self._lock:
            running, suppressed, last_activated = mon.running, mon.suppressed, mon.last_activated
        now = broker.clock.now()
        inputs = MonitorInputs(
            has_unread=has_unread,
            arrived_on_empty=arrived_on_empty,
            running=running,
            waiting=activity.waiting(queue.queue_id),
            last_empty_rowset_time=activity.last_empty(queue.queue_id),
            now=now,
            window=self.empty_receive_window,
        )
        reason = activation_necessary(trigger, inputs)
        raise_ = False
        if reason is not None and external:
            with self._lock:
                last_notified, rearmed = mon.last_notified, mon.rearmed
            raise_ = external_notification_due(
                last_notified=last_notified,
                last_receive=activity.last_receive(queue.queue_id),
                now=now,
                timeout=self.external_activation_timeout,
                rearmed=rearmed,
            )
            if raise_:
                with self._lock:
                    mon.last_notified = now
                    mon.rearmed = False
                    mon.received_since_activation = False
        start = (
            reason is not None
            and internal
            and internal_activation_occurs(
                reason,
                running=running,
                max_queue_readers=queue.max_queue_readers,
                suppressed=suppressed,
                last_activated=last_activated,
                now=now,
                interval=self.interval,
            )
        )
        if start:
            with self._lock:
                start = self._reserve(queue, mon, now)
        return start, raise_

    def _resolve(self, queue: QueueDef) -> Procedure:
        with self._lock:
            proc = self._procedures.get(queue.name)
        if proc is not None:
            return proc
        assert queue.activation_procedure is not None
        return resolve_procedure(queue.activation_procedure)

    def _notify(self, queue: QueueDef) -> None:
        self.notifications_raised += raise_event(self._broker, queue, "QUEUE_ACTIVATION")  # ACT-8

    def _reserve(self, queue: QueueDef, mon: _Monitor, now: float) -> bool:
        """Count a reader as running from the decision on (caller holds ``_lock``)."""
        if mon.running >= queue.max_queue_readers:
            return False
        mon.running += 1
        mon.peak = max(mon.peak, mon.running)
        mon.activations += 1
        mon.last_activated = now
        mon.received_since_activation = False
        return True

    def _launch(self, queue: QueueDef) -> None:
        """Start the reserved reader's procedure on a thread of its own (ACT-7)."""
        try:
            proc = self._resolve(queue)
        except BrokerError:
            log.exception("queue %s: cannot start its activation procedure", queue.name)
            with self._lock:
                self._monitor(queue.queue_id).running -= 1
            return
        started = self._broker.clock.now()
        thread = threading.Thread(
            target=self._run,
            args=(queue, proc, started),
            name=f"activated:{queue.name}",
            daemon=True,
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _run(self, queue: QueueDef, proc: Procedure, started: float) -> None:
        ident = threading.get_ident()
        with self._lock:
            self._tasks[ident] = ActivatedTask(
                ident, queue.queue_id, queue.name, queue.activation_procedure or "", started
            )
            self._received[ident] = False
        try:
            proc(ActivationContext(self._broker, queue.name))
        except Exception:
            log.exception(
                "activated procedure %s on queue %s failed", queue.activation_procedure, queue.name
            )
        finally:
            sequence = None if self._received.get(ident) else self._broker._message_sequence()
            with self._lock:
                self._tasks.pop(ident, None)
                useful = self._received.pop(ident, False)
                mon = self._monitor(queue.queue_id)
                mon.running -= 1
                if not useful and sequence is not None:
                    mon.suppressed = True  # ACT-9: exited without receiving
                    mon.suppressed_at = sequence
                last = mon.running == 0
        if last and not self._broker._stopping:
            self.check({queue.queue_id}, Trigger.PROCEDURES_EXITED)  # ACT-4d

    def in_activated_task(self) -> bool:
        """True when the calling thread runs an activated procedure."""
        with self._lock:
            return threading.get_ident() in self._tasks

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` real seconds for running procedures to return."""
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout)

    # -- statistics ----------------------------------------------------------------------
    def monitors(self) -> list[QueueMonitor]:
        """The monitor of every queue with activation ON (ACT-2), its inputs read from every
        process."""
        broker = self._broker
        catalog = broker._catalog_now()
        activity = broker._storage.activity
        out = []
        for queue in catalog.queues_by_id.values():
            _internal, external = monitored(catalog, queue)
            if not (queue.activation_enabled or external):
                continue
            has_unread = broker._queue_has_ready(queue.queue_id)
            with self._lock:
                mon = self._monitor(queue.queue_id)
                running, peak, activations = mon.running, mon.peak, mon.activations
                last_activated, suppressed = mon.last_activated, mon.suppressed
                received = mon.received_since_activation
                notified = mon.last_notified is not None
            out.append(
                QueueMonitor(
                    queue.queue_id,
                    queue.name,
                    monitor_state(
                        running=running,
                        has_unread=has_unread,
                        received_since_activation=received,
                        notified=notified,
                    ),
                    activity.last_empty(queue.queue_id),
                    last_activated,
                    activity.waiting(queue.queue_id),
                    running,
                    peak,
                    activations,
                    suppressed,
                )
            )
        return out

    def tasks(self) -> list[ActivatedTask]:
        """The running activated procedures (ACT-7)."""
        with self._lock:
            return sorted(self._tasks.values(), key=lambda t: (t.queue_name, t.started, t.spid))
