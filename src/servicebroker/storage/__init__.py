"""Storage backends. :func:`open_storage` picks one from a URL: ``sqlite:///path.db`` or a plain
file path for the embedded SQLite default, ``postgresql://…`` (or ``postgres://…``) for
PostgreSQL; both behind the same :class:`~servicebroker.storage.base.Storage` seam."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..clock import check_seconds
from ..errors import BrokerError, StorageError
from .base import Storage

__all__ = ["MAX_BUSY_TIMEOUT", "MAX_POLL_INTERVAL", "check_settings", "open_storage", "sqlite_path"]

MAX_BUSY_TIMEOUT = 2_147_483.0
"""The longest ``busy_timeout``, in seconds: PostgreSQL's ``lock_timeout`` is an int of
milliseconds (2**31-1 ms); SQLite is held to the same bound."""
MIN_POLL_INTERVAL = 0.001
"""The shortest ``poll_interval``, in seconds: shorter would make a waiting RECEIVE spin."""
MAX_POLL_INTERVAL = 3600.0
"""The longest ``poll_interval``, in seconds: how late a change made by another process may be
seen at worst."""


def check_settings(options: Mapping[str, object]) -> None:
    """Check the values of storage settings before anything is opened.

    ``busy_timeout``: seconds >= 0, at most :data:`MAX_BUSY_TIMEOUT`; ``poll_interval``:
    seconds from :data:`MIN_POLL_INTERVAL` (less would make a waiting RECEIVE spin) to
    :data:`MAX_POLL_INTERVAL`; ``pool_size``: an integer >= 1; ``synchronous``: a string
    (its value is checked by the SQLite backend).

    Raises:
        BrokerError: a value of the wrong type, NaN, infinite or out of range; the message
            names the setting.
    """
    if "busy_timeout" in options:
        check_seconds(options["busy_timeout"], "busy_timeout", maximum=MAX_BUSY_TIMEOUT)
    if "poll_interval" in options:
        poll = check_seconds(
            options["poll_interval"], "poll_interval", allow_zero=False, maximum=MAX_POLL_INTERVAL
        )
        if poll < MIN_POLL_INTERVAL:
            raise BrokerError(
                f"poll_interval must be at least {MIN_POLL_INTERVAL} seconds (a shorter one "
                f"makes a waiting RECEIVE spin), got {poll!r}"
            )
    size = options.get("pool_size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise BrokerError(f"pool_size must be an integer >= 1, got {size!r}")
    if not isinstance(options.get("synchronous", ""), str):
        raise BrokerError(
            f"synchronous must be FULL, NORMAL, OFF or EXTRA, got {options['synchronous']!r}"
        )


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
        BrokerError: a setting's value is bad (:func:`check_settings`).
    """
    if not isinstance(url, str) or not url.strip():
        raise StorageError(f"a storage URL is required, got {url!r}")
    if "\x00" in url:
        raise StorageError(f"storage URL {url!r} holds a NUL character")
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
    check_settings(options)
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
