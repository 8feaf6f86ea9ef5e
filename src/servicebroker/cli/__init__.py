"""The ``servicebroker`` command line (click): init, ddl, certificate, send, receive, peek,
status (``cli/database.py``), send, receive, peek (``cli/messages.py``), serve, activator, demo
(``cli/programs.py``), sqlcmd (T-SQL, ``cli/sqlcmd.py``); console (the web console, ``console/command.py``), diagnose
(``diagnose/command.py``) and metrics (``metrics/command.py``) are registered here.

Every command takes ``--url`` (default: ``servicebroker.db`` in the current folder; also the
``SERVICEBROKER_URL`` environment variable; for ``activator`` the configuration file's ``url``)
and exits non-zero with a clear message on bad input.
"""

from __future__ import annotations

import logging
from typing import Any

import click

from ..console.command import console_command
from ..diagnose.command import diagnose
from ..errors import BrokerError
from ..metrics.command import metrics
from .database import certificate, ddl, init, status
from .messages import peek, receive, send
from .programs import activator, demo, serve
from .sqlcmd import sqlcmd

__all__ = ["main"]


class _OneLineFormatter(logging.Formatter):
    """Log records as one line each (``servicebroker: warning: …``), an exception as its class
    and message rather than a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            message = f"{message} ({type(error).__name__}: {error})"
        return f"servicebroker: {record.levelname.lower()}: {' '.join(message.split())}"


class _Commands(click.Group):
    """The command group: a :class:`BrokerError` a command did not turn into a click error
    itself still ends as one line (``Error: …``, exit 1), never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Commands)
@click.version_option(package_name="servicebroker")
def main() -> None:
    """SQL Server Service Broker re-built in Python: dialogs, conversation groups, activation."""
    # the command line is an application: its errors are one line each (a BrokerError becomes
    # click's "Error: …"), and so are its logs — a supervised thread that dies while the
    # database is away logs one line, not a traceback; the pool's own notes on each session it
    # discards repeat what the errors say
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(_OneLineFormatter())
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


for _command in (
    init,
    certificate,
    ddl,
    send,
    receive,
    peek,
    status,
    serve,
    activator,
    demo,
    sqlcmd,
):
    main.add_command(_command)
main.add_command(console_command)
main.add_command(diagnose)
main.add_command(metrics)
