"""Functions run in child processes by the multi-process tests (spawned, so importable)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from servicebroker import Broker


def hold_a_group(path: str, queue: str, ready: Any, release: Any, out: Any) -> None:
    """Receive one group and keep the transaction open until told to commit."""
    with Broker.open(path, poll_interval=0.01) as broker, broker.transaction() as tx:
        msgs = tx.receive(queue)
        out.put([m.message_body for m in msgs])
        ready.set()
        release.wait(30)


def receive_then_die(path: str, queue: str, ready: Any) -> None:
    """Receive a group, then get killed with SIGKILL in the middle of the transaction."""
    broker = Broker.open(path, poll_interval=0.01)
    tx = broker.transaction()
    tx.receive(queue)
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)


def reader(path: str, queue: str, out: Any, received: Any, total: int) -> None:
    """Receive until all ``total`` messages have been received by the readers together
    (``received`` is a shared counter); report what this reader received, in order, with the
    real-time interval each group was held."""
    got: list[tuple[bytes, bytes, int, float, float]] = []
    with Broker.open(path, poll_interval=0.005) as broker:
        while received.value < total:
            with broker.transaction() as tx:
                msgs = tx.receive(queue, top=7, timeout=0.05)
                start = time.monotonic()
                if not msgs:
                    continue
                time.sleep(0.001)  # hold the group a moment, so overlaps would show
                end = time.monotonic()
                for m in msgs:
                    got.append(
                        (
                            m.conversation_group_id.bytes,
                            m.message_body,
                            m.message_sequence_number,
                            start,
                            end,
                        )
                    )
            with received.get_lock():
                received.value += len(msgs)
    out.put(got)


def sender(
    path: str, initiator: str, target: str, conversations: int, per_conversation: int, tag: str
) -> None:
    """Send ``per_conversation`` messages on each of ``conversations`` dialogs, a few per transaction."""
    with Broker.open(path, poll_interval=0.005) as broker:
        with broker.transaction() as tx:
            handles = [
                tx.begin_dialog(initiator, target, contract="C") for _ in range(conversations)
            ]
        for i in range(per_conversation):
            with broker.transaction() as tx:
                for n, h in enumerate(handles):
                    tx.send(h, "Req", f"{tag}-{n}:{i}".encode())


def wait_in_receive(path: str, queue: str, ready: Any) -> None:
    """Wait in RECEIVE (without WHERE) until killed."""
    with Broker.open(path, poll_interval=0.01) as broker, broker.transaction() as tx:
        ready.set()
        tx.receive(queue, timeout=None)


def start_and_wait(path: str, ready: Any) -> None:
    """Start a broker (it becomes the leader), then wait to be killed."""
    broker = Broker.open(path, poll_interval=0.01)
    broker.start()
    assert broker.is_leader
    ready.set()
    time.sleep(120)


def send_one_later(path: str, initiator: str, target: str, delay: float) -> None:
    """Send one message after ``delay`` real seconds."""
    with Broker.open(path) as broker:
        time.sleep(delay)
        with broker.transaction() as tx:
            tx.send(tx.begin_dialog(initiator, target, contract="C"), "Req", b"late")


def hold_then_roll_back(path: str, queue: str, ready: Any, delay: float) -> None:
    """Receive a group, hold it ``delay`` real seconds, then roll back (its message returns)."""
    with Broker.open(path, poll_interval=0.01) as broker:
        tx = broker.transaction()
        tx.receive(queue)
        ready.set()
        time.sleep(delay)
        tx.rollback()
