"""The transport (issue 12) beside what it carries and what it rides on, side by side in one run.

- servicebroker between two instances over mutual TLS on loopback (two SQLite files, each
  broker in its own process, both started) against the same load within one instance (the
  target service local, sender and receiver each their own process on one SQLite file): the
  sender SENDs ``--messages`` on ``--dialogs`` dialogs in transactions of ``--batch`` messages
  (one ``send_many`` each), the receiver RECEIVEs TOP (batch) and commits, for 100-byte, 64 KB
  and 10 MB bodies. Figures: messages per second (first send to the last receive's commit),
  the ratio between instances / within, p50 and p99 end-to-end latency (the sender's wall time
  is in the first 8 bytes of each body, compared with the wall clock after the receive's
  commit; both processes on one host), and bytes on the wire per message (the sender's
  ``dm_broker_connections()`` total_bytes_sent + total_bytes_received over the messages).
  Beside them the same load through a forwarder (FWD-1): initiator → forwarder → target, three
  SQLite files and three processes, the forwarder's endpoint with MESSAGE_FORWARDING; and each
  of the two with full dialog security (SEC-2: a remote service binding and a user owning each
  side's certificate, every body sealed end to end) against dialogs begun WITH ENCRYPTION = OFF.
- RabbitMQ at ``--rabbitmq`` (guest/guest), 100-byte load: a durable queue, persistent
  messages, publisher confirms (pika's BlockingChannel waits for each confirm), manual acks
  (one ``multiple`` ack per batch), publisher and consumer each their own process. Skipped,
  with the reason printed, if ``pika`` is missing or the server unreachable.
- the raw TLS socket's bandwidth for the largest body: a Python ssl socket pair over loopback
  with the same kind of self-signed certificates (EC P-256, mutual, TLS >= 1.2), the reader a
  thread, as messages per second of that size; and the transport's own layers alone on such a
  pair (Outbound, framing, Inbound reassembly and acks, no storage): what the protocol costs
  beside what the two databases cost.

Targets are printed beside the figures (not asserted): between instances >= 50 % of within
one instance at 100 bytes; the broker's 10 MB throughput within 2x of raw TLS bandwidth.

    python benchmarks/transport.py [--messages 20000,2000,20] [--sizes 100,65536,10485760]
        [--batch 100,10,1] [--dialogs 4] [--rabbitmq 127.0.0.1:5672] [--no-rabbitmq]
        [--encryption REQUIRED | SUPPORTED | DISABLED]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from servicebroker import Broker, TransportSettings
from servicebroker.testing.ports import free_port
from servicebroker.transport.adjacent import (
    AckReceived,
    AdjacentConnection,
    ConnectionState,
    FragmentReceived,
    PeerHello,
)
from servicebroker.transport.certificates import make_self_signed
from servicebroker.transport.inbound import Completed, Inbound
from servicebroker.transport.outbound import Outbound
from servicebroker.transport.wire import Ack, MessageHeader

ctx = mp.get_context("spawn")
STAMP = struct.Struct("<d")


def body_of(size: int) -> bytes:
    """A body of ``size`` bytes (at least 8): the sender's wall time goes in its first 8."""
    return b"\0" * 8 + b"x" * max(0, size - 8)


def stamped(body: bytes) -> bytes:
    """``body`` with the wall time now in its first 8 bytes."""
    return STAMP.pack(time.time()) + body[8:]


@dataclass
class Result:
    """One run: messages per second, latencies in seconds, bytes on the wire per message."""

    rate: float
    p50: float
    p99: float
    wire: float | None


# -- servicebroker --------------------------------------------------------------------------------


def catalog(broker: Broker, *, initiator: bool, target: bool) -> None:
    """Message type M, contract C; the initiator service //i on iq, the target //t on tq."""
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "INITIATOR"})
    if initiator:
        broker.create_queue("iq")
        broker.create_service("//i", queue="iq")
    if target:
        broker.create_queue("tq")
        broker.create_service("//t", queue="tq", contracts=["C"])
        broker.grant("SEND", on="SERVICE:://t", to="public")  # SEC-4: unsecured dialogs


