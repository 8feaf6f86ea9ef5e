"""Messages per second over the last minutes: a ring buffer of the database's message counters,
sampled every second by a thread of the console, and the chart drawn from it as inline SVG.

The counters are :func:`servicebroker.engine.operations.overview`'s (every broker process's published
figures, summed): messages put on queues (enqueued), SENT and RECEIVEd, in total and per queue.
A rate is the difference of two samples over the seconds between them, taken at least
:data:`WINDOW` seconds apart: brokers publish their counters every second, on their own beat, so
two samples a second apart may see two publications or none — over a few seconds that evens
out. Counters never go down (a stopped process's figures are kept), so a negative difference —
a new database at the same URL — counts as 0.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["Chart", "RateSampler", "Sample", "chart", "depth_chart"]

log = logging.getLogger("servicebroker.console")

WINDOW = 5.0
"""Seconds (at least) between the two samples a rate is taken from."""

SERIES = ("enqueued", "received")
"""The rate chart's lines: messages put on queues and messages RECEIVEd (committed), per
second."""

DEPTH = ("ready", "held")
"""The queue-depth chart's lines: ready messages, and messages in groups a transaction holds
(received, not yet committed)."""


@dataclass(frozen=True)
class Sample:
    """The counters at one moment: ``at`` real seconds (``time.monotonic``); ``totals`` the
    database's counters by series name (``enqueued``, ``sent``, ``received``) and its queues'
    depth (``ready``, ``held``); ``queues`` the counters per queue name."""

    at: float
    totals: Mapping[str, int]
    queues: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Chart:
    """An SVG line chart: ``width``/``height`` in pixels; ``lines`` (series name, SVG polyline
    points "x,y x,y …"); ``peak`` the highest rate shown (messages per second); ``latest``
    the last rate of each series; ``seconds`` the time span shown; ``rates`` each series'
    rates (messages per second), oldest first, one per point; ``top`` the rate at the top of
    the y axis."""

    width: int
    height: int
    lines: list[tuple[str, str]]
    peak: float
    latest: dict[str, float]
    seconds: float
    rates: dict[str, list[float]]
    top: float


def _rate(a: Mapping[str, int], b: Mapping[str, int], key: str, dt: float) -> float:
    return max(b.get(key, 0) - a.get(key, 0), 0) / dt if dt > 0 else 0.0


def _spans(samples: list[Sample], window: float = WINDOW) -> list[tuple[Sample, Sample]]:
    """For each sample after the first: (the latest earlier sample at least ``window`` seconds
    before it, or the first sample; the sample)."""
    out = []
    start = 0
    for j in range(1, len(samples)):
        while start + 1 < j and samples[j].at - samples[start + 1].at >= window:
            start += 1
        out.append((samples[start], samples[j]))
    return out


class RateSampler:
    """Samples ``read()`` every ``interval`` real seconds into a ring of ``keep`` samples, in a
    daemon thread (:meth:`start`, :meth:`stop`). A failing read is logged (once per kind of
    error in a row) and the previous samples are kept; :attr:`error` holds its message until a
    read succeeds again.

    Args:
        read: returns the current :class:`Sample` (its ``at`` is replaced by the sampling time).
        interval: real seconds between samples (> 0).
        keep: how many samples the ring keeps (300 at 1 s: five minutes).
    """

    def __init__(
        self, read: Callable[[], Sample], *, interval: float = 1.0, keep: int = 300
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        self._read = read
        self.interval = interval
        self._ring: deque[Sample] = deque(maxlen=max(keep, 2))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def sample(self) -> None:
        """Take one sample now (the thread calls it every ``interval``)."""
        try:
            s = self._read()
        except Exception as exc:  # the database is away: keep the ring, show the error
            message = f"{type(exc).__name__}: {exc}"
            if message != self.error:
                log.warning("console: reading the broker's figures failed: %s", message)
            self.error = message
            return
        self.error = None
        with self._lock:
            self._ring.append(Sample(time.monotonic(), s.totals, s.queues))

    def samples(self) -> list[Sample]:
        """The samples kept, oldest first."""
        with self._lock:
            return list(self._ring)

    def queue_rates(self, key: str = "received") -> dict[str, float]:
        """Each queue's ``key`` counter per second over the last :data:`WINDOW` seconds."""
        spans = _spans(self.samples())
        if not spans:
            return {}
        a, b = spans[-1]
        dt = b.at - a.at
        return {q: _rate(a.queues.get(q, {}), counts, key, dt) for q, counts in b.queues.items()}

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def start(self) -> None:
        """Start the sampling thread (nothing if it runs)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="servicebroker-console-sampler", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the sampling thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None


def _draw(
    series: dict[str, list[tuple[float, float]]], samples: list[Sample], width: int, height: int
) -> Chart:
    """Scale ``series`` (name -> (sample time, value) points) into a :class:`Chart`: x across
    the samples' time span, the newest at the right edge; y from 0 to 15 % above the highest
    value (at least 1); 4 px margins."""
    peak = max((v for pts in series.values() for _, v in pts), default=0.0)
    top = max(peak * 1.15, 1.0)  # headroom: the highest point stays off the top edge
    span = samples[-1].at - samples[0].at if len(samples) > 1 else 0.0
    end = samples[-1].at if samples else 0.0
    pad = 4
    lines = []
    for name, pts in series.items():
        drawn = []
        for at, v in pts:
            x = width - pad - (end - at) / span * (width - 2 * pad) if span > 0 else width - pad
            y = height - pad - v / top * (height - 2 * pad)
            drawn.append(f"{x:.1f},{y:.1f}")
        lines.append((name, " ".join(drawn)))
    latest = {name: (pts[-1][1] if pts else 0.0) for name, pts in series.items()}
    values = {name: [v for _, v in pts] for name, pts in series.items()}
    return Chart(width, height, lines, peak, latest, span, values, top)


def chart(samples: list[Sample], *, width: int = 720, height: int = 160) -> Chart:
    """The chart of the message rates of ``samples`` (oldest first; each rate over
    :data:`WINDOW` seconds): one polyline per series of :data:`SERIES`, in messages per
    second, scaled as :func:`_draw` does."""
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in SERIES}
    for a, b in _spans(samples):
        dt = b.at - a.at
        for name in SERIES:
            rates[name].append((b.at, _rate(a.totals, b.totals, name, dt)))
    return _draw(rates, samples, width, height)


def depth_chart(samples: list[Sample], *, width: int = 720, height: int = 160) -> Chart:
    """The chart of the messages waiting on the queues at each sample (oldest first): one
    polyline per series of :data:`DEPTH` (ready; received and not yet committed), read from
    the queues themselves — it moves even while no broker publishes its counters."""
    levels = {name: [(s.at, float(s.totals.get(name, 0))) for s in samples] for name in DEPTH}
    return _draw(levels, samples, width, height)
