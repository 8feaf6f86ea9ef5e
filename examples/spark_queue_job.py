"""A Spark streaming job for one queue, made to be launched by the external activator
(``servicebroker activator CONFIG.toml``; see docs/howto-spark-activation.md).

It reads the queue through the ``servicebroker`` streaming source with Trigger.AvailableNow —
the messages queued when it starts, in micro-batches of whole conversation groups — answers
them through the ``servicebroker`` streaming sink, and exits once they are all answered::

    python examples/spark_queue_job.py --reply-type //shop/Receipt --checkpoints /var/lib/sb
    spark-submit --master local[2] examples/spark_queue_job.py --reply-type //shop/Receipt ...

The activator tells it what to read in its environment: ``SERVICEBROKER_URL`` (the broker),
``SERVICEBROKER_QUEUE`` (the queue) and ``SERVICEBROKER_INSTANCE`` (its slot, 0 to max - 1).
The checkpoint is ``CHECKPOINTS/<queue>/instance-<n>``: each launch in a slot resumes the
query of the one before it (the same stream reader, whose last batch it acknowledges), and two
instances running at once never share one.

Per conversation in a micro-batch (each conversation group is whole in one Spark task, so a
task sees all of a conversation's messages of the batch, in order):

- every message of the application's types gets a reply of type ``--reply-type`` with the
  request's body (put your own work in :func:`reply_body`), and the conversation is ended
  after its last reply: Microsoft's request/reply pattern, the target ending the dialog;
- a conversation whose messages include an EndDialog or Error message (the other side ended
  it) is only ended: nothing can be sent on it any more.

So a dialog's requests are answered when they reach the queue before the job starts and fit in
one micro-batch (``--max-messages``); one that comes later finds its conversation ended (END
CONVERSATION removes what is left of it from the queue) — the tutorial pattern of one request
per dialog. Change :func:`answers` for dialogs that live longer.

The replies, the END CONVERSATIONs and the acknowledgement of the batch's messages happen
exactly once per micro-batch, also when the job is killed and launched again (the sink records
each committed batch; the source gives an unfinished batch again to the next launch).

It prints ``<queue> instance <n>: <m> message(s) handled on <master>`` when done. Exit
status: 0 when the queued messages were answered, 1 when the query failed (the error is
printed), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
SYSTEM_TYPES = "http://schemas.microsoft.com/SQL/ServiceBroker/"
"""Message types of the broker's own (EndDialog, Error, DialogTimer …): never answered."""

RELEASED = "was released after its claim time-out"
"""What the source's StreamClaimError says when a checkpoint's batch was released."""

REPLY_SCHEMA = (
    "conversation_handle string, message_type_name string, message_body binary, "
    "end_conversation boolean"
)
"""The sink's columns this job writes (see servicebroker.spark.dialog_rows)."""


def reply_body(request: bytes) -> bytes:
    """The body of the reply to a request: here the request's own body. Your work goes here."""
    return request


