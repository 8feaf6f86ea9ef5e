"""The storage contract kit: the checks every storage backend must pass.

The contract is written in :mod:`servicebroker.storage.base`; these checks exercise it directly
at the storage level (no :class:`~servicebroker.Broker`): rows, ordering, atomicity, visibility,
group locks across connections and across storages (as two processes would hold them), the
transmission queue, the catalog, queue activity and leadership. A new backend is done when
:func:`run_storage_contract` passes on it.

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

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar

from ..errors import IntegrityConflict, StorageError
from ..storage.base import (
    CatalogRows,
    ContractRow,
    EndpointListRow,
    EndpointRow,
    MessageRow,
    MessageTypeRow,
    QueueCountRow,
    QueueInsert,
    QueueRow,
    ServiceRow,
    Storage,
    StorageConnection,
    TransmissionListRow,
    TransmissionRow,
)
from ..storage.queries import portable_sql

__all__ = [
    "CHECKS",
    "ContractViolation",
    "StorageOpener",
    "check_application_sql",
    "check_catalog_conflict",
    "check_catalog_rows_and_version",
    "check_connection_lifecycle",
    "check_endpoint_and_lock",
    "check_endpoints",
    "check_finish_received",
    "check_group_locks",
    "check_leadership",
    "check_lock_next_group",
    "check_poison_counter",
    "check_queue_activity",
    "check_queue_row_changes",
    "check_reads_see_committed_rows",
    "check_receive_order",
    "check_rollback_discards_writes",
    "check_timers",
    "check_transmission_queue",
    "check_watch_changes",
    "run_storage_contract",
]

StorageOpener = Callable[[], Storage]
"""Opens a new :class:`~servicebroker.storage.base.Storage` on the database under test (the
same database at every call)."""

_T = TypeVar("_T")

NOW = 1_700_000_000.0
"""The broker-clock time the checks write (seconds since the epoch)."""
FAR = NOW + 1_000_000.0
"""The lifetime of the checks' endpoints, except :func:`check_timers`'s own."""


class ContractViolation(AssertionError):
    """A backend broke the storage contract; the message names the check and what was wrong."""


# -- helpers -----------------------------------------------------------------------------------
def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ContractViolation(message)


def _equal(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise ContractViolation(f"{what}: expected {expected!r}, got {actual!r}")


def _typed(rows: Iterable[object], row_type: type, what: str) -> None:
    for row in rows:
        _expect(
            isinstance(row, row_type),
            f"{what}: rows must be {row_type.__name__}, got {type(row).__name__}",
        )


def _new_id() -> bytes:
    return uuid.uuid4().bytes


class _Bench:
    """The storages and connections one check opened; all released and closed at its end."""

    def __init__(self, open_storage: StorageOpener) -> None:
        self._open = open_storage
        self._storages: list[Storage] = []
        self._connections: list[tuple[Storage, StorageConnection]] = []

    def __enter__(self) -> _Bench:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            for storage, conn in reversed(self._connections):
                storage.release(conn)
        finally:
            for storage in reversed(self._storages):
                storage.close()

    def storage(self) -> Storage:
        """Open one more storage on the database (another process, as far as it can tell)."""
        storage = self._open()
        self._storages.append(storage)
        return storage

    def connect(self, storage: Storage) -> StorageConnection:
        """A connection of ``storage``, released at the end of the check."""
        conn = storage.connect()
        self._connections.append((storage, conn))
        return conn


def _committed(conn: StorageConnection, write: Callable[[], Any]) -> Any:
    """Run ``write`` in a write transaction of ``conn`` and commit it; its result."""
    conn.begin_write()
    try:
        result = write()
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
    return result


def _refused(conn: StorageConnection, write: Callable[[], object], what: str) -> None:
    """Run ``write`` in a write transaction of ``conn``: it must raise IntegrityConflict. Rolled
    back either way."""
    conn.begin_write()
    try:
        write()
    except IntegrityConflict:
        return
    finally:
        conn.rollback()
    raise ContractViolation(f"{what} must raise IntegrityConflict")


def _each(action: Callable[[_T], object], items: Iterable[_T]) -> None:
    for item in items:
        action(item)


def _new_queue(conn: StorageConnection) -> int:
    """A new queue (STATUS ON, retention OFF); its id."""
    name = f"kit_{uuid.uuid4().hex[:12]}"
    return int(
        _committed(
            conn, lambda: conn.catalog_write("insert_queue", (name, 1, 0, 1, 0, None, 0, NOW))
        )
    )


def _endpoint(
    queue_id: int,
    *,
    conversation_id: bytes | None = None,
    is_initiator: bool = True,
    group_id: bytes | None = None,
    state: str = "CO",
    lifetime: float = FAR,
    dialog_timer: float | None = None,
    priority: int = 5,
) -> EndpointRow:
    """An endpoint to insert on ``queue_id`` (new handle, and new conversation and group unless
    given)."""
    return EndpointRow(
        endpoint_id=0,
        conversation_handle=_new_id(),
        conversation_id=conversation_id or _new_id(),
        is_initiator=is_initiator,
        service_contract_id=1,
        conversation_group_id=group_id or _new_id(),
        service_id=1,
        queue_id=queue_id,
        far_service="//kit/far",
        lifetime=lifetime,
        state=state,
        dialog_timer=dialog_timer,
        send_sequence=0,
        receive_sequence=0,
        priority=priority,
    )


def _message(
    queue_id: int,
    group_id: bytes,
    handle: bytes,
    *,
    priority: int = 5,
    conversation_order: int = 1,
    rank: int = 2,
    sequence: int = 0,
    body: bytes = b"",
) -> QueueInsert:
    """A ready message (status 1) of conversation endpoint ``handle`` in ``group_id``."""
    return QueueInsert(
        queue_id=queue_id,
        status=1,
        priority=priority,
        conversation_group_id=group_id,
        conversation_handle=handle,
        conversation_order=conversation_order,
        rank=rank,
        message_sequence_number=sequence,
        service_id=1,
        service_contract_id=1,
        message_type_id=1,
        validation="N",
        message_body=body,
        message_id=_new_id(),
    )


def _transmission(
    conversation_id: bytes, level: int, body: bytes, message_type_id: int = 1
) -> tuple[Any, ...]:
    """A transmission row to insert: TransmissionRow's fields but its id, in order (sent by the
    initiator of ``conversation_id`` at ``level``)."""
    return (
        *(_new_id(), conversation_id, 1, "//kit/to", "//kit/from", 1, NOW, 0, message_type_id),
        *("N", body, _new_id(), "message", "", level, FAR),
    )


def _bodies(rows: Iterable[MessageRow]) -> list[bytes]:
    return [row.message_body for row in rows]


def _orders(conn: StorageConnection, queue_id: int) -> dict[bytes, int]:
    """Queuing order by body of every row of the queue."""
    return {row.message_body: row.queuing_order for row in conn.peek_after(queue_id, 0, -1)}


# -- endpoints ---------------------------------------------------------------------------------
def check_endpoints(open_storage: StorageOpener) -> None:
    """insert_endpoint / get_endpoint / get_far_endpoint / get_conversations / group_queue /
    update_endpoints (only the changeable columns) / list_endpoints / delete_endpoint, and
    IntegrityConflict for a second endpoint with the same handle."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = _new_queue(conn)
        near = _endpoint(queue_id, is_initiator=True)
        far = _endpoint(
            queue_id,
            conversation_id=near.conversation_id,
            is_initiator=False,
            state="DI",
            dialog_timer=FAR - 1,
        )
        near_id, far_id = _committed(
            conn, lambda: (conn.insert_endpoint(near), conn.insert_endpoint(far))
        )
        _expect(far_id > near_id, f"insert_endpoint: ids must increase ({near_id}, {far_id})")
        near, far = replace(near, endpoint_id=near_id), replace(far, endpoint_id=far_id)
        got = conn.get_endpoint(near.conversation_handle)
        _equal(got, near, "get_endpoint")
        assert got is not None
        for field in ("conversation_handle", "conversation_id", "conversation_group_id"):
            _expect(type(getattr(got, field)) is bytes, f"get_endpoint: {field} must be bytes")
        _equal(conn.get_endpoint(_new_id()), None, "get_endpoint of an unknown handle")
        _equal(conn.get_far_endpoint(near.conversation_id, False), far, "get_far_endpoint")
        _equal(conn.get_far_endpoint(near.conversation_id, True), near, "get_far_endpoint")
        both = conn.get_conversations([near.conversation_id, _new_id()])
        _equal(sorted(both, key=lambda e: e.endpoint_id), [near, far], "get_conversations")
        _equal(conn.get_conversations([]), [], "get_conversations of no conversation")
        _equal(conn.group_queue(near.conversation_group_id), queue_id, "group_queue")
        _equal(conn.group_queue(_new_id()), None, "group_queue of an unknown group")

        changed = replace(
            near,
            conversation_group_id=_new_id(),
            state="DO",
            dialog_timer=FAR - 2,
            send_sequence=3,
            receive_sequence=4,
            far_service="//not/written",  # not a changeable column
            lifetime=FAR + 5,  # neither
        )
        _committed(conn, lambda: conn.update_endpoints([changed]))
        _equal(
            conn.get_endpoint(near.conversation_handle),
            replace(changed, far_service=near.far_service, lifetime=near.lifetime),
            "update_endpoints (group, state, timer and sequences written, nothing else)",
        )
        listed = [r for r in conn.list_endpoints() if r.queue_id == queue_id]
        _typed(listed, EndpointListRow, "list_endpoints")
        _equal(
            [(r.conversation_handle, r.state, r.send_sequence) for r in listed],
            [(near.conversation_handle, "DO", 3), (far.conversation_handle, "DI", 0)],
            "list_endpoints (by endpoint_id)",
        )

        _refused(
            conn,
            lambda: conn.insert_endpoint(replace(near, conversation_id=_new_id())),
            "insert_endpoint of an existing handle",
        )
        _committed(conn, lambda: _each(conn.delete_endpoint, (near_id, far_id)))
        _equal(conn.get_endpoint(near.conversation_handle), None, "get_endpoint after delete")
        _equal(conn.get_conversations([near.conversation_id]), [], "delete_endpoint")