def secure_dialogs(initiator: Broker, target: Broker, certs: tuple[Path, Path]) -> None:
    """Full dialog security (SEC-2, SEC-3) from //i to //t: on the initiator a user owns the
    target's certificate (``certs``: initiator's, target's) and a binding names it; on the
    target a user owns the initiator's certificate and may SEND to //t. The sender begins its
    dialogs WITH ENCRYPTION = OFF: the binding secures them all the same."""
    initiator.create_certificate("t_dialog", certificate_file=str(certs[1]))
    initiator.create_user("t_user", certificate="t_dialog")
    initiator.create_remote_service_binding("to_t", to_service="//t", user="t_user")
    target.create_certificate("i_dialog", certificate_file=str(certs[0]))
    target.create_user("i_user", certificate="i_dialog")
    target.grant("SEND", on="SERVICE:://t", to="i_user")


def setup_pair(
    folder: Path, encryption: str = "REQUIRED", *, secured: bool = False
) -> tuple[str, str]:
    """Two SQLite files, ``a`` (//i) and ``b`` (//t), each with its certificate, endpoint
    (ENCRYPTION ``encryption``), the other's certificate granted CONNECT, and a route to the
    other; with ``secured`` full dialog security (:func:`secure_dialogs`); returns their
    paths."""
    folder = folder / ("secured" if secured else "plain")
    paths = (str(folder / "a.db"), str(folder / "b.db"))
    certs = [make_self_signed(n, folder / n) for n in "ab"]
    ports = (free_port(), free_port())
    for i, path in enumerate(paths):
        with Broker.open(path) as b:
            catalog(b, initiator=i == 0, target=i == 1)
            b.create_certificate(
                "me", certificate_file=str(certs[i][0]), private_key_file=str(certs[i][1])
            )
            b.create_certificate("peer", certificate_file=str(certs[1 - i][0]))
            b.create_endpoint(
                "sb",
                listener_port=ports[i],
                authentication_certificate="me",
                encryption=encryption,
            )
            b.grant_connect("sb", certificate="peer")
            service = "//t" if i == 0 else "//i"
            b.create_route("peer", service_name=service, address=f"TCP://127.0.0.1:{ports[1 - i]}")
    if secured:
        with Broker.open(paths[0]) as a, Broker.open(paths[1]) as b:
            secure_dialogs(a, b, (certs[0][0], certs[1][0]))
    return paths


def setup_forwarded(
    folder: Path, encryption: str = "REQUIRED", *, secured: bool = False
) -> tuple[str, str, str]:
    """Three SQLite files: ``a`` (//i) → ``f`` (a forwarder: MESSAGE_FORWARDING, routes to
    both services) → ``b`` (//t); each trusts its neighbours; with ``secured`` full dialog
    security between ``a`` and ``b`` (the forwarder sees ciphertext); returns their paths."""
    folder = folder / ("secured" if secured else "plain")
    names = ("fa", "ff", "fb")
    paths = tuple(str(folder / f"{n}.db") for n in names)
    certs = {n: make_self_signed(n, folder / n) for n in names}
    ports = {n: free_port() for n in names}
    peers = {"fa": ["ff"], "ff": ["fa", "fb"], "fb": ["ff"]}
    routes = {"fa": [("//t", "ff")], "ff": [("//t", "fb"), ("//i", "fa")], "fb": [("//i", "ff")]}
    for n, path in zip(names, paths, strict=True):
        with Broker.open(path) as b:
            catalog(b, initiator=n == "fa", target=n == "fb")
            b.create_certificate(
                "me", certificate_file=str(certs[n][0]), private_key_file=str(certs[n][1])
            )
            b.create_endpoint(
                "sb",
                listener_port=ports[n],
                authentication_certificate="me",
                encryption=encryption,
                message_forwarding=n == "ff",
                message_forward_size=256,
            )
            for peer in peers[n]:
                b.create_certificate(peer, certificate_file=str(certs[peer][0]))
                b.grant_connect("sb", certificate=peer)
            for service, to in routes[n]:
                b.create_route(
                    service[2:], service_name=service, address=f"TCP://127.0.0.1:{ports[to]}"
                )
    if secured:
        with Broker.open(paths[0]) as a, Broker.open(paths[2]) as b:
            secure_dialogs(a, b, (certs["fa"][0], certs["fb"][0]))
    return paths  # type: ignore[return-value]


