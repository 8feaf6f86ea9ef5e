"""Fault runs: senders and receivers in processes of their own keep working while the database
underneath fails, and a checker proves that nothing acknowledged was lost, duplicated or
reordered and that every failure the application saw was a
:class:`~servicebroker.errors.BrokerError`.

The application follows the recipe of docs/reliability.md: a sender writes a row naming each
message (``sb_fault_sent``) in the transaction that SENDs it, so after a commit whose outcome is
unknown it looks for that row and sends again only if it is absent; a receiver writes a row per
message received (``sb_fault_received``) in the transaction that RECEIVEs it, so that table is
what was processed, exactly once or not.

:func:`run_fault_cycles` drives a whole run with a fault from :func:`fault_for`; :func:`check`
is the pure checker. ``tests/test_faults_postgres.py`` runs them (the long form, whose figures
are in docs/reliability.md: ``pytest -s tests/test_faults_postgres.py --fault-cycles 100``).
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import shutil
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..broker import Broker
from ..errors import BrokerError, Outcome, StorageError
from .waiting import poll

__all__ = [
    "FaultReport",
    "ServerControl",
    "check",
    "fault_for",
    "run_fault_cycles",
    "session_counter",
    "terminate_sessions",
]

QUEUE = "fault_q"
SERVICE = "//fault/Service"
CONTRACT = "//fault/Contract"
MESSAGE_TYPE = "//fault/Message"


@dataclass(frozen=True)
class FaultReport:
    """What a fault run saw.

    Attributes:
        cycles: faults injected (server stops, kills or session cuts).
        attempted: distinct messages the senders tried to send.
        acknowledged: messages whose SEND committed (directly, or found committed after an
            unknown outcome).
        unknown_outcomes: commits whose outcome the application had to check.
        delivered: rows the receivers committed (messages processed).
        lost: acknowledged messages never processed.
        duplicated: extra processings of a message.
        unexpected: processed messages that were never acknowledged.
        reordered: messages processed before an earlier message of their conversation.
        failures: how many errors of each class the workers saw (class name → count).
        foreign: errors that were not BrokerErrors (must be empty).
        recovery_seconds: per fault, real seconds from the server being back (or the sessions
            cut) to every worker's next commit.
        peak_sessions: the most database sessions the workers held at once, sampled after
            each recovery (0 when not measured): a pool that grows with every fault shows here.
    """

    cycles: int
    attempted: int
    acknowledged: int
    unknown_outcomes: int
    delivered: int
    lost: int
    duplicated: int
    unexpected: int
    reordered: int
    failures: dict[str, int] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)
    recovery_seconds: list[float] = field(default_factory=list)
    peak_sessions: int = 0

    @property
    def ok(self) -> bool:
        """Nothing lost, duplicated, unexpected or reordered, and no foreign error."""
        return not (self.lost or self.duplicated or self.unexpected or self.reordered) and not (
            self.foreign
        )


def check(
    attempted: Iterable[str],
    acknowledged: Iterable[str],
    delivered: Sequence[str],
) -> dict[str, int]:
    """Count what a run lost, duplicated, did not expect and reordered.

    Args:
        attempted: every message tag a sender tried (``sender:conversation:seq``).
        acknowledged: the tags whose SEND is known committed.
        delivered: the tags processed, in the order their receiving transactions committed.

    Returns:
        ``attempted``, ``acknowledged``, ``delivered``, ``lost``, ``duplicated``,
        ``unexpected``, ``reordered``.
    """
    tried = set(attempted)
    acked = set(acknowledged)
    counts = Counter(delivered)
    last: dict[str, int] = {}
    reordered = 0
    for tag in delivered:
        conversation, _, seq = tag.rpartition(":")
        n = int(seq)
        if n < last.get(conversation, -1):
            reordered += 1
        last[conversation] = max(n, last.get(conversation, -1))
    return {
        "attempted": len(tried),
        "acknowledged": len(acked),
        "delivered": len(delivered),
        "lost": len(acked - set(counts)),
        "duplicated": sum(c - 1 for c in counts.values() if c > 1),
        "unexpected": len(set(counts) - acked),
        "reordered": reordered,
    }


# -- workers (run in processes of their own) ---------------------------------------------------


def _note_failure(exc: BaseException, failures: Counter[str], foreign: list[str]) -> None:
    failures[type(exc).__name__] += 1
    if not isinstance(exc, BrokerError):
        foreign.append(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")


def _open(url: str, stop: Any, failures: Counter[str], foreign: list[str]) -> Broker | None:
    # the workers report failures themselves: the driver's notes on each would drown them
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    while not stop.is_set():
        try:
            return Broker.open(url, busy_timeout=5, poll_interval=0.05)
        except BaseException as exc:
            _note_failure(exc, failures, foreign)
            stop.wait(0.2)
    return None


def _sender(
    url: str, name: str, handles: list[str], stop: Any, progress: Any, slot: int, out: Any
) -> None:
    failures: Counter[str] = Counter()
    foreign: list[str] = []
    attempted: set[str] = set()
    acked: list[str] = []
    unknown = 0
    broker = _open(url, stop, failures, foreign)
    seq = dict.fromkeys(handles, 0)
    mark = "%s" if broker is None or broker.paramstyle == "format" else "?"
    turn = 0
    while broker is not None and not stop.is_set():
        handle = handles[turn % len(handles)]
        tag = f"{name}:{handle}:{seq[handle]}"
        attempted.add(tag)
        try:
            with broker.transaction() as tx:
                tx.send(uuid.UUID(handle), MESSAGE_TYPE, tag.encode())
                tx.execute(f"INSERT INTO sb_fault_sent (tag) VALUES ({mark})", (tag,))
            committed = True
        except StorageError as exc:
            _note_failure(exc, failures, foreign)
            committed = False
            if exc.outcome is Outcome.UNKNOWN:
                unknown += 1
                committed = _was_committed(broker, tag, mark, stop, failures, foreign)
        except BaseException as exc:
            _note_failure(exc, failures, foreign)
            committed = False
        if committed:
            acked.append(tag)
            seq[handle] += 1
            turn += 1
            progress[slot] = time.monotonic()
        else:
            stop.wait(0.05)
    if broker is not None:
        broker.close()
    out.put(("sender", sorted(attempted), acked, unknown, dict(failures), foreign))


def _was_committed(
    broker: Broker, tag: str, mark: str, stop: Any, failures: Counter[str], foreign: list[str]
) -> bool:
    """The documented check after an unknown outcome: is the transaction's own row there?"""
    while not stop.is_set():
        try:
            rows = broker.execute(f"SELECT 1 FROM sb_fault_sent WHERE tag = {mark}", (tag,))
            return bool(rows)
        except BaseException as exc:
            _note_failure(exc, failures, foreign)
            stop.wait(0.1)
    return False