def answers(reply_type: str) -> Any:
    """The function ``mapInPandas`` runs on each task's messages: one sink row per reply or
    END CONVERSATION (see the module docstring)."""

    def answer(chunks: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        frames = list(chunks)
        if not frames:
            return
        messages = pd.concat(frames, ignore_index=True)
        rows: list[tuple[str, str | None, bytes | None, bool]] = []
        for handle, conversation in messages.groupby("conversation_handle", sort=False):
            types = list(conversation["message_type_name"])
            if END_DIALOG in types or ERROR in types:
                rows.append((str(handle), None, None, True))
                continue
            requests = [
                bytes(body)
                for kind, body in zip(types, conversation["message_body"], strict=True)
                if not kind.startswith(SYSTEM_TYPES)
            ]
            for i, body in enumerate(requests):
                rows.append((str(handle), reply_type, reply_body(body), i == len(requests) - 1))
            if not requests:  # only the broker's own messages (a DialogTimer): end it
                rows.append((str(handle), None, None, True))
        yield pd.DataFrame(
            rows,
            columns=[
                "conversation_handle",
                "message_type_name",
                "message_body",
                "end_conversation",
            ],
        )

    return answer


def spark_session(master: str, work_dir: str) -> Any:
    """A SparkSession with the ``servicebroker`` data source: on ``master`` when run by
    ``python``, on the master spark-submit was given when run by ``spark-submit``."""
    from servicebroker.spark import session

    if "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit started the JVM and chose the master
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        master = SparkConf().get("spark.master", master)
    return session(master, app_name="servicebroker-queue-job", temp_dir=work_dir)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see ``--help``)."""
    parser = argparse.ArgumentParser(
        description="Answer the messages queued on $SERVICEBROKER_QUEUE with Spark, then exit."
    )
    parser.add_argument("--reply-type", required=True, help="message type of the replies")
    parser.add_argument(
        "--checkpoints",
        default=os.environ.get("SERVICEBROKER_CHECKPOINTS"),
        help="folder of the checkpoints, one per queue and instance (default: "
        "$SERVICEBROKER_CHECKPOINTS)",
    )
    parser.add_argument(
        "--max-messages",
        type=int,
        default=1000,
        help="messages per micro-batch, at most (whole conversation groups; default 1000)",
    )
    parser.add_argument(
        "--claim-timeout",
        type=float,
        default=None,
        help="seconds a killed job's unfinished batch stays claimed before other readers may "
        "take it (default: the source's, 1800)",
    )
    parser.add_argument(
        "--master", default="local[2]", help="Spark master under python (default local[2])"
    )
    args = parser.parse_args(argv)
    if not args.checkpoints:
        parser.error("give --checkpoints or $SERVICEBROKER_CHECKPOINTS")
    if args.max_messages < 1:
        parser.error("--max-messages must be at least 1")
    missing = [v for v in ("SERVICEBROKER_URL", "SERVICEBROKER_QUEUE") if not os.environ.get(v)]
    if missing:
        parser.error(f"{' and '.join(missing)} not set (the activator sets them)")
    return args


def answer_queue(
    spark: Any, args: argparse.Namespace, url: str, queue: str, checkpoint: str
) -> int:
    """Run the query once, to the end of what is queued; the messages it read.

    Raises:
        Exception: Spark's StreamingQueryException when the query failed.
    """
    reader = (
        spark.readStream.format("servicebroker")
        .option("url", url)
        .option("queue", queue)
        .option("maxMessagesPerBatch", str(args.max_messages))
    )
    if args.claim_timeout is not None:
        reader = reader.option("claimTimeout", str(args.claim_timeout))
    replies = reader.load().mapInPandas(answers(args.reply_type), REPLY_SCHEMA)
    query = (
        replies.writeStream.format("servicebroker")
        .option("url", url)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sum(int(p.get("numInputRows", 0)) for p in query.recentProgress)


def main(argv: list[str] | None = None) -> int:
    """Run the job once; the exit status (see the module docstring)."""
    args = parse_args(argv)
    url, queue = os.environ["SERVICEBROKER_URL"], os.environ["SERVICEBROKER_QUEUE"]
    instance = os.environ.get("SERVICEBROKER_INSTANCE", "0")
    folder = os.path.join(os.path.abspath(args.checkpoints), quote(queue, safe=""))
    checkpoint = os.path.join(folder, f"instance-{instance}")
    spark = spark_session(args.master, os.path.join(folder, "spark-tmp"))
    try:
        try:
            rows = answer_queue(spark, args, url, queue, checkpoint)
        except Exception as exc:
            if RELEASED not in str(exc):
                raise
            # An earlier launch died with a batch planned, and the batch's claim timed out:
            # its messages went back to the queue, and this checkpoint's stream reader can
            # never resume. Keep the checkpoint for inspection; start a new one (a new reader).
            aside = f"{checkpoint}.released-{time.strftime('%Y%m%dT%H%M%S')}"
            os.replace(checkpoint, aside)
            print(
                f"{queue} instance {instance}: the checkpoint's batch was released after its "
                f"claim time-out; moved it to {aside}, starting a new one",
                file=sys.stderr,
                flush=True,
            )
            rows = answer_queue(spark, args, url, queue, checkpoint)
        master = spark.sparkContext.master
        print(f"{queue} instance {instance}: {rows} message(s) handled on {master}", flush=True)
    except Exception as exc:  # a failed query: StreamingQueryException names the cause
        print(f"{queue} instance {instance}: the query failed: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
