"""The demo's activated procedures: a carrier receives each flight's lifecycle and replies, an
airport receives the replies per aircraft group. Both receive several groups per transaction
and write their rows in the same transaction as their RECEIVE."""

from __future__ import annotations

import functools
import json
import threading
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from ..broker import ActivationContext
from ..dialogs import DIALOG_TIMER, END_DIALOG, ERROR
from ..messages import Message
from ..storage.queries import portable_sql

__all__ = [
    "ARRIVED",
    "CANCELLED",
    "DEPARTED",
    "FLIGHT_CONTRACTS",
    "FLIGHT_PROCESSED",
    "READER_WAIT",
    "SCHEDULED",
    "DemoState",
    "airport_procedure",
    "carrier_procedure",
]

SCHEDULED = "//flights/Scheduled"
DEPARTED = "//flights/Departed"
ARRIVED = "//flights/Arrived"
CANCELLED = "//flights/Cancelled"
FLIGHT_PROCESSED = "//flights/FlightProcessed"
FLIGHT_CONTRACTS = {
    "//flights/FlightStatus/Disrupted": 9,  # cancelled, or departed 60 minutes late or more
    "//flights/FlightStatus/Delayed": 6,  # departed 15 to 60 minutes late
    "//flights/FlightStatus/Routine": 3,  # the rest
}
"""The flight contracts and the level of a broker priority on each (PRI-2): a carrier receives
disrupted flights ahead of delayed ones, and those ahead of routine ones (PRI-12)."""
ARRIVAL_GRACE = 2 * 3600.0
"""A departed flight whose Arrived has not come by scheduled arrival + 2 h is flagged."""

GROUPS_PER_TRANSACTION = 100
READER_WAIT = 5.0
"""Seconds (broker clock) an activated procedure waits in RECEIVE before it exits (ACT-9)."""


@dataclass
class DemoState:
    """Counters shared by the procedures of one demo run, and the per-plane lock check."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    received: int = 0
    carrier_transactions: int = 0
    airport_transactions: int = 0
    timers_fired: int = 0
    receive_sequence: int = 0
    holding: dict[uuid.UUID, int] = field(default_factory=dict)
    plane_overlaps: int = 0
    tsql: bool = False
    """The queues activate the T-SQL procedures of :mod:`.tsql_engine` (``--engine tsql``),
    which count in their own tables, instead of the Python ones here."""

    def count(self, n: int, *, carrier: bool) -> None:
        """Count ``n`` received messages and one receiving transaction."""
        with self.lock:
            self.received += n
            if carrier:
                self.carrier_transactions += 1
            else:
                self.airport_transactions += 1

    def next_receive_sequence(self, n: int) -> int:
        """Reserve ``n`` positions in the carriers' receive order; returns the first."""
        with self.lock:
            first = self.receive_sequence
            self.receive_sequence += n
            return first

    def hold(self, groups: list[uuid.UUID]) -> None:
        """Claim planes' groups for this thread; a group another thread claims is an overlap."""
        me = threading.get_ident()
        with self.lock:
            for g in groups:
                if self.holding.get(g, me) != me:
                    self.plane_overlaps += 1
                self.holding[g] = me

    def release(self, groups: list[uuid.UUID]) -> None:
        """Give the planes' groups up (just before the commit releases their locks)."""
        with self.lock:
            for g in groups:
                self.holding.pop(g, None)


def _by_conversation(messages: list[Message]) -> dict[uuid.UUID, list[Message]]:
    out: dict[uuid.UUID, list[Message]] = defaultdict(list)
    for m in messages:
        out[m.conversation_handle].append(m)
    return out


