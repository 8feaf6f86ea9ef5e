"""T-SQL's comparison of two values: NULL compares as UNKNOWN, the lower type is converted to
the higher one, strings compare as the default collation does (case-insensitive, trailing
blanks ignored); and LIKE's patterns.
"""

from __future__ import annotations

import re

from .scope import Scope, fail, to_type
from .types import SqlType, Typed, precedence_of

__all__ = ["compare", "like_pattern"]


def like_pattern(pattern: str) -> re.Pattern[str]:
    """LIKE's ``pattern`` (``%``, ``_``, ``[a-c]``, ``[^a]``) as a case-insensitive regular
    expression to ``fullmatch``."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("^"):
                    body = "^" + re.escape(body[1:]).replace("\\-", "-")
                else:
                    body = re.escape(body).replace("\\-", "-")
                out.append(f"[{body}]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out), re.S | re.I)


def _comparable(value: Typed, other: Typed, scope: Scope) -> object:
    target = precedence_of(value.type, other.type)
    converted = to_type(value, SqlType(target.name, None, target.scale), scope)
    if isinstance(converted, str):
        return converted.rstrip(
            " "
        ).casefold()  # the default collation: case-insensitive, trailing blanks ignored
    return converted


def compare(op: str, left: Typed, right: Typed, scope: Scope) -> bool | None:
    """``left op right`` for ``op`` in ``= <> != < > <= >= !< !>``: None (UNKNOWN) when either
    is NULL, else compared in the type of higher precedence.

    Raises:
        TSqlError: a conversion the comparison needs fails (245, …); Msg 402, types that do
            not compare.
    """
    if left.value is None or right.value is None:
        return None
    a = _comparable(left, right, scope)
    b = _comparable(right, left, scope)
    try:
        if op == "=":
            return bool(a == b)
        if op in ("<>", "!="):
            return bool(a != b)
        if op == "<":
            return bool(a < b)  # type: ignore[operator]
        if op == ">":
            return bool(a > b)  # type: ignore[operator]
        if op in ("<=", "!>"):
            return bool(a <= b)  # type: ignore[operator]
        if op in (">=", "!<"):
            return bool(a >= b)  # type: ignore[operator]
    except TypeError:
        raise fail(
            402,
            f"The data types {left.type} and {right.type} are incompatible in the {op} operator.",
            scope,
        ) from None
    raise AssertionError(op)
