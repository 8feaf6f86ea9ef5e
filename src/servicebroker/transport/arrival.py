"""What a message from another broker instance does to this database (NET-2, NET-3, RTE-4),
inside one write transaction of the receiving broker: the dialog protocol's storage side.

:func:`take_arrival` decides a complete message's fate against the receiving endpoint as it
stands in the commit, and puts it on its queue through the commit's
:class:`~servicebroker.engine.delivery.Applier` — creating the target endpoint on a dialog's first
message (PRI-3), checking the contract, the message type, SENT BY and the validation *at the
target*, with this database's own priorities (PRI-7). Its :class:`Outcome` tells the transport
what to answer once the commit is durable: an acknowledgement (delivered, or a duplicate, NET-2),
nothing yet (an out-of-order message waits for the ones before it), a refusal that keeps the
message in the sender's transmission queue with a status (NET-7: no such service here, queue
disabled), or an Error the broker makes for the sender (unsequenced, NET-2).

:func:`take_acknowledgements` is the sending side: an acknowledged message leaves the
transmission queue (NET-3) and the dialog is pinned to the instance that acknowledged it
(RTE-4); an endpoint waiting in DO closes when the far side's own END arrives, as within one
database, not on an acknowledgement.
:func:`take_broker_error` applies an Error the far broker made, unsequenced (a refusal of the
dialog, or DROP SERVICE there); :func:`take_arrival` hands it such a message and acknowledges it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from ..catalog import PUBLIC
from ..dialogs import (
    END_DIALOG,
    ERROR,
    TARGET_START,
    Arrival,
    State,
    is_ended,
    on_arrival,
    parse_error_body,
)
from ..engine.delivery import Applier
from ..engine.system_messages import CONTRACT_REFUSED_CODE
from ..errors import ConversationError, DialogSecurityError, MessageValidationError
from ..messages import Outgoing, new_id, validate_body
from ..storage.rows import EndpointRow
from .dialog_protection import (
    DialogKey,
    KeyRing,
    dialog_key_of,
    keep_dialog_key,
    open_incoming,
)
from .wire import MessageHeader

__all__ = [
    "MESSAGE_TYPE_REFUSED_CODE",
    "SEND_PERMISSION_REFUSED_CODE",
    "SENT_BY_REFUSED_CODE",
    "VALIDATION_REFUSED_CODE",
    "ArrivalSecurity",
    "Outcome",
    "Verdict",
    "take_acknowledgements",
    "take_arrival",
    "take_broker_error",
]

MESSAGE_TYPE_REFUSED_CODE = -8428
"""The target has no message type of that name in the dialog's contract (SQL Server's 8428)."""
SENT_BY_REFUSED_CODE = -8457
"""The message type is not one this side may send under the contract (SQL Server's 8457)."""
VALIDATION_REFUSED_CODE = -9615
"""The body fails the target's validation of its message type (SQL Server's 9615)."""
SEND_PERMISSION_REFUSED_CODE = -229
"""The initiator's principal at the target lacks SEND on the target service (SEC-4; SQL
Server's 229, permission denied)."""


class Verdict(enum.Enum):
    """What the transport answers for a message once the commit that took it is durable."""

    DELIVERED = "delivered"
    """On its queue, taken (an unsequenced Error), or discarded — by the endpoint's state
    (DLG-4), or because its new dialog's lifetime has ended (DLG-5): acknowledge it."""
    DUPLICATE = "duplicate"
    """A copy of a message already taken: acknowledge it again, drop it (NET-2)."""
    LATER = "later"
    """A message after one not yet taken: keep it back, do not acknowledge (NET-5)."""
    REFUSED = "refused"
    """Not taken now; the sender keeps it with :attr:`Outcome.status` (NET-7) and retries."""
    ERROR = "error"
    """Refused for good: send the sender the broker's Error :attr:`Outcome.error` (NET-2)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The fate of one arriving message: its :class:`Verdict`, the refusal's ``status`` text,
    or the ``error`` (code, description) for the sender."""

    verdict: Verdict
    status: str = ""
    error: tuple[int, str] | None = None
    key: DialogKey | None = None
    """The dialog's security state, so that the broker's Error for a secured dialog is sealed
    with its session key (SEC-2); None for a dialog not secured."""
    rejected: bool = False
    """Refused by dialog security (SEC-2): altered, cut, moved or forged, or without the
    certificates it needs — never delivered, and counted."""


@dataclass(frozen=True, slots=True)
class ArrivalSecurity:
    """What :func:`take_arrival` opens secured messages with: the certificates' ``keys`` and
    the wall clock's ``wall_now`` (seconds since the epoch; certificates' validity, SEC-2)."""

    keys: KeyRing
    wall_now: float


_DELIVERED = Outcome(Verdict.DELIVERED)
_DUPLICATE = Outcome(Verdict.DUPLICATE)
_LATER = Outcome(Verdict.LATER)


def take_arrival(
    applier: Applier,
    header: MessageHeader,
    body: bytes,
    security: ArrivalSecurity,
    *,
    far_principal: int | None = None,
    refuse_new: str | None = None,
) -> Outcome:
    """Take a complete sequenced message from another instance into this database (NET-2:
    the next expected sequence is queued, an earlier one is a duplicate, a later one waits;
    PRI-3: a dialog's first message creates the target endpoint, at this database's level,
    PRI-7; the target's checks of contract, message type, SENT BY and validation). A message
    whose endpoint's queue is OFF is refused (QUE-3); a new dialog's message whose lifetime has
    passed is discarded (DLG-5); an unsequenced Error ends this side (:func:`take_broker_error`).
    A sealed body is opened first (SEC-2: a message that fails dialog security is refused
    with the status saying why, never delivered), and a new dialog's far principal — the user
    owning the initiator's certificate, else public — needs SEND on the target service, or the
    dialog is answered with an Error and nothing is enqueued (SEC-4).

    Args:
        applier: the receiving commit's delivery work (its write transaction).
        header: the message's header (conversation, the sender's side, sequence, names).
        body: the whole message body (bytes; its fragments joined, NET-5), sealed when
            ``header.encrypted``.
        security: the certificates' keys and the wall clock (:class:`ArrivalSecurity`).
        far_principal: for a message from another database of this instance (not secured:
            one process, one trust domain), the principal its dialog acts as here (dbo when
            the sending database is TRUSTWORTHY); None: public, as for an anonymous dialog.
        refuse_new: for such a message, the status to refuse a new dialog with (its
            database is not trusted here); None: take it.

    Returns:
        The :class:`Outcome`; the caller commits, then answers the sender as it says.

    Raises:
        StorageError: the database failed (the caller's transaction is rolled back and
            nothing is acknowledged: the sender sends again, NET-4).
    """
    if header.sequence < 0:
        return _take_unsequenced(applier, header, body, security)
    catalog = applier.catalog
    row = applier.side(header.conversation_id, not header.is_initiator)
    key: DialogKey | None = None
    if row is None:
        if not header.is_initiator:
            return _DUPLICATE  # the initiator's endpoint is gone (closed): nothing to take
        if applier.conn.was_closed(header.conversation_id, False):
            # NET-2, SEC-2: a late copy (a lost ack's resend, a forwarder's, a replay) of a
            # dialog whose target endpoint closed here: a duplicate, never a new dialog
            return _DUPLICATE
        if header.lifetime is not None and header.lifetime <= applier.now:
            # DLG-5, NET-7: the dialog's lifetime ended before its first message got here
            # (the sender's copy still retried): the initiator has its Error; discarded
            return _DELIVERED
        target = catalog.services.get(header.to_service)
        if target is None:
            return Outcome(
                Verdict.REFUSED,
                f"The target service name {header.to_service!r} could not be found at broker "
                f"instance {catalog.service_broker_guid}.",
            )
        queue = catalog.queues_by_id[target.queue_id]
        if not queue.status:
            return Outcome(Verdict.REFUSED, f"The target queue {queue.name!r} is disabled.")
        if header.sequence != 0:
            # the dialog's first message is not here yet (still in fragments, or lost and
            # being sent again): this one waits for it. A target endpoint that is gone for
            # good ended with an Error, which the initiator gets and stops sending on.
            return _LATER
        if refuse_new is not None:
            return Outcome(Verdict.REFUSED, refuse_new)
        try:  # SEC-2 first: even the broker's refusals of a secured dialog go sealed
            opened = open_incoming(
                header,
                body,
                None,
                catalog,
                security.keys,
                applier.now,
                security.wall_now,
                new_dialog=True,
            )
        except DialogSecurityError as exc:
            return Outcome(Verdict.REFUSED, str(exc), rejected=True)
        body, key = opened.body, opened.new_key
        contract = catalog.contracts.get(header.contract)
        if contract is None or contract.service_contract_id not in target.contract_ids:
            return Outcome(
                Verdict.ERROR,
                error=(
                    CONTRACT_REFUSED_CODE,
                    f"Target service {target.name!r} does not support contract "
                    f"{header.contract!r}.",
                ),
                key=key,
            )
        if key is not None:
            far_principal = key.far_principal_id
        elif far_principal is None:
            far_principal = PUBLIC
        if not catalog.has_permission(far_principal, "SEND", f"SERVICE::{target.name}"):
            who = catalog.principals_by_id.get(far_principal)
            return Outcome(
                Verdict.ERROR,
                error=(
                    SEND_PERMISSION_REFUSED_CODE,
                    f"The SEND permission was denied on service {target.name!r} for the "
                    f"initiator's principal {who.name if who else far_principal!r}.",
                ),
                key=key,
            )
        new_row = EndpointRow(
            0,
            new_id(),
            header.conversation_id,
            False,
            contract.service_contract_id,
            new_id(),
            target.service_id,
            target.queue_id,
            header.from_service,
            header.lifetime if header.lifetime is not None else float("inf"),
            TARGET_START,
            None,
            0,
            0,
            catalog.level(contract.service_contract_id, target.name, header.from_service),
            far_broker_instance=str(header.from_broker_instance),
            encryption_requested=0,
        )
        if key is not None:
            keep_dialog_key(new_row, key)
        row = applier.insert_endpoint(new_row)
    else:
        key = dialog_key_of(row)
        if header.sequence <= row.receive_sequence:
            # the next message, or a copy of one taken: a copy is acknowledged only if it is
            # the dialog's own (a first message forged by a forwarder must not make the real
            # one count as its copy and vanish, SEC-2)
            try:
                body = open_incoming(
                    header, body, key, catalog, security.keys, applier.now, security.wall_now
                ).body
            except DialogSecurityError as exc:
                return Outcome(Verdict.REFUSED, str(exc), key=key, rejected=True)
    if header.sequence < row.receive_sequence:
        return _DUPLICATE
    if header.sequence > row.receive_sequence:
        return _LATER
    home = catalog.queues_by_id.get(row.queue_id)
    if home is not None and not home.status and not is_ended(row.state):
        # QUE-3, NET-7: the endpoint's queue is OFF (ALTER QUEUE, or poison handling POI-1)
        return Outcome(Verdict.REFUSED, f"The target queue {home.name!r} is disabled.")
    refusal = _check_message(applier, row, header, body)
    if refusal is not None:
        return Outcome(refusal.verdict, refusal.status, refusal.error, key)
    mt = catalog.message_types[header.message_type]
    arrival = {END_DIALOG: Arrival.END_DIALOG, ERROR: Arrival.ERROR}.get(mt.name, Arrival.MESSAGE)
    row.receive_sequence = header.sequence + 1
    if row.far_broker_instance is None:
        row.far_broker_instance = str(header.from_broker_instance)
    applier.touch(row)
    new_state = on_arrival(row.state, arrival)
    if new_state is None:
        return _DELIVERED  # discarded by the endpoint's state (DLG-4), yet taken
    row.state = new_state
    if arrival is not Arrival.MESSAGE:
        row.end_dialog_sequence = header.sequence
    out = Outgoing(
        mt.message_type_id, mt.name, mt.validation_code, body, header.message_id, header.sequence
    )
    applier.enqueue(row, out)
    applier.close_if_done(row)
    return _DELIVERED


def _take_unsequenced(
    applier: Applier, header: MessageHeader, body: bytes, security: ArrivalSecurity
) -> Outcome:
    """An unsequenced message (NET-2) — the Error the far broker made: it refused this side's
    dialog, or its service was dropped (DROP SERVICE) — ends this side's dialog
    (:func:`take_broker_error`). Acknowledged, so a sender that keeps it in its transmission
    queue until then deletes it; a second copy changes nothing. A sealed one is opened with
    the dialog's key first (SEC-2); one that fails is refused, never taken."""
    row = applier.side(header.conversation_id, not header.is_initiator)
    key = None if row is None else dialog_key_of(row)
    if header.encrypted or key is not None:  # a plain Error cannot end a secured dialog
        if key is None:
            return _DELIVERED  # the endpoint is gone (or was never secured): nothing to end
        try:
            body = open_incoming(
                header, body, key, applier.catalog, security.keys, applier.now, security.wall_now
            ).body
        except DialogSecurityError as exc:
            return Outcome(Verdict.REFUSED, str(exc), key=key, rejected=True)
    if header.message_type == ERROR:
        code, text = _error_of(body)
        take_broker_error(applier, header.conversation_id, not header.is_initiator, code, text)
    return _DELIVERED


def _error_of(body: bytes) -> tuple[int, str]:
    try:
        return parse_error_body(body)
    except ConversationError:
        return -8400, body.decode("utf-8", "replace")


def _check_message(
    applier: Applier, row: EndpointRow, header: MessageHeader, body: bytes
) -> Outcome | None:
    """The target's checks of a message it takes: the message type exists here and is in the
    dialog's contract, sent by the right side (SENT BY), and the body passes the target's
    validation; None when it may be taken."""
    catalog = applier.catalog
    mt = catalog.message_types.get(header.message_type)
    contract = catalog.contracts_by_id.get(row.service_contract_id)
    if mt is None or contract is None:
        return Outcome(
            Verdict.ERROR,
            error=(
                MESSAGE_TYPE_REFUSED_CODE,
                f"The message type {header.message_type!r} is not found at the target.",
            ),
        )
    if mt.name in (END_DIALOG, ERROR):
        return None
    if not contract.allows(mt.message_type_id, initiator=header.is_initiator):
        side = "initiator" if header.is_initiator else "target"
        return Outcome(
            Verdict.ERROR,
            error=(
                SENT_BY_REFUSED_CODE,
                f"The message of type {mt.name!r} was sent by the {side} of the conversation, "
                f"which contract {contract.name!r} does not allow.",
            ),
        )
    if mt.validation != "NONE":
        try:
            validate_body(mt.validation, body, message_type_name=mt.name, schema=mt.xml_collection)
        except MessageValidationError as exc:
            return Outcome(
                Verdict.ERROR,
                error=(
                    VALIDATION_REFUSED_CODE,
                    f"A message of type {mt.name!r} failed validation on the target service: {exc}",
                ),
            )
    return None


def take_acknowledgements(
    applier: Applier, acknowledged: Iterable[tuple[bytes, bool, int, uuid.UUID]]
) -> None:
    """Far instances have committed these messages of this database, each given as
    (conversation_id, is_initiator of the sending side, sequence, the instance that
    acknowledged it): they leave the transmission queue (NET-3) and each endpoint is pinned
    to the first instance that acknowledged one (RTE-4). (An endpoint waiting in DO closes
    when the far side's own END arrives, as within one database, not on an acknowledgement.)"""
    acknowledged = list(acknowledged)
    applier.conn.delete_transmission_messages((c, i, n) for c, i, n, _ in acknowledged)
    for conversation_id, is_initiator, _, by in acknowledged:
        row = applier.side(conversation_id, is_initiator)
        if row is not None and row.far_broker_instance is None:
            row.far_broker_instance = str(by)
            applier.touch(row)


def take_broker_error(
    applier: Applier, conversation_id: bytes, is_initiator: bool, code: int, description: str
) -> None:
    """The far broker ended this side's dialog for good (an Error it made, unsequenced: it
    refused the contract, the message type, SENT BY or the validation, or its service was
    dropped): the endpoint's unsent messages are dropped and it goes to ER with the Error
    first on its queue (SYS-2), as a local refusal does; an endpoint this side had ended
    closes. Nothing for an endpoint gone, or already in ER (a copy of the Error)."""
    row = applier.side(conversation_id, is_initiator)
    if row is None or row.state in (State.ER, State.CD):
        return
    applier.fail(row, code, description)
