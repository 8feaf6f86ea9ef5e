"""The demo's brokers: one instance holding the airports and the carriers, or two (``--instances
2``) — the airports on one broker, the carriers on another, each its own database — talking
through their Service Broker endpoints over mutual TLS: a self-signed certificate for each
endpoint, each side granting CONNECT to the other's certificate, and a route per service to the
other instance. With ``--forwarder`` a third broker stands between them (FWD-1): each side
routes the other's services to it and trusts only it, and it routes every service on. Also the catalog each side needs, the carriers' activation switch, and the wait
until every broker is quiet (gathering the transport's figures on the way)."""

from __future__ import annotations

import functools
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..broker import Broker
from ..catalog import Activation
from ..clock import ManualClock
from ..engine.timer import TICK_SECONDS
from ..errors import BrokerError
from ..storage import sqlite_path
from ..storage.queries import portable_sql
from ..transport.certificates import make_self_signed
from ..transport.settings import TransportSettings
from .flights import service_name
from .procedures import (
    ARRIVED,
    CANCELLED,
    DEPARTED,
    FLIGHT_CONTRACTS,
    FLIGHT_PROCESSED,
    READER_WAIT,
    SCHEDULED,
    DemoState,
    airport_procedure,
    carrier_procedure,
)
from .tsql_engine import procedure_name

__all__ = [
    "DemoBrokers",
    "TransportFigures",
    "carrier_activation",
    "carriers_off",
    "open_brokers",
    "setup_catalog",
    "start",
    "wait_quiet",
]

AIRPORT_READERS = 2
CARRIER_READERS = 1
DEMO_TRANSPORT = TransportSettings(idle_after=400 * 86400.0)
"""The demo's clock jumps to each month's end: a connection idle for 90 broker seconds (TICK-4a)
would close at every jump and the next month would wait out TICK-3a's 15 s before connecting
again. Idle connections stay open for the whole year instead (one connection each way)."""


@dataclass
class TransportFigures:
    """What the transport carried between the two instances: per connection the last figures
    ``sys.dm_broker_connections`` showed (connections are sampled while the demo waits)."""

    by_connection: dict[uuid.UUID, tuple[int, int, bool]] = field(default_factory=dict)

    def sample(self, brokers: tuple[Broker, ...]) -> None:
        """Keep each open connection end's (bytes sent, fragments sent, accepted) as seen now."""
        for broker in brokers:
            for c in broker.views.dm_broker_connections():
                self.by_connection[c.connection_id] = (
                    c.total_bytes_sent,
                    c.total_fragments_sent,
                    c.is_accept,
                )

    @property
    def bytes_sent(self) -> int:
        """Bytes written on every connection, both ways (as NET-8's total_bytes_sent counts)."""
        return sum(b for b, _, _ in self.by_connection.values())

    @property
    def fragments_sent(self) -> int:
        """Message fragments written on every connection, both ways."""
        return sum(f for _, f, _ in self.by_connection.values())

    @property
    def connections(self) -> int:
        """Connections opened (each also seen at its accepting end)."""
        return sum(1 for _, _, accepted in self.by_connection.values() if not accepted)


@dataclass
class DemoBrokers:
    """The brokers of one demo run: ``airport`` and ``carrier`` are the same broker for one
    instance. ``airport_url`` is where Spark writes the airports' messages."""

    airport: Broker
    carrier: Broker
    airport_url: str
    carrier_url: str
    figures: TransportFigures = field(default_factory=TransportFigures)
    forwarder: Broker | None = None
    """The broker between the two instances (``--forwarder``), or None."""

    @property
    def two(self) -> bool:
        """True when the airports and the carriers are on two instances."""
        return self.airport is not self.carrier

    @property
    def all(self) -> tuple[Broker, ...]:
        """Each broker once."""
        return (self.airport, self.carrier) if self.two else (self.airport,)

    @property
    def every(self) -> tuple[Broker, ...]:
        """Each broker once, the forwarder included."""
        return self.all if self.forwarder is None else (*self.all, self.forwarder)

    def close(self) -> None:
        """Close every broker (stopping it first if it runs)."""
        for broker in self.every:
            broker.close()