def check_endpoint_and_lock(open_storage: StorageOpener) -> None:
    """get_endpoint_and_lock: the endpoint and True when the group is now this connection's,
    the endpoint and False when another connection holds it, (None, False) for no endpoint."""
    with _Bench(open_storage) as bench:
        storage = bench.storage()
        one, two = bench.connect(storage), bench.connect(storage)
        endpoint = _endpoint(_new_queue(one))
        endpoint = replace(
            endpoint, endpoint_id=_committed(one, lambda: one.insert_endpoint(endpoint))
        )
        handle, group = endpoint.conversation_handle, endpoint.conversation_group_id
        _equal(one.get_endpoint_and_lock(handle), (endpoint, True), "get_endpoint_and_lock")
        _equal(one.held_groups(), frozenset({group}), "held_groups after get_endpoint_and_lock")
        _equal(one.get_endpoint_and_lock(handle), (endpoint, True), "get_endpoint_and_lock again")
        _equal(
            two.get_endpoint_and_lock(handle),
            (endpoint, False),
            "get_endpoint_and_lock of a group another connection holds",
        )
        _equal(two.held_groups(), frozenset(), "held_groups of the refused connection")
        _equal(two.get_endpoint_and_lock(_new_id()), (None, False), "unknown handle")
        one.release_locks()
        _equal(two.get_endpoint_and_lock(handle), (endpoint, True), "after release_locks")


