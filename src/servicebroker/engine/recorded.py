"""What a transaction's statements record for its commit: one named tuple per kind of operation,
kept in statement order in the transaction's operation log and applied, in that order, by
:func:`servicebroker.engine.commit.write_commit` to the rows as they stand at commit ("Statements
check now, commit writes later", docs/architecture.md).

Each operation holds what its statement decided once its checks passed — never a row the commit
must trust: the commit re-reads the endpoint (an Error or EndDialog may have arrived meanwhile)
and re-decides. Named tuples, not dataclasses: one is made per SEND, on the hot path, and a
tuple costs the least to build.
"""

from __future__ import annotations

from typing import NamedTuple

from ..dialogs import EndMode
from ..messages import Outgoing
from ..storage.rows import EndpointRow

__all__ = [
    "BeginDialogOp",
    "EndConversationOp",
    "MoveOp",
    "NotificationDialogOp",
    "RecordedOp",
    "SendOp",
    "TimerOp",
]


class SendOp(NamedTuple):
    """SEND ON CONVERSATION (DLG-2): ``message`` leaves the endpoint ``handle`` (16 bytes),
    numbered by the statement (its ``sequence``)."""

    handle: bytes
    message: Outgoing


class BeginDialogOp(NamedTuple):
    """BEGIN DIALOG (DLG-1): the new initiator endpoint ``row`` as the statement made it (a
    copy: later statements change the working copy, the commit inserts this one and replays
    them). ``handle`` is its conversation handle (16 bytes)."""

    handle: bytes
    row: EndpointRow


class EndConversationOp(NamedTuple):
    """END CONVERSATION (DLG-4) on ``handle`` (16 bytes): ``mode`` plain, WITH ERROR (``error``,
    1..2**31-1, and ``description``) or WITH CLEANUP."""

    handle: bytes
    mode: EndMode
    error: int | None
    description: str | None


class TimerOp(NamedTuple):
    """BEGIN CONVERSATION TIMER (DLG-6) on ``handle`` (16 bytes): ``due`` on the broker's
    clock, seconds (None: no timer)."""

    handle: bytes
    due: float | None


class MoveOp(NamedTuple):
    """MOVE CONVERSATION (DLG-7): ``handle`` (16 bytes) and its queued messages go to the group
    ``group_id`` (16 bytes)."""

    handle: bytes
    group_id: bytes


class NotificationDialogOp(NamedTuple):
    """The dialog ``handle`` (16 bytes) an event notification (``event_notification_id``) now
    travels on (EVT-1): stored in the catalog with the commit."""

    handle: bytes
    event_notification_id: int


RecordedOp = SendOp | BeginDialogOp | EndConversationOp | TimerOp | MoveOp | NotificationDialogOp
"""Any operation a transaction records."""
