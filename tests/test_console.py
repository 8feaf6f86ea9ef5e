"""The web console (``servicebroker console``, :mod:`servicebroker.console`) through Starlette's
TestClient: each page shows what the views and the operations overview say, the filters and
the paging work, bodies are previewed by their message type's validation, and the admin actions
need the token and the CSRF token (and exist only in admin mode).

The Microsoft pages the pages and actions follow: sys.conversation_endpoints
(https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-conversation-endpoints-transact-sql),
sys.transmission_queue
(https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-transmission-queue-transact-sql),
ALTER QUEUE … WITH STATUS = ON
(https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-queue-transact-sql) and END
CONVERSATION … WITH CLEANUP
(https://learn.microsoft.com/en-us/sql/t-sql/statements/end-conversation-transact-sql).
"""

from __future__ import annotations

import html
import logging
import re
import subprocess
import sys
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from starlette.exceptions import StarletteDeprecationWarning

from servicebroker import Broker
from servicebroker.cli import main
from servicebroker.console import create_app
from servicebroker.console.bodies import preview
from servicebroker.console.command import is_loopback
from servicebroker.console.pages import counters
from servicebroker.console.rates import Sample, chart, depth_chart
from servicebroker.engine.operations import overview
from servicebroker.testing.ports import free_port
from servicebroker.testing.waiting import eventually
from servicebroker.transport.certificates import make_self_signed

from .conftest import Pair, make_pair
from .test_poison import fail_receives

with warnings.catch_warnings():  # starlette asks for httpx2; httpx is what the project has
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

TOKEN = "s3cret-console-token"


@pytest.fixture
def pair_url(tmp_path: Path) -> str:
    """An SQLite broker database with the standard pair (closed again)."""
    url = str(tmp_path / "pair.db")
    with Broker.open(url) as b:
        make_pair(b)
    return url


@pytest.fixture
def client(broker: Broker) -> Iterator[TestClient]:
    """A read-only console over ``broker``."""
    with TestClient(create_app(broker.url, broker=broker, sample_interval=60)) as c:
        yield c


@pytest.fixture
def admin(broker: Broker) -> Iterator[TestClient]:
    """An admin-mode console over ``broker`` (not signed in)."""
    app = create_app(broker.url, broker=broker, admin_token=TOKEN, sample_interval=60)
    with TestClient(app) as c:
        c.get("/")  # the CSRF cookie
        yield c


def text_of(fragment: str) -> str:
    """The visible text of an HTML fragment, white space collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def queue_row(page: str, queue: str) -> str:
    """The overview's table row of ``queue``."""
    found = re.search(
        rf'<tr class="([^"]*)" data-queue="{re.escape(queue)}">(.*?)</tr>', page, re.S
    )
    assert found, f"no row for queue {queue} on the page"
    return found.group(0)


def send(broker: Broker, pair: Pair, bodies: list[bytes], message_type: str = "Req") -> uuid.UUID:
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract=pair.contract)
        for body in bodies:
            tx.send(h, message_type, body)
    return h


def csrf(c: TestClient) -> dict[str, str]:
    return {"x-csrftoken": c.cookies["csrftoken"]}


def sign_in(c: TestClient) -> None:
    r = c.post("/login", data={"token": TOKEN}, headers=csrf(c), follow_redirects=False)
    assert r.status_code == 303


# -- pages -----------------------------------------------------------------------------------
def test_overview_shows_every_queue_as_the_overview_says(
    broker: Broker, pair: Pair, client: TestClient
) -> None:
    send(broker, pair, [b"a", b"b", b"c"])
    page = client.get("/").text
    ov = overview(broker)
    assert [q.queue_name for q in ov.queues] == re.findall(r'data-queue="([^"]+)"', page)
    for q in ov.queues:
        row = queue_row(page, q.queue_name)
        ready = re.search(r'<td class="num ready">([\d,]+)</td>', row)
        assert ready and int(ready.group(1).replace(",", "")) == q.ready_messages
        assert ("queue-disabled" in row) is (not q.is_receive_enabled)
    assert queue_row(page, pair.tq).count(">3<") == 1  # three ready on the target queue
    assert 'id="rate-chart"' in page and 'hx-trigger="every 2s"' in page
    fragment = client.get("/fragments/overview").text
    assert "<html" not in fragment and f'data-queue="{pair.tq}"' in fragment


