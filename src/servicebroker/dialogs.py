"""The dialog (conversation endpoint) state machine, as pure functions of a state and an event.

States are those of ``sys.conversation_endpoints.state`` (DLG-8), the :class:`State` enum: SO
started outbound, SI started inbound, CO conversing, DI disconnected inbound, DO disconnected
outbound, ER error, CD closed. Every change of an endpoint's state is decided here; nothing here
does I/O. The transaction and the delivery code call these functions and store the result, so
every transition is unit-tested without storage.
"""

from __future__ import annotations

import enum
import xml.etree.ElementTree as ET

from .errors import ConversationError

__all__ = [
    "DIALOG_TIMER",
    "END_DIALOG",
    "ERROR",
    "INITIATOR_START",
    "LIFETIME_EXPIRED_CODE",
    "STATE_DESC",
    "TARGET_START",
    "Arrival",
    "EndAction",
    "EndMode",
    "State",
    "after_local_end",
    "after_refusal",
    "after_send",
    "after_sent",
    "error_body",
    "is_ended",
    "on_arrival",
    "on_lifetime_expired",
    "parse_error_body",
    "receive_rank",
]

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
"""SYS-1: the message a plain END CONVERSATION puts on the far side's queue."""
ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
"""SYS-1: the message END CONVERSATION WITH ERROR (or an expired LIFETIME) puts on a queue."""
DIALOG_TIMER = "http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer"
"""SYS-1: the message a conversation timer puts on the local queue when it fires (DLG-6)."""

ERROR_NAMESPACE = ERROR
LIFETIME_EXPIRED_CODE = -8489
"""The code SQL Server puts in the Error message when a dialog's LIFETIME expires (DLG-5)."""
LIFETIME_EXPIRED_TEXT = "The dialog has exceeded the specified LIFETIME."


class State(enum.StrEnum):
    """An endpoint's state (DLG-8): the two-letter code ``conversation_endpoints.state`` shows
    (and the storage keeps); :attr:`desc` is its ``state_desc``. A member equals its code."""

    SO = "SO"
    SI = "SI"
    CO = "CO"
    DI = "DI"
    DO = "DO"
    ER = "ER"
    CD = "CD"

    @property
    def desc(self) -> str:
        """The ``state_desc`` of the view, e.g. ``CONVERSING``."""
        return STATE_DESC[self.value]


STATE_DESC = {
    "SO": "STARTED_OUTBOUND",
    "SI": "STARTED_INBOUND",
    "CO": "CONVERSING",
    "DI": "DISCONNECTED_INBOUND",
    "DO": "DISCONNECTED_OUTBOUND",
    "ER": "ERROR",
    "CD": "CLOSED",
}
"""DLG-8: the ``state`` codes of ``conversation_endpoints`` and their ``state_desc``."""

INITIATOR_START = State.SO
"""DLG-1: BEGIN DIALOG creates the initiator endpoint started outbound."""
TARGET_START = State.CO
"""PRI-3: the first message to arrive creates the target endpoint, conversing."""


class EndMode(enum.Enum):
    """The three forms of END CONVERSATION (DLG-4)."""

    PLAIN = "plain"
    ERROR = "error"
    CLEANUP = "cleanup"


class EndAction(enum.Enum):
    """What an END CONVERSATION must tell the far endpoint."""

    NOTHING = "nothing"
    SEND_END_DIALOG = "send_end_dialog"
    SEND_ERROR = "send_error"
    ACKNOWLEDGE = "acknowledge"


class Arrival(enum.Enum):
    """What reaches an endpoint from its far side."""

    MESSAGE = "message"
    END_DIALOG = "end_dialog"
    ERROR = "error"
    ACKNOWLEDGE = "acknowledge"


_ENDED = frozenset({State.DO, State.CD})


def after_send(state: str, handle: object) -> State:
    """State after a SEND on an endpoint in ``state`` (DLG-2, DLG-4, SYS-2).

    Raises:
        ConversationError: the endpoint has ended (DO, CD), the far side has ended (DI), or an
            Error arrived or the lifetime expired (ER); the message names ``handle``.
    """
    if state in (State.SO, State.SI, State.CO):
        return State.CO
    reason = {
        "DI": "the far side has ended the conversation",
        "DO": "this side has ended the conversation",
        "CD": "the conversation is closed",
        "ER": "the conversation is in error (an Error message arrived or its LIFETIME expired)",
    }.get(state, f"its state is {state!r}")
    raise ConversationError(f"cannot SEND on conversation {handle}: {reason} (state {state})")


