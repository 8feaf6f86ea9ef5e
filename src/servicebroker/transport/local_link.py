"""The link between the databases of one instance (NET-2, NET-3, NET-7, RTE-4): the transport's
rows one database holds for another database of the same instance, carried through that
database's receiving path and acknowledged back — in one process, one trust domain: no socket,
no TLS, no fragments.

A message for another database of the instance is a transport row of the sender's
transmission queue (:mod:`servicebroker.engine.neighbours`), as one for another instance is.
:func:`carry` takes those rows to their databases: each destination takes them in one write
transaction through :func:`~.arrival.take_arrival` — the receiving side's checks and its
de-duplication by message sequence number, the same as for a message from the network — and
only after that commit are they acknowledged in the sender's database
(:func:`~.arrival.take_acknowledgements`: the rows go, the dialog is pinned to the database
that took them, RTE-4). A failure between the two commits (the process dies, the database
fails) leaves the rows in the sender's transmission queue; carried again, they are duplicates
at the destination, acknowledged and dropped there: every message exactly once, in order per
conversation side. A refusal (the target queue disabled, the service not there, the sending
database not trusted) keeps the row with the reason as its ``transmission_status`` (NET-7) until
a later :func:`carry` gets it taken; an Error the destination makes (contract, message type,
SENT BY, validation, SEND permission) ends the sender's side at once, as the transport's
unsequenced Error does (:func:`~.arrival.take_broker_error`).

:func:`arrange` and :func:`answers` are pure; :func:`carry` is their shell on two brokers'
storage.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..catalog import CatalogSnapshot
from ..engine.context import BrokerContext
from ..engine.delivery import Applier
from ..storage.rows import TransportRow
from .arrival import (
    ArrivalSecurity,
    Outcome,
    Verdict,
    take_acknowledgements,
    take_arrival,
    take_broker_error,
)
from .dialog_protection import KeyRing
from .pending import MessageKey, header_of, key_of

__all__ = ["Admission", "Answers", "Carried", "LocalEnd", "answers", "arrange", "carry"]

BATCH = 1000
"""Rows read from the sender's transmission queue per pass."""

_KEYS = KeyRing()  # nothing between databases of an instance is sealed: never used to open one


@dataclass(frozen=True)
class LocalEnd:
    """One database of the instance as an end of the link.

    Attributes:
        context: its broker's shared parts (storage, clock, catalog, statistics).
        committed: wakes its waiters and queue monitors after a commit that put messages on
            its queues, with (queues that got messages, queues where one arrived on an empty
            queue) — the broker's own, as after the transport's commits.
    """

    context: BrokerContext
    committed: Callable[[set[int], frozenset[int]], None]

    def instance(self) -> uuid.UUID | None:
        """Its ``service_broker_guid`` as the catalog has it now (new after NEW_BROKER)."""
        return self.context.catalog.current().service_broker_guid


@dataclass(frozen=True)
class Admission:
    """How a destination takes the messages of one sending database.

    Attributes:
        far_principal: the principal a new dialog from that database acts as at the
            destination (dbo when the sending database is TRUSTWORTHY), None for public.
        refuse_new: the status a new dialog is refused with (its database is not trusted
            there), None to take it.
    """

    far_principal: int | None = None
    refuse_new: str | None = None


def arrange(rows: Iterable[TransportRow]) -> list[TransportRow]:
    """``rows`` with each conversation side's messages in sequence order, each side where its
    first row came (rows in ``transmission_id`` order): a side's messages are taken one after
    the other in one commit (NET-2), an unsequenced one (an Error the sender made) first."""
    sides: dict[tuple[bytes, int], list[TransportRow]] = {}
    for row in sorted(rows, key=lambda r: r.transmission_id):
        sides.setdefault((row.conversation_id, row.is_initiator), []).append(row)
    out: list[TransportRow] = []
    for side in sides.values():
        out.extend(sorted(side, key=lambda r: r.message_sequence_number))
    return out


@dataclass
class Answers:
    """What the sending database does once the destination committed (see :func:`answers`).

    Attributes:
        acknowledged: (conversation_id, is_initiator, sequence, by) of the rows taken or
            found to be duplicates: they leave the transmission queue (NET-3, RTE-4).
        errors: (conversation_id, is_initiator, code, description) of the sides the
            destination refused for good: each ends with the Error (NET-2).
        statuses: (key, status) of the rows refused for now (NET-7), only where it changed.
    """

    acknowledged: list[tuple[bytes, bool, int, uuid.UUID]] = field(default_factory=list)
    errors: list[tuple[bytes, bool, int, str]] = field(default_factory=list)
    statuses: list[tuple[MessageKey, str]] = field(default_factory=list)


def answers(taken: Iterable[tuple[TransportRow, Outcome]], by: uuid.UUID) -> Answers:
    """The sending side's answer to each outcome of the rows database ``by`` took (pure):
    DELIVERED and DUPLICATE are acknowledged, LATER waits (its predecessor is not taken yet),
    REFUSED keeps the row with the status, ERROR ends the side."""
    out = Answers()
    ended: set[tuple[bytes, bool]] = set()
    for row, outcome in taken:
        key = key_of(row)
        verdict = outcome.verdict
        if verdict in (Verdict.DELIVERED, Verdict.DUPLICATE):
            out.acknowledged.append((key[0], key[1], key[2], by))
        elif verdict is Verdict.REFUSED:
            if row.transmission_status != outcome.status:
                out.statuses.append((key, outcome.status))
        elif verdict is Verdict.ERROR and (key[0], key[1]) not in ended:
            assert outcome.error is not None
            ended.add((key[0], key[1]))
            out.errors.append((key[0], key[1], *outcome.error))
    return out


