"""Keeping Spark's start-up noise out of the user's way.

A JVM started for PySpark prints, before any logging setting of ours applies, lines that say
nothing about the user's job: the incubator module Spark 4's launcher adds
(``WARNING: Using incubator modules: jdk.incubator.vector``), the default logging profile in use,
the loopback address it will not bind to, the native Hadoop library it lacks. :func:`launch_quietly`
starts the JVM with our logging profile (errors only, ``log4j2.properties`` beside this module),
binds it to 127.0.0.1 unless ``SPARK_LOCAL_IP`` says otherwise, and passes the JVM's own
standard error through a filter that drops those lines and forwards every other one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from importlib import resources
from typing import TypeVar

__all__ = ["LOG4J2_PROPERTIES", "NOISE", "java_options", "launch_quietly"]

T = TypeVar("T")

LOG4J2_PROPERTIES = str(resources.files(__package__).joinpath("log4j2.properties"))
"""Our Spark logging profile: errors only, on standard error."""

NOISE = (
    b"WARNING: Using incubator modules:",
    b"Using Spark's default log4j profile:",
    b'Setting default log level to "WARN".',
    b"To adjust logging level use sc.setLogLevel(",
)
"""Starts of the JVM's standard-error lines dropped (each is printed before logging applies)."""


def java_options(existing: str | None = None) -> str:
    """``spark.driver.extraJavaOptions`` with our logging profile added to ``existing``."""
    ours = f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}"
    return ours if not existing else f"{existing} {ours}"


def _forward(read_fd: int) -> None:
    """Copy lines from ``read_fd`` to this process's standard error (wherever it points at
    the time), dropping :data:`NOISE`; ends at end of file."""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        pending = b""
        while chunk := pipe.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.startswith(NOISE):
                    os.write(2, line + b"\n")
        if pending and not pending.startswith(NOISE):
            os.write(2, pending)


def launch_quietly(start: Callable[[], T]) -> T:
    """Run ``start`` (which may launch the Spark JVM) with ``SPARK_LOCAL_IP`` defaulting to
    127.0.0.1 and this process's standard error, as the JVM inherits it, replaced by a pipe whose
    lines :data:`NOISE` filters; this process's own standard error is restored when ``start``
    returns. Returns what ``start`` returns; what it raises passes through."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    read_fd, write_fd = os.pipe()
    saved = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    threading.Thread(target=_forward, args=(read_fd,), name="spark-stderr", daemon=True).start()
    try:
        return start()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
