"""What one broker process has done, counted in memory and published to storage so that every
other process — the web console, the Prometheus exporter, ``servicebroker diagnose`` — sees the
database's totals without asking the process that did the work.

A broker counts, for each committed transaction, the messages it SENT (by the sending service's
queue and message type), the messages it put on queues (enqueued, by queue and type) and the
messages it RECEIVEd (by queue and type, counted at commit: a rolled-back RECEIVE did not take
them), how long the commit took and how long each RECEIVE waited (broker-clock seconds, as
histograms). :meth:`~servicebroker.broker.Broker.statistics` adds what its services know (the
timer's ticks, the queue monitors' states and readers when it leads, the queues poison handling
turned OFF) and gives an :class:`InstanceStatistics`; the broker writes it to the
``broker_statistics`` table every (real) second while started and at stop; at close it adds its
counters to one ``retired`` row and deletes its own. Counters are cumulative for the broker
object, so the totals over the rows never go down.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import StorageError
from ..storage.base import Storage
from ..storage.rows import StatisticsRow

__all__ = [
    "DURATION_BUCKETS",
    "PUBLISH_INTERVAL",
    "RETIRED",
    "STALE_AFTER",
    "Histogram",
    "InstanceStatistics",
    "QueueStatistics",
    "StatisticsFormatError",
    "StatisticsPublisher",
    "StatisticsRecorder",
    "broker_time",
    "process_name",
    "published",
    "read_published",
    "total",
]

DURATION_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Upper bounds (seconds) of the commit and RECEIVE-wait histograms' buckets (+Inf implied)."""

PUBLISH_INTERVAL = 1.0
"""Real seconds between two publications of a started broker's statistics (publishing is
about processes being seen alive, whatever clock the broker runs on)."""

RETIRED = "retired"
"""The ``instance_id`` of the row that sums the processes that stopped (or went silent)."""

_FORMAT = 1
log = logging.getLogger(__name__)


class StatisticsFormatError(StorageError):
    """A ``broker_statistics`` row whose snapshot this version cannot read."""


def process_name() -> str:
    """``host:pid`` of this process, as :attr:`InstanceStatistics.process` shows it."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Histogram:
    """A histogram of durations.

    Attributes:
        bounds: upper bounds of the buckets, seconds, ascending (the last bucket, +Inf, has none).
        counts: observations per bucket, ``len(bounds) + 1`` of them, not cumulative.
        sum: the observations' total, seconds.
    """

    bounds: tuple[float, ...] = DURATION_BUCKETS
    counts: tuple[int, ...] = (0,) * (len(DURATION_BUCKETS) + 1)
    sum: float = 0.0

    @property
    def count(self) -> int:
        """How many observations."""
        return sum(self.counts)

    def observe(self, seconds: float) -> Histogram:
        """This histogram with one more observation of ``seconds``."""
        i = bisect.bisect_left(self.bounds, seconds)
        counts = list(self.counts)
        counts[i] += 1
        return Histogram(self.bounds, tuple(counts), self.sum + seconds)

    def __add__(self, other: Histogram) -> Histogram:
        if other.bounds != self.bounds:  # another version's buckets: keep the count and sum
            other = Histogram(self.bounds, (0,) * len(self.bounds) + (other.count,), other.sum)
        counts = tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        return Histogram(self.bounds, counts, self.sum + other.sum)

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding the ``q`` quantile (0 < q <= 1), seconds; None
        without observations, ``inf`` when it falls in the last bucket."""
        n = self.count
        if n == 0:
            return None
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= q * n:
                return self.bounds[i] if i < len(self.bounds) else float("inf")
        return float("inf")


