"""What every part of the ``servicebroker`` data source shares: its option error, option
parsing helpers and the queue schema of the rows it reads."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import BrokerError
from ..messages import Message

if TYPE_CHECKING:
    from ..broker import Broker

_N = TypeVar("_N", int, float)

__all__ = [
    "QUEUE_SCHEMA",
    "SparkOptionError",
    "clock_at",
    "message_tuple",
    "number_option",
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


def number_option(
    options: Mapping[str, str],
    name: str,
    convert: Callable[[str], _N],
    valid: Callable[[_N], bool],
    what: str,
) -> _N | None:
    """Option ``name`` (looked up lower case, as Spark passes it) converted by ``convert``
    (``int`` or ``float``), or None when not given.

    Raises:
        SparkOptionError: it does not convert, or ``valid`` refuses it; the message names the
            option and says it must be ``what``.
    """
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not valid(value):
        raise SparkOptionError(
            f"servicebroker data source: option {name!r} must be {what}, got {text!r}"
        )
    return value


def positive_int(options: Mapping[str, str], name: str) -> int | None:
    """Option ``name`` as an integer >= 1 (a count), or None when not given.

    Raises:
        SparkOptionError: not such an integer; the message names the option.
    """
    return number_option(options, name, int, lambda v: v >= 1, "an integer >= 1")


def positive_seconds(options: Mapping[str, str], name: str) -> float | None:
    """Option ``name`` as a finite number of seconds > 0, or None when not given.

    Raises:
        SparkOptionError: not such a number; the message names the option.
    """
    return number_option(
        options, name, float, lambda v: 0 < v < math.inf, "a number of seconds > 0"
    )


def clock_at(options: Mapping[str, str]) -> float | None:
    """Option ``clock``: the broker time (epoch seconds) the data source's statements run at,
    for brokers whose clock is simulated (a replay, the demo, whose clock follows the data);
    None (the default): the system clock.

    Raises:
        SparkOptionError: not a finite number.
    """
    return number_option(options, "clock", float, math.isfinite, "epoch seconds")


def open_broker(url: str, at: float | None) -> Broker:
    """:meth:`servicebroker.Broker.open` of ``url``, on a clock standing at ``at`` when given
    (see :func:`clock_at`); the data source's one way to a broker (imported when called, so
    ``servicebroker.spark`` loads without the broker until it is used).

    Raises:
        StorageError: the database cannot be opened. BrokerError: a bad URL.
    """
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
