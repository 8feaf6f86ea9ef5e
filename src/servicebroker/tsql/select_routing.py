"""Where a SELECT runs (select-transact-sql.md, from-transact-sql.md): a query on the
application's tables is translated to the database underneath (:mod:`.tables`); one on catalog
views and DMVs, queues and table variables, or on nothing, is run by the interpreter over its
own row sources (:mod:`.queries`, :mod:`.joins`). A join that mixes the two is refused by name,
as are FOR XML and ``nodes()`` on the application's tables (they run only on the interpreter's
sources).
"""

from __future__ import annotations

from typing import Protocol

from ..errors import TSqlError
from . import nodes as n
from .tables import TableSession, table_exists
from .unsupported import not_supported

__all__ = ["reads_application_tables"]


class _Sources(Protocol):
    """The interpreter's row sources (:class:`.table_variables.VariableSources`)."""

    def has(self, parts: tuple[str, ...]) -> bool: ...
    def in_database(self, parts: tuple[str, ...]) -> bool: ...


def reads_application_tables(
    select: n.SelectCore, sources: _Sources, session: TableSession, line: int
) -> bool:
    """Whether ``select`` reads the application's tables (else views, queues, table variables
    or nothing); ``sources`` the interpreter's, ``line`` the statement's. A trigger's
    ``inserted`` and ``deleted`` are read by the interpreter alone, and in the database with
    the application's tables.

    Raises:
        TSqlError: Msg 208, a name in a mixed join that is neither a source nor a table;
            Msg 40000, a join of the application's tables with views, queues or table
            variables, or FOR XML or nodes() on the application's tables.
    """
    named = [] if select.source is None else [select.source]
    named.extend(j.source for j in select.joins)
    ours = [sources.has(parts) for parts in named]
    on_tables = not all(ours)
    if on_tables:  # a trigger's inserted and deleted join the application's tables there
        ours = [
            our and not sources.in_database(parts) for parts, our in zip(named, ours, strict=True)
        ]
    if on_tables and any(ours):
        for parts, our in zip(named, ours, strict=True):
            if not our and not sources.in_database(parts) and not table_exists(session, parts):
                raise TSqlError(208, f"Invalid object name '{'.'.join(parts)}'.", line=line)
        raise not_supported(
            "A join of the application's tables with catalog views, queues or table variables",
            line,
        )
    if on_tables and (select.applies or select.for_xml is not None):
        raise not_supported("FOR XML and nodes() on the application's tables", line)
    return on_tables
