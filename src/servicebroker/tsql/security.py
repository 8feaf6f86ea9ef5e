"""The security statements scripts carry, acting on the principals the broker has or recorded
where it has nothing to act on (docs/tsql.md, *Security statements*, says which, statement by
statement):

- the database master key — CREATE / ALTER / OPEN / CLOSE / DROP MASTER KEY
  (create-master-key-transact-sql.md): recorded per database (the password as a PBKDF2 hash),
  listed by ``sys.symmetric_keys``; CREATE CERTIFICATE … WITH SUBJECT needs it, as in SQL Server;
- CREATE CERTIFICATE … WITH SUBJECT (create-certificate-transact-sql.md): a self-signed
  certificate made here, its private key in a file beside the instance's databases;
- EXECUTE AS USER | LOGIN | CALLER and REVERT (execute-as-transact-sql.md,
  revert-transact-sql.md): the session's execution context (:mod:`.identity`);
- ALTER AUTHORIZATION, GRANT / DENY / REVOKE of the permissions the broker does not check, and
  database roles (CREATE / ALTER / DROP ROLE): checked against the principals and objects
  there are, then recorded (:mod:`.security_records`); a member of ``db_owner`` acts as dbo.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ..broker import Broker
from ..engine.transaction import Transaction
from ..errors import TSqlError
from . import security_records as records
from .evaluate import evaluate
from .identity import Context, contexts, module_context, pop_to, push
from .procedures import ProcedureStore
from .results import ResultSet
from .scope import Scope, to_type
from .security_nodes import (
    AlterAuthorization,
    CreateCertificateWithSubject,
    ExecuteAs,
    MasterKey,
    Permission,
    Revert,
    Role,
)
from .sqlerrors import sql_message
from .types import SqlType, Typed
from .unsupported import not_supported

__all__ = [
    "FIXED_ROLES",
    "MASTER_KEY_NAME",
    "SECURITY_STATEMENTS",
    "SecuritySession",
    "add_member",
    "drop_member",
    "is_member",
    "master_key",
    "procedure_context",
]

MASTER_KEY_NAME = "##MS_DatabaseMasterKey##"
"""The database master key's name in ``sys.symmetric_keys``."""

FIXED_ROLES = (
    "db_owner", "db_accessadmin", "db_securityadmin", "db_ddladmin", "db_backupoperator",
    "db_datareader", "db_datawriter", "db_denydatareader", "db_denydatawriter",
)  # fmt: skip
"""The fixed database roles (database-level-roles.md); a member of db_owner acts as dbo."""


class _Instance(Protocol):
    location: str

    def database(self, name: str) -> Broker: ...
    def database_id(self, name: str) -> int | None: ...
    def procedures(self, database: str) -> ProcedureStore: ...


class SecuritySession(Scope, Protocol):
    """What these statements need of the session (:class:`~.interpreter.Session`)."""

    instance: _Instance
    broker: Broker
    database: str
    principal: str | None
    trancount: int

    @property
    def postgres(self) -> bool: ...
    def emit(self, event: ResultSet | str | int | TSqlError) -> None: ...
    def assign(self, name: str, value: Typed) -> None: ...
    def open_transaction(self) -> Transaction | None: ...


def _error(number: int, line: int, *args: object, severity: int = 16) -> TSqlError:
    return TSqlError(number, sql_message(number, *args), severity=severity, line=line)


# -- the database master key -------------------------------------------------------------------


def _hash(password: str, salt: bytes) -> str:
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, 100_000).hex()


def master_key(broker: Broker) -> dict[str, Any] | None:
    """The database master key of ``broker``'s database as recorded (its ``passwords`` as
    ``[salt, hash]`` pairs, ``service`` whether the service master key encrypts it, its
    ``created`` / ``modified`` times and ``guid``), or None."""
    detail = records.get(broker, "MASTER KEY", MASTER_KEY_NAME)
    return None if detail is None else dict(json.loads(detail))


def _opens(key: dict[str, Any], password: str) -> bool:
    return any(_hash(password, bytes.fromhex(salt)) == h for salt, h in key["passwords"])


def _protected(password: str) -> list[str]:
    salt = os.urandom(16)
    return [salt.hex(), _hash(password, salt)]


