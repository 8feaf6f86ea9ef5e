"""The activation service (ACT-1..9): the thin shell around :mod:`.monitor`'s pure decisions.

On each ACT-4 event and each timer tick it gathers a queue's inputs — unread messages, waits and
empty RECEIVEs from every process through the storage's activity store — asks
:func:`~.monitor.decide`, stores the new monitor state, and carries the actions out on the task
handlers: starting an activated procedure on a thread of its own, or raising a QUEUE_ACTIVATION
event notification.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..catalog import CatalogSnapshot, Procedure, QueueDef, resolve_procedure
from ..engine.context import BrokerContext
from ..engine.permissions import execute_as, procedure_principal
from ..errors import BrokerError, CatalogError, StorageError
from .monitor import (
    EMPTY_RECEIVE_WINDOW,
    ActivatedTask,
    CheckInputs,
    MonitorState,
    QueueMonitor,
    Trigger,
    decide,
    monitor_state,
    on_altered,
    on_exit,
    on_launch_failed,
    on_received,
)
from .notifications import raise_event
from .tasks import TaskHandlers

__all__ = ["ActivationService", "ActivationStatistics", "monitored"]

log = logging.getLogger(__name__)


def monitored(catalog: CatalogSnapshot, queue: QueueDef) -> tuple[bool, bool]:
    """(internal, external): whether the queue has a monitor for internal activation
    (activation STATUS ON with a procedure) and for external activation (a QUEUE_ACTIVATION
    event notification) (ACT-2)."""
    internal = queue.activation_enabled and bool(queue.activation_procedure)
    external = bool(catalog.notifications(queue.queue_id, "QUEUE_ACTIVATION"))
    return internal, external


@dataclass(frozen=True)
class ActivationStatistics:
    """What the activation service has done in this process: readers started, QUEUE_ACTIVATION
    notifications raised, procedures that failed with an exception."""

    readers_started: int
    notifications_raised: int
    procedures_failed: int


class ActivationService:
    """The monitors of one broker and the activated procedures it started.

    Args:
        context: the broker's shared parts.
        tasks: the task handlers that carry decisions out (TICK-2b).
        procedure_context: builds what a procedure is called with from a queue name (the
            broker facade's ``ActivationContext``).
        stopping: True once the broker is stopping (procedures that exit then do not make the
            monitor check again).
        empty_receive_window: ACT-5b's window, seconds (default 5).
        interval: seconds between 5b starts (the timer's 5 seconds).
        external_activation_timeout: ACT-8's response time-out, seconds (default 60).
    """

    def __init__(
        self,
        context: BrokerContext,
        tasks: TaskHandlers,
        procedure_context: Callable[[str], object],
        stopping: Callable[[], bool],
        *,
        empty_receive_window: float = EMPTY_RECEIVE_WINDOW,
        interval: float = 5.0,
        external_activation_timeout: float = 60.0,
    ) -> None:
        self._context = context
        self._tasks_handlers = tasks
        self._procedure_context = procedure_context
        self._stopping = stopping
        self.empty_receive_window = empty_receive_window
        self.interval = interval
        self.external_activation_timeout = external_activation_timeout
        self._lock = threading.Lock()
        self._monitors: dict[int, MonitorState] = {}
        self._tasks: dict[int, ActivatedTask] = {}
        self._received: dict[int, bool] = {}
        self._threads: list[threading.Thread] = []
        self._procedures: dict[str, Procedure] = {}
        self._named: dict[str, Procedure] = {}
        self._finder: Callable[[str], Procedure | None] | None = None
        self._check_lock = threading.Lock()
        self._started = 0
        self._notifications = 0
        self._failed = 0
        self.enabled = False

    def register_procedure(self, queue_name: str, procedure: Procedure | None) -> None:
        """Remember a callable procedure given to create_queue/alter_queue in this process."""
        with self._lock:
            if procedure is None:
                self._procedures.pop(queue_name, None)
            else:
                self._procedures[queue_name] = procedure

    def register_named_procedure(self, name: str, procedure: Procedure) -> None:
        """Run ``procedure`` in this process for every queue whose ACTIVATION names ``name``
        (a procedure name without ``:``; matched without regard to case, as T-SQL names are)."""
        with self._lock:
            self._named[name.casefold()] = procedure

    def set_procedure_finder(self, finder: Callable[[str], Procedure | None] | None) -> None:
        """Ask ``finder`` for a procedure name no :meth:`register_named_procedure` registered
        when a queue's activation needs it (a T-SQL procedure another process created after
        this one opened the database); what it finds is registered."""
        with self._lock:
            self._finder = finder

    def has_named_procedure(self, name: str) -> bool:
        """Whether :meth:`register_named_procedure` registered ``name`` in this process."""
        with self._lock:
            return name.casefold() in self._named

    def _update(self, queue_id: int, change: Callable[[MonitorState], MonitorState]) -> None:
        with self._lock:
            self._monitors[queue_id] = change(self._monitors.get(queue_id, MonitorState()))

    # -- ACT-4 events --------------------------------------------------------------------
    def received(self, queue_id: int) -> None:
        """A RECEIVE returned messages on the queue (ACT-4b); marks the calling activated
        procedure as useful (ACT-9)."""
        ident = threading.get_ident()
        with self._lock:
            self._monitors[queue_id] = on_received(self._monitors.get(queue_id, MonitorState()))
            if ident in self._received:
                self._received[ident] = True

    def altered(self, queue_id: int) -> None:
        """ALTER QUEUE (ACT-4e): the monitor may re-activate a suppressed procedure (ACT-9)."""
        self._update(queue_id, on_altered)
        self.check({queue_id}, Trigger.QUEUE_ALTERED)

    def check(
        self,
        queue_ids: set[int] | None = None,
        trigger: Trigger = Trigger.TICK,
        arrived_on_empty: frozenset[int] = frozenset(),
    ) -> None:
        """Decide for each queue (all monitored ones when None) and act where it occurs.

        Raises:
            StorageError: the inputs could not be read.
        """
        if not self.enabled:
            return
        catalog = self._context.catalog.current()
        starts: list[QueueDef] = []
        notify: list[QueueDef] = []
        with self._check_lock:
            for queue in catalog.queues_by_id.values():
                if queue_ids is not None and queue.queue_id not in queue_ids:
                    continue
                internal, external = monitored(catalog, queue)
                if queue.status and (internal or external):
                    inputs = self._inputs(
                        queue, trigger, queue.queue_id in arrived_on_empty, internal, external
                    )
                    now = self._context.clock.now()
                    with self._lock:
                        state = self._monitors.get(queue.queue_id, MonitorState())
                        state, actions = decide(state, inputs, now)
                        self._monitors[queue.queue_id] = state
                    if actions.start_reader:
                        starts.append(queue)
                    if actions.raise_notification:
                        notify.append(queue)
        # act outside the lock, on the task handlers: a notification's own commit makes
        # monitors check again; the reader slot of a start was reserved by the decision
        for queue in notify:
            self._tasks_handlers.submit(functools.partial(self._notify, queue))
        for queue in starts:
            self._tasks_handlers.submit(functools.partial(self._launch, queue))

    def _inputs(
        self,
        queue: QueueDef,
        trigger: Trigger,
        arrived_on_empty: bool,
        internal: bool,
        external: bool,
    ) -> CheckInputs:
        """Read one queue's inputs (ACT-3) from storage, every process included."""
        activity = self._context.storage.activity
        with self._lock:
            suppressed = self._monitors.get(queue.queue_id, MonitorState()).suppressed
        with self._context.storage.connection() as conn:
            has_unread = conn.queue_has_ready(queue.queue_id)
            sequence = conn.message_sequence(queue.queue_id) if suppressed else None
        return CheckInputs(
            trigger=trigger,
            has_unread=has_unread,
            arrived_on_empty=arrived_on_empty,
            waiting=activity.waiting(queue.queue_id),
            last_empty_rowset_time=activity.last_empty(queue.queue_id),
            message_sequence=sequence,
            last_receive=activity.last_receive(queue.queue_id) if external else None,
            internal=internal,
            external=external,
            max_queue_readers=queue.max_queue_readers,
            window=self.empty_receive_window,
            interval=self.interval,
            external_timeout=self.external_activation_timeout,
        )

    def _resolve(self, queue: QueueDef) -> Procedure:
        """The queue's procedure: a callable given for it in this process, else the procedure
        registered under its name, else its ``module:function`` imported."""
        assert queue.activation_procedure is not None
        with self._lock:
            proc = self._procedures.get(queue.name) or self._named.get(
                queue.activation_procedure.casefold()
            )
            finder = self._finder
        if proc is None and finder is not None and ":" not in queue.activation_procedure:
            proc = finder(queue.activation_procedure)
            if proc is not None:
                self.register_named_procedure(queue.activation_procedure, proc)
        if proc is not None:
            return proc
        if ":" not in queue.activation_procedure:
            raise CatalogError(
                f"queue {queue.name!r}: activation procedure {queue.activation_procedure!r} is "
                f"not registered in this process (Broker.register_procedure)"
            )
        return resolve_procedure(queue.activation_procedure)

    def _notify(self, queue: QueueDef) -> None:
        raised = raise_event(self._context, queue, "QUEUE_ACTIVATION")  # ACT-8
        with self._lock:
            self._notifications += raised

    def _launch(self, queue: QueueDef) -> None:
        """Start the reserved reader's procedure on a thread of its own (ACT-7)."""
        try:
            proc = self._resolve(queue)
        except BrokerError:
            log.exception("queue %s: cannot start its activation procedure", queue.name)
            self._update(queue.queue_id, on_launch_failed)
            return
        started = self._context.clock.now()
        thread = threading.Thread(
            target=self._run,
            args=(queue, proc, started),
            name=f"activated:{queue.name}",
            daemon=True,
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            self._started += 1
        thread.start()

    def _message_sequence(self, queue_id: int) -> int:
        with self._context.storage.connection() as conn:
            return conn.message_sequence(queue_id)

    def _run(self, queue: QueueDef, proc: Procedure, started: float) -> None:
        ident = threading.get_ident()
        with self._lock:
            self._tasks[ident] = ActivatedTask(
                ident, queue.queue_id, queue.name, queue.activation_procedure or "", started
            )
            self._received[ident] = False
        try:
            with execute_as(procedure_principal(queue.execute_as)):  # SEC-4
                proc(self._procedure_context(queue.name))
        except Exception:
            with self._lock:
                self._failed += 1
            log.exception(
                "activated procedure %s on queue %s failed", queue.activation_procedure, queue.name
            )
        finally:
            with self._lock:
                useful = self._received.get(ident, False)
            sequence = None
            if not useful:
                try:
                    sequence = self._message_sequence(queue.queue_id)
                except StorageError as exc:  # not suppressed then: a reader may start in vain
                    log.warning("queue %s: reading its last message failed: %s", queue.name, exc)
            with self._lock:
                self._tasks.pop(ident, None)
                self._received.pop(ident, None)
                state = on_exit(
                    self._monitors.get(queue.queue_id, MonitorState()),
                    useful=useful,
                    message_sequence=sequence,
                )
                self._monitors[queue.queue_id] = state
                last = state.running == 0
        if last and not self._stopping():
            try:
                self.check({queue.queue_id}, Trigger.PROCEDURES_EXITED)  # ACT-4d
            except StorageError as exc:  # the timer's next tick checks again (TICK-2a)
                log.warning(
                    "queue %s: the activation check after its procedures exited failed: %s",
                    queue.name,
                    exc,
                )

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
    def statistics(self) -> ActivationStatistics:
        """A snapshot of this service's counters."""
        with self._lock:
            return ActivationStatistics(self._started, self._notifications, self._failed)

    def monitors(self) -> list[QueueMonitor]:
        """The monitor of every queue with activation ON (ACT-2), its inputs read from every
        process."""
        activity = self._context.storage.activity
        with self._context.storage.connection() as conn:
            catalog = self._context.catalog.snapshot(conn)
            shown = [
                (queue, conn.queue_has_ready(queue.queue_id))
                for queue in catalog.queues_by_id.values()
                if queue.activation_enabled or monitored(catalog, queue)[1]
            ]
        out = []
        for queue, has_unread in shown:
            with self._lock:
                mon = self._monitors.get(queue.queue_id, MonitorState())
            out.append(
                QueueMonitor(
                    queue.queue_id,
                    queue.name,
                    monitor_state(
                        running=mon.running,
                        has_unread=has_unread,
                        received_since_activation=mon.received_since_activation,
                        notified=mon.last_notified is not None,
                    ),
                    activity.last_empty(queue.queue_id),
                    mon.last_activated,
                    activity.waiting(queue.queue_id),
                    mon.running,
                    mon.peak,
                    mon.activations,
                    mon.suppressed,
                )
            )
        return out

    def tasks(self) -> list[ActivatedTask]:
        """The running activated procedures (ACT-7)."""
        with self._lock:
            return sorted(self._tasks.values(), key=lambda t: (t.queue_name, t.started, t.spid))