def check_timers(open_storage: StorageOpener) -> None:
    """due_timers (timer at or before now, earliest first, limit), due_lifetimes (not ER or CD)
    and next_due_time."""
    base = 1_600_000_000.0  # before every other check's times
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = _new_queue(conn)
        late = _endpoint(queue_id, dialog_timer=base + 2)
        early = _endpoint(queue_id, dialog_timer=base + 1)
        lives = _endpoint(queue_id, lifetime=base + 3)
        ended = _endpoint(queue_id, lifetime=base + 0.5, state="CD")
        errored = _endpoint(queue_id, lifetime=base + 0.5, state="ER")
        rows = [late, early, lives, ended, errored]
        ids = _committed(conn, lambda: [conn.insert_endpoint(row) for row in rows])
        try:
            ours = {row.conversation_handle for row in rows}

            def mine(handles: list[bytes]) -> list[bytes]:
                for handle in handles:
                    _expect(type(handle) is bytes, "due_timers / due_lifetimes return bytes")
                return [h for h in handles if h in ours]

            _equal(mine(conn.due_timers(base + 1.5, -1)), [early.conversation_handle], "due_timers")
            _equal(
                mine(conn.due_timers(base + 5, -1)),
                [early.conversation_handle, late.conversation_handle],
                "due_timers (earliest first)",
            )
            _equal(conn.due_timers(base + 5, 1), [early.conversation_handle], "due_timers limit")
            _equal(mine(conn.due_timers(base, -1)), [], "due_timers before any is due")
            _equal(
                mine(conn.due_lifetimes(base + 10, -1)),
                [lives.conversation_handle],
                "due_lifetimes (states ER and CD excluded)",
            )
            _equal(conn.next_due_time(), base + 1, "next_due_time")
        finally:
            _committed(conn, lambda: _each(conn.delete_endpoint, ids))
        after = conn.next_due_time()
        _expect(after is None or after > base + 3, f"next_due_time after delete: {after}")


# -- queues ------------------------------------------------------------------------------------
def check_receive_order(open_storage: StorageOpener) -> None:
    """insert_messages, then group_messages in RECEIVE order (priority descending,
    conversation_order, rank, message_sequence_number) with its limit, conversation_messages
    (rank, sequence), peek (priority, queuing order), peek_after (queuing order, assigned in
    insert order), MessageRow fields, message_sequence, queue_has_ready, queue_counts."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id, other_queue = _new_queue(conn), _new_queue(conn)
        group, first, second, third = _new_id(), _new_id(), _new_id(), _new_id()
        _equal(conn.queue_has_ready(queue_id), False, "queue_has_ready of an empty queue")

        def msg(
            handle: bytes, order: int, prio: int, rank: int, seq: int, body: bytes
        ) -> QueueInsert:
            return _message(
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
            _message(other_queue, _new_id(), _new_id(), priority=10, body=b"elsewhere"),
        ]
        _committed(conn, lambda: conn.insert_messages(inserted))

        receive_order = [
            b"third-0",
            b"first-timer",
            b"first-0",
            b"first-1",
            b"second-error",
            b"second-0",
        ]
        rows = conn.group_messages(group, -1)
        _typed(rows, MessageRow, "group_messages")
        _equal(_bodies(rows), receive_order, "group_messages order")
        _equal(_bodies(conn.group_messages(group, 2)), receive_order[:2], "group_messages limit")
        _equal(
            _bodies(conn.conversation_messages(group, first, -1)),
            [b"first-timer", b"first-0", b"first-1"],
            "conversation_messages order (rank, then sequence)",
        )
        _equal(
            _bodies(conn.conversation_messages(group, second, 1)),
            [b"second-error"],
            "conversation_messages limit",
        )

        by_order = conn.peek_after(queue_id, 0, -1)
        _typed(by_order, MessageRow, "peek_after")
        _equal(
            _bodies(by_order),
            [m.message_body for m in inserted[:-1]],
            "queuing_order follows the insert order (peek_after)",
        )
        orders = [row.queuing_order for row in by_order]
        _expect(orders == sorted(set(orders)), f"queuing orders must increase: {orders}")
        _equal(
            _bodies(conn.peek_after(queue_id, orders[2], 2)),
            [b"first-timer", b"third-0"],
            "peek_after (after, limit)",
        )
        _equal(
            _bodies(conn.peek(queue_id, -1)),
            [b"third-0", *[m.message_body for m in inserted[:-1] if m.priority == 5]],
            "peek order (priority descending, then queuing order)",
        )
        _equal(len(conn.peek(queue_id, 3)), 3, "peek limit")

        sent = inserted[1]
        got = next(row for row in by_order if row.message_body == sent.message_body)
        _equal(
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
            ),
            "MessageRow fields as inserted",
        )
        _expect(
            conn.message_sequence() >= max(orders),
            f"message_sequence {conn.message_sequence()} below a committed order {max(orders)}",
        )
        _equal(conn.queue_has_ready(queue_id), True, "queue_has_ready")
        counts = [c for c in conn.queue_counts() if c.queue_id in (queue_id, other_queue)]
        _typed(counts, QueueCountRow, "queue_counts")
        _equal(
            sorted(counts),
            [QueueCountRow(queue_id, 1, 6), QueueCountRow(other_queue, 1, 1)],
            "queue_counts",
        )


def check_finish_received(open_storage: StorageOpener) -> None:
    """finish_received deletes received rows (retain False) or keeps them with status 0
    (retain True), which RECEIVE no longer returns and the counts show as retained."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = _new_queue(conn)
        group, handle = _new_id(), _new_id()
        _committed(
            conn,
            lambda: conn.insert_messages(
                [_message(queue_id, group, handle, sequence=i, body=b"%d" % i) for i in range(4)]
            ),
        )
        order = _orders(conn, queue_id)
        _committed(conn, lambda: conn.finish_received([order[b"0"], order[b"1"]], retain=False))
        _equal(_bodies(conn.peek(queue_id, -1)), [b"2", b"3"], "finish_received(retain=False)")
        _committed(conn, lambda: conn.finish_received([order[b"2"]], retain=True))
        _equal(
            [(row.message_body, row.status) for row in conn.peek(queue_id, -1)],
            [(b"2", 0), (b"3", 1)],
            "finish_received(retain=True) sets status 0",
        )
        _equal(_bodies(conn.group_messages(group, -1)), [b"3"], "group_messages after finish")
        _equal(
            sorted(c for c in conn.queue_counts() if c.queue_id == queue_id),
            [QueueCountRow(queue_id, 0, 1), QueueCountRow(queue_id, 1, 1)],
            "queue_counts of retained and ready rows",
        )
        _committed(conn, lambda: conn.finish_received([order[b"3"]], retain=False))
        _equal(conn.queue_has_ready(queue_id), False, "queue_has_ready with only retained rows")
        _committed(conn, lambda: conn.finish_received([], retain=False))  # nothing: no error