def _master_key(session: SecuritySession, s: MasterKey) -> None:
    broker = session.broker
    key = master_key(broker)
    now = session.now().isoformat(sep=" ")
    if s.action == "CREATE":
        if key is not None:
            raise _error(15578, s.line)
        assert s.password is not None
        key = {
            "passwords": [_protected(s.password)],
            "service": True,
            "created": now,
            "modified": now,
            "guid": str(uuid.uuid4()).upper(),
        }
    elif key is None:
        if s.action == "OPEN":
            raise _error(15581, s.line)
        if s.action == "CLOSE":
            return
        verb = "drop" if s.action == "DROP" else "alter"
        raise _error(15151, s.line, verb, "master key", MASTER_KEY_NAME)
    elif s.action == "OPEN":
        assert s.password is not None
        if not _opens(key, s.password):
            raise _error(15313, s.line)  # raised at level 16, as SQL Server does
        return
    elif s.action == "CLOSE":
        return
    elif s.action == "DROP":
        for certificate, protection in records.records(broker, "CERTIFICATE").items():
            if protection == "MASTER KEY" and _certificate_exists(broker, certificate):
                raise TSqlError(
                    15580,
                    f"Cannot drop master key because certificate '{certificate}' is encrypted "
                    f"by it.",
                    line=s.line,
                )
        records.delete(broker, "MASTER KEY", MASTER_KEY_NAME)
        return
    elif s.action == "REGENERATE":
        assert s.password is not None
        key["passwords"] = [_protected(s.password)]
        key["modified"] = now
    elif s.password is None:  # ADD / DROP ENCRYPTION BY SERVICE MASTER KEY
        key["service"] = s.action == "ADD"
    elif s.action == "ADD":
        key["passwords"].append(_protected(s.password))
    else:
        kept = [p for p in key["passwords"] if _hash(s.password, bytes.fromhex(p[0])) != p[1]]
        if len(kept) == len(key["passwords"]):
            raise _error(15313, s.line)
        key["passwords"] = kept
    records.put(broker, "MASTER KEY", MASTER_KEY_NAME, json.dumps(key))


def _certificate_exists(broker: Broker, name: str) -> bool:
    return any(c.name == name for c in broker.views.certificates())


# -- CREATE CERTIFICATE … WITH SUBJECT ---------------------------------------------------------


def _date(text: str, line: int) -> dt.datetime:
    for form in ("%Y%m%d", "%Y-%m-%d", "%m/%d/%Y", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            return dt.datetime.strptime(text.strip(), form).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
    raise TSqlError(241, "Conversion failed when converting date and/or time from character "
                    "string.", line=line)  # fmt: skip


def _create_certificate(session: SecuritySession, s: CreateCertificateWithSubject) -> None:
    if session.postgres:
        raise not_supported(
            "CREATE CERTIFICATE … WITH SUBJECT on a PostgreSQL instance (the private key is kept "
            "in a file beside a folder instance's databases; use CREATE CERTIFICATE … FROM FILE)",
            s.line,
        )
    broker = session.broker
    if s.password is None and master_key(broker) is None:
        raise _error(15581, s.line)
    if _certificate_exists(broker, s.name):
        raise _error(15232, s.line, s.name)
    options = dict(s.options)
    start = (
        _date(options["START_DATE"], s.line)
        if "START_DATE" in options
        else session.utc_now().replace(hour=0, minute=0, second=0, tzinfo=dt.UTC)
    )
    expiry = (
        _date(options["EXPIRY_DATE"], s.line)
        if "EXPIRY_DATE" in options
        else start.replace(year=start.year + 1)
    )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, options["SUBJECT"] or s.name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(expiry)
        .sign(key, hashes.SHA256())
    )
    folder = Path(session.instance.location) / "certificates" / session.database
    folder.mkdir(parents=True, exist_ok=True)
    stem = hashlib.sha256(s.name.encode("utf-8")).hexdigest()[:16]
    pem, key_file = folder / f"{stem}.pem", folder / f"{stem}.key"
    pem.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)
    broker.create_certificate(
        s.name, certificate_file=pem, private_key_file=key_file, authorization=s.owner
    )
    protection = "PASSWORD" if s.password is not None else "MASTER KEY"
    records.put(broker, "CERTIFICATE", s.name, protection)


# -- EXECUTE AS / REVERT -----------------------------------------------------------------------


def _users(broker: Broker) -> dict[str, str]:
    """The database users by case-folded name (their names as created)."""
    return {r.name.casefold(): r.name for r in broker.views.database_principals() if r.type == "S"}


def _roles(broker: Broker) -> dict[str, str]:
    """The database roles (public, the fixed roles, CREATE ROLE's) by case-folded name."""
    found = {r.casefold(): r for r in ("public", *FIXED_ROLES)}
    found.update({r.casefold(): r for r in records.records(broker, "ROLE")})
    return found


def is_member(broker: Broker, role: str, member: str) -> bool:
    """Whether ``member`` is a member of the database role ``role`` (dbo of db_owner always)."""
    if role.casefold() == "db_owner" and member.casefold() == "dbo":
        return True
    return _member_key(role, member) in {k.casefold() for k in records.records(broker, "MEMBER")}


def _member_key(role: str, member: str) -> str:
    return f"{role.casefold()}|{member.casefold()}"