def _forwarder(path: str, done: Any, out: Any) -> None:
    broker = Broker.open(path)
    broker.start()
    out.put(("ready", None))
    done.wait()
    time.sleep(1.0)  # the last acknowledgements pass back (the sender waits for them)
    broker.close()


def setup_local(folder: Path) -> str:
    """One SQLite file with both services."""
    path = str(folder / "local.db")
    with Broker.open(path) as b:
        catalog(b, initiator=True, target=True)
    return path


def _sender(
    path: str,
    start: bool,
    total: int,
    batch: int,
    dialogs: int,
    size: int,
    go: Any,
    done: Any,
    out: Any,
) -> None:
    broker = Broker.open(path)
    if start:
        broker.start()
    with broker.transaction() as tx:
        handles = [
            tx.begin_dialog("//i", "//t", contract="C", encryption=False) for _ in range(dialogs)
        ]
    body = body_of(size)
    seen: dict[Any, int] = {}
    stop = threading.Event()

    def watch() -> None:
        # the counters of each connection, last seen (a connection may close before the end)
        while not stop.wait(0.05):
            for r in broker.views.dm_broker_connections():
                seen[r.connection_id] = r.total_bytes_sent + r.total_bytes_received

    watcher = threading.Thread(target=watch) if start else None
    out.put(("ready", None))  # opened (and listening): the parent may start the clock
    go.wait()
    if watcher is not None:
        watcher.start()
    sent = 0
    while sent < total:
        n = min(batch, total - sent)
        with broker.transaction() as tx:
            tx.send_many((handles[(sent + i) % dialogs], "M", stamped(body)) for i in range(n))
        sent += n
    done.wait()  # the receiver has everything
    deadline = time.monotonic() + 30
    while start and broker.views.transmission_queue() and time.monotonic() < deadline:
        time.sleep(0.05)  # the acknowledgements are on their way
    stop.set()
    if watcher is not None:
        watcher.join()
    broker.close()
    wire = sum(seen.values()) if start else None
    out.put(("wire", wire))


def _receiver(path: str, start: bool, total: int, batch: int, go: Any, done: Any, out: Any) -> None:
    broker = Broker.open(path)
    if start:
        broker.start()
    latencies: list[float] = []
    out.put(("ready", None))
    go.wait()
    while len(latencies) < total:
        with broker.transaction() as tx:
            got = tx.receive("tq", top=batch, timeout=1)
        now = time.time()
        latencies.extend(now - STAMP.unpack_from(m.message_body)[0] for m in got)
    out.put(("end", time.time()))
    out.put(("latencies", latencies))
    done.set()
    broker.close()


def _await_ready(out: Any, n: int) -> None:
    """Wait until ``n`` processes said ("ready", None) on ``out``: each has opened what it
    needs (and its broker listens), so the clock starts on the load alone."""
    for _ in range(n):
        key, _ = out.get(timeout=120)
        assert key == "ready", f"a process reported {key!r} before it was ready"


def broker_run(
    sender_path: str,
    receiver_path: str,
    remote: bool,
    total: int,
    batch: int,
    dialogs: int,
    size: int,
    forwarder_path: str | None = None,
) -> Result:
    """One servicebroker run: a sender and a receiver process; between instances when
    ``remote`` (both brokers started), else within one; through a forwarder process too
    with ``forwarder_path``."""
    go, done, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_sender,
            args=(sender_path, remote, total, batch, dialogs, size, go, done, out),
        ),
        ctx.Process(target=_receiver, args=(receiver_path, remote, total, batch, go, done, out)),
    ]
    if forwarder_path is not None:
        procs.append(ctx.Process(target=_forwarder, args=(forwarder_path, done, out)))
    for p in procs:
        p.start()
    _await_ready(out, len(procs))
    start = time.time()
    go.set()
    got: dict[str, Any] = {}
    while len(got) < 3:
        key, value = out.get(timeout=600)
        got[key] = value
    for p in procs:
        p.join()
    lat = sorted(got["latencies"])
    wire = None if got["wire"] is None else got["wire"] / total
    return Result(
        total / (got["end"] - start),
        statistics.median(lat),
        lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        wire,
    )


