"""Contract checks of endpoints and queue rows: insert, read, update and delete; timers and
lifetimes; RECEIVE order; what a commit does to received rows."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ConversationError
from ...storage.failures import CopiesChanged
from ...storage.rows import (
    ConversationGroupListRow,
    EndpointListRow,
    EndpointRow,
    MessageRow,
    QueueCountRow,
    QueueInsert,
)
from . import support as kit
from .support import FAR, StorageOpener

__all__ = [
    "check_endpoint_and_lock",
    "check_endpoints",
    "check_finish_received",
    "check_lock_conversations_cached",
    "check_queue_row_changes",
    "check_receive_order",
    "check_timers",
]


def check_endpoints(open_storage: StorageOpener) -> None:
    """insert_endpoint / get_endpoint / get_endpoints / get_far_endpoint / get_conversations /
    lock_conversations / group_queue / update_endpoints (only the changeable columns; several
    endpoints at once, one given twice written as last given) / list_endpoints /
    delete_endpoints, and IntegrityConflict for a second endpoint with the same handle."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        near = kit.endpoint(queue_id, is_initiator=True)
        far = kit.endpoint(
            queue_id,
            conversation_id=near.conversation_id,
            is_initiator=False,
            state="DI",
            dialog_timer=FAR - 1,
        )
        near_id, far_id = kit.committed(
            conn, lambda: (conn.insert_endpoint(near), conn.insert_endpoint(far))
        )
        kit.expect(far_id > near_id, f"insert_endpoint: ids must increase ({near_id}, {far_id})")
        near, far = replace(near, endpoint_id=near_id), replace(far, endpoint_id=far_id)
        got = conn.get_endpoint(near.conversation_handle)
        kit.equal(got, near, "get_endpoint")
        assert got is not None
        for field in ("conversation_handle", "conversation_id", "conversation_group_id"):
            kit.expect(type(getattr(got, field)) is bytes, f"get_endpoint: {field} must be bytes")
        kit.equal(conn.get_endpoint(kit.new_id()), None, "get_endpoint of an unknown handle")
        handles = [kit.new_id() for _ in range(300)] + [near.conversation_handle]
        kit.equal(
            sorted(
                conn.get_endpoints([*handles, far.conversation_handle]), key=lambda e: e.endpoint_id
            ),
            [near, far],
            "get_endpoints of 302 handles, two of them endpoints",
        )
        kit.equal(conn.get_endpoints([]), [], "get_endpoints of no handle")
        kit.equal(conn.get_far_endpoint(near.conversation_id, False), far, "get_far_endpoint")
        kit.equal(conn.get_far_endpoint(near.conversation_id, True), near, "get_far_endpoint")
        both = conn.get_conversations([near.conversation_id, kit.new_id()])
        kit.equal(sorted(both, key=lambda e: e.endpoint_id), [near, far], "get_conversations")
        kit.equal(conn.get_conversations([]), [], "get_conversations of no conversation")
        many = [kit.new_id() for _ in range(300)] + [near.conversation_id]  # several batches
        kit.equal(
            sorted(conn.get_conversations(many), key=lambda e: e.endpoint_id),
            [near, far],
            "get_conversations of 301 conversations",
        )
        conn.begin_write()
        locked, waiting = conn.lock_conversations([near.conversation_id])
        conn.rollback()
        kit.equal(sorted(locked, key=lambda e: e.endpoint_id), [near, far], "lock_conversations")
        kit.equal(waiting, False, "lock_conversations: no local transmission row waits")
        row = kit.transmission(near.conversation_id, 5, b"t")
        kit.committed(conn, lambda: conn.insert_transmissions([row]))
        conn.begin_write()
        kit.equal(conn.lock_conversations([])[1], True, "lock_conversations: a local row waits")
        conn.rollback()
        kit.committed(
            conn, lambda: conn.delete_transmission_of_endpoint(near.conversation_id, True)
        )
        kit.equal(conn.group_queue(near.conversation_group_id), queue_id, "group_queue")
        kit.equal(conn.group_queue(kit.new_id()), None, "group_queue of an unknown group")
        kit.equal(conn.group_services(near.conversation_group_id), [1], "group_services")
        kit.equal(conn.group_services(kit.new_id()), [], "group_services of an unknown group")
        groups = {r.conversation_group_id: r for r in conn.list_conversation_groups()}
        kit.typed(list(groups.values()), ConversationGroupListRow, "list_conversation_groups")
        kit.equal(
            groups.get(near.conversation_group_id),
            ConversationGroupListRow(near.conversation_group_id, 1, queue_id),
            "list_conversation_groups (group, service, queue)",
        )

        changed = replace(
            near,
            conversation_group_id=kit.new_id(),
            state="DO",
            dialog_timer=FAR - 2,
            send_sequence=3,
            receive_sequence=4,
            end_dialog_sequence=2,
            far_service="//not/written",  # not a changeable column
            lifetime=FAR + 5,  # neither
        )
        kit.committed(conn, lambda: conn.update_endpoints([changed]))
        kit.equal(
            conn.get_endpoint(near.conversation_handle),
            replace(changed, far_service=near.far_service, lifetime=near.lifetime),
            "update_endpoints (group, state, timer and sequences written, nothing else)",
        )
        twice = [replace(changed, send_sequence=7), replace(far, receive_sequence=8)]
        twice.append(replace(changed, send_sequence=9))  # one endpoint twice: the last wins
        kit.committed(conn, lambda: conn.update_endpoints(twice))
        kit.equal(
            [
                (r.send_sequence, r.receive_sequence)
                for r in sorted(
                    conn.get_conversations([near.conversation_id]), key=lambda e: e.endpoint_id
                )
            ],
            [(9, 4), (0, 8)],
            "update_endpoints of two endpoints, one of them given twice (the last wins)",
        )
        kit.committed(conn, lambda: conn.update_endpoints([replace(changed, send_sequence=3)]))
        listed = [r for r in conn.list_endpoints() if r.queue_id == queue_id]
        kit.typed(listed, EndpointListRow, "list_endpoints")
        kit.equal(
            [
                (r.conversation_handle, r.state, r.send_sequence, r.end_dialog_sequence)
                for r in listed
            ],
            [(near.conversation_handle, "DO", 3, 2), (far.conversation_handle, "DI", 0, -1)],
            "list_endpoints (by endpoint_id)",
        )

        kit.refused(
            conn,
            lambda: conn.insert_endpoint(replace(near, conversation_id=kit.new_id())),
            "insert_endpoint of an existing handle",
        )
        kit.committed(conn, lambda: conn.delete_endpoints([near_id, far_id]))
        kit.equal(conn.get_endpoint(near.conversation_handle), None, "get_endpoint after delete")
        kit.equal(conn.get_conversations([near.conversation_id]), [], "delete_endpoint")


