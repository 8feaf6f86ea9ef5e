"""The transport between broker instances (NET, RTE, SEC-1), sans I/O (docs/transport.md):
:mod:`.framing` turns a connection's bytes into frames and back, :mod:`.wire` gives each frame's
payload, :mod:`.adjacent` is one connection's state machine (the adjacent broker protocol),
:mod:`.outbound` and :mod:`.inbound` are the two halves of the dialog protocol, :mod:`.destinations`
plans connection attempts (TICK-3a) and :mod:`.settings` holds their numbers. The sockets and
TLS below them come next (issue 12)."""

from __future__ import annotations

__all__: list[str] = []
