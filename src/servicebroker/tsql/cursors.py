"""Cursors (declare-cursor-transact-sql.md, open-transact-sql.md, fetch-transact-sql.md,
close-transact-sql.md, deallocate-transact-sql.md, cursor-status-transact-sql.md,
fetch-status-transact-sql.md): DECLARE … CURSOR FOR a SELECT over catalog views, queues, table
variables or the application's tables; OPEN reads every row of the SELECT then (every cursor is
STATIC here: what changes after OPEN is not seen, docs/tsql.md); FETCH NEXT | PRIOR | FIRST |
LAST | ABSOLUTE n | RELATIVE n moves in them and sets @@FETCH_STATUS; CLOSE and DEALLOCATE.

A cursor is GLOBAL unless declared LOCAL (the database default CURSOR_DEFAULT GLOBAL): a global
one lives in the session until DEALLOCATE, a local one for its batch or procedure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import TSqlError
from . import nodes as n
from .evaluate import evaluate
from .results import ResultSet
from .scope import Scope, to_type
from .types import BIGINT, Typed

__all__ = ["CURSOR_STATEMENTS", "Cursor", "Cursors"]


@dataclass
class Cursor:
    """One declared cursor: its SELECT, whether it scrolls, and — once open — its rows and
    position (-1 before the first row, ``len(rows)`` after the last)."""

    name: str
    select: n.SelectCore
    scroll: bool
    rows: list[list[Typed]] | None = None
    position: int = -1


@dataclass
class Cursors:
    """A session's cursors: ``global_`` (the session's), ``local`` (the running batch's or
    procedure's), @@FETCH_STATUS and @@CURSOR_ROWS."""

    global_: dict[str, Cursor] = field(default_factory=dict)
    local: dict[str, Cursor] = field(default_factory=dict)
    fetch_status: int = -1
    cursor_rows: int = 0

    def find(self, name: str, global_: bool, line: int) -> Cursor:
        """The cursor ``name``: a local one first unless ``global_`` (Msg 16916 when none)."""
        key = name.casefold()
        cursor = None if global_ else self.local.get(key)
        cursor = cursor or self.global_.get(key)
        if cursor is None:
            raise TSqlError(16916, f"A cursor with the name '{name}' does not exist.", line=line)
        return cursor

    def status(self, kind: str, name: str) -> int:
        """CURSOR_STATUS(``kind``, ``name``): 1 open with rows, 0 open and empty, -1 closed,
        -3 no such cursor ('variable': cursor variables are not run here, so -3)."""
        scope = {"local": self.local, "global": self.global_}.get(kind.casefold(), {})
        cursor = scope.get(name.casefold())
        if cursor is None:
            return -3
        if cursor.rows is None:
            return -1
        return 1 if cursor.rows else 0


class Session(Scope, Protocol):
    """What cursor statements need of the session (:class:`~.interpreter.Session`)."""

    cursors: Cursors
    rowcount: int
    nocount: bool

    def assign(self, name: str, value: Typed) -> None: ...
    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...


def _declare(session: Session, s: n.DeclareCursor) -> None:
    scope = session.cursors.local if s.local else session.cursors.global_
    if s.name.casefold() in scope:
        raise TSqlError(16915, f"A cursor with the name '{s.name}' already exists.", line=s.line)
    scope[s.name.casefold()] = Cursor(s.name, s.select, s.scroll)


def _statement(session: Session, s: n.CursorStatement) -> None:
    cursors = session.cursors
    cursor = cursors.find(s.name, s.global_, s.line)
    if s.kind == "OPEN":
        if cursor.rows is not None:
            raise TSqlError(16905, "The cursor is already open.", line=s.line)
        cursor.rows = session.subquery(cursor.select)  # STATIC: read once, now
        cursor.position = -1
        cursors.cursor_rows = len(cursor.rows)
    elif s.kind == "CLOSE":
        if cursor.rows is None:
            raise TSqlError(16917, "Cursor is not open.", line=s.line)
        cursor.rows = None
    else:  # DEALLOCATE
        for scope in (cursors.local, cursors.global_):
            if scope.get(s.name.casefold()) is cursor:
                del scope[s.name.casefold()]


def _fetch(session: Session, s: n.FetchCursor) -> None:
    cursors = session.cursors
    cursor = cursors.find(s.name, s.global_, s.line)
    rows = cursor.rows
    if rows is None:
        raise TSqlError(16917, "Cursor is not open.", line=s.line)
    if s.direction != "NEXT" and not cursor.scroll:
        raise TSqlError(
            16911,
            f"fetch: The fetch type {s.direction} cannot be used with forward only cursors.",
            line=s.line,
        )
    offset = 0
    if s.offset is not None:
        value = to_type(evaluate(s.offset, session), BIGINT, session)
        offset = int(value) if isinstance(value, int) else 0
    position = {
        "NEXT": cursor.position + 1,
        "PRIOR": cursor.position - 1,
        "FIRST": 0,
        "LAST": len(rows) - 1,
        "ABSOLUTE": offset - 1 if offset > 0 else len(rows) + offset if offset < 0 else -1,
        "RELATIVE": cursor.position + offset,
    }[s.direction]
    if not 0 <= position < len(rows):
        cursor.position = -1 if position < 0 else len(rows)
        cursors.fetch_status = -1
        session.rowcount = 0
        return
    cursor.position = position
    row = rows[position]
    if s.into:
        if len(s.into) != len(row):
            raise TSqlError(
                16924,
                "Cursorfetch: The number of variables declared in the INTO list must match "
                "that of selected columns.",
                line=s.line,
            )
        for name, value in zip(s.into, row, strict=True):
            session.assign(name, value)
    else:  # a FETCH without INTO returns the row
        names = [
            (item.alias or (item.expr.parts[-1] if isinstance(item.expr, n.Column) else ""))
            if isinstance(item, n.ExprItem)
            else ""
            for item in cursor.select.items
        ]
        if len(names) != len(row):
            names = [""] * len(row)
        session.emit(ResultSet([(m, v.type) for m, v in zip(names, row, strict=True)], [row]))
        if not session.nocount:
            session.emit(1)
    cursors.fetch_status = 0
    session.rowcount = 1


CURSOR_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    n.DeclareCursor: _declare,
    n.CursorStatement: _statement,
    n.FetchCursor: _fetch,
}
"""The statement runner of each cursor statement's node type."""
