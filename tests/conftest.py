"""Shared fixtures: a broker driven by a manual clock on each storage backend — a temporary
SQLite file (never :memory:) and a fresh schema on a PostgreSQL server — and a standard
initiator/target service pair.

Every test that takes ``url`` (or ``broker``) runs once per backend. PostgreSQL is found at
``SERVICEBROKER_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``);
without a reachable server its half is skipped on a laptop and fails when ``CI`` is set. Tests
marked ``sqlite_only`` look at SQLite's own files and run on SQLite only."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from servicebroker import Broker, Instance, ManualClock, TransportSettings
from servicebroker.testing.ports import free_port
from servicebroker.transport.certificates import make_self_signed

from .migrated_databases import PostgresSchemas, SqliteTemplate
from .transport_sites import Site

# CI runs the property tests derandomized: the same examples on every run, so a red build is a
# regression, not a new draw; a developer's runs draw afresh and keep what fails in .hypothesis/
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

START = 1_700_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


POSTGRES_URL = os.environ.get(
    "SERVICEBROKER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
_postgres_problem: list[str | None] = []


def postgres_problem() -> str | None:
    """Why PostgreSQL tests cannot run here (None when they can); asked once per run."""
    if not _postgres_problem:
        try:
            import psycopg

            with psycopg.connect(POSTGRES_URL, connect_timeout=3):
                _postgres_problem.append(None)
        except Exception as exc:  # not installed, not reachable, refused
            _postgres_problem.append(f"no PostgreSQL at {POSTGRES_URL}: {exc}")
    return _postgres_problem[0]


def need_postgres() -> None:
    """Share the PostgreSQL server until the test ends (first: never look while a test that
    crashes it has it alone); skip (fail in CI) without one."""
    SERVER.share()
    problem = postgres_problem()
    if problem is not None:
        if in_ci():
            pytest.fail(f"PostgreSQL tests must run in CI: {problem}")
        pytest.skip(problem)


class ServerLock:
    """The test server is shared by every test that uses it, in this process, in the other
    pytest-xdist workers and in any other run of this suite on the machine; the test that
    stops and kills it (``test_faults_postgres.py``'s server crashes) must have it alone.
    A lock file per server: its users hold it shared (``flock``) from their first use to the
    end of the test (the ``_server_shared_until_the_end`` fixture), the crashing test holds it
    exclusive. A gate taken before either lets a waiting exclusive holder in first (new users
    wait at the gate), so that a stream of short tests on other workers cannot starve it."""

    def __init__(self, url: str) -> None:
        import hashlib
        import tempfile

        digest = hashlib.sha256(url.encode()).hexdigest()[:12]
        self.path = os.path.join(tempfile.gettempdir(), f"servicebroker-tests-pg-{digest}.lock")
        self.held: int | None = None

    def _locked(self, suffix: str, how: int) -> int:
        import fcntl

        fd = os.open(self.path + suffix, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, how)
        return fd

    def share(self) -> None:
        import fcntl

        if self.held is None:
            gate = self._locked(".gate", fcntl.LOCK_EX)
            try:
                self.held = self._locked("", fcntl.LOCK_SH)
            finally:
                os.close(gate)

    def release(self) -> None:
        if self.held is not None:
            os.close(self.held)  # closing the file lets its lock go
            self.held = None

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Hold the server alone: wait for every test using it, everywhere, to end."""
        import fcntl

        self.release()
        gate = self._locked(".gate", fcntl.LOCK_EX)
        try:
            only = self._locked("", fcntl.LOCK_EX)
            try:
                yield
            finally:
                os.close(only)
        finally:
            os.close(gate)


SERVER = ServerLock(POSTGRES_URL)


@pytest.fixture(autouse=True)
def _server_shared_until_the_end() -> Iterator[None]:
    """Let the test server go when a test that used it ends (autouse: torn down last)."""
    yield
    SERVER.release()


def new_url(backend: str, folder: Path) -> str:
    """A fresh, empty broker database: an SQLite file in ``folder`` or a new PostgreSQL schema
    (dropped by :func:`drop_url`)."""
    if backend == "sqlite":
        return str(folder / "broker.db")
    need_postgres()
    import psycopg

    schema = f"sbtest_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"


def drop_url(url: str) -> None:
    """Drop a PostgreSQL test schema made by :func:`new_url` (SQLite files go with tmp_path)."""
    if "search_path%3Dsbtest_" not in url:
        return
    import psycopg

    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as c:
        c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        need_postgres()
    return str(request.param)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fault-cycles",
        default="3",
        help="faults injected by tests/test_faults_postgres.py (the long form: 100)",
    )
    parser.addoption(
        "--transport-matrix",
        default="quick",
        choices=("quick", "full"),
        help="messages per cell of tests/test_transport_faults.py: quick 1,000, full 10,000",
    )
    parser.addoption(
        "--transport-crash-cycles",
        default="8",
        help="SIGKILL cycles of tests/test_transport_crash.py (the long form: 300)",
    )
    parser.addoption(
        "--forwarding-crash-cycles",
        default="5",
        help="forwarder SIGKILL cycles of tests/test_forwarding_crash.py (the long form: 100)",
    )
    parser.addoption(
        "--long",
        action="store_true",
        help="also run the long forms make test leaves out (tests marked long: the Spark crash "
        "after the sink's commit on PostgreSQL, the activator's own PySpark job)",
    )
    parser.addoption(
        "--streaming-kill-cycles",
        default="0",
        help="SIGKILLs of the streaming query's process tree in tests/test_spark_kill.py "
        "(0: only the injected crash after the sink's commit runs)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``long`` run only with ``--long``; tests marked ``sqlite_only`` run on
    SQLite only (they look at its files); the fault
    cycles get time in proportion to how many are asked for (about 7 s each, with margin);
    the long scenarios run first."""
    cycles = int(config.getoption("--fault-cycles"))
    if not config.getoption("--long"):
        skip = pytest.mark.skip(reason="a long form: run with --long")
        for item in items:
            if item.get_closest_marker("long"):
                item.add_marker(skip)
    for item in items:
        if item.nodeid.startswith("tests/test_faults_postgres.py"):
            # the server's crashes first wait for every other test on the server to end
            wait = 300 if "server_crashes" in item.nodeid else 0
            item.add_marker(pytest.mark.timeout(120 + 15 * cycles + wait))
    dropped = [
        item
        for item in items
        if item.get_closest_marker("sqlite_only") and "[postgres" in item.nodeid
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
    # the long scenarios (marked slow or spark) first, the rest in their order: pytest-xdist
    # (make unit: --dist load --maxschedchunk 2) hands tests out in this order, so the longest
    # start at once on every worker and the short ones fill the gaps at the end
    items.sort(
        key=lambda item: not any(item.iter_markers("slow")) and not any(item.iter_markers("spark"))
    )


@pytest.fixture
def empty_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A new, empty broker database (nothing migrated): for tests of the migrations."""
    u = new_url(backend, tmp_path)
    yield u
    drop_url(u)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> SqliteTemplate:
    """A broker SQLite file migrated once per test process (copied by ``url``)."""
    return SqliteTemplate(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[PostgresSchemas]:
    """This test process's pool of migrated PostgreSQL schemas (handed out by ``url``)."""
    pool = PostgresSchemas(POSTGRES_URL)
    yield pool
    SERVER.share()  # not while a test has the server alone to crash it
    try:
        pool.close()
    finally:
        SERVER.release()


def migrated_url(request: pytest.FixtureRequest, backend: str, folder: Path) -> str:
    """A new broker database, already migrated (``tests/migrated_databases.py``): a copy of a
    template SQLite file in ``folder``, or a schema of the PostgreSQL pool (put back as new by
    :func:`give_back_url`)."""
    if backend == "sqlite":
        folder.mkdir(parents=True, exist_ok=True)
        template: SqliteTemplate = request.getfixturevalue("sqlite_template")
        return template.copy(folder)
    need_postgres()
    schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
    return schemas.take()


def give_back_url(request: pytest.FixtureRequest, url: str) -> None:
    """The end of a database :func:`migrated_url` made (its brokers closed)."""
    if url.startswith("postgres"):
        schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
        schemas.give_back(url)


@pytest.fixture
def url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new broker database, already migrated (:func:`migrated_url`)."""
    u = migrated_url(request, backend, tmp_path)
    yield u
    give_back_url(request, u)


@pytest.fixture
def instance_location(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh T-SQL instance: a folder whose ``master.db`` is a copy of the migrated template,
    or a named instance on the PostgreSQL server whose ``master`` comes from the pool
    (``tests/migrated_databases.py``; its other schemas are dropped after the test)."""
    if backend == "sqlite":  # its master: a copy of the migrated template
        folder = tmp_path / "instance"
        folder.mkdir()
        template: SqliteTemplate = request.getfixturevalue("sqlite_template")
        template.copy(folder, "master.db")
        yield str(folder)
        return
    name = f"t{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in POSTGRES_URL else "?"
    location = f"{POSTGRES_URL}{sep}instance={name}"
    schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
    schemas.master(location)
    yield location
    schemas.give_back_master(location)
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as c:
        schemas = c.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (f"sb_{name}_",)
        ).fetchall()
        for (schema,) in schemas:
            c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def instance(instance_location: str, clock: ManualClock) -> Iterator[Instance]:
    """An open instance on ``instance_location`` with the manual clock."""
    i = Instance.open(instance_location, clock=clock)
    yield i
    i.close()


@pytest.fixture
def broker(url: str, clock: ManualClock) -> Iterator[Broker]:
    b = Broker.open(url, clock=clock, poll_interval=0.01)
    yield b
    b.close()


@dataclass
class Pair:
    """An initiator service on queue 'iq' and a target service on 'tq' under contract 'C' with
    message types Req (initiator), Resp (target), Note (any)."""

    initiator: str = "//test/Initiator"
    target: str = "//test/Target"
    iq: str = "iq"
    tq: str = "tq"
    contract: str = "C"


def make_pair(broker: Broker, *, retention: bool = False, poison: bool = True) -> Pair:
    broker.create_message_type("Req", validation="NONE")
    broker.create_message_type("Resp", validation="NONE")
    broker.create_message_type("Note", validation="NONE")
    broker.create_contract("C", {"Req": "INITIATOR", "Resp": "TARGET", "Note": "ANY"})
    broker.create_queue("iq", retention=retention, poison_message_handling=poison)
    broker.create_queue("tq", retention=retention, poison_message_handling=poison)
    p = Pair()
    broker.create_service(p.initiator, queue="iq")
    broker.create_service(p.target, queue="tq", contracts=["C"])
    return p


@pytest.fixture
def pair(broker: Broker) -> Pair:
    return make_pair(broker)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need_spark() -> None:
    """Skip without PySpark or a Java runtime on a laptop; fail in CI (Spark tests must run
    there). For tests whose Spark runs in child processes as for the ``spark`` fixture."""
    import shutil

    problem = None
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        problem = f"PySpark is not installed: {exc}"
    if problem is None and not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        problem = "no Java runtime (java on PATH or JAVA_HOME)"
    if problem is not None:
        if in_ci():
            pytest.fail(f"Spark tests must run in CI: {problem}")
        pytest.skip(problem)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local SparkSession for the whole test run, with the servicebroker data source."""
    need_spark()
    from servicebroker.spark import session

    s = session(
        "local[2]", app_name="servicebroker-tests", temp_dir=str(tmp_path_factory.mktemp("spark"))
    )
    yield s
    s.stop()


# -- two brokers for the transport's tests (helpers: tests/transport_sites.py) ---------------
@pytest.fixture
def transport_settings() -> TransportSettings | None:
    """The brokers' transport settings (None: the defaults); a test parametrizes it to change
    them (``@pytest.mark.parametrize("transport_settings", [TransportSettings(...)])``)."""
    return None


@pytest.fixture
def sites(
    backend: str,
    tmp_path: Path,
    transport_settings: TransportSettings | None,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[Site, Site]]:
    """Two brokers on ``backend`` (two SQLite files or two PostgreSQL databases), each on its
    own manual clock with a free port and a self-signed certificate; nothing else set up
    (``transport_sites.connect`` makes the usual shop and warehouse)."""
    urls = [migrated_url(request, backend, tmp_path / name) for name in "ab"]
    made = []
    for i, u in enumerate(urls):
        (tmp_path / "ab"[i]).mkdir(exist_ok=True)
        clock = ManualClock(START)
        made.append(
            Site(
                Broker.open(u, clock=clock, poll_interval=0.01, transport=transport_settings),
                clock,
                free_port(),
                make_self_signed("ab"[i], tmp_path / "ab"[i]),
            )
        )
    yield made[0], made[1]
    for site in made:
        site.broker.close()
    for u in urls:
        give_back_url(request, u)


FAST = TransportSettings(suppress_after_failure=1.0, suppress_after_disconnect=1.0)
Opener = Callable[..., list[Site]]


@pytest.fixture
def open_sites(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Opener]:
    """``open_sites(n, backend="sqlite", settings={index: TransportSettings})``: ``n`` brokers,
    each on its own manual clock, free port and self-signed certificate; closed at the end."""
    made: list[Site] = []
    urls: list[str] = []

    def opener(n: int, backend: str = "sqlite", settings: dict[int, TransportSettings] | None = None) -> list[Site]:  # fmt: skip
        sites = []
        for i in range(n):
            folder = tmp_path / f"site{i}"
            url = migrated_url(request, backend, folder)
            urls.append(url)
            clock = ManualClock(START)
            broker = Broker.open(
                url, clock=clock, poll_interval=0.01, transport=(settings or {}).get(i, FAST)
            )
            sites.append(Site(broker, clock, free_port(), make_self_signed(f"s{i}", folder)))
        made.extend(sites)
        return sites

    yield opener
    for site in made:
        site.broker.close()
    for url in urls:
        give_back_url(request, url)