def test_a_queue_poison_handling_turned_off_is_highlighted(
    broker: Broker, pair: Pair, client: TestClient
) -> None:
    # rule POI-1: five rollbacks in a row turn the queue OFF; the overview shows it in red
    send(broker, pair, [b"poison"])
    fail_receives(broker, pair.tq, 5)
    broker.publish_statistics()  # what a started broker does every second
    page = client.get("/").text
    row = queue_row(page, pair.tq)
    assert "queue-disabled" in row and "status-off" in row
    events = next(q.poison_events for q in overview(broker).queues if q.queue_name == pair.tq)
    assert events == 1 and "poison-events" in row
    assert "queue-disabled" not in queue_row(page, pair.iq)
    assert "Turn ON" not in page  # read-only: no action


def test_queue_page_previews_bodies_by_validation(broker: Broker, client: TestClient) -> None:
    broker.create_message_type("Json", validation="JSON")
    broker.create_message_type("Xml", validation="WELL_FORMED_XML")
    broker.create_message_type("Raw", validation="NONE")
    broker.create_contract("K", {"Json": "ANY", "Xml": "ANY", "Raw": "ANY"})
    broker.create_queue("iq2")
    broker.create_queue("tq2")
    broker.create_service("//i", queue="iq2")
    broker.create_service("//t", queue="tq2", contracts=["K"])
    with broker.transaction() as tx:
        h = tx.begin_dialog("//i", "//t", contract="K")
        tx.send(h, "Json", b'{"flight": 1545, "carrier": "UA"}')
        tx.send(h, "Xml", b"<flight><carrier>UA</carrier></flight>")
        tx.send(h, "Raw", b"\x00\xff\xfe binary")
        tx.send(h, "Raw", b"plain words")
    page = client.get("/queues/tq2").text
    previews = dict(re.findall(r'<pre class="preview preview-(\w+)">(.*?)</pre>', page, re.S))
    assert html.unescape(previews["json"]) == '{\n  "flight": 1545,\n  "carrier": "UA"\n}'
    assert html.unescape(previews["xml"]) == "<flight>\n  <carrier>UA</carrier>\n</flight>"
    assert previews["hex"].startswith("00000000  00 ff fe 20 62 69 6e")
    assert previews["text"] == "plain words"
    assert client.get("/queues/nope").status_code == 404


def test_queue_page_pages_with_peek_after(broker: Broker, pair: Pair, client: TestClient) -> None:
    send(broker, pair, [f"m{i}".encode() for i in range(60)])
    first = client.get(f"/queues/{pair.tq}").text
    orders = [int(x) for x in re.findall(r'<tr class="message">\s*<td class="num">(\d+)', first)]
    assert len(orders) == 50
    after = re.search(r'id="next-page" href="[^"]*\?after=(\d+)"', first)
    assert after and int(after.group(1)) == orders[-1]
    second = client.get(f"/queues/{pair.tq}?after={after.group(1)}").text
    rest = [int(x) for x in re.findall(r'<tr class="message">\s*<td class="num">(\d+)', second)]
    expected = [m.queuing_order for m in broker.peek_after(pair.tq, orders[-1], top=100)]
    assert rest == expected and len(rest) == 10 and 'id="next-page"' not in second
    groups = {
        g.conversation_group_id
        for g in broker.views.conversation_groups()
        if g.queue_name == pair.tq
    }
    assert all(str(g) in first for g in groups)


