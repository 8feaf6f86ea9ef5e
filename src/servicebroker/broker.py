"""The Broker: one database opened as a Service Broker instance.

It owns the storage, the catalog cache, the clock, the waiting machinery of RECEIVE, and the
background services (timer and activation) that :meth:`Broker.start` runs. Everything a user
does goes through :meth:`Broker.transaction` or the catalog methods here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from . import catalog as _catalog
from . import priorities as _priorities
from .activation import EMPTY_RECEIVE_WINDOW, ActivationService, Trigger
from .catalog import Activation, CatalogSnapshot
from .clock import Clock, SystemClock
from .delivery import Applier
from .errors import BrokerError, CatalogError, IntegrityConflict
from .messages import Message
from .notifications import raise_event
from .receive import to_messages
from .storage import open_storage
from .storage.base import Storage, StorageConnection
from .tasks import TaskHandlers
from .timer import TICK_SECONDS, BrokerTimer
from .transaction import Transaction
from .waiting import LOCKS, Notifier

__all__ = ["Broker"]

log = logging.getLogger(__name__)
T = TypeVar("T")
WAIT_SAFETY = 1.0
"""Real seconds a waiting statement sleeps at most before it looks again on its own (a safety
net: wake-ups and the poller normally come first)."""
BACKGROUND_POLL = 0.25
"""Real seconds between the background thread's looks at the database for work that other
processes made due (messages to activate for, timers they set)."""
POISON_ROLLBACKS = 5
"""POI-1: consecutive rollbacks of receiving transactions that disable a queue."""


def _check_aging(value: object) -> None:
    if value is not None and not (
        isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    ):
        raise BrokerError(
            f"priority_aging_interval must be a number of seconds > 0 or None, got {value!r}"
        )


class Broker:
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
        priority_aging_interval: float | None = _priorities.AGING_INTERVAL,
    ) -> None:
        self._storage = storage
        self.clock: Clock = clock
        self.lock_timeout = float(lock_timeout)
        _check_aging(priority_aging_interval)
        self.priority_aging_interval = priority_aging_interval
        self._catalog_lock = threading.Lock()
        self._catalog: CatalogSnapshot | None = None
        self._catalog_checked = float("-inf")
        self._catalog_epoch = 0
        self._cond = threading.Condition()  # wakes the background thread
        self._notifier = Notifier(storage.watch_changes(), storage.poll_interval)
        self._stopping = False
        self._closed = False
        self._dropped_queue_names: set[str] = set()
        self._disabled_events: list[tuple[str, float]] = []
        self.activation = ActivationService(
            self,
            empty_receive_window=empty_receive_window,
            interval=TICK_SECONDS,
            external_activation_timeout=external_activation_timeout,
        )
        self.tasks = TaskHandlers()
        self.timer = BrokerTimer(self, TICK_SECONDS)
        self.timer.tasks.register("task handlers", 1, self.tasks.restart_failed)  # TICK-2b
        self.timer.tasks.register("activation", 1, lambda now: self.activation.check())  # TICK-2a
        self.timer.tasks.register("transmission", 1, self._retry_transmission)
        self._thread: threading.Thread | None = None
        self._leading = False
        self.clock.subscribe(self._on_clock)
        from .views import Views

        self.views = Views(self)

    # -- life cycle ----------------------------------------------------------------------
    @classmethod
    def open(cls, url: str, *, clock: Clock | None = None, **settings: Any) -> Broker:
        """Open the broker database at ``url`` (``sqlite:///path.db`` or a file path),
        creating and migrating its schema on first use.

        Args:
            url: the storage URL.
            clock: the broker clock (default :class:`SystemClock`); a :class:`ManualClock`
                drives every time-out, lifetime, timer and interval in tests.
            settings: ``lock_timeout``, ``empty_receive_window`` (ACT-5b, default 5),
                ``external_activation_timeout`` (ACT-8, default 60) and
                ``priority_aging_interval`` (PRI-18: seconds of waiting in the transmission
                queue that raise a message's level by one, default 10; None for strict
                priority), all seconds on the broker clock; storage settings ``synchronous``,
                ``busy_timeout``, ``poll_interval``.

        Raises:
            StorageError: a bad URL or an unusable database.
            BrokerError: an unknown setting.
        """
        lock_timeout = settings.pop("lock_timeout", 60.0)
        window = settings.pop("empty_receive_window", EMPTY_RECEIVE_WINDOW)
        external_timeout = settings.pop("external_activation_timeout", 60.0)
        aging = settings.pop("priority_aging_interval", _priorities.AGING_INTERVAL)
        _check_aging(aging)
        allowed = {"synchronous", "busy_timeout", "poll_interval", "pool_size"}
        unknown = set(settings) - allowed
        if unknown:
            raise BrokerError(f"unknown broker setting(s): {', '.join(sorted(unknown))}")
        storage = open_storage(url, **settings)
        return cls(
            storage,
            clock or SystemClock(),
            lock_timeout=lock_timeout,
            empty_receive_window=window,
            external_activation_timeout=external_timeout,
            priority_aging_interval=aging,
        )

    @property
    def url(self) -> str:
        """The storage URL this broker was opened on."""
        return self._storage.url

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop background work, wake waiting RECEIVEs (they return empty) and close storage."""
        if self._closed:
            return
        self.stop()
        self._closed = True
        self.clock.unsubscribe(self._on_clock)
        self._notifier.close()
        self._storage.close()

    def start(self) -> None:
        """Run the instance's background work: the 5-second timer (TICK-1), conversation
        timers and lifetimes (DLG-5, DLG-6), transmission-queue retries (QUE-3) and internal
        activation (ACT-7). A broker used only as a library needs none of it.

        Of all started brokers on one database (threads, processes, hosts) one leads and runs
        the timer and the queue monitors (:attr:`is_leader`); the others take over within a
        tick when it stops or dies. Activation procedures given as Python callables run only
        in the leader's process: give them as ``"module:function"`` where several processes
        start brokers."""
        if self._thread is not None:
            return
        self._stopping = False
        self.tasks.start()
        self._lead()
        self._thread = threading.Thread(
            target=self._background, name="servicebroker-timer", daemon=True
        )
        self._thread.start()
        self.activation.check()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop background work. RECEIVEs waiting in activated procedures return empty so the
        procedures exit; waits up to ``timeout`` real seconds for them. Other transactions are
        not affected."""
        self._stopping = True
        self.activation.enabled = False
        self._notify()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._leading:
            self._storage.resign()
            self._leading = False
        self.tasks.stop(timeout)
        self.activation.join(timeout)

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thread is not None and not self._stopping

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
            log.info("broker on %s %s", self.url, "leads" if leading else "no longer leads")
        self._leading = leading
        self.activation.enabled = leading
        return leading

    def _background(self) -> None:
        while not self._stopping:
            try:
                now = self.clock.now()
                if self._lead():
                    self.timer.run_due(now)
                    # commits of other processes wake no one here: look for them (ACT-4a)
                    self.activation.check()
                wake = self.timer.next_wakeup(now) if self._leading else now + TICK_SECONDS
            except Exception:
                log.exception("broker background step failed")
                wake = self.clock.now() + TICK_SECONDS
            real = min(self.clock.max_real_wait(wake - self.clock.now()), BACKGROUND_POLL)
            with self._cond:
                if not self._stopping:
                    self._cond.wait(max(real, 0.001))

    def _on_clock(self, now: float) -> None:
        if self.running and self._leading:
            self.timer.run_due(now)
        self._notify()

    # -- catalog -------------------------------------------------------------------------
    def _catalog_for(self, conn: StorageConnection, *, fresh: bool = False) -> CatalogSnapshot:
        """The catalog snapshot. Changes made through this broker are seen at once; those of
        other processes within the storage's poll interval (the stored version is checked at
        most that often, or always with ``fresh``)."""
        now = time.monotonic()
        with self._catalog_lock:
            epoch = self._catalog_epoch
            cached = self._catalog
            if (
                not fresh
                and cached is not None
                and now - self._catalog_checked < self._storage.poll_interval
            ):
                return cached
        version = conn.catalog_version()
        if cached is None or cached.version != version:
            cached = CatalogSnapshot.from_rows(conn.load_catalog())
        with self._catalog_lock:
            if self._catalog is None or cached.version >= self._catalog.version:
                self._catalog = cached
                # a change made here meanwhile (epoch moved) must not be hidden by this read
                if self._catalog_epoch == epoch:
                    self._catalog_checked = now
        return cached

    def _invalidate_catalog(self) -> None:
        """This broker changed the catalog: the next reader checks the stored version."""
        with self._catalog_lock:
            self._catalog_epoch += 1
            self._catalog_checked = float("-inf")

    def _catalog_now(self, *, fresh: bool = False) -> CatalogSnapshot:
        with self._storage.connection() as conn:
            return self._catalog_for(conn, fresh=fresh)

    @property
    def catalog(self) -> CatalogSnapshot:
        """The current catalog (message types, contracts, queues, services), read fresh."""
        return self._catalog_now(fresh=True)

    def _change(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        conn = self._storage.connect()
        try:
            conn.begin_write()
            snap = self._catalog_for(conn, fresh=True)
            result = fn(conn, snap, *args, **kwargs)
            conn.bump_catalog_version()
            conn.commit()
        except IntegrityConflict as exc:
            conn.rollback()
            raise CatalogError(f"catalog change refused by the database: {exc}") from exc
        except BaseException:
            conn.rollback()
            raise
        finally:
            self._storage.release(conn)
        self._invalidate_catalog()  # this broker's own change: seen at once
        self._notify()
        return result

    def create_message_type(self, name: str, *, validation: str = "NONE") -> None:
        """CREATE MESSAGE TYPE ``name`` VALIDATION = NONE | EMPTY | WELL_FORMED_XML | JSON (DLG-3).

        Raises:
            CatalogError: a bad or taken name, or an unknown validation.
        """
        self._change(_catalog.create_message_type, name, validation)

    def drop_message_type(self, name: str) -> None:
        """DROP MESSAGE TYPE. Raises :class:`CatalogError` if unknown, built in or in use."""
        self._change(_catalog.drop_message_type, name)

    def create_contract(self, name: str, messages: Mapping[str, str]) -> None:
        """CREATE CONTRACT ``name`` (message type SENT BY INITIATOR | TARGET | ANY, …) (DLG-2).

        Raises:
            CatalogError: a bad or taken name, unknown message types, bad SENT BY values.
        """
        self._change(_catalog.create_contract, name, messages)

    def drop_contract(self, name: str) -> None:
        """DROP CONTRACT. Raises :class:`CatalogError` if unknown, DEFAULT, or in use."""
        self._change(_catalog.drop_contract, name)

    def create_queue(
        self,
        name: str,
        *,
        status: bool = True,
        retention: bool = False,
        poison_message_handling: bool = True,
        activation: Activation | None = None,
    ) -> None:
        """CREATE QUEUE (QUE-1): STATUS, RETENTION, POISON_MESSAGE_HANDLING and ACTIVATION.

        Raises:
            CatalogError: a bad or taken name or bad settings.
        """
        self._change(
            _catalog.create_queue,
            name,
            status=status,
            retention=retention,
            poison_message_handling=poison_message_handling,
            activation=activation,
            now=self.clock.now(),
        )
        self._register_procedure(name, activation)
        self._storage.activity.forget(self.catalog.queue(name).queue_id)

    def alter_queue(
        self,
        name: str,
        *,
        status: bool | None = None,
        retention: bool | None = None,
        poison_message_handling: bool | None = None,
        activation: Activation | None = None,
    ) -> None:
        """ALTER QUEUE: change the settings given (None keeps one). Turning STATUS ON delivers
        the messages held for it in the transmission queue (QUE-3); turning it OFF ends waiting
        RECEIVEs with :class:`QueueDisabledError`.

        Raises:
            CatalogError: unknown queue or bad settings.
        """
        self._change(
            _catalog.alter_queue,
            name,
            status=status,
            retention=retention,
            poison_message_handling=poison_message_handling,
            activation=activation,
            now=self.clock.now(),
        )
        if activation is not None:
            self._register_procedure(name, activation)
        if status:
            self._drain_transmission()
        self.activation.altered(self.catalog.queue(name).queue_id)  # ACT-4e

    def drop_queue(self, name: str) -> None:
        """DROP QUEUE: its messages are deleted; waiting RECEIVEs end with an error (QUE-3).

        Raises:
            CatalogError: unknown queue, or a service still uses it.
        """
        self._change(_catalog.drop_queue, name)
        self._dropped_queue_names.add(name)
        self._register_procedure(name, None)

    def create_service(self, name: str, *, queue: str, contracts: Sequence[str] = ()) -> None:
        """CREATE SERVICE ``name`` ON QUEUE ``queue`` (``contracts``); a service with no
        contracts can only initiate. Messages waiting for this service name are delivered.

        Raises:
            CatalogError: a bad or taken name, unknown queue or contract.
        """
        self._change(_catalog.create_service, name, queue, tuple(contracts))
        self._drain_transmission()

    def drop_service(self, name: str) -> None:
        """DROP SERVICE. Raises :class:`CatalogError` if unknown or it has open conversations."""
        self._change(_catalog.drop_service, name)

    def create_event_notification(
        self, name: str, *, queue: str, event: str, to_service: str
    ) -> None:
        """CREATE EVENT NOTIFICATION ``name`` ON QUEUE ``queue`` FOR ``event`` TO SERVICE
        ``to_service`` (EVT-1). ``event`` is ``"QUEUE_ACTIVATION"`` (external activation, ACT-8:
        raised when activation is necessary, then not again for ``external_activation_timeout``
        seconds unless an application RECEIVEs from the queue) or ``"BROKER_QUEUE_DISABLED"``
        (raised when poison-message handling turns the queue OFF, POI-1).

        Raises:
            CatalogError: a bad or taken name, an unknown queue or event, a bad service name.
        """
        self._change(_catalog.create_event_notification, name, queue, event, to_service)
        self.activation.check({self.catalog.queue(queue).queue_id}, Trigger.QUEUE_ALTERED)

    def drop_event_notification(self, name: str) -> None:
        """DROP EVENT NOTIFICATION. Raises :class:`CatalogError` for an unknown name."""
        self._change(_catalog.drop_event_notification, name)

    def create_broker_priority(
        self,
        name: str,
        *,
        contract_name: str = "ANY",
        local_service_name: str = "ANY",
        remote_service_name: str = "ANY",
        priority_level: int = 5,
    ) -> None:
        """CREATE BROKER PRIORITY ``name`` FOR CONVERSATION SET (CONTRACT_NAME, LOCAL_SERVICE_NAME,
        REMOTE_SERVICE_NAME, PRIORITY_LEVEL) (PRI-2): each criterion a name or "ANY", the level
        1 (lowest) to 10. Applies to endpoints created from now on (PRI-5).

        Raises:
            CatalogError: a bad or taken name, a bad criterion, a level outside 1..10.
        """
        self._change(
            lambda conn, snap: _priorities.create_broker_priority(
                conn,
                snap.priorities,
                name,
                contract_name=contract_name,
                local_service_name=local_service_name,
                remote_service_name=remote_service_name,
                priority_level=priority_level,
            )
        )

    def alter_broker_priority(
        self,
        name: str,
        *,
        contract_name: str | None = None,
        local_service_name: str | None = None,
        remote_service_name: str | None = None,
        priority_level: int | None = None,
    ) -> None:
        """ALTER BROKER PRIORITY: change what is given; existing conversations keep their levels
        (PRI-5). Raises :class:`CatalogError` for an unknown name or bad values."""
        self._change(
            lambda conn, snap: _priorities.alter_broker_priority(
                conn,
                snap.priorities,
                name,
                contract_name=contract_name,
                local_service_name=local_service_name,
                remote_service_name=remote_service_name,
                priority_level=priority_level,
            )
        )

    def drop_broker_priority(self, name: str) -> None:
        """DROP BROKER PRIORITY. Raises :class:`CatalogError` for an unknown name."""
        self._change(
            lambda conn, snap: _priorities.drop_broker_priority(conn, snap.priorities, name)
        )

    def alter_database(self, *, honor_broker_priority: bool) -> None:
        """ALTER DATABASE … SET HONOR_BROKER_PRIORITY ON | OFF (PRI-16): whether messages leave
        the transmission queue by their endpoint's level (ON) or all at level 5 (OFF, the
        default). Read back as ``broker.catalog.honor_broker_priority``.

        Raises:
            CatalogError: ``honor_broker_priority`` is not a bool.
        """
        if not isinstance(honor_broker_priority, bool):
            raise CatalogError(
                f"HONOR_BROKER_PRIORITY must be ON or OFF (True or False), "
                f"got {honor_broker_priority!r}"
            )
        value = "1" if honor_broker_priority else "0"
        self._change(
            lambda conn, snap: conn.catalog_write("put_setting", ("honor_broker_priority", value))
        )

    def execute_ddl(self, text: str) -> int:
        """Run CREATE / ALTER / DROP BROKER PRIORITY and ALTER DATABASE … SET
        HONOR_BROKER_PRIORITY ON | OFF statements written as T-SQL (PRI-2, PRI-16), e.g.
        the scripts of seed 004 (``N'…'`` strings, ``[bracketed]`` names, ``USE``/``GO`` lines
        ignored). Statements run one after another; returns how many ran.

        Raises:
            CatalogError: a syntax error (with line and column) or a statement the catalog
                refuses; statements before it have run.
        """
        from .ddl import parse_ddl

        statements = parse_ddl(text)
        for st in statements:
            if st.verb == "ALTER DATABASE":
                self.alter_database(**st.options)  # type: ignore[arg-type]
            elif st.verb == "CREATE":
                self.create_broker_priority(st.name, **st.options)  # type: ignore[arg-type]
            elif st.verb == "ALTER":
                self.alter_broker_priority(st.name, **st.options)  # type: ignore[arg-type]
            else:
                self.drop_broker_priority(st.name)
        return len(statements)

    def _register_procedure(self, queue: str, activation: Activation | None) -> None:
        if activation is not None and not isinstance(activation.procedure, str):
            self.activation.register_procedure(queue, activation.procedure)
        else:
            self.activation.register_procedure(queue, None)

    # -- transactions and reads ----------------------------------------------------------
    def transaction(self) -> Transaction:
        """A new :class:`Transaction` (a context manager: commits on normal exit, rolls back
        on an exception).

        Raises:
            BrokerError: the broker is closed.
        """
        if self._closed:
            raise BrokerError(f"the broker on {self.url} is closed")
        return Transaction(self)

    @property
    def database_name(self) -> str:
        """The database's name as SQL Server events give it (EVENT_INSTANCE's DatabaseName):
        the SQLite file's name without extension, or PostgreSQL's current_database()."""
        return self._storage.database_name

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
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
            raise BrokerError(f"peek top must be an integer >= 0 or None, got {top!r}")
        with self._storage.connection() as conn:
            snap = self._catalog_for(conn)
            q = snap.queue(queue)
            rows = conn.peek(q.queue_id, -1 if top is None else top)
            return to_messages(snap, rows, q.name)

    def peek_after(self, queue: str, after: int, *, top: int) -> list[Message]:
        """Messages of ``queue`` with ``queuing_order > after``, in queuing order, at most
        ``top``: pages through a queue without loading it whole (the Spark reader uses it).

        Raises:
            CatalogError: unknown queue.
        """
        with self._storage.connection() as conn:
            snap = self._catalog_for(conn)
            q = snap.queue(queue)
            return to_messages(snap, conn.peek_after(q.queue_id, after, top), q.name)

    def _message_sequence(self) -> int:
        """The highest queuing_order ever given (grows with every message put on any queue)."""
        with self._storage.connection() as conn:
            return conn.message_sequence()

    def _queue_has_ready(self, queue_id: int) -> bool:
        with self._storage.connection() as conn:
            return conn.queue_has_ready(queue_id)

    def _retry_transmission(self, now: float) -> None:
        """Periodic task: retry the transmission queue (QUE-3)."""
        self._drain_transmission()

    def _drain_transmission(self, batch: int = 1000) -> int:
        """Move what can leave the transmission queue, ``batch`` messages per transaction in
        transmission order (PRI-14..18), until a pass moves fewer; returns how many moved."""
        total = 0
        while True:
            with self._storage.connection() as conn:
                if not conn.transmission_exists():
                    return total
                conn.begin_write()
                applier = Applier(conn, self._catalog_for(conn), self.clock.now())
                moved = applier.drain_transmission(batch, self.priority_aging_interval)
                applier.finish()
                conn.commit()
            self._after_commit(applier.woken_queues, set(), frozenset(applier.arrived_on_empty))
            total += moved
            if moved < batch:
                return total

    # -- waiting and events --------------------------------------------------------------
    def _notify(self, keys: set[int] | None = None) -> None:
        """Wake waiting statements: those of ``keys`` (queue ids, :data:`LOCKS`), or all."""
        self._notifier.notify(keys)
        if keys is None:
            with self._cond:
                self._cond.notify_all()

    def _wait_for(
        self,
        attempt: Callable[[], T | None],
        deadline: float | None,
        *,
        queue_id: int | None = None,
        counts_as_waiting: bool = False,
    ) -> T | None:
        """Call ``attempt`` until it returns a value, the broker-clock ``deadline`` passes
        (None: never) or the broker stops. Between tries it sleeps until woken: by a commit
        touching ``queue_id`` (or releasing locks, when ``queue_id`` is None), by a clock move,
        or by the poller seeing another process's commit. ``counts_as_waiting``: the caller is
        a RECEIVE or GET CONVERSATION GROUP without WHERE, which queue monitors count (ACT-3)."""
        key = LOCKS if queue_id is None else queue_id
        counted = False
        token: int | None = None
        try:
            while True:
                seen = self._notifier.generation(key)
                result = attempt()
                if result is not None:
                    return result
                now = self.clock.now()
                if (deadline is not None and now >= deadline) or self._closed:
                    return None
                if self._stopping and self.activation.in_activated_task():
                    return None  # stop(): activated procedures see an empty queue and exit
                if queue_id is not None and counts_as_waiting and not counted:
                    token = self._storage.activity.begin_wait(queue_id)  # ACT-3, all processes
                    counted = True
                real = WAIT_SAFETY
                if deadline is not None:
                    real = min(real, self.clock.max_real_wait(deadline - now))
                self._notifier.wait(key, seen, max(real, 0.0005))
        finally:
            if counted:
                self._storage.activity.end_wait(token)

    def _after_commit(
        self,
        woken_queues: set[int],
        locked_queues: set[int],
        arrived_on_empty: frozenset[int] = frozenset(),
    ) -> None:
        """After a commit: wake waiters of queues that got messages or had groups unlocked,
        and lock waiters; the monitors of queues that got messages check (ACT-4a)."""
        if woken_queues or locked_queues:
            self._notify(woken_queues | locked_queues | {LOCKS})
        if woken_queues and self.activation.enabled:
            self.activation.check(woken_queues, Trigger.MESSAGE_ARRIVED, arrived_on_empty)

    def _after_rollback(self, received_queues: set[int], locked_queues: set[int]) -> None:
        """After a rollback: received messages are back (RCV-3), count it (POI-1), wake
        waiters, and the monitors check (ACT-4c)."""
        if received_queues:
            self._count_rollbacks(received_queues)
        if received_queues or locked_queues:
            self._notify(received_queues | locked_queues | {LOCKS})
        if received_queues and self.activation.enabled:
            self.activation.check(received_queues, Trigger.ROLLBACK)

    def _note_receive(self, queue_id: int, *, empty: bool, where: bool) -> None:
        """A RECEIVE (or GET CONVERSATION GROUP) ran on the queue (ACT-3b, ACT-4b, ACT-8)."""
        now = self.clock.now()
        activity = self._storage.activity
        if empty:
            if not where:
                activity.note_empty(queue_id, now)
            return
        activity.note_receive(queue_id, now)
        self.activation.received(queue_id)

    def _count_rollbacks(self, queue_ids: set[int]) -> None:
        """POI-1: five rollbacks in a row of transactions that received from a queue turn the
        queue OFF (when its POISON_MESSAGE_HANDLING is ON) and raise BROKER_QUEUE_DISABLED."""
        disabled: list[str] = []
        with self._storage.connection() as conn:
            conn.begin_write()
            snap = self._catalog_for(conn, fresh=True)
            for queue_id in sorted(queue_ids):
                queue = snap.queues_by_id.get(queue_id)
                if queue is None:
                    continue
                count = conn.add_rollback(queue_id)
                if count >= POISON_ROLLBACKS and queue.poison_message_handling and queue.status:
                    conn.disable_queue(queue_id, self.clock.now())
                    disabled.append(queue.name)
            conn.commit()
        if disabled:
            self._invalidate_catalog()
        for name in disabled:
            log.warning(
                "queue %s disabled after %d rollbacks in a row (BROKER_QUEUE_DISABLED)",
                name,
                POISON_ROLLBACKS,
            )
            self._disabled_events.append((name, self.clock.now()))
            raise_event(self, self.catalog.queue(name), "BROKER_QUEUE_DISABLED")  # POI-1, EVT-1

    @property
    def queue_disabled_events(self) -> list[tuple[str, float]]:
        """BROKER_QUEUE_DISABLED events raised in this process: (queue name, broker time)."""
        return list(self._disabled_events)
