"""``servicebroker console``: serve the web console with uvicorn (registered in
:mod:`servicebroker.cli`).

Read-only by default. ``--admin`` needs a token given at start-up (``--token-file`` or
``$SERVICEBROKER_CONSOLE_TOKEN``; the console refuses to start without one), and listening on
anything but loopback with ``--admin`` needs TLS (``--certfile`` and ``--keyfile``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
from typing import Any

import click

from ..command_options import url_option

__all__ = ["console_app", "console_command", "is_loopback", "read_token"]

TOKEN_ENV = "SERVICEBROKER_CONSOLE_TOKEN"


def is_loopback(host: str) -> bool:
    """True when ``host`` (an address or a name) can be reached from this machine only:
    ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(token_file: str | None) -> str | None:
    """The admin token: the first line of ``token_file`` (surrounding white space removed),
    else ``$SERVICEBROKER_CONSOLE_TOKEN``; None when neither gives one.

    Raises:
        click.ClickException: the file cannot be read, or holds no token.
    """
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.ClickException(f"cannot read the token file {token_file}: {exc}") from exc
        if not token:
            raise click.ClickException(f"the token file {token_file} holds no token")
        return token
    return os.environ.get(TOKEN_ENV, "").strip() or None


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def console_app(
    url: str,
    *,
    admin_token: str | None = None,
    https: bool = False,
    broker: Any = None,
    host: str = "127.0.0.1",
) -> Any:
    """The console's Starlette app as the command serves it: :func:`.app.create_app` with the
    Prometheus metrics (:func:`servicebroker.metrics.metrics_app`) at ``/metrics``, read from
    the console's own broker (its ``operations`` follow a replaced SQLite file).

    Args:
        url, admin_token, https, broker: as :func:`.app.create_app`.
        host: the address it listens on: on loopback only loopback ``Host`` names are served
            (DNS rebinding), elsewhere any.

    Raises:
        ImportError: the ``console`` extra is not installed.
    """
    from starlette.routing import Route

    from ..metrics.collector import metrics_app
    from .app import create_app

    return create_app(
        url,
        admin_token=admin_token,
        https=https,
        broker=broker,
        extra_routes=lambda source: [Route("/metrics", metrics_app(source))],
        allowed_hosts=[host, *LOOPBACK_NAMES] if is_loopback(host) else None,
    )


@click.command("console")
@url_option(also="An SQLite file is waited for, never created.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--admin",
    is_flag=True,
    help="Enable administrative actions (turn a queue ON, END CONVERSATION WITH CLEANUP, "
    f"retry the transmission queue); needs a token (--token-file or ${TOKEN_ENV}).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help=f"File whose first line is the admin token (else ${TOKEN_ENV}).",
)
@click.option("--certfile", type=click.Path(dir_okay=False), help="TLS certificate (PEM).")
@click.option("--keyfile", type=click.Path(dir_okay=False), help="TLS private key (PEM).")
def console_command(
    url: str,
    host: str,
    port: int,
    admin: bool,
    token_file: str | None,
    certfile: str | None,
    keyfile: str | None,
) -> None:
    """Serve the web console: queues, message rates, conversations and the transmission queue
    of the broker database at --url, refreshed live, and its Prometheus metrics at /metrics;
    read-only unless --admin."""
    if (certfile is None) != (keyfile is None):
        raise click.UsageError("--certfile and --keyfile go together")
    tls = certfile is not None
    token = read_token(token_file) if admin else None
    if admin and token is None:
        raise click.UsageError(
            f"--admin needs a token given at start-up: --token-file FILE or ${TOKEN_ENV}"
        )
    if token_file is not None and not admin:
        raise click.UsageError("--token-file is for --admin")
    if admin and not tls and not is_loopback(host):
        raise click.UsageError(
            f"--admin on {host} (not a loopback address) needs TLS: give --certfile and "
            f"--keyfile, or listen on 127.0.0.1"
        )
    try:
        import uvicorn

        app = console_app(url, admin_token=token, https=tls, host=host)
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise click.ClickException(
            f"the console needs the 'console' extra (pip install servicebroker[console]): {exc}"
        ) from exc
    logging.getLogger("servicebroker.console").setLevel(logging.INFO)
    scheme = "https" if tls else "http"
    mode = "admin" if admin else "read-only"
    click.echo(f"servicebroker console ({mode}) on {scheme}://{host}:{port}/ for {url}")
    uvicorn.run(
        app,
        host=host,
        port=port,
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
        log_level="warning",
    )
