"""Helpers for tests and benchmarks.

- :class:`SimulatedWork` (:mod:`.work`): activated procedures whose processing takes simulated
  seconds on a :class:`~servicebroker.clock.ManualClock`.
- :class:`~servicebroker.testing.link.FaultyLink` (:mod:`.link`, imported on its own): a
  seeded in-memory link with drop, duplicate, reorder, corrupt, delay and cut faults for the
  transport's tests.
- :func:`~servicebroker.testing.waiting.eventually` and :func:`~.waiting.poll` (:mod:`.waiting`):
  the one bounded real-time wait the tests and these helpers share.
- :mod:`servicebroker.testing.storage_kit` (imported on its own, not from here): the checks
  every storage backend must pass.
"""

from __future__ import annotations

from .work import SimulatedWork

__all__ = ["SimulatedWork"]