def check_endpoint_and_lock(open_storage: StorageOpener) -> None:
    """get_endpoint_and_lock: the endpoint and True when the group is now this connection's,
    the endpoint and False when another connection holds it, (None, False) for no endpoint."""
    with kit.Bench(open_storage) as bench:
        storage = bench.storage()
        one, two = bench.connect(storage), bench.connect(storage)
        endpoint = kit.endpoint(kit.new_queue(one))
        endpoint = replace(
            endpoint, endpoint_id=kit.committed(one, lambda: one.insert_endpoint(endpoint))
        )
        handle, group = endpoint.conversation_handle, endpoint.conversation_group_id
        kit.equal(one.get_endpoint_and_lock(handle), (endpoint, True), "get_endpoint_and_lock")
        kit.equal(one.held_groups(), frozenset({group}), "held_groups after get_endpoint_and_lock")
        kit.equal(
            one.get_endpoint_and_lock(handle), (endpoint, True), "get_endpoint_and_lock again"
        )
        kit.equal(
            two.get_endpoint_and_lock(handle),
            (endpoint, False),
            "get_endpoint_and_lock of a group another connection holds",
        )
        kit.equal(two.held_groups(), frozenset(), "held_groups of the refused connection")
        kit.equal(two.get_endpoint_and_lock(kit.new_id()), (None, False), "unknown handle")
        one.release_locks()
        kit.equal(two.get_endpoint_and_lock(handle), (endpoint, True), "after release_locks")


