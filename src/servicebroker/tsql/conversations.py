"""The conversation statements of T-SQL, run by a session on its database's broker
(begin-dialog-conversation-transact-sql.md, send-transact-sql.md, receive-transact-sql.md,
get-conversation-group-transact-sql.md, end-conversation-transact-sql.md,
begin-conversation-timer-transact-sql.md, move-conversation-transact-sql.md): each evaluates
its arguments as SQL Server does (a handle converts to UNIQUEIDENTIFIER, a body to VARBINARY:
an NVARCHAR as UTF-16LE) and calls the broker transaction's statement of the same name.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .catalog_rows import QUEUE_COLUMNS, message_row
from .evaluate import evaluate
from .queries import RowSource, run_query
from .results import ResultSet
from .scope import Scope, to_type
from .table_variables import TableVariable, fill_from_receive
from .types import BIGINT, INT, NVARCHAR, UNIQUEIDENTIFIER, SqlType, Typed
from .unsupported import not_supported

__all__ = ["CONVERSATION_STATEMENTS", "Session"]


class Session(Scope, Protocol):
    """What a conversation statement needs of the session that runs it
    (:class:`~servicebroker.tsql.interpreter.Session`): the evaluation scope and these."""

    rowcount: int
    nocount: bool
    database: str

    def statement_transaction(self) -> AbstractContextManager[Transaction]: ...
    def table_variable(self, name: str) -> TableVariable: ...
    def assign(self, name: str, value: Typed) -> None: ...
    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...


def _handle(session: Session, expr: n.Expr) -> uuid.UUID:
    value = evaluate(expr, session)
    converted = to_type(value, UNIQUEIDENTIFIER, session)
    if converted is None:
        raise TSqlError(
            8426,
            "The conversation handle is missing. Specify a conversation handle.",
            line=session.line,
        )
    assert isinstance(converted, uuid.UUID)
    return converted


def _begin_dialog(session: Session, s: n.BeginDialog) -> None:
    to_service = to_type(evaluate(s.to_service, session), NVARCHAR, session)
    if to_service is None:
        raise TSqlError(
            8434,
            "The TO SERVICE name is NULL. Specify the name of the target service.",
            line=s.line,
        )
    kwargs: dict[str, object] = {
        "contract": s.contract or "DEFAULT",
        "encryption": s.encryption,
    }
    if s.broker_instance is not None:
        kwargs["to_broker_instance"] = to_type(
            evaluate(s.broker_instance, session), NVARCHAR, session
        )
    for key, expr in s.options:
        value = evaluate(expr, session)
        if key == "RELATED_CONVERSATION":
            kwargs["related_conversation"] = to_type(value, UNIQUEIDENTIFIER, session)
        elif key == "RELATED_CONVERSATION_GROUP":
            kwargs["related_conversation_group"] = to_type(value, UNIQUEIDENTIFIER, session)
        elif key == "LIFETIME":
            lifetime = to_type(value, INT, session)
            kwargs["lifetime"] = float(lifetime) if isinstance(lifetime, int) else None
        else:
            raise TSqlError(102, f"Incorrect syntax near '{key}'.", severity=15, line=s.line)
    with session.statement_transaction() as tx:
        handle = tx.begin_dialog(s.from_service, str(to_service), **kwargs)  # type: ignore[arg-type]
    session.assign(s.variable, Typed(handle, UNIQUEIDENTIFIER))


def _send(session: Session, s: n.Send) -> None:
    handles = [_handle(session, h) for h in s.handles]
    body = b""
    if s.body is not None:
        value = evaluate(s.body, session)
        converted = to_type(value, SqlType("VARBINARY"), session)
        assert converted is None or isinstance(converted, bytes)
        body = converted or b""
    with session.statement_transaction() as tx:
        tx.send(handles if len(handles) > 1 else handles[0], s.message_type or "DEFAULT", body)


def _timeout(session: Session, waitfor: bool, expr: n.Expr | None) -> float | None:
    if not waitfor:
        return 0.0
    if expr is None:
        return None
    ms = to_type(evaluate(expr, session), BIGINT, session)
    if ms is None or (isinstance(ms, int) and ms < 0):
        return None  # TIMEOUT -1 (or NULL): wait without limit
    assert isinstance(ms, int)
    return ms / 1000.0


def _receive(session: Session, s: n.Receive) -> None:
    into = session.table_variable(s.into) if s.into is not None else None
    queue = s.queue[-1]
    top = None
    if s.top is not None:
        top_value = to_type(evaluate(s.top, session), BIGINT, session)
        top = int(top_value) if isinstance(top_value, int) else None
    where: dict[str, uuid.UUID] = {}
    if s.where is not None:
        where = _receive_where(session, s.where)
    timeout = _timeout(session, s.waitfor, s.timeout)
    if len(s.queue) == 3 and s.queue[0].casefold() != session.database.casefold():
        raise not_supported("RECEIVE from a queue of another database", s.line)
    with session.statement_transaction() as tx:
        messages = tx.receive(queue, top=top, timeout=timeout, **where)
        rows = [message_row(m) for m in messages]
        source = RowSource(QUEUE_COLUMNS, rows)
        query = run_query(n.SelectCore(s.items, source=s.queue), session, _Fixed(source))
        if into is not None:  # to the table variable, by position; refused: rolled back
            fill_from_receive(into, [t for _, t in query.columns], query.rows, session)
    session.rowcount = len(rows)
    if into is not None:  # rows inserted into the table variable are counted as INSERT's are
        if not session.nocount:
            session.emit(len(rows))
        return
    if query.assigns:
        for name, value in query.assignments:
            session.assign(name, value)
        return
    session.emit(ResultSet(query.columns, query.rows))
    if not session.nocount:
        session.emit(len(query.rows))


def _receive_where(session: Session, cond: n.Cond) -> dict[str, uuid.UUID]:
    if isinstance(cond, n.Compare) and cond.op == "=" and isinstance(cond.left, n.Column):
        column = cond.left.parts[-1].casefold()
        if column in ("conversation_handle", "conversation_group_id"):
            value = to_type(evaluate(cond.right, session), UNIQUEIDENTIFIER, session)
            assert isinstance(value, uuid.UUID)
            return {column: value}
    raise TSqlError(
        9629,
        "RECEIVE's WHERE clause may name only conversation_handle or "
        "conversation_group_id, compared with = to a value.",
        line=session.line,
    )


def _get_conversation_group(session: Session, s: n.GetConversationGroup) -> None:
    if len(s.queue) == 3 and s.queue[0].casefold() != session.database.casefold():
        raise not_supported("GET CONVERSATION GROUP from a queue of another database", s.line)
    timeout = _timeout(session, s.waitfor, s.timeout)
    with session.statement_transaction() as tx:
        group = tx.get_conversation_group(s.queue[-1], timeout=timeout)
    session.rowcount = 0 if group is None else 1
    if group is not None:
        session.assign(s.variable, Typed(group, UNIQUEIDENTIFIER))
    else:
        session.assign(s.variable, Typed(None, UNIQUEIDENTIFIER))


def _end_conversation(session: Session, s: n.EndConversation) -> None:
    handle = _handle(session, s.handle)
    error = None
    description = None
    if s.error is not None:
        error_value = to_type(evaluate(s.error, session), INT, session)
        error = int(error_value) if isinstance(error_value, int) else None
        description_value = (
            to_type(evaluate(s.description, session), NVARCHAR, session) if s.description else None
        )
        description = str(description_value) if description_value is not None else None
    with session.statement_transaction() as tx:
        tx.end_conversation(handle, error=error, description=description, cleanup=s.cleanup)


def _begin_timer(session: Session, s: n.BeginTimer) -> None:
    handle = _handle(session, s.handle)
    timeout = to_type(evaluate(s.timeout, session), BIGINT, session)
    if not isinstance(timeout, int):
        raise TSqlError(8471, "The TIMEOUT value is NULL or not a number of seconds.", line=s.line)
    with session.statement_transaction() as tx:
        tx.begin_conversation_timer(handle, float(timeout))


def _move_conversation(session: Session, s: n.MoveConversation) -> None:
    handle = _handle(session, s.handle)
    group = _handle(session, s.group)
    with session.statement_transaction() as tx:
        tx.move_conversation(handle, group)


class _Fixed:
    """A row source of fixed rows (RECEIVE's messages)."""

    def __init__(self, source: RowSource) -> None:
        self.source = source

    def rows(self, parts: tuple[str, ...], line: int) -> RowSource:
        return self.source


CONVERSATION_STATEMENTS: dict[type[Any], Callable[[Session, Any], None]] = {
    n.BeginDialog: _begin_dialog,
    n.Send: _send,
    n.Receive: _receive,
    n.GetConversationGroup: _get_conversation_group,
    n.EndConversation: _end_conversation,
    n.BeginTimer: _begin_timer,
    n.MoveConversation: _move_conversation,
}
"""The statement runner of each conversation statement's node type."""