def test_queue_page_shows_which_groups_are_locked(
    broker: Broker, pair: Pair, client: TestClient
) -> None:
    # rule RCV-2: a RECEIVE holds its conversation group until the transaction ends
    send(broker, pair, [b"a", b"b"])
    send(broker, pair, [b"c"])
    tx = broker.transaction()
    try:
        got = tx.receive(pair.tq, top=1)
        held = str(got[0].conversation_group_id)
        page = client.get(f"/queues/{pair.tq}").text
        rows = {
            g: cls for cls, g in re.findall(r'<tr class="group ([^"]*)" data-group="([^"]+)"', page)
        }
        assert len(rows) == 2 and "group-locked" in rows[held]
        assert [g for g, cls in rows.items() if "group-locked" in cls] == [held]
        q = overview(broker).queue(pair.tq)
        assert q is not None and q.locked_groups == 1 and q.received_messages == 2
    finally:
        tx.rollback()
    page = client.get(f"/queues/{pair.tq}").text
    assert "group-locked" not in page


def test_conversations_are_filtered(broker: Broker, pair: Pair, client: TestClient) -> None:
    h1 = send(broker, pair, [b"x"])
    h2 = send(broker, pair, [b"y"])
    with broker.transaction() as tx:
        tx.end_conversation(h2)
    rows = broker.views.conversation_endpoints()

    def handles(query: str) -> set[str]:
        return set(re.findall(r'data-handle="([^"]+)"', client.get(f"/conversations{query}").text))

    assert handles("") == {str(e.conversation_handle) for e in rows}
    for state in {e.state_desc for e in rows}:
        want = {str(e.conversation_handle) for e in rows if e.state_desc == state}
        assert handles(f"?state={state}") == want
    assert handles(f"?service={pair.initiator}") == {str(h1), str(h2)}
    assert handles(f"?far_service={pair.initiator}") == {
        str(e.conversation_handle) for e in rows if not e.is_initiator
    }
    assert handles(f"?contract={pair.contract}&state=DISCONNECTED_OUTBOUND") == {str(h2)}
    assert handles("?contract=nothing") == set()


def test_a_conversation_shows_both_ends_messages_and_transmission(
    broker: Broker, pair: Pair, client: TestClient
) -> None:
    h = send(broker, pair, [b"first"])
    broker.alter_queue(pair.tq, status=False)
    with broker.transaction() as tx:
        tx.send(h, "Req", b"held")  # the target queue is OFF: it waits (QUE-3)
        tx.begin_conversation_timer(h, 3600)
    page = client.get(f"/conversations/{h}").text
    rows = broker.views.conversation_endpoints()
    me = next(e for e in rows if e.conversation_handle == h)
    far = next(e for e in rows if e.conversation_id == me.conversation_id and not e.is_initiator)
    assert str(far.conversation_handle) in page and "Far endpoint (in this database)" in page
    assert me.dialog_timer is not None and me.dialog_timer.strftime("%Y-%m-%d %H:%M:%S") in page
    assert me.lifetime is not None and me.lifetime.strftime("%Y-%m-%d %H:%M:%S") in page
    assert "first" in page  # on the target queue
    waiting = [r for r in broker.views.transmission_queue() if r.conversation_handle == h]
    assert len(waiting) == 1 and waiting[0].transmission_status
    assert waiting[0].transmission_status in text_of(page)
    assert client.get(f"/conversations/{uuid.uuid4()}").status_code == 404


def test_transmission_page_shows_status_and_priority(
    broker: Broker, pair: Pair, client: TestClient
) -> None:
    broker.alter_queue(pair.tq, status=False)
    send(broker, pair, [b"one", b"two"])
    rows = broker.views.transmission_queue()
    page = client.get("/transmission").text
    shown = re.findall(r'<tr class="transmission-row[^"]*">(.*?)</tr>', page, re.S)
    assert len(shown) == len(rows) == 2
    for row, r in zip(shown, rows, strict=True):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        assert text_of(cells[-1]) == r.transmission_status
        assert text_of(cells[5]) == str(r.priority)
    assert 'id="routes"' in page and 'id="connections"' in page
    assert text_of(re.search(r'id="transmission-total">(.*?)<', page).group(1)) == "2"  # type: ignore[union-attr]