def _add_counts(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


@dataclass(frozen=True)
class QueueStatistics:
    """One queue's figures in one process (or summed over processes: :func:`total`).

    Attributes:
        messages_enqueued: messages put on the queue, by message type name (committed).
        messages_sent: messages SENT by the services on this queue, by message type name.
        messages_received: messages RECEIVEd from the queue in committed transactions, by type.
        activation_starts: activated procedures started, or QUEUE_ACTIVATION notifications
            raised, by this process's queue monitor (ACT-7, ACT-8).
        poison_events: times poison-message handling turned the queue OFF here (POI-1).
        monitor_state: the queue monitor's state (``INACTIVE``, ``NOTIFIED``,
            ``RECEIVES_OCCURRING``) in the leading process; None where no monitor runs.
        tasks_waiting: sessions waiting in RECEIVE on the queue, as the monitor last saw them.
        readers_running: activated procedures running now (ACT-7).
        peak_readers: the most that ran at once.
        last_activated_time: broker seconds of the last start or notification, or None.
    """

    messages_enqueued: Mapping[str, int] = field(default_factory=dict)
    messages_sent: Mapping[str, int] = field(default_factory=dict)
    messages_received: Mapping[str, int] = field(default_factory=dict)
    activation_starts: int = 0
    poison_events: int = 0
    monitor_state: str | None = None
    tasks_waiting: int = 0
    readers_running: int = 0
    peak_readers: int = 0
    last_activated_time: float | None = None

    def __add__(self, other: QueueStatistics) -> QueueStatistics:
        """Counters summed; the live figures (monitor state, readers) of the side that has a
        monitor state, else summed; the later activation time."""
        times = [t for t in (self.last_activated_time, other.last_activated_time) if t is not None]
        return QueueStatistics(
            _add_counts(self.messages_enqueued, other.messages_enqueued),
            _add_counts(self.messages_sent, other.messages_sent),
            _add_counts(self.messages_received, other.messages_received),
            self.activation_starts + other.activation_starts,
            self.poison_events + other.poison_events,
            self.monitor_state or other.monitor_state,
            max(self.tasks_waiting, other.tasks_waiting),
            self.readers_running + other.readers_running,
            max(self.peak_readers, other.peak_readers),
            max(times) if times else None,
        )

    def without_live(self) -> QueueStatistics:
        """The counters only: what a process that stopped still contributes."""
        return QueueStatistics(
            self.messages_enqueued,
            self.messages_sent,
            self.messages_received,
            self.activation_starts,
            self.poison_events,
            last_activated_time=self.last_activated_time,
        )


@dataclass(frozen=True)
class InstanceStatistics:
    """The figures one broker process publishes (``Broker.statistics()``), or their sum
    (:func:`total`).

    Attributes:
        instance_id: this broker object's id (a UUID string; :data:`RETIRED` for the sum of
            the processes that stopped, ``"total"`` for a sum).
        process: ``host:pid``.
        started: broker seconds when the broker was opened.
        updated: broker seconds of this publication (its broker's clock).
        published: real time of this publication (seconds since the epoch, ``time.time()``):
            whether a process is alive is a matter of real time, whatever clock its broker
            runs on (a :class:`ManualClock` in tests, the demo's simulated year).
        is_leader: it runs the database's timer and queue monitors now.
        is_running: started and not stopped.
        queues: per queue name.
        timer_ticks: 5-second timer notifications counted (TICK-1), in the leader.
        conversation_timers_fired: DialogTimer messages put on queues (DLG-6).
        lifetimes_expired: conversations ended by their LIFETIME (DLG-5).
        commits: transactions committed (those that wrote or received).
        rollbacks: transactions rolled back.
        commit_seconds: how long commits took (broker clock).
        receive_wait_seconds: how long RECEIVE and GET CONVERSATION GROUP calls waited.
    """

    instance_id: str
    process: str = ""
    started: float = 0.0
    updated: float = 0.0
    published: float = 0.0
    is_leader: bool = False
    is_running: bool = False
    queues: Mapping[str, QueueStatistics] = field(default_factory=dict)
    timer_ticks: int = 0
    conversation_timers_fired: int = 0
    lifetimes_expired: int = 0
    commits: int = 0
    rollbacks: int = 0
    commit_seconds: Histogram = field(default_factory=Histogram)
    receive_wait_seconds: Histogram = field(default_factory=Histogram)

    def to_json(self) -> str:
        """The JSON text stored in ``broker_statistics.snapshot``."""
        data: dict[str, Any] = {"format": _FORMAT}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Histogram):
                value = {"bounds": value.bounds, "counts": value.counts, "sum": value.sum}
            elif f.name == "queues":
                value = {
                    name: {g.name: getattr(q, g.name) for g in fields(QueueStatistics)}
                    for name, q in value.items()
                }
            data[f.name] = value
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> InstanceStatistics:
        """Read what :meth:`to_json` wrote (unknown keys are ignored, missing ones default).

        Raises:
            StatisticsFormatError: not such JSON.
        """
        try:
            return cls._from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StatisticsFormatError(
                f"not a broker statistics snapshot ({exc}): {text[:80]!r}"
            ) from exc

    @classmethod
    def _from_dict(cls, data: Any) -> InstanceStatistics:
        if not isinstance(data, dict) or "instance_id" not in data:
            raise ValueError("no instance_id")
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        for name in ("commit_seconds", "receive_wait_seconds"):
            if isinstance(h := kwargs.get(name), dict):
                kwargs[name] = Histogram(
                    tuple(float(b) for b in h["bounds"]),
                    tuple(int(c) for c in h["counts"]),
                    float(h["sum"]),
                )
        queue_fields = {f.name for f in fields(QueueStatistics)}
        kwargs["queues"] = {
            str(name): QueueStatistics(**{k: v for k, v in q.items() if k in queue_fields})
            for name, q in (kwargs.get("queues") or {}).items()
        }
        return cls(**kwargs)

    def __add__(self, other: InstanceStatistics) -> InstanceStatistics:
        queues = dict(self.queues)
        for name, q in other.queues.items():
            queues[name] = queues[name] + q if name in queues else q
        return InstanceStatistics(
            self.instance_id,
            self.process,
            min(self.started, other.started),
            max(self.updated, other.updated),
            max(self.published, other.published),
            self.is_leader or other.is_leader,
            self.is_running or other.is_running,
            queues,
            self.timer_ticks + other.timer_ticks,
            self.conversation_timers_fired + other.conversation_timers_fired,
            self.lifetimes_expired + other.lifetimes_expired,
            self.commits + other.commits,
            self.rollbacks + other.rollbacks,
            self.commit_seconds + other.commit_seconds,
            self.receive_wait_seconds + other.receive_wait_seconds,
        )

    def retired(self) -> InstanceStatistics:
        """The counters only (no live figures): what a process that stopped contributes."""
        return replace(
            self,
            is_leader=False,
            is_running=False,
            queues={name: q.without_live() for name, q in self.queues.items()},
        )


