"""Storage contract checks of what operators read (issue 15,
:class:`~servicebroker.storage.statistics_store.StatisticsStore`): published statistics rows,
the summaries, and the group locks seen from another process without taking them."""

from __future__ import annotations

from ...messages import new_id
from ...storage.rows import StatisticsRow
from . import support as kit
from .support import StorageOpener

__all__ = ["check_statistics_rows", "check_summaries_and_locked_groups"]


def check_statistics_rows(open_storage: StorageOpener) -> None:
    """publish_statistics / list_statistics / ensure_statistics / statistics_for_update /
    delete_statistics: a row reads back as written from another storage, a second publication
    replaces it, ensure_statistics inserts only a missing row, a deleted one is gone."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        other = bench.connect(bench.storage())
        name = f"kit-{new_id().hex()}"
        first = StatisticsRow(name, "host:1", 5.0, "running", '{"instance_id": "x"}')
        kit.committed(conn, lambda: conn.publish_statistics(first))
        mine = [r for r in other.list_statistics() if r.instance_id == name]
        kit.equal(mine, [first], "list_statistics after publish_statistics")
        kit.typed(mine, StatisticsRow, "list_statistics")
        second = first._replace(updated=6.5, state="closed", snapshot='{"instance_id": "y"}')
        kit.committed(conn, lambda: conn.publish_statistics(second))
        mine = [r for r in other.list_statistics() if r.instance_id == name]
        kit.equal(mine, [second], "a second publish_statistics replaces the row")
        conn.begin_write()
        conn.ensure_statistics(first)  # exists: nothing changes
        kit.equal(conn.statistics_for_update(name), second, "statistics_for_update")
        conn.commit()
        kit.equal(
            [r for r in other.list_statistics() if r.instance_id == name],
            [second],
            "ensure_statistics leaves an existing row as it is",
        )
        kit.committed(conn, lambda: conn.delete_statistics(name))
        kit.committed(conn, lambda: conn.ensure_statistics(first))
        kit.equal(
            [r for r in other.list_statistics() if r.instance_id == name],
            [first],
            "ensure_statistics inserts a missing row",
        )
        kit.committed(conn, lambda: conn.delete_statistics(name))
        kit.equal(
            [r for r in other.list_statistics() if r.instance_id == name], [], "delete_statistics"
        )


def check_summaries_and_locked_groups(open_storage: StorageOpener) -> None:
    """ready_group_counts / endpoint_state_counts / transmission_summary / locked_groups: the
    ready messages of each group are counted (not the received or retained ones); a group
    another storage (process) holds is reported locked, and free again once it commits; asking
    takes no lock (the group can still be locked by the one asking)."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        other = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        a, b = new_id(), new_id()
        ha, hb = new_id(), new_id()
        rows = [kit.message(queue_id, a, ha, sequence=i) for i in range(3)]
        rows.append(kit.message(queue_id, b, hb, sequence=0))
        rows.append(kit.message(queue_id, b, hb, sequence=1)._replace(status=0))
        kit.committed(conn, lambda: conn.insert_messages(rows))
        counts = sorted(
            (r.conversation_group_id, r.messages)
            for r in other.ready_group_counts()
            if r.queue_id == queue_id
        )
        kit.equal(counts, sorted([(a, 3), (b, 1)]), "ready_group_counts (status 1 only)")
        kit.equal(other.locked_groups([a, b]), frozenset(), "locked_groups with none held")
        kit.expect(conn.try_lock_group(a), "try_lock_group")
        kit.equal(other.locked_groups([a, b]), frozenset([a]), "locked_groups, held elsewhere")
        kit.equal(conn.locked_groups([a, b]), frozenset([a]), "locked_groups, held by the asker")
        kit.expect(other.try_lock_group(b), "locked_groups must not take the groups it asks of")
        other.release_locks()
        conn.release_locks()
        kit.equal(other.locked_groups([a, b]), frozenset(), "locked_groups after release")
        kit.equal(other.locked_groups([]), frozenset(), "locked_groups of nothing")
        states = dict(other.endpoint_state_counts())
        kit.expect(all(n > 0 for n in states.values()), "endpoint_state_counts: counts > 0")
        for row in other.transmission_summary():
            kit.expect(row.messages > 0, "transmission_summary: counts > 0")
