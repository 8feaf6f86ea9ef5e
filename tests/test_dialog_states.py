"""The pure endpoint state machine (DLG-4, DLG-5, DLG-8, SYS-2)."""

from __future__ import annotations

import pytest

from servicebroker import ConversationError
from servicebroker.dialogs import (
    DIALOG_TIMER,
    END_DIALOG,
    ERROR,
    STATE_DESC,
    Arrival,
    EndAction,
    EndMode,
    after_local_end,
    after_send,
    error_body,
    on_arrival,
    on_lifetime_expired,
    parse_error_body,
    receive_rank,
)


def test_states_are_the_documented_seven() -> None:
    # rule DLG-8
    assert set(STATE_DESC) == {"SO", "SI", "CO", "DI", "DO", "ER", "CD"}
    assert STATE_DESC["DI"] == "DISCONNECTED_INBOUND"


@pytest.mark.parametrize("state", ["SO", "SI", "CO"])
def test_send_moves_to_conversing(state: str) -> None:
    # rule DLG-8
    assert after_send(state, "h") == "CO"


@pytest.mark.parametrize("state", ["DI", "DO", "CD", "ER"])
def test_send_after_end_or_error_is_refused(state: str) -> None:
    # rule DLG-4, rule SYS-2
    with pytest.raises(ConversationError, match=f"state {state}"):
        after_send(state, "h")


def test_plain_end_waits_for_far_side() -> None:
    # rule DLG-4
    assert after_local_end("CO", EndMode.PLAIN, "h") == ("DO", EndAction.SEND_END_DIALOG)
    assert after_local_end("DI", EndMode.PLAIN, "h") == ("CD", EndAction.ACKNOWLEDGE)
    assert after_local_end("SO", EndMode.PLAIN, "h") == ("CD", EndAction.NOTHING)
    assert after_local_end("ER", EndMode.PLAIN, "h") == ("CD", EndAction.NOTHING)


def test_error_and_cleanup_forms() -> None:
    # rule DLG-4
    assert after_local_end("CO", EndMode.ERROR, "h") == ("CD", EndAction.SEND_ERROR)
    assert after_local_end("DO", EndMode.CLEANUP, "h") == ("CD", EndAction.NOTHING)
    with pytest.raises(ConversationError, match="already ended"):
        after_local_end("DO", EndMode.PLAIN, "h")


def test_arrivals() -> None:
    # rule DLG-4: after END, arriving messages are discarded
    assert on_arrival("CO", Arrival.END_DIALOG) == "DI"
    assert on_arrival("CO", Arrival.ERROR) == "ER"
    assert on_arrival("DO", Arrival.MESSAGE) is None
    assert on_arrival("DO", Arrival.END_DIALOG) == "CD"
    assert on_arrival("DO", Arrival.ACKNOWLEDGE) == "CD"
    assert on_arrival("CD", Arrival.MESSAGE) is None


def test_lifetime_expiry() -> None:
    # rule DLG-5
    assert on_lifetime_expired("CO") == "ER"
    assert on_lifetime_expired("DO") == "CD"


def test_system_message_receive_rank() -> None:
    # rule SYS-2
    assert receive_rank(DIALOG_TIMER) < receive_rank(ERROR) < receive_rank(END_DIALOG)
    assert receive_rank(END_DIALOG) == receive_rank("AnyUserType")


def test_error_body_round_trip() -> None:
    # rule SYS-1
    body = error_body(50001, "bad <thing> & more")
    assert b'xmlns="http://schemas.microsoft.com/SQL/ServiceBroker/Error"' in body
    assert parse_error_body(body) == (50001, "bad <thing> & more")
    with pytest.raises(ConversationError):
        parse_error_body(b"<Other/>")
