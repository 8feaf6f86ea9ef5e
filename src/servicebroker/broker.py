"""The Broker: one database opened as a Service Broker instance — the facade users hold.

It builds the broker's parts on one :class:`~servicebroker.engine.context.BrokerContext` (storage,
clock, catalog cache, wait loop, settings), wires the background services — the timer
(:mod:`.timer`), the transmission queue (:mod:`.transmission`), activation
(:mod:`.activation`), poison-message handling (:mod:`.poison`) — and runs them under a
:class:`~servicebroker.supervisor.Supervisor` between :meth:`Broker.start` and
:meth:`Broker.stop`. Everything a user does goes through :meth:`Broker.transaction`, the catalog
methods (inherited from :class:`~servicebroker.ddl.statements.CatalogStatements`), or
:attr:`Broker.views`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from .activation.events import Reactions
from .activation.monitor import EMPTY_RECEIVE_WINDOW, Trigger
from .activation.poison import PoisonMessageHandling
from .activation.service import ActivationService
from .activation.tasks import TaskHandlers
from .arguments import MAX_TOP, check_int, check_top
from .catalog import CatalogCache, priorities
from .clock import Clock, SystemClock, check_seconds
from .ddl.network import NetworkStatements
from .ddl.principals import PrincipalStatements
from .ddl.statements import CatalogStatements
from .engine.claims import StreamClaims
from .engine.context import BrokerContext
from .engine.delivery import Applier
from .engine.operations import Operations
from .engine.permissions import DEFAULT_PRINCIPAL, current_execute_as
from .engine.receive import to_messages
from .engine.statistics import (
    PUBLISH_INTERVAL,
    InstanceStatistics,
    QueueStatistics,
    StatisticsPublisher,
    StatisticsRecorder,
    process_name,
)
from .engine.timer import TICK_SECONDS, BrokerTimer
from .engine.transaction import Transaction
from .engine.transmission import TransmissionService
from .engine.waiting import Notifier, Waiting
from .errors import BrokerError, StorageError
from .messages import Message
from .storage import open_storage
from .storage.base import Storage
from .supervisor import Supervisor
from .transport.service import TransportService
from .transport.settings import TransportSettings
from .views import Views

__all__ = ["ActivationContext", "Broker"]

log = logging.getLogger(__name__)
T = TypeVar("T")
BACKGROUND_POLL = 0.25
"""Real seconds between the background thread's looks at the database for work that other
processes made due (messages to activate for, timers they set)."""
TIMER_THREAD = "servicebroker-timer"
STATISTICS_THREAD = "servicebroker-statistics"


def _check_transport(transport: object) -> None:
    """Refuse a ``transport`` setting that is not a :class:`TransportSettings` (BrokerError)."""
    if transport is not None and not isinstance(transport, TransportSettings):
        raise BrokerError(f"transport must be a TransportSettings, got {transport!r}")


def _check_aging(value: object) -> None:
    """``priority_aging_interval``: None (strict priority) or finite seconds > 0 (PRI-18)."""
    if value is not None:
        check_seconds(value, "priority_aging_interval", allow_zero=False)


@dataclass(frozen=True)
class ActivationContext:
    """What an activated procedure is called with: the broker and the queue it serves."""

    broker: Broker
    queue_name: str


class Broker(CatalogStatements, NetworkStatements, PrincipalStatements):
    """A Service Broker instance over one database. Use :meth:`open`.

    Settings (keyword arguments of :meth:`open`): ``lock_timeout`` seconds a statement waits for
    a conversation group another transaction holds (default 60, broker clock);
    ``synchronous`` and ``poll_interval`` for SQLite (see
    :class:`~servicebroker.storage.sqlite.SqliteStorage`).
    """

    def __init__(
        self,
        storage: Storage,
        clock: Clock,
        *,
        lock_timeout: float = 60.0,
        empty_receive_window: float = EMPTY_RECEIVE_WINDOW,
        external_activation_timeout: float = 60.0,
        priority_aging_interval: float | None = priorities.AGING_INTERVAL,
        transport: TransportSettings | None = None,
        principal: str = DEFAULT_PRINCIPAL,
    ) -> None:
        _check_aging(priority_aging_interval)
        _check_transport(transport)
        lock_timeout = check_seconds(lock_timeout, "lock_timeout")
        empty_receive_window = check_seconds(empty_receive_window, "empty_receive_window")
        external_activation_timeout = check_seconds(
            external_activation_timeout, "external_activation_timeout"
        )
        self._storage = storage
        self._principal = principal
        self.clock: Clock = clock
        self._supervisor = Supervisor(clock)
        self._notifier = Notifier(
            storage.watch_changes(), storage.poll_interval, self._supervisor.start
        )
        self._catalog = CatalogCache(storage)
        self._cond = threading.Condition()  # wakes the background thread
        self._stopping = False
        self._closed = False
        self._running = False
        self._leading = False
        reactions = Reactions(clock, self._notifier, storage.activity)
        self._context = BrokerContext(
            storage=storage,
            clock=clock,
            catalog=self._catalog,
            waiting=Waiting(clock, self._notifier, storage.activity, self._give_up),
            events=reactions,
            lock_timeout=lock_timeout,
            priority_aging_interval=priority_aging_interval,
            statistics=StatisticsRecorder(),
        )
        self.tasks = TaskHandlers()
        self.activation = ActivationService(
            self._context,
            self.tasks,
            lambda queue_name: ActivationContext(self, queue_name),
            lambda: self._stopping,
            empty_receive_window=empty_receive_window,
            interval=TICK_SECONDS,
            external_activation_timeout=external_activation_timeout,
        )
        self._poison = PoisonMessageHandling(self._context)
        reactions.connect(self.activation, self._poison)

        def delivered(woken: set[int], arrived: frozenset[int]) -> None:
            """A commit outside a transaction (the transmission queue, the transport) put
            messages on queues: wake their waiters and monitors."""
            reactions.committed(woken, set(), arrived)

        self.transmission = TransmissionService(
            storage,
            self._catalog,
            clock,
            Applier,
            delivered,
            priority_aging_interval,
            self._context.statistics,
        )
        self.timer = BrokerTimer(self._context, TICK_SECONDS)
        self.timer.tasks.register("task handlers", 1, self.tasks.restart_failed)  # TICK-2b
        self.timer.tasks.register("activation", 1, lambda now: self.activation.check())  # TICK-2a
        self.timer.tasks.register("transmission", 1, self.transmission.retry)  # QUE-3
        self.transport = TransportService(
            self._context,
            delivered,
            self._supervisor.start,
            self._supervisor.join,
            transport,
        )
        tasks = self.timer.tasks
        tasks.register("message dispatcher", 1, self.transport.dispatcher_cleanup)  # TICK-2c
        tasks.register("transport connections", 2, self.transport.connect_pending)  # TICK-3a
        tasks.register("transmitter", 2, self.transport.reclassify)  # TICK-3b
        tasks.register("idle connections", 5, self.transport.close_idle)  # TICK-4a
        tasks.register("forwarded messages", 5, self.transport.forwarder_cleanup)  # TICK-4b
        tasks.register("closed dialogs", 5, self.transport.forget_closed)  # NET-2, SEC-2
        tasks.register("broker start", 5, self.transport.retry_start)  # TICK-4c
        self.claims = StreamClaims(self._context)
        """Stream readers' conversation-group claims (the Spark streaming source's)."""
        tasks.register("stream claims", 1, self._release_claims)
        self.views = Views(
            self._context,
            activation=self.activation,
            tasks=self.tasks,
            supervisor=self._supervisor,
            transport=self.transport,
            claims=self.claims,
        )
        CatalogStatements.__init__(
            self,
            self._catalog,
            clock=clock,
            activity=storage.activity,
            drain_transmission=self.transmission.drain,
            activation=self.activation,
            changed=self._wake,
        )
        NetworkStatements.__init__(self, self._catalog, clock=clock, changed=self._wake)
        PrincipalStatements.__init__(self, self._catalog, changed=self._wake)
        self.operations = Operations(self._context, storage.database)
        """The operator's read model: ``operations.overview()``, ``conversation_groups()``."""
        self.instance_id = str(uuid.uuid4())
        """This broker object's id in ``views.dm_broker_statistics()``."""
        self._opened_at = clock.now()
        self._publisher = StatisticsPublisher(storage, self.statistics)
        self._publishing_stop = threading.Event()
        self._starts: dict[int, tuple[str, int]] = {}  # queue id: (name, activations started)
        self.clock.subscribe(self._on_clock)

    # -- life cycle ----------------------------------------------------------------------
    @classmethod
    def open(cls, url: str, *, clock: Clock | None = None, **settings: Any) -> Broker:
        """Open the broker database at ``url`` (``sqlite:///path.db``, a file path, or
        ``postgresql://…``), creating and migrating its schema on first use.

        Args:
            url: the storage URL.
            clock: the broker clock (default :class:`SystemClock`); a :class:`ManualClock`
                drives every time-out, lifetime, timer and interval in tests.
            settings: ``lock_timeout``, ``empty_receive_window`` (ACT-5b, default 5),
                ``external_activation_timeout`` (ACT-8, default 60) and
                ``priority_aging_interval`` (PRI-18: seconds of waiting in the transmission
                queue that raise a message's level by one, default 10; None for strict
                priority), all seconds on the broker clock; ``transport``, a
                :class:`TransportSettings` (retries, suppression, idle and stale intervals,
                fragment size; default ``TransportSettings()``); ``principal``, the database
                principal its transactions act as by default (``"dbo"``; SEC-4); storage settings
                ``synchronous``, ``busy_timeout``, ``poll_interval``, ``pool_size``.

        Raises:
            StorageError: a missing or bad URL, or an unusable database.
            BrokerError: an unknown or bad setting, or a clock that is not a Clock.
            CatalogError: an unknown ``principal``.
        """
        if not isinstance(url, str):
            raise BrokerError(
                f"Broker.open needs a storage URL string (sqlite:///path.db, a file path or "
                f"postgresql://…), got {url!r}"
            )
        if clock is not None and not all(
            callable(getattr(clock, m, None)) for m in ("now", "subscribe", "max_real_wait")
        ):
            raise BrokerError(f"clock must be a servicebroker Clock, got {clock!r}")
        lock_timeout = settings.pop("lock_timeout", 60.0)
        window = settings.pop("empty_receive_window", EMPTY_RECEIVE_WINDOW)
        external_timeout = settings.pop("external_activation_timeout", 60.0)
        aging = settings.pop("priority_aging_interval", priorities.AGING_INTERVAL)
        transport = settings.pop("transport", None)
        principal = settings.pop("principal", DEFAULT_PRINCIPAL)
        allowed = {"synchronous", "busy_timeout", "poll_interval", "pool_size"}
        unknown = set(settings) - allowed
        if unknown:
            raise BrokerError(f"unknown broker setting(s): {', '.join(sorted(unknown))}")
        _check_aging(aging)  # every setting is checked before the database is opened
        _check_transport(transport)
        for what, value in (("lock_timeout", lock_timeout), ("empty_receive_window", window)):
            check_seconds(value, what)
        check_seconds(external_timeout, "external_activation_timeout")
        storage = open_storage(url, **settings)
        try:
            broker = cls(
                storage,
                clock or SystemClock(),
                lock_timeout=lock_timeout,
                empty_receive_window=window,
                external_activation_timeout=external_timeout,
                priority_aging_interval=aging,
                transport=transport,
                principal=principal,
            )
        except BaseException:
            storage.close()  # a bad setting: the database is left as it was
            raise
        if principal != DEFAULT_PRINCIPAL:
            try:
                broker.transaction().rollback()  # CatalogError: an unknown principal
            except BaseException:
                broker.close()
                raise
        return broker

    @property
    def url(self) -> str:
        """The storage URL this broker was opened on (with its password, if it has one)."""
        return self._storage.url

    @property
    def database(self) -> str:
        """The database as messages name it: ``SQLite database <path>`` or ``PostgreSQL
        database 'name' at host:port (schema s)`` — never a password."""
        return self._storage.database

    @property
    def lock_timeout(self) -> float:
        """Seconds (broker clock) a statement waits for a conversation group another
        transaction holds before :class:`LockTimeoutError`."""
        return self._context.lock_timeout

    @property
    def priority_aging_interval(self) -> float | None:
        """PRI-18: seconds of waiting in the transmission queue per level of aging (None:
        strict priority)."""
        return self._context.priority_aging_interval

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop background work, wake waiting RECEIVEs (they return empty), roll back the
        transactions still open (their statements are refused after; the rollback does not
        count towards POI-1) and close storage."""
        if self._closed:
            return
        self.stop()
        self._context.transactions.close()  # before anything else waits for their locks
        if self._publisher.published_at is not None or self._context.statistics.counted():
            self._publish("closed")
        self._closed = True
        self.clock.unsubscribe(self._on_clock)
        self._notifier.close()
        self._supervisor.close()
        self._storage.close()

    def start(self) -> None:
        """Run the instance's background work: the 5-second timer (TICK-1), conversation
        timers and lifetimes (DLG-5, DLG-6), transmission-queue retries (QUE-3) and internal
        activation (ACT-7). A broker used only as a library needs none of it.

        Of all started brokers on one database (threads, processes, hosts) one leads and runs
        the timer and the queue monitors (:attr:`is_leader`); the others take over within a
        tick when it stops or dies. Activation procedures given as Python callables run only
        in the leader's process: give them as ``"module:function"`` where several processes
        start brokers. The background thread is supervised: if it dies it is logged and
        restarted (``views.dm_broker_background_threads()``).

        Raises:
            BrokerError: the broker is closed.
        """
        if self._closed:
            raise BrokerError(f"the broker on {self.database} is closed")
        if self._running:
            return
        self._stopping = False
        self.tasks.start()
        try:
            self._lead()
            self._supervisor.start(TIMER_THREAD, self._background)
            self._publishing_stop.clear()
            self._supervisor.start(STATISTICS_THREAD, self._publishing)
        except BaseException:
            self._stopping = True
            self.tasks.stop()
            raise
        self._running = True
        self.activation.check()
        self.transport.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop background work. RECEIVEs waiting in activated procedures return empty so the
        procedures exit; waits up to ``timeout`` real seconds for them. Other transactions are
        not affected."""
        self._stopping = True
        self.activation.enabled = False
        self.transport.stop()
        self._wake()
        was_running = self._running
        self._publishing_stop.set()
        if self._running:
            self._supervisor.join(TIMER_THREAD, timeout)
            self._supervisor.join(STATISTICS_THREAD, timeout)
            self._running = False
        if self._leading:
            self._storage.resign()
            self._leading = False
        self.tasks.stop(timeout)
        self.activation.join(timeout)
        if was_running:
            self._publish("stopped")

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._running and not self._stopping

    @property
    def is_leader(self) -> bool:
        """True while this broker runs the database's timer and queue monitors: of all started
        brokers on one database (any process, any host) exactly one does at a time; another
        takes over within a tick when it stops or dies."""
        return self._leading and self.running

    def _lead(self) -> bool:
        """Hold or take leadership; activation runs only in the leader."""
        leading = self._storage.try_lead() and not self._stopping
        if leading != self._leading:
            log.info("broker on %s %s", self.database, "leads" if leading else "no longer leads")
            if leading:
                self.timer.take_lead(self.clock.now())
        self._leading = leading
        self.activation.enabled = leading
        return leading

    def _background(self) -> None:
        """The timer thread's loop (supervised: an exception ends it, and the supervisor logs
        it and starts it again)."""
        while not self._stopping:
            now = self.clock.now()
            if self._lead():
                self.timer.run_due(now)
                # commits of other processes wake no one here: look for them (ACT-4a)
                self.activation.check(trigger=Trigger.POLL)
            wake = self.timer.next_wakeup(now) if self._leading else now + TICK_SECONDS
            real = min(self.clock.max_real_wait(wake - self.clock.now()), BACKGROUND_POLL)
            with self._cond:
                if not self._stopping:
                    self._cond.wait(max(real, 0.001))

    # -- statistics ----------------------------------------------------------------------
    def statistics(self) -> InstanceStatistics:
        """What this broker object has done since it was opened: messages enqueued, SENT and
        RECEIVEd per queue and message type, commits, rollbacks, commit and RECEIVE-wait
        histograms (its transactions'), and — while it leads — the timer's ticks and each queue
        monitor's state, readers and starts (ACT-2, ACT-7), and the queues poison handling
        turned OFF here (POI-1). Every broker writes this to storage every second while
        started, at stop and at close; ``views.dm_broker_statistics()`` reads every process's.
        """
        counts = self._context.statistics.counters(self.instance_id)
        queues = dict(counts.queues)
        leading = self._leading
        monitors = self.activation.monitors()
        for m in monitors:  # starts are kept past ACTIVATION (STATUS = OFF) and DROP QUEUE
            if m.activations:
                self._starts[m.queue_id] = (m.queue_name, m.activations)
        for m in monitors:
            if m.activations or leading:
                queues[m.queue_name] = replace(
                    queues.get(m.queue_name, QueueStatistics()),
                    monitor_state=m.state if leading else None,
                    tasks_waiting=m.tasks_waiting if leading else 0,
                    readers_running=m.running,
                    peak_readers=m.peak_running,
                    last_activated_time=m.last_activated_time,
                )
        for name, started in self._starts.values():
            q = queues.get(name, QueueStatistics())
            queues[name] = replace(q, activation_starts=q.activation_starts + started)
        for name, _ in self._poison.disabled_events():
            q = queues.get(name, QueueStatistics())
            queues[name] = replace(q, poison_events=q.poison_events + 1)
        timer = self.timer.statistics()
        return replace(
            counts,
            process=process_name(),
            started=self._opened_at,
            updated=self.clock.now(),
            is_leader=self.is_leader,
            is_running=self.running,
            queues=queues,
            timer_ticks=timer.ticks,
            conversation_timers_fired=timer.conversation_timers_fired,
            lifetimes_expired=timer.lifetimes_expired,
        )

    def publish_statistics(self) -> None:
        """Write :meth:`statistics` to storage now (a started broker does it every second on
        its own, and every broker at stop and close).

        Raises:
            StorageError: the database failed.
        """
        self._publisher.publish("running" if self.running else "stopped")

    def _publish(self, state: str) -> None:
        """Publish from the background thread, stop or close: a failure is logged, not
        raised (the statistics are written again at the next chance)."""
        try:
            if state == "closed":
                self._publisher.retire()  # its counters added to 'retired', its row deleted
            else:
                self._publisher.publish(state)
        except StorageError as exc:
            log.warning("publishing the broker's statistics failed: %s", exc)

    def _publishing(self) -> None:
        """The statistics thread's loop: publish every :data:`PUBLISH_INTERVAL` real seconds
        while started. A thread of its own, so that a write waiting for SQLite's single writer
        (a long transaction of the application's) never delays the timer or activation."""
        while not self._stopping:
            self._publish("running")
            self._publishing_stop.wait(PUBLISH_INTERVAL)

    def _release_claims(self, now: float) -> None:
        """Each tick: release the batches of stream readers whose claim time-out passed."""
        self.claims.release_expired(now)

    def _on_clock(self, now: float) -> None:
        if self.running and self._leading:
            self.timer.run_due(now)
        self._wake()

    def _wake(self) -> None:
        """Wake every waiting statement and the background thread."""
        self._notifier.notify(None)
        with self._cond:
            self._cond.notify_all()

    def _give_up(self) -> bool:
        """Whether a waiting statement ends now with nothing: the broker closed, or it is
        stopping and the caller is an activated procedure (which then exits)."""
        return self._closed or (self._stopping and self.activation.in_activated_task())

    # -- transactions and reads ----------------------------------------------------------
    def transaction(self, *, principal: str | None = None) -> Transaction:
        """A new :class:`Transaction` (a context manager: commits on normal exit, rolls back
        on an exception).

        Args:
            principal: the database principal it acts as (SEC-4: SEND needs the SEND
                permission on a target service of this database, RECEIVE the RECEIVE
                permission on the queue). Default: inside an activated procedure, its
                queue's EXECUTE AS principal; else the broker's (:meth:`open` ``principal=``,
                ``"dbo"``, which may do everything).

        Raises:
            BrokerError: the broker is closed.
            CatalogError: an unknown principal.
        """
        if self._closed:
            raise BrokerError(f"the broker on {self.database} is closed")
        acting = principal if principal is not None else current_execute_as() or self._principal
        return Transaction(self._context, acting)

    @property
    def principal(self) -> str:
        """The principal this broker's transactions act as by default (:meth:`open`)."""
        return self._principal

    @property
    def database_name(self) -> str:
        """The database's name as SQL Server events give it (EVENT_INSTANCE's DatabaseName):
        the SQLite file's name without extension, or PostgreSQL's current_database()."""
        return self._storage.database_name

    @property
    def service_broker_guid(self) -> uuid.UUID:
        """This broker database's instance id (sys.databases ``service_broker_guid``): made
        with the database, kept across restarts (and in a copied file), replaced only by
        NEW_BROKER (:meth:`alter_database`, ``servicebroker init --new-broker``). Read fresh.

        Raises:
            StorageError: the database cannot be read, or has no identifier.
        """
        guid = self.catalog.service_broker_guid
        if guid is None:
            raise StorageError(
                f"{self.database} has no service_broker_guid", database=self.database
            )
        return guid

    @property
    def paramstyle(self) -> str:
        """The placeholder style of application SQL (``tx.execute``) on this storage, as in
        DB-API: "qmark" (``?``, SQLite) or "format" (``%s``, PostgreSQL)."""
        return self._storage.paramstyle

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run application SQL in a transaction of its own and commit; returns the rows."""
        with self.transaction() as tx:
            return tx.execute(sql, params)

    def peek(self, queue: str, *, top: int | None = None) -> list[Message]:
        """SELECT * FROM ``queue``: every message of any status, nothing consumed or locked
        (QUE-1), at most ``top``.

        Raises:
            CatalogError: unknown queue. BrokerError: a bad ``top``.
        """
        limit = check_top(top, "peek")
        with self._storage.connection() as conn:
            snap = self._catalog.snapshot(conn)
            q = snap.queue(queue)
            rows = conn.peek(q.queue_id, limit)
            return to_messages(snap, rows, q.name)

    def peek_after(self, queue: str, after: int, *, top: int) -> list[Message]:
        """Messages of ``queue`` with ``queuing_order > after``, in queuing order, at most
        ``top``: pages through a queue without loading it whole (the Spark reader uses it).

        Raises:
            CatalogError: unknown queue. BrokerError: ``after`` not a 64-bit integer, a bad ``top``.
        """
        check_int(after, "peek_after after", minimum=-MAX_TOP - 1, maximum=MAX_TOP)
        limit = check_int(top, "peek_after top", minimum=0, maximum=MAX_TOP)
        with self._storage.connection() as conn:
            snap = self._catalog.snapshot(conn)
            q = snap.queue(queue)
            return to_messages(snap, conn.peek_after(q.queue_id, after, limit), q.name)

    @property
    def queue_disabled_events(self) -> list[tuple[str, float]]:
        """BROKER_QUEUE_DISABLED events raised in this process: (queue name, broker time)."""
        return self._poison.disabled_events()