def _receiver(url: str, stop: Any, drained: Any, progress: Any, slot: int, out: Any) -> None:
    failures: Counter[str] = Counter()
    foreign: list[str] = []
    broker = _open(url, drained, failures, foreign)
    mark = "%s" if broker is None or broker.paramstyle == "format" else "?"
    while broker is not None and not drained.is_set():
        try:
            with broker.transaction() as tx:
                msgs = tx.receive(QUEUE, top=20, timeout=0.2)
                if msgs:
                    tx.executemany(
                        f"INSERT INTO sb_fault_received (tag) VALUES ({mark})",
                        [(m.message_body.decode(),) for m in msgs],
                    )
            progress[slot] = time.monotonic()
        except BaseException as exc:
            _note_failure(exc, failures, foreign)
            drained.wait(0.05)
    if broker is not None:
        broker.close()
    out.put(("receiver", [], [], 0, dict(failures), foreign))


# -- the faults ----------------------------------------------------------------------------------


def terminate_sessions(admin_url: str, application_name: str) -> int:
    """Cut every session whose ``application_name`` is the given one (``pg_terminate_backend``,
    waiting up to 5 s for each to end); returns how many."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchone()
    return int(row[0]) if row else 0


def session_counter(admin_url: str, application_name: str) -> Callable[[], int]:
    """A function counting the server's sessions whose ``application_name`` is the given one."""

    def count() -> int:
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            ).fetchone()
        return int(row[0]) if row else 0

    return count


