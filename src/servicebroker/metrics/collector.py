"""The broker's figures as Prometheus metrics: a custom ``prometheus_client`` collector that
builds every metric family from ONE :func:`servicebroker.engine.operations.overview` per scrape.

The collector keeps no counters of its own. The gauges are read from storage at the scrape
(messages by state, groups, the transmission queue, the conversation endpoints); every
``_total`` and both histograms are the sums of what each broker process publishes to the
database (:mod:`servicebroker.engine.statistics`: messages enqueued, SENT and RECEIVEd per queue and
message type, activation starts, poison events, timer ticks, conversation timers fired, lifetimes
expired, commits, rollbacks, commit and RECEIVE-wait durations). So any number of scrapers, in
any process, see the same values, and a scrape takes no lock and writes nothing.

Names follow Prometheus' conventions (https://prometheus.io/docs/practices/naming/): the
``servicebroker_`` prefix, ``_total`` on counters, base units (seconds), and the labels
``queue``, ``message_type``, ``state`` and ``status``. Every metric is listed, with its type,
labels and meaning, in ``docs/metrics.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ..engine.statistics import RETIRED
from ..errors import BrokerError

if TYPE_CHECKING:
    from ..engine.operations import Operations, Overview, QueueOverview
    from ..engine.statistics import Histogram

__all__ = [
    "MESSAGE_STATES",
    "MONITOR_STATES",
    "PREFIX",
    "BrokerCollector",
    "MetricsApp",
    "Observed",
    "families",
    "histogram_family",
    "metrics_app",
]


class Observed(Protocol):
    """What the collector reads: a :class:`~servicebroker.Broker` (its ``operations``)."""

    @property
    def operations(self) -> Operations: ...


PREFIX = "servicebroker"
_log = logging.getLogger(__name__)
MONITOR_STATES = ("INACTIVE", "NOTIFIED", "RECEIVES_OCCURRING")
"""The states of ``sys.dm_broker_queue_monitors`` (ACT-2): one series each per queue."""
MESSAGE_STATES = ("ready", "received", "claimed", "retained")
"""The ``state`` label of ``servicebroker_queue_messages``: ready to RECEIVE, received by a
transaction not yet committed, claimed by a stream reader (a Spark batch not yet committed),
retained (RETENTION = ON)."""


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels or [])


def histogram_family(name: str, doc: str, histogram: Histogram) -> HistogramMetricFamily:
    """A Prometheus histogram family from a broker :class:`~servicebroker.engine.statistics.Histogram`.

    Args:
        name: the family's name without the prefix, e.g. ``commit_duration_seconds``.
        doc: its HELP text.
        histogram: ``bounds`` (upper bounds in seconds, ascending), ``counts`` per bucket
            (``len(bounds) + 1`` of them, the last for +Inf; NOT cumulative) and ``sum``.

    Returns:
        A family whose ``le`` buckets are cumulative, as Prometheus' exposition requires; its
        ``_count`` is the total of ``counts``.

    Raises:
        BrokerError: ``counts`` does not have ``len(bounds) + 1`` entries (statistics that
            were not written by :mod:`servicebroker.engine.statistics`).
    """
    if len(histogram.counts) != len(histogram.bounds) + 1:
        raise BrokerError(
            f"histogram {name}: {len(histogram.counts)} counts for {len(histogram.bounds)} "
            f"bounds (expected {len(histogram.bounds) + 1}, the last for +Inf)"
        )
    buckets: list[tuple[str, float]] = []
    running = 0
    for bound, count in zip((*histogram.bounds, float("inf")), histogram.counts, strict=True):
        running += count
        buckets.append((floatToGoString(bound), float(running)))  # type: ignore[no-untyped-call]
    return HistogramMetricFamily(
        f"{PREFIX}_{name}", doc, buckets=buckets, sum_value=float(histogram.sum)
    )


class BrokerCollector(Collector):
    """A ``prometheus_client`` collector of one broker database's figures.

    Each :meth:`collect` takes one :func:`servicebroker.engine.operations.overview` of ``broker`` and
    turns it into metric families; nothing is cached between scrapes.

    Args:
        broker: an open :class:`~servicebroker.Broker` (it need not be started: the collector
            only reads; a metrics process opens its own).
        source: what takes the overview (default :func:`servicebroker.engine.operations.overview`);
            given in tests to feed a fixed overview.
    """

    def __init__(
        self, broker: Observed, *, source: Callable[[Observed], Overview] | None = None
    ) -> None:
        self._broker = broker
        self._source = source

    def collect(self) -> Iterator[Metric]:
        """The metric families of one overview, as listed in ``docs/metrics.md``.

        Raises:
            BrokerError: the overview could not be read (e.g. the database is unavailable);
                the scrape fails (HTTP 500) rather than report stale figures.
        """
        source = self._source
        if source is None:
            from ..engine.operations import overview

            source = overview
        yield from families(source(self._broker))


def families(ov: Overview) -> list[Metric]:
    """Every metric family of one overview (see :class:`BrokerCollector`)."""
    return [*_queue_families(ov.queues), *_transmission_families(ov), *_broker_families(ov)]


def _queue_families(queues: list[QueueOverview]) -> list[Metric]:
    q = ["queue"]
    messages = _gauge(
        "queue_messages",
        "Messages on the queue by state: ready (in groups nobody holds), received (by a "
        "transaction not yet committed), claimed (by a stream reader's batch not yet "
        "committed) and retained (RETENTION = ON).",
        ["queue", "state"],
    )
    groups = _gauge("queue_conversation_groups", "Conversation groups with messages.", q)
    locked = _gauge("queue_locked_groups", "Conversation groups a transaction holds.", q)
    claimed = _gauge("queue_claimed_groups", "Conversation groups stream readers claim.", q)
    enabled = _gauge("queue_enabled", "1 when the queue's STATUS is ON (receive enabled).", q)
    activation = _gauge(
        "queue_activation_enabled", "1 when the queue's ACTIVATION STATUS is ON.", q
    )
    typed = ["queue", "message_type"]
    enqueued = _counter(
        "queue_messages_enqueued", "Messages put on the queue, per message type.", typed
    )
    sent = _counter(
        "queue_messages_sent", "Messages SENT by the services on the queue, per type.", typed
    )
    received = _counter(
        "queue_messages_received",
        "Messages RECEIVEd from the queue in committed transactions, per type.",
        typed,
    )
    starts = _counter("queue_activation_starts", "Activated procedures started, all processes.", q)
    running = _gauge("queue_readers_running", "Activated procedures running now.", q)
    peak = _gauge("queue_peak_readers", "Most activated procedures running at once.", q)
    waiting = _gauge("queue_tasks_waiting", "Activation tasks waiting to start.", q)
    monitor = _gauge(
        "queue_monitor_state",
        "The queue monitor's state (sys.dm_broker_queue_monitors): 1 for the current one; "
        "all 0 when no started broker monitors the queue.",
        ["queue", "state"],
    )
    poison = _counter(
        "queue_poison_events", "Times poison message handling turned the queue OFF.", q
    )
    for qo in queues:
        name = qo.queue_name
        for state, value in zip(
            MESSAGE_STATES,
            (qo.ready_messages, qo.received_messages, qo.claimed_messages, qo.retained_messages),
            strict=True,
        ):
            messages.add_metric([name, state], value)
        groups.add_metric([name], qo.conversation_groups)
        locked.add_metric([name], qo.locked_groups)
        claimed.add_metric([name], qo.claimed_groups)
        enabled.add_metric([name], 1 if qo.is_receive_enabled else 0)
        activation.add_metric([name], 1 if qo.is_activation_enabled else 0)
        for family, counts in ((enqueued, qo.messages_enqueued), (sent, qo.messages_sent)):
            for message_type, n in sorted(counts.items()):
                family.add_metric([name, message_type], n)
        for message_type, n in sorted(qo.messages_received.items()):
            received.add_metric([name, message_type], n)
        starts.add_metric([name], qo.activation_starts)
        running.add_metric([name], qo.readers_running)
        peak.add_metric([name], qo.peak_readers)
        waiting.add_metric([name], qo.tasks_waiting)
        for state in MONITOR_STATES:
            monitor.add_metric([name, state], 1 if qo.monitor_state == state else 0)
        poison.add_metric([name], qo.poison_events)
    return [
        messages,
        groups,
        locked,
        claimed,
        enabled,
        activation,
        enqueued,
        sent,
        received,
        starts,
        running,
        peak,
        waiting,
        monitor,
        poison,
    ]


def _transmission_families(ov: Overview) -> list[Metric]:
    by_status = _gauge(
        "transmission_queue_messages",
        "Messages in sys.transmission_queue by transmission_status (empty: on their way).",
        ["status"],
    )
    for status, n in sorted(ov.transmission_by_status.items()):
        by_status.add_metric([status], n)
    age = 0.0
    if ov.transmission_oldest is not None:
        age = max(0.0, (ov.taken_at - ov.transmission_oldest).total_seconds())
    oldest = _gauge(
        "transmission_queue_oldest_message_age_seconds",
        "Seconds the oldest message of the transmission queue has waited (0 when empty).",
        None,
    )
    oldest.add_metric([], age)
    dialogs = _gauge(
        "conversation_endpoints",
        "Dialogs: conversation endpoints by state (sys.conversation_endpoints.state_desc).",
        ["state"],
    )
    for state, n in sorted(ov.dialogs_by_state.items()):
        dialogs.add_metric([state], n)
    return [by_status, oldest, dialogs]


def _broker_families(ov: Overview) -> list[Metric]:
    t = ov.totals
    out: list[Metric] = []
    counters = [
        ("timer_ticks", "Ticks of the broker's 5-second timer (TICK-1).", t.timer_ticks),
        (
            "conversation_timers_fired",
            "Conversation timers that fired: a DialogTimer message queued (DLG-6).",
            t.conversation_timers_fired,
        ),
        (
            "lifetimes_expired",
            "Dialogs ended with an error because their LIFETIME ran out (DLG-5).",
            t.lifetimes_expired,
        ),
        ("commits", "Broker transactions committed.", t.commits),
        ("rollbacks", "Broker transactions rolled back.", t.rollbacks),
    ]
    for name, doc, value in counters:
        family = _counter(name, f"{doc} Sum over the broker processes.", [])
        family.add_metric([], value)
        out.append(family)
    out.append(
        histogram_family(
            "commit_duration_seconds",
            "Seconds a broker transaction's COMMIT took, all processes.",
            t.commit_seconds,
        )
    )
    out.append(
        histogram_family(
            "receive_wait_seconds",
            "Seconds a RECEIVE (or GET CONVERSATION GROUP) waited for messages, all processes.",
            t.receive_wait_seconds,
        )
    )
    brokers = [i for i in ov.instances if i.instance_id != RETIRED and i.is_running]
    running = _gauge(
        "broker_processes",
        "Started broker processes publishing statistics on the database (a stopped, closed or "
        "silent one is not counted).",
        None,
    )
    running.add_metric([], len(brokers))
    leaders = _gauge(
        "broker_leaders",
        "Started broker processes leading (running the timer and queue monitors): 1 normally, "
        "0 when none leads.",
        None,
    )
    leaders.add_metric([], sum(1 for i in brokers if i.is_leader))
    return [*out, running, leaders]


class MetricsApp:
    """The ASGI app :func:`metrics_app` returns: the registry in Prometheus' text format, or
    OpenMetrics when the scraper's ``Accept`` asks for it (``prometheus_client``'s encoders),
    built in a worker thread (the overview reads the database: the event loop of the web
    console goes on serving meanwhile). An object, not a function, so that Starlette serves it
    both as ``Route("/metrics", app)`` and ``Mount("/metrics", app)``. A scrape while the
    database cannot be read is answered 503 with the error's one line (logged as a warning),
    not a traceback.

    Args:
        registry: the registry to serve.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer one HTTP request (the ASGI interface; HTTP only, no lifespan events)."""
        encoder, content_type = choose_encoder(Request(scope).headers.get("accept", ""))
        try:
            body = await run_in_threadpool(encoder, self.registry)
            response = Response(body, headers={"Content-Type": content_type})
        except BrokerError as exc:  # raised while the answer is built, before anything is sent
            _log.warning("metrics scrape failed: %s", exc)
            response = PlainTextResponse(f"servicebroker metrics: {exc}\n", status_code=503)
        await response(scope, receive, send)


def metrics_app(broker: Observed) -> MetricsApp:
    """An ASGI app serving ``broker``'s metrics in Prometheus' text format (or OpenMetrics
    when the scraper asks for it), for ``servicebroker metrics`` or for the web console's
    ``/metrics`` (``Route("/metrics", metrics_app(broker))`` in Starlette).

    Args:
        broker: an open broker (not necessarily started); it must stay open while the app
            serves.

    Returns:
        A :class:`MetricsApp` on a registry of its own holding one :class:`BrokerCollector`
        (not the process-wide default registry, so nothing else of the process is exported).
        It reads the overview in a worker thread, off the event loop.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return MetricsApp(registry)
