"""A session's execution context (execute-as-transact-sql.md): the stack EXECUTE AS pushes and
REVERT pops, a procedure's WITH EXECUTE AS for as long as it runs, and the functions that show
it — USER_NAME(), SUSER_SNAME() / SUSER_NAME(), ORIGINAL_LOGIN().

The session's ``principal`` is what its broker transactions act as (SEC-4: SEND and RECEIVE are
checked against it); a context sets it to its user, or to ``dbo`` for a member of ``db_owner``,
and restores it when it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from ..errors import TSqlError
from .instance_link import LOGIN
from .scope import Scope
from .types import SYSNAME, Typed
from .unsupported import not_supported

__all__ = [
    "IDENTITY_FUNCTIONS",
    "Context",
    "Impersonating",
    "contexts",
    "login_name",
    "module_context",
    "pop_to",
    "push",
    "user_name",
]


class Impersonating(Protocol):
    """What a context needs of the session (:class:`~.interpreter.Session`)."""

    principal: str | None
    trancount: int


@dataclass(frozen=True)
class Context:
    """One level of the stack: the ``user`` and ``login`` it shows, the session principal it
    replaced (``saved``), and how it may end (``no_revert``, ``cookie``)."""

    user: str
    login: str
    saved: str | None
    no_revert: bool = False
    cookie: bytes | None = None


_STACKS: WeakKeyDictionary[Any, list[Context]] = WeakKeyDictionary()


def contexts(session: Impersonating) -> list[Context]:
    """The session's stack of contexts (the innermost last)."""
    stack = _STACKS.get(session)
    if stack is None:
        stack = _STACKS[session] = []
    return stack


def _change_principal(session: Impersonating, principal: str | None, line: int) -> None:
    if principal == session.principal:
        return
    if session.trancount > 0:
        raise not_supported(
            "changing the execution context inside a transaction (a transaction acts as one "
            "principal here)",
            line,
        )
    session.principal = principal


def push(session: Impersonating, context: Context, principal: str, line: int) -> None:
    """Enter ``context``, the session's transactions acting as ``principal``.

    Raises:
        TSqlError: Msg 40000, the principal would change inside an open transaction.
    """
    _change_principal(session, principal, line)
    contexts(session).append(context)


def pop_to(session: Impersonating, depth: int, line: int) -> None:
    """Leave the contexts above ``depth`` (a procedure's end, REVERT), restoring the principal.

    Raises:
        TSqlError: Msg 40000, the principal would change inside an open transaction.
    """
    stack = contexts(session)
    while len(stack) > depth:
        _change_principal(session, stack[-1].saved, line)
        stack.pop()


@contextmanager
def module_context(session: Impersonating, line: int) -> Iterator[None]:
    """A procedure's run: the contexts it enters (its WITH EXECUTE AS, its EXECUTE AS
    statements) end when it does."""
    depth = len(contexts(session))
    try:
        yield
    finally:
        if len(contexts(session)) > depth:
            try:
                pop_to(session, depth, line)
            except TSqlError:
                del contexts(session)[depth:]


def user_name(session: Impersonating) -> str:
    """USER_NAME(): the user of the innermost context, else the session's principal."""
    stack = contexts(session)
    if stack:
        return stack[-1].user
    return session.principal or "dbo"


def login_name(session: Impersonating) -> str:
    """SUSER_SNAME(): the login of the innermost context, else the instance's (``sa``)."""
    stack = contexts(session)
    return stack[-1].login if stack else LOGIN


def _session(scope: Scope) -> Any:
    """The session under a scope (a query's row scopes wrap it as ``base``)."""
    found: Any = scope
    while hasattr(found, "base"):
        found = found.base
    return found


def _user_name(args: list[Typed], scope: Scope) -> Typed:
    session = _session(scope)
    if args:
        if args[0].value is None:
            return Typed(None, SYSNAME)
        wanted = int(str(args[0].value))
        broker = getattr(session, "broker", None)
        rows = broker.views.database_principals() if broker is not None else []
        names = [r.name for r in rows if r.principal_id == wanted]
        return Typed(names[0] if names else None, SYSNAME)
    if not hasattr(session, "principal"):
        return Typed("dbo", SYSNAME)
    return Typed(user_name(session), SYSNAME)


def _login_name(args: list[Typed], scope: Scope) -> Typed:
    session = _session(scope)
    if not hasattr(session, "principal"):
        return Typed(LOGIN, SYSNAME)
    return Typed(login_name(session), SYSNAME)


IDENTITY_FUNCTIONS: dict[str, Callable[[list[Typed], Scope], Typed]] = {
    "USER_NAME": _user_name,
    "SUSER_SNAME": _login_name,
    "SUSER_NAME": _login_name,
    "ORIGINAL_LOGIN": lambda args, scope: Typed(LOGIN, SYSNAME),
}
"""USER_NAME([id]) (user-name-transact-sql.md), SUSER_SNAME() / SUSER_NAME(), ORIGINAL_LOGIN()
(original-login-transact-sql.md): the session's execution context."""
