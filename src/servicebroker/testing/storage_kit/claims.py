"""Storage contract checks of stream readers' conversation-group claims (issue 14,
:class:`~servicebroker.storage.claim_store.ClaimStore`): a claimed group is invisible to
RECEIVE's queries in every connection, a batch's copies read back as written, and the stream
writers' commits are recorded once."""

from __future__ import annotations

from ...messages import new_id
from ...storage.rows import StreamReaderRow
from . import support as kit
from .support import StorageOpener

__all__ = ["check_group_claims", "check_stream_readers_and_commits"]


def check_group_claims(open_storage: StorageOpener) -> None:
    """insert_group_claims / insert_claimed_messages / claimed_messages / claimed_counts /
    claimed_orders / drop_claims / group_claimed / ready_groups: once a claim commits, another
    storage (another process) finds the group neither in ready_groups, lock_next_group,
    group_messages, conversation_messages nor queue_has_ready; the copies read back byte for byte
    in (batch, position) order per part; a rollback claims nothing; drop_claims frees the group."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        other = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        a, b = new_id(), new_id()
        ha, hb = new_id(), new_id()
        rows = [kit.message(queue_id, a, ha, sequence=i, body=b"a%d" % i) for i in range(3)]
        rows.append(kit.message(queue_id, b, hb, sequence=0, body=b"b0"))
        kit.committed(conn, lambda: conn.insert_messages(rows))
        kit.equal(other.ready_groups(queue_id, -1), [a, b], "ready_groups before any claim")
        conn.begin_write()
        conn.insert_group_claims([(a, queue_id, "r", 1, 5.0)])
        conn.rollback()
        kit.expect(not other.group_claimed(a), "a rolled back claim must not hold")
        copies = conn.group_messages(a, -1)
        kit.equal(kit.bodies(copies), [b"a0", b"a1", b"a2"], "group_messages before the claim")

        def claim() -> None:
            conn.insert_group_claims([(a, queue_id, "r", 1, 5.0)])
            conn.insert_claimed_messages(
                "r", 1, [(1, 0, copies[2]), (0, 0, copies[0]), (0, 1, copies[1])]
            )

        kit.committed(conn, claim)
        kit.expect(other.group_claimed(a) and not other.group_claimed(b), "group_claimed")
        kit.equal(other.ready_groups(queue_id, -1), [b], "ready_groups skips a claimed group")
        kit.equal(other.group_messages(a, -1), [], "group_messages of a claimed group")
        kit.equal(other.conversation_messages(a, ha, -1), [], "conversation_messages of it")
        got = other.lock_next_group(queue_id, {})
        kit.equal(got, b, "lock_next_group skips a claimed group")
        other.release_locks()
        kit.equal(other.claimed_messages("r", 0, 1, 0), copies[:2], "claimed_messages part 0")
        kit.equal(other.claimed_messages("r", 0, 1, 1), copies[2:], "claimed_messages part 1")
        kit.equal(other.claimed_messages("r", 1, 1, 0), [], "no batch after 1")
        kit.equal(other.claimed_counts("r", 0, 1), [(1, 0, 2), (1, 1, 1)], "claimed_counts")
        kit.equal(
            sorted(other.claimed_orders("r", 1)),
            sorted((queue_id, c.queuing_order) for c in copies),
            "claimed_orders",
        )
        kit.committed(
            conn,
            lambda: conn.put_stream_reader(StreamReaderRow("r", "q", 1, 0, 0, 5.0, 60.0)),
        )
        kit.equal(
            [
                (c.conversation_group_id, c.reader, c.batch, c.messages)
                for c in other.list_group_claims()
            ],
            [(a, "r", 1, 3)],
            "list_group_claims",
        )
        kit.committed(conn, lambda: conn.insert_group_claims([(b, queue_id, "r", 1, 5.0)]))
        kit.expect(not other.queue_has_ready(queue_id), "queue_has_ready with every group claimed")
        kit.committed(conn, lambda: conn.drop_claims("r", 1))
        kit.expect(other.queue_has_ready(queue_id), "queue_has_ready after drop_claims")
        kit.equal(other.claimed_messages("r", 0, 1, 0), [], "drop_claims drops the copies")
        kit.equal(kit.bodies(other.group_messages(a, -1)), [b"a0", b"a1", b"a2"], "freed")


def check_stream_readers_and_commits(open_storage: StorageOpener) -> None:
    """put_stream_reader / stream_reader / renew_stream_reader / list_stream_readers /
    expired_stream_readers: a reader reads back as written; renewing changes only ``renewed``;
    it is expired only with an unacknowledged, unreleased batch once ``renewed +
    claim_timeout`` is reached."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        other = bench.connect(bench.storage())
        name = f"kit-{new_id().hex()}"
        row = StreamReaderRow(name, "q1,q2", 3, 2, 0, 100.0, 60.0)
        kit.committed(conn, lambda: conn.put_stream_reader(row))
        kit.equal(other.stream_reader(name), row, "stream_reader")
        kit.expect(row in other.list_stream_readers(), "list_stream_readers")
        kit.expect(name not in other.expired_stream_readers(159.0), "not expired before")
        kit.expect(name in other.expired_stream_readers(160.0), "expired at renewed + time-out")
        kit.committed(conn, lambda: conn.renew_stream_reader(name, 150.0))
        kit.equal(other.stream_reader(name), row._replace(renewed=150.0), "renew_stream_reader")
        kit.expect(name not in other.expired_stream_readers(209.0), "renewed: not expired")
        released = row._replace(released=3)
        kit.committed(conn, lambda: conn.put_stream_reader(released))
        kit.expect(name not in other.expired_stream_readers(1e9), "released already")
        done = row._replace(acknowledged=3)
        kit.committed(conn, lambda: conn.put_stream_reader(done))
        kit.expect(name not in other.expired_stream_readers(1e9), "nothing to release")
