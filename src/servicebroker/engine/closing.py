"""Closing: a conversation's side ended — END CONVERSATION re-decided on the endpoint's state
at commit (DLG-4), the broker ending it with an Error (a passed LIFETIME, DLG-5; DROP
CONTRACT; ERROR_BROKER_CONVERSATIONS), its service dropped (DROP SERVICE) — and a conversation
deleted once every endpoint it still has is closed (CD), a closed side of a dialog with another
instance remembered for :data:`CLOSED_REMEMBERED` seconds.
"""

from __future__ import annotations

import uuid

from ..dialogs import (
    END_DIALOG,
    ERROR,
    Arrival,
    EndAction,
    EndMode,
    State,
    after_local_end,
    error_body,
    on_arrival,
    on_lifetime_expired,
)
from ..storage.rows import EndpointRow
from .outbound import Outbound

__all__ = ["CLOSED_REMEMBERED", "Closing"]

CLOSED_REMEMBERED = 1800.0
"""Seconds (broker clock) a closed endpoint of a dialog with another instance is remembered, so
that a late copy of its messages is a duplicate and not a new dialog: SQL Server keeps such an
endpoint for half an hour to prevent replay attacks (NET-2, SEC-2)."""


class Closing(Outbound):
    """Ending and deleting conversations in one commit (see
    :class:`~servicebroker.engine.commit_rows.CommitRows` for the arguments)."""

    def end(self, handle: bytes, mode: EndMode, code: int | None, description: str | None) -> None:
        """END CONVERSATION (DLG-4), re-decided on the endpoint's state at commit."""
        self._routes.clear()
        row = self.endpoint(handle)
        if row is None:
            return
        new_state, action = after_local_end(row.state, mode, uuid.UUID(bytes=handle))
        self._purge(row)
        if mode is not EndMode.PLAIN:
            self.transmission.drop_endpoint(row)
        row.state = new_state
        row.dialog_timer = None
        self.touch(row)
        if action is EndAction.SEND_END_DIALOG:
            self._send_ending(row, END_DIALOG, b"", Arrival.END_DIALOG)
        elif action is EndAction.SEND_ERROR:
            body = error_body(code or 0, description or "")
            self._send_ending(row, ERROR, body, Arrival.ERROR)
        elif action is EndAction.ACKNOWLEDGE:
            far = self.far_of(row)
            if far is None and self.remote_of(row) is not None:
                # the far side is another instance: its endpoint closes when our END arrives
                self._send_ending(row, END_DIALOG, b"", Arrival.END_DIALOG)
            elif far is not None:
                new_far = on_arrival(far.state, Arrival.ACKNOWLEDGE)
                if new_far is not None:
                    far.state = new_far
                    self.touch(far)
        if mode is EndMode.CLEANUP:
            self._delete_endpoint(row)
        self.close_if_done(row)

    def _send_ending(self, row: EndpointRow, name: str, body: bytes, arrival: Arrival) -> None:
        """Send the EndDialog or Error that ends ``row``'s side (DLG-4), numbered as its
        ``end_dialog_sequence``."""
        out = self._system(row, name, body)
        row.end_dialog_sequence = out.sequence
        self.deliver(row, out, arrival)

    def fail(self, row: EndpointRow, code: int, text: str) -> None:
        """The broker ends ``row`` with error ``code``/``text`` (a passed LIFETIME, DLG-5; DROP
        CONTRACT): its unsent messages are dropped (NET-7), its conversation timer cleared, and
        it goes to ER with the Error message first on its own queue (SYS-2); an endpoint this
        side had ended closes, and a conversation whose endpoints are all closed is deleted."""
        self.transmission.drop_endpoint(row)
        self.change_state(row, on_lifetime_expired(row.state))
        row.dialog_timer = None
        if row.state == State.ER:
            self.put_local(row, ERROR, error_body(code, text))
        self.close_if_done(row)

    def remove(self, row: EndpointRow, code: int, text: str) -> None:
        """The endpoint's service is dropped (DROP SERVICE): the endpoint, its queued and
        retained messages and its unsent ones are deleted, and its far endpoint gets an Error
        ``code``/``text`` first on its queue (SYS-2) — moving to ER, or closing if it had
        ended (DLG-4); the far endpoint of a service being dropped too goes without one. A far
        endpoint at another broker instance gets the Error through the transport: unsequenced
        (NET-2), as the broker's own refusals travel, held until that instance acknowledges
        it."""
        self._routes.clear()
        self.transmission.drop_endpoint(row)
        far = self.far_of(row)
        remote = self.remote_of(row) if far is None else None
        self._delete_endpoint(row)
        if remote is not None:
            error = self._system(row, ERROR, error_body(code, text), sequence=-1)
            self.transmission.hold_remote(row, error, Arrival.ERROR, remote)
            return
        if far is None or self._rows.get(far.conversation_handle) is None:
            return
        new_state = on_arrival(far.state, Arrival.ERROR)
        if new_state is None:
            return
        self.change_state(far, new_state)
        if new_state == State.ER:
            self.put_local(far, ERROR, error_body(code, text))
        self.close_if_done(far)

    def change_state(self, row: EndpointRow, state: State) -> None:
        """Set ``row``'s state to one :mod:`.dialogs` decided outside a statement (a passed
        LIFETIME); written at :meth:`finish`."""
        self._routes.clear()
        row.state = state
        self.touch(row)

    def close_if_done(self, row: EndpointRow) -> None:
        """Delete a conversation once every endpoint it still has is closed (CD)."""
        mine = self._rows.get(row.conversation_handle)
        if mine is not None and mine.state != State.CD:
            return
        far = self.far_of(row)
        if far is not None and far.state != State.CD:
            return
        for end in (mine, far):
            if end is not None:
                self._delete_endpoint(end)

    def _delete_endpoint(self, row: EndpointRow) -> None:
        self._purge(row)
        self._deleted.append(row.endpoint_id)
        if row.far_broker_instance is not None:  # NET-2, SEC-2: late copies stay duplicates
            self._closed_remote.append((row, self.now + CLOSED_REMEMBERED))
        self._rows[row.conversation_handle] = None
        self._sides[(row.conversation_id, row.is_initiator)] = None
        self._dirty.pop(row.conversation_handle, None)