def acting_principal(broker: Broker, user: str) -> str:
    """The principal the broker's transactions act as for ``user``: dbo for a member of
    db_owner (it may do everything), else the user."""
    return "dbo" if is_member(broker, "db_owner", user) else user


def _execute_as(session: SecuritySession, s: ExecuteAs) -> None:
    if s.kind == "CALLER":
        return  # outside a module: no action (execute-as-transact-sql.md)
    assert s.name is not None
    name = to_type(evaluate(s.name, session), SqlType("NVARCHAR", 128), session)
    text = "" if name is None else str(name)
    users = _users(session.broker)
    if s.kind == "USER":
        user = users.get(text.casefold())
        if user is None:
            raise _error(15517, s.line, text)
        login = user
    elif text.casefold() == "sa":
        user, login = "dbo", "sa"
    elif text.casefold() in users:  # a login maps to the database user of its name here
        user, login = users[text.casefold()], text
    else:
        raise _error(15406, s.line, text)
    stack = contexts(session)
    if stack and stack[-1].no_revert:
        raise _error(15196, s.line)
    cookie = os.urandom(20) if s.cookie is not None else None
    context = Context(user, login, session.principal, s.no_revert, cookie)
    push(session, context, acting_principal(session.broker, user), s.line)
    if s.cookie is not None:
        session.assign(s.cookie, Typed(cookie, SqlType("VARBINARY", 100)))


@contextmanager
def procedure_context(
    session: SecuritySession, execute_as: str | None, line: int
) -> Iterator[None]:
    """A procedure's run (create-procedure-transact-sql.md, WITH EXECUTE AS): as its EXECUTE AS
    says — CALLER (or none) the caller's context, SELF and OWNER dbo (who owns the procedures
    here), a user's name that user — and the contexts it enters end with it.

    Raises:
        TSqlError: Msg 15517, an unknown user; Msg 40000, a change of principal inside an open
            transaction.
    """
    with module_context(session, line):
        if execute_as is not None and execute_as.upper() != "CALLER":
            if execute_as.upper() in ("SELF", "OWNER"):
                user: str | None = "dbo"
            else:
                user = _users(session.broker).get(execute_as.casefold())
            if user is None:
                raise _error(15517, line, execute_as)
            context = Context(user, "sa" if user == "dbo" else user, session.principal)
            push(session, context, acting_principal(session.broker, user), line)
        yield


def _revert(session: SecuritySession, s: Revert) -> None:
    stack = contexts(session)
    if not stack:
        return
    top = stack[-1]
    if top.cookie is not None or s.cookie is not None:
        given = None if s.cookie is None else session.variable(s.cookie, s.line).value
        if top.cookie is None or given != top.cookie:
            raise _error(15196, s.line)
    elif top.no_revert:
        raise _error(15196, s.line)
    pop_to(session, len(stack) - 1, s.line)


# -- ALTER AUTHORIZATION, GRANT / DENY / REVOKE, roles -----------------------------------------


def _check_principal(session: SecuritySession, name: str, line: int, verb: str = "find") -> str:
    """The principal ``name`` (a user or a role) as created; Msg 15151 when there is none."""
    broker = session.broker
    found = _users(broker).get(name.casefold()) or _roles(broker).get(name.casefold())
    if found is None:
        raise _error(15151, line, verb, "user", name)
    return found


_CLASS_VIEWS: dict[str, tuple[str, str]] = {
    "SERVICE": ("services", "service"),
    "CONTRACT": ("service_contracts", "contract"),
    "MESSAGE TYPE": ("service_message_types", "message type"),
    "ROUTE": ("routes", "route"),
    "CERTIFICATE": ("certificates", "certificate"),
    "REMOTE SERVICE BINDING": ("remote_service_bindings", "remote service binding"),
}


def _check_securable(session: SecuritySession, kind: str, name: str, line: int) -> None:
    """Msg 15151 when the securable does not exist (the classes the broker has)."""
    broker = session.broker
    if kind in _CLASS_VIEWS:
        view, label = _CLASS_VIEWS[kind]
        if any(r.name == name for r in getattr(broker.views, view)()):
            return
        raise _error(15151, line, "find", label, name)
    if kind in ("OBJECT", "QUEUE"):
        if any(q.name.casefold() == name.casefold() for q in broker.views.service_queues()):
            return
        if session.object_id(name) is not None or kind == "OBJECT":
            return  # a procedure, or a table of the application's (not checked here)
        raise _error(15151, line, "find", "object", name)
    if kind in ("USER", "ROLE"):
        _check_principal(session, name, line)
    elif kind == "DATABASE" and session.instance.database_id(name) is None:
        raise _error(15151, line, "find", "database", name)