def total(
    instances: Iterable[InstanceStatistics], instance_id: str = "total"
) -> InstanceStatistics:
    """The sum of ``instances``: counters added, live figures from the running ones only.

    Args:
        instances: published statistics, e.g. ``broker.views.dm_broker_statistics()``.
        instance_id: the result's ``instance_id``.
    """
    out = InstanceStatistics(instance_id)
    first = True
    for s in instances:
        s = s if s.is_running else s.retired()
        out = replace(s, instance_id=instance_id) if first else out + s
        first = False
    return out


class _Durations:
    """A histogram being filled (in place: RECEIVE and commit add to it on their hot path);
    :meth:`frozen` gives the :class:`Histogram`."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(DURATION_BUCKETS) + 1)
        self.sum = 0.0

    def add(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.sum += seconds

    def frozen(self) -> Histogram:
        return Histogram(DURATION_BUCKETS, tuple(self.counts), self.sum)


class StatisticsRecorder:
    """The counters one broker process keeps in memory (thread-safe); the transactions, RECEIVE
    and the timer feed it, :meth:`counters` reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enqueued: Counter[tuple[str, str]] = Counter()
        self._sent: Counter[tuple[str, str]] = Counter()
        self._received: Counter[tuple[str, str]] = Counter()
        self._commits = 0
        self._rollbacks = 0
        self._commit_seconds = _Durations()
        self._receive_wait = _Durations()

    def committed(
        self,
        seconds: float,
        enqueued: Mapping[tuple[str, str], int] | None = None,
        sent: Mapping[tuple[str, str], int] | None = None,
        received: Mapping[tuple[str, str], int] | None = None,
    ) -> None:
        """A transaction committed in ``seconds``; the maps count messages by (queue name,
        message type name)."""
        with self._lock:
            self._commits += 1
            self._commit_seconds.add(seconds)
            if enqueued:
                self._enqueued.update(enqueued)
            if sent:
                self._sent.update(sent)
            if received:
                self._received.update(received)

    def delivered(self, enqueued: Mapping[tuple[str, str], int]) -> None:
        """Messages put on queues outside a transaction of the application's (conversation
        timers, the transmission queue, the transport), by (queue name, message type name)."""
        if enqueued:
            with self._lock:
                self._enqueued.update(enqueued)

    def rolled_back(self) -> None:
        """A transaction rolled back."""
        with self._lock:
            self._rollbacks += 1

    def waited(self, seconds: float) -> None:
        """A RECEIVE or GET CONVERSATION GROUP waited ``seconds`` (0 when it did not wait)."""
        with self._lock:
            self._receive_wait.add(seconds)

    def counted(self) -> bool:
        """Whether anything was counted (a commit, a rollback, a wait, a message)."""
        with self._lock:
            return bool(
                self._commits
                or self._rollbacks
                or any(self._receive_wait.counts)
                or self._enqueued
                or self._sent
                or self._received
            )

    def counters(self, instance_id: str) -> InstanceStatistics:
        """The counters so far as an :class:`InstanceStatistics` (queues: counters only)."""
        with self._lock:
            names = {q for q, _ in self._enqueued} | {q for q, _ in self._sent}
            names |= {q for q, _ in self._received}
            queues = {
                name: QueueStatistics(
                    {t: n for (q, t), n in self._enqueued.items() if q == name},
                    {t: n for (q, t), n in self._sent.items() if q == name},
                    {t: n for (q, t), n in self._received.items() if q == name},
                )
                for name in sorted(names)
            }
            return InstanceStatistics(
                instance_id,
                queues=queues,
                commits=self._commits,
                rollbacks=self._rollbacks,
                commit_seconds=self._commit_seconds.frozen(),
                receive_wait_seconds=self._receive_wait.frozen(),
            )