def after_local_end(state: str, mode: EndMode, handle: object) -> tuple[State, EndAction]:
    """New state and the action towards the far side for END CONVERSATION (DLG-4).

    A plain END from SO (nothing ever sent) or ER closes at once; from DI it acknowledges the far
    side's end and closes; from CO or SI it waits in DO for the far side. WITH ERROR closes and
    sends an Error unless the far side has already gone; WITH CLEANUP closes silently.

    Raises:
        ConversationError: the endpoint has already ended (DO or CD).
    """
    if mode is EndMode.CLEANUP:
        return State.CD, EndAction.NOTHING
    if state in _ENDED:
        raise ConversationError(
            f"cannot END CONVERSATION {handle}: this side has already ended it (state {state})"
        )
    if state == State.DI:
        return State.CD, EndAction.ACKNOWLEDGE
    if state in (State.ER, State.SO):
        return State.CD, EndAction.NOTHING
    if mode is EndMode.ERROR:
        return State.CD, EndAction.SEND_ERROR
    return State.DO, EndAction.SEND_END_DIALOG


def on_arrival(state: str, arrival: Arrival) -> State | None:
    """State after something arrives from the far side, or ``None`` when it must be discarded
    (DLG-4: after END, arriving messages are discarded).

    An EndDialog moves a conversing endpoint to DI and an ended one (DO) to CD; an Error moves a
    conversing endpoint to ER (SYS-2); an acknowledgement closes an endpoint waiting in DO.
    """
    if state == State.CD:
        return None
    if state == State.DO:
        return State.CD if arrival is not Arrival.MESSAGE else None
    if state in (State.DI, State.ER):
        return None
    if arrival is Arrival.MESSAGE:
        return State.CO
    if arrival is Arrival.END_DIALOG:
        return State.DI
    if arrival is Arrival.ERROR:
        return State.ER
    return State(state)


def on_lifetime_expired(state: str) -> State:
    """State when the dialog's LIFETIME passes (DLG-5): ER, with an Error message for the local
    side, unless this side has already ended (then it closes)."""
    if state in _ENDED:
        return State.CD
    return State.ER


def after_sent(state: str) -> str:
    """State of the sender when a SEND it made is applied at commit: a started endpoint (SO,
    SI) is conversing; any other state stays as it is then (an Error or EndDialog may have
    arrived since the statement, and the message is delivered or discarded by the far side's
    state, DLG-4). Unlike :func:`after_send` it never refuses: the statement already checked."""
    if state in (State.SO, State.SI):
        return State.CO
    return state


def after_refusal(state: str) -> State:
    """State of an initiator whose first message the target refused (the target service does
    not accept the contract, or the target endpoint is gone): ER, with an Error message put on
    its own queue (SYS-2)."""
    return State.ER


def is_ended(state: str) -> bool:
    """True when this side has ended the conversation (DO) or it is closed (CD): no timer, no
    END CONVERSATION, nothing arrives (DLG-4, DLG-6)."""
    return state in _ENDED


def receive_rank(message_type_name: str) -> int:
    """Order of system messages inside one conversation (SYS-2): DialogTimer (0) before anything,
    Error (1) before anything but a DialogTimer, every other message (2) in arrival order."""
    if message_type_name == DIALOG_TIMER:
        return 0
    if message_type_name == ERROR:
        return 1
    return 2


def error_body(code: int, description: str) -> bytes:
    """The body of a Service Broker Error message (SYS-1), UTF-8 encoded XML::

    <Error xmlns="http://schemas.microsoft.com/SQL/ServiceBroker/Error">
      <Code>50000</Code><Description>…</Description></Error>
    """
    root = ET.Element("Error", xmlns=ERROR_NAMESPACE)
    ET.SubElement(root, "Code").text = str(code)
    ET.SubElement(root, "Description").text = description
    text: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=False)
    return b'<?xml version="1.0" encoding="utf-8"?>' + text


def parse_error_body(body: bytes) -> tuple[int, str]:
    """``(code, description)`` from an Error message body (SYS-1).

    Raises:
        ConversationError: the body is not a Service Broker Error document (or not bytes).
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise ConversationError(
            f"not a Service Broker Error message body: expected bytes, got {type(body).__name__}"
        )
    try:
        root = ET.fromstring(body)
        ns = {"sb": ERROR_NAMESPACE}
        code = root.findtext("sb:Code", namespaces=ns)
        text = root.findtext("sb:Description", namespaces=ns) or ""
        if root.tag != f"{{{ERROR_NAMESPACE}}}Error" or code is None:
            raise ValueError("not an Error document")
        return int(code), text
    except (ET.ParseError, ValueError) as exc:
        raise ConversationError(f"not a Service Broker Error message body: {exc}") from exc