def check_timers(open_storage: StorageOpener) -> None:
    """due_timers (timer at or before now, earliest first, limit), due_lifetimes (not ER or CD)
    and next_due_time."""
    base = 1_600_000_000.0  # before every other check's times
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        late = kit.endpoint(queue_id, dialog_timer=base + 2)
        early = kit.endpoint(queue_id, dialog_timer=base + 1)
        lives = kit.endpoint(queue_id, lifetime=base + 3)
        ended = kit.endpoint(queue_id, lifetime=base + 0.5, state="CD")
        errored = kit.endpoint(queue_id, lifetime=base + 0.5, state="ER")
        rows = [late, early, lives, ended, errored]
        ids = kit.committed(conn, lambda: [conn.insert_endpoint(row) for row in rows])
        try:
            ours = {row.conversation_handle for row in rows}

            def mine(handles: list[bytes]) -> list[bytes]:
                for handle in handles:
                    kit.expect(type(handle) is bytes, "due_timers / due_lifetimes return bytes")
                return [h for h in handles if h in ours]

            kit.equal(
                mine(conn.due_timers(base + 1.5, -1)), [early.conversation_handle], "due_timers"
            )
            kit.equal(
                mine(conn.due_timers(base + 5, -1)),
                [early.conversation_handle, late.conversation_handle],
                "due_timers (earliest first)",
            )
            kit.equal(conn.due_timers(base + 5, 1), [early.conversation_handle], "due_timers limit")
            kit.equal(mine(conn.due_timers(base, -1)), [], "due_timers before any is due")
            kit.equal(
                mine(conn.due_lifetimes(base + 10, -1)),
                [lives.conversation_handle],
                "due_lifetimes (states ER and CD excluded)",
            )
            kit.equal(conn.next_due_time(), base + 1, "next_due_time")
        finally:
            kit.committed(conn, lambda: conn.delete_endpoints(ids))
        after = conn.next_due_time()
        kit.expect(after is None or after > base + 3, f"next_due_time after delete: {after}")


