"""External activation starts Spark (issue 14): ``servicebroker activator CONFIG.toml`` launches
examples/spark_queue_job.py — an AvailableNow streaming job on the queue named in each
QUEUE_ACTIVATION notification — between min and max instances; the job answers every queued
message through the streaming sink, ends the dialogs and exits; new messages launch it again.
The how-to: docs/howto-spark-activation.md.

Each launch of the job starts a JVM (10-50 s on a busy 2-core machine): these tests launch it
five times in all, so they are marked ``slow``. Measured on the 2-core box with other Spark jobs
running (load average about 10): 110 s and 117 s for the two backends of the first test, 64 s
for the second (plus 19 s for the session-wide SparkSession when no test started it before)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from servicebroker import END_DIALOG, Broker, ManualClock
from servicebroker.activator import ExternalActivator, _start_time, load_config
from servicebroker.catalog import EVENT_NOTIFICATION
from servicebroker.testing.waiting import poll

from .conftest import Pair, need_spark
from .test_activator import setup_notifications, write_config

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "examples" / "spark_queue_job.py"
JOB_SECONDS = 300
"""Real seconds one launch of the job may take before the test fails (JVM start included)."""

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(2 * JOB_SECONDS + 120)]


@pytest.fixture(scope="module")
def spark_runtime() -> None:
    """PySpark and a Java runtime are here (skipped on a laptop without them, failed in CI);
    no SparkSession in this process: the jobs start their own."""
    need_spark()


def job_command(checkpoints: Path, launcher: Sequence[str] = (sys.executable,)) -> list[str]:
    """The example job answering with Resp (the target's message type of the test contract);
    run by ``python``, on ``local[1]``: the job's few messages need no second task slot, and one
    fewer Python worker per stage saves about a tenth of each launch's CPU (measured: 42-48 s
    against 50 s of CPU per launch on the 2-core machine). Under spark-submit the launcher's
    ``--master`` wins (the job keeps it)."""
    master = ["--master", "local[1]"] if list(launcher) == [sys.executable] else []
    return [*launcher, str(JOB), "--reply-type", "Resp", "--checkpoints", str(checkpoints), *master]


def begin(broker: Broker, pair: Pair, sizes: Sequence[int], *, ended: int = 0) -> dict[UUID, list[bytes]]:  # fmt: skip
    """One dialog per entry of ``sizes`` with that many requests, and ``ended`` more with one
    request each that the initiator ends at once (the target gets the request, then EndDialog).
    Returns the requests' bodies by the initiator's handle ([] for the ended dialogs)."""
    sent: dict[UUID, list[bytes]] = {}
    with broker.transaction() as tx:
        for n, size in enumerate([*sizes, *[1] * ended]):
            h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
            bodies = [f"{h}/{i}".encode() for i in range(size)]
            for body in bodies:
                tx.send(h, "Req", body)
            if n >= len(sizes):
                tx.end_conversation(h)
                bodies = []
            sent[h] = bodies
    return sent


def answers(broker: Broker, pair: Pair) -> dict[UUID, list[bytes]]:
    """RECEIVE every answer on the initiator's queue: the reply bodies by conversation, each
    list ending with b"END" for the EndDialog message; the initiator ends its side on it."""
    got: dict[UUID, list[bytes]] = {}
    while True:
        with broker.transaction() as tx:
            messages = tx.receive(pair.iq)
            if not messages:
                return got
            for m in messages:
                if m.message_type_name == END_DIALOG:
                    got.setdefault(m.conversation_handle, []).append(b"END")
                    tx.end_conversation(m.conversation_handle)
                else:
                    assert m.message_type_name == "Resp"
                    got.setdefault(m.conversation_handle, []).append(m.message_body)


def expected(sent: dict[UUID, list[bytes]]) -> dict[UUID, list[bytes]]:
    """Each request's body echoed in order, then the EndDialog; nothing for the dialogs the
    initiator ended."""
    return {h: [*bodies, b"END"] for h, bodies in sent.items() if bodies}


def notifications(broker: Broker) -> int:
    """QUEUE_ACTIVATION notifications waiting for the activator."""
    return sum(
        1
        for m in broker.peek("notify_q")
        if m.message_type_name == EVENT_NOTIFICATION and b"QUEUE_ACTIVATION" in m.message_body
    )


class Jobs:
    """The activator's ``launch``: each job in a process group of its own (the JVM with it),
    its output in a log file; the first one can be held (SIGSTOP) before it reads anything."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.children: list[subprocess.Popen[bytes]] = []
        self.instances: list[str] = []
        self.hold_next = False

    def launch(self, argv: Sequence[str], env: dict[str, str]) -> int:
        log = open(self.folder / f"job{len(self.children)}.log", "wb")  # noqa: SIM115
        child = subprocess.Popen(
            list(argv), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        if self.hold_next:
            os.kill(child.pid, signal.SIGSTOP)  # still importing Python: nothing read yet
            self.hold_next = False
        self.children.append(child)
        self.instances.append(env["SERVICEBROKER_INSTANCE"])
        return child.pid

    def log(self, n: int) -> str:
        return (self.folder / f"job{n}.log").read_text(errors="replace")

    def finish(self, n: int) -> str:
        """Wait for job ``n`` to exit; its output, which must say it answered."""
        child = self.children[n]
        try:
            child.wait(timeout=JOB_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"job {n} still runs after {JOB_SECONDS} s:\n{self.log(n)[-3000:]}")
        assert child.returncode == 0, self.log(n)[-3000:]
        return self.log(n)

    def kill_all(self) -> None:
        for child in self.children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    made = Jobs(tmp_path)
    yield made
    made.kill_all()


@pytest.mark.parametrize(
    "backend", ["sqlite"]
)  # PostgreSQL's claims: test_claims, test_spark_streaming
def test_activated_spark_job_answers_the_queue_between_min_and_max(
    spark_runtime: None,
    tmp_path: Path,
    url: str,
    broker: Broker,
    pair: Pair,
    clock: ManualClock,
    jobs: Jobs,
) -> None:
    # rule ACT-8: the activator launches the Spark job on QUEUE_ACTIVATION, never more than
    # max = 1 at once; the job answers every queued message exactly once and exits; new work
    # launches it again, in the same slot, resuming the same checkpoint
    # the jobs' brokers run on the real clock: this broker's clock starts at the real time, so
    # the claims and RECEIVE times they write mean the same to it
    clock.set(time.time())
    setup_notifications(broker)
    broker.start()
    config = load_config(write_config(tmp_path, url, job_command(tmp_path / "ck"), high=1))
    activator = ExternalActivator(config, broker, launch=jobs.launch)

    first = begin(broker, pair, [1, 2, 3, 1], ended=1)
    broker.tasks.drain()  # a message on an idle queue: activation necessary (ACT-5a)
    jobs.hold_next = True
    assert activator.step() == 1
    # the job is held before it reads: its messages wait, and once the response time-out
    # passes the broker notifies again (ACT-8) — the activator is at max and launches nothing
    clock.advance(60)
    broker.tasks.drain()
    assert notifications(broker) == 1
    assert activator.step() == 0
    assert notifications(broker) == 0  # received and dropped
    assert activator.instances(pair.tq) == 1 and activator.peak[pair.tq] == 1
    os.kill(jobs.children[0].pid, signal.SIGCONT)
    assert "tq instance 0: 9 message(s) handled" in jobs.finish(0)
    assert answers(broker, pair) == expected(first)
    assert broker.peek(pair.tq) == [] and broker.views.conversation_group_claims() == []

    # a launch that dies right after planning its next batch (as Spark's latestOffset does):
    # the batch's groups stay claimed by the checkpoint's stream reader, and claimed messages
    # are no work for activation — no notification, nothing launched
    second = begin(broker, pair, [2, 1])
    (reader,) = broker.claims.readers()
    with Broker.open(url) as dying:  # the job's own broker, on the real clock as the job's
        dying.claims.plan(reader.reader, [pair.tq], reader.acknowledged)
    clock.advance(60)
    broker.tasks.drain()
    assert notifications(broker) == 0 and activator.step() == 0
    # new work launches the job again, in slot 0 on the same checkpoint: it resumes the claimed
    # batch, exactly as planned, then reads the new messages
    third = begin(broker, pair, [1])
    clock.advance(60)
    broker.tasks.drain()
    assert activator.step() == 1
    assert "tq instance 0: 4 message(s) handled" in jobs.finish(1)
    assert answers(broker, pair) == expected({**second, **third})
    assert broker.peek(pair.tq) == [] and broker.views.conversation_group_claims() == []
    # every dialog closed on both sides (what stays is the event notification's dialog)
    dialogs = broker.views.conversation_endpoints()
    assert [e for e in dialogs if e.far_service in (pair.initiator, pair.target)] == []
    # one slot, one checkpoint, one stream reader: every batch acknowledged
    assert jobs.instances == ["0", "0"] and activator.launched == 2 and activator.peak["tq"] == 1
    (resumed,) = broker.claims.readers()
    assert resumed.reader == reader.reader
    assert resumed.acknowledged == resumed.latest > reader.acknowledged + 1
    assert sorted(os.listdir(tmp_path / "ck" / "tq")) == ["instance-0", "spark-tmp"]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_activator_program_runs_spark_submit_and_the_job_outlives_a_claim_time_out(
    spark: Any, tmp_path: Path, url: str, broker: Broker, pair: Pair, clock: ManualClock
) -> None:
    # rule ACT-8: `servicebroker activator CONFIG.toml` as a program, the job through
    # spark-submit (which chooses the master: the job keeps it). The job's checkpoint comes
    # from a launch that died with a batch planned and stayed away past the claim time-out:
    # the batch was released, the job moves that checkpoint aside and answers everything
    checkpoint = tmp_path / "ck" / "tq" / "instance-0"
    clock.set(time.time())  # the Spark queries' brokers run on the real clock (see above)
    before = begin(broker, pair, [1])
    earlier = (  # the earlier launch, in this process: it answered `before`
        spark.readStream.format("servicebroker")
        .option("url", url)
        .option("queue", pair.tq)
        .load()
        .selectExpr(
            "conversation_handle",
            "'Resp' AS message_type_name",
            "message_body",
            "true AS end_conversation",
        )
        .writeStream.format("servicebroker")
        .option("url", url)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    earlier.awaitTermination()
    assert answers(broker, pair) == expected(before)
    setup_notifications(broker)
    broker.start()
    after = begin(broker, pair, [1, 2])
    (reader,) = broker.claims.readers()
    broker.claims.plan(reader.reader, [pair.tq], reader.acknowledged)  # and then it died
    clock.advance(1801)  # past the claim time-out (default 1800 s): the batch is released
    broker.tasks.drain()
    assert broker.views.conversation_group_claims() == [] and notifications(broker) >= 1

    submit = Path(sys.executable).with_name("spark-submit")
    if not submit.exists():
        submit = Path(shutil.which("spark-submit") or submit)
    launcher = [str(submit), "--master", "local[1]"]
    config = write_config(tmp_path, url, job_command(tmp_path / "ck", launcher), high=1)
    out = tmp_path / "activator.log"
    with open(out, "wb") as log:
        activator = subprocess.Popen(
            [sys.executable, "-m", "servicebroker.cli", "activator", config, "--timeout", "0.2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYSPARK_PYTHON=sys.executable),  # the workers' Python
            start_new_session=True,  # the jobs it launches too: killed together at the end
        )
    try:

        def handled() -> bool:
            assert activator.poll() is None, out.read_text(errors="replace")[-3000:]
            return "message(s) handled" in out.read_text(errors="replace")

        assert poll(handled, JOB_SECONDS, every=0.2), out.read_text(errors="replace")[-3000:]
        output = out.read_text(errors="replace")
        assert "tq instance 0: 3 message(s) handled on local[1]" in output
        assert "the checkpoint's batch was released after its claim time-out" in output
        assert answers(broker, pair) == expected(after)
        assert broker.peek(pair.tq) == [] and broker.peek("notify_q") == []
        assert broker.views.conversation_group_claims() == []
        aside = [p.name for p in checkpoint.parent.iterdir() if ".released-" in p.name]
        assert len(aside) == 1 and checkpoint.is_dir()  # kept for inspection; a new one
        readers = {r.reader: r for r in broker.claims.readers()}
        assert len(readers) == 2 and readers[reader.reader].released > reader.acknowledged
        state = json.loads(Path(load_config(config).state_file).read_text())
        ((pid, start, slot),) = state["tq"]  # one instance, in slot 0
        assert slot == 0
        # the job exits (a zombie until the activator looks)
        exited = poll(lambda: _start_time(pid) != start, JOB_SECONDS, every=0.2)
        assert exited, out.read_text(errors="replace")[-3000:]
        activator.send_signal(signal.SIGTERM)
        assert activator.wait(timeout=30) == 0
    finally:
        if activator.poll() is None:
            activator.kill()
            activator.wait()
        with contextlib.suppress(ProcessLookupError):  # whatever of the job is left
            os.killpg(activator.pid, signal.SIGKILL)
