"""What every part of the ``servicebroker`` data source shares: its option error, option
parsing helpers and the queue schema of the rows it reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import BrokerError
from ..messages import Message

__all__ = [
    "QUEUE_SCHEMA",
    "SparkOptionError",
    "clock_at",
    "message_tuple",
    "open_broker",
    "positive_int",
    "positive_seconds",
    "required",
]

QUEUE_SCHEMA = (
    "status int, priority int, queuing_order long, conversation_group_id string, "
    "conversation_handle string, message_sequence_number long, service_name string, "
    "service_id int, service_contract_name string, service_contract_id int, "
    "message_type_name string, message_type_id int, validation string, message_body binary, "
    "message_enqueue_time timestamp, message_id string, queue_name string"
)
"""The DataFrame schema of a queue: the QUE-2 columns plus ``queue_name``."""


class SparkOptionError(BrokerError):
    """A ``servicebroker`` data source option or column is missing or bad."""


def required(options: Mapping[str, str], name: str, what: str) -> str:
    """Option ``name`` (lower case, as Spark passes it).

    Raises:
        SparkOptionError: it is missing or blank; the message names it and ``what`` it is.
    """
    value = options.get(name.lower())
    if value is None or not str(value).strip():
        raise SparkOptionError(f"servicebroker data source: option {name!r} ({what}) is required")
    return str(value)


def positive_int(options: Mapping[str, str], key: str, name: str) -> int | None:
    """Option ``key`` (lower case) as an integer >= 1, or None when not given.

    Raises:
        SparkOptionError: not such an integer; the message names the option as ``name``.
    """
    text = options.get(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SparkOptionError(
            f"servicebroker data source: option {name!r} must be an integer >= 1, got {text!r}"
        )
    return value


def positive_seconds(options: Mapping[str, str], key: str, name: str) -> float | None:
    """Option ``key`` (lower case) as a finite number of seconds > 0, or None when not given.

    Raises:
        SparkOptionError: not such a number; the message names the option as ``name``.
    """
    text = options.get(key)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise SparkOptionError(
            f"servicebroker data source: option {name!r} must be a number of seconds > 0, got {text!r}"
        )
    return value


def clock_at(options: Mapping[str, str]) -> float | None:
    """Option ``clock``: the broker time (epoch seconds) the data source's statements run at,
    for brokers whose clock is simulated (a replay, the demo, whose clock follows the data);
    None (the default): the system clock.

    Raises:
        SparkOptionError: not a finite number.
    """
    text = options.get("clock")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        raise SparkOptionError(
            f"servicebroker data source: option 'clock' must be epoch seconds, got {text!r}"
        )
    return value


def open_broker(url: str, at: float | None) -> Any:
    """:meth:`servicebroker.Broker.open` of ``url``, on a clock standing at ``at`` when given
    (see :func:`clock_at`)."""
    from ..broker import Broker
    from ..clock import ManualClock

    return Broker.open(url) if at is None else Broker.open(url, clock=ManualClock(at))


def message_tuple(m: Message) -> tuple[Any, ...]:
    """A message as a row of :data:`QUEUE_SCHEMA`."""
    return (
        m.status,
        m.priority,
        m.queuing_order,
        str(m.conversation_group_id),
        str(m.conversation_handle),
        m.message_sequence_number,
        m.service_name,
        m.service_id,
        m.service_contract_name,
        m.service_contract_id,
        m.message_type_name,
        m.message_type_id,
        m.validation,
        bytearray(m.message_body),
        m.message_enqueue_time,
        str(m.message_id),
        m.queue_name,
    )