def _alter_authorization(session: SecuritySession, s: AlterAuthorization) -> None:
    _check_securable(session, s.securable_class, s.name, s.line)
    owner = "SCHEMA OWNER"
    if s.principal is not None:
        if s.securable_class == "DATABASE":
            owner = s.principal  # a login: 'sa' and the logins are the instance's
        else:
            owner = _check_principal(session, s.principal, s.line)
    records.put(session.broker, "OWNER", f"{s.securable_class}::{s.name}", owner)


_BROKER_CHECKED = {("SEND", "SERVICE"): "SERVICE", ("RECEIVE", "OBJECT"): "QUEUE",
                   ("RECEIVE", "QUEUE"): "QUEUE"}  # fmt: skip
"""The permissions the broker checks (SEC-4): granted and revoked on it, not recorded."""


def _permission(session: SecuritySession, s: Permission) -> None:
    broker = session.broker
    if s.securable_class is not None and s.securable is not None:
        _check_securable(session, s.securable_class, s.securable, s.line)
    grantees = [_check_principal(session, p, s.line) for p in s.principals]
    securable = f"{s.securable_class}::{s.securable}" if s.securable is not None else "DATABASE"
    for permission in s.permissions:
        checked = _BROKER_CHECKED.get((permission, s.securable_class or ""))
        for grantee in grantees:
            if checked is not None:
                if s.action == "DENY":
                    raise not_supported(
                        f"DENY {permission} (the broker checks grants only)", s.line
                    )
                on = f"{checked}::{s.securable}"
                if s.action == "GRANT":
                    broker.grant(permission, on=on, to=grantee)
                else:
                    broker.revoke(permission, on=on, to=grantee)
                continue
            key = f"{permission}|{securable}|{grantee}"
            if s.action == "REVOKE":
                records.delete(broker, "PERMISSION", key)
            else:
                records.put(broker, "PERMISSION", key, s.action)


def add_member(session: SecuritySession, role: str, member: str, line: int) -> None:
    """ALTER ROLE ``role`` ADD MEMBER ``member`` (sp_addrolemember).

    Raises:
        TSqlError: Msg 15151, an unknown role or principal.
    """
    found = _roles(session.broker).get(role.casefold())
    if found is None or found == "public":
        raise _error(15151, line, "alter", "role", role)
    who = _users(session.broker).get(member.casefold()) or _roles(session.broker).get(
        member.casefold()
    )
    if who is None:
        raise _error(15151, line, "add", "principal", member)
    records.put(session.broker, "MEMBER", _member_key(found, who), f"{found}|{who}")


def drop_member(session: SecuritySession, role: str, member: str, line: int) -> None:
    """ALTER ROLE ``role`` DROP MEMBER ``member`` (sp_droprolemember).

    Raises:
        TSqlError: Msg 15151, an unknown role.
    """
    if role.casefold() not in _roles(session.broker):
        raise _error(15151, line, "alter", "role", role)
    records.delete(session.broker, "MEMBER", _member_key(role, member))


def _role(session: SecuritySession, s: Role) -> None:
    broker = session.broker
    roles = _roles(broker)
    if s.action == "CREATE":
        if s.role.casefold() in roles or s.role.casefold() in _users(broker):
            raise _error(15023, s.line, s.role)
        owner = _check_principal(session, s.other, s.line) if s.other is not None else "dbo"
        records.put(broker, "ROLE", s.role, owner)
    elif s.action == "ADD MEMBER":
        assert s.other is not None
        add_member(session, s.role, s.other, s.line)
    elif s.action == "DROP MEMBER":
        assert s.other is not None
        drop_member(session, s.role, s.other, s.line)
    else:
        found = roles.get(s.role.casefold())
        if found is None or found not in records.records(broker, "ROLE"):
            if found is None and s.action == "DROP" and s.if_exists:
                return
            verb = "drop" if s.action == "DROP" else "alter"
            raise _error(15151, s.line, verb, "role", s.role)
        members = [
            k for k in records.records(broker, "MEMBER") if k.startswith(_member_key(found, ""))
        ]
        if s.action == "DROP" and members:
            raise _error(15144, s.line)
        owner = records.records(broker, "ROLE")[found]
        records.delete(broker, "ROLE", found)
        if s.action == "RENAME":
            assert s.other is not None
            records.put(broker, "ROLE", s.other, owner)
            for key in members:
                member = key.split("|", 1)[1]
                records.delete(broker, "MEMBER", key)
                records.put(broker, "MEMBER", _member_key(s.other, member), f"{s.other}|{member}")


SECURITY_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    MasterKey: _master_key,
    CreateCertificateWithSubject: _create_certificate,
    ExecuteAs: _execute_as,
    Revert: _revert,
    AlterAuthorization: _alter_authorization,
    Permission: _permission,
    Role: _role,
}
"""The runner of each security statement's node type."""
