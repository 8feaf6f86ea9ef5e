"""The external activator (ACT-8), as SQL Server's External Activator: ``servicebroker activator
CONFIG.toml`` watches the queue that receives QUEUE_ACTIVATION event notifications and launches
the configured command for the queue named in each one, keeping between ``min`` and ``max``
instances per queue.

Configuration::

    url = "sqlite:///broker.db"
    notification_queue = "activator_q"     # where the event notifications arrive
    state_file = "activator-state.json"    # optional; default CONFIG.state.json

    [[queue]]
    name = "orders_q"                       # the queue named in <ObjectName>
    command = ["spark-submit", "jobs/orders.py"]
    min = 0
    max = 4

Each launched process gets ``SERVICEBROKER_URL``, ``SERVICEBROKER_QUEUE`` and
``SERVICEBROKER_INSTANCE`` in its environment. The instance is the process's slot, 0 to
``max`` - 1: the lowest one no running instance of the queue holds, so instance 0 is the one
launched again and again, and two instances running at once never share a number. A job that
keeps state between runs (a Spark streaming job's checkpoint) keys it by the instance: each
concurrent instance has its own, and each launch resumes from the last one in its slot.

The processes it launched are recorded (pid, kernel start time and slot) in the state file
before the notification's RECEIVE commits, so an activator restarted after a crash adopts the
ones still running, in their slots, instead of launching them again.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .broker import Broker
from .catalog import EVENT_NOTIFICATION
from .dialogs import END_DIALOG, ERROR
from .errors import BrokerError
from .storage.failures import DATABASE_FAILURES

__all__ = [
    "ActivatorConfig",
    "ConfigError",
    "ExternalActivator",
    "Instance",
    "QueueLaunch",
    "load_config",
]

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0
"""Real seconds the activator waits before trying again while the database is away."""


class ConfigError(BrokerError):
    """The activator's configuration file is missing, unreadable or has a bad value."""


@dataclass(frozen=True)
class QueueLaunch:
    """What to launch for one queue: ``command`` (argv), between ``min`` and ``max`` instances."""

    name: str
    command: tuple[str, ...]
    min: int
    max: int


@dataclass(frozen=True)
class ActivatorConfig:
    """A parsed configuration file."""

    url: str
    notification_queue: str
    queues: dict[str, QueueLaunch]
    state_file: str


def load_config(path: str) -> ActivatorConfig:
    """Read and check a TOML configuration (see the module docstring).

    Raises:
        ConfigError: the file cannot be read or parsed, or a key is missing or bad; the
            message names the file and the key.
    """
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"activator configuration {path!r}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"activator configuration {path!r}: {exc}") from exc
    except UnicodeDecodeError as exc:  # a binary file: TOML is UTF-8 text
        raise ConfigError(f"activator configuration {path!r} is not UTF-8 text: {exc}") from exc

    def text(table: dict[str, object], key: str, where: str) -> str:
        value = table.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(
                f"activator configuration {path!r}: {where}{key} must be a non-empty string"
            )
        return value

    url = text(data, "url", "")
    notification_queue = text(data, "notification_queue", "")
    entries = data.get("queue")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            f"activator configuration {path!r}: at least one [[queue]] table is required"
        )
    queues: dict[str, QueueLaunch] = {}
    for i, entry in enumerate(entries):
        where = f"queue[{i}]."
        name = text(entry, "name", where)
        command = entry.get("command")
        if isinstance(command, str):
            command = command.split()
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(c, str) for c in command)
        ):
            raise ConfigError(
                f"activator configuration {path!r}: {where}command must be a list of strings"
            )
        low, high = entry.get("min", 0), entry.get("max", 1)
        if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high and high >= 1):
            raise ConfigError(
                f"activator configuration {path!r}: {where}min and max need 0 <= min <= max, max >= 1"
            )
        if name in queues:
            raise ConfigError(
                f"activator configuration {path!r}: queue {name!r} is configured twice"
            )
        queues[name] = QueueLaunch(name, tuple(command), low, high)
    state_file = data.get("state_file", f"{path}.state.json")
    if not isinstance(state_file, str):
        raise ConfigError(f"activator configuration {path!r}: state_file must be a string")
    base = os.path.dirname(os.path.abspath(path))
    return ActivatorConfig(url, notification_queue, queues, os.path.join(base, state_file))


class Instance(NamedTuple):
    """A launched process: its ``pid``, its kernel ``start`` time (a pid reused by another
    process does not match) and its ``slot`` (``SERVICEBROKER_INSTANCE``, 0 to max - 1)."""

    pid: int
    start: str
    slot: int


def _lowest_free(taken: Sequence[Instance]) -> int:
    """The lowest slot no instance in ``taken`` holds."""
    used = {i.slot for i in taken}
    slot = 0
    while slot in used:
        slot += 1
    return slot


