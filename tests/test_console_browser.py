"""The web console in a real headless browser: Debian's ``chromium`` (``scripts/install-browser``)
driven by Playwright's Python package — never a browser Playwright downloads. A started broker
with traffic (a thread sending orders, an activated procedure receiving them, a queue poison
handling turned OFF, a message waiting in the transmission queue for it), the console served by
uvicorn in a thread on a free port with its own broker on the same database: each page shows
what the views say, the live chart moves while traffic flows, an admin action turns the queue
back ON, and without the token it is refused. Screenshots of each page go to
``test-artifacts/console/``. Skipped without chromium on a laptop; fails in CI.

The Microsoft pages followed: ALTER QUEUE … WITH STATUS = ON
(https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-queue-transact-sql) and poison
message handling
(https://learn.microsoft.com/en-us/sql/database-engine/service-broker/remove-poison-messages).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from servicebroker import Activation, ActivationContext, Broker
from servicebroker.testing.ports import free_port
from servicebroker.testing.waiting import eventually

from .conftest import in_ci
from .test_poison import fail_receives

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "test-artifacts" / "console"
TOKEN = "browser-test-token"

pytestmark = pytest.mark.timeout(120)


def need_browser() -> None:
    """Skip without Debian's chromium or Playwright on a laptop; fail in CI."""
    problem = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        problem = f"Playwright is not installed: {exc}"
    if problem is None and not os.access(CHROMIUM, os.X_OK):
        problem = f"no {CHROMIUM} (scripts/install-browser installs Debian's chromium)"
    if problem is not None:
        if in_ci():
            pytest.fail(f"the console's browser tests must run in CI: {problem}")
        pytest.skip(problem)


def process_orders(ctx: ActivationContext) -> None:
    """The activated procedure of the orders queue: RECEIVE until the queue is empty."""
    while True:
        with ctx.broker.transaction() as tx:
            if not tx.receive(ctx.queue_name, top=50, timeout=0.5):
                return


@dataclass
class Shop:
    broker: Broker
    url: str
    stop: threading.Event
    sent: list[int]


def build(broker: Broker) -> None:
    """A small shop: orders (activated), invoices (poison handling turned it OFF), shipping."""
    broker.create_message_type("//shop/Order", validation="JSON")
    broker.create_message_type("//shop/Invoice", validation="WELL_FORMED_XML")
    broker.create_message_type("//shop/Label", validation="NONE")
    broker.create_contract(
        "//shop/Contract",
        {"//shop/Order": "INITIATOR", "//shop/Invoice": "INITIATOR", "//shop/Label": "ANY"},
    )
    broker.register_procedure("ProcessOrders", process_orders)
    broker.create_queue("shop_queue")
    broker.create_queue("orders", activation=Activation("ProcessOrders", max_queue_readers=2))
    broker.create_queue("invoices")
    broker.create_queue("shipping")
    broker.create_service("//shop", queue="shop_queue")
    for name in ("orders", "invoices", "shipping"):
        broker.create_service(f"//{name}", queue=name, contracts=["//shop/Contract"])


def traffic(shop: Shop) -> None:
    """Send orders until told to stop: 10 a transaction, a new dialog every 500 orders."""
    n = 0
    handle = None
    while not shop.stop.is_set():
        with shop.broker.transaction() as tx:
            if handle is None or n % 500 == 0:
                handle = tx.begin_dialog("//shop", "//orders", contract="//shop/Contract")
            for _ in range(10):
                n += 1
                tx.send(handle, "//shop/Order", json.dumps({"order": n, "items": n % 7 + 1}))
        shop.sent[0] = n
        time.sleep(0.05)  # about 200 orders a second


@pytest.fixture
def shop() -> Iterator[Shop]:
    need_browser()
    folder = tempfile.TemporaryDirectory(prefix="console-")  # a short path in the screenshots
    url = str(Path(folder.name) / "shop.db")
    broker = Broker.open(url, poll_interval=0.01)
    build(broker)
    with broker.transaction() as tx:
        h = tx.begin_dialog("//shop", "//invoices", contract="//shop/Contract")
        tx.send(h, "//shop/Invoice", "<invoice><order>1</order><total>12.50</total></invoice>")
        s = tx.begin_dialog("//shop", "//shipping", contract="//shop/Contract")
        tx.send(s, "//shop/Label", b"\x89PNG\r\n\x1a\n label bytes")
        tx.send(s, "//shop/Label", "box 3 of 4")
    fail_receives(broker, "invoices", 5)  # rule POI-1: poison handling turns it OFF
    with broker.transaction() as tx:  # waits in the transmission queue (QUE-3)
        tx.send(h, "//shop/Invoice", "<invoice><order>2</order><total>99.00</total></invoice>")
    broker.start()
    made = Shop(broker, url, threading.Event(), [0])
    sender = threading.Thread(target=traffic, args=(made,), daemon=True)
    sender.start()
    yield made
    made.stop.set()
    sender.join(10)
    broker.close()
    folder.cleanup()


