"""Contract checks of conversation-group locks: exclusive across connections and storages,
re-entrant, kept by a rollback, freed by release; choosing the next group of a queue."""

from __future__ import annotations

from typing import Any

from ...storage.base import StorageConnection
from . import support as kit
from .support import StorageOpener

__all__ = [
    "check_group_locks",
    "check_lock_next_group",
    "check_receive_first_group",
]


def check_group_locks(open_storage: StorageOpener) -> None:
    """try_lock_group between two connections of one storage and a connection of another
    storage (another process): the second gets False until the holder's release_locks (or
    unlock_group); re-entrant for the holder; a rollback keeps the locks; held_groups."""
    with kit.Bench(open_storage) as bench:
        storage = bench.storage()
        one, two = bench.connect(storage), bench.connect(storage)
        elsewhere = bench.connect(bench.storage())
        group, other = kit.new_id(), kit.new_id()
        kit.equal(one.try_lock_group(group), True, "try_lock_group of a free group")
        kit.equal(one.try_lock_group(group), True, "try_lock_group by its holder")
        kit.equal(two.try_lock_group(group), False, "try_lock_group held by another connection")
        kit.equal(elsewhere.try_lock_group(group), False, "try_lock_group held in another storage")
        kit.equal(one.try_lock_group(other), True, "a second group")
        kit.equal(one.held_groups(), frozenset({group, other}), "held_groups")
        kit.equal(two.held_groups(), frozenset(), "held_groups of a connection refused")

        one.begin_write()
        one.rollback()
        kit.equal(two.try_lock_group(group), False, "group locks survive a rollback")
        one.release_locks()
        kit.equal(one.held_groups(), frozenset(), "held_groups after release_locks")
        kit.equal(
            two.try_lock_group(group), True, "try_lock_group after the holder's release_locks"
        )
        kit.equal(one.try_lock_group(group), False, "the former holder is refused now")

        two.unlock_group(group)
        two.unlock_group(kit.new_id())  # not held: nothing
        kit.equal(two.held_groups(), frozenset(), "held_groups after unlock_group")
        kit.equal(elsewhere.try_lock_group(group), True, "try_lock_group after unlock_group")
        elsewhere.begin_write()
        elsewhere.commit()
        elsewhere.release_locks()
        kit.equal(one.try_lock_group(group), True, "try_lock_group after commit and release_locks")


def check_lock_next_group(open_storage: StorageOpener) -> None:
    """lock_next_group: the group with the best first ready message (priority, then queuing
    order) among those no other connection holds; groups others hold are skipped and added to
    ``known_locked``; a held group qualifies by its messages not in ``skip``; ``exclude_held``;
    another queue's groups never; None when nothing is left."""
    with kit.Bench(open_storage) as bench:
        storage = bench.storage()
        one, two = bench.connect(storage), bench.connect(storage)
        elsewhere = bench.connect(bench.storage())
        queue_id, other_queue = kit.new_queue(one), kit.new_queue(one)
        kit.equal(one.lock_next_group(queue_id, {}), None, "lock_next_group of an empty queue")
        high, low_old, low_new = kit.new_id(), kit.new_id(), kit.new_id()
        kit.committed(
            one,
            lambda: one.insert_messages(
                [
                    kit.message(
                        other_queue, kit.new_id(), kit.new_id(), priority=10, body=b"elsewhere"
                    ),
                    kit.message(queue_id, low_old, kit.new_id(), priority=3, body=b"low-old"),
                    kit.message(
                        queue_id, high, kit.new_id(), priority=5, sequence=0, body=b"high-0"
                    ),
                    kit.message(
                        queue_id, high, kit.new_id(), priority=5, sequence=1, body=b"high-1"
                    ),
                    kit.message(queue_id, low_new, kit.new_id(), priority=3, body=b"low-new"),
                ]
            ),
        )
        order = kit.orders(one, queue_id)
        kit.equal(one.lock_next_group(queue_id, {}), high, "the highest priority first")
        known: set[bytes] = set()
        kit.equal(
            two.lock_next_group(queue_id, {}, known_locked=known),
            low_old,
            "a group another connection holds is skipped; then the oldest of a level",
        )
        kit.expect(high in known, "known_locked must name the group found held by another")
        kit.equal(
            one.lock_next_group(queue_id, {high: [order[b"high-0"]]}),
            high,
            "a held group with ready messages not in skip qualifies",
        )
        kit.equal(
            one.lock_next_group(queue_id, {high: [order[b"high-0"], order[b"high-1"]]}),
            low_new,
            "a held group whose messages are all in skip does not",
        )
        kit.equal(one.held_groups(), frozenset({high, low_new}), "held_groups")
        kit.equal(elsewhere.lock_next_group(queue_id, {}), None, "every group held elsewhere")
        kit.equal(
            one.lock_next_group(queue_id, {}, exclude_held=True),
            None,
            "exclude_held: the held groups do not qualify",
        )
        two.release_locks()
        kit.equal(
            one.lock_next_group(queue_id, {}, exclude_held=True),
            low_old,
            "exclude_held: a group released by another",
        )


