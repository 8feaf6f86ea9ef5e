"""Conversation-group locks for the SQLite backend, held to the end of a transaction (RCV-2,
DLG-9) across threads and processes without writing to the database.

Each connection (one transaction at a time) has its own descriptor of the lock file
``<database>-sblocks`` and takes a one-byte open-file-description lock (Linux ``F_OFD_SETLK``) at
an offset derived from the group id. Such locks conflict between descriptors, whether in one
process or in several, cost about a microsecond and never touch SQLite's single writer. They are
released at commit or rollback (unlocked one by one, or by closing the descriptor when there are
many), and by the kernel when the process dies, so a crashed reader's groups are free again at
once. (A process that forks while a transaction holds groups shares them with the child until
either ends the descriptor: do not fork inside a transaction.)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct
from collections.abc import Iterable

from ...errors import StorageError
from ..failures import os_failure

__all__ = ["GroupLocks", "check_platform", "locked_groups"]

_F_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
_F_OFD_GETLK: int = getattr(fcntl, "F_OFD_GETLK", 36)
_FLOCK = struct.Struct("hh4xqqi4x")
_UNLOCK_ONE_BY_ONE = 8


def check_platform() -> None:
    """Raise :class:`StorageError` where open-file-description locks are missing (not Linux)."""
    if _F_OFD_SETLK is None:
        raise StorageError(
            "the SQLite storage needs open-file-description locks (fcntl.F_OFD_SETLK, Linux); "
            "this platform has none"
        )


def _offset(group_id: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(group_id, digest_size=8).digest(), "big") >> 1


class GroupLocks:
    """The group locks of one transaction.

    Args:
        path: the lock file (created if missing).
        database: the database as error messages name it.
    """

    __slots__ = ("_database", "_fd", "_path", "held")

    def __init__(self, path: str, database: str) -> None:
        self._path = path
        self._database = database
        self._fd: int | None = None
        self.held: set[bytes] = set()

    def try_lock(self, group_id: bytes) -> bool:
        """Lock ``group_id`` (16 bytes) for this transaction without waiting.

        Returns True when this transaction holds it (already or now), False when another
        transaction in any process holds it.

        Raises:
            StorageError: the lock file cannot be opened (a subclass for a full disk or an I/O
                error).
        """
        if group_id in self.held:
            return True
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise os_failure(
                    exc, database=self._database, what=f"lock file {self._path}"
                ) from exc
        request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _offset(group_id), 1, 0)
        try:
            fcntl.fcntl(self._fd, _F_OFD_SETLK, request)  # type: ignore[arg-type]
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):  # another description holds it
                return False
            raise os_failure(exc, database=self._database, what=f"lock file {self._path}") from exc
        self.held.add(group_id)
        return True

    def others_hold(self, group_ids: Iterable[bytes]) -> frozenset[bytes]:
        """:func:`locked_groups` on this lock file (this transaction's own groups included)."""
        return locked_groups(self._path, self._database, group_ids)

    def unlock(self, group_id: bytes) -> None:
        """Release one group before the transaction ends (a group locked but not used).

        Raises:
            StorageError: the kernel refused (the lock file's descriptor is unusable).
        """
        if group_id not in self.held or self._fd is None:
            return
        request = _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, _offset(group_id), 1, 0)
        try:
            fcntl.fcntl(self._fd, _F_OFD_SETLK, request)  # type: ignore[arg-type]
        except OSError as exc:
            raise os_failure(exc, database=self._database, what=f"lock file {self._path}") from exc
        self.held.discard(group_id)

    def release_all(self) -> None:
        """Release every group this transaction holds: one by one when they are few (the
        descriptor stays open for the next transaction on this connection), else — or when an
        unlock fails — by closing the descriptor, which drops them all at once. Never raises."""
        if self._fd is not None:
            if len(self.held) <= _UNLOCK_ONE_BY_ONE:
                try:
                    for group_id in list(self.held):
                        self.unlock(group_id)
                except StorageError:
                    self.close()
            else:
                self.close()
        self.held.clear()

    def close(self) -> None:
        """Release everything and close the descriptor. Never raises."""
        if self._fd is not None:
            with contextlib.suppress(OSError):  # the descriptor and its locks go either way
                os.close(self._fd)
            self._fd = None
        self.held.clear()


def locked_groups(path: str, database: str, group_ids: Iterable[bytes]) -> frozenset[bytes]:
    """Those of ``group_ids`` some transaction holds now (in any process, the caller's own
    included), asked of the kernel (``F_OFD_GETLK``) on a descriptor of its own: nothing is
    taken or waited for.

    Raises:
        StorageError: the lock file cannot be opened or asked (a subclass for an I/O error).
    """
    wanted = list(group_ids)
    if not wanted:
        return frozenset()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise os_failure(exc, database=database, what=f"lock file {path}") from exc
    held = set()
    try:
        for group_id in wanted:
            request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _offset(group_id), 1, 0)
            reply = fcntl.fcntl(fd, _F_OFD_GETLK, request)
            if _FLOCK.unpack(reply)[0] != fcntl.F_UNLCK:
                held.add(group_id)
    except OSError as exc:
        raise os_failure(exc, database=database, what=f"lock file {path}") from exc
    finally:
        os.close(fd)
    return frozenset(held)