# -- RabbitMQ -------------------------------------------------------------------------------------


def _rabbit_params(address: str) -> Any:
    import pika

    host, _, port = address.partition(":")
    return pika.ConnectionParameters(
        host=host,
        port=int(port or 5672),
        credentials=pika.PlainCredentials("guest", "guest"),
        connection_attempts=1,
        socket_timeout=2,
    )


def rabbit_reason(address: str) -> str | None:
    """Why the RabbitMQ row cannot run, or None if it can."""
    try:
        import pika
    except ImportError:
        return "pika is not installed (pip install -e '.[dev]')"
    try:
        pika.BlockingConnection(_rabbit_params(address)).close()
    except Exception as e:
        return f"RabbitMQ at {address} unreachable: {type(e).__name__}: {e}"
    return None


def _rabbit_publisher(address: str, queue: str, total: int, size: int, go: Any, out: Any) -> None:
    import pika

    conn = pika.BlockingConnection(_rabbit_params(address))
    ch = conn.channel()
    ch.confirm_delivery()
    props = pika.BasicProperties(delivery_mode=2)
    body = body_of(size)
    out.put(("ready", None))
    go.wait()
    for _ in range(total):
        ch.basic_publish("", queue, stamped(body), props, mandatory=True)
    conn.close()


def _rabbit_consumer(address: str, queue: str, total: int, batch: int, go: Any, out: Any) -> None:
    import pika

    conn = pika.BlockingConnection(_rabbit_params(address))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=batch)
    latencies: list[float] = []
    out.put(("ready", None))
    go.wait()
    pending, last = 0, 0
    for method, _, body in ch.consume(queue, inactivity_timeout=1):
        if method is None:
            if pending:
                ch.basic_ack(last, multiple=True)
                pending = 0
            continue
        latencies.append(time.time() - STAMP.unpack_from(body)[0])
        last, pending = method.delivery_tag, pending + 1
        if pending >= batch or len(latencies) >= total:
            ch.basic_ack(last, multiple=True)
            pending = 0
        if len(latencies) >= total:
            break
    out.put(("end", time.time()))
    out.put(("latencies", latencies))
    ch.cancel()
    conn.close()


def rabbit_run(address: str, total: int, batch: int, size: int) -> Result:
    """Persistent messages on a durable queue, publisher confirms, manual acks."""
    import pika

    queue = f"sbbench_{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(_rabbit_params(address))
    conn.channel().queue_declare(queue, durable=True)
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_rabbit_publisher, args=(address, queue, total, size, go, out)),
        ctx.Process(target=_rabbit_consumer, args=(address, queue, total, batch, go, out)),
    ]
    for p in procs:
        p.start()
    _await_ready(out, len(procs))
    start = time.time()
    go.set()
    got = dict(out.get(timeout=600) for _ in range(2))
    for p in procs:
        p.join()
    conn.channel().queue_delete(queue)
    conn.close()
    lat = sorted(got["latencies"])
    return Result(
        total / (got["end"] - start),
        statistics.median(lat),
        lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        None,
    )


# -- raw TLS --------------------------------------------------------------------------------------


