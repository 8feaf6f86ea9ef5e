"""What the ``servicebroker`` commands share, in a module of its own so that the commands kept
beside their concept (``diagnose/command.py``, ``metrics/command.py``, ``console/command.py``)
and :mod:`servicebroker.cli`, which registers them, all take it without importing each other."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import click

from .storage import sqlite_path

__all__ = ["DEFAULT_URL", "existing_database", "url_option"]

DEFAULT_URL = "servicebroker.db"
"""The broker database a command opens without ``--url`` or ``$SERVICEBROKER_URL``."""

F = TypeVar("F", bound=Callable[..., Any])


@overload
def url_option(fn: F) -> F: ...


@overload
def url_option(*, also: str = "") -> Callable[[F], F]: ...


def url_option(fn: F | None = None, *, also: str = "") -> F | Callable[[F], F]:
    """Add the ``--url`` option (default ``servicebroker.db``; ``$SERVICEBROKER_URL``), with
    ``also`` appended to its help. Use as ``@url_option`` or ``@url_option(also="…")``."""

    def add(f: F) -> F:
        text = "Broker database: sqlite:///path.db, a file path or postgresql://…."
        return click.option(
            "--url",
            envvar="SERVICEBROKER_URL",
            default=DEFAULT_URL,
            show_default=True,
            help=f"{text} {also}".rstrip(),
        )(f)

    return add if fn is None else add(fn)


def existing_database(url: str, command: str) -> None:
    """Refuse an SQLite file that does not exist: the commands that only read a broker
    (``diagnose``, ``metrics``) never create one.

    Raises:
        click.BadParameter: naming ``--url``, the path and ``command``.
    """
    path = sqlite_path(url)
    if path is not None and path not in ("", ":memory:") and not Path(path).exists():
        raise click.BadParameter(
            f"no broker database at {path!r} (servicebroker {command} reads an existing "
            f"database and does not create one)",
            param_hint="'--url'",
        )
