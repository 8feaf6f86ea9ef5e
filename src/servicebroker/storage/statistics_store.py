"""The storage contract's part for what operators see (issue 15, :mod:`servicebroker.engine.statistics`,
:mod:`servicebroker.engine.operations`): the table ``broker_statistics`` (migration 0014) and
the read-only summaries the web console, the Prometheus exporter and
``servicebroker diagnose`` poll. None of the reads takes a lock a broker waits on.
:class:`~servicebroker.storage.base.StorageConnection` includes it; the shared named queries
(:mod:`.named`) give all but :meth:`StatisticsStore.locked_groups`, which each backend answers
from its own group locks."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from .rows import ReadyGroupRow, StatisticsRow, TransmissionSummaryRow

__all__ = ["StatisticsStore"]


class StatisticsStore(Protocol):
    """Published statistics and summaries (see the module docstring)."""

    def publish_statistics(self, row: StatisticsRow) -> None:
        """Insert or replace one broker object's row, in the write transaction."""
        ...

    def list_statistics(self) -> list[StatisticsRow]:
        """Every published row, by ``instance_id``."""
        ...

    def ensure_statistics(self, row: StatisticsRow) -> None:
        """Insert ``row`` unless a row of its ``instance_id`` exists (then nothing), in the
        write transaction."""
        ...

    def statistics_for_update(self, instance_id: str) -> StatisticsRow | None:
        """The row of ``instance_id``, locked until the write transaction ends (two
        transactions adding to it take turns), or None."""
        ...

    def delete_statistics(self, instance_id: str) -> None:
        """Remove one row (folded into the ``retired`` row), in the write transaction."""
        ...

    def endpoint_state_counts(self) -> list[tuple[str, int]]:
        """(state, conversation endpoints in that state) for each state that has some."""
        ...

    def ready_group_counts(self) -> list[ReadyGroupRow]:
        """For each conversation group holding ready (status 1) messages: its queue and how
        many."""
        ...

    def transmission_summary(self) -> list[TransmissionSummaryRow]:
        """The transmission queue by ``transmission_status``: count and oldest enqueue time."""
        ...

    def locked_groups(self, group_ids: Collection[bytes]) -> frozenset[bytes]:
        """Those of ``group_ids`` that a transaction (of any process, this connection's own
        included) holds now, found without taking or waiting for any lock."""
        ...
