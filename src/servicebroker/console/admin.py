"""The console's administrative actions (``servicebroker console --admin``): the token check, the
login that sets a signed session cookie, and the three actions — ALTER QUEUE … WITH STATUS = ON,
END CONVERSATION … WITH CLEANUP and a retry of the transmission queue. Every action is logged on
the ``servicebroker.console`` logger (action, object, client address, outcome) and told to the
user in a flash message.

Every request here must carry the token (the session set by the login form, or an
``Authorization: Bearer <token>`` header) and pass the CSRF check of ``starlette-csrf`` (the
``x-csrftoken`` header matching the ``csrftoken`` cookie; the console's pages send it with each
htmx request); the routes exist only in admin mode.
"""

from __future__ import annotations

import logging
import secrets
import urllib.parse
import uuid
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import BrokerError
from .source import ConsoleBroker

__all__ = ["AdminActions", "client_of", "flash"]

log = logging.getLogger("servicebroker.console")

SESSION_KEY = "servicebroker_admin"


def flash(request: Request, kind: str, text: str) -> None:
    """Keep a message (``kind`` "ok" or "error") for the next page the session shows."""
    if "session" in request.scope:
        # assigned, not appended in place: the session cookie is written when a key is set
        request.session["flash"] = [*request.session.get("flash", []), [kind, text]]


def client_of(request: Request) -> str:
    """The client's address as ``host:port`` ("unknown" when the server does not say)."""
    return f"{request.client.host}:{request.client.port}" if request.client else "unknown"


def _back(request: Request, default: str) -> Response:
    """Where the browser goes after an action: the ``next`` path the request names, else the
    page htmx says it was on (``HX-Current-URL``), else ``default`` — a local path only; htmx is
    told with ``HX-Redirect``."""
    current = urllib.parse.urlsplit(request.headers.get("hx-current-url", ""))
    on_page = current.path + (f"?{current.query}" if current.query else "")
    target = request.query_params.get("next") or on_page or default
    parts = urllib.parse.urlsplit(target)
    if (
        not target.startswith("/")
        or target.startswith("//")
        or "\\" in target  # browsers read "/\\host" as "//host"
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in target)
        or parts.scheme
        or parts.netloc
    ):
        target = default  # a local path only: no open redirect
    if request.headers.get("hx-request"):
        return Response(status_code=200, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


class AdminActions:
    """The admin routes over the console's broker with ``token`` (a non-empty string).

    Args:
        broker: returns the console's broker (opened at start-up, never started).
        token: the token every admin request must carry.
        render: renders the login page for a request.
    """

    def __init__(
        self,
        broker: Callable[[], ConsoleBroker],
        token: str,
        render: Callable[[Request], Response],
    ) -> None:
        if not token:
            raise ValueError("the admin token must not be empty")
        self._broker = broker
        self._token = token
        self._render = render

    def is_admin(self, request: Request) -> bool:
        """True when ``request`` carries the token: the session the login set, or a bearer
        header."""
        if "session" in request.scope and request.session.get(SESSION_KEY) is True:
            return True
        header = request.headers.get("authorization", "")
        given = header[7:] if header.lower().startswith("bearer ") else ""
        return bool(given) and secrets.compare_digest(given.encode(), self._token.encode())

    def routes(self) -> list[Route]:
        """The login, logout and action routes."""
        return [
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/admin/queues/{name:path}/enable", self.enable_queue, methods=["POST"]),
            Route("/admin/conversations/{handle}/cleanup", self.end_cleanup, methods=["POST"]),
            Route("/admin/transmission/retry", self.retry_transmission, methods=["POST"]),
        ]

    async def login_form(self, request: Request) -> Response:
        """GET /login: the sign-in page."""
        return self._render(request)

    async def login(self, request: Request) -> Response:
        """POST /login (form field ``token``; the CSRF header as every POST): a right token
        signs the browser in (a session cookie) and goes back to ``next`` (a local path only);
        a wrong one is refused with 403 and logged with the client's address."""
        form = await request.form()
        given = str(form.get("token", ""))
        if not secrets.compare_digest(given.encode(), self._token.encode()):
            log.warning("console: login refused (wrong token) from %s", client_of(request))
            return PlainTextResponse("Wrong token.", 403)
        request.session[SESSION_KEY] = True
        log.info("console: admin login from %s", client_of(request))
        flash(request, "ok", "Signed in: administrative actions are enabled.")
        return _back(request, "/")

    async def logout(self, request: Request) -> Response:
        """POST /logout: forget the session's sign-in."""
        request.session.pop(SESSION_KEY, None)
        flash(request, "ok", "Signed out.")
        return _back(request, "/")

    async def _act(
        self, request: Request, action: str, what: str, run: Callable[[], str], back: str
    ) -> Response:
        """Refuse (403, logged) a request without the admin token; else run the action in a
        worker thread (it waits on the database), log it and flash its outcome (a BrokerError
        is an error flash)."""
        client = client_of(request)
        if not self.is_admin(request):
            log.warning("console: %s %s refused (no token) from %s", action, what, client)
            return PlainTextResponse("Forbidden: this action needs the console's admin token.", 403)
        try:
            outcome = await run_in_threadpool(run)
        except BrokerError as exc:
            log.error("console: %s %s by %s failed: %s", action, what, client, exc)
            flash(request, "error", f"{action} {what} failed: {exc}")
        else:
            log.info("console: %s %s by %s: %s", action, what, client, outcome)
            flash(request, "ok", f"{action} {what}: {outcome}")
        return _back(request, back)

    async def enable_queue(self, request: Request) -> Response:
        """ALTER QUEUE name WITH STATUS = ON (and the messages held for it leave the
        transmission queue)."""
        name = request.path_params["name"]
        action = "ALTER QUEUE … WITH STATUS = ON"

        def run() -> str:
            self._broker().alter_queue(name, status=True)
            return "the queue is ON"

        return await self._act(request, action, name, run, f"/queues/{name}")

    async def end_cleanup(self, request: Request) -> Response:
        """END CONVERSATION handle WITH CLEANUP: the endpoint and its messages go here; the far
        side is not told (DLG-4)."""
        text = request.path_params["handle"]
        action = "END CONVERSATION … WITH CLEANUP"

        def run() -> str:
            try:
                handle = uuid.UUID(text)
            except ValueError as exc:
                raise BrokerError(f"{text!r} is not a conversation handle") from exc
            with self._broker().transaction() as tx:
                tx.end_conversation(handle, cleanup=True)
            return "the endpoint and its messages are gone"

        return await self._act(request, action, text, run, "/conversations")

    async def retry_transmission(self, request: Request) -> Response:
        """Offer every message waiting in the transmission queue for a queue of this database
        to its target now, in transmission order (what the leading broker's timer does each
        tick, QUE-3); messages for another instance are the transport's and are left as they
        are."""
        action = "retry the transmission queue"

        def run() -> str:
            moved = self._broker().transmission.drain()
            left = self._broker().views.transmission_queue_count()
            return f"{moved} message(s) delivered, {left} still waiting"

        return await self._act(request, action, "", run, "/transmission")
