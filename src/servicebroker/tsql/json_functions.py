"""T-SQL's JSON functions, as activation procedures read JSON message bodies with them:
``JSON_VALUE(expression, path)`` (json-value-transact-sql.md), ``JSON_QUERY(expression [,
path])`` (json-query-transact-sql.md) and ``ISJSON(expression)`` (isjson-transact-sql.md),
with the paths of json-path-expressions-sql-server.md: an optional ``lax`` (the default) or
``strict`` mode, ``$``, then ``.key``, ``."quoted key"`` and ``[index]`` steps.

In lax mode a path that finds nothing, or finds what the function does not return (an object
for JSON_VALUE, a scalar for JSON_QUERY, a string over 4,000 characters for JSON_VALUE), gives
NULL; in strict mode SQL Server's error (13608, 13623, 13624, 13625). Text that is not JSON is
Msg 13609 in either mode, a bad path Msg 13607. JSON_VALUE returns a number as written in the
text (``1.50`` stays ``1.50``) and ``true`` / ``false`` as those words, in an nvarchar(4000);
JSON_QUERY returns the fragment found as compact JSON text (SQL Server returns the fragment's own
text, whitespace included: docs/tsql.md) in an nvarchar(max). ISJSON is 1 for an object or an
array, 0 for anything else (a bare scalar too, as SQL Server before 2022), NULL for NULL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import NoReturn

from .scope import Scope, arity, fail
from .types import INT, NVARCHAR, NVARCHAR_MAX, Typed, convert

__all__ = ["JSON_FUNCTIONS"]


class _Number(str):
    """A JSON number as its text (JSON_VALUE returns it as written)."""


class _Missing:
    """What a path step finds where there is nothing."""


_MISSING = _Missing()
_STEP = re.compile(r'\.(?:([A-Za-z_][A-Za-z0-9_]*)|"((?:[^"\\]|\\.)*)")|\[(\d+)\]')


def _document(text: str, scope: Scope) -> object:
    try:
        return json.loads(
            text, parse_float=_Number, parse_int=_Number, parse_constant=_not_a_constant
        )
    except json.JSONDecodeError as exc:
        found = text[exc.pos] if exc.pos < len(text) else ""
        raise fail(
            13609,
            f"JSON text is not properly formatted. Unexpected character '{found}' is found at "
            f"position {exc.pos}.",
            scope,
        ) from None
    except RecursionError:
        raise fail(
            13606, "JSON text that has more than 128 nesting levels cannot be parsed.", scope
        ) from None


def _not_a_constant(word: str) -> object:
    raise json.JSONDecodeError(f"{word} is not JSON", word, 0)


def _path(path: str, scope: Scope) -> tuple[bool, list[str | int]]:
    """``path`` as (strict, steps); Msg 13607 where it is not a JSON path."""
    rest = path.lstrip()
    strict = False
    for mode in ("strict", "lax"):
        if rest[: len(mode)].lower() == mode and rest[len(mode) : len(mode) + 1].isspace():
            strict = mode == "strict"
            rest = rest[len(mode) :].lstrip()
            break
    offset = len(path) - len(rest)
    if not rest.startswith("$"):
        raise _bad_path(path, offset, scope)
    steps: list[str | int] = []
    at = 1
    while at < len(rest):
        match = _STEP.match(rest, at)
        if match is None:
            raise _bad_path(path, offset + at, scope)
        if match[3] is not None:
            steps.append(int(match[3]))
        elif match[1] is not None:
            steps.append(match[1])
        else:
            steps.append(json.loads(f'"{match[2]}"'))
        at = match.end()
    return strict, steps


def _bad_path(path: str, position: int, scope: Scope) -> Exception:
    found = path[position] if position < len(path) else ""
    return fail(
        13607,
        f"JSON path is not properly formatted. Unexpected character '{found}' is found at "
        f"position {position}.",
        scope,
    )


def _find(document: object, steps: list[str | int]) -> object:
    here = document
    for step in steps:
        if isinstance(step, int):
            if not isinstance(here, list) or step >= len(here):
                return _MISSING
            here = here[step]
        else:
            if not isinstance(here, dict) or step not in here:
                return _MISSING
            here = here[step]
    return here


def _text_argument(value: Typed, scope: Scope) -> str | None:
    if value.value is None:
        return None
    return str(convert(value.value, value.type, NVARCHAR_MAX))


def _dump(value: object) -> str:
    """``value`` as compact JSON text, numbers as written."""
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_dump(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, _Number):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


_ERRORS = {
    13608: "Property cannot be found on the specified JSON path.",
    13623: "Scalar value cannot be found in the specified JSON path.",
    13624: "Object or array cannot be found in the specified JSON path.",
    13625: "String value in the specified JSON path would be truncated.",
}


class _Null(Exception):
    """Lax mode's answer where strict mode raises: NULL."""


def _absent(strict: bool, number: int, scope: Scope) -> NoReturn:
    """Strict mode: SQL Server's error ``number``; lax mode: NULL (:class:`_Null`)."""
    if strict:
        raise fail(number, _ERRORS[number], scope)
    raise _Null


def _lookup(text: str, path: str, scope: Scope) -> tuple[bool, object]:
    """The path's mode (strict) and what it finds in the JSON ``text``."""
    strict, steps = _path(path, scope)
    found = _find(_document(text, scope), steps)
    if found is _MISSING:
        _absent(strict, 13608, scope)
    return strict, found


def _json_value(args: list[Typed], scope: Scope) -> Typed:
    arity(args, scope, 2, "JSON_VALUE")
    text, path = _text_argument(args[0], scope), _text_argument(args[1], scope)
    try:
        if text is None or path is None:
            raise _Null
        strict, found = _lookup(text, path, scope)
        if isinstance(found, dict | list):
            _absent(strict, 13623, scope)
        if found is None:
            raise _Null
        value = ("true" if found else "false") if isinstance(found, bool) else str(found)
        if len(value) > 4000:
            _absent(strict, 13625, scope)
        return Typed(value, NVARCHAR)
    except _Null:
        return Typed(None, NVARCHAR)


def _json_query(args: list[Typed], scope: Scope) -> Typed:
    arity(args, scope, (1, 2), "JSON_QUERY")
    text = _text_argument(args[0], scope)
    path = _text_argument(args[1], scope) if len(args) == 2 else "$"
    try:
        if text is None or path is None:
            raise _Null
        strict, found = _lookup(text, path, scope)
        if not isinstance(found, dict | list):
            _absent(strict, 13624, scope)
        return Typed(_dump(found), NVARCHAR_MAX)
    except _Null:
        return Typed(None, NVARCHAR_MAX)


def _isjson(args: list[Typed], scope: Scope) -> Typed:
    arity(args, scope, 1, "ISJSON")
    text = _text_argument(args[0], scope)
    if text is None:
        return Typed(None, INT)
    try:
        document = json.loads(text, parse_constant=_not_a_constant)
    except (json.JSONDecodeError, RecursionError):
        return Typed(0, INT)
    return Typed(int(isinstance(document, dict | list)), INT)


JSON_FUNCTIONS: Mapping[str, Callable[[list[Typed], Scope], Typed]] = {
    "JSON_VALUE": _json_value,
    "JSON_QUERY": _json_query,
    "ISJSON": _isjson,
}
"""The JSON functions by name (merged into :data:`.functions.FUNCTIONS`)."""
