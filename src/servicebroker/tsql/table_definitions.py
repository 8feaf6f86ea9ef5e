"""CREATE TABLE as the database underneath takes it (create-table-transact-sql.md): what SQL
Server's table definitions say that sqlglot reads wrongly, or that SQLite says otherwise, made
plain before the statement is translated (:mod:`.tables`).

- ``CLUSTERED`` / ``NONCLUSTERED`` (an index's storage on SQL Server) are dropped from the text.
- A PRIMARY KEY's columns lose the order sqlglot gives them (PostgreSQL takes no ``NULLS
  FIRST`` in a key).
- On SQLite an IDENTITY column must be the ``INTEGER PRIMARY KEY`` for SQLite to number it.
"""

from __future__ import annotations

import re

from sqlglot import exp

from .unsupported import not_supported

__all__ = ["identity_key", "unordered", "without_clustering"]

_CLUSTERING = re.compile(r"('(?:[^']|'')*')|\b(?:NON)?CLUSTERED\b", re.IGNORECASE)


def without_clustering(text: str) -> str:
    """A CREATE TABLE without ``CLUSTERED`` / ``NONCLUSTERED`` (an index's storage on SQL
    Server, nothing underneath; sqlglot reads ``PRIMARY KEY CLUSTERED`` wrongly): ``CONSTRAINT
    pk PRIMARY KEY CLUSTERED (id)`` is ``CONSTRAINT pk PRIMARY KEY (id)``. Strings are kept."""
    if text.lstrip()[:6].upper() != "CREATE":
        return text
    return _CLUSTERING.sub(lambda m: m[1] or "", text)


def unordered(node: exp.Expression) -> exp.Expression:
    """A key's column without the order sqlglot reads into it (``id NULLS FIRST``)."""
    return node.this if isinstance(node, exp.Ordered) else node


def identity_key(create: exp.Create, line: int) -> None:
    """SQLite numbers a table's rows itself only in an INTEGER PRIMARY KEY: an IDENTITY column
    becomes the table's key when the table has none (its values are unique, as a key's are);
    an IDENTITY column beside another PRIMARY KEY is refused by name (Msg 40000)."""
    schema = create.this
    if not isinstance(schema, exp.Schema):
        return
    columns = [c for c in schema.expressions if isinstance(c, exp.ColumnDef)]

    def has(column: exp.ColumnDef, kind: type[exp.Expression]) -> bool:
        return any(isinstance(c.args.get("kind"), kind) for c in column.constraints)

    identity = next((c for c in columns if has(c, exp.GeneratedAsIdentityColumnConstraint)), None)
    if identity is None or has(identity, exp.PrimaryKeyColumnConstraint):
        return
    keys = [
        k
        for e in schema.expressions
        if not isinstance(e, exp.ColumnDef)
        for k in e.find_all(exp.PrimaryKey)
    ]
    if [[k.name.casefold() for k in key.expressions] for key in keys] == [
        [identity.name.casefold()]
    ]:  # PRIMARY KEY (id) of the IDENTITY column alone: said on the column, as SQLite wants
        holder = keys[0].parent if isinstance(keys[0].parent, exp.Constraint) else keys[0]
        schema.set("expressions", [e for e in schema.expressions if e is not holder])
    elif keys or any(has(c, exp.PrimaryKeyColumnConstraint) for c in columns):
        raise not_supported("An IDENTITY column beside another PRIMARY KEY (on SQLite)", line)
    identity.append("constraints", exp.ColumnConstraint(kind=exp.PrimaryKeyColumnConstraint()))
