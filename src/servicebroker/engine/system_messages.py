"""The messages the broker makes itself — EndDialog, Error (its body built by
:func:`~servicebroker.dialogs.error_body`), DialogTimer — and the codes and texts of the Errors
it ends conversations with.

:class:`SystemMessages` numbers them on the endpoint that sends them (or -1: first in its
conversation on the local queue, SYS-2) and puts those that stay here on their queue;
:mod:`.closing` sends the EndDialog or Error that ends a side, :mod:`.local_delivery` the Error
that refuses a dialog, the timer (:mod:`.timer`) the DialogTimer and the lifetime's Error.
"""

from __future__ import annotations

from ..dialogs import DIALOG_TIMER, END_DIALOG, ERROR, after_refusal, error_body
from ..messages import Outgoing, new_id
from ..storage.rows import EndpointRow
from .commit_rows import CommitRows

__all__ = [
    "BROKER_CONVERSATIONS_ERRORED",
    "CONTRACT_DROPPED",
    "CONTRACT_REFUSED_CODE",
    "SERVICE_DROPPED",
    "SYSTEM_TYPES",
    "TARGET_GONE_CODE",
    "SystemMessages",
]

TARGET_GONE_CODE = -8493
"""The Error a message gets when its target endpoint no longer exists."""
CONTRACT_REFUSED_CODE = -8408
"""The Error a dialog gets when its target service does not support its contract."""
SERVICE_DROPPED = (-8470, "Remote service has been dropped.")
"""DROP SERVICE: the Error the far side of each of the service's conversations gets (SQL
Server's message 8470, negated as the broker's own errors are)."""
CONTRACT_DROPPED = (-8487, "The remote service contract has been dropped.")
"""DROP CONTRACT: the Error each endpoint of the contract's conversations gets (message 8487)."""
BROKER_CONVERSATIONS_ERRORED = (
    -8499,
    "The conversation was ended by ALTER DATABASE SET ERROR_BROKER_CONVERSATIONS "
    "(the database was attached, restored or copied).",
)
"""ALTER DATABASE … SET ERROR_BROKER_CONVERSATIONS: the Error each open endpoint gets. No
Microsoft page gives the code or text of this Error: both are this broker's choice
(docs/ddl.md)."""

SYSTEM_TYPES = frozenset({END_DIALOG, ERROR, DIALOG_TIMER})
"""The message types only the broker sends."""


class SystemMessages(CommitRows):
    """The messages the broker makes, in one commit (see :class:`CommitRows` for the
    arguments)."""

    def put_local(self, row: EndpointRow, message_type_name: str, body: bytes) -> None:
        """Put a message the broker makes — a DialogTimer (DLG-6), a lifetime's Error (DLG-5)
        — on ``row``'s own queue, first in its conversation (sequence -1, SYS-2)."""
        self._enqueue(row, self._system(row, message_type_name, body, sequence=-1))

    def _error_back(self, sender: EndpointRow, code: int, text: str) -> None:
        sender.state = after_refusal(sender.state)
        self.touch(sender)
        self._enqueue(sender, self._system(sender, ERROR, error_body(code, text), sequence=-1))

    def _system(
        self, row: EndpointRow, name: str, body: bytes, sequence: int | None = None
    ) -> Outgoing:
        mt = self.catalog.message_types[name]
        if sequence is None:
            sequence = row.send_sequence
            row.send_sequence += 1
        return Outgoing(mt.message_type_id, name, mt.validation_code, body, new_id(), sequence)