def check_queue_row_changes(open_storage: StorageOpener) -> None:
    """move_conversation_messages (to another group, which RECEIVE then finds),
    delete_conversation_messages (one endpoint's rows only) and delete_queue_messages."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id, other_queue = _new_queue(conn), _new_queue(conn)
        group, new_group, one, two = _new_id(), _new_id(), _new_id(), _new_id()
        _committed(
            conn,
            lambda: conn.insert_messages(
                [
                    _message(queue_id, group, one, body=b"one"),
                    _message(queue_id, group, two, body=b"two"),
                    _message(other_queue, _new_id(), _new_id(), body=b"kept"),
                ]
            ),
        )
        _committed(conn, lambda: conn.move_conversation_messages(one, group, new_group))
        _equal(_bodies(conn.group_messages(new_group, -1)), [b"one"], "moved to the new group")
        _equal(_bodies(conn.group_messages(group, -1)), [b"two"], "left in the old group")
        _committed(conn, lambda: conn.delete_conversation_messages(group, two))
        _equal(_bodies(conn.peek(queue_id, -1)), [b"one"], "delete_conversation_messages")
        _committed(conn, lambda: conn.delete_queue_messages(queue_id))
        _equal(conn.peek(queue_id, -1), [], "delete_queue_messages")
        _equal(_bodies(conn.peek(other_queue, -1)), [b"kept"], "another queue's rows stay")


# -- group locks -------------------------------------------------------------------------------
def check_group_locks(open_storage: StorageOpener) -> None:
    """try_lock_group between two connections of one storage and a connection of another
    storage (another process): the second gets False until the holder's release_locks (or
    unlock_group); re-entrant for the holder; a rollback keeps the locks; held_groups."""
    with _Bench(open_storage) as bench:
        storage = bench.storage()
        one, two = bench.connect(storage), bench.connect(storage)
        elsewhere = bench.connect(bench.storage())
        group, other = _new_id(), _new_id()
        _equal(one.try_lock_group(group), True, "try_lock_group of a free group")
        _equal(one.try_lock_group(group), True, "try_lock_group by its holder")
        _equal(two.try_lock_group(group), False, "try_lock_group held by another connection")
        _equal(elsewhere.try_lock_group(group), False, "try_lock_group held in another storage")
        _equal(one.try_lock_group(other), True, "a second group")
        _equal(one.held_groups(), frozenset({group, other}), "held_groups")
        _equal(two.held_groups(), frozenset(), "held_groups of a connection refused")

        one.begin_write()
        one.rollback()
        _equal(two.try_lock_group(group), False, "group locks survive a rollback")
        one.release_locks()
        _equal(one.held_groups(), frozenset(), "held_groups after release_locks")
        _equal(two.try_lock_group(group), True, "try_lock_group after the holder's release_locks")
        _equal(one.try_lock_group(group), False, "the former holder is refused now")

        two.unlock_group(group)
        two.unlock_group(_new_id())  # not held: nothing
        _equal(two.held_groups(), frozenset(), "held_groups after unlock_group")
        _equal(elsewhere.try_lock_group(group), True, "try_lock_group after unlock_group")
        elsewhere.begin_write()
        elsewhere.commit()
        elsewhere.release_locks()
        _equal(one.try_lock_group(group), True, "try_lock_group after commit and release_locks")


def check_lock_next_group(open_storage: StorageOpener) -> None:
    """lock_next_group: the group with the best first ready message (priority, then queuing
    order) among those no other connection holds; groups others hold are skipped and added to
    ``known_locked``; a held group qualifies by its messages not in ``skip``; ``exclude_held``;
    another queue's groups never; None when nothing is left."""
    with _Bench(open_storage) as bench:
        storage = bench.storage()
        one, two = bench.connect(storage), bench.connect(storage)
        elsewhere = bench.connect(bench.storage())
        queue_id, other_queue = _new_queue(one), _new_queue(one)
        _equal(one.lock_next_group(queue_id, set()), None, "lock_next_group of an empty queue")
        high, low_old, low_new = _new_id(), _new_id(), _new_id()
        _committed(
            one,
            lambda: one.insert_messages(
                [
                    _message(other_queue, _new_id(), _new_id(), priority=10, body=b"elsewhere"),
                    _message(queue_id, low_old, _new_id(), priority=3, body=b"low-old"),
                    _message(queue_id, high, _new_id(), priority=5, sequence=0, body=b"high-0"),
                    _message(queue_id, high, _new_id(), priority=5, sequence=1, body=b"high-1"),
                    _message(queue_id, low_new, _new_id(), priority=3, body=b"low-new"),
                ]
            ),
        )
        order = _orders(one, queue_id)
        _equal(one.lock_next_group(queue_id, set()), high, "the highest priority first")
        known: set[bytes] = set()
        _equal(
            two.lock_next_group(queue_id, set(), known_locked=known),
            low_old,
            "a group another connection holds is skipped; then the oldest of a level",
        )
        _expect(high in known, "known_locked must name the group found held by another")
        _equal(
            one.lock_next_group(queue_id, {order[b"high-0"]}),
            high,
            "a held group with ready messages not in skip qualifies",
        )
        _equal(
            one.lock_next_group(queue_id, {order[b"high-0"], order[b"high-1"]}),
            low_new,
            "a held group whose messages are all in skip does not",
        )
        _equal(one.held_groups(), frozenset({high, low_new}), "held_groups")
        _equal(elsewhere.lock_next_group(queue_id, set()), None, "every group held elsewhere")
        _equal(
            one.lock_next_group(queue_id, set(), exclude_held=True),
            None,
            "exclude_held: the held groups do not qualify",
        )
        two.release_locks()
        _equal(
            one.lock_next_group(queue_id, set(), exclude_held=True),
            low_old,
            "exclude_held: a group released by another",
        )


