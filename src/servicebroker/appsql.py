"""The check that keeps the application's SQL (``tx.execute``, ``tx.executemany``) from ending
the broker's transaction: transaction-control statements are refused before they reach the
database, for the broker's transaction owns commit and rollback — a COMMIT run as application
SQL would commit the application's rows while the message it received went back to the queue
at the broker's rollback, or the reverse.

It is a lexer-level check, not a SQL parser: the text is split into statements at semicolons
outside string literals, quoted identifiers, comments, PostgreSQL dollar quotes and the bodies
of CREATE FUNCTION … BEGIN ATOMIC … END / CREATE TRIGGER … BEGIN … END, and the first keyword of
each statement is looked at. ``tx.execute`` reads the text as its database reads it:
PostgreSQL (nested ``/* */`` comments, ``E'…'`` strings with backslash escapes, ``$tag$``
quotes) or SQLite (``[…]`` and backquoted identifiers); without a database named, both
readings are made, and the text is refused if either finds transaction control.

Why not a SQL library: sqlparse, the one well-kept Python SQL lexer, reads PostgreSQL unlike
PostgreSQL in ways that let a COMMIT through — a backslash in a standard string taken as an
escape (``SELECT 'a\\'; COMMIT; --'``), ``#`` (XOR) taken as a comment, nested comments not
nested, any BEGIN or DECLARE inside CREATE taken as a block (``CREATE TABLE t (declare int);
COMMIT`` is one statement to it) — and fixing that meant editing its lexer's rule strings, which
a new release could silently undo. The tests hold each of those texts. A decision is remembered
per text (an application runs a few constant texts again and again).

Limits (docs/limits.md): what runs inside the database is not looked at — a DO block or a
procedure that commits is the application's own risk (PostgreSQL refuses COMMIT in a function
and in a DO block or CALL run inside a transaction block anyway, and SQLite has no procedures).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import BrokerError, TransactionError

__all__ = [
    "TRANSACTION_CONTROL",
    "check_application_sql",
    "driver_refusals",
    "statement_keywords",
]

TRANSACTION_CONTROL = frozenset(
    {"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"}
)
"""First keywords of a statement that begins, ends or splits a transaction (PostgreSQL and
SQLite); PREPARE is refused when PREPARE TRANSACTION follows."""

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def _skip_quoted(text: str, i: int, close: str, *, backslash: bool = False) -> int:
    """The index after the quote that closes the one at ``i`` (a doubled quote is part of the
    text), or the end of the text."""
    n = len(text)
    i += 1
    while i < n:
        c = text[i]
        if backslash and c == "\\":
            i += 2
            continue
        if c == close:
            if i + 1 < n and text[i + 1] == close:
                i += 2
                continue
            return i + 1
        i += 1
    return n


def _skip_comment(text: str, i: int, *, nested: bool) -> int:
    """The index after the ``/* */`` comment opening at ``i`` (nested as PostgreSQL nests
    them when ``nested``), or the end of the text."""
    depth = 0
    n = len(text)
    while i < n:
        if text.startswith("/*", i) and (nested or depth == 0):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _words(text: str, *, postgres: bool) -> Iterator[str]:
    """The words of ``text`` outside literals and comments, upper-cased, with ``";"`` for each
    statement separator."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n\f\v":
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            i = _skip_comment(text, i, nested=postgres)
        elif c == "'":
            i = _skip_quoted(text, i, "'")
        elif c == '"':
            i = _skip_quoted(text, i, '"')
        elif not postgres and c == "[":
            end = text.find("]", i)
            i = n if end < 0 else end + 1
        elif not postgres and c == "`":
            i = _skip_quoted(text, i, "`")
        elif postgres and c == "$" and (m := _DOLLAR.match(text, i)):
            end = text.find(m.group(), m.end())
            i = n if end < 0 else end + len(m.group())
        elif c == ";":
            yield ";"
            i += 1
        elif m := _WORD.match(text, i):
            word = m.group().upper()
            i = m.end()
            if postgres and word == "E" and text.startswith("'", i):
                i = _skip_quoted(text, i, "'", backslash=True)
                continue
            yield word
        else:
            i += 1


_ROUTINE = frozenset({"FUNCTION", "PROCEDURE"})
_TRIGGER = frozenset({"TRIGGER"})
_CREATE_PREFIXES = frozenset({"OR", "REPLACE", "TEMP", "TEMPORARY"})


def _creates(words: list[str], kinds: frozenset[str]) -> bool:
    """Whether ``words`` (a statement so far, beginning with CREATE) create one of ``kinds``:
    CREATE [OR REPLACE] [TEMP | TEMPORARY] kind … — not a table that has a column named so."""
    for word in words[1:]:
        if word in kinds:
            return True
        if word not in _CREATE_PREFIXES:
            return False
    return False


def _first_three(words: list[str]) -> tuple[str, str, str]:
    padded = [*words[:3], "", ""]
    return padded[0], padded[1], padded[2]