STALE_AFTER = 10.0
"""Real seconds after which a ``running`` row that was not published again is read as not
running (its process was killed): its live figures (monitor state, readers) no longer count."""


def published(row: StatisticsRow, wall_now: float) -> InstanceStatistics:
    """The :class:`InstanceStatistics` of a ``broker_statistics`` row read at ``wall_now`` (real
    time, ``time.time()``): running only when its state says so and it was published within
    :data:`STALE_AFTER` real seconds.

    Raises:
        StatisticsFormatError: the row's snapshot is not such JSON.
    """
    stats = InstanceStatistics.from_json(row.snapshot)
    running = row.state == "running" and wall_now - row.updated <= STALE_AFTER
    return replace(stats, process=row.process, published=row.updated, is_running=running)


def read_published(rows: Iterable[StatisticsRow], wall_now: float) -> list[InstanceStatistics]:
    """:func:`published` of each row; a row that cannot be read (written by another version,
    or damaged) is logged and left out, so one bad row never hides the others."""
    out = []
    for row in rows:
        try:
            out.append(published(row, wall_now))
        except StatisticsFormatError as exc:
            log.warning("broker_statistics row %r left out: %s", row.instance_id, exc)
    return out


def broker_time(instances: Iterable[InstanceStatistics], wall_now: float) -> float | None:
    """The brokers' clock now, as the freshest running instance last read it plus the real
    time since (None without a running instance): ages of messages are measured on it, since
    the brokers' clock may not be the reader's (the demo runs a simulated year)."""
    fresh = max((s for s in instances if s.is_running), key=lambda s: s.published, default=None)
    return None if fresh is None else fresh.updated + max(0.0, wall_now - fresh.published)


class StatisticsPublisher:
    """Writes one broker object's statistics to ``broker_statistics``, and at close adds them
    to :data:`RETIRED` instead (its own row deleted), so the table holds one row per open broker
    plus one for all that closed.

    Args:
        storage: the broker's storage.
        snapshot: makes the broker's :class:`InstanceStatistics` now.
    """

    def __init__(self, storage: Storage, snapshot: Callable[[], InstanceStatistics]) -> None:
        self._storage = storage
        self._snapshot = snapshot
        self._lock = threading.Lock()
        self.published_at: float | None = None

    def publish(self, state: str) -> None:
        """Write the snapshot with ``state`` (``running`` or ``stopped``).

        Raises:
            StorageError: the database failed (nothing written).
        """
        with self._lock:
            wall = time.time()
            stats = replace(self._snapshot(), published=wall)
            row = StatisticsRow(stats.instance_id, stats.process, wall, state, stats.to_json())
            with self._storage.connection() as conn:
                conn.begin_write()
                conn.publish_statistics(row)
                conn.commit()
            self.published_at = wall

    def retire(self) -> None:
        """At close: add the snapshot's counters to :data:`RETIRED` and delete this broker's
        row, in one write transaction (the ``retired`` row locked: two closing brokers take
        turns). An unreadable ``retired`` row is replaced, with a warning.

        Raises:
            StorageError: the database failed (nothing written).
        """
        with self._lock:
            wall = time.time()
            mine = self._snapshot().retired()
            with self._storage.connection() as conn:
                conn.begin_write()
                conn.ensure_statistics(
                    StatisticsRow(
                        RETIRED, "", wall, "closed", InstanceStatistics(RETIRED).to_json()
                    )
                )
                current = conn.statistics_for_update(RETIRED)
                parts = [mine]
                if current is not None:
                    try:
                        parts.insert(0, InstanceStatistics.from_json(current.snapshot))
                    except StatisticsFormatError as exc:
                        log.warning("the unreadable 'retired' statistics are replaced: %s", exc)
                retired = replace(total(parts, RETIRED), process="", published=wall).retired()
                conn.publish_statistics(
                    StatisticsRow(RETIRED, "", wall, "closed", retired.to_json())
                )
                conn.delete_statistics(mine.instance_id)
                conn.commit()
            self.published_at = wall
