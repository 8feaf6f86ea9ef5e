"""Ports for brokers started by tests and benchmarks on one machine."""

from __future__ import annotations

import os
import random
import re
import socket

__all__ = ["free_port"]

_GIVEN: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now, below the kernel's ephemeral range and
    not given out before in this process: between now and the listener's bind, neither the
    source port of an outgoing connection (always in the ephemeral range) nor another caller
    can take it (nor another pytest-xdist worker: each has its own share, see :func:`_share`).

    Raises:
        OSError: no such port found in 1,000 tries.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    low, high = _share(20000, ephemeral)
    for _ in range(1000):
        port = random.randrange(low, high)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    raise OSError(f"no free port in {low}-{high - 1} (below the ephemeral range) on {host}")


def _share(low: int, high: int) -> tuple[int, int]:
    """This process's share of ``low``-``high``: under pytest-xdist (``PYTEST_XDIST_WORKER``
    ``gwN`` of ``PYTEST_XDIST_WORKER_COUNT``; its child processes inherit both) the N-th of as
    many equal slices, so that two workers never hand out the same port between a test's choice
    and its listener's bind; the whole range otherwise."""
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", ""))
    except ValueError:
        return low, high
    if worker is None or count < 1 or int(worker[1]) >= count:
        return low, high
    size = (high - low) // count
    start = low + int(worker[1]) * size
    return start, start + size