# -- admin mode ------------------------------------------------------------------------------
def test_read_only_mode_has_no_admin_routes(broker: Broker, pair: Pair, client: TestClient) -> None:
    broker.alter_queue(pair.tq, status=False)
    assert client.get("/login").status_code == 404
    r = client.post(f"/admin/queues/{pair.tq}/enable", headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code in (404, 405)
    assert not broker.catalog.queue(pair.tq).status


def test_admin_turns_a_disabled_queue_on_with_token_and_csrf(
    broker: Broker, pair: Pair, admin: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    send(broker, pair, [b"poison"])
    fail_receives(broker, pair.tq, 5)
    assert not broker.catalog.queue(pair.tq).status
    # no token: refused, the queue stays OFF
    r = admin.post(f"/admin/queues/{pair.tq}/enable", headers=csrf(admin))
    assert r.status_code == 403 and not broker.catalog.queue(pair.tq).status
    # a token but no CSRF token: refused
    r = admin.post(f"/admin/queues/{pair.tq}/enable", headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 403 and not broker.catalog.queue(pair.tq).status
    # a wrong token at the login: refused
    r = admin.post("/login", data={"token": "guess"}, headers=csrf(admin))
    assert r.status_code == 403
    sign_in(admin)
    page = admin.get("/").text
    assert "Turn ON" in queue_row(page, pair.tq)
    with caplog.at_level(logging.INFO, logger="servicebroker.console"):
        r = admin.post(f"/admin/queues/{pair.tq}/enable?next=/", headers=csrf(admin))
    assert r.status_code == 200  # the page it went back to
    assert broker.catalog.queue(pair.tq).status
    assert "flash-ok" in r.text and "the queue is ON" in r.text
    logged = [rec.getMessage() for rec in caplog.records if rec.name == "servicebroker.console"]
    assert any("STATUS = ON" in m and pair.tq in m and "testclient" in m for m in logged)
    assert "queue-disabled" not in queue_row(admin.get("/").text, pair.tq)


def test_admin_ends_a_conversation_with_cleanup(
    broker: Broker, pair: Pair, admin: TestClient
) -> None:
    h = send(broker, pair, [b"stuck"])
    sign_in(admin)
    r = admin.post(f"/admin/conversations/{h}/cleanup", headers=csrf(admin))
    assert r.status_code == 200 and "flash-ok" in r.text
    assert h not in {e.conversation_handle for e in broker.views.conversation_endpoints()}
    r = admin.post(f"/admin/conversations/{uuid.uuid4()}/cleanup", headers=csrf(admin))
    assert "flash-error" in r.text  # an unknown handle: told, nothing else


def test_admin_retry_delivers_what_can_leave_the_transmission_queue(
    broker: Broker, pair: Pair, admin: TestClient
) -> None:
    broker.alter_queue(pair.tq, status=False)
    send(broker, pair, [b"held"])
    assert broker.views.transmission_queue_count() == 1
    sign_in(admin)
    r = admin.post("/admin/transmission/retry", headers=csrf(admin))
    assert "0 message(s) delivered, 1 still waiting" in r.text  # its queue is still OFF
    broker.alter_queue(pair.tq, status=True)
    assert broker.views.transmission_queue_count() == 0  # turning ON delivered it (QUE-3)


# -- the command -----------------------------------------------------------------------------
def test_command_refuses_admin_without_token_or_tls_off_loopback(tmp_path: Path) -> None:
    runner = CliRunner()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    db = str(tmp_path / "b.db")
    r = runner.invoke(
        main, ["console", "--url", db, "--admin"], env={"SERVICEBROKER_CONSOLE_TOKEN": ""}
    )
    assert r.exit_code == 2 and "needs a token" in r.output
    r = runner.invoke(
        main, ["console", "--url", db, "--admin", "--token-file", str(token), "--host", "0.0.0.0"]
    )
    assert r.exit_code == 2 and "needs TLS" in r.output and "--certfile" in r.output
    r = runner.invoke(main, ["console", "--url", db, "--certfile", str(token)])
    assert r.exit_code == 2 and "go together" in r.output
    empty = tmp_path / "empty"
    empty.write_text("\n")
    r = runner.invoke(main, ["console", "--url", db, "--admin", "--token-file", str(empty)])
    assert r.exit_code == 1 and "holds no token" in r.output
    assert not (tmp_path / "b.db").exists()
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_an_sqlite_file_is_waited_for_not_created(tmp_path: Path) -> None:
    db = tmp_path / "later.db"
    with TestClient(create_app(str(db), sample_interval=60)) as c:
        r = c.get("/")
        assert r.status_code == 503 and "no broker database" in r.text
        assert "retrying" in c.get("/fragments/overview").text
        assert not db.exists()
        with Broker.open(str(db)) as b:
            b.create_queue("late")
        assert 'data-queue="late"' in c.get("/").text
        # a new file in its place (what each `make demo` does): the console reads the new one
        for leftover in tmp_path.iterdir():
            leftover.unlink()
        with Broker.open(str(db)) as b:
            b.create_queue("again")
        page = c.get("/").text
        assert 'data-queue="again"' in page and 'data-queue="late"' not in page


def test_admin_over_tls_on_any_address(tmp_path: Path, pair_url: str) -> None:
    # --admin off loopback with --certfile/--keyfile: served over TLS, cookies Secure
    cert, key = make_self_signed("console", tmp_path)
    port = free_port()
    token = tmp_path / "token"
    token.write_text(TOKEN)
    exe = Path(sys.executable).with_name("servicebroker")
    args = ["console", "--url", pair_url, "--admin", "--token-file", str(token)]
    args += [
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--certfile",
        str(cert),
        "--keyfile",
        str(key),
    ]
    proc = subprocess.Popen([str(exe), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=False) as web:

            def up() -> httpx.Response | None:
                try:
                    return web.get("/")
                except httpx.TransportError:
                    return None

            r = eventually(up, "the console over TLS")
            assert r.status_code == 200 and "Secure" in r.headers["set-cookie"]
            r = web.post(
                "/login", data={"token": TOKEN}, headers={"x-csrftoken": web.cookies["csrftoken"]}
            )
            session = [c for c in r.headers.get_list("set-cookie") if "servicebroker_console" in c]
            assert r.status_code == 303  # signed in, sent back to the page
            assert session and "secure" in session[0].lower() and "httponly" in session[0].lower()
            r = web.post("/login", data={"token": TOKEN})  # no CSRF header
            assert r.status_code == 403
    finally:
        proc.terminate()
        proc.wait(10)


def test_extra_routes_read_the_consoles_broker(broker: Broker, pair: Pair) -> None:
    # how /metrics is mounted: a route made from the console's source of brokers
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    def routes(source: Any) -> list[Route]:
        async def queues(request: Any) -> PlainTextResponse:
            names = [q.queue_name for q in source.operations.overview().queues]
            return PlainTextResponse(" ".join(names))

        return [Route("/extra", queues)]

    app = create_app(broker.url, broker=broker, extra_routes=routes, sample_interval=60)
    with TestClient(app) as c:
        assert c.get("/extra").text.split() == [q.queue_name for q in overview(broker).queues]


# -- the parts -------------------------------------------------------------------------------
def test_body_previews() -> None:
    assert preview(b'[1, {"a": null}]', "N").kind == "json"  # NONE that parses as JSON
    assert preview(b"{not json", "J").kind == "text"
    assert preview(b"<a><b/></a>", "X").text == "<a>\n  <b/>\n</a>"
    assert preview(b"<a>unclosed", "N").kind == "text"
    assert preview(b"", "E").kind == "empty"
    big = preview(bytes(range(256)) * 100, "N")
    assert big.kind == "hex" and big.truncated and big.size == 25600


def test_chart_follows_the_rates() -> None:
    # rates over at least WINDOW (5) seconds: a publication seen by one sample and not the
    # next (100 messages a second, counted in pairs) does not make the line jump between 0
    # and twice the rate
    counts = [100 * (t - t % 2) for t in range(20)]
    samples = [Sample(float(t), {"enqueued": n, "received": 0}) for t, n in enumerate(counts)]
    c = chart(samples, width=100, height=100)
    steady = c.rates["enqueued"][5:]
    assert all(80 <= r <= 120 for r in steady), steady
    assert c.latest["enqueued"] == c.rates["enqueued"][-1] and c.latest["received"] == 0
    assert dict(c.lines)["received"].endswith("96.0,96.0")  # 0/s at the bottom, right edge
    assert chart(samples[:1]).lines == [("enqueued", ""), ("received", "")]


def test_depth_chart_reads_the_queues(broker: Broker, pair: Pair) -> None:
    send(broker, pair, [b"a", b"b", b"c"])
    tx = broker.transaction()
    try:
        assert tx.receive(pair.tq, top=1)  # the group is held: its 3 messages are "held"
        before = counters(overview(broker))
    finally:
        tx.rollback()
    after = counters(overview(broker))
    assert (before.totals["ready"], before.totals["held"]) == (0, 3)
    assert (after.totals["ready"], after.totals["held"]) == (3, 0)
    d = depth_chart([Sample(0.0, before.totals), Sample(1.0, after.totals)], width=100, height=100)
    assert d.rates == {"ready": [0.0, 3.0], "held": [3.0, 0.0]} and d.latest["ready"] == 3


def test_the_command_serves_prometheus_metrics_beside_the_pages(broker: Broker, pair: Pair) -> None:
    # GET /metrics on the console's own server reads the same overview as its pages
    from servicebroker.console.command import console_app

    send(broker, pair, [b"a", b"b"])
    app = console_app(broker.url, broker=broker)
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        page = c.get("/metrics")
        assert page.status_code == 200
        assert 'servicebroker_queue_messages{queue="tq",state="ready"} 2.0' in page.text
        assert c.get("/").status_code == 200


def test_a_loopback_console_serves_loopback_names_only(broker: Broker) -> None:
    # DNS rebinding: a web page whose name now points at 127.0.0.1 sends its own Host header
    from servicebroker.console.command import console_app

    with TestClient(console_app(broker.url, broker=broker, host="127.0.0.1")) as c:
        assert c.get("/", headers={"host": "localhost:8000"}).status_code == 200
        assert c.get("/metrics", headers={"host": "attacker.example"}).status_code == 400
        assert c.get("/", headers={"host": "attacker.example"}).status_code == 400


def test_a_queue_name_with_a_slash_has_its_page_and_admin_action(
    broker: Broker, admin: TestClient
) -> None:
    broker.create_queue("orders/eu", status=False)
    page = admin.get("/queues/orders%2Feu")
    assert page.status_code == 200 and "orders/eu" in page.text
    sign_in(admin)
    r = admin.post("/admin/queues/orders%2Feu/enable", headers=csrf(admin), follow_redirects=False)
    assert r.status_code == 303
    on = [q.is_receive_enabled for q in overview(broker).queues if q.queue_name == "orders/eu"]
    assert on == [True]


def test_after_sign_in_the_console_never_redirects_off_site(admin: TestClient) -> None:
    for target in ("/\\evil.example", "//evil.example", "https://evil.example/", "/%0d/x"):
        r = admin.post(
            f"/login?next={target}",
            data={"token": TOKEN},
            headers=csrf(admin),
            follow_redirects=False,
        )
        assert r.status_code == 303
        assert r.headers["location"] == "/", (target, r.headers["location"])


def test_an_xml_body_with_entities_is_shown_as_text() -> None:
    bomb = '<!DOCTYPE a [<!ENTITY x "xxxxxxxxxx"><!ENTITY y "&x;&x;&x;">]><a>&y;</a>'
    shown = preview(bomb.encode(), "X")
    assert shown.kind == "text" and shown.text == bomb