@dataclass(frozen=True)
class Carried:
    """What one :func:`carry` did: messages taken, duplicates acknowledged again, refused for
    now, refused for good, left waiting for an earlier one."""

    delivered: int = 0
    duplicates: int = 0
    refused: int = 0
    errors: int = 0
    later: int = 0


def _nothing(step: str) -> None:
    """The default ``step`` of :func:`carry`: nothing."""


def carry(
    source: LocalEnd,
    destinations: Mapping[uuid.UUID, LocalEnd],
    admit: Callable[[uuid.UUID], Admission],
    *,
    step: Callable[[str], None] = _nothing,
    limit: int = BATCH,
) -> Carried:
    """Carry the transport rows ``source`` holds for the databases in ``destinations`` (by
    broker instance) to them, and acknowledge what they took (see the module).

    Args:
        source: the sending database.
        destinations: each other database of the instance, by broker instance.
        admit: how the destination of that broker instance takes ``source``'s messages
            (asked only for a destination with rows to carry).
        step: called with ``"read"`` (rows read), ``"taken"`` (a destination committed) and
            ``"answered"`` (the sender committed the answers) — the seam a test injects a
            failure at; what raises there leaves the rest for the next :func:`carry`.
        limit: rows read per call (the rest on the next one).

    Returns:
        The counts (:class:`Carried`).

    Raises:
        StorageError: a database failed; what was committed stays, the rest waits.
    """
    src = source.context
    with src.storage.connection() as conn:
        catalog = src.catalog.snapshot(conn)
        instance = catalog.service_broker_guid
        if instance is None:
            return Carried()
        wanted = {str(g) for g in destinations}
        rows = [
            r
            for r in conn.transmission_remote(limit, inline_bytes=1 << 62, after=0)
            if r.to_broker_instance in wanted
        ]
        bodies = {
            r.transmission_id: (
                r.message_body
                if r.message_body is not None
                else conn.transmission_remote_body(r.transmission_id)
            )
            for r in rows
        }
    step("read")
    counts = Carried()
    for guid, end in destinations.items():
        mine = arrange(r for r in rows if r.to_broker_instance == str(guid))
        if not mine:
            continue
        taken = _take(end, mine, bodies, catalog, instance, admit(guid))
        step("taken")
        _answer(source, answers(taken, guid))
        step("answered")
        verdicts = [o.verdict for _, o in taken]
        counts = Carried(
            counts.delivered + verdicts.count(Verdict.DELIVERED),
            counts.duplicates + verdicts.count(Verdict.DUPLICATE),
            counts.refused + verdicts.count(Verdict.REFUSED),
            counts.errors + verdicts.count(Verdict.ERROR),
            counts.later + verdicts.count(Verdict.LATER),
        )
    return counts


def _take(
    end: LocalEnd,
    rows: list[TransportRow],
    bodies: Mapping[int, bytes | None],
    source_catalog: CatalogSnapshot,
    source_instance: uuid.UUID,
    admission: Admission,
) -> list[tuple[TransportRow, Outcome]]:
    """Take ``rows`` into ``end``'s database in one write transaction (NET-2: the next
    expected sequence is queued, a copy is a duplicate, a later one waits); returns each
    row's outcome once committed."""
    ctx = end.context
    now = ctx.clock.now()
    security = ArrivalSecurity(_KEYS, time.time())
    taken: list[tuple[TransportRow, Outcome]] = []
    with ctx.storage.connection() as db:
        db.begin_write()
        applier = Applier(db, ctx.catalog.snapshot(db, fresh=True), now)
        for row in rows:
            body = bodies.get(row.transmission_id)
            if body is None:
                continue  # the row went meanwhile (END … WITH CLEANUP)
            header = header_of(row, source_catalog, source_instance)
            outcome = take_arrival(
                applier,
                header,
                body,
                security,
                far_principal=admission.far_principal,
                refuse_new=admission.refuse_new,
            )
            taken.append((row, outcome))
        applier.finish()
        db.commit(applier.woken_queues)
    ctx.statistics.delivered(applier.tally()[0])
    end.committed(applier.woken_queues, frozenset(applier.arrived_on_empty))
    return taken


def _answer(source: LocalEnd, answer: Answers) -> None:
    """Commit ``answer`` in the sending database: acknowledged rows go (NET-3) and their dialogs
    are pinned (RTE-4), the sides refused for good end with the Error, the statuses of the
    rows refused for now are written (NET-7)."""
    if not (answer.acknowledged or answer.errors or answer.statuses):
        return
    ctx = source.context
    with ctx.storage.connection() as db:
        db.begin_write()
        applier = Applier(db, ctx.catalog.snapshot(db), ctx.clock.now())
        if answer.acknowledged:
            take_acknowledgements(applier, answer.acknowledged)
        for conversation_id, is_initiator, code, text in answer.errors:
            take_broker_error(applier, conversation_id, is_initiator, code, text)
        if answer.statuses:
            db.set_transmission_message_statuses(answer.statuses)
        applier.finish()
        db.commit(applier.woken_queues)
    ctx.statistics.delivered(applier.tally()[0])
    source.committed(applier.woken_queues, frozenset(applier.arrived_on_empty))
