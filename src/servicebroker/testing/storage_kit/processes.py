"""Contract checks of what every process shares: queue activity (waits, empty RECEIVEs),
leadership, and noticing other processes' commits."""

from __future__ import annotations

from ..waiting import poll
from . import support as kit
from .support import NOW, ContractViolation, StorageOpener

__all__ = [
    "check_leadership",
    "check_queue_activity",
    "check_watch_changes",
]


def check_queue_activity(open_storage: StorageOpener) -> None:
    """Storage.activity, seen from another storage: waiting sessions (begin_wait / end_wait),
    the last empty RECEIVE and last RECEIVE (a later time wins), forget."""
    with kit.Bench(open_storage) as bench:
        storage, other = bench.storage(), bench.storage()
        queue_id = kit.new_queue(bench.connect(storage))
        mine, theirs = storage.activity, other.activity
        kit.equal(theirs.waiting(queue_id), 0, "waiting on a new queue")
        first, second = mine.begin_wait(queue_id), mine.begin_wait(queue_id)
        kit.equal(theirs.waiting(queue_id), 2, "waiting, seen by another storage")
        mine.end_wait(first)
        kit.equal(theirs.waiting(queue_id), 1, "waiting after end_wait")
        mine.end_wait(second)
        mine.end_wait(None)
        kit.equal(theirs.waiting(queue_id), 0, "waiting after every end_wait")
        kit.equal(theirs.last_empty(queue_id), None, "last_empty of a new queue")
        kit.equal(theirs.last_receive(queue_id), None, "last_receive of a new queue")
        mine.note_empty(queue_id, NOW + 3)
        mine.note_empty(queue_id, NOW + 1)
        kit.equal(theirs.last_empty(queue_id), NOW + 3, "last_empty: the later time")
        mine.note_receive(queue_id, NOW + 5)
        mine.note_receive(queue_id, NOW + 2)
        kit.equal(theirs.last_receive(queue_id), NOW + 5, "last_receive: the later time")
        mine.forget(queue_id)
        kit.equal(theirs.last_empty(queue_id), None, "last_empty after forget")
        kit.equal(theirs.last_receive(queue_id), None, "last_receive after forget")


def check_leadership(open_storage: StorageOpener) -> None:
    """try_lead: one storage of the database leads at a time; resign lets another take over."""
    with kit.Bench(open_storage) as bench:
        one, two = bench.storage(), bench.storage()
        try:
            kit.equal(one.try_lead(), True, "try_lead with no leader")
            kit.equal(one.try_lead(), True, "try_lead by the leader")
            kit.equal(two.try_lead(), False, "try_lead while another leads")
            one.resign()
            kit.equal(two.try_lead(), True, "try_lead after the leader resigned")
            kit.equal(one.try_lead(), False, "the former leader is refused")
        finally:
            one.resign()
            two.resign()


def check_watch_changes(open_storage: StorageOpener) -> None:
    """watch_changes of one storage reports another storage's commit (True, or wait keys that
    include the commit's ``wake`` keys) within a few seconds."""
    with kit.Bench(open_storage) as bench:
        writer_storage, watcher_storage = bench.storage(), bench.storage()
        writer = bench.connect(writer_storage)
        queue_id = kit.new_queue(writer)
        changed = watcher_storage.watch_changes()
        changed(0.0)  # what happened before
        writer.begin_write()
        writer.insert_messages([kit.message(queue_id, kit.new_id(), kit.new_id())])
        writer.commit({queue_id})

        def reported() -> bool:
            seen = changed(0.05)  # waits up to 0.05 s itself
            kit.expect(isinstance(seen, (bool, set)), f"watch_changes returned {seen!r}")
            return seen is True or (isinstance(seen, set) and queue_id in seen)

        if poll(reported, 10.0, every=0.0) is None:
            raise ContractViolation("watch_changes did not report another storage's commit in 10 s")
