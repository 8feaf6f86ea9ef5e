"""Loads the named queries of a backend (blocks headed ``-- name: NAME``), so the engine and the
storage code never build SQL inline.

Where the queries live: a query that is the same in every dialect but for its placeholders is
written once, with ``?`` placeholders, in ``servicebroker/storage/queries.sql``; each backend's
own ``queries.sql`` (``servicebroker/storage/<backend>/queries.sql``, in the backend's
placeholders) holds only what its dialect makes different. :func:`load_backend_queries` merges
the two: the shared queries converted to the backend's ``paramstyle`` by :func:`portable_sql`,
then the backend's own, **which override a shared query of the same name**. So a backend that
needs another form of a shared query defines it under the same name in its own file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources

__all__ = ["load_backend_queries", "load_queries", "portable_sql", "split_statements"]

_SHARED = __name__.rpartition(".")[0]  # servicebroker.storage: the shared queries.sql
_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """Map each query name to its SQL text, read from ``filename`` in ``package``.

    Raises:
        ValueError: a name is defined twice or a block is empty.
    """
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = "\n".join(
            line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
        ).strip()
        if not sql or name in queries:
            raise ValueError(f"{package}/{filename}: query {name!r} is empty or defined twice")
        queries[name] = sql.rstrip(";")
    return queries


def load_backend_queries(package: str, paramstyle: str) -> dict[str, str]:
    """The named queries of the backend in ``package`` (e.g. ``"servicebroker.storage.sqlite"``):
    the shared queries of ``servicebroker/storage/queries.sql`` in ``paramstyle`` ("qmark" or
    "format", see :func:`portable_sql`), overridden by those of ``package``'s ``queries.sql``.

    Raises:
        ValueError: a name is defined twice in one file or a block is empty.
    """
    queries = {name: portable_sql(sql, paramstyle) for name, sql in load_queries(_SHARED).items()}
    queries.update(load_queries(package))
    return queries


def split_statements(script: str, complete: Callable[[str], bool] = lambda text: True) -> list[str]:
    """Split an SQL script into statements at semicolons that end a line and end a statement
    by ``complete`` (e.g. :func:`sqlite3.complete_statement`, so a trigger's body stays whole);
    no semicolons inside string literals at line ends."""
    statements: list[str] = []
    current: list[str] = []
    for line in script.splitlines():
        if line.lstrip().startswith("--"):
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            stmt = "\n".join(current).strip()
            if not complete(stmt):
                continue
            if stmt.strip(";").strip():
                statements.append(stmt)
            current = []
    tail = "\n".join(current).strip()
    if tail:
        statements.append(tail)
    return statements


def portable_sql(sql: str, paramstyle: str) -> str:
    """``sql`` written with ``?`` placeholders and SQLite's ``BLOB`` type, for a backend of
    ``paramstyle`` (``broker.paramstyle``): unchanged for "qmark" (SQLite); ``%s``
    placeholders, ``%%`` for a literal ``%`` and ``BYTEA`` for ``BLOB`` for "format"
    (PostgreSQL). For the project's own SQL written once for both: the shared named queries,
    the migration runner's statements, the application SQL of the demo, the Spark writer and
    the tests; ``?`` must not appear inside string literals."""
    if paramstyle == "qmark":
        return sql
    return re.sub(r"\bBLOB\b", "BYTEA", sql.replace("%", "%%").replace("?", "%s"))