# -- transmission queue ------------------------------------------------------------------------
def check_transmission_queue(open_storage: StorageOpener) -> None:
    """insert_transmission, transmission_pending (each level's oldest ``limit``, levels 10 down
    to 1), TransmissionRow fields, transmission_exists / _count / _waiting,
    set_transmission_status, list_transmission (priority, then id), delete_transmission and
    delete_transmission_of_endpoint."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        _expect(not conn.transmission_exists(), "run on a fresh database: transmission rows exist")
        first, second, third = _new_id(), _new_id(), _new_id()

        rows = [
            _transmission(first, 5, b"a"),
            _transmission(first, 5, b"b"),
            _transmission(second, 9, b"c"),
            _transmission(third, 1, b"d"),
        ]
        _committed(conn, lambda: _each(conn.insert_transmission, rows))
        pending = conn.transmission_pending(10)
        _typed(pending, TransmissionRow, "transmission_pending")
        _equal([r.message_body for r in pending], [b"c", b"a", b"b", b"d"], "transmission_pending")
        _equal(
            [r.message_body for r in conn.transmission_pending(1)],
            [b"c", b"a", b"d"],
            "transmission_pending(1): each level's oldest",
        )
        ids = {r.message_body: r.transmission_id for r in pending}
        _expect(ids[b"a"] < ids[b"b"] < ids[b"c"] < ids[b"d"], f"ids in insert order: {ids}")
        _equal(
            pending[1],
            TransmissionRow(ids[b"a"], *rows[0]),
            "TransmissionRow fields as inserted",
        )
        _equal(conn.transmission_exists(), True, "transmission_exists")
        _equal(conn.transmission_count(), 4, "transmission_count")
        _equal(conn.transmission_waiting(first, True), True, "transmission_waiting")
        _equal(conn.transmission_waiting(first, False), False, "transmission_waiting other side")
        _committed(conn, lambda: conn.set_transmission_status(ids[b"a"], "queue disabled"))
        listed = conn.list_transmission()
        _typed(listed, TransmissionListRow, "list_transmission")
        _equal(
            [(r.message_body, r.transmission_status) for r in listed],
            [(b"c", ""), (b"a", "queue disabled"), (b"b", ""), (b"d", "")],
            "list_transmission (priority descending, then id) and set_transmission_status",
        )
        _committed(conn, lambda: conn.delete_transmission(ids[b"c"]))
        _committed(conn, lambda: conn.delete_transmission_of_endpoint(first, True))
        _equal([r.message_body for r in conn.transmission_pending(10)], [b"d"], "deletes")
        _committed(conn, lambda: conn.delete_transmission(ids[b"d"]))
        _equal(conn.transmission_exists(), False, "transmission_exists when empty")
        _equal(conn.transmission_count(), 0, "transmission_count when empty")


# -- catalog -----------------------------------------------------------------------------------
def _catalog_has(rows: CatalogRows, what: str, **names: str) -> None:
    for field, name in names.items():
        found = [row for row in getattr(rows, field) if row.name == name]
        _expect(len(found) == 1, f"load_catalog: {field} must hold {what} {name!r} once")


def check_catalog_rows_and_version(open_storage: StorageOpener) -> None:
    """catalog_write (ids of inserts), bump_catalog_version (+1, seen by another storage),
    load_catalog (named rows, the built-in rows, the HONOR_BROKER_PRIORITY setting) and
    catalog_count (endpoints using a service; queue and transmission rows carrying a message
    type)."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        other = bench.connect(bench.storage())
        before = conn.catalog_version()
        tag = uuid.uuid4().hex[:12]

        def create() -> dict[str, int]:
            ids = {
                "type": conn.catalog_write("insert_message_type", (f"T{tag}", "NONE")),
                "contract": conn.catalog_write("insert_contract", (f"C{tag}",)),
                "queue": conn.catalog_write(
                    "insert_queue", (f"Q{tag}", 1, 1, 0, 1, "proc", 3, NOW)
                ),
            }
            usage = conn.catalog_write(
                "insert_contract_usage", (ids["contract"], ids["type"], "ANY")
            )
            _equal(usage, 0, "catalog_write of a statement that is not an insert of an id")
            ids["service"] = conn.catalog_write("insert_service", (f"S{tag}", ids["queue"]))
            conn.catalog_write("insert_service_contract", (ids["service"], ids["contract"]))
            conn.catalog_write("put_setting", ("honor_broker_priority", "1"))
            conn.bump_catalog_version()
            return ids

        ids = _committed(conn, create)
        for kind, value in ids.items():
            _expect(isinstance(value, int) and value > 0, f"catalog_write id of the {kind}")
        _equal(other.catalog_version(), before + 1, "catalog_version after bump (elsewhere)")
        rows = other.load_catalog()
        _equal(rows.version, before + 1, "load_catalog version")
        _equal(rows.honor_broker_priority, True, "load_catalog honor_broker_priority")
        _typed(rows.message_types, MessageTypeRow, "load_catalog message_types")
        _typed(rows.contracts, ContractRow, "load_catalog contracts")
        _typed(rows.queues, QueueRow, "load_catalog queues")
        _typed(rows.services, ServiceRow, "load_catalog services")
        _catalog_has(rows, "the built-in", message_types="DEFAULT", contracts="DEFAULT")
        _catalog_has(rows, "the built-in", queues="sys_event_notifications")
        _catalog_has(rows, "the new", message_types=f"T{tag}", contracts=f"C{tag}")
        _catalog_has(rows, "the new", queues=f"Q{tag}", services=f"S{tag}")
        queue = next(q for q in rows.queues if q.queue_id == ids["queue"])
        _equal(
            queue,
            QueueRow(ids["queue"], f"Q{tag}", 1, 1, 0, 1, "proc", 3, NOW),
            "QueueRow fields as written",
        )
        _expect(
            (ids["contract"], ids["type"], "ANY") in rows.contract_usages,
            "load_catalog contract_usages",
        )
        _expect(
            (ids["service"], ids["contract"]) in rows.service_contracts,
            "load_catalog service_contracts",
        )
        for name, key in (
            ("endpoints_using_service", "service"),
            ("messages_using_message_type", "type"),
        ):
            _equal(conn.catalog_count(name, (ids[key],)), 0, name)
        endpoint = replace(_endpoint(ids["queue"]), service_id=ids["service"])
        _committed(conn, lambda: conn.insert_endpoint(endpoint))
        _equal(conn.catalog_count("endpoints_using_service", (ids["service"],)), 1, "a user")
        carried = _message(ids["queue"], _new_id(), _new_id())._replace(message_type_id=ids["type"])
        held = _transmission(_new_id(), 5, b"", message_type_id=ids["type"])

        def carry() -> None:
            conn.insert_messages([carried])
            conn.insert_transmission(held)

        _committed(conn, carry)
        _equal(
            conn.catalog_count("messages_using_message_type", (ids["type"],)),
            2,
            "messages_using_message_type (a queue row and a transmission row)",
        )

        def clean_up() -> None:
            conn.delete_queue_messages(ids["queue"])
            conn.delete_transmission_of_endpoint(held[1], True)

        _committed(conn, clean_up)
        _committed(conn, lambda: conn.catalog_write("put_setting", ("honor_broker_priority", "0")))


