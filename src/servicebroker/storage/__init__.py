"""Storage backends. :func:`open_storage` picks one from a URL: ``sqlite:///path.db`` or a plain
file path for the embedded SQLite default (PostgreSQL comes as a second backend behind the same
:class:`~servicebroker.storage.base.Storage` seam)."""

from __future__ import annotations

import os

from ..errors import StorageError
from .base import Storage

__all__ = ["open_storage", "sqlite_path"]


def sqlite_path(url: str) -> str | None:
    """The file path of an SQLite URL or plain path, or None for another scheme."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///") :]
    if url.startswith("sqlite://"):
        raise StorageError(f"SQLite URL {url!r} needs three slashes: sqlite:///path/to/file.db")
    if "://" in url:
        return None
    return url


def open_storage(url: str, **options: object) -> Storage:
    """Open (creating and migrating if needed) the database at ``url``.

    Raises:
        StorageError: the URL is empty, names an unsupported scheme, or the file is unusable.
    """
    if not isinstance(url, str) or not url.strip():
        raise StorageError(f"a storage URL is required, got {url!r}")
    path = sqlite_path(url)
    if path is None:
        scheme = url.split("://", 1)[0]
        raise StorageError(
            f"unsupported storage URL scheme {scheme!r} in {url!r}: use sqlite:///path.db or a file path"
        )
    if path in ("", ":memory:"):
        raise StorageError(
            "the SQLite storage needs a file path (':memory:' cannot be shared by transactions)"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise StorageError(f"folder {folder!r} for database {path!r} does not exist")
    from .sqlite import SqliteStorage

    return SqliteStorage(path, **options)  # type: ignore[arg-type]
