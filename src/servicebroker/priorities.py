"""Conversation priorities (PRI-1..10): CREATE/ALTER/DROP BROKER PRIORITY and the level an
endpoint gets when it is created.

:func:`priority_level` is the pure PRI-6 precedence: the first of eight patterns that a priority
matches wins — (contract, local, remote), (contract, local, ANY), (contract, ANY, remote),
(contract, ANY, ANY), (ANY, local, remote), (ANY, local, ANY), (ANY, ANY, remote),
(ANY, ANY, ANY) — and no match gives level 5 (PRI-10). The initiator endpoint's local service
is the initiator service and its remote the target; the target endpoint's the other way round
(PRI-3, PRI-4). A level is given when the endpoint is created and kept (PRI-5); each endpoint
gets its own (PRI-7); a message in a queue carries the level of the endpoint that receives it
(PRI-8).

:func:`transmission_order` is the order messages leave the transmission queue (PRI-14..18): by
level, then send order, across every destination. Where HONOR_BROKER_PRIORITY is OFF every
message counts as level 5 (PRI-16), so the order is the send order. Starvation prevention
(PRI-18), this project's rule since Microsoft gives no numbers: a waiting message's *effective*
level rises by one for every ``aging_interval`` seconds it has waited (default
:data:`AGING_INTERVAL`), up to 10; equal effective levels leave oldest first. A level-1 message
therefore waits at most 9 intervals before it competes with level 10, and the messages of one
conversation (one level, PRI-5) still leave in send order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import CatalogError
from .storage.base import StorageConnection

__all__ = [
    "AGING_INTERVAL",
    "ANY",
    "DEFAULT_LEVEL",
    "BrokerPriority",
    "alter_broker_priority",
    "create_broker_priority",
    "drop_broker_priority",
    "priority_level",
    "transmission_level",
    "transmission_order",
]

ANY = "ANY"
DEFAULT_LEVEL = 5
"""PRI-2, PRI-10: the level when PRIORITY_LEVEL is not given, and when no priority matches."""
MAX_LEVEL = 10
AGING_INTERVAL = 10.0
"""PRI-18: seconds of waiting that raise a transmission-queue message's level by one."""

_PRECEDENCE = (
    (True, True, True),
    (True, True, False),
    (True, False, True),
    (True, False, False),
    (False, True, True),
    (False, True, False),
    (False, False, True),
    (False, False, False),
)


@dataclass(frozen=True, slots=True)
class BrokerPriority:
    """A conversation priority; ``None`` criteria are ANY (a row of ``conversation_priorities``)."""

    priority_id: int
    name: str
    service_contract_name: str | None
    local_service_name: str | None
    remote_service_name: str | None
    priority: int


def priority_level(
    priorities: Iterable[BrokerPriority], contract: str, local_service: str, remote_service: str
) -> int:
    """The level of a new endpoint by the PRI-6 precedence (``DEFAULT_LEVEL`` without a match).
    Names compare byte for byte (DLG-1)."""
    by_pattern: dict[tuple[bool, bool, bool], int] = {}
    for p in priorities:
        pattern = (
            p.service_contract_name is not None,
            p.local_service_name is not None,
            p.remote_service_name is not None,
        )
        if (
            (p.service_contract_name is None or p.service_contract_name == contract)
            and (p.local_service_name is None or p.local_service_name == local_service)
            and (p.remote_service_name is None or p.remote_service_name == remote_service)
        ):
            by_pattern.setdefault(pattern, p.priority)
    for pattern in _PRECEDENCE:
        if pattern in by_pattern:
            return by_pattern[pattern]
    return DEFAULT_LEVEL


def _criterion(kind: str, value: object) -> str | None:
    if value is None or value == ANY:
        return None
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"broker priority: {kind} must be a name or 'ANY', got {value!r}")
    return value