def carrier_procedure(ctx: ActivationContext, state: DemoState) -> None:
    """Receive flight lifecycles; write one result row per flight in the RECEIVE's transaction
    (with the flight's level and its position in the carriers' receive order);
    set a conversation timer at scheduled arrival + 2 h for a departed flight; reply
    FlightProcessed and end the conversation once the flight is settled."""
    broker = ctx.broker
    queue = ctx.queue_name
    sql = functools.partial(portable_sql, paramstyle=broker.paramstyle)
    while True:
        with broker.transaction() as tx:
            batch = tx.receive(queue, timeout=READER_WAIT)
            if not batch:
                return
            for _ in range(GROUPS_PER_TRANSACTION - 1):
                more = tx.receive(queue)
                if not more:
                    break
                batch.extend(more)
            results: list[tuple[object, ...]] = []
            pending: list[tuple[object, ...]] = []
            settled_pending: list[tuple[bytes]] = []
            now = broker.clock.now()
            conversations = _by_conversation(batch)
            position = state.next_receive_sequence(len(conversations))
            for handle, messages in conversations.items():
                position += 1
                info: dict[str, object] = {}
                outcome: str | None = None
                ended = False
                for m in messages:
                    kind = m.message_type_name
                    if kind in (SCHEDULED, DEPARTED, ARRIVED, CANCELLED):
                        info.update(json.loads(m.message_body))
                    if kind == DEPARTED:
                        due = float(info["timer_due"])  # type: ignore[arg-type]
                        tx.begin_conversation_timer(handle, max(0.0, due - now))
                    elif kind == ARRIVED:
                        outcome = "arrived"
                    elif kind == CANCELLED:
                        outcome = "cancelled"
                    elif kind == DIALOG_TIMER:
                        rows = tx.execute(
                            sql(
                                "SELECT flight_id, carrier, origin, dep_delay FROM carrier_pending "
                                "WHERE conversation_handle = ?"
                            ),
                            (handle.bytes,),
                        )
                        if rows:
                            fid, carrier, origin, dep_delay = rows[0]
                            info.update(
                                flight_id=fid, carrier=carrier, origin=origin, dep_delay=dep_delay
                            )
                            settled_pending.append((handle.bytes,))
                            outcome = "arrival_missing"
                            with state.lock:
                                state.timers_fired += 1
                    elif kind in (END_DIALOG, ERROR):
                        tx.end_conversation(handle)
                        ended = True
                if outcome is not None and not ended:
                    results.append(
                        (
                            info["flight_id"],
                            info["carrier"],
                            info["origin"],
                            outcome,
                            info.get("dep_delay"),
                            info.get("arr_delay") if outcome == "arrived" else None,
                            now,
                            messages[0].priority,
                            position,
                        )
                    )
                    tx.send(
                        handle,
                        FLIGHT_PROCESSED,
                        json.dumps({"flight_id": info["flight_id"], "status": outcome}),
                    )
                    tx.end_conversation(handle)
                elif "timer_due" in info and not ended:
                    pending.append(
                        (
                            handle.bytes,
                            info["flight_id"],
                            info["carrier"],
                            info["origin"],
                            info.get("dep_delay"),
                        )
                    )
            if pending:
                tx.executemany(sql("INSERT INTO carrier_pending VALUES (?, ?, ?, ?, ?)"), pending)
            if settled_pending:
                tx.executemany(
                    sql("DELETE FROM carrier_pending WHERE conversation_handle = ?"),
                    settled_pending,
                )
            if results:
                tx.executemany(
                    sql("INSERT INTO flight_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"), results
                )
        state.count(len(batch), carrier=True)


def airport_procedure(ctx: ActivationContext, state: DemoState) -> None:
    """Receive FlightProcessed replies per aircraft group (one plane's replies under one lock),
    record them, and end the airport's side when the carrier's EndDialog arrives."""
    broker = ctx.broker
    queue = ctx.queue_name
    sql = functools.partial(portable_sql, paramstyle=broker.paramstyle)
    while True:
        groups: list[uuid.UUID] = []
        try:
            with broker.transaction() as tx:
                batch = tx.receive(queue, timeout=READER_WAIT)
                if not batch:
                    return
                groups.append(batch[0].conversation_group_id)
                state.hold(groups[-1:])
                for _ in range(GROUPS_PER_TRANSACTION - 1):
                    more = tx.receive(queue)
                    if not more:
                        break
                    groups.append(more[0].conversation_group_id)
                    state.hold(groups[-1:])
                    batch.extend(more)
                replies: list[tuple[object, ...]] = []
                for m in batch:
                    if m.message_type_name == FLIGHT_PROCESSED:
                        body = json.loads(m.message_body)
                        replies.append(
                            (body["flight_id"], body["status"], str(m.conversation_group_id))
                        )
                    elif m.message_type_name in (END_DIALOG, ERROR):
                        tx.end_conversation(m.conversation_handle)
                if replies:
                    tx.executemany(sql("INSERT INTO airport_replies VALUES (?, ?, ?)"), replies)
                # stop claiming the planes just before COMMIT releases their locks: a second
                # reader can only get them after that, so any overlap seen is a real one
                state.release(groups)
        finally:
            state.release(groups)
        state.count(len(batch), carrier=False)
