"""Conversation priorities (PRI-1..18), pure: the level an endpoint gets when it is created, and
the order messages leave the transmission queue. (The CREATE / ALTER / DROP BROKER PRIORITY
statements are catalog statements: :mod:`servicebroker.ddl.changes`.)

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

from collections.abc import Iterable

from ..storage.rows import BrokerPriorityRow

__all__ = [
    "AGING_INTERVAL",
    "ANY",
    "DEFAULT_LEVEL",
    "BrokerPriority",
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


BrokerPriority = BrokerPriorityRow
"""A conversation priority as the catalog stores it (a row of ``conversation_priorities``):
``priority_id``, ``name``, the three criteria (``None`` is ANY) and ``priority`` 1..10."""


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
