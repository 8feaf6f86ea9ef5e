"""What the security statements and ``sp_configure`` record where the broker has nothing to act
on: a table ``servicebroker_sql_security`` (kind, name, detail) in each database, written and
read through the application's SQL seam (``tx.execute``), as the procedures' definitions are
(:mod:`.procedures`). Kinds: ``MASTER KEY`` (the database master key), ``ROLE`` and ``MEMBER``
(database roles and their members), ``PERMISSION`` (GRANT / DENY of the permissions the broker
does not check), ``OWNER`` (ALTER AUTHORIZATION), and in master ``CONFIGURATION`` (sp_configure's
values).

Each write commits at once, as the DDL does here (docs/tsql.md: not transactional).
"""

from __future__ import annotations

from ..broker import Broker
from .tables import placeholder

__all__ = ["TABLE", "delete", "get", "put", "records"]

TABLE = "servicebroker_sql_security"
"""The table, in each database, that keeps these records."""

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (kind VARCHAR(40) NOT NULL, name VARCHAR(800) NOT NULL, "
    "detail TEXT NOT NULL, PRIMARY KEY (kind, name))"
)


def records(broker: Broker, kind: str) -> dict[str, str]:
    """Every record of ``kind`` in ``broker``'s database: name → detail."""
    mark = placeholder(broker)
    with broker.transaction() as tx:
        tx.execute(_CREATE)
        rows = tx.execute(f"SELECT name, detail FROM {TABLE} WHERE kind = {mark}", (kind,))
    return {str(name): str(detail) for name, detail in rows}


def get(broker: Broker, kind: str, name: str) -> str | None:
    """The detail of record (``kind``, ``name``), or None."""
    mark = placeholder(broker)
    with broker.transaction() as tx:
        tx.execute(_CREATE)
        rows = tx.execute(
            f"SELECT detail FROM {TABLE} WHERE kind = {mark} AND name = {mark}", (kind, name)
        )
    return str(rows[0][0]) if rows else None


def put(broker: Broker, kind: str, name: str, detail: str = "") -> None:
    """Record (``kind``, ``name``) with ``detail``, replacing what was there."""
    mark = placeholder(broker)
    with broker.transaction() as tx:
        tx.execute(_CREATE)
        tx.execute(f"DELETE FROM {TABLE} WHERE kind = {mark} AND name = {mark}", (kind, name))
        tx.execute(
            f"INSERT INTO {TABLE} (kind, name, detail) VALUES ({mark}, {mark}, {mark})",
            (kind, name, detail),
        )


def delete(broker: Broker, kind: str, name: str) -> None:
    """Forget record (``kind``, ``name``) (none there: nothing happens)."""
    mark = placeholder(broker)
    with broker.transaction() as tx:
        tx.execute(_CREATE)
        tx.execute(f"DELETE FROM {TABLE} WHERE kind = {mark} AND name = {mark}", (kind, name))
