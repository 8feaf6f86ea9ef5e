"""The commands that make and inspect a broker database: ``init`` (create or migrate, NEW_BROKER
for a copy), ``ddl`` (a T-SQL script of Service Broker DDL), ``certificate`` (a self-signed
pair for an endpoint) and ``status`` (queues, endpoints, monitors, tasks, the transmission
queue)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..command_options import url_option
from ..errors import BrokerError
from .shared import InputFile, console, opened, printable

__all__ = ["certificate", "ddl", "init", "status"]


@click.command()
@click.argument("url_arg", metavar="URL", required=False)
@url_option
@click.option(
    "--new-broker",
    is_flag=True,
    help="Give the database a new service_broker_guid and remove every conversation without "
    "a message (ALTER DATABASE … SET NEW_BROKER): for a copied database file.",
)
def init(url_arg: str | None, url: str, new_broker: bool) -> None:
    """Create (or migrate) the broker database at URL; prints its service_broker_guid."""
    target = url_arg or url
    with opened(target) as broker:
        try:
            if new_broker:
                broker.alter_database(new_broker=True)
            guid = broker.service_broker_guid
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(
            f"broker database ready: {printable(broker.database)} "
            f"(service_broker_guid {guid}{', new' if new_broker else ''})"
        )


@click.command()
@click.argument("name")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder to write NAME.pem and NAME.key into (created if missing).",
)
@click.option("--days", default=365, show_default=True, type=click.IntRange(min=1))
def certificate(name: str, out: str, days: int) -> None:
    """Make a self-signed certificate CN=NAME and its private key (EC P-256, subjectAltName
    localhost and 127.0.0.1) for an endpoint's AUTHENTICATION (CREATE CERTIFICATE … FROM FILE);
    prints the two paths."""
    from pathlib import Path

    from ..transport.certificates import make_self_signed

    try:
        cert, key = make_self_signed(name, Path(out), days=days)
    except BrokerError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"certificate: {cert}")
    click.echo(f"private key: {key}")


def _script_text(data: bytes, source: str) -> str:
    """A T-SQL script's text: UTF-8 (with or without a byte order mark) or UTF-16 with one (as
    SQL Server Management Studio saves "Unicode" files)."""
    try:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return data.decode("utf-16")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"{source} is not UTF-8 (or UTF-16 with a byte order mark) text: {exc}"
        ) from exc


@click.command()
@click.argument("script", metavar="FILE|-", type=InputFile())
@url_option
def ddl(script: Any, url: str) -> None:
    """Run a T-SQL script of Service Broker DDL (FILE, or '-' for stdin): CREATE / ALTER / DROP
    MESSAGE TYPE, CONTRACT, QUEUE, SERVICE, EVENT NOTIFICATION, BROKER PRIORITY, ALTER DATABASE
    … SET ENABLE_BROKER | NEW_BROKER | ERROR_BROKER_CONVERSATIONS | HONOR_BROKER_PRIORITY; USE
    and GO lines do nothing (docs/ddl.md).
    Prints how many statements ran."""
    text = _script_text(script.read(), getattr(script, "name", "-"))
    with opened(url) as broker:
        count = broker.execute_ddl(text)
    click.echo(f"{count} statement{'' if count == 1 else 's'} ran")


def _table(title: str, rows: list[Any], columns: list[str]) -> Table:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*(str(getattr(row, c)) for c in columns))
    return table


@click.command()
@url_option
def status(url: str) -> None:
    """Queues, conversation endpoints, queue monitors, activated tasks, transmission queue."""
    with opened(url) as broker:
        v = broker.views
        console.print(
            _table(
                "service_queues",
                v.service_queues(),
                [
                    "name",
                    "is_receive_enabled",
                    "is_retention_enabled",
                    "is_activation_enabled",
                    "max_readers",
                    "activation_procedure",
                    "ready_messages",
                    "retained_messages",
                ],
            )
        )
        console.print(
            _table(
                "conversation_endpoints",
                v.conversation_endpoints(),
                [
                    "conversation_handle",
                    "service_name",
                    "is_initiator",
                    "far_service",
                    "state",
                    "priority",
                    "conversation_group_id",
                ],
            )
        )
        console.print(
            _table(
                "dm_broker_queue_monitors",
                v.dm_broker_queue_monitors(),
                [
                    "queue_name",
                    "state",
                    "tasks_waiting",
                    "last_empty_rowset_time",
                    "last_activated_time",
                ],
            )
        )
        console.print(
            _table(
                "dm_broker_activated_tasks",
                v.dm_broker_activated_tasks(),
                ["spid", "queue_name", "procedure_name"],
            )
        )
        console.print(
            _table(
                "transmission_queue",
                v.transmission_queue(),
                [
                    "conversation_handle",
                    "to_service_name",
                    "message_type_name",
                    "message_sequence_number",
                    "transmission_status",
                ],
            )
        )
