"""Message ids and conversation handles are unique, also across ``os.fork()``: a forked child
must not hand out the ids its parent has drawn (or will draw) from the pool it inherited."""

from __future__ import annotations

import os
import select
import signal
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from servicebroker import Broker
from servicebroker.messages import new_id

from .conftest import make_pair

DRAWS = 64


def _in_child(work: Callable[[], bytes], timeout: float = 60.0) -> bytes:
    """Run ``work()`` in a forked child; return the bytes it returned, passed through a pipe.

    The child always leaves through ``os._exit`` (1 on any failure, with the error text as its
    output), so no pytest machinery runs twice; a child still running after ``timeout``
    seconds is killed and the test fails."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns when forking a process that has threads (a Spark session of an
        # earlier test); the child here touches only what it makes itself
        warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            os.close(read_end)
            out = work()
        except BaseException as exc:  # report everything to the parent
            out, code = f"{type(exc).__name__}: {exc}".encode(), 1
        try:
            with os.fdopen(write_end, "wb") as w:
                w.write(out)
        finally:
            os._exit(code)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    with os.fdopen(read_end, "rb", buffering=0) as r:
        while True:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError(f"the forked child did not finish within {timeout} s")
            chunk = r.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data.decode(errors="replace")
    return data


def test_ids_drawn_after_a_fork_differ_between_parent_and_child() -> None:
    new_id()  # the parent's pool is filled before the fork, as in any running broker
    child = _in_child(lambda: b"".join(new_id() for _ in range(DRAWS)))
    child_ids = {child[i : i + 16] for i in range(0, len(child), 16)}
    parent_ids = {new_id() for _ in range(DRAWS)}
    assert len(child_ids) == DRAWS and len(parent_ids) == DRAWS
    assert not child_ids & parent_ids


def test_a_forked_child_begins_dialogs_on_its_own_broker(tmp_path: Path) -> None:
    path = str(tmp_path / "fork.db")  # SQLite only: a PostgreSQL pool must not cross a fork
    with Broker.open(path) as broker:
        pair = make_pair(broker)

        def dialog(b: Broker) -> bytes:
            with b.transaction() as tx:
                handle = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
                tx.send(handle, "Req", b"hello")
            return handle.bytes

        dialog(broker)  # the parent's id pool is in use before the fork

        def child_work() -> bytes:
            with Broker.open(path) as own:
                return dialog(own)

        child_handle = _in_child(child_work)
        parent_handle = dialog(broker)
        assert len(child_handle) == 16 and child_handle != parent_handle
        bodies = [m.message_body for m in broker.peek(pair.tq)]
        assert bodies == [b"hello"] * 3


def test_ids_are_time_ordered_uuids() -> None:
    # an id starts with the millisecond it was drawn in (UUID version 7), so ids drawn later
    # sort after earlier ones and a commit's new rows share index pages; the rest is random
    import time as _time
    import uuid as _uuid

    before = _time.time_ns() // 1_000_000
    ids = [new_id() for _ in range(1000)]
    after = _time.time_ns() // 1_000_000
    stamps = [int.from_bytes(i[:6], "big") for i in ids]
    assert all(before <= s <= after for s in stamps)
    assert stamps == sorted(stamps)
    assert {_uuid.UUID(bytes=i).version for i in ids} == {7}
    assert {_uuid.UUID(bytes=i).variant for i in ids} == {_uuid.RFC_4122}
    assert len({i[6:] for i in ids}) == 1000  # random beyond the millisecond
