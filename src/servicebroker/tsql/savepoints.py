"""SAVE TRAN[SACTION] and ROLLBACK TRAN[SACTION] to a savepoint (save-transaction-transact-sql.md,
rollback-transaction-transact-sql.md) on the session's broker transaction
(:meth:`~servicebroker.engine.transaction.Transaction.save`, ``rollback_to``): the work after
the savepoint is undone, the transaction, @@TRANCOUNT and the conversation-group locks stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import nodes as n
from .scope import Scope, to_type
from .sqlerrors import sql_message
from .types import NVARCHAR

__all__ = ["SAVEPOINT_STATEMENTS", "rolled_back_to_savepoint", "savepoint_name"]


class Session(Scope, Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    trancount: int
    tran_name: str | None

    @property
    def tx(self) -> Transaction: ...


def savepoint_name(session: Scope, name: str) -> str:
    """A transaction or savepoint name as written, or the value of the variable named (its
    first 32 characters, as the pages say).

    Raises:
        TSqlError: Msg 3977 (it ends the batch) when the variable is NULL.
    """
    if not name.startswith("@"):
        return name
    value = to_type(session.variable(name, session.line), NVARCHAR, session)
    if value is None:
        error = TSqlError(3977, sql_message(3977), line=session.line)
        error.ends_batch = True  # type: ignore[attr-defined]
        raise error
    return str(value)[:32]


def _doomed(session: Session, line: int) -> None:
    if session.xact_state() == -1:
        raise TSqlError(3931, sql_message(3931), line=line)


def _save(session: Session, s: n.SaveTran) -> None:
    if session.trancount == 0:
        raise TSqlError(628, sql_message(628), line=s.line)
    _doomed(session, s.line)
    session.tx.save(savepoint_name(session, s.name))


def rolled_back_to_savepoint(session: Session, s: n.RollbackTran) -> bool:
    """ROLLBACK TRAN ``name`` where ``name`` is not the outermost BEGIN TRAN's: back to the
    latest savepoint of that name (True); False for a ROLLBACK of the whole transaction.

    Raises:
        TSqlError: Msg 6401, no transaction or savepoint of that name; 3931, the transaction
            is doomed (XACT_STATE() -1) and can only be rolled back whole.
    """
    if s.name is None:
        return False
    name = savepoint_name(session, s.name)
    if name == session.tran_name:
        return False
    if name not in session.tx.savepoints:
        raise TSqlError(6401, sql_message(6401, name), line=s.line)
    _doomed(session, s.line)
    session.tx.rollback_to(name)
    return True


SAVEPOINT_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {n.SaveTran: _save}
"""The statement runner of SAVE TRANSACTION."""
