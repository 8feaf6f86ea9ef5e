"""A finished transaction is freed as soon as the application drops it: nothing it holds (its
statements' messages, working copies, received rows) waits for Python's cycle collector."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from servicebroker import Broker

from .conftest import Pair


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_finished_transaction_is_freed_without_the_cycle_collector(
    broker: Broker, pair: Pair, no_cycle_collector: None
) -> None:
    tx = broker.transaction()
    handle = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
    tx.send(handle, "Req", b"x" * 1000)
    tx.commit()
    sent = weakref.ref(tx)
    del tx
    assert sent() is None
    tx = broker.transaction()
    assert tx.receive(pair.tq)
    tx.rollback()
    received = weakref.ref(tx)
    del tx
    assert received() is None
