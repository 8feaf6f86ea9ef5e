"""What watching a broker costs it: benchmarks/throughput.py's SEND + RECEIVE run, side by side
with the broker not started (a library: nothing published), started (its background work
publishing its statistics every second) and started with the web console (``servicebroker
console``, its own process) reading every second — its overview page, a queue page and
``/metrics``, as a browser tab left open and a Prometheus scrape would — in one invocation,
rounds alternated so that the machine's drift hits all alike.

    python benchmarks/console_cost.py [--messages 20000] [--batch 10] [--shape groups]
        [--rounds 3] [--every 1.0]

It prints each round and the medians; the console reads (SQLite readers beside the writer, the
lock file asked with F_OFD_GETLK) and takes no lock a broker waits on, so the started columns
should differ by no more than the rounds differ among themselves.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import broker_run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Observer:
    """``servicebroker console`` on ``path`` in a process of its own, and a thread reading its
    pages every ``every`` seconds until :meth:`stop`."""

    def __init__(self, path: str, every: float) -> None:
        self.port = _free_port()
        self.every = every
        self.reads = 0
        self.failures = 0
        self._stop = threading.Event()
        exe = Path(sys.executable).with_name("servicebroker")
        self._proc = subprocess.Popen(
            [str(exe), "console", "--url", path, "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)
        deadline = time.monotonic() + 30
        while True:
            try:
                self._client.get("/").raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    self._proc.kill()
                    raise RuntimeError("servicebroker console did not start") from None
                time.sleep(0.1)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.every):
            for page in ("/", "/queues/tq", "/metrics"):
                try:
                    self._client.get(page).raise_for_status()
                    self.reads += 1
                except httpx.HTTPError:
                    self.failures += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._client.close()
        self._proc.terminate()
        self._proc.wait(10)


@contextmanager
def watching(path: str, every: float, reads: list[int]) -> Iterator[None]:
    """The console watches ``path`` while the block runs; appends the pages it read."""
    observer = Observer(path, every)
    try:
        yield
    finally:
        observer.stop()
        reads.append(observer.reads)
        if observer.failures:
            print(f"warning: {observer.failures} console reads failed", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--shape", default="groups")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between reads")
    args = parser.parse_args()
    console = Console()
    table = Table(
        title=f"SEND + RECEIVE msg/s, SQLite, batch {args.batch}, shape {args.shape}, "
        f"{args.messages:,} messages, console read every {args.every:g} s"
    )
    for col in (
        "round",
        "not started",
        "started (publishing)",
        "started + console",
        "pages read",
        "console vs started",
    ):
        table.add_column(col, justify="right")
    library: list[float] = []
    plain: list[float] = []
    watched: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            lib = args.messages / broker_run(
                os.path.join(folder, f"library{r}.db"), args.messages, args.batch, args.shape
            )
            a = args.messages / broker_run(
                os.path.join(folder, f"plain{r}.db"),
                args.messages,
                args.batch,
                args.shape,
                start=True,
            )
            reads: list[int] = []
            path = os.path.join(folder, f"watched{r}.db")
            seconds = broker_run(
                path,
                args.messages,
                args.batch,
                args.shape,
                around=lambda path=path, reads=reads: watching(path, args.every, reads),
                start=True,
            )
            b = args.messages / seconds
            library.append(lib)
            plain.append(a)
            watched.append(b)
            table.add_row(
                str(r + 1),
                f"{lib:,.0f}",
                f"{a:,.0f}",
                f"{b:,.0f}",
                str(reads[0]),
                f"{b / a - 1:+.1%}",
            )
    lib, a, b = statistics.median(library), statistics.median(plain), statistics.median(watched)
    table.add_row("median", f"{lib:,.0f}", f"{a:,.0f}", f"{b:,.0f}", "", f"{b / a - 1:+.1%}")
    console.print(table)
    spread = (max(plain) - min(plain)) / a
    console.print(f"spread of the started rounds without the console: {spread:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
