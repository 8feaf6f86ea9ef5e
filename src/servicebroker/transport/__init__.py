"""The transport between broker instances (NET, RTE, SEC-1), sans I/O: :mod:`.framing` turns a
connection's bytes into frames and back; the adjacent broker and dialog protocols above it, and
the sockets below, come next (issue 12)."""

from __future__ import annotations

__all__: list[str] = []
