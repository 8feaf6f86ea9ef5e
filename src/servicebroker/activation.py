"""Queue monitors and internal activation (ACT-2, ACT-3, ACT-7), in the simple form of the first
release: when messages are ready on a queue with activation ON and nobody waits in RECEIVE on it,
start one more instance of its procedure while fewer than MAX_QUEUE_READERS run. The monitor
checks on message arrival, on each timer tick, after a rollback and when a procedure exits.

:func:`activation_needed` is the pure decision; :class:`ActivationService` is the thin shell that
keeps the counters and runs procedures on threads.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .catalog import ActivationContext, Procedure, QueueDef, resolve_procedure
from .errors import BrokerError

if TYPE_CHECKING:
    from .broker import Broker

__all__ = ["ActivatedTask", "ActivationService", "QueueMonitor", "activation_needed"]

log = logging.getLogger(__name__)


def activation_needed(*, has_ready: bool, running: int, waiting: int, max_readers: int) -> bool:
    """Start one more reader? Yes when messages are ready, no session waits in RECEIVE on the
    queue (a waiting reader would take them) and fewer than ``max_readers`` run (ACT-7)."""
    return has_ready and waiting == 0 and running < max_readers


@dataclass(frozen=True)
class QueueMonitor:
    """One queue monitor's state (a ``dm_broker_queue_monitors`` row, ACT-3)."""

    queue_id: int
    queue_name: str
    state: str
    last_empty_rowset_time: float | None
    last_activated_time: float | None
    tasks_waiting: int
    running: int
    peak_running: int
    activations: int


@dataclass(frozen=True)
class ActivatedTask:
    """A running activated procedure (a ``dm_broker_activated_tasks`` row)."""

    spid: int
    queue_id: int
    queue_name: str
    procedure_name: str
    started: float


class _Monitor:
    __slots__ = ("activations", "last_activated", "last_empty", "peak", "running", "waiting")

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.waiting = 0
        self.activations = 0
        self.last_empty: float | None = None
        self.last_activated: float | None = None


class ActivationService:
    """Keeps the monitors' counters and, once started, starts activated procedures."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._lock = threading.Lock()
        self._monitors: dict[int, _Monitor] = {}
        self._tasks: dict[int, ActivatedTask] = {}
        self._threads: list[threading.Thread] = []
        self._procedures: dict[str, Procedure] = {}
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

    # -- events from the engine (ACT-4) --------------------------------------------------
    def waiting(self, queue_id: int, delta: int) -> None:
        """A session starts (+1) or stops (-1) waiting in RECEIVE on the queue."""
        with self._lock:
            self._monitor(queue_id).waiting += delta

    def empty_receive(self, queue_id: int, now: float) -> None:
        """A RECEIVE or GET CONVERSATION GROUP without WHERE returned nothing (ACT-3b)."""
        with self._lock:
            self._monitor(queue_id).last_empty = now

    def check(self, queue_ids: set[int] | None = None) -> None:
        """Decide for each queue (all when None) whether to start a reader, and start it."""
        if not self.enabled:
            return
        broker = self._broker
        catalog = broker._catalog_now()
        queues = [
            q for q in catalog.queues_by_id.values() if queue_ids is None or q.queue_id in queue_ids
        ]
        for queue in queues:
            if not (queue.activation_enabled and queue.status and queue.activation_procedure):
                continue
            with self._lock:
                mon = self._monitor(queue.queue_id)
                running, waiting = mon.running, mon.waiting
            if running >= queue.max_queue_readers or waiting:
                continue
            if activation_needed(
                has_ready=broker._queue_has_ready(queue.queue_id),
                running=running,
                waiting=waiting,
                max_readers=queue.max_queue_readers,
            ):
                self._start(queue)

    def _resolve(self, queue: QueueDef) -> Procedure:
        with self._lock:
            proc = self._procedures.get(queue.name)
        if proc is not None:
            return proc
        assert queue.activation_procedure is not None
        return resolve_procedure(queue.activation_procedure)

    def _start(self, queue: QueueDef) -> None:
        try:
            proc = self._resolve(queue)
        except BrokerError:
            log.exception("queue %s: cannot start its activation procedure", queue.name)
            return
        now = self._broker.clock.now()
        with self._lock:
            mon = self._monitor(queue.queue_id)
            if mon.running >= queue.max_queue_readers:
                return
            mon.running += 1
            mon.peak = max(mon.peak, mon.running)
            mon.activations += 1
            mon.last_activated = now
        thread = threading.Thread(
            target=self._run, args=(queue, proc, now), name=f"activated:{queue.name}", daemon=True
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
        try:
            proc(ActivationContext(self._broker, queue.name))
        except Exception:
            log.exception(
                "activated procedure %s on queue %s failed", queue.activation_procedure, queue.name
            )
        finally:
            with self._lock:
                self._tasks.pop(ident, None)
                self._monitor(queue.queue_id).running -= 1
        if not self._broker._stopping:
            self.check({queue.queue_id})

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
        """The monitor of every queue with activation ON (ACT-2)."""
        catalog = self._broker._catalog_now()
        out = []
        with self._lock:
            for queue in catalog.queues_by_id.values():
                if not queue.activation_enabled:
                    continue
                mon = self._monitor(queue.queue_id)
                state = "RECEIVES_OCCURRING" if mon.running else "INACTIVE"
                out.append(
                    QueueMonitor(
                        queue.queue_id,
                        queue.name,
                        state,
                        mon.last_empty,
                        mon.last_activated,
                        mon.waiting,
                        mon.running,
                        mon.peak,
                        mon.activations,
                    )
                )
        return out

    def tasks(self) -> list[ActivatedTask]:
        """The running activated procedures (ACT-7)."""
        with self._lock:
            return sorted(self._tasks.values(), key=lambda t: (t.queue_name, t.started, t.spid))
