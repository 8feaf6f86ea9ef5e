"""TICK-3a (servicebroker.transport.destinations): connect to each destination with pending
messages unless suppressed — 15 s after a disconnection, 60 s after a failed attempt — and keep
the failure's text for transmission_status (NET-7)."""

from __future__ import annotations

from servicebroker.transport.destinations import Destinations
from servicebroker.transport.settings import TransportSettings

ADDR = "TCP://peer:4022"


def test_tick3a_suppressed_15_seconds_after_a_disconnection() -> None:
    """TICK-3a: a destination with messages is connected to at once, one attempt at a time,
    and not again for 15 s after a disconnection."""
    d = Destinations()
    d.add(ADDR)
    assert d.due(0.0) == [ADDR] and d.should_connect(ADDR, 0.0)
    d.on_connecting(ADDR, 0.0)
    assert not d.should_connect(ADDR, 0.0)  # one attempt at a time
    d.on_connected(ADDR, 0.5)
    assert d.due(1.0) == []
    d.on_disconnected(ADDR, 10.0)
    assert not d.should_connect(ADDR, 24.9)
    assert d.next_due(20.0) == 25.0
    assert d.should_connect(ADDR, 25.0) and d.due(25.0) == [ADDR]
    assert d.status(ADDR) is None


def test_tick3a_suppressed_60_seconds_after_each_failed_attempt_with_its_status() -> None:
    """TICK-3a: 60 s without an attempt after each failed one; NET-7: the failure shows as
    the waiting messages' transmission_status until a connection is made."""
    d = Destinations()
    d.on_connecting(ADDR, 0.0)
    d.on_failed(
        ADDR, 1.0, "Connection attempt failed with error: '10061(No connection could be made)'."
    )
    assert "10061" in (d.status(ADDR) or "")
    assert not d.should_connect(ADDR, 60.9) and d.should_connect(ADDR, 61.0)
    d.on_failed(ADDR, 61.0, "again")
    assert d.status(ADDR) == "again" and d.next_due(61.0) == 121.0
    d.on_connected(ADDR, 121.0)
    assert d.status(ADDR) is None


def test_settings_and_forget() -> None:
    d = Destinations(TransportSettings(suppress_after_disconnect=1.0, suppress_after_failure=2.0))
    d.on_disconnected(ADDR, 0.0)
    assert d.should_connect(ADDR, 1.0)
    d.on_failed(ADDR, 1.0, "x")
    assert d.suppressed_until(ADDR) == 3.0
    d.forget(ADDR)
    assert d.due(10.0) == [] and d.status(ADDR) is None
