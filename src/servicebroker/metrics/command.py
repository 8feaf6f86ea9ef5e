"""``servicebroker metrics [--url URL] [--host 127.0.0.1] --port N``: serve a broker database's
Prometheus metrics alone (``http://HOST:N/metrics``), in a process of its own.

The command opens the database without starting a broker (it runs no timer, monitor or
activation and takes no part in leadership) and serves :func:`~.collector.metrics_app` with
uvicorn; every scrape reads one :func:`servicebroker.engine.operations.overview`. It never creates a
database: an SQLite file that does not exist is an error, so a scraper started before the broker
does not leave an empty database behind (nor hold a file the broker then recreates).
"""

from __future__ import annotations

import signal

import click

from .. import Broker
from ..command_options import existing_database, url_option
from ..errors import BrokerError

__all__ = ["metrics"]


@click.command()
@url_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", required=True, type=click.IntRange(min=1, max=65535), help="Port to listen on."
)
def metrics(url: str, host: str, port: int) -> None:
    """Serve the broker's Prometheus metrics at http://HOST:PORT/metrics (every metric:
    docs/metrics.md). Reads only; stop it with Ctrl-C or SIGTERM."""
    try:
        import uvicorn

        from .collector import metrics_app
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise click.ClickException(
            f"metrics need the 'console' extra (pip install servicebroker[console]): {exc}"
        ) from exc
    existing_database(url, "metrics")
    try:
        broker = Broker.open(url)
    except BrokerError as exc:
        raise click.ClickException(str(exc)) from exc
    with broker:
        server = uvicorn.Server(
            uvicorn.Config(
                metrics_app(broker),
                host=host,
                port=port,
                lifespan="off",
                access_log=False,
                log_level="warning",
            )
        )
        click.echo(f"servicebroker metrics of {broker.database} on http://{host}:{port}/metrics")
        # uvicorn stops gracefully on SIGINT / SIGTERM, then raises the signal again for the
        # handlers it found: quiet ones, so the command ends as `serve` does (exit 0)
        quiet = {
            sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            server.run()
        except SystemExit as exc:  # uvicorn exits when it cannot listen (it logged why)
            raise click.ClickException(f"could not listen on {host}:{port}") from exc
        finally:
            for sig, handler in quiet.items():
                signal.signal(sig, handler)
        if not server.started:
            raise click.ClickException(f"could not listen on {host}:{port}")
    click.echo("stopped")
