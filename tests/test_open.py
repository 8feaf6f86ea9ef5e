"""Every entry point of Broker.open answers bad input with an error of our hierarchy that names
the thing at fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from servicebroker import Broker, BrokerError, StorageError, TransportSettings


@pytest.mark.parametrize("url", [None, 42, b"sqlite:///x.db", ["x.db"]])
def test_a_url_that_is_not_a_string(url: object) -> None:
    with pytest.raises(BrokerError, match="storage URL") as caught:
        Broker.open(url)  # type: ignore[arg-type]
    assert repr(url) in str(caught.value)


def test_an_empty_url() -> None:
    with pytest.raises(StorageError, match="required"):
        Broker.open("  ")


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("lock_timeout", -1),
        ("lock_timeout", "soon"),
        ("empty_receive_window", None),
        ("external_activation_timeout", True),
        ("priority_aging_interval", 0),
        ("transport", {"retry_initial": 1}),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, setting: str, value: object) -> None:
    with pytest.raises(BrokerError, match=setting):
        Broker.open(str(tmp_path / "b.db"), **{setting: value})


def test_a_clock_that_is_not_a_clock(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="clock"):
        Broker.open(str(tmp_path / "b.db"), clock=object())  # type: ignore[arg-type]


def test_transport_settings_reach_the_transport(tmp_path: Path) -> None:
    """``Broker.open(url, transport=TransportSettings(...))``: the transport's state machines
    read the given retry and suppression intervals."""
    settings = TransportSettings(retry_initial=0.5, retry_max=2.0, suppress_after_failure=1.0)
    with Broker.open(str(tmp_path / "b.db"), transport=settings) as broker:
        assert broker.transport.settings is settings
    with Broker.open(str(tmp_path / "c.db")) as broker:
        assert broker.transport.settings == TransportSettings()
