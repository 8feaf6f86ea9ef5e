"""What queue monitors must see from every process using the database (ACT-3, ACT-5b, ACT-8):
how many sessions wait in RECEIVE or GET CONVERSATION GROUP without WHERE on a queue, when such a
call last came back empty, and when a RECEIVE last ran on it.

It lives in the side file ``<database>-sbactivity``, never in SQLite (no write lock taken): each
queue owns a 4 KiB region. A waiting session holds an open-file-description lock on one of the
region's 64 slot bytes, so the count is exact across processes and a killed process's waits
vanish with it; the two times are 8-byte doubles written with ``pwrite`` (a later time wins).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..failures import os_failure

__all__ = ["QueueActivity"]

T = TypeVar("T")


def _fcntl_bytes(fd: int, cmd: int, arg: bytes) -> bytes:
    """``fcntl.fcntl`` with a ``struct flock`` buffer: the kernel's reply."""
    return fcntl.fcntl(fd, cmd, arg)


_F_OFD_SETLK: int = getattr(fcntl, "F_OFD_SETLK", 37)
_F_OFD_GETLK: int = getattr(fcntl, "F_OFD_GETLK", 36)
_FLOCK = struct.Struct("hh4xqqi4x")
_REGION = 4096
_EMPTY_AT = 0
_RECEIVE_AT = 8
_SLOTS_AT = 1024
SLOTS = 64
"""Sessions counted as waiting on one queue at most (more wait, but count as 64)."""
_DOUBLE = struct.Struct("<d")


class QueueActivity:
    """The activity file of one database.

    Args:
        path: the file (created if missing).
        database: the database as error messages name it.

    Raises (every method):
        StorageError: the file cannot be opened or written (a subclass for a full disk or an
            I/O error).
    """

    def __init__(self, path: str, database: str) -> None:
        self._path = path
        self._database = database
        self._fd = self._open(os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        self._lock = threading.Lock()

    def _io(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)``, an ``os``/``fcntl`` call on the activity file, its OSError turned into
        the storage's error."""
        try:
            return call(*args)
        except OSError as exc:
            raise os_failure(
                exc, database=self._database, what=f"activity file {self._path}"
            ) from exc

    def _open(self, flags: int) -> int:
        return self._io(os.open, self._path, flags, 0o644)

    def close(self) -> None:
        """Close the file (waits held through :meth:`begin_wait` are released by their own
        descriptors)."""
        with self._lock:
            if self._fd >= 0:
                with contextlib.suppress(OSError):  # the descriptor is gone either way
                    os.close(self._fd)
                self._fd = -1

    # -- waiting sessions ----------------------------------------------------------------
    def begin_wait(self, queue_id: int) -> int | None:
        """Count the caller as waiting on ``queue_id``; returns a token for :meth:`end_wait`
        (None when all 64 slots are taken)."""
        fd = self._open(os.O_RDWR | os.O_CLOEXEC)
        base = queue_id * _REGION + _SLOTS_AT
        for slot in range(SLOTS):
            try:
                fcntl.fcntl(
                    fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, base + slot, 1, 0)
                )
                return fd
            except OSError:
                continue
        with contextlib.suppress(OSError):
            os.close(fd)
        return None

    def end_wait(self, token: int | None) -> None:
        """The session stopped waiting."""
        if token is not None:
            with contextlib.suppress(OSError):  # the descriptor (and its lock) is gone either way
                os.close(token)

    def waiting(self, queue_id: int) -> int:
        """How many sessions, in any process, wait on ``queue_id`` now."""
        base = queue_id * _REGION + _SLOTS_AT
        with self._lock:
            if not self._locked(base, SLOTS):
                return 0  # the common case: one system call
            # F_OFD_GETLK reports some conflicting lock, not the lowest: look at each slot
            return sum(1 for slot in range(SLOTS) if self._locked(base + slot, 1))

    def _locked(self, start: int, length: int) -> bool:
        reply: bytes = self._io(
            _fcntl_bytes,
            self._fd,
            _F_OFD_GETLK,
            _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, length, 0),
        )
        return bool(_FLOCK.unpack(reply)[0] != fcntl.F_UNLCK)

    # -- times ---------------------------------------------------------------------------
    def _read(self, offset: int) -> float | None:
        with self._lock:
            data = self._io(os.pread, self._fd, 8, offset)
        if len(data) < 8:
            return None
        value = _DOUBLE.unpack(data)[0]
        return value if value > 0 else None

    def _write_later(self, offset: int, when: float) -> None:
        with self._lock:
            data = self._io(os.pread, self._fd, 8, offset)
            if len(data) == 8 and _DOUBLE.unpack(data)[0] >= when:
                return
            self._io(os.pwrite, self._fd, _DOUBLE.pack(when), offset)

    def note_empty(self, queue_id: int, when: float) -> None:
        """A RECEIVE or GET CONVERSATION GROUP without WHERE on the queue returned nothing at
        ``when`` (broker-clock seconds) (ACT-3b)."""
        self._write_later(queue_id * _REGION + _EMPTY_AT, when)

    def last_empty(self, queue_id: int) -> float | None:
        """When such a call last came back empty, or None."""
        return self._read(queue_id * _REGION + _EMPTY_AT)

    def note_receive(self, queue_id: int, when: float) -> None:
        """A RECEIVE ran on the queue at ``when`` (re-arms external activation, ACT-8)."""
        self._write_later(queue_id * _REGION + _RECEIVE_AT, when)

    def last_receive(self, queue_id: int) -> float | None:
        """When a RECEIVE last ran on the queue, or None."""
        return self._read(queue_id * _REGION + _RECEIVE_AT)

    def forget(self, queue_id: int) -> None:
        """Clear the queue's times (a new queue reusing the id starts fresh)."""
        with self._lock:
            self._io(os.pwrite, self._fd, b"\0" * 16, queue_id * _REGION)
