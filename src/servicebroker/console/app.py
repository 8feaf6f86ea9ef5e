"""The console's Starlette application: server-rendered pages (Jinja2) refreshed by htmx polling,
over a broker the console process opens and never starts — a reader, not a participant.

Pages: ``/`` the overview (every queue, the message-rate chart, the transmission queue, the
dialogs by state, the broker processes), ``/queues/{name}`` a queue's messages and groups,
``/conversations`` the endpoints filtered, ``/conversations/{handle}`` one conversation,
``/transmission`` the transmission queue and the transport's catalog. ``/fragments/…`` serve
the parts htmx refreshes every 2 seconds. In admin mode (an ``admin_token``) the routes of
:mod:`.admin` are added behind a session cookie and CSRF protection.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette_csrf.middleware import CSRFMiddleware

from ..broker import Broker
from ..engine.operations import overview
from ..errors import BrokerError, CatalogError
from . import pages
from .admin import AdminActions
from .rates import RateSampler, chart, depth_chart
from .source import BrokerSource, ConsoleBroker

__all__ = ["create_app"]

HERE = Path(__file__).parent


def _when(value: datetime | None) -> str:
    """A time as the pages show it: ``2026-11-25 03:07:12`` (UTC), "—" for None."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def _age(value: datetime | None, now: datetime | None = None) -> str:
    """How long before ``now`` (the brokers' time, :attr:`Overview.taken_at`; default the
    console's clock) ``value`` was, as ``3 s``, ``4 min``, ``2 h``; "" for None."""
    if value is None:
        return ""
    seconds = max(((now or datetime.now(UTC)) - value).total_seconds(), 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _procedure(name: str) -> str:
    """An activation procedure as a table cell shows it: a ``module:function`` path's function,
    a stored ``functools.partial`` repr's function name; the whole name goes in a tooltip."""
    found = re.search(r"<function ([\w.]+)", name)
    if found:
        return f"{found.group(1).rsplit('.', 1)[-1]}(…)"
    return name.rsplit(":", 1)[-1]


def _templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["when"] = _when
    templates.env.filters["age"] = _age
    templates.env.filters["short"] = lambda u: str(u)[:8]
    templates.env.filters["procedure"] = _procedure
    return templates


def create_app(
    url: str,
    *,
    admin_token: str | None = None,
    https: bool = False,
    sample_interval: float = 1.0,
    broker: ConsoleBroker | None = None,
    extra_routes: Callable[[BrokerSource], Sequence[BaseRoute]] | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The console for the broker database at ``url``.

    Args:
        url: the storage URL (``sqlite:///path.db``, a file path, ``postgresql://…``); the
            app opens its own :class:`~servicebroker.broker.Broker` on it at first use (an
            SQLite file only once it exists, again when it is replaced: :mod:`.source`) and
            closes it at shutdown, unless ``broker`` is given.
        admin_token: enables admin mode: the login, and the actions of :mod:`.admin`, each
            needing this token and a CSRF token; None (the default) is read-only: no admin
            route exists.
        https: the console is served over TLS: its cookies are marked Secure.
        sample_interval: real seconds between two samples of the message counters (> 0).
        broker: an open broker to read instead of opening ``url`` (tests; not closed here).
        extra_routes: more routes, made from the console's :class:`~.source.BrokerSource`
            (whose ``operations`` follow the current broker): e.g.
            ``lambda source: [Route("/metrics", metrics_app(source))]``.
        allowed_hosts: the ``Host`` headers served (Starlette's ``TrustedHostMiddleware``; a
            console on loopback serves only loopback names, so a web page whose name was
            rebound to 127.0.0.1 cannot read it); None serves any.

    Raises:
        ValueError: an empty ``admin_token`` or a ``sample_interval`` <= 0.
    """
    if admin_token is not None and not admin_token:
        raise ValueError("the admin token must not be empty")
    templates = _templates()
    source = BrokerSource(url, Broker.open, broker)
    sampler = RateSampler(lambda: pages.sample(source.get()), interval=sample_interval)
    admin: AdminActions | None = None

    def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        flashes = request.session.pop("flash", []) if "session" in request.scope else []
        context = {
            "admin_mode": admin is not None,
            "signed_in": admin is not None and admin.is_admin(request),
            "flashes": flashes,
            "sampler_error": sampler.error,
            "database": source.label,
            "path": request.url.path,
            **context,
        }
        return templates.TemplateResponse(request, name, context, status_code=status)

    def login_page(request: Request) -> Response:
        return render(request, "login.html", {})

    if admin_token is not None:
        admin = AdminActions(source.get, admin_token, login_page)

    def overview_context() -> dict[str, Any]:
        ov = overview(source.get())
        samples = sampler.samples()
        return {
            "ov": ov,
            "chart": chart(samples),
            "depth": depth_chart(samples),
            "rates": sampler.queue_rates(),
            "disabled": sum(1 for q in ov.queues if not q.is_receive_enabled),
            "poison_events": sum(q.poison_events for q in ov.queues),
        }

    async def page(
        request: Request, name: str, build: Callable[[], dict[str, Any]], status: int = 200
    ) -> Response:
        try:
            context = await run_in_threadpool(build)
        except BrokerError as exc:  # the database is away or not there yet: say so, retry
            if name.startswith("_"):
                return render(request, "_unavailable.html", {"detail": str(exc)})
            return render(request, "error.html", {"detail": str(exc), "code": 503}, 503)
        return render(request, name, context, status)

    async def home(request: Request) -> Response:
        return await page(request, "overview.html", overview_context)

    async def overview_fragment(request: Request) -> Response:
        return await page(request, "_overview.html", overview_context)

    def queue_context(request: Request) -> Callable[[], dict[str, Any]]:
        name = request.path_params["name"]
        try:
            after = int(request.query_params.get("after", "-1"))
        except ValueError as exc:
            raise HTTPException(400, "after must be an integer queuing order") from exc
        if not -1 <= after < 2**63:
            raise HTTPException(400, "after must be a queuing order, -1 or more")

        def build() -> dict[str, Any]:
            try:
                return {"page": pages.queue_page(source.get(), name, after)}
            except CatalogError as exc:
                raise HTTPException(404, str(exc)) from exc

        return build

    async def queue(request: Request) -> Response:
        return await page(request, "queue.html", queue_context(request))

    async def queue_fragment(request: Request) -> Response:
        return await page(request, "_queue_summary.html", queue_context(request))

    async def conversations(request: Request) -> Response:
        q = request.query_params
        where = pages.ConversationFilter(
            q.get("state", ""),
            q.get("service", ""),
            q.get("contract", ""),
            q.get("far_service", ""),
        )

        def build() -> dict[str, Any]:
            b = source.get()
            everyone = b.views.conversation_endpoints()
            return {
                "where": where,
                "rows": pages.endpoints(b, where),
                "states": sorted({e.state_desc for e in everyone}),
                "services": sorted({e.service_name for e in everyone}),
                "contracts": sorted({e.service_contract_name for e in everyone}),
                "far_services": sorted({e.far_service for e in everyone}),
            }

        return await page(request, "conversations.html", build)

    async def conversation(request: Request) -> Response:
        try:
            handle = uuid.UUID(request.path_params["handle"])
        except ValueError as exc:
            raise HTTPException(404, "not a conversation handle") from exc

        def build() -> dict[str, Any]:
            found = pages.conversation_page(source.get(), handle)
            if found is None:
                raise HTTPException(404, f"no conversation endpoint {handle}")
            now = source.get().operations.now()  # ages on the brokers' clock
            return {"conv": found, "scan": pages.CONVERSATION_SCAN, "now": now}

        return await page(request, "conversation.html", build)

    def transmission_context() -> dict[str, Any]:
        b = source.get()
        rows = b.views.transmission_queue()
        return {
            "now": b.operations.now(),  # ages on the brokers' clock
            "rows": rows[:500],
            "count": len(rows),
            "routes": b.views.routes(),
            "endpoints": b.views.service_broker_endpoints(),
            "connections": b.views.dm_broker_connections(),
        }

    async def transmission(request: Request) -> Response:
        return await page(request, "transmission.html", transmission_context)

    async def transmission_fragment(request: Request) -> Response:
        return await page(request, "_transmission.html", transmission_context)

    async def not_found(request: Request, exc: Exception) -> Response:
        detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        return render(request, "error.html", {"detail": detail, "code": code}, code)

    routes: list[BaseRoute] = [
        Route("/", home),
        Route("/fragments/overview", overview_fragment),
        Route("/queues/{name:path}", queue),  # a queue name may hold a "/"
        Route("/fragments/queues/{name:path}", queue_fragment),
        Route("/conversations", conversations),
        Route("/conversations/{handle}", conversation),
        Route("/transmission", transmission),
        Route("/fragments/transmission", transmission_fragment),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    if extra_routes is not None:
        routes.extend(extra_routes(source))
    middleware: list[Middleware] = []
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    if admin is not None:
        routes.extend(admin.routes())
        # new keys at each start: sessions end when the console stops
        middleware += [
            Middleware(
                CSRFMiddleware,
                secret=secrets.token_urlsafe(32),
                cookie_secure=https,
                cookie_samesite="strict",
            ),
            Middleware(
                SessionMiddleware,
                secret_key=secrets.token_urlsafe(32),
                session_cookie="servicebroker_console",
                https_only=https,
                same_site="strict",
                max_age=8 * 3600,
            ),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler.start()
        try:
            yield
        finally:
            sampler.stop()
            await run_in_threadpool(source.close)

    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: not_found},
    )
