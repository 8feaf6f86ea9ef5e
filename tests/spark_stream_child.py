"""The streaming query of tests/test_spark_kill.py, in a process tree of its own (this Python
driver, its JVM, the JVM's Python workers) that the parent SIGKILLs whole and starts again on
the same checkpoint.

Usage::

    .venv/bin/python tests/spark_stream_child.py URL CHECKPOINT --work DIR --seen FILE
        [--queue tq] [--max-messages N] [--partitions P] [--master M] [--available-now]

The query: ``readStream.format("servicebroker")`` on the queue → for each message a reply
``Echo`` on its conversation (``conversation_handle``) whose body is the message's body, ``|``
and its ``message_id``; with ``end_conversation`` on the dialog's last message (type ``Last``)
→ ``writeStream`` to the ``servicebroker`` sink. Without ``--available-now`` it runs until it is
killed; with it, it drains what is queued when it starts and exits 0.

What each batch saw, recorded twice over by a test subclass of the data source
(``servicebroker_kill_test``, used for both the source and the sink; the real source and sink do
all the work):

- each task of the source, after reading its part, appends ``{"read": [low, high, part],
  "ids": [...]}`` (the message ids of the part, in order) to ``--seen`` + ``.read-<pid>`` (a file
  per process: no interleaving);
- the sink's driver-side ``commit`` appends ``{"batch": id, "pid": pid, "bodies": [...]}`` to
  ``--seen`` (the reply bodies of the batch in the order the sink applies them, so the original
  messages and their message ids), runs the real commit, then appends ``{"batch": id,
  "applied": bool}`` (whether this commit applied the batch or found it recorded already).

An attempt killed before it wrote leaves nothing; a part or batch run again after a crash
leaves a second line, which must equal the first (the test's proof that a re-run batch sees
exactly the same messages, in the same order). A line cut by a kill mid-write is skipped by
the reader of the files.

The fault hook: ``SERVICEBROKER_TEST_CRASH_AFTER_SINK_COMMIT=<Spark batch id>`` makes that
batch's commit, once it applied the batch (the broker transaction committed), SIGKILL the whole
process tree (every process of this program's session) before Spark writes its commit log —
the crash between the sink's commit and Spark's. The batch run again after the restart finds
its record and applies nothing. Test-only code: it lives here, not in src/.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import signal
import sys
import tempfile
import time
from typing import Any

CRASH_ENV = "SERVICEBROKER_TEST_CRASH_AFTER_SINK_COMMIT"
FORMAT = "servicebroker_kill_test"


def session_processes(sid: int, exclude: int | None = None) -> list[int]:
    """The live (not zombie) processes of session ``sid``, but ``exclude``."""
    import psutil

    out = []
    for p in psutil.process_iter(["status"]):
        if p.pid == exclude or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if os.getsid(p.pid) == sid:
                out.append(p.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return out


def kill_session(sid: int, exclude: int | None = None) -> int:
    """SIGKILL every process of session ``sid`` (a program started with
    ``start_new_session=True`` and everything it started, even processes that moved to a
    process group of their own, as PySpark's worker daemon does), but ``exclude``: first
    SIGSTOP them until no new one appears (none forks meanwhile), then SIGKILL them all.
    Returns how many were killed."""
    stopped: set[int] = set()
    for _ in range(50):
        found = set(session_processes(sid, exclude)) - stopped
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(stopped)


def _append(path: str, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def test_source() -> type:
    """The ``servicebroker`` data source with the recording, crash-injecting sink."""
    from servicebroker.spark import ServiceBrokerDataSource, parse_stream_options
    from servicebroker.spark.stream_reader import QueueStreamReader
    from servicebroker.spark.stream_writer import BatchRows, DialogStreamWriter

    body_at = 7  # message_body in dialog_rows.FIELDS

    class RecordingWriter(DialogStreamWriter):
        def __init__(self, inner: DialogStreamWriter, seen: str, crash_after: int | None) -> None:
            super().__init__(inner.opts)
            self.seen = seen
            self.crash_after = crash_after

        def commit(self, messages: list[Any], batchId: int) -> None:
            parts = sorted(
                (m for m in messages if isinstance(m, BatchRows)), key=lambda m: m.partition_id
            )
            bodies = [bytes(r[body_at]).decode() for m in parts for r in m.rows]
            _append(self.seen, {"batch": batchId, "pid": os.getpid(), "bodies": bodies})
            super().commit(messages, batchId)
            applied = bool(self.last and self.last[4])
            _append(self.seen, {"batch": batchId, "applied": applied})
            if applied and batchId == self.crash_after:
                # after the sink's commit, before Spark's commit log: the whole tree dies
                kill_session(os.getsid(0), exclude=os.getpid())
                os.kill(os.getpid(), signal.SIGKILL)

    id_at = 15  # message_id in options.QUEUE_SCHEMA

    class RecordingReader(QueueStreamReader):
        def __init__(self, opts: Any, seen: str) -> None:
            super().__init__(opts)
            self.seen = seen

        def read(self, partition: Any) -> Any:
            rows = list(super().read(partition))
            where = [partition.low, partition.high, partition.part]
            _append(
                f"{self.seen}.read-{os.getpid()}", {"read": where, "ids": [r[id_at] for r in rows]}
            )
            return iter(rows)

    class KillTestSource(ServiceBrokerDataSource):
        @classmethod
        def name(cls) -> str:
            return FORMAT

        def streamReader(self, schema: Any) -> Any:
            return RecordingReader(parse_stream_options(self.options), self.options["seenlog"])

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            inner = super().streamWriter(schema, overwrite)
            crash = self.options.get("crashaftersinkcommit")
            return RecordingWriter(
                inner, self.options["seenlog"], None if crash in (None, "") else int(crash)
            )

    return KillTestSource


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("checkpoint")
    parser.add_argument("--work", required=True, help="a folder for Spark's local files")
    parser.add_argument("--seen", required=True, help="the file of what each batch saw")
    parser.add_argument("--queue", default="tq")
    parser.add_argument("--max-messages", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]", help="Spark's master (default local[2])")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1)
    os.makedirs(args.work, exist_ok=True)
    from pyspark.sql import functions as F

    from servicebroker.spark import session

    spark = session(args.master, temp_dir=tempfile.mkdtemp(dir=args.work))
    spark.dataSource.register(test_source())
    source = (
        spark.readStream.format(FORMAT)
        .option("url", args.url)
        .option("seenLog", os.path.abspath(args.seen))
        .option("queue", args.queue)
        .option("maxMessagesPerBatch", str(args.max_messages))
        .option("partitions", str(args.partitions))
        .load()
    )
    replies = source.select(
        "conversation_handle",
        F.lit("Echo").alias("message_type_name"),
        F.concat(
            F.col("message_body"), F.encode(F.concat(F.lit("|"), F.col("message_id")), "UTF-8")
        ).alias("message_body"),
        (F.col("message_type_name") == "Last").alias("end_conversation"),
    )
    writer = (
        replies.writeStream.format(FORMAT)
        .option("url", args.url)
        .option("seenLog", os.path.abspath(args.seen))
        .option("crashAfterSinkCommit", os.environ.get(CRASH_ENV, ""))
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    began = time.monotonic()
    query = writer.start()
    print(f"started {query.id}", flush=True)
    query.awaitTermination()
    print(f"done in {time.monotonic() - began:.1f}s", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