# -- queues ------------------------------------------------------------------------------------
def check_receive_order(open_storage: StorageOpener) -> None:
    """insert_messages, then group_messages in RECEIVE order (priority descending,
    conversation_order, rank, message_sequence_number) with its limit, conversation_messages
    (rank, sequence), peek (priority, queuing order), peek_after (queuing order, assigned in
    insert order), MessageRow fields, message_sequence (the queue's watermark, also after
    lock_queues), queue_has_ready, queue_counts."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id, other_queue = kit.new_queue(conn), kit.new_queue(conn)
        group, first, second, third = kit.new_id(), kit.new_id(), kit.new_id(), kit.new_id()
        kit.equal(conn.queue_has_ready(queue_id), False, "queue_has_ready of an empty queue")

        def msg(
            handle: bytes, order: int, prio: int, rank: int, seq: int, body: bytes
        ) -> QueueInsert:
            return kit.message(
                queue_id,
                group,
                handle,
                priority=prio,
                conversation_order=order,
                rank=rank,
                sequence=seq,
                body=body,
            )

        inserted = [
            msg(second, 20, 5, 2, 0, b"second-0"),
            msg(first, 10, 5, 2, 1, b"first-1"),
            msg(first, 10, 5, 2, 0, b"first-0"),
            msg(first, 10, 5, 0, 7, b"first-timer"),
            msg(third, 30, 8, 2, 0, b"third-0"),
            msg(second, 20, 5, 1, 3, b"second-error"),
            kit.message(other_queue, kit.new_id(), kit.new_id(), priority=10, body=b"elsewhere"),
        ]
        kit.committed(conn, lambda: conn.insert_messages(inserted))

        receive_order = [
            b"third-0",
            b"first-timer",
            b"first-0",
            b"first-1",
            b"second-error",
            b"second-0",
        ]
        rows = conn.group_messages(group, -1)
        kit.typed(rows, MessageRow, "group_messages")
        kit.equal(kit.bodies(rows), receive_order, "group_messages order")
        kit.equal(
            kit.bodies(conn.group_messages(group, 2)), receive_order[:2], "group_messages limit"
        )
        kit.equal(
            kit.bodies(conn.conversation_messages(group, first, -1)),
            [b"first-timer", b"first-0", b"first-1"],
            "conversation_messages order (rank, then sequence)",
        )
        kit.equal(
            kit.bodies(conn.conversation_messages(group, second, 1)),
            [b"second-error"],
            "conversation_messages limit",
        )

        by_order = conn.peek_after(queue_id, 0, -1)
        kit.typed(by_order, MessageRow, "peek_after")
        kit.equal(
            kit.bodies(by_order),
            [m.message_body for m in inserted[:-1]],
            "queuing_order follows the insert order (peek_after)",
        )
        orders = [row.queuing_order for row in by_order]
        kit.expect(orders == sorted(set(orders)), f"queuing orders must increase: {orders}")
        kit.equal(
            kit.bodies(conn.peek_after(queue_id, orders[2], 2)),
            [b"first-timer", b"third-0"],
            "peek_after (after, limit)",
        )
        kit.equal(
            kit.bodies(conn.peek(queue_id, -1)),
            [b"third-0", *[m.message_body for m in inserted[:-1] if m.priority == 5]],
            "peek order (priority descending, then queuing order)",
        )
        kit.equal(len(conn.peek(queue_id, 3)), 3, "peek limit")

        sent = inserted[1]
        got = next(row for row in by_order if row.message_body == sent.message_body)
        kit.equal(
            got,
            MessageRow(
                status=1,
                priority=sent.priority,
                queuing_order=got.queuing_order,
                conversation_group_id=group,
                conversation_handle=first,
                message_sequence_number=sent.message_sequence_number,
                service_id=sent.service_id,
                service_contract_id=sent.service_contract_id,
                message_type_id=sent.message_type_id,
                validation=sent.validation,
                message_body=sent.message_body,
                message_id=sent.message_id,
                queue_id=queue_id,
                message_enqueue_time=sent.message_enqueue_time,
            ),
            "MessageRow fields as inserted",
        )
        mark = conn.message_sequence(queue_id)
        kit.expect(mark >= max(orders), f"message_sequence {mark} below a committed order")
        kit.equal(conn.queue_has_ready(queue_id), True, "queue_has_ready")
        counts = [c for c in conn.queue_counts() if c.queue_id in (queue_id, other_queue)]
        kit.typed(counts, QueueCountRow, "queue_counts")
        kit.equal(
            sorted(counts),
            [QueueCountRow(queue_id, 1, 6), QueueCountRow(other_queue, 1, 1)],
            "queue_counts",
        )
        later = kit.message(queue_id, group, first, sequence=9, body=b"later")
        conn.begin_write()
        conn.lock_queues({queue_id})
        conn.insert_messages([later])
        conn.commit()
        (row,) = conn.peek_after(queue_id, max(orders), -1)
        kit.expect(row.queuing_order > mark, "a row committed later is above the watermark")
        kit.expect(conn.message_sequence(queue_id) >= row.queuing_order, "watermark moved on")


def check_lock_conversations_cached(open_storage: StorageOpener) -> None:
    """lock_conversations(cached=True) answers the conversations' rows — read, or copies of
    them as a commit of the same storage left them; the rows it returns are the caller's
    (changing them changes no later answer). When a connection of another storage (another
    process) changed a row since, either the answer is the row as stored, or the write
    transaction fails with CopiesChanged — by the call or any later statement, COMMIT
    included — and commits nothing of it; read again without ``cached``, it commits."""
    with kit.Bench(open_storage) as bench:
        storage = bench.storage()
        conn, elsewhere = bench.connect(storage), bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        near = kit.endpoint(queue_id, is_initiator=True)
        far = kit.endpoint(queue_id, conversation_id=near.conversation_id, is_initiator=False)
        ids = kit.committed(conn, lambda: (conn.insert_endpoint(near), conn.insert_endpoint(far)))
        near, far = replace(near, endpoint_id=ids[0]), replace(far, endpoint_id=ids[1])
        conversation = [near.conversation_id]

        def locked() -> list[EndpointRow]:
            rows, waiting = conn.lock_conversations(conversation, cached=True)
            kit.equal(waiting, False, "lock_conversations(cached=True): no local row waits")
            return sorted(rows, key=lambda e: e.endpoint_id)

        for attempt in range(2):  # the first commit may keep copies for the second
            rows = kit.committed(conn, locked)
            kit.equal(rows, [near, far], f"lock_conversations(cached=True), commit {attempt + 1}")
            rows[0].send_sequence = 99
        kit.committed(
            elsewhere, lambda: elsewhere.update_endpoints([replace(near, send_sequence=5)])
        )
        conn.begin_write()
        try:
            rows = locked()
            conn.update_endpoints([replace(rows[0], send_sequence=rows[0].send_sequence + 1)])
            conn.commit()
        except CopiesChanged:
            conn.rollback()
            kit.equal(
                conn.get_endpoint(near.conversation_handle),
                replace(near, send_sequence=5),
                "nothing of a transaction whose copies were out of date is committed",
            )
            conn.begin_write()
            fresh, _ = conn.lock_conversations(conversation)
            row = next(r for r in fresh if r.endpoint_id == near.endpoint_id)
            conn.update_endpoints([replace(row, send_sequence=row.send_sequence + 1)])
            conn.commit()
        else:
            kit.equal(rows, [replace(near, send_sequence=5), far], "a row changed elsewhere")
        kit.equal(
            conn.get_endpoint(near.conversation_handle),
            replace(near, send_sequence=6),
            "the commit after a change elsewhere wrote on the stored row",
        )


def check_finish_received(open_storage: StorageOpener) -> None:
    """finish_received deletes received rows (retain False) or keeps them with status 0
    (retain True), which RECEIVE no longer returns and the counts show as retained; given a
    row that is gone, it fails the write transaction with a ConversationError carrying the
    caller's message (raised by the call or by commit) and ends none of the rows given —
    unless the caller gave no message."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        group, handle = kit.new_id(), kit.new_id()
        kit.committed(
            conn,
            lambda: conn.insert_messages(
                [kit.message(queue_id, group, handle, sequence=i, body=b"%d" % i) for i in range(4)]
            ),
        )
        order = kit.orders(conn, queue_id)
        kit.committed(
            conn, lambda: conn.finish_received([order[b"0"], order[b"1"]], retain=False, removed="")
        )
        kit.equal(
            kit.bodies(conn.peek(queue_id, -1)), [b"2", b"3"], "finish_received(retain=False)"
        )
        conn.begin_write()
        try:
            conn.finish_received([order[b"2"], order[b"0"]], retain=False, removed="0 is gone")
            conn.commit()
        except ConversationError as exc:
            kit.equal(str(exc), "0 is gone", "finish_received's error for a row gone")
        else:
            raise kit.ContractViolation(
                "finish_received of a row gone must fail the write transaction (ConversationError)"
            )
        finally:
            conn.rollback()
        kit.equal(
            kit.bodies(conn.peek(queue_id, -1)), [b"2", b"3"], "a failed finish_received ends none"
        )
        # removed=None: a row gone is no error (a reader's claimed batches)
        kit.committed(conn, lambda: conn.finish_received([order[b"0"]], retain=False, removed=None))
        kit.committed(conn, lambda: conn.finish_received([order[b"2"]], retain=True, removed=""))
        kit.equal(
            [(row.message_body, row.status) for row in conn.peek(queue_id, -1)],
            [(b"2", 0), (b"3", 1)],
            "finish_received(retain=True) sets status 0",
        )
        kit.equal(kit.bodies(conn.group_messages(group, -1)), [b"3"], "group_messages after finish")
        kit.equal(
            sorted(c for c in conn.queue_counts() if c.queue_id == queue_id),
            [QueueCountRow(queue_id, 0, 1), QueueCountRow(queue_id, 1, 1)],
            "queue_counts of retained and ready rows",
        )
        kit.committed(conn, lambda: conn.finish_received([order[b"3"]], retain=False, removed=""))
        kit.equal(conn.queue_has_ready(queue_id), False, "queue_has_ready with only retained rows")
        kit.committed(conn, lambda: conn.finish_received([], retain=False, removed=""))  # no error