def check_catalog_conflict(open_storage: StorageOpener) -> None:
    """catalog_write of a duplicate name raises IntegrityConflict; after the rollback the
    connection writes again and nothing of the failed transaction was kept."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        name = f"dup_{uuid.uuid4().hex[:12]}"
        _committed(conn, lambda: conn.catalog_write("insert_message_type", (name, "NONE")))
        version = conn.catalog_version()

        def bump_and_duplicate() -> None:
            conn.bump_catalog_version()
            conn.catalog_write("insert_message_type", (name, "EMPTY"))

        _refused(conn, bump_and_duplicate, "catalog_write of a duplicate name")
        _equal(conn.in_write, False, "in_write after rollback")
        _equal(conn.catalog_version(), version, "the failed transaction's bump is gone")
        types = [r for r in conn.load_catalog().message_types if r.name == name]
        _equal([r.validation for r in types], ["NONE"], "the first row stays, alone")
        _committed(conn, lambda: conn.catalog_write("insert_message_type", (name + "x", "NONE")))


def check_poison_counter(open_storage: StorageOpener) -> None:
    """add_rollback counts up, reset_rollbacks sets 0, disable_queue turns the queue off and
    bumps the catalog version."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = _new_queue(conn)
        _equal(_committed(conn, lambda: conn.add_rollback(queue_id)), 1, "add_rollback")
        _equal(_committed(conn, lambda: conn.add_rollback(queue_id)), 2, "add_rollback again")
        _committed(conn, lambda: conn.reset_rollbacks(queue_id))
        _equal(_committed(conn, lambda: conn.add_rollback(queue_id)), 1, "after reset_rollbacks")
        version = conn.catalog_version()
        _committed(conn, lambda: conn.disable_queue(queue_id, NOW + 9))
        rows = conn.load_catalog()
        queue = next(q for q in rows.queues if q.queue_id == queue_id)
        _equal((queue.is_receive_enabled, queue.modify_date), (0, NOW + 9), "disable_queue")
        _equal(rows.version, version + 1, "disable_queue bumps the catalog version")
        _equal(_committed(conn, lambda: conn.add_rollback(queue_id)), 1, "disable_queue resets")


