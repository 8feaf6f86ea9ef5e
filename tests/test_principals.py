"""Database principals, certificate owners, remote service bindings and the grants the catalog
keeps (SEC-3, SEC-4): what ``create_user``, ``create_remote_service_binding``, ``grant`` and
``revoke`` store, what the catalog snapshot answers about them, and the errors for bad input.

Pages: docs/t-sql/statements/create-user-transact-sql.md, drop-user-transact-sql.md,
create-remote-service-binding-transact-sql.md, drop-remote-service-binding-transact-sql.md,
grant-service-broker-permissions-transact-sql.md, grant-endpoint-permissions-transact-sql.md,
revoke-service-broker-permissions-transact-sql.md, create-certificate-transact-sql.md;
docs/relational-databases/system-catalog-views/sys-database-principals-transact-sql.md,
sys-database-permissions-transact-sql.md, sys-remote-service-bindings-transact-sql.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servicebroker import Broker, CatalogError
from servicebroker.transport.certificates import make_self_signed

from .conftest import Pair


@pytest.fixture
def cert_files(tmp_path: Path) -> tuple[Path, Path]:
    return make_self_signed("remote", tmp_path / "certs")


def test_public_and_dbo_always_exist_and_users_number_from_5(broker: Broker) -> None:
    """SEC-4: sys.database_principals holds public (principal_id 0, a role) and dbo (1); CREATE
    USER … WITHOUT LOGIN gives users ids from 5 up (sys-database-principals-transact-sql.md,
    create-user-transact-sql.md)."""
    snap = broker.catalog
    assert snap.principals["public"].principal_id == 0
    assert snap.principals["public"].type == "R"
    assert snap.principals["dbo"].principal_id == 1
    assert broker.create_user("alice") == 5
    assert broker.create_user("bob") == 6
    snap = broker.catalog
    assert snap.principals_by_id[5].name == "alice"
    assert snap.principals["bob"].type == "S"
    broker.drop_user("alice")
    assert "alice" not in broker.catalog.principals


def test_create_user_from_certificate_owns_it(
    broker: Broker, cert_files: tuple[Path, Path]
) -> None:
    """SEC-3: CREATE USER u FROM CERTIFICATE c — the user owns the certificate, and a peer
    presenting that certificate (its thumbprint) is identified as that user
    (create-user-transact-sql.md)."""
    pem, _ = cert_files
    broker.create_certificate("RemoteCert", certificate_file=pem)
    snap = broker.catalog
    cert = snap.certificates["RemoteCert"]
    assert cert.principal_id is None  # dbo's
    assert snap.certificates_owned_by(1) == [cert]
    assert snap.principal_of_thumbprint(cert.thumbprint) is None  # dbo is not a remote user
    uid = broker.create_user("remote_user", certificate="RemoteCert")
    snap = broker.catalog
    cert = snap.certificates["RemoteCert"]
    assert cert.principal_id == uid
    assert snap.certificates_owned_by(uid) == [cert]
    assert snap.certificates_owned_by(1) == []
    owner = snap.principal_of_thumbprint(cert.thumbprint.upper())
    assert owner is not None and owner.name == "remote_user"
    with pytest.raises(CatalogError, match="'RemoteCert' is already owned by user 'remote_user'"):
        broker.create_user("other", certificate="RemoteCert")
    with pytest.raises(CatalogError, match="certificate 'Nope' does not exist"):
        broker.create_user("other", certificate="Nope")
    assert "other" not in broker.catalog.principals  # nothing half-made
    with pytest.raises(CatalogError, match="it owns certificate\\(s\\) 'RemoteCert'"):
        broker.drop_user("remote_user")
    broker.drop_certificate("RemoteCert")
    broker.drop_user("remote_user")


def test_create_certificate_authorization(broker: Broker, cert_files: tuple[Path, Path]) -> None:
    """SEC-3: CREATE CERTIFICATE c AUTHORIZATION u FROM FILE — u owns it
    (create-certificate-transact-sql.md)."""
    pem, _ = cert_files
    uid = broker.create_user("carol")
    broker.create_certificate("CarolCert", certificate_file=pem, authorization="carol")
    snap = broker.catalog
    assert snap.certificates["CarolCert"].principal_id == uid
    assert [c.name for c in snap.certificates_owned_by(uid)] == ["CarolCert"]
    with pytest.raises(CatalogError, match="database principal 'nobody' does not exist"):
        broker.create_certificate("X", certificate_file=pem, authorization="nobody")
    assert "X" not in broker.catalog.certificates


def test_remote_service_binding(broker: Broker) -> None:
    """SEC-3: CREATE REMOTE SERVICE BINDING b TO SERVICE 's' WITH USER = u, ANONYMOUS = ON|OFF
    maps the remote service (byte for byte) to the user
    (create-remote-service-binding-transact-sql.md, sys-remote-service-bindings)."""
    uid = broker.create_user("remote_user")
    broker.create_remote_service_binding(
        "B1", to_service="//remote/Svc", user="remote_user", anonymous=True
    )
    broker.create_remote_service_binding("B2", to_service="//remote/Other", user="remote_user")
    snap = broker.catalog
    b1 = snap.binding_for("//remote/Svc")
    assert b1 is not None
    assert (b1.name, b1.principal_id, b1.is_anonymous_on) == ("B1", uid, 1)
    assert snap.binding_for("//REMOTE/Svc") is None  # byte for byte
    assert snap.remote_service_bindings["B2"].is_anonymous_on == 0
    with pytest.raises(CatalogError, match="remote service binding 'B1' already exists"):
        broker.create_remote_service_binding("B1", to_service="//x", user="remote_user")
    with pytest.raises(CatalogError, match="'//remote/Svc' is bound already by 'B1'"):
        broker.create_remote_service_binding("B3", to_service="//remote/Svc", user="remote_user")
    with pytest.raises(CatalogError, match="database principal 'ghost' does not exist"):
        broker.create_remote_service_binding("B3", to_service="//y", user="ghost")
    with pytest.raises(CatalogError, match="'public' is a role"):
        broker.create_remote_service_binding("B3", to_service="//y", user="public")
    with pytest.raises(CatalogError, match="remote service binding\\(s\\) 'B1', 'B2' use it"):
        broker.drop_user("remote_user")
    broker.drop_remote_service_binding("B1")
    broker.drop_remote_service_binding("B2")
    with pytest.raises(CatalogError, match="remote service binding 'B1' does not exist"):
        broker.drop_remote_service_binding("B1")
    broker.drop_user("remote_user")


def test_grant_and_revoke_in_the_catalog(broker: Broker, pair: Pair) -> None:
    """SEC-4: GRANT SEND ON SERVICE::s / RECEIVE ON QUEUE::q TO u; a grant to public counts
    for every principal; dbo holds every permission; REVOKE takes the grant away
    (grant-service-broker-permissions-transact-sql.md)."""
    alice = broker.create_user("alice")
    svc = f"SERVICE::{pair.target}"
    snap = broker.catalog
    assert snap.has_permission(1, "SEND", svc)
    assert not snap.has_permission(alice, "SEND", svc)
    broker.grant("SEND", on=svc, to="alice")
    broker.grant("send", on=svc, to="alice")  # twice: nothing more
    broker.grant("RECEIVE", on="OBJECT::tq", to="public")
    snap = broker.catalog
    assert snap.has_permission(alice, "SEND", svc)
    assert snap.has_permission(alice, "RECEIVE", "QUEUE::tq")
    assert not snap.has_permission(alice, "RECEIVE", "QUEUE::iq")
    broker.revoke("SEND", on=svc, to="alice")
    broker.revoke("SEND", on=svc, to="alice")  # nothing granted: nothing happens
    broker.revoke("RECEIVE", on="QUEUE::tq", to="public")
    snap = broker.catalog
    assert not snap.has_permission(alice, "SEND", svc)
    assert not snap.has_permission(alice, "RECEIVE", "QUEUE::tq")


def test_grants_go_with_their_object_and_grantee(broker: Broker, pair: Pair) -> None:
    """SEC-4: dropping a queue, a service or a user removes the permissions on or to it, so a
    new object of the same name starts with none."""
    alice = broker.create_user("alice")
    broker.create_queue("q2")
    broker.create_service("//s2", queue="q2", contracts=["C"])
    broker.grant("RECEIVE", on="QUEUE::q2", to="alice")
    broker.grant("SEND", on="SERVICE:://s2", to="alice")
    broker.drop_service("//s2")
    broker.drop_queue("q2")
    broker.create_queue("q2")
    broker.create_service("//s2", queue="q2", contracts=["C"])
    snap = broker.catalog
    assert not snap.has_permission(alice, "RECEIVE", "QUEUE::q2")
    assert not snap.has_permission(alice, "SEND", "SERVICE:://s2")
    broker.grant("RECEIVE", on="QUEUE::q2", to="alice")
    broker.drop_user("alice")
    bob = broker.create_user("alice")
    assert not broker.catalog.has_permission(bob, "RECEIVE", "QUEUE::q2")


@pytest.mark.parametrize(
    ("permission", "on", "to", "message"),
    [
        ("SEND", "SERVICE:://test/Nope", "alice", "service '//test/Nope' does not exist"),
        ("SEND", "SERVICE:://test/Target", "ghost", "database principal 'ghost' does not exist"),
        ("RECEIVE", "SERVICE:://test/Target", "alice", "a SERVICE takes SEND"),
        ("SEND", "QUEUE::tq", "alice", "a QUEUE takes RECEIVE"),
        ("DELETE", "QUEUE::tq", "alice", "unknown permission 'DELETE'"),
        ("SEND", "TABLE::t", "alice", "unknown class 'TABLE'"),
        ("SEND", "tq", "alice", "must be 'SERVICE::name'"),
        ("RECEIVE", "QUEUE::nope", "alice", "queue 'nope' does not exist"),
        ("CONNECT", "ENDPOINT::ep", "alice", "endpoint 'ep' does not exist"),
    ],
)
def test_bad_grants(
    broker: Broker, pair: Pair, permission: str, on: str, to: str, message: str
) -> None:
    """SEC-4: GRANT / REVOKE of an unknown permission, securable class, object or grantee, or a
    permission the class does not take, raise CatalogError naming it; nothing is stored."""
    broker.create_user("alice")
    for statement in (broker.grant, broker.revoke):
        with pytest.raises(CatalogError, match=message):
            statement(permission, on=on, to=to)
    assert broker.catalog.grants == frozenset()


def test_bad_users(broker: Broker) -> None:
    """SEC-4: CREATE USER of a taken name (public and dbo exist), DROP USER of an unknown or a
    built-in principal raise CatalogError naming it."""
    broker.create_user("alice")
    for name in ("alice", "dbo", "public"):
        with pytest.raises(CatalogError, match=f"database principal '{name}' already exists"):
            broker.create_user(name)
    with pytest.raises(CatalogError, match="user name must not be empty"):
        broker.create_user(" ")
    with pytest.raises(CatalogError, match="database principal 'ghost' does not exist"):
        broker.drop_user("ghost")
    for name in ("dbo", "public"):
        with pytest.raises(CatalogError, match=f"'{name}' is built in"):
            broker.drop_user(name)
