"""The transmitter's reading of the transport's rows of the transmission queue (NET-1, NET-5,
PRI-14, RTE-2): which rows to read next, and which of them to offer to which address now.

Reading is incremental: the transmitter remembers the ids it has read (:class:`PendingRows`) and
reads only the rows above the highest of them, unless it must read everything again — after a
route or catalog change (TICK-3b), when a window had no room, or when a row appeared below the
highest id read (PostgreSQL may commit ids out of order: :meth:`PendingRows.next_read` compares
the count of rows at or below that id with the ids it knows). Each level's oldest rows (up to the transmitter's batch)
are read then (PRI-14: every row the first ones to leave can come from). Bodies up to
``inline_bytes`` come with the rows; a larger one is read alone when its message is offered, so
a queue of large messages is never in memory at once (NET-5): at most one destination window's
worth (``TransportSettings.window_bytes``) plus one message.

:func:`plan_offers` is pure: rows, the destinations' pending bytes, the catalog and ``now`` in;
the rows to offer with their addresses, the statuses of rows no route takes, and the addresses
whose window left rows out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..catalog import CatalogSnapshot
from ..catalog.priorities import transmission_order
from ..catalog.routing import RouteChooser
from ..engine.neighbours import neighbourhoods
from ..storage.rows import TransportMark, TransportRow
from .wire import MessageHeader

__all__ = [
    "MessageKey",
    "OfferPlan",
    "PendingRows",
    "header_of",
    "key_of",
    "plan_offers",
    "stale_offers",
]

MessageKey = tuple[bytes, bool, int]
"""A message's key: (conversation_id, is_initiator of the sending side, sequence)."""


def key_of(row: TransportRow) -> MessageKey:
    """The key of a transport's row: (conversation_id, is_initiator, sequence), as the
    receiver acknowledges it (NET-2, NET-3)."""
    return (row.conversation_id, bool(row.is_initiator), row.message_sequence_number)


@dataclass(frozen=True, slots=True)
class Read:
    """What to read: ``after`` None for each level's oldest rows, else the rows above it."""

    after: int | None


class PendingRows:
    """The ids of the transport's rows the transmitter has read and not seen go: the state
    behind incremental reading (see the module). Not thread-safe: the caller holds its lock.
    """

    def __init__(self) -> None:
        self._known: set[int] = set()
        self._ids: dict[MessageKey, int] = {}
        self._last = 0
        self._full = True

    @property
    def last(self) -> int:
        """The highest ``transmission_id`` read (0: none): the next read starts above it."""
        return self._last

    def read_all(self) -> None:
        """Read every level's oldest rows next time (TICK-3b, a window with room again)."""
        self._full = True

    def next_read(self, mark: TransportMark) -> Read | None:
        """What to read given where the rows stand (``mark`` of ``transmission_remote_mark
        (self.last)``): everything, the rows above :attr:`last`, or nothing (None)."""
        if mark.mark is None:
            self._known.clear()
            self._ids.clear()
            self._full = False
            return None
        if self._full or mark.at_or_below > len(self._known):
            return Read(None)  # a row appeared below the last id read: read everything
        if mark.mark > self._last:
            return Read(self._last)
        return None

    def learn(self, rows: Iterable[TransportRow], read: Read) -> None:
        """Remember the ids of ``rows``, just read as ``read`` said (a full read replaces the
        ids known before)."""
        if read.after is None:
            self._known.clear()
            self._ids.clear()
            self._full = False
        for row in rows:
            self._known.add(row.transmission_id)
            self._ids[key_of(row)] = row.transmission_id
            self._last = max(self._last, row.transmission_id)

    def id_of(self, key: MessageKey) -> int | None:
        """The ``transmission_id`` of message ``key``'s row, if read (TICK-3b asks whether
        it is still there)."""
        return self._ids.get(key)

    def gone(self, key: MessageKey) -> None:
        """The row of message ``key`` left the transmission queue (acknowledged, NET-3)."""
        tid = self._ids.pop(key, None)
        if tid is not None:
            self._known.discard(tid)


@dataclass
class OfferPlan:
    """What :func:`plan_offers` decided.

    Attributes:
        offers: (row, address) to offer, in transmission order.
        unrouted: (key, status) of rows no route takes now (RTE-2 step 6).
        full_windows: addresses whose window (``window_bytes``) left rows out.
    """

    offers: list[tuple[TransportRow, str]] = field(default_factory=list)
    unrouted: list[tuple[MessageKey, str]] = field(default_factory=list)
    full_windows: set[str] = field(default_factory=set)


