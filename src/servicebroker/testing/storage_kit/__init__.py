"""The storage contract kit: the checks every storage backend must pass.

The contract is written in :mod:`servicebroker.storage.base`; these checks exercise it directly
at the storage level (no :class:`~servicebroker.Broker`): rows, ordering, atomicity, visibility,
group locks across connections and across storages (as two processes would hold them), the
transmission queue, the catalog, queue activity and leadership. A new backend is done when
:func:`run_storage_contract` passes on it. The checks are grouped by what they exercise:
:mod:`.rows`, :mod:`.locks`, :mod:`.transactions`, :mod:`.processes`, :mod:`.dialogs_between`,
:mod:`.claims`, :mod:`.statistics`; :mod:`.support` holds
what they share.

Use it with a function that opens a :class:`~servicebroker.storage.base.Storage` on one
database — a new storage object on **the same database** at every call (checks open two at once
to play two processes)::

    from servicebroker.storage import open_storage
    from servicebroker.testing.storage_kit import CHECKS, run_storage_contract

    run_storage_contract(lambda: open_storage(url))  # every check, on that database

    @pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
    def test_storage_contract(check, url):  # one test per check, each on a fresh database
        check(lambda: open_storage(url))

Each check is a function of that opener, closes every storage it opened and raises
:class:`ContractViolation` (an ``AssertionError``) naming what the backend got wrong. The checks
write their own catalog objects, conversations and messages with new ids, and keep clear of
each other's, so they may share one database (run on a fresh one: they do not expect rows they
did not write — in the transmission queue above all — nor a conversation timer or lifetime due
before 2021).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .claims import check_group_claims, check_stream_readers_and_commits
from .dialogs_between import check_closed_conversations, check_endpoint_security_columns
from .locks import (
    check_group_locks,
    check_lock_next_group,
    check_receive_first_group,
)
from .processes import (
    check_leadership,
    check_queue_activity,
    check_watch_changes,
)
from .rows import (
    check_endpoint_and_lock,
    check_endpoints,
    check_finish_received,
    check_lock_conversations_cached,
    check_queue_row_changes,
    check_receive_order,
    check_timers,
)
from .statistics import check_statistics_rows, check_summaries_and_locked_groups
from .support import ContractViolation, StorageOpener
from .transactions import (
    check_application_sql,
    check_catalog_conflict,
    check_catalog_rows_and_version,
    check_connection_lifecycle,
    check_poison_counter,
    check_reads_see_committed_rows,
    check_rollback_discards_writes,
    check_transmission_queue,
)

__all__ = [
    "CHECKS",
    "ContractViolation",
    "StorageOpener",
    "check_application_sql",
    "check_catalog_conflict",
    "check_catalog_rows_and_version",
    "check_closed_conversations",
    "check_connection_lifecycle",
    "check_endpoint_and_lock",
    "check_endpoint_security_columns",
    "check_endpoints",
    "check_finish_received",
    "check_group_claims",
    "check_group_locks",
    "check_leadership",
    "check_lock_conversations_cached",
    "check_lock_next_group",
    "check_poison_counter",
    "check_queue_activity",
    "check_queue_row_changes",
    "check_reads_see_committed_rows",
    "check_receive_first_group",
    "check_receive_order",
    "check_rollback_discards_writes",
    "check_statistics_rows",
    "check_stream_readers_and_commits",
    "check_summaries_and_locked_groups",
    "check_timers",
    "check_transmission_queue",
    "check_watch_changes",
    "run_storage_contract",
]

CHECKS: tuple[Callable[[StorageOpener], None], ...] = (
    check_endpoints,
    check_endpoint_and_lock,
    check_timers,
    check_receive_order,
    check_finish_received,
    check_lock_conversations_cached,
    check_queue_row_changes,
    check_group_locks,
    check_lock_next_group,
    check_receive_first_group,
    check_transmission_queue,
    check_catalog_rows_and_version,
    check_catalog_conflict,
    check_poison_counter,
    check_rollback_discards_writes,
    check_reads_see_committed_rows,
    check_application_sql,
    check_connection_lifecycle,
    check_queue_activity,
    check_leadership,
    check_watch_changes,
    check_endpoint_security_columns,
    check_closed_conversations,
    check_group_claims,
    check_stream_readers_and_commits,
    check_statistics_rows,
    check_summaries_and_locked_groups,
)
"""Every check of the contract, in a sensible order (the simplest operations first)."""


def run_storage_contract(
    open_storage: StorageOpener, checks: Sequence[Callable[[StorageOpener], None]] = CHECKS
) -> None:
    """Run ``checks`` (all by default) against the database ``open_storage`` opens, each on a
    storage of its own, all on that database (best a fresh one).

    Args:
        open_storage: opens a new storage on the database under test at every call.
        checks: the checks to run, in order.

    Raises:
        ContractViolation: one or more checks failed; the message names each failed check
            and what it found (every check runs, whatever the others do).
    """
    failures: list[str] = []
    for check in checks:
        try:
            check(open_storage)
        except Exception as exc:  # a violation, or the backend raising where it must not
            failures.append(f"{check.__name__}: {type(exc).__name__}: {exc}")
    if failures:
        raise ContractViolation(
            f"{len(failures)} of {len(checks)} storage contract checks failed:\n"
            + "\n".join(failures)
        )
