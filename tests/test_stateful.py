"""A Hypothesis state machine over dialogs, on each storage backend: random BEGIN DIALOG, SEND,
RECEIVE, END CONVERSATION, COMMIT and ROLLBACK in two transactions bound to two threads. Invariant: every
committed message is received exactly once, in send order per conversation, and only by the
transaction holding its group's lock (RCV-2, RCV-3, DLG-2, DLG-4, DLG-9)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from servicebroker import (
    END_DIALOG,
    Broker,
    ConversationError,
    LockTimeoutError,
    ManualClock,
    Transaction,
)

from .conftest import drop_url, make_pair, new_url

SLOTS = (0, 1)


class DialogMachine(RuleBasedStateMachine):
    BACKEND = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp()
        self.url = new_url(self.BACKEND, Path(self.dir))
        self.broker = Broker.open(
            self.url, clock=ManualClock(), lock_timeout=0, poll_interval=0.001
        )
        self.pair = make_pair(self.broker)
        self.threads = [ThreadPoolExecutor(max_workers=1) for _ in SLOTS]
        self.tx: list[Transaction | None] = [None, None]
        self.convs: list[uuid.UUID] = []
        self.committed: dict[uuid.UUID, list[bytes]] = defaultdict(list)  # sent and committed
        self.ended: set[uuid.UUID] = set()  # initiator side ended (committed)
        self.delivered: dict[uuid.UUID, list[bytes]] = defaultdict(list)  # received and committed
        self.target_of: dict[uuid.UUID, uuid.UUID] = {}  # target handle -> initiator handle
        self.pending_send: list[dict[uuid.UUID, list[bytes]]] = [
            defaultdict(list),
            defaultdict(list),
        ]
        self.pending_end: list[set[uuid.UUID]] = [set(), set()]
        self.pending_recv: list[dict[uuid.UUID, list[bytes]]] = [
            defaultdict(list),
            defaultdict(list),
        ]
        self.held: list[set[uuid.UUID]] = [set(), set()]  # conversations whose group a slot holds
        self.counter = 0
        self.pending_recv_none: dict[uuid.UUID, list[bytes]] = defaultdict(list)
        self.target_groups: list[set[uuid.UUID]] = [set(), set()]  # target groups each slot holds

    def run(self, slot: int, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return self.threads[slot].submit(fn, *args, **kwargs).result(timeout=60)

    def teardown(self) -> None:
        for slot in SLOTS:
            if self.tx[slot] is not None:
                self.run(slot, self.tx[slot].rollback)  # type: ignore[union-attr]
        # drain: everything committed arrives exactly once, in order
        while True:
            with self.broker.transaction() as tx:
                msgs = tx.receive(self.pair.tq)
                if not msgs:
                    break
                self.check_received(msgs, slot=None)
                for conv, bodies in self.pending_recv_none.items():
                    self.delivered[conv].extend(bodies)
                self.pending_recv_none = defaultdict(list)
        for conv in self.convs:
            assert self.delivered[conv] == self.committed[conv], conv
        for ex in self.threads:
            ex.shutdown()
        self.broker.close()
        drop_url(self.url)
        shutil.rmtree(self.dir, ignore_errors=True)

    def tx_of(self, slot: int) -> Transaction:
        if self.tx[slot] is None:
            self.tx[slot] = self.run(slot, self.broker.transaction)
        tx = self.tx[slot]
        assert tx is not None
        return tx

    @rule()
    def begin(self) -> None:
        with self.broker.transaction() as tx:
            h = tx.begin_dialog(self.pair.initiator, self.pair.target, contract="C")
        self.convs.append(h)

    @precondition(lambda self: self.convs)
    @rule(slot=st.sampled_from(SLOTS), data=st.data())
    def send(self, slot: int, data: st.DataObject) -> None:
        conv = data.draw(st.sampled_from(self.convs))
        tx = self.tx_of(slot)
        self.counter += 1
        body = f"{conv.hex[-12:]}:{self.counter}".encode()
        other = 1 - slot
        ended = conv in self.ended or conv in self.pending_end[slot]
        try:
            self.run(slot, tx.send, conv, "Req", body)
        except LockTimeoutError:
            assert conv in self.held[other]
            return
        except ConversationError:
            assert ended
            self.held[slot].add(conv)
            return
        assert conv not in self.held[other] and not ended
        self.held[slot].add(conv)
        self.pending_send[slot][conv].append(body)

    @precondition(lambda self: self.convs)
    @rule(slot=st.sampled_from(SLOTS), data=st.data())
    def end(self, slot: int, data: st.DataObject) -> None:
        conv = data.draw(st.sampled_from(self.convs))
        tx = self.tx_of(slot)
        try:
            self.run(slot, tx.end_conversation, conv)
        except LockTimeoutError:
            assert conv in self.held[1 - slot]
            return
        except ConversationError:
            # already ended: refused, but the statement locked the group first (DLG-9)
            assert conv in self.ended or conv in self.pending_end[slot]
            self.held[slot].add(conv)
            return
        self.held[slot].add(conv)
        self.pending_end[slot].add(conv)

    @rule(slot=st.sampled_from(SLOTS), top=st.sampled_from([None, 1, 3]))
    def receive(self, slot: int, top: int | None) -> None:
        tx = self.tx_of(slot)
        msgs = self.run(slot, tx.receive, self.pair.tq, top=top)
        self.check_received(msgs, slot)

    def check_received(self, msgs: list[Any], slot: int | None) -> None:
        if not msgs:
            return
        assert len({m.conversation_group_id for m in msgs}) == 1, "one group per RECEIVE"
        pending = self.pending_recv_none if slot is None else self.pending_recv[slot]
        for m in msgs:
            if slot is not None:
                # only the holder of the group's lock receives it: never a group the other has
                assert m.conversation_group_id not in self.target_groups[1 - slot]
                self.target_groups[slot].add(m.conversation_group_id)
            if m.message_type_name == END_DIALOG:
                continue
            key = self.conv_of(m.message_body)
            expected_index = len(self.delivered[key]) + len(pending[key])
            assert expected_index < len(self.committed[key]), "received an uncommitted message"
            assert self.committed[key][expected_index] == m.message_body, (
                "out of order or duplicate"
            )
            pending[key].append(m.message_body)

    def conv_of(self, body: bytes) -> uuid.UUID:
        prefix = body.split(b":")[0].decode()
        (conv,) = [c for c in self.convs if c.hex.endswith(prefix)]
        return conv

    def finish(self, slot: int, commit: bool) -> None:
        tx = self.tx[slot]
        if tx is None:
            return
        self.run(slot, tx.commit if commit else tx.rollback)
        if commit:
            for conv, bodies in self.pending_send[slot].items():
                self.committed[conv].extend(bodies)
            for conv, bodies in self.pending_recv[slot].items():
                self.delivered[conv].extend(bodies)
            self.ended |= self.pending_end[slot]
        self.pending_send[slot] = defaultdict(list)
        self.pending_recv[slot] = defaultdict(list)
        self.pending_end[slot] = set()
        self.held[slot] = set()
        self.target_groups[slot] = set()
        self.tx[slot] = None

    @rule(slot=st.sampled_from(SLOTS))
    def commit(self, slot: int) -> None:
        self.finish(slot, True)

    @rule(slot=st.sampled_from(SLOTS))
    def rollback(self, slot: int) -> None:
        self.finish(slot, False)

    @invariant()
    def delivered_is_a_prefix_of_committed(self) -> None:
        for conv, got in self.delivered.items():
            assert got == self.committed[conv][: len(got)]


DialogMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestDialogs = DialogMachine.TestCase


class PostgresDialogMachine(DialogMachine):
    """The same machine on the PostgreSQL backend (a fresh schema per example)."""

    BACKEND = "postgres"


PostgresDialogMachine.TestCase.settings = DialogMachine.TestCase.settings
TestDialogsPostgres = PostgresDialogMachine.TestCase
