"""The typed statements of security and server configuration (built by
:mod:`.build_security`, run by :mod:`.security`): the database master key, CREATE CERTIFICATE …
WITH SUBJECT, EXECUTE AS / REVERT, ALTER AUTHORIZATION, GRANT / DENY / REVOKE beyond SEND and
RECEIVE, database roles and RECONFIGURE — each with the batch ``line`` it starts on.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expression_nodes import Expr

__all__ = [
    "AlterAuthorization",
    "CreateCertificateWithSubject",
    "ExecuteAs",
    "MasterKey",
    "Permission",
    "Reconfigure",
    "Revert",
    "Role",
    "SecurityStatement",
]


@dataclass(frozen=True)
class MasterKey:
    """CREATE / ALTER / OPEN / CLOSE / DROP MASTER KEY (create-master-key-transact-sql.md,
    alter-master-key-transact-sql.md, open-master-key-transact-sql.md, …). ``action`` is
    ``CREATE``, ``REGENERATE``, ``ADD``, ``DROP ENCRYPTION``, ``OPEN``, ``CLOSE`` or ``DROP``;
    ``password`` the PASSWORD given (None for BY SERVICE MASTER KEY and the forms without one);
    ``force`` ALTER MASTER KEY FORCE REGENERATE."""

    line: int
    action: str
    password: str | None = None
    force: bool = False


@dataclass(frozen=True)
class CreateCertificateWithSubject:
    """CREATE CERTIFICATE name [AUTHORIZATION user] [ENCRYPTION BY PASSWORD = '…'] WITH SUBJECT =
    '…' [, START_DATE = '…'] [, EXPIRY_DATE = '…'] [ACTIVE FOR BEGIN_DIALOG = ON | OFF]
    (create-certificate-transact-sql.md): ``options`` as (OPTION, text) pairs, upper-case
    names."""

    line: int
    name: str
    owner: str | None
    password: str | None
    options: tuple[tuple[str, str], ...]
    active_for_begin_dialog: bool = True


@dataclass(frozen=True)
class ExecuteAs:
    """EXECUTE AS USER = name | LOGIN = name [WITH NO REVERT | COOKIE INTO @v] | CALLER
    (execute-as-transact-sql.md): ``kind`` USER, LOGIN or CALLER."""

    line: int
    kind: str
    name: Expr | None = None
    no_revert: bool = False
    cookie: str | None = None


@dataclass(frozen=True)
class Revert:
    """REVERT [WITH COOKIE = @v] (revert-transact-sql.md)."""

    line: int
    cookie: str | None = None


@dataclass(frozen=True)
class AlterAuthorization:
    """ALTER AUTHORIZATION ON [class::]name TO principal | SCHEMA OWNER
    (alter-authorization-transact-sql.md): ``securable_class`` upper case (``OBJECT`` when the
    class is left out), ``principal`` None for SCHEMA OWNER."""

    line: int
    securable_class: str
    name: str
    principal: str | None


@dataclass(frozen=True)
class Permission:
    """GRANT / DENY / REVOKE permissions [ON [class::]securable] {TO | FROM} principals
    (grant-transact-sql.md, deny-transact-sql.md, revoke-transact-sql.md), beyond the SEND /
    RECEIVE / CONNECT ON ENDPOINT forms the DDL runs: ``action`` GRANT, DENY or REVOKE;
    ``permissions`` upper-case words (``EXECUTE``, ``VIEW DEFINITION``); ``securable_class``
    None without ON, ``OBJECT`` when ON names no class."""

    line: int
    action: str
    permissions: tuple[str, ...]
    securable_class: str | None
    securable: str | None
    principals: tuple[str, ...]


@dataclass(frozen=True)
class Role:
    """CREATE ROLE name [AUTHORIZATION owner], ALTER ROLE name ADD | DROP MEMBER user, ALTER ROLE
    name WITH NAME = new, DROP ROLE [IF EXISTS] name (create-role-transact-sql.md,
    alter-role-transact-sql.md, drop-role-transact-sql.md): ``action`` CREATE, ADD MEMBER, DROP
    MEMBER, RENAME or DROP; ``other`` the member, owner or new name."""

    line: int
    action: str
    role: str
    other: str | None = None
    if_exists: bool = False


@dataclass(frozen=True)
class Reconfigure:
    """RECONFIGURE [WITH OVERRIDE] (reconfigure-transact-sql.md)."""

    line: int
    override: bool = False


SecurityStatement = (
    MasterKey
    | CreateCertificateWithSubject
    | ExecuteAs
    | Revert
    | AlterAuthorization
    | Permission
    | Role
    | Reconfigure
)
"""A statement of this module."""
