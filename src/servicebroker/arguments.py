"""Checks of the Service Broker statements' arguments against the limits Microsoft's reference
documents for them (each limit and its page: docs/limits.md): an ``int`` error code, an
``nvarchar(3000)`` description that must travel as XML text, a TOP count, a TIMEOUT in
milliseconds, a flag that must be a ``bool``. Names are checked by
:func:`servicebroker.catalog.check_name`; durations by :func:`servicebroker.clock.check_seconds`.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from .errors import BrokerError, ConversationError

__all__ = [
    "MAX_INT",
    "MAX_TOP",
    "MAX_WAIT_SECONDS",
    "check_end_arguments",
    "check_flag",
    "check_int",
    "check_top",
    "check_wait",
    "check_xml_text",
    "message_tuples",
    "short_repr",
]

MAX_INT = 2**31 - 1
"""The largest T-SQL ``int``: END CONVERSATION's failure_code, BEGIN DIALOG's LIFETIME and BEGIN
CONVERSATION TIMER's TIMEOUT (seconds) are ``int``."""
MAX_TOP = 2**63 - 1
"""The largest RECEIVE TOP (n) the storage can hold (a ``bigint``)."""
MAX_WAIT_SECONDS = MAX_INT / 1000
"""RECEIVE and GET CONVERSATION GROUP take WAITFOR … TIMEOUT in ``int`` milliseconds: at most
2,147,483.647 seconds (-1, here also None, waits without limit)."""
_NOT_XML_TEXT = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""A character XML 1.0 does not allow in text (its ``Char`` production): the C0 controls other
than tab, LF and CR, lone surrogates, U+FFFE and U+FFFF."""


def check_int(
    value: object,
    what: str,
    *,
    minimum: int,
    maximum: int = MAX_INT,
    error: type[BrokerError] = BrokerError,
) -> int:
    """``value`` as an integer from ``minimum`` to ``maximum``.

    Raises:
        BrokerError (or ``error``): not an ``int`` (``bool`` is refused) or out of range; the
            message names ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{what} must be an integer, got {short_repr(value)}")
    if not minimum <= value <= maximum:
        raise error(f"{what} must be an integer from {minimum} to {maximum}, got {value}")
    return value


def check_flag(value: object, what: str, *, error: type[BrokerError] = BrokerError) -> bool:
    """``value``, which must be ``True`` or ``False`` (not a truthy string such as ``'yes'``).

    Raises:
        BrokerError (or ``error``): anything else; the message names ``what``.
    """
    if not isinstance(value, bool):
        raise error(f"{what} must be True or False, got {short_repr(value)}")
    return value


def check_xml_text(
    value: object, what: str, *, limit: int, error: type[BrokerError] = BrokerError
) -> str:
    """``value`` as a string of at most ``limit`` characters that XML can carry as text, as
    the Error message's body carries END CONVERSATION's DESCRIPTION to the far side.

    Raises:
        BrokerError (or ``error``): not a ``str``, longer than ``limit``, or holding a character
            XML 1.0 does not allow (NUL and the other C0 controls but tab, LF and CR; a lone
            surrogate; U+FFFE, U+FFFF); the message names ``what`` and the character.
    """
    if not isinstance(value, str):
        raise error(f"{what} must be a string, got {short_repr(value)}")
    if len(value) > limit:
        raise error(f"{what} is {len(value)} characters; the limit is {limit}")
    bad = _NOT_XML_TEXT.search(value)
    if bad is not None:
        raise error(
            f"{what} holds U+{ord(bad.group()):04X} at character {bad.start()}, which XML "
            f"text cannot carry"
        )
    return value


def check_top(value: object, statement: str) -> int:
    """A TOP (n) count: None for no limit (returned as -1), else an integer from 0 to
    :data:`MAX_TOP`.

    Raises:
        BrokerError: any other value; the message names ``statement``.
    """
    if value is None:
        return -1
    return check_int(value, f"{statement} TOP", minimum=0, maximum=MAX_TOP)


def check_wait(value: object, statement: str) -> float | None:
    """A WAITFOR TIMEOUT in seconds: None or -1 waits without limit (returned as None), else a
    number from 0 to :data:`MAX_WAIT_SECONDS`.

    Raises:
        BrokerError: not a number, NaN, infinite (use None), negative other than -1, or above
            the maximum; the message names ``statement``.
    """
    if value is None or (type(value) in (int, float) and value == -1):
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_WAIT_SECONDS
        or math.isnan(value)
    ):
        raise BrokerError(
            f"{statement} timeout must be seconds from 0 to {MAX_WAIT_SECONDS:.12g}, or -1 or None "
            f"to wait without limit, got {short_repr(value)}"
        )
    return float(value)


def message_tuples(
    messages: object, error: type[BrokerError] = BrokerError
) -> Iterator[tuple[Any, Any, Any]]:
    """The ``(conversation handle, message type, body)`` items of SEND's ``send_many``.

    Raises:
        BrokerError (or ``error``): ``messages`` is not iterable, or an item is not a tuple
            (or list) of three.
    """
    if not isinstance(messages, Iterable):
        raise error(f"SEND: send_many needs an iterable of messages, got {short_repr(messages)}")
    for item in messages:
        if not isinstance(item, tuple | list) or len(item) != 3:
            raise error(
                f"SEND: send_many needs (conversation handle, message type, body) tuples, "
                f"got {short_repr(item)}"
            )
        yield item[0], item[1], item[2]


def short_repr(value: object) -> str:
    """``repr(value)`` cut to 60 characters, for an error message about a bad value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def check_end_arguments(cleanup: object, error: object, description: object) -> None:
    """END CONVERSATION's arguments (end-conversation-transact-sql.md): WITH CLEANUP a bool and
    alone; WITH ERROR an int from 1 to 2**31-1 with a DESCRIPTION of XML text, nvarchar(3000).

    Raises:
        ConversationError: naming the argument at fault.
    """
    check_flag(cleanup, "END CONVERSATION WITH CLEANUP", error=ConversationError)
    if cleanup and (error is not None or description is not None):
        raise ConversationError("END CONVERSATION WITH CLEANUP takes no ERROR or DESCRIPTION")
    if error is not None or description is not None:
        what = "END CONVERSATION WITH ERROR"
        check_int(error, f"{what} code", minimum=1, error=ConversationError)
        check_xml_text(description, f"{what} DESCRIPTION", limit=3000, error=ConversationError)


def check_broker_instance(value: object, own: uuid.UUID | None, statement: str) -> str | None:
    """The ``'service_broker_guid'`` of BEGIN DIALOG … TO SERVICE 'name', 'guid' (RTE-2): a
    :class:`uuid.UUID` or its text, or ``"CURRENT DATABASE"`` for this database's own ``own``;
    returns the canonical text, None when ``value`` is None.

    Raises:
        ConversationError: neither, naming ``statement`` and the value.
    """
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        if value.strip().upper() == "CURRENT DATABASE":
            return None if own is None else str(own)
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise ConversationError(
        f"{statement}: broker instance {short_repr(value)} is not a service_broker_guid "
        f"(a GUID) or 'CURRENT DATABASE'"
    )