def plan_offers(
    rows: list[TransportRow],
    *,
    skip: Callable[[MessageKey], bool],
    pending_bytes: Mapping[str, int],
    window_bytes: int,
    catalog: CatalogSnapshot,
    now: float,
    aging_interval: float | None,
) -> OfferPlan:
    """Choose the address of each row not yet on its way (RTE-1..3) in transmission order
    (PRI-14, aging by ``aging_interval`` seconds per level when HONOR_BROKER_PRIORITY is ON)
    while its destination's window has room.

    Args:
        rows: the rows just read.
        skip: True for a key already offered or acknowledged since the read.
        pending_bytes: body bytes already on their way per address (absent: 0).
        window_bytes: body bytes a destination may have on its way; a row that would start
            beyond it waits (one message always goes to an empty window, however large).
        catalog: the routes, services and HONOR_BROKER_PRIORITY setting.
        now: broker-clock seconds (route expiry, aging).
        aging_interval: see :func:`~servicebroker.catalog.priorities.transmission_order`.
    """
    by_id = {r.transmission_id: r for r in rows}
    order = transmission_order(
        ((r.transmission_id, r.priority, r.enqueue_time) for r in rows),
        now,
        honor=catalog.honor_broker_priority,
        aging_interval=aging_interval,
    )
    plan = OfferPlan()
    planned: dict[str, int] = {}
    routes = RouteChooser(catalog.routes.values(), local_services=catalog.services, now=now)
    guid = catalog.service_broker_guid
    hood = neighbourhoods.of(None if guid is None else str(guid))
    for tid in order:
        row = by_id[tid]
        key = key_of(row)
        if skip(key):
            continue
        if hood is not None and row.to_broker_instance and hood.member(row.to_broker_instance):
            continue  # for another database of this instance: the instance's link carries it
        choice = routes.choose(row.to_service_name, row.to_broker_instance)
        if choice is None or choice.is_local:
            status = (
                f"No route matches service {row.to_service_name!r}"
                + (
                    f" at broker instance {row.to_broker_instance}"
                    if row.to_broker_instance
                    else ""
                )
                + " (RTE-2); the message waits for one."
            )
            if row.transmission_status != status:
                plan.unrouted.append((key, status))
            continue
        address = choice.address
        on_way = pending_bytes.get(address, 0) + planned.get(address, 0)
        if on_way and on_way + row.message_size > window_bytes:
            plan.full_windows.add(address)
            continue
        planned[address] = planned.get(address, 0) + row.message_size
        plan.offers.append((row, address))
    return plan


def stale_offers(
    offered: Mapping[MessageKey, str],
    targets: Mapping[MessageKey, tuple[str, str | None]],
    *,
    gone: Callable[[MessageKey], bool],
    catalog: CatalogSnapshot,
    now: float,
) -> list[MessageKey]:
    """TICK-3b: the messages on their way to take back — their row left the transmission
    queue (``gone``: END CONVERSATION, an expired lifetime, DROP SERVICE …) or their route
    now gives another address than the one in ``offered`` (ALTER / DROP ROUTE, an expired
    route; RTE-1..3).

    Args:
        offered: each message on its way and its address.
        targets: each one's (TO SERVICE, broker instance).
        gone: True for a message whose row is no longer in the transmission queue.
        catalog: the routes and this database's services.
        now: broker-clock seconds (route expiry).
    """
    routes = RouteChooser(catalog.routes.values(), local_services=catalog.services, now=now)
    stale = []
    for key, address in offered.items():
        choice = routes.choose(*targets[key])
        if gone(key) or choice is None or choice.address != address:
            stale.append(key)
    return stale


def header_of(row: TransportRow, catalog: CatalogSnapshot, instance: uuid.UUID) -> MessageHeader:
    """The message header of a transport's row sent by broker ``instance`` (NET-2)."""
    contract = catalog.contracts_by_id.get(row.service_contract_id)
    mt = catalog.message_types_by_id[row.message_type_id]
    return MessageHeader(
        conversation_id=row.conversation_id,
        is_initiator=bool(row.is_initiator),
        sequence=row.message_sequence_number,
        message_id=row.message_id,
        from_service=row.from_service_name,
        to_service=row.to_service_name,
        contract=contract.name if contract is not None else "",
        message_type=mt.name,
        validation=row.validation,
        from_broker_instance=instance,
        to_broker_instance=(uuid.UUID(row.to_broker_instance) if row.to_broker_instance else None),
        priority=row.priority,
        lifetime=row.lifetime,
        message_size=row.message_size,
        fragment_count=1,
    )
