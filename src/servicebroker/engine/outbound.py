"""Outbound: where a message goes when it cannot (or must not) be put on a queue here — the
transmission queue, behind the conversation's earlier messages or until its target service and
queue exist and accept it (QUE-3), or the transport's rows when its dialog goes to another
broker instance (NET-3, routes RTE-1..4), another database of the instance among them
(:mod:`.neighbours`) — and :meth:`Outbound.deliver`, the choice between
those and local delivery (:mod:`.local_delivery`).
"""

from __future__ import annotations

from ..catalog import CatalogSnapshot
from ..catalog.routing import LOCAL, RouteChooser
from ..dialogs import Arrival
from ..messages import Outgoing
from ..storage.base import StorageConnection
from ..storage.rows import EndpointRow
from .local_delivery import LocalDelivery
from .neighbours import neighbourhoods

__all__ = ["Outbound"]


class Outbound(LocalDelivery):
    """Routing a commit's messages: here, the transmission queue or another instance (see
    :class:`~servicebroker.engine.commit_rows.CommitRows` for the arguments)."""

    def __init__(self, conn: StorageConnection, catalog: CatalogSnapshot, now: float) -> None:
        super().__init__(conn, catalog, now)
        guid = catalog.service_broker_guid
        self._own_instance = None if guid is None else str(guid)
        self._route_chooser = RouteChooser(
            catalog.routes.values(), local_services=catalog.services, now=now
        )
        # RTE-2: with no route to another instance every dialog stays here (no lookup)
        self._network_routes = any(r.address.upper() != LOCAL for r in catalog.routes.values())
        self._neighbours: dict[str, str | None] = {}  # far service: the database holding it
        self.to_neighbours = False
        """True once this commit held a message for another database of the instance (the
        caller tells :data:`~.neighbours.neighbourhoods` after the commit)."""

    def deliver(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> str | None:
        """Put a message from ``sender`` on its far endpoint's queue.

        Returns None when delivered or discarded, or the reason the message must wait in the
        transmission queue (it is then inserted there, unless it came from there); a message
        for another broker instance always goes there, for the transport (status "").
        """
        if self._to_transport(sender, out, arrival):
            return ""
        if self.transmission.blocks(sender):
            return self.transmission.hold(
                sender, out, arrival, "waiting behind earlier messages of the conversation"
            )
        reason = self._deliver_here(sender, out, arrival)
        if reason is not None:
            return self.transmission.hold(sender, out, arrival, reason)
        return None

    def deliver_now(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> str | None:
        """Put ``out`` on the far endpoint's queue now, creating the target endpoint on the
        first message (PRI-3); the far endpoint's state decides (DLG-4: discarded after END).
        Returns None when done, else why it cannot be delivered yet (the target service does
        not exist, or its queue is OFF: QUE-3) — the caller holds it in the transmission
        queue. A message whose dialog now goes to another instance (a route created since)
        moves to the transport's rows. (:class:`~servicebroker.engine.transmission.Destination`.)"""
        if self._to_transport(sender, out, arrival):
            return None
        return self._deliver_here(sender, out, arrival)

    @property
    def own_instance(self) -> str | None:
        """This database's broker instance (``service_broker_guid`` as text), or None."""
        return self._own_instance

    def _to_transport(self, sender: EndpointRow, out: Outgoing, arrival: Arrival) -> bool:
        """Hold ``out`` as a transport row when its dialog goes to another instance (NET-3:
        it stays until acknowledged); True when it did."""
        remote = self.remote_of(sender)
        if remote is None:
            return False
        self.transmission.hold_remote(sender, out, arrival, remote)
        if remote and not self.to_neighbours:
            hood = neighbourhoods.of(self._own_instance)
            self.to_neighbours = hood is not None and hood.member(remote)
        return True

    def remote_of(self, sender: EndpointRow) -> str | None:
        """Where a message from ``sender`` goes when that is another broker instance: the
        instance's ``service_broker_guid`` (text), "" while not known yet; None when the far
        endpoint is in this database. A dialog bound to an instance (an endpoint made by a
        message from another instance, or pinned by its first acknowledgement, RTE-4) stays
        with it."""
        instance = sender.far_broker_instance
        if instance is not None:
            return None if instance == self._own_instance else instance
        if not sender.is_initiator:
            return None
        here = sender.far_service in self.catalog.services
        if here and not self._network_routes:
            return None
        choice = self._route_chooser.choose(sender.far_service)
        if choice is None:
            return None
        if not choice.is_local:
            return choice.broker_instance or ""
        return None if here else self._neighbour(sender.far_service)

    def _neighbour(self, service_name: str) -> str | None:
        """The broker instance of the other database of this instance that holds
        ``service_name`` (a LOCAL route reaches every database of the instance, as
        AutoCreatedLocal does on SQL Server; :mod:`.neighbours`), or None: it waits here."""
        if service_name not in self._neighbours:
            hood = neighbourhoods.of(self._own_instance)
            found = None
            if hood is not None and self._own_instance is not None:
                found = hood.holder_of(service_name, self._own_instance)
            self._neighbours[service_name] = found
        return self._neighbours[service_name]