def _fresh_url(url: str | None, output: str, default_name: str) -> str:
    """``url``, or ``OUTPUT/default_name`` recreated; refuses a database that holds a broker."""
    if url is None:
        db = os.path.join(output, default_name)
        for suffix in ("", "-wal", "-shm", "-sblocks"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        url = db
    db_path = sqlite_path(url)
    if db_path is not None and os.path.exists(db_path):
        raise BrokerError(f"demo database {db_path!r} exists already; the demo needs a fresh one")
    if db_path is None:
        with Broker.open(url) as existing:
            if any(q != "sys_event_notifications" for q in existing.catalog.queues):
                raise BrokerError(
                    f"the broker at {url!r} has queues already; the demo needs a fresh database "
                    f"or schema"
                )
    return url


def open_brokers(
    url: str | None,
    target_url: str | None,
    *,
    instances: int,
    output: str,
    clock: ManualClock,
    forwarder: bool = False,
) -> DemoBrokers:
    """Open the demo's fresh broker(s) on ``clock``.

    Args:
        url: the (airport) broker's URL; default ``OUTPUT/flights.db`` for one instance,
            ``OUTPUT/airports.db`` for two (recreated).
        target_url: the carrier broker's URL (two instances only); default
            ``OUTPUT/carriers.db`` (recreated).
        instances: 1 or 2.
        output: the demo's output folder (str path).
        clock: the demo's clock, shared by every broker.
        forwarder: a third broker between the two (``OUTPUT/forwarder.db``, recreated).

    Raises:
        BrokerError: ``instances`` not 1 or 2; ``target_url`` or ``forwarder`` with one
            instance; the two URLs the same; a URL naming an existing SQLite file or a
            PostgreSQL broker in use.
    """
    if instances not in (1, 2):
        raise BrokerError(f"the demo runs on 1 or 2 instances, not {instances!r}")
    if forwarder and instances != 2:
        raise BrokerError("a forwarder stands between two instances: use --instances 2")
    if instances == 1:
        if target_url is not None:
            raise BrokerError("a target URL (the carriers' broker) needs two instances")
        url = _fresh_url(url, output, "flights.db")
        broker = Broker.open(url, clock=clock)
        return DemoBrokers(broker, broker, url, url)
    if url is not None and url == target_url:
        raise BrokerError(f"the airports and the carriers need two databases, not {url!r} twice")
    url = _fresh_url(url, output, "airports.db")
    target_url = _fresh_url(target_url, output, "carriers.db")
    airport = Broker.open(url, clock=clock, transport=DEMO_TRANSPORT)
    try:
        carrier = Broker.open(target_url, clock=clock, transport=DEMO_TRANSPORT)
    except BaseException:
        airport.close()
        raise
    brokers = DemoBrokers(airport, carrier, url, target_url)
    if forwarder:
        try:
            forwarder_url = _fresh_url(None, output, "forwarder.db")
            brokers.forwarder = Broker.open(forwarder_url, clock=clock, transport=DEMO_TRANSPORT)
        except BaseException:
            brokers.close()
            raise
    return brokers


def setup_catalog(
    brokers: DemoBrokers, flights: Any, state: DemoState
) -> tuple[list[str], list[str]]:
    """Message types, contracts and broker priorities on every broker (PRI-7: the levels are
    the database's, so the carriers' broker needs them to order what it receives); the airport
    queues and services on the airport broker, the carriers' on the carrier broker, each
    queue's activation naming its procedure (the T-SQL one with ``state.tsql``); the results
    tables beside their procedures (the T-SQL set-up scripts make their own). Returns (airport
    codes, carrier codes)."""
    for broker in brokers.all:
        for name in (SCHEDULED, DEPARTED, ARRIVED, CANCELLED, FLIGHT_PROCESSED):
            broker.create_message_type(name, validation="JSON")
        for contract, level in FLIGHT_CONTRACTS.items():
            broker.create_contract(
                contract,
                {
                    SCHEDULED: "INITIATOR",
                    DEPARTED: "INITIATOR",
                    ARRIVED: "INITIATOR",
                    CANCELLED: "INITIATOR",
                    FLIGHT_PROCESSED: "TARGET",
                },
            )
            broker.create_broker_priority(
                contract.rsplit("/", 1)[1].lower(), contract_name=contract, priority_level=level
            )
    airports = sorted(flights["origin"].unique())
    carriers = sorted(flights["carrier"].unique())
    sides: tuple[tuple[Broker, str, list[str], Any, int, list[str]], ...] = (
        (brokers.airport, "airport", airports, airport_procedure, AIRPORT_READERS, []),
        (
            brokers.carrier,
            "carrier",
            carriers,
            carrier_procedure,
            CARRIER_READERS,
            list(FLIGHT_CONTRACTS),
        ),
    )
    for broker, kind, codes, procedure, readers, contracts in sides:
        for code in codes:
            queue = f"{kind}_{code}"
            broker.create_queue(
                queue,
                activation=Activation(
                    _procedure(state, kind, code, procedure),
                    max_queue_readers=readers,
                    status=kind == "airport",
                ),
            )
            broker.create_service(service_name(kind, code), queue=queue, contracts=contracts)
    if state.tsql:
        return airports, carriers  # the T-SQL set-up scripts make their own tables
    for broker, table in (
        (
            brokers.carrier,
            "flight_results (flight_id INTEGER NOT NULL, carrier TEXT NOT NULL, "
            "origin TEXT NOT NULL, status TEXT NOT NULL, dep_delay DOUBLE PRECISION, "
            "arr_delay DOUBLE PRECISION, processed_at DOUBLE PRECISION NOT NULL, "
            "priority INTEGER NOT NULL, receive_position INTEGER NOT NULL)",
        ),
        (
            brokers.carrier,
            "carrier_pending (conversation_handle BLOB PRIMARY KEY, flight_id INTEGER NOT NULL, "
            "carrier TEXT NOT NULL, origin TEXT NOT NULL, dep_delay DOUBLE PRECISION)",
        ),
        (
            brokers.airport,
            "airport_replies (flight_id INTEGER NOT NULL, status TEXT NOT NULL, "
            "conversation_group_id TEXT NOT NULL)",
        ),
    ):
        broker.execute(portable_sql(f"CREATE TABLE {table}", broker.paramstyle))
    return airports, carriers


def start(brokers: DemoBrokers, airports: list[str], carriers: list[str], output: str) -> None:
    """Start the broker(s). For two instances first make a self-signed certificate for each
    endpoint (``OUTPUT/certificates``), create each endpoint on a port the system chooses,
    grant CONNECT to the other side's certificate (SEC-1), secure the dialogs end to end
    (:func:`_secure_dialogs`), and once both listen, route each service to the instance that
    holds it (RTE-1: SERVICE_NAME, BROKER_INSTANCE, ADDRESS)."""
    if not brokers.two:
        brokers.airport.start()
        return
    if brokers.forwarder is not None:
        _start_forwarded(brokers, airports, carriers, output)
        return
    sides = (("airports", brokers.airport), ("carriers", brokers.carrier))
    files = {
        name: make_self_signed(name, Path(output) / "certificates" / name) for name, _ in sides
    }
    for name, broker in sides:
        other = "carriers" if name == "airports" else "airports"
        cert, key = files[name]
        broker.create_certificate(name, certificate_file=cert, private_key_file=key)
        broker.create_certificate(other, certificate_file=files[other][0])
        broker.create_endpoint(f"{name}_endpoint", listener_port=0, authentication_certificate=name)
        broker.grant_connect(f"{name}_endpoint", certificate=other)
    _secure_dialogs(brokers, carriers, files, have_peer_certificates=True)
    for _, broker in sides:
        broker.start()
    for broker, peer, kind, codes in (
        (brokers.airport, brokers.carrier, "carrier", carriers),
        (brokers.carrier, brokers.airport, "airport", airports),
    ):
        address = peer.transport.listener_address
        if address is None:
            status = peer.transport.statistics().start_status
            raise BrokerError(f"the {kind} broker's endpoint did not start: {status}")
        for code in codes:
            broker.create_route(
                f"{kind}_{code}",
                service_name=service_name(kind, code),
                broker_instance=peer.service_broker_guid,
                address=address,
            )


def _secure_dialogs(
    brokers: DemoBrokers,
    carriers: list[str],
    files: dict[str, tuple[Path, Path]],
    *,
    have_peer_certificates: bool,
) -> None:
    """Full dialog security between the airports and the carriers (SEC-2, SEC-3): on the
    airports' broker a user owns the carriers' certificate and a remote service binding per
    carrier service names it; on the carriers' broker a user owns the airports' certificate and
    may SEND to every carrier service (SEC-4). Each broker signs with its endpoint's
    certificate (dbo's); a forwarder between them holds no dialog certificate and sees only
    ciphertext."""
    for broker, theirs in ((brokers.airport, "carriers"), (brokers.carrier, "airports")):
        if not have_peer_certificates:
            broker.create_certificate(theirs, certificate_file=files[theirs][0])
        broker.create_user(f"{theirs}_user", certificate=theirs)
    for code in carriers:
        target = service_name("carrier", code)
        brokers.airport.create_remote_service_binding(
            f"carrier_{code}", to_service=target, user="carriers_user"
        )
        brokers.carrier.grant("SEND", on=f"SERVICE::{target}", to="airports_user")


FORWARD_SIZE_MB = 64
"""The demo forwarder's MESSAGE_FORWARD_SIZE: room for a month's burst (FWD-2)."""


def _start_forwarded(
    brokers: DemoBrokers, airports: list[str], carriers: list[str], output: str
) -> None:
    """Three brokers: airports → forwarder → carriers (FWD-1). A self-signed certificate for
    each endpoint; the airports and the carriers trust (hold the certificate of, and grant
    CONNECT to) the forwarder only, the forwarder trusts both and has MESSAGE_FORWARDING. Once
    all listen: the airports route every carrier service to the forwarder, the carriers every
    airport service, and the forwarder routes each service on to its instance (a forwarder
    needs routes to BOTH sides' services)."""
    assert brokers.forwarder is not None
    sides = (
        ("airports", brokers.airport, ["forwarder"]),
        ("carriers", brokers.carrier, ["forwarder"]),
        ("forwarder", brokers.forwarder, ["airports", "carriers"]),
    )
    files = {
        name: make_self_signed(name, Path(output) / "certificates" / name) for name, _, _ in sides
    }
    for name, broker, peers in sides:
        cert, key = files[name]
        broker.create_certificate(name, certificate_file=cert, private_key_file=key)
        broker.create_endpoint(
            f"{name}_endpoint",
            listener_port=0,
            authentication_certificate=name,
            message_forwarding=name == "forwarder",
            message_forward_size=FORWARD_SIZE_MB,
        )
        for peer in peers:
            broker.create_certificate(peer, certificate_file=files[peer][0])
            broker.grant_connect(f"{name}_endpoint", certificate=peer)
    _secure_dialogs(brokers, carriers, files, have_peer_certificates=False)
    for _, broker, _ in sides:
        broker.start()
    addresses = {}
    for name, broker, _ in sides:
        address = broker.transport.listener_address
        if address is None:
            status = broker.transport.statistics().start_status
            raise BrokerError(f"the {name} broker's endpoint did not start: {status}")
        addresses[name] = address
    for kind, codes, holder, name in (
        ("carrier", carriers, brokers.carrier, "carriers"),
        ("airport", airports, brokers.airport, "airports"),
    ):
        sender = brokers.airport if kind == "carrier" else brokers.carrier
        for code in codes:
            for broker, address in (
                (sender, addresses["forwarder"]),
                (brokers.forwarder, addresses[name]),
            ):
                broker.create_route(
                    f"{kind}_{code}",
                    service_name=service_name(kind, code),
                    broker_instance=holder.service_broker_guid,
                    address=address,
                )


def _procedure(state: DemoState, kind: str, code: str, procedure: Any) -> Any:
    """What queue ``{kind}_{code}`` activates: its T-SQL procedure's name (``state.tsql``) or
    the Python ``procedure`` bound to ``state``."""
    if state.tsql:
        return procedure_name(kind, code)
    return functools.partial(procedure, state=state)


def carrier_activation(
    brokers: DemoBrokers, carriers: list[str], state: DemoState, *, on: bool
) -> None:
    """ALTER QUEUE carrier_XX WITH ACTIVATION (STATUS = ON | OFF) on every carrier queue."""
    for code in carriers:
        brokers.carrier.alter_queue(
            f"carrier_{code}",
            activation=Activation(
                _procedure(state, "carrier", code, carrier_procedure),
                max_queue_readers=CARRIER_READERS,
                status=on,
            ),
        )


def carriers_off(
    brokers: DemoBrokers,
    carriers: list[str],
    state: DemoState,
    clock: ManualClock,
    *,
    timeout: float = 600.0,
) -> None:
    """Turn the carriers' activation OFF and wait until none of their procedures runs.

    STATUS = OFF starts no new reader but leaves the running ones be (ACT-9); the demo's
    readers wait in RECEIVE for READER_WAIT broker seconds, and the clock stands still, so a
    reader left over from the last month would take the next month's messages as they arrive
    — in arrival order, not as one backlog in priority order (PRI-12). The clock moves past
    READER_WAIT, so their RECEIVEs come back empty and they return (``dm_broker_activated_tasks``
    then lists none of the carrier queues, ACT-7).

    Raises:
        BrokerError: a carrier procedure still runs after ``timeout`` real seconds.
    """
    carrier_activation(brokers, carriers, state, on=False)
    names = {f"carrier_{code}" for code in carriers}
    deadline = time.monotonic() + timeout
    last_advance = float("-inf")
    while any(t.queue_name in names for t in brokers.carrier.views.dm_broker_activated_tasks()):
        if time.monotonic() > deadline:
            raise BrokerError("the carriers' activated procedures did not end within the limit")
        if time.monotonic() - last_advance > 1.0:
            clock.advance(READER_WAIT + 1.0)
            last_advance = time.monotonic()
        time.sleep(0.05)


def _transported(brokers: DemoBrokers) -> int:
    """Messages the transports have committed or had acknowledged so far (moves while they
    work)."""
    total = 0
    for broker in brokers.all:
        st = broker.transport.statistics()
        total += st.messages_received + st.acknowledged
    return total


def wait_quiet(
    brokers: DemoBrokers,
    clock: ManualClock,
    progress: Callable[[], None],
    *,
    delivered_only: bool = False,
    ignore: frozenset[str] | set[str] = frozenset(),
    timeout: float = 1800.0,
) -> None:
    """Wait until, on every broker, no message is ready, none waits for transmission and every
    running procedure waits in RECEIVE (three looks in a row), calling ``progress`` every half
    second and sampling the transport's figures. With ``delivered_only`` wait only until the
    transmission queues are empty (every message sent has been committed at its target).
    Messages ready on the queues named in ``ignore`` do not count (a Spark query, not a
    procedure, receives them).

    The demo's clock follows the data, so it stands still while the month is processed. When
    messages are ready or wait for transmission but nothing has happened for a second of real
    time, the brokers wait for broker time to pass (ACT-5b starts a reader only once no RECEIVE
    has come back empty for 5 seconds; NET-4 sends again what was not acknowledged; TICK-3a
    connects again after a failure): the clock then moves one timer tick, as real time would.

    Raises:
        BrokerError: the brokers did not get quiet within ``timeout`` real seconds.
    """
    stable = 0
    deadline = time.monotonic() + timeout
    last_count = 0.0
    last_state: tuple[int, int, int] | None = None
    last_change = time.monotonic()
    while stable < 3:
        if time.monotonic() > deadline:
            raise BrokerError("the demo's queues did not drain within the time limit")
        waiting = sum(b.views.transmission_queue_count() for b in brokers.all)
        if delivered_only:
            ready, busy = 0, False
        else:
            ready = sum(
                q.ready_messages
                for b in brokers.all
                for q in b.views.service_queues()
                if q.name not in ignore
            )
            busy = any(
                m.running_tasks > m.tasks_waiting
                for b in brokers.all
                for m in b.views.dm_broker_queue_monitors()
            )
        stable = stable + 1 if not ready and not waiting and not busy else 0
        state = (ready, waiting, _transported(brokers))
        if state != last_state or busy:
            last_state, last_change = state, time.monotonic()
        elif (ready or waiting) and time.monotonic() - last_change > 1.0:
            clock.advance(TICK_SECONDS)  # let broker time pass (ACT-5b, NET-4, TICK-3a)
            last_change = time.monotonic()
        if time.monotonic() - last_count > 0.5:
            last_count = time.monotonic()
            progress()
            if brokers.two:
                brokers.figures.sample(brokers.every)
        time.sleep(0.2)