def _level(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise CatalogError(
            f"broker priority {name!r}: PRIORITY_LEVEL must be an integer from 1 to 10, got {value!r}"
        )
    return value


def create_broker_priority(
    conn: StorageConnection,
    existing: Mapping[str, BrokerPriority],
    name: str,
    *,
    contract_name: str,
    local_service_name: str,
    remote_service_name: str,
    priority_level: int,
) -> None:
    """CREATE BROKER PRIORITY (PRI-2). Raises :class:`CatalogError` for a bad or taken name, a
    bad criterion, or a level outside 1..10."""
    from .catalog import check_name

    check_name("broker priority", name)
    if name in existing:
        raise CatalogError(f"broker priority {name!r} already exists")
    conn.catalog_write(
        "insert_broker_priority",
        (
            name,
            _criterion("CONTRACT_NAME", contract_name),
            _criterion("LOCAL_SERVICE_NAME", local_service_name),
            _criterion("REMOTE_SERVICE_NAME", remote_service_name),
            _level(name, priority_level),
        ),
    )


def alter_broker_priority(
    conn: StorageConnection,
    existing: Mapping[str, BrokerPriority],
    name: str,
    *,
    contract_name: str | None,
    local_service_name: str | None,
    remote_service_name: str | None,
    priority_level: int | None,
) -> None:
    """ALTER BROKER PRIORITY: change the criteria and level given (None keeps one); existing
    conversations keep their levels (PRI-5). Raises :class:`CatalogError` for an unknown name
    or bad values."""
    p = existing.get(name)
    if p is None:
        raise CatalogError(f"broker priority {name!r} does not exist")
    conn.catalog_write(
        "update_broker_priority",
        (
            p.service_contract_name
            if contract_name is None
            else _criterion("CONTRACT_NAME", contract_name),
            p.local_service_name
            if local_service_name is None
            else _criterion("LOCAL_SERVICE_NAME", local_service_name),
            p.remote_service_name
            if remote_service_name is None
            else _criterion("REMOTE_SERVICE_NAME", remote_service_name),
            p.priority if priority_level is None else _level(name, priority_level),
            p.priority_id,
        ),
    )


def drop_broker_priority(
    conn: StorageConnection, existing: Mapping[str, BrokerPriority], name: str
) -> None:
    """DROP BROKER PRIORITY. Raises :class:`CatalogError` for an unknown name."""
    p = existing.get(name)
    if p is None:
        raise CatalogError(f"broker priority {name!r} does not exist")
    conn.catalog_write("delete_broker_priority", (p.priority_id,))


def transmission_level(
    priority: int, waited: float, *, honor: bool, aging_interval: float | None = AGING_INTERVAL
) -> int:
    """The level a transmission-queue message leaves at (PRI-14, PRI-16, PRI-18).

    Args:
        priority: its conversation endpoint's level, 1..10.
        waited: seconds since it entered the transmission queue (broker clock).
        honor: the database's HONOR_BROKER_PRIORITY; when False the level is 5 (PRI-16).
        aging_interval: seconds per level of aging; None gives strict priority (no aging).
    """
    if not honor:
        return DEFAULT_LEVEL
    if aging_interval is None or waited <= 0:
        return priority
    return min(MAX_LEVEL, priority + int(waited // aging_interval))


def transmission_order(
    rows: Iterable[tuple[int, int, float]],
    now: float,
    *,
    honor: bool,
    aging_interval: float | None = AGING_INTERVAL,
) -> list[int]:
    """The transmission ids of ``rows`` in the order they leave (PRI-14): effective level
    (:func:`transmission_level`) descending, then transmission id (send order).

    Args:
        rows: ``(transmission_id, priority, enqueue_time)`` of waiting messages.
        now: the broker clock's time, seconds.
        honor: HONOR_BROKER_PRIORITY (PRI-16).
        aging_interval: see :func:`transmission_level`.
    """
    keyed = [
        (
            -transmission_level(prio, now - enqueued, honor=honor, aging_interval=aging_interval),
            tid,
        )
        for tid, prio, enqueued in rows
    ]
    return [tid for _, tid in sorted(keyed)]