@dataclass(frozen=True)
class ServerControl:
    """Stops and starts the local PostgreSQL cluster serving a port (Debian's
    ``pg_ctlcluster``; needs root or the postgres user).

    Attributes:
        version: the cluster's major version (``15``).
        name: the cluster's name (``main``).
        data_directory: where its ``postmaster.pid`` lives.
    """

    version: str
    name: str
    data_directory: str

    @classmethod
    def find(cls, port: int) -> ServerControl | None:
        """The cluster listening on ``port`` on this machine, or None when it cannot be
        controlled from here (no ``pg_ctlcluster``, no such cluster)."""
        if shutil.which("pg_lsclusters") is None or shutil.which("pg_ctlcluster") is None:
            return None
        try:
            listing = subprocess.run(
                ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        for line in listing.splitlines():
            cols = line.split()
            if len(cols) >= 6 and cols[2] == str(port) and cols[3] == "online":
                return cls(cols[0], cols[1], cols[5])
        return None

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, *args],
            check=True,
            capture_output=True,
        )

    def crash(self, how: str) -> None:
        """Take the server down: ``"immediate"`` (``stop -m immediate``) or ``"kill"``
        (SIGKILL of the postmaster; its backends end when they notice)."""
        if how == "kill":
            with open(f"{self.data_directory}/postmaster.pid") as pid_file:
                pid = int(pid_file.readline())
            subprocess.run(["kill", "-9", str(pid)], check=True)
            poll(  # its backends notice the postmaster's death
                lambda: subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode,
                30,
                every=0.05,
            )
        else:
            self._ctl("stop", "-m", "immediate")

    def start(self) -> None:
        """Start the server again (retried while the old backends still end)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                self._ctl("start")
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def _prepare(url: str, senders: int, conversations: int) -> list[list[str]]:
    with Broker.open(url) as broker:
        broker.create_message_type(MESSAGE_TYPE)
        broker.create_contract(CONTRACT, {MESSAGE_TYPE: "INITIATOR"})
        broker.create_queue(QUEUE)
        broker.create_service(SERVICE, queue=QUEUE, contracts=[CONTRACT])
        key = "BIGSERIAL" if broker.paramstyle == "format" else "INTEGER"
        broker.execute("CREATE TABLE sb_fault_sent (tag TEXT NOT NULL)")
        broker.execute(f"CREATE TABLE sb_fault_received (id {key} PRIMARY KEY, tag TEXT NOT NULL)")
        with broker.transaction() as tx:
            return [
                [
                    str(tx.begin_dialog(SERVICE, SERVICE, contract=CONTRACT))
                    for _ in range(conversations)
                ]
                for _ in range(senders)
            ]


def run_fault_cycles(
    url: str,
    *,
    cycles: int,
    fault: Callable[[int], None],
    senders: int = 2,
    receivers: int = 2,
    conversations: int = 8,
    between: tuple[float, float] = (0.3, 1.0),
    seed: int = 0,
    recovery_limit: float = 60.0,
    count_sessions: Callable[[], int] | None = None,
) -> FaultReport:
    """Run senders and receivers (processes of their own) on a fresh broker database at
    ``url`` and call ``fault(cycle)`` ``cycles`` times, real seconds apart (drawn from
    ``between`` with ``seed``); after each, wait until every worker committed again. Then stop
    the senders, let the receivers drain the queue and check.

    Args:
        url: an empty broker database (workers open it themselves).
        cycles: faults to inject.
        fault: injects one (stops and restarts the server, cuts sessions, …); returns when the
            database can be reached again.
        senders, receivers: worker processes; conversations: dialogs per sender.
        recovery_limit: real seconds to wait for every worker's next commit after a fault.
        count_sessions: how many database sessions the workers hold now (see
            :func:`session_counter`), sampled after each recovery.

    Returns:
        The :class:`FaultReport`.
    """
    handles = _prepare(url, senders, conversations)
    ctx = multiprocessing.get_context("spawn")
    stop, drained = ctx.Event(), ctx.Event()
    progress = ctx.Array("d", senders + receivers)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_sender, args=(url, f"s{i}", handles[i], stop, progress, i, out), daemon=True
        )
        for i in range(senders)
    ] + [
        ctx.Process(
            target=_receiver, args=(url, stop, drained, progress, senders + i, out), daemon=True
        )
        for i in range(receivers)
    ]
    for p in procs:
        p.start()
    rng = random.Random(seed)
    recovery: list[float] = []
    peak = 0
    try:
        _wait_progress(progress, 0.0, recovery_limit)
        for cycle in range(cycles):
            time.sleep(rng.uniform(*between))
            fault(cycle)
            back = time.monotonic()
            _wait_progress(progress, back, recovery_limit)
            recovery.append(time.monotonic() - back)
            if count_sessions is not None:
                peak = max(peak, count_sessions())
    finally:
        stop.set()
    results = [out.get(timeout=120) for _ in range(senders)]
    with Broker.open(url) as broker:
        deadline = time.monotonic() + 120
        while broker.peek(QUEUE, top=1) and time.monotonic() < deadline:
            time.sleep(0.1)
        drained.set()
        results += [out.get(timeout=120) for _ in range(receivers)]
        for p in procs:
            p.join(30)
        delivered = [
            row[0] for row in broker.execute("SELECT tag FROM sb_fault_received ORDER BY id")
        ]
    attempted: list[str] = []
    acked: list[str] = []
    failures: Counter[str] = Counter()
    foreign: list[str] = []
    unknown = 0
    for _, tried, ok, unk, failed, alien in results:
        attempted += tried
        acked += ok
        unknown += unk
        failures.update(failed)
        foreign += alien
    counts = check(attempted, acked, delivered)
    return FaultReport(
        cycles=cycles,
        attempted=counts["attempted"],
        acknowledged=counts["acknowledged"],
        unknown_outcomes=unknown,
        delivered=counts["delivered"],
        lost=counts["lost"],
        duplicated=counts["duplicated"],
        unexpected=counts["unexpected"],
        reordered=counts["reordered"],
        failures=dict(failures),
        foreign=foreign,
        recovery_seconds=recovery,
        peak_sessions=peak,
    )


def _wait_progress(progress: Any, after: float, limit: float) -> None:
    """Wait (real time, bounded) until every worker committed after ``after``."""
    if poll(lambda: min(progress[:]) > after, limit, every=0.02) is None:
        raise TimeoutError(f"a worker made no progress within {limit:g} s after a fault")


def fault_for(url: str, mode: str, admin_url: str | None = None) -> Callable[[int], None]:
    """The fault of ``mode`` for the PostgreSQL database at ``url``: ``"server"`` alternates
    ``stop -m immediate`` and SIGKILL of the postmaster, then starts the server again;
    ``"terminate"`` cuts the sessions of the URL's ``application_name``.

    Raises:
        BrokerError: ``"server"`` where the server cannot be controlled from here, or a URL
            without ``application_name`` for ``"terminate"``.
    """
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(url)
    if mode == "terminate":
        name = params.get("application_name")
        if not name:
            raise BrokerError("terminate mode needs application_name=… in the URL")

        def cut(cycle: int) -> None:
            terminate_sessions(admin_url or url, str(name))

        return cut
    server = ServerControl.find(int(params.get("port") or 5432))
    if server is None:
        raise BrokerError(f"cannot control the PostgreSQL server of {url.split('@')[-1]} here")

    def crash_and_restart(cycle: int) -> None:
        try:
            server.crash("kill" if cycle % 2 else "immediate")
        finally:
            server.start()

    return crash_and_restart