@pytest.fixture
def console(shop: Shop) -> Iterator[str]:
    """The console (admin mode) on a free port, served by uvicorn in a thread; its base URL."""
    import uvicorn

    from servicebroker.console import create_app

    port = free_port()
    app = create_app(shop.url, admin_token=TOKEN)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    eventually(lambda: server.started, "the console to listen")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def page(console: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        tab = browser.new_page(viewport={"width": 1440, "height": 900}, base_url=console)
        tab.on("dialog", lambda dialog: dialog.accept())  # hx-confirm
        yield tab
        browser.close()


def points(page: Any) -> str:
    return str(page.get_attribute("#rate-chart polyline[data-series=enqueued]", "points") or "")


def row_class(page: Any, queue: str) -> str:
    return str(page.get_attribute(f'tr[data-queue="{queue}"]', "class") or "")


def test_pages_show_the_broker_and_the_chart_moves(shop: Shop, page: Any) -> None:
    page.goto("/queues/shipping")
    assert "preview-hex" in page.content() and "box 3 of 4" in page.content()
    page.screenshot(path=str(SHOTS / "queue.png"), full_page=True)
    page.goto("/queues/invoices")
    assert page.locator("pre.preview-xml").first.inner_text().startswith("<invoice>\n  <order>1")

    page.goto("/transmission")
    held = shop.broker.views.transmission_queue()
    shown = page.locator("tr.transmission-row .tstatus").all_inner_texts()
    assert shown == [r.transmission_status for r in held] and len(held) == 1
    page.screenshot(path=str(SHOTS / "transmission.png"), full_page=True)

    def targets() -> set[str]:  # the traffic begins a dialog now and then: before <= page <= after
        ends = shop.broker.views.conversation_endpoints()
        return {str(e.conversation_handle) for e in ends if e.far_service == "//shop"}

    before = targets()
    page.goto("/conversations?far_service=//shop")
    handles = set(page.locator("tr.endpoint").evaluate_all("rs => rs.map(r => r.dataset.handle)"))
    assert before <= handles <= targets() and len(before) >= 3
    page.screenshot(path=str(SHOTS / "conversations.png"), full_page=True)
    ends = shop.broker.views.conversation_endpoints()
    invoice = next(e for e in ends if e.service_name == "//invoices")
    page.goto(f"/conversations/{invoice.conversation_handle}")
    assert "Far endpoint (in this database)" in page.content()
    assert held[0].transmission_status in page.inner_text("#transmission-rows")
    page.screenshot(path=str(SHOTS / "conversation.png"), full_page=True)

    page.goto("/")  # last: the chart has had the seconds above to gather samples
    for q in shop.broker.views.service_queues():
        assert page.locator(f'tr[data-queue="{q.name}"]').count() == 1
        assert ("queue-disabled" in row_class(page, q.name)) is (not q.is_receive_enabled)
    assert "queue-disabled" in row_class(page, "invoices")
    poison = page.locator('tr[data-queue="invoices"] .poison-events')  # published within 1 s
    eventually(lambda: poison.count() == 1 and poison.inner_text() == "1", "the poison event")
    assert page.inner_text("#transmission-count") == str(
        shop.broker.views.transmission_queue_count()
    )
    # the live chart: its points change while orders flow (htmx refreshes every 2 s)
    first = eventually(lambda: points(page) or None, "the chart's first points")
    eventually(lambda: points(page) not in ("", first), "the chart to move", timeout=30)
    eventually(lambda: page.inner_text("#rate-enqueued") != "0", "a rate above 0", timeout=30)
    assert page.locator("#depth-chart polyline[data-series=ready]").count() == 1
    page.screenshot(path=str(SHOTS / "overview.png"), full_page=True)


def test_admin_turns_the_queue_on_and_is_refused_without_token(shop: Shop, page: Any) -> None:
    page.goto("/")
    assert page.locator("text=Turn ON").count() == 0  # not signed in: no action shown
    # a POST without the token, with the CSRF token the browser holds: refused
    status = page.evaluate(
        """async () => {
            const csrf = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const r = await fetch('/admin/queues/invoices/enable',
                                  {method: 'POST', headers: {'x-csrftoken': csrf}});
            return r.status;
        }"""
    )
    assert status == 403 and not shop.broker.catalog.queue("invoices").status
    page.goto("/login?next=/")
    page.fill("#token", "wrong")
    page.click("#sign-in")
    eventually(lambda: "Refused (403)" in page.inner_text("#notice"), "the refusal shown")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    page.wait_for_url("**/")
    page.click('tr[data-queue="invoices"] button.action')
    eventually(lambda: shop.broker.catalog.queue("invoices").status, "invoices to be ON")
    eventually(lambda: "queue-disabled" not in row_class(page, "invoices"), "the row to clear")
    assert "the queue is ON" in page.inner_text("main")
    page.screenshot(path=str(SHOTS / "admin.png"), full_page=True)
