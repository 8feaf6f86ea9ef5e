"""A TCP relay on loopback that keeps a copy of every byte it carries, both ways: the tests' view
of the wire between two brokers (what an eavesdropper sees)."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

from servicebroker.testing.ports import free_port


class WireTap:
    """Listen on a free port and relay each connection to ``127.0.0.1:target_port``;
    :meth:`captured` is every byte relayed so far (both directions, in arrival order)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._lock = threading.Lock()
        self._bytes = bytearray()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="wire tap", daemon=True).start()

    def captured(self) -> bytes:
        with self._lock:
            return bytes(self._bytes)

    def _accept(self) -> None:
        while not self._closed:
            try:
                inside, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                outside = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                inside.close()  # the broker behind is not listening: the caller retries
                continue
            with self._lock:
                self._sockets += [inside, outside]
            for src, dst in ((inside, outside), (outside, inside)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                with self._lock:
                    self._bytes += data
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._server.close()
        with self._lock:
            sockets = list(self._sockets)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.close()

    def __enter__(self) -> WireTap:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