def check_queue_row_changes(open_storage: StorageOpener) -> None:
    """move_conversation_messages (to another group, which RECEIVE then finds),
    delete_conversation_messages (the named endpoints' rows only, several at once),
    delete_queue_messages and remove_all_conversations (every endpoint, queue row and
    transmission row)."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id, other_queue = kit.new_queue(conn), kit.new_queue(conn)
        group, new_group, one, two = kit.new_id(), kit.new_id(), kit.new_id(), kit.new_id()
        three, four, other_group = kit.new_id(), kit.new_id(), kit.new_id()
        kit.committed(
            conn,
            lambda: conn.insert_messages(
                [
                    kit.message(queue_id, group, one, body=b"one"),
                    kit.message(queue_id, group, two, body=b"two"),
                    kit.message(queue_id, group, three, body=b"three"),
                    kit.message(queue_id, other_group, four, body=b"four"),
                    kit.message(other_queue, kit.new_id(), kit.new_id(), body=b"kept"),
                ]
            ),
        )
        kit.committed(conn, lambda: conn.move_conversation_messages(one, group, new_group))
        kit.equal(
            kit.bodies(conn.group_messages(new_group, -1)), [b"one"], "moved to the new group"
        )
        kit.equal(
            kit.bodies(conn.group_messages(group, -1)), [b"two", b"three"], "left in the old group"
        )
        kit.committed(
            conn, lambda: conn.delete_conversation_messages([(group, two), (other_group, four)])
        )
        kit.equal(
            sorted(kit.bodies(conn.peek(queue_id, -1))),
            [b"one", b"three"],
            "delete_conversation_messages: the named endpoints' rows only",
        )
        kit.committed(conn, lambda: conn.delete_queue_messages(queue_id))
        kit.equal(conn.peek(queue_id, -1), [], "delete_queue_messages")
        kit.equal(kit.bodies(conn.peek(other_queue, -1)), [b"kept"], "another queue's rows stay")
        kit.committed(conn, conn.remove_all_conversations)  # NEW_BROKER
        kit.equal(conn.peek(other_queue, -1), [], "remove_all_conversations: every queue row")
        kit.equal(conn.list_endpoints(), [], "remove_all_conversations: every endpoint")
        kit.equal(conn.transmission_count(), 0, "remove_all_conversations: transmission queue")
        kit.equal(conn.queue_has_ready(other_queue), False, "remove_all_conversations: groups")


# -- group locks -------------------------------------------------------------------------------
