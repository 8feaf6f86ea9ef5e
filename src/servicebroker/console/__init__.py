"""The web console (``servicebroker console``): a Starlette application, served by uvicorn, that
shows an operator every queue, the message rates, the conversations and the transmission queue
of one broker database, live (htmx polling), from its own process — it opens the database and
never starts a broker there, so it reads and takes part in nothing. With ``--admin`` and a token
it also turns disabled queues back ON, ends stuck conversations WITH CLEANUP and retries the
transmission queue (docs/console.md).

Needs the ``console`` extra (``pip install servicebroker[console]``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """``create_app`` is imported on first use: ``servicebroker console``'s command is
    registered with the CLI without importing Starlette (an optional extra)."""
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
