"""Storage backends. :func:`open_storage` picks one from a URL: ``sqlite:///path.db`` or a plain
file path for the embedded SQLite default, ``postgresql://…`` (or ``postgres://…``) for
PostgreSQL; both behind the same :class:`~servicebroker.storage.base.Storage` seam."""

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

    Args:
        url: ``sqlite:///path.db``, a file path, or a libpq URL ``postgresql://…``.
        options: backend settings — SQLite: ``synchronous``, ``busy_timeout``,
            ``poll_interval``; PostgreSQL: ``busy_timeout``, ``poll_interval``, ``pool_size``.

    Raises:
        StorageError: the URL is empty, names an unsupported scheme, the file is unusable or
            the server cannot be reached; a setting the backend does not know.
    """
    allowed = (
        {"busy_timeout", "poll_interval", "pool_size"}
        if url.startswith(("postgresql://", "postgres://"))
        else {"synchronous", "busy_timeout", "poll_interval"}
    )
    unknown = set(options) - allowed
    if unknown:
        raise StorageError(
            f"unknown storage setting(s) for {url.split('://', 1)[0] if '://' in url else 'sqlite'}: "
            f"{', '.join(sorted(unknown))}"
        )
    if not isinstance(url, str) or not url.strip():
        raise StorageError(f"a storage URL is required, got {url!r}")
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStorage

        return PostgresStorage(url, **options)  # type: ignore[arg-type]
    path = sqlite_path(url)
    if path is None:
        scheme = url.split("://", 1)[0]
        raise StorageError(
            f"unsupported storage URL scheme {scheme!r} in {url!r}: use sqlite:///path.db, a "
            f"file path or postgresql://…"
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