def tls_contexts(folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """Server and client contexts for a mutual-TLS socket pair on loopback: self-signed
    certificates (as the brokers use), each side trusting the other's, TLS >= 1.2."""
    (sc, sk), (cc, ck) = (make_self_signed(n, folder / n) for n in ("s", "c"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for c, (cert, key), peer in ((server, (sc, sk), cc), (client, (cc, ck), sc)):
        c.minimum_version = ssl.TLSVersion.TLSv1_2
        c.verify_mode = ssl.CERT_REQUIRED
        c.load_cert_chain(cert, key)
        c.load_verify_locations(peer)
    client.check_hostname = False
    return server, client


def tls_run(folder: Path, total: int, size: int) -> float:
    """Messages of ``size`` bytes per second through one mutual-TLS socket pair on loopback."""
    server, client = tls_contexts(folder / "raw")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    expected = total * size
    got = [0]

    def read() -> None:
        raw, _ = listener.accept()
        with server.wrap_socket(raw, server_side=True) as s:
            buf = bytearray(1 << 20)
            while got[0] < expected:
                n = s.recv_into(buf)
                if not n:
                    break
                got[0] += n
            s.sendall(b"k")

    reader = threading.Thread(target=read)
    reader.start()
    body = body_of(size)
    with client.wrap_socket(socket.create_connection(("127.0.0.1", port))) as s:
        s.do_handshake()
        start = time.perf_counter()
        for _ in range(total):
            s.sendall(body)
        s.recv(1)
        elapsed = time.perf_counter() - start
    reader.join()
    listener.close()
    return total / elapsed


def protocol_run(folder: Path, total: int, size: int) -> float:
    """Messages of ``size`` bytes per second through the transport's own layers and nothing
    else: the same TLS socket pair, the sender's ``Outbound`` fragments each body (NET-5) and
    its ``AdjacentConnection`` frames them (CRC-32), the receiver's ``AdjacentConnection``
    checks the frames and its ``Inbound`` reassembles each body, whose whole-message ack goes
    back at once — no storage, no commit. Between this and "between instances" is what the
    two databases cost."""
    server, client = tls_contexts(folder / "proto")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    settings = TransportSettings()

    def receive() -> None:
        raw, _ = listener.accept()
        with server.wrap_socket(raw, server_side=True) as sock:
            adjacent = AdjacentConnection(
                uuid.uuid4(), is_accept=True, encryption="REQUIRED", now=0
            )
            inbound = Inbound(settings)
            sock.sendall(adjacent.start(0))
            done = 0
            while done < total:
                data = sock.recv(1 << 20)
                if not data:
                    return
                for event in adjacent.receive_data(data, 0):
                    if isinstance(event, PeerHello):
                        sock.sendall(adjacent.login(True, "", 0))
                    elif isinstance(event, FragmentReceived):
                        for item in inbound.on_fragment(event.fragment, 0):
                            if isinstance(item, Ack):  # a fragment held (NET-5)
                                adjacent.queue_ack(item)
                            elif isinstance(item, Completed):
                                h = item.header
                                adjacent.queue_ack(
                                    Ack(h.conversation_id, h.is_initiator, h.sequence)
                                )
                                done += 1
                sock.sendall(adjacent.flush_acks(0))

    reader = threading.Thread(target=receive)
    reader.start()
    adjacent = AdjacentConnection(uuid.uuid4(), is_accept=False, encryption="REQUIRED", now=0)
    outbound = Outbound(settings)
    conversation = uuid.uuid4().bytes
    body = body_of(size)
    with client.wrap_socket(socket.create_connection(("127.0.0.1", port))) as sock:
        sock.sendall(adjacent.start(0))
        while adjacent.state is not ConnectionState.LOGGED_IN:
            adjacent.receive_data(sock.recv(1 << 16), 0)
        start = time.perf_counter()
        for n in range(total):
            outbound.offer(
                MessageHeader(
                    conversation, True, n, uuid.uuid4().bytes, "//i", "//t", "C", "M", "NONE",
                    adjacent.our_instance, None, 5, None, size, 1,
                ),
                body,
                0,
            )  # fmt: skip
        acked = 0
        while acked < total:
            frames = outbound.frames_due(0, 1 << 22)
            if frames:
                sock.sendall(b"".join(adjacent.send_fragment(f, 0) for f in frames))
            for event in adjacent.receive_data(sock.recv(1 << 16), 0):
                if isinstance(event, AckReceived):
                    acked += len(outbound.on_ack(event.ack, 0))
        elapsed = time.perf_counter() - start
    reader.join()
    listener.close()
    return total / elapsed


# -- the report -----------------------------------------------------------------------------------


def _size(n: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,65536,10485760", help="body sizes, bytes")
    parser.add_argument("--messages", default="20000,2000,20", help="messages per size")
    parser.add_argument("--batch", default="100,10,1", help="messages per transaction per size")
    parser.add_argument("--dialogs", type=int, default=4)
    parser.add_argument("--rabbitmq", default="127.0.0.1:5672")
    parser.add_argument("--no-rabbitmq", action="store_true")
    parser.add_argument(
        "--encryption",
        default="REQUIRED",
        choices=("REQUIRED", "SUPPORTED", "DISABLED"),
        help="both endpoints' ENCRYPTION (DISABLED: TLS 1.2 with a NULL cipher, SEC-1)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(s) for s in args.messages.split(",")]
    batches = [int(s) for s in args.batch.split(",")]
    console = Console(width=190)
    table = Table(
        title=f"servicebroker between two instances (mutual TLS, ENCRYPTION {args.encryption}, "
        "loopback) vs within one; "
        "SQLite WAL synchronous=FULL; one sender and one receiver process"
    )
    for col in (
        "body",
        "messages",
        "per tx",
        "path",
        "msg/s",
        "MB/s",
        "p50 latency",
        "p99 latency",
        "wire bytes/msg",
        "between / within",
        "target",
    ):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i, (size, total, batch) in enumerate(zip(sizes, counts, batches, strict=True)):
            run = folder / f"run{i}"
            run.mkdir()
            paths = {}
            for secured in (False, True):
                paths[secured] = (
                    setup_pair(run, args.encryption, secured=secured),
                    setup_forwarded(run, args.encryption, secured=secured),
                )
            local = setup_local(run)
            (a, b), (fa, ff, fb) = paths[False]
            (sa, sb), (sfa, sff, sfb) = paths[True]
            between = broker_run(a, b, True, total, batch, args.dialogs, size)
            sealed = broker_run(sa, sb, True, total, batch, args.dialogs, size)
            forwarded = broker_run(fa, fb, True, total, batch, args.dialogs, size, ff)
            sealed_fwd = broker_run(sfa, sfb, True, total, batch, args.dialogs, size, sff)
            within = broker_run(local, local, False, total, batch, args.dialogs, size)
            ratio = between.rate / within.rate
            target = ""
            if size == 100:
                ok = ratio >= 0.5
                target = "[green]>= 50 % ok[/green]" if ok else "[red]< 50 %[/red]"
            for name, r in (
                ("between instances", between),
                ("between, dialog security", sealed),
                ("through a forwarder", forwarded),
                ("through a forwarder, dialog security", sealed_fwd),
                ("within one", within),
            ):
                table.add_row(
                    _size(size),
                    f"{total:,}",
                    str(batch),
                    name,
                    f"{r.rate:,.1f}",
                    f"{r.rate * size / 1e6:,.1f}",
                    f"{r.p50 * 1000:,.1f} ms",
                    f"{r.p99 * 1000:,.1f} ms",
                    "–" if r.wire is None else f"{r.wire:,.0f}",
                    f"{r.rate / within.rate:.0%}" if r is not within else "",
                    target if r is between else "",
                )
            if size == 100 and not args.no_rabbitmq:
                reason = rabbit_reason(args.rabbitmq)
                if reason:
                    console.print(f"RabbitMQ row skipped: {reason}")
                else:
                    r = rabbit_run(args.rabbitmq, total, batch, size)
                    table.add_row(
                        _size(size),
                        f"{total:,}",
                        f"{batch} (ack)",
                        "RabbitMQ, persistent, confirms",
                        f"{r.rate:,.1f}",
                        f"{r.rate * size / 1e6:,.1f}",
                        f"{r.p50 * 1000:,.1f} ms",
                        f"{r.p99 * 1000:,.1f} ms",
                        "–",
                        "",
                        "",
                    )
            if size == max(sizes):
                raw = tls_run(run, total, size)
                proto = protocol_run(run, total, size)
                table.add_row(
                    _size(size),
                    f"{total:,}",
                    "",
                    "the transport's layers alone (no storage)",
                    f"{proto:,.1f}",
                    f"{proto * size / 1e6:,.1f}",
                    "",
                    "",
                    "",
                    f"raw / layers {raw / proto:.1f}x",
                    "",
                )
                tls_ratio = raw / between.rate
                ok = tls_ratio <= 2
                table.add_row(
                    _size(size),
                    f"{total:,}",
                    "",
                    "raw TLS socket pair",
                    f"{raw:,.1f}",
                    f"{raw * size / 1e6:,.1f}",
                    "",
                    "",
                    "",
                    f"raw / between {tls_ratio:.1f}x",
                    "[green]within 2x ok[/green]" if ok else "[red]over 2x[/red]",
                )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
