"""The catalog views of what the security statements and sp_configure record
(:mod:`.security_records`): ``sys.symmetric_keys`` (the database master key,
sys-symmetric-keys-transact-sql.md), ``sys.database_role_members``
(sys-database-role-members-transact-sql.md, with the role's and the member's names added) and
``sys.configurations`` (:mod:`.configuration`, read from master).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

from ..broker import Broker
from . import security_records as records
from .configuration import configurations
from .queries import RowSource
from .security import MASTER_KEY_NAME, master_key
from .types import DATETIME, INT, SYSNAME, UNIQUEIDENTIFIER, SqlType, Typed

__all__ = ["SECURITY_VIEWS"]


def _symmetric_keys(broker: Broker, master: Callable[[], Broker]) -> RowSource:
    columns: tuple[tuple[str, SqlType], ...] = (
        ("name", SYSNAME),
        ("principal_id", INT),
        ("symmetric_key_id", INT),
        ("key_length", INT),
        ("key_algorithm", SqlType("CHAR", 2)),
        ("algorithm_desc", SqlType("NVARCHAR", 60)),
        ("create_date", DATETIME),
        ("modify_date", DATETIME),
        ("key_guid", UNIQUEIDENTIFIER),
    )
    key = master_key(broker)
    if key is None:
        return RowSource(columns, [])
    cells = (MASTER_KEY_NAME, 1, 101, 256, "A3", "AES_256",
             datetime.fromisoformat(key["created"]), datetime.fromisoformat(key["modified"]),
             uuid.UUID(key["guid"]))  # fmt: skip
    return RowSource(columns, [{c: Typed(v, t) for (c, t), v in zip(columns, cells, strict=True)}])


def _role_members(broker: Broker, master: Callable[[], Broker]) -> RowSource:
    principals = {r.name.casefold(): r.principal_id for r in broker.views.database_principals()}
    roles = sorted(records.records(broker, "ROLE"), key=str.casefold)
    ids = {r.casefold(): 16384 + i for i, r in enumerate(("db_owner", "db_accessadmin",
           "db_securityadmin", "db_ddladmin", "db_backupoperator", "db_datareader",
           "db_datawriter", "db_denydatareader", "db_denydatawriter"))}  # fmt: skip
    ids.update({r.casefold(): 100_000 + i for i, r in enumerate(roles)})
    columns: tuple[tuple[str, SqlType], ...] = (
        ("role_principal_id", INT),
        ("member_principal_id", INT),
        ("role_name", SYSNAME),
        ("member_name", SYSNAME),
    )
    rows = [
        {
            "role_principal_id": Typed(ids.get("db_owner"), INT),
            "member_principal_id": Typed(1, INT),
            "role_name": Typed("db_owner", SYSNAME),
            "member_name": Typed("dbo", SYSNAME),
        }
    ]
    for detail in sorted(records.records(broker, "MEMBER").values()):
        role, member = detail.split("|", 1)
        rows.append(
            {
                "role_principal_id": Typed(ids.get(role.casefold()), INT),
                "member_principal_id": Typed(
                    principals.get(member.casefold(), ids.get(member.casefold())), INT
                ),
                "role_name": Typed(role, SYSNAME),
                "member_name": Typed(member, SYSNAME),
            }
        )
    return RowSource(columns, rows)


SECURITY_VIEWS: dict[str, Callable[[Broker, Callable[[], Broker]], RowSource]] = {
    "symmetric_keys": _symmetric_keys,
    "database_role_members": _role_members,
    "configurations": lambda broker, master: configurations(master()),
}
"""The rows of each view by its name (after ``sys.``), given the database's broker and a way
to master's."""
