"""Which remote destinations the transport may connect to now (TICK-3a), sans I/O.

TICK-3a: every second notification the transport tries to connect to each remote destination
that has pending messages and is not suppressed; a destination is suppressed for
``suppress_after_disconnect`` (15 s) after a disconnection and ``suppress_after_failure`` (60 s)
after each failed connection attempt. :meth:`Destinations.status` keeps the last failure's text
for the transmission_status of the messages that wait for that address (NET-7).
"""

from __future__ import annotations

from dataclasses import dataclass

from .settings import TransportSettings

__all__ = ["Destinations"]


@dataclass(slots=True)
class _Destination:
    connected: bool = False
    connecting: bool = False
    suppressed_until: float = float("-inf")
    status: str | None = None


class Destinations:
    """The connection plan of one broker instance, by address (e.g. ``"TCP://host:4022"``).

    Args:
        settings: a :class:`TransportSettings`: ``suppress_after_disconnect`` (15 s) and
            ``suppress_after_failure`` (60 s), TICK-3a.
    """

    def __init__(self, settings: TransportSettings | None = None) -> None:
        settings = settings or TransportSettings()
        self.suppress_after_disconnect = settings.suppress_after_disconnect
        self.suppress_after_failure = settings.suppress_after_failure
        self._by_address: dict[str, _Destination] = {}

    def _get(self, address: str) -> _Destination:
        return self._by_address.setdefault(address, _Destination())

    def add(self, address: str) -> None:
        """``address`` has pending messages: :meth:`due` lists it when not suppressed."""
        self._get(address)

    def forget(self, address: str) -> None:
        """``address`` has no pending messages any more: :meth:`due` no longer lists it."""
        self._by_address.pop(address, None)

    def should_connect(self, address: str, now: float) -> bool:
        """True when ``address`` is neither connected, being connected to, nor suppressed at
        ``now`` (TICK-3a); the caller then connects and calls :meth:`on_connecting`."""
        d = self._get(address)
        return not d.connected and not d.connecting and now >= d.suppressed_until

    def on_connecting(self, address: str, now: float) -> None:
        """A connection attempt to ``address`` began at ``now``."""
        self._get(address).connecting = True

    def on_connected(self, address: str, now: float) -> None:
        """The connection to ``address`` is logged in: its failure status is cleared."""
        d = self._get(address)
        d.connected, d.connecting, d.status = True, False, None

    def on_disconnected(self, address: str, now: float) -> None:
        """The connection to ``address`` ended: suppressed for ``suppress_after_disconnect``
        seconds from ``now`` (TICK-3a)."""
        d = self._get(address)
        d.connected = d.connecting = False
        d.suppressed_until = now + self.suppress_after_disconnect

    def on_failed(self, address: str, now: float, status: str) -> None:
        """A connection attempt to ``address`` failed saying ``status`` (refused, unreachable,
        authentication failed …): suppressed for ``suppress_after_failure`` seconds from
        ``now`` (TICK-3a); ``status`` is kept for :meth:`status`."""
        d = self._get(address)
        d.connected = d.connecting = False
        d.suppressed_until = now + self.suppress_after_failure
        d.status = status

    def status(self, address: str) -> str | None:
        """The last failure's text for ``address`` (NET-7 transmission_status), or None."""
        d = self._by_address.get(address)
        return None if d is None else d.status

    def suppressed_until(self, address: str) -> float | None:
        """Broker-clock seconds until which ``address`` is suppressed, or None if unknown."""
        d = self._by_address.get(address)
        return None if d is None else d.suppressed_until

    def due(self, now: float) -> list[str]:
        """The known addresses to connect to at ``now`` (:meth:`should_connect`), sorted."""
        return sorted(a for a in self._by_address if self.should_connect(a, now))

    def next_due(self, now: float) -> float | None:
        """The earliest time an address now suppressed may be connected to again, or None."""
        times = [
            d.suppressed_until
            for d in self._by_address.values()
            if not d.connected and not d.connecting and d.suppressed_until > now
        ]
        return min(times, default=None)