def _start_time(pid: int) -> str | None:
    """The kernel start time of a process (Linux ``/proc``), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


@dataclass
class ExternalActivator:
    """Launches readers on QUEUE_ACTIVATION notifications.

    Args:
        config: the parsed configuration.
        broker: the broker on ``config.url``.
        launch: starts a process from (argv, environment) and returns its pid (default:
            :class:`subprocess.Popen`).

    Attributes:
        running: per queue, the instances running at the last look (see :meth:`instances`).
        launched: processes launched by this activator.
        peak: per queue, the most instances running at once, as this activator saw them (the
            adopted ones included): never more than the queue's ``max``.
    """

    config: ActivatorConfig
    broker: Broker
    launch: Callable[[Sequence[str], dict[str, str]], int] | None = None
    running: dict[str, list[Instance]] = field(default_factory=dict)
    launched: int = 0
    peak: dict[str, int] = field(default_factory=dict)
    _children: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._adopt()

    # -- the state file ------------------------------------------------------------------
    def _adopt(self) -> None:
        try:
            with open(self.config.state_file) as f:
                saved = json.load(f)
        except (OSError, ValueError):
            saved = {}
        for queue, procs in saved.items():
            alive: list[Instance] = []
            for pid, start, *slot in procs:  # a state file written before slots has none
                if _start_time(pid) == start:
                    alive.append(Instance(pid, start, slot[0] if slot else _lowest_free(alive)))
            if alive and queue in self.config.queues:
                self.running[queue] = alive
                self.peak[queue] = len(alive)

    def _save(self) -> None:
        tmp = f"{self.config.state_file}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.running, f)
        os.replace(tmp, self.config.state_file)

    # -- instances -----------------------------------------------------------------------
    def instances(self, queue: str) -> int:
        """Instances of ``queue``'s command still running (finished ones are forgotten, and
        their slots are free again)."""
        alive = []
        for instance in self.running.get(queue, []):
            child = self._children.get(instance.pid)
            if child is not None and child.poll() is not None:
                self._children.pop(instance.pid, None)
                continue
            if _start_time(instance.pid) == instance.start:
                alive.append(instance)
        self.running[queue] = alive
        return len(alive)

    def _start(self, q: QueueLaunch) -> None:
        slot = _lowest_free(self.running.get(q.name, []))
        env = dict(
            os.environ,
            SERVICEBROKER_URL=self.config.url,
            SERVICEBROKER_QUEUE=q.name,
            SERVICEBROKER_INSTANCE=str(slot),
        )
        if self.launch is not None:
            pid = self.launch(q.command, env)
        else:
            try:
                child = subprocess.Popen(list(q.command), env=env)
            except OSError as exc:
                raise ConfigError(
                    f"queue {q.name!r}: cannot start command {list(q.command)!r}: {exc}"
                ) from exc
            self._children[child.pid] = child
            pid = child.pid
        start = _start_time(pid) or ""
        running = self.running.setdefault(q.name, [])
        running.append(Instance(pid, start, slot))
        self.launched += 1
        self.peak[q.name] = max(self.peak.get(q.name, 0), len(running))
        self._save()

    # -- one step ------------------------------------------------------------------------
    def step(self, timeout: float = 0.0) -> int:
        """Keep every queue at ``min`` instances, then handle the notifications that arrive
        within ``timeout`` seconds: one more instance (up to ``max``) per QUEUE_ACTIVATION for
        a configured queue. Returns how many processes were launched."""
        before = self.launched
        for q in self.config.queues.values():
            while self.instances(q.name) < q.min:
                self._start(q)
        with self.broker.transaction() as tx:
            messages = tx.receive(self.config.notification_queue, timeout=timeout)
            for m in messages:
                if m.message_type_name in (END_DIALOG, ERROR):
                    tx.end_conversation(m.conversation_handle)
                    continue
                if m.message_type_name != EVENT_NOTIFICATION:
                    continue
                try:
                    root = ET.fromstring(m.message_body)
                except ET.ParseError:
                    continue
                if root.findtext("EventType") != "QUEUE_ACTIVATION":
                    continue
                target = self.config.queues.get(root.findtext("ObjectName") or "")
                if target is not None and self.instances(target.name) < target.max:
                    self._start(target)  # recorded before this RECEIVE commits
        return self.launched - before

    def run(self, stop: threading.Event, timeout: float = 5.0) -> None:
        """Step until ``stop`` is set. While the database is away (a connection lost, a full
        disk, an I/O error) it logs the failure and tries again a second later: the broker
        recovers by itself once the database is back."""
        while not stop.is_set():
            try:
                self.step(timeout)
            except DATABASE_FAILURES as exc:
                log.warning("external activator: %s; trying again in 1 s", exc)
                stop.wait(RETRY_SECONDS)
