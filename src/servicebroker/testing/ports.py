"""Ports for brokers started by tests and benchmarks on one machine."""

from __future__ import annotations

import random
import socket

__all__ = ["free_port"]

_GIVEN: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now, below the kernel's ephemeral range and
    not given out before in this process: between now and the listener's bind, neither the
    source port of an outgoing connection (always in the ephemeral range) nor another caller
    can take it.

    Raises:
        OSError: no such port found in 1,000 tries.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    for _ in range(1000):
        port = random.randrange(20000, ephemeral)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    raise OSError(f"no free port below the ephemeral range ({ephemeral}) on {host}")
