"""Prometheus metrics of a broker database: :class:`~.collector.BrokerCollector` (one
:func:`servicebroker.engine.operations.overview` per scrape) and :func:`~.collector.metrics_app`, the
ASGI app that serves them (``servicebroker metrics --port N``, or ``/metrics`` of the web
console); :mod:`.command` is the click command. Every metric is described in
``docs/metrics.md``.

Importing this package loads nothing of ``prometheus_client`` (the ``console`` extra) until one
of its names is used, so the command line starts without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .collector import BrokerCollector, metrics_app

__all__ = ["BrokerCollector", "metrics_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import collector

        return getattr(collector, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