# -- transactions ------------------------------------------------------------------------------
def check_rollback_discards_writes(open_storage: StorageOpener) -> None:
    """Everything written between begin_write and rollback is gone (endpoints, messages, the
    transmission queue, the catalog); in_write and begin_write's idempotence."""
    with _Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = _new_queue(conn)
        version = conn.catalog_version()
        endpoint = _endpoint(queue_id)
        name = f"gone_{uuid.uuid4().hex[:12]}"
        _equal(conn.in_write, False, "in_write before begin_write")
        conn.begin_write()
        conn.begin_write()  # already open: nothing
        _equal(conn.in_write, True, "in_write after begin_write")
        conn.insert_endpoint(endpoint)
        conn.insert_messages([_message(queue_id, endpoint.conversation_group_id, _new_id())])
        conn.insert_transmission(_transmission(endpoint.conversation_id, 5, b""))
        conn.catalog_write("insert_queue", (name, 1, 0, 1, 0, None, 0, NOW))
        conn.bump_catalog_version()
        _expect(conn.get_endpoint(endpoint.conversation_handle) is not None, "own write unseen")
        _equal(len(conn.peek(queue_id, -1)), 1, "the write transaction sees its own messages")
        conn.rollback()
        _equal(conn.in_write, False, "in_write after rollback")
        conn.rollback()  # nothing open: nothing
        _equal(conn.get_endpoint(endpoint.conversation_handle), None, "endpoint rolled back")
        _equal(conn.peek(queue_id, -1), [], "messages rolled back")
        _equal(conn.queue_has_ready(queue_id), False, "queue_has_ready after rollback")
        _equal(
            conn.transmission_waiting(endpoint.conversation_id, True),
            False,
            "transmission row rolled back",
        )
        _equal(conn.catalog_version(), version, "catalog version rolled back")
        _expect(all(q.name != name for q in conn.load_catalog().queues), "catalog row rolled back")
        conn.commit()  # nothing open: nothing


def check_reads_see_committed_rows(open_storage: StorageOpener) -> None:
    """Reads outside a write transaction, on another connection of the storage or on another
    storage, see only committed rows; the writer sees its own; after commit everyone does,
    and lock_next_group finds the new group."""
    with _Bench(open_storage) as bench:
        storage = bench.storage()
        writer, reader = bench.connect(storage), bench.connect(storage)
        elsewhere = bench.connect(bench.storage())
        queue_id = _new_queue(writer)
        endpoint = _endpoint(queue_id)
        group, handle = endpoint.conversation_group_id, endpoint.conversation_handle
        writer.begin_write()
        writer.insert_endpoint(endpoint)
        writer.insert_messages([_message(queue_id, group, handle, body=b"new")])
        _equal(_bodies(writer.group_messages(group, -1)), [b"new"], "the writer's own rows")
        for name, conn in (("another connection", reader), ("another storage", elsewhere)):
            _equal(conn.get_endpoint(handle), None, f"{name} sees an uncommitted endpoint")
            _equal(conn.group_messages(group, -1), [], f"{name} sees uncommitted messages")
            _equal(conn.queue_has_ready(queue_id), False, f"{name}: queue_has_ready uncommitted")
            _equal(
                conn.lock_next_group(queue_id, set()), None, f"{name} locks an uncommitted group"
            )
        writer.commit({queue_id})
        for name, conn in (("another connection", reader), ("another storage", elsewhere)):
            _expect(conn.get_endpoint(handle) is not None, f"{name} misses a committed endpoint")
            _equal(_bodies(conn.group_messages(group, -1)), [b"new"], f"{name}: committed rows")
        _equal(elsewhere.lock_next_group(queue_id, set()), group, "lock_next_group after commit")


