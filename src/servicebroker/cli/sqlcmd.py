"""``servicebroker sqlcmd``: T-SQL scripts and queries run on an instance as sqlcmd runs them on
SQL Server (docs/tsql.md): ``-S`` the instance (a folder, or a PostgreSQL URL), ``-d`` the
starting database, ``-i`` input files in order, ``-Q`` a query, ``-b`` stop at the first failing
batch and exit 1, ``-v name=value`` scripting variables; without ``-i`` or ``-Q`` the script is
read from standard input. Output and exit status are sqlcmd's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
    server_name = _server_name(server)
    out = sys.stdout

    def show(event: ResultSet | str | int | TSqlError) -> None:
        text = format_event(event, server=server_name)
        out.write(text + "\n")
        out.flush()

    try:
        instance = Instance.open(server)
    except BrokerError as exc:
        raise click.ClickException(f"cannot open instance {server!r}: {exc}") from exc
    with instance:
        try:
            session = Session(instance, database, on_event=show)
        except TSqlError as exc:
            show(exc)
            sys.exit(1)
        instance.start()

        def run_batch(text: str) -> bool:
            before = len(session.results.errors)
            session.run_batch(text)
            return len(session.results.errors) > before

        script = Script(run_batch, scripting, exit_on_error)
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
            session.close()
    if script.failed and exit_on_error:
        sys.exit(1)