def statement_keywords(text: str, *, postgres: bool) -> list[tuple[str, str, str]]:
    """The first three words of each statement of ``text`` (``""`` where there is none), read
    as PostgreSQL (``postgres``) or SQLite reads it. A CREATE statement's BEGIN ATOMIC … END
    body (PostgreSQL) or trigger body BEGIN … END (SQLite), with the CASE … END expressions in
    it, stays inside the statement in either reading."""
    found: list[tuple[str, str, str]] = []
    current: list[str] = []
    depth = 0
    for word in _words(text, postgres=postgres):
        if word == ";" and depth == 0:
            if current:
                found.append(_first_three(current))
            current = []
            continue
        if word == ";":
            continue
        if current and current[0] == "CREATE":
            body = (
                word == "ATOMIC" and current[-1] == "BEGIN" and _creates(current, _ROUTINE)
            ) or (word == "BEGIN" and _creates(current, _TRIGGER))
            if body or (depth and word == "CASE"):
                depth += 1
            elif depth and word == "END":
                depth -= 1
        current.append(word)
    if current:
        found.append(_first_three(current))
    return found


def check_application_sql(
    sql: object, statement: str = "tx.execute", *, postgres: bool | None = None
) -> str:
    """``sql``, checked to be text with no transaction-control statement in it.

    Args:
        sql: the application's SQL text (one statement, or several where the driver runs
            several: PostgreSQL without parameters).
        statement: names the call in the message (``tx.execute``, ``tx.executemany``).
        postgres: read the text as PostgreSQL (True) or SQLite (False) reads it — a ``$$``
            function body is one string to PostgreSQL and SQL to SQLite; None: both readings,
            refused if either finds transaction control.

    Raises:
        TransactionError: a statement of the text begins with BEGIN, START [TRANSACTION],
            COMMIT, END, ROLLBACK, ABORT, SAVEPOINT, RELEASE or PREPARE TRANSACTION, in any
            case, after any comments: the broker's transaction owns commit and rollback; or,
            read as PostgreSQL, changes the pooled session beyond the transaction (SET without
            LOCAL, RESET, DISCARD) or how strings are read (SET [LOCAL]
            standard_conforming_strings / backslash_quote).
        BrokerError: ``sql`` is not a string, or holds a lone surrogate.
    """
    if not isinstance(sql, str):
        raise BrokerError(f"{statement} needs SQL text (a str), got {type(sql).__name__}")
    surrogate = _SURROGATE.search(sql)
    if surrogate is not None:
        raise BrokerError(
            f"{statement}: the SQL text holds a lone surrogate (U+{ord(surrogate.group()):04X}) "
            f"at character {surrogate.start()}: it is not valid Unicode text"
        )
    readings = (True, False) if postgres is None else (bool(postgres),)
    keyword = (
        _remembered_control(sql, readings)
        if len(sql) <= _MEMO_LENGTH
        else _find_control(sql, readings)
    )
    if keyword is not None:
        raise TransactionError(f"{statement}: {keyword}")
    return sql


_MEMO_LENGTH = 10_000
"""Texts up to this many characters have their decision remembered (an application's SQL is
mostly a few constant texts, run again and again: the main job's INSERT per flight)."""


def _find_control(sql: str, readings: tuple[bool, ...]) -> str | None:
    """Why a statement of ``sql`` is refused, read as PostgreSQL (True) or SQLite (False)
    reads it, for each of ``readings``; or None."""
    for postgres in readings:
        for first, second, third in statement_keywords(sql, postgres=postgres):
            if first in TRANSACTION_CONTROL or (first == "PREPARE" and second == "TRANSACTION"):
                keyword = f"{first} {second}".strip() if first == "PREPARE" else first
                return (
                    f"{keyword} is transaction control, which the application's SQL may not "
                    f"run: the broker's transaction owns commit and rollback — use tx.commit() "
                    f"or tx.rollback() (or leave the with block)"
                )
            if postgres and (
                first in _SESSION_STATE or (first == "SET" and second not in _SET_IN_TRANSACTION)
            ):
                return (
                    f"{first} {second}".strip()
                    + " changes the database session beyond this transaction, and the session "
                    "goes back to the broker's pool for other transactions: use SET LOCAL"
                )
            if postgres and first == "SET" and _STRING_SYNTAX & {second, third}:
                return (
                    "SET standard_conforming_strings changes how this check reads string "
                    "literals: the broker's sessions keep PostgreSQL's default"
                )
    return None


_SESSION_STATE = frozenset({"RESET", "DISCARD"})
"""PostgreSQL statements that change the session for every later transaction on it."""
_SET_IN_TRANSACTION = frozenset({"LOCAL", "TRANSACTION", "CONSTRAINTS"})
"""SET forms whose effect ends with the transaction."""
_STRING_SYNTAX = frozenset({"STANDARD_CONFORMING_STRINGS", "BACKSLASH_QUOTE"})


_remembered_control = functools.lru_cache(maxsize=512)(_find_control)


@contextmanager
def driver_refusals(statement: str) -> Iterator[None]:
    """Turn what the database driver raises, before anything reaches the database, for
    parameters it cannot take — not a sequence or mapping, a value it cannot convert, a number
    too large, a string with a lone surrogate — into a :class:`BrokerError` naming
    ``statement``; the transaction goes on (errors of the database itself are the storage's
    :class:`~servicebroker.errors.StorageError`).
    """
    try:
        yield
    except (TypeError, ValueError, OverflowError) as exc:  # UnicodeError is a ValueError
        raise BrokerError(
            f"{statement}: the database driver refused the parameters ({type(exc).__name__}: {exc})"
        ) from exc