def check_application_sql(open_storage: StorageOpener) -> None:
    """execute_app / executemany_app run in the write transaction (opened on first use), in the
    storage's paramstyle, are rolled back with it, and a constraint refusing a row raises
    IntegrityConflict."""
    with _Bench(open_storage) as bench:
        storage = bench.storage()
        conn = bench.connect(storage)
        table = f"kit_app_{uuid.uuid4().hex[:12]}"

        def sql(text: str) -> str:
            return portable_sql(text, storage.paramstyle)

        conn.execute_app(sql(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, body BLOB)"), ())
        _equal(conn.in_write, True, "execute_app opens the write transaction")
        conn.executemany_app(sql(f"INSERT INTO {table} VALUES (?, ?)"), [(1, b"a"), (2, b"b")])
        _equal(
            conn.execute_app(sql(f"SELECT id, body FROM {table} WHERE id > ? ORDER BY id"), (0,)),
            [(1, b"a"), (2, b"b")],
            "execute_app rows",
        )
        conn.commit()
        conn.execute_app(sql(f"INSERT INTO {table} VALUES (?, ?)"), (3, b"c"))
        conn.rollback()
        _equal(
            [r[0] for r in conn.execute_app(sql(f"SELECT id FROM {table} ORDER BY id"), ())],
            [1, 2],
            "execute_app rolled back",
        )
        conn.rollback()
        insert = sql(f"INSERT INTO {table} VALUES (?, ?)")
        _refused(conn, lambda: conn.execute_app(insert, (1, b"x")), "execute_app of a used key")
        _refused(conn, lambda: conn.executemany_app(insert, [(2, b"x")]), "executemany_app too")
        conn.execute_app(f"DROP TABLE {table}", ())
        conn.commit()


def check_connection_lifecycle(open_storage: StorageOpener) -> None:
    """Storage.connection() / release: the write transaction is rolled back and the group
    locks released when a connection is given back; connect raises StorageError once the
    storage is closed."""
    storage = open_storage()
    try:
        with storage.connection() as conn:
            queue_id = _new_queue(conn)
            endpoint = _endpoint(queue_id)
            group = _new_id()
            _expect(conn.try_lock_group(group), "try_lock_group of a new group")
            conn.begin_write()
            conn.insert_endpoint(endpoint)
        with storage.connection() as conn:
            _equal(conn.in_write, False, "a connection comes outside a write transaction")
            _equal(conn.held_groups(), frozenset(), "a connection comes holding no group")
            _equal(conn.get_endpoint(endpoint.conversation_handle), None, "release rolls back")
            _equal(conn.try_lock_group(group), True, "release releases the group locks")
    finally:
        storage.close()
    try:
        storage.connect()
    except StorageError:
        pass
    else:
        raise ContractViolation("connect on a closed storage must raise StorageError")


# -- what every process shares ----------------------------------------------------------------
def check_queue_activity(open_storage: StorageOpener) -> None:
    """Storage.activity, seen from another storage: waiting sessions (begin_wait / end_wait),
    the last empty RECEIVE and last RECEIVE (a later time wins), forget."""
    with _Bench(open_storage) as bench:
        storage, other = bench.storage(), bench.storage()
        queue_id = _new_queue(bench.connect(storage))
        mine, theirs = storage.activity, other.activity
        _equal(theirs.waiting(queue_id), 0, "waiting on a new queue")
        first, second = mine.begin_wait(queue_id), mine.begin_wait(queue_id)
        _equal(theirs.waiting(queue_id), 2, "waiting, seen by another storage")
        mine.end_wait(first)
        _equal(theirs.waiting(queue_id), 1, "waiting after end_wait")
        mine.end_wait(second)
        mine.end_wait(None)
        _equal(theirs.waiting(queue_id), 0, "waiting after every end_wait")
        _equal(theirs.last_empty(queue_id), None, "last_empty of a new queue")
        _equal(theirs.last_receive(queue_id), None, "last_receive of a new queue")
        mine.note_empty(queue_id, NOW + 3)
        mine.note_empty(queue_id, NOW + 1)
        _equal(theirs.last_empty(queue_id), NOW + 3, "last_empty: the later time")
        mine.note_receive(queue_id, NOW + 5)
        mine.note_receive(queue_id, NOW + 2)
        _equal(theirs.last_receive(queue_id), NOW + 5, "last_receive: the later time")
        mine.forget(queue_id)
        _equal(theirs.last_empty(queue_id), None, "last_empty after forget")
        _equal(theirs.last_receive(queue_id), None, "last_receive after forget")


def check_leadership(open_storage: StorageOpener) -> None:
    """try_lead: one storage of the database leads at a time; resign lets another take over."""
    with _Bench(open_storage) as bench:
        one, two = bench.storage(), bench.storage()
        try:
            _equal(one.try_lead(), True, "try_lead with no leader")
            _equal(one.try_lead(), True, "try_lead by the leader")
            _equal(two.try_lead(), False, "try_lead while another leads")
            one.resign()
            _equal(two.try_lead(), True, "try_lead after the leader resigned")
            _equal(one.try_lead(), False, "the former leader is refused")
        finally:
            one.resign()
            two.resign()


def check_watch_changes(open_storage: StorageOpener) -> None:
    """watch_changes of one storage reports another storage's commit (True, or wait keys that
    include the commit's ``wake`` keys) within a few seconds."""
    with _Bench(open_storage) as bench:
        writer_storage, watcher_storage = bench.storage(), bench.storage()
        writer = bench.connect(writer_storage)
        queue_id = _new_queue(writer)
        changed = watcher_storage.watch_changes()
        changed(0.0)  # what happened before
        writer.begin_write()
        writer.insert_messages([_message(queue_id, _new_id(), _new_id())])
        writer.commit({queue_id})
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            seen = changed(0.05)
            if seen is True or (isinstance(seen, set) and queue_id in seen):
                return
            _expect(seen is False or isinstance(seen, set), f"watch_changes returned {seen!r}")
        raise ContractViolation("watch_changes did not report another storage's commit in 10 s")


CHECKS: tuple[Callable[[StorageOpener], None], ...] = (
    check_endpoints,
    check_endpoint_and_lock,
    check_timers,
    check_receive_order,
    check_finish_received,
    check_queue_row_changes,
    check_group_locks,
    check_lock_next_group,
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