def check_receive_first_group(open_storage: StorageOpener) -> None:
    """receive_first_group: the group lock_next_group would take, locked, with its ready
    messages in RECEIVE order (at most ``limit``, -1: all); a group another connection holds is
    skipped and named in ``known_locked``, and one named there is not tried; a group emptied by
    a commit is not returned; ``[]`` and nothing held when no group is free; None and nothing
    held when ``catalog_version`` is not the stored one."""
    with kit.Bench(open_storage) as bench:
        storage = bench.storage()
        one, two = bench.connect(storage), bench.connect(storage)
        elsewhere = bench.connect(bench.storage())
        queue_id = kit.new_queue(one)

        def bodies(conn: StorageConnection, **options: Any) -> list[bytes] | None:
            options.setdefault("known_locked", set())
            rows = conn.receive_first_group(queue_id, options.pop("limit", -1), **options)
            return None if rows is None else [r.message_body for r in rows]

        kit.equal(bodies(one), [], "an empty queue")
        kit.equal(one.held_groups(), frozenset(), "nothing held after an empty queue")
        high, low, gone = kit.new_id(), kit.new_id(), kit.new_id()
        kit.committed(
            one,
            lambda: one.insert_messages(
                [
                    kit.message(queue_id, low, kit.new_id(), priority=3, body=b"low"),
                    kit.message(queue_id, high, kit.new_id(), priority=5, sequence=0, body=b"h0"),
                    kit.message(queue_id, high, kit.new_id(), priority=5, sequence=1, body=b"h1"),
                    kit.message(queue_id, gone, kit.new_id(), priority=9, body=b"gone"),
                ]
            ),
        )
        order = kit.orders(one, queue_id)
        kit.committed(one, lambda: one.finish_received([order[b"gone"]], retain=False, removed=""))
        version = one.catalog_version()
        kit.equal(
            bodies(one, catalog_version=version + 1), None, "a catalog version not the stored one"
        )
        kit.equal(one.held_groups(), frozenset(), "nothing held when the version moved")
        kit.equal(
            bodies(one, limit=1, catalog_version=version), [b"h0"], "the best group's first message"
        )
        kit.equal(one.held_groups(), frozenset({high}), "its group is held")
        known: set[bytes] = set()
        kit.equal(bodies(two, known_locked=known), [b"low"], "a held group is skipped")
        kit.expect(high in known, "known_locked must name the group found held by another")
        kit.equal(bodies(elsewhere), [], "every group held elsewhere")
        kit.equal(elsewhere.held_groups(), frozenset(), "nothing held when no group was free")
        one.release_locks()
        kit.equal(bodies(elsewhere, known_locked={high}), [], "a group in known_locked")
        kit.equal(bodies(elsewhere), [b"h0", b"h1"], "every message of the group")


# -- transmission queue ------------------------------------------------------------------------
