"""``servicebroker sqlcmd``: T-SQL scripts and queries run on an instance as sqlcmd runs them on
SQL Server (docs/tsql.md): ``-S`` the instance (a folder, or a PostgreSQL URL), ``-d`` the
starting database, ``-i`` input files in order, ``-Q`` a query, ``-b`` stop at the first failing
batch and exit 1, ``-v name=value`` scripting variables; without ``-i`` or ``-Q`` the script is
read from standard input; ``:connect`` in a script moves the run to another instance. Output
and exit status are sqlcmd's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

import click

from ..errors import BrokerError, TSqlError
from ..tsql.instance import Instance
from ..tsql.interpreter import Session
from ..tsql.output import format_event
from ..tsql.results import ResultSet
from ..tsql.script import Script

__all__ = ["sqlcmd"]


def _server_name(location: str) -> str:
    if "://" in location:
        return location.split("@")[-1].split("/")[0].split("?")[0] or "localhost"
    return Path(location).resolve().name or location


class _Connection:
    """The run's session and its instance; ``:connect`` swaps both (the instances stay open,
    and their background work running, until the run ends)."""

    def __init__(self, database: str, out: TextIO) -> None:
        self._database = database
        self._out = out
        self._server_name = ""
        self._instances: list[Instance] = []
        self._session: Session | None = None

    def show(self, event: ResultSet | str | int | TSqlError) -> None:
        self._out.write(format_event(event, server=self._server_name) + "\n")
        self._out.flush()

    def connect(self, server: str, database: str | None = None) -> None:
        """Open the instance ``server`` (a folder or a PostgreSQL URL) and a session on
        ``database`` (default: the run's ``-d``); the previous session ends (its open
        transaction rolled back).

        Raises:
            BrokerError: the instance cannot be opened. TSqlError: no such database.
        """
        instance = Instance.open(server)
        self._instances.append(instance)
        if self._session is not None:
            self._session.close()
            self._session = None
        self._server_name = _server_name(server)
        self._session = Session(instance, database or self._database, on_event=self.show)
        instance.start()

    def run_batch(self, text: str) -> bool:
        """Run one batch in the current session; True when it failed."""
        assert self._session is not None
        before = len(self._session.results.errors)
        self._session.run_batch(text)
        return len(self._session.results.errors) > before

    def close(self) -> None:
        """End the session and close every instance the run opened."""
        if self._session is not None:
            self._session.close()
            self._session = None
        for instance in reversed(self._instances):
            instance.close()
        self._instances.clear()


@click.command(context_settings={"ignore_unknown_options": False})
@click.option(
    "-S",
    "server",
    default=lambda: os.environ.get("SQLCMDSERVER", "instance"),
    show_default="SQLCMDSERVER, else ./instance",
    help="The instance: a folder (each database a SQLite file in it) or a PostgreSQL URL.",
)
@click.option(
    "-d",
    "database",
    default=lambda: os.environ.get("SQLCMDDBNAME", "master"),
    show_default="master",
    help="The database the session starts in.",
)
@click.option("-i", "inputs", multiple=True, help="An input file; several run in order.")
@click.option("-Q", "query", default=None, help="Run this query, then exit.")
@click.option("-b", "exit_on_error", is_flag=True, help="Stop at the first failing batch; exit 1.")
@click.option("-v", "variables", multiple=True, help="A scripting variable: NAME=VALUE.")
@click.option(
    "-E", "trusted", is_flag=True, help="Accepted (trusted connection: the default here)."
)
def sqlcmd(
    server: str,
    database: str,
    inputs: tuple[str, ...],
    query: str | None,
    exit_on_error: bool,
    variables: tuple[str, ...],
    trusted: bool,
) -> None:
    """Run T-SQL on an instance, as sqlcmd does on SQL Server."""
    scripting: dict[str, str] = {}
    for item in variables:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"-v takes NAME=VALUE, got {item!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        scripting[name.strip()] = value
    out = sys.stdout
    current = _Connection(database, out)
    try:
        current.connect(server)
    except TSqlError as exc:  # no such database
        current.show(exc)
        current.close()
        sys.exit(1)
    except BrokerError as exc:
        raise click.ClickException(f"cannot open instance {server!r}: {exc}") from exc

    def connect(target: str) -> None:
        # :connect: the new instance's session starts in master, as sqlcmd's does
        if "://" not in target and not Path(target).is_dir():
            raise TSqlError(
                0,
                f"Sqlcmd: Error: cannot connect to {target!r}: no instance there (a folder made "
                f"by servicebroker sqlcmd -S or serve, or a PostgreSQL URL).",
                severity=16,
            )
        try:
            current.connect(target, database="master")
        except TSqlError:
            raise
        except BrokerError as exc:
            raise TSqlError(
                0, f"Sqlcmd: Error: cannot connect to {target!r}: {exc}", severity=16
            ) from exc

    script = Script(current.run_batch, scripting, exit_on_error, connect)
    try:
        if query is not None:
            script.run_text(query)
        elif inputs:
            for path in inputs:
                script.run_file(path)
                if script.exited:
                    break
        else:
            script.run_text(sys.stdin.read())
    except TSqlError as exc:  # a sqlcmd-level error: a missing file, an unknown command
        out.write(exc.message + "\n")
        script.failed = True
        script.exited = exit_on_error or script.exited
    finally:
        current.close()
    if script.failed and exit_on_error:
        sys.exit(1)
