"""The transport's catalog (issue 12): CREATE / DROP CERTIFICATE, CREATE / ALTER / DROP
ENDPOINT, CREATE LOGIN, GRANT CONNECT ON ENDPOINT (SEC-1) and CREATE / ALTER / DROP ROUTE
(RTE-1), their errors, the views sys.routes, sys.service_broker_endpoints and
sys.certificates, and the catalog snapshot the transport reads — on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from servicebroker import Broker, CatalogError
from servicebroker.catalog.routing import choose_route
from servicebroker.clock import ManualClock
from servicebroker.errors import CertificateError
from servicebroker.transport.certificates import (
    load_certificate_file,
    make_ca,
    make_self_signed,
    make_signed,
)

I1 = "D8D4D268-00A3-4C62-8F91-634B89C1E315"


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return make_self_signed("alpha", tmp_path / "certs")


def with_endpoint(broker: Broker, pair: tuple[Path, Path]) -> None:
    cert, key = pair
    broker.create_certificate("alpha", certificate_file=cert, private_key_file=key)
    broker.create_endpoint("sb", listener_port=0, authentication_certificate="alpha")


# -- certificates ------------------------------------------------------------------------


def test_create_certificate_stores_the_pem_and_shows_it(
    broker: Broker, pair: tuple[Path, Path]
) -> None:
    cert, key = pair
    broker.create_certificate("alpha", certificate_file=cert, private_key_file=key)
    (row,) = broker.views.certificates()
    der = x509.load_pem_x509_certificate(cert.read_bytes()).public_bytes(serialization.Encoding.DER)
    assert row.name == "alpha" and row.subject == "CN=alpha" and row.issuer_name == "CN=alpha"
    assert row.thumbprint_hex == hashlib.sha1(der).hexdigest()
    assert row.thumbprint == hashlib.sha1(der).digest()
    assert row.pvt_key_encryption_type == "FS"
    assert row.start_date is not None and row.expiry_date is not None
    assert row.expiry_date > row.start_date
    stored = broker.catalog.certificates["alpha"]
    assert stored.certificate_pem.startswith("-----BEGIN CERTIFICATE-----")
    assert stored.private_key_file == str(key.resolve())
    cert.unlink()  # the certificate lives in the database now
    assert broker.catalog.certificate("alpha").certificate_pem == stored.certificate_pem


def test_certificate_without_private_key(broker: Broker, pair: tuple[Path, Path]) -> None:
    broker.create_certificate("pub", certificate_file=pair[0])
    (row,) = broker.views.certificates()
    assert row.pvt_key_encryption_type == "NA" and row.private_key_file is None


def test_certificate_file_errors_name_the_file(
    broker: Broker, pair: tuple[Path, Path], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(CertificateError, match=r"missing\.pem"):
        broker.create_certificate("c", certificate_file=missing)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(CertificateError, match=r"junk\.pem"):
        broker.create_certificate("c", certificate_file=junk)
    with pytest.raises(CertificateError, match=r"junk\.pem"):
        broker.create_certificate("c", certificate_file=pair[0], private_key_file=junk)
    _, other_key = make_self_signed("other", tmp_path / "o")
    with pytest.raises(CertificateError, match="does not match"):
        broker.create_certificate("c", certificate_file=pair[0], private_key_file=other_key)
    assert broker.views.certificates() == []
    assert issubclass(CertificateError, CatalogError)


def test_certificate_name_taken_and_unknown(broker: Broker, pair: tuple[Path, Path]) -> None:
    broker.create_certificate("alpha", certificate_file=pair[0])
    with pytest.raises(CatalogError, match="'alpha' already exists"):
        broker.create_certificate("alpha", certificate_file=pair[0])
    with pytest.raises(CatalogError, match="certificate 'nope' does not exist"):
        broker.drop_certificate("nope")
    broker.drop_certificate("alpha")
    assert broker.views.certificates() == []


def test_drop_certificate_refused_while_the_endpoint_or_a_login_uses_it(
    broker: Broker, pair: tuple[Path, Path]
) -> None:
    with_endpoint(broker, pair)
    with pytest.raises(CatalogError, match="endpoint 'sb' authenticates with it"):
        broker.drop_certificate("alpha")
    broker.create_certificate("peer", certificate_file=pair[0])
    broker.create_login("peer_user", certificate="peer")
    with pytest.raises(CatalogError, match="'peer_user'"):
        broker.drop_certificate("peer")
    broker.drop_login("peer_user")
    broker.drop_certificate("peer")


def test_ca_signed_certificate(broker: Broker, tmp_path: Path) -> None:
    ca_cert, ca_key = make_ca("root", tmp_path)
    cert, key = make_signed("node", tmp_path, ca_cert, ca_key, days=10)
    info = load_certificate_file(cert)
    assert info.subject == "CN=node" and info.issuer == "CN=root"
    assert info.expiry_date - info.start_date == pytest.approx(10 * 86400)
    broker.create_certificate("node", certificate_file=cert, private_key_file=key)


# -- the endpoint ------------------------------------------------------------------------


def test_create_endpoint_and_its_view(broker: Broker, pair: tuple[Path, Path]) -> None:
    with_endpoint(broker, pair)
    (row,) = broker.views.service_broker_endpoints()
    assert (row.name, row.state_desc, row.port, row.ip_address) == ("sb", "STARTED", 0, "127.0.0.1")
    assert row.type_desc == "SERVICE_BROKER" and row.protocol_desc == "TCP"
    assert row.connection_auth_desc == "CERTIFICATE" and row.certificate_name == "alpha"
    assert row.encryption == "REQUIRED" and row.encryption_algorithm_desc == "AES"
    assert not row.is_message_forwarding_enabled and row.message_forwarding_size == 10
    ep = broker.catalog.service_broker_endpoint
    assert ep is not None and ep.name == "sb"


def test_one_endpoint_only(broker: Broker, pair: tuple[Path, Path]) -> None:
    with_endpoint(broker, pair)
    with pytest.raises(CatalogError, match="one Service Broker endpoint"):
        broker.create_endpoint("second", authentication_certificate="alpha")


def test_endpoint_needs_a_certificate_with_a_private_key(
    broker: Broker, pair: tuple[Path, Path]
) -> None:
    with pytest.raises(CatalogError, match="'missing': the certificate does not exist"):
        broker.create_endpoint("sb", authentication_certificate="missing")
    broker.create_certificate("pub", certificate_file=pair[0])
    with pytest.raises(CatalogError, match="has no private key"):
        broker.create_endpoint("sb", authentication_certificate="pub")


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("listener_port", 70000, "LISTENER_PORT"),
        ("listener_port", "4022", "LISTENER_PORT"),
        ("listener_ip", "not-an-ip", "LISTENER_IP"),
        ("encryption", "MAYBE", "ENCRYPTION"),
        ("algorithm", "DES", "ALGORITHM"),
        ("state", "RUNNING", "STATE"),
        ("message_forwarding", "yes", "MESSAGE_FORWARDING"),
        ("message_forward_size", 0, "MESSAGE_FORWARD_SIZE"),
    ],
)
def test_endpoint_settings_are_checked(
    broker: Broker, pair: tuple[Path, Path], option: str, value: object, match: str
) -> None:
    broker.create_certificate("alpha", certificate_file=pair[0], private_key_file=pair[1])
    with pytest.raises(CatalogError, match=match):
        broker.create_endpoint("sb", authentication_certificate="alpha", **{option: value})  # type: ignore[arg-type]
    assert broker.views.service_broker_endpoints() == []


def test_alter_and_drop_endpoint(broker: Broker, pair: tuple[Path, Path]) -> None:
    with_endpoint(broker, pair)
    broker.alter_endpoint(
        "sb",
        state="stopped",
        listener_ip="ALL",
        encryption="supported",
        algorithm="aes rc4",
        message_forwarding=True,
        message_forward_size=20,
    )
    (row,) = broker.views.service_broker_endpoints()
    assert (row.state_desc, row.ip_address, row.encryption) == ("STOPPED", None, "SUPPORTED")
    assert row.encryption_algorithm_desc == "AES RC4" and row.is_message_forwarding_enabled
    assert row.message_forwarding_size == 20 and row.port == 0
    with pytest.raises(CatalogError, match="endpoint 'other' does not exist"):
        broker.alter_endpoint("other", state="STARTED")
    broker.drop_endpoint("sb")
    assert broker.views.service_broker_endpoints() == []
    assert broker.catalog.service_broker_endpoint is None


# -- logins and grants (SEC-1) -----------------------------------------------------------


def test_grant_connect_to_a_login(broker: Broker, pair: tuple[Path, Path]) -> None:
    """SEC-1: a login FROM CERTIFICATE granted CONNECT on the endpoint."""
    with_endpoint(broker, pair)
    broker.create_certificate("peer", certificate_file=pair[0])
    broker.create_login("peer_user", certificate="peer")
    assert broker.grant_connect("sb", "peer_user") == "peer_user"
    broker.grant_connect("sb", "peer_user")  # again: nothing more
    cat = broker.catalog
    assert cat.endpoint_grants == frozenset({cat.logins["peer_user"].login_id})


def test_grant_connect_with_a_certificate_does_both_at_once(
    broker: Broker, pair: tuple[Path, Path]
) -> None:
    with_endpoint(broker, pair)
    broker.create_certificate("peer", certificate_file=pair[0])
    assert broker.grant_connect("sb", certificate="peer") == "peer_login"
    cat = broker.catalog
    login = cat.logins["peer_login"]
    assert login.certificate_id == cat.certificates["peer"].certificate_id
    assert login.login_id in cat.endpoint_grants
    assert broker.grant_connect("sb", certificate="peer") == "peer_login"  # reused


def test_grant_connect_errors(broker: Broker, pair: tuple[Path, Path]) -> None:
    with pytest.raises(CatalogError, match="endpoint 'sb' does not exist"):
        broker.grant_connect("sb", certificate="alpha")
    with_endpoint(broker, pair)
    with pytest.raises(CatalogError, match="login 'ghost' does not exist"):
        broker.grant_connect("sb", "ghost")
    with pytest.raises(CatalogError, match="one of them"):
        broker.grant_connect("sb")
    with pytest.raises(CatalogError, match="certificate 'ghost' does not exist"):
        broker.create_login("l", certificate="ghost")
    broker.create_login("l", certificate="alpha")
    with pytest.raises(CatalogError, match="login 'l' already exists"):
        broker.create_login("l", certificate="alpha")


def test_drop_endpoint_takes_its_grants(broker: Broker, pair: tuple[Path, Path]) -> None:
    with_endpoint(broker, pair)
    broker.grant_connect("sb", certificate="alpha")
    broker.drop_endpoint("sb")
    assert broker.catalog.endpoint_grants == frozenset()
    assert "alpha_login" in broker.catalog.logins


# -- routes (RTE-1) ----------------------------------------------------------------------


def test_rte1_every_database_has_auto_created_local(broker: Broker) -> None:
    """RTE-1: every database has AutoCreatedLocal."""
    (row,) = broker.views.routes()
    assert (row.name, row.address, row.remote_service_name, row.broker_instance) == (
        "AutoCreatedLocal",
        "LOCAL",
        None,
        None,
    )
    assert row.lifetime is None and row.mirror_address is None


def test_create_route_and_sys_routes(broker: Broker, clock: ManualClock) -> None:
    # CREATE ROUTE examples A, E, F, G, H
    broker.create_route(
        "ExpenseRoute",
        service_name="//Adventure-Works.com/Expenses",
        broker_instance=I1,
        address="TCP://www.Adventure-Works.com:1234",
    )
    broker.create_route(
        "LogRequests", service_name="//Adventure-Works.com/LogRequests", address="local"
    )
    broker.create_route(
        "Timed",
        service_name="//Adventure-Works.com/Expenses",
        lifetime=259200,
        address="TCP://s:1234",
    )
    broker.create_route(
        "Mirrored",
        service_name="//Adventure-Works.com/Expenses",
        broker_instance=uuid.UUID(I1),
        address="TCP://services.Adventure-Works.com:1234",
        mirror_address="TCP://services-mirror.Adventure-Works.com:1234",
    )
    broker.create_route("TransportRoute", address="TRANSPORT")
    rows = {r.name: r for r in broker.views.routes()}
    assert rows["ExpenseRoute"].broker_instance == I1.lower()
    assert rows["LogRequests"].address == "LOCAL"
    timed = rows["Timed"].lifetime
    assert timed is not None and timed.timestamp() == pytest.approx(clock.now() + 259200)
    assert rows["Mirrored"].mirror_address == "TCP://services-mirror.Adventure-Works.com:1234"
    assert rows["TransportRoute"].address == "TRANSPORT"


def test_rte1_an_expired_route_stays_and_is_ignored(broker: Broker, clock: ManualClock) -> None:
    """RTE-1: an expired route is ignored, never removed; ALTER ROUTE's LIFETIME revives it."""
    broker.create_route("Short", service_name="//x", address="TCP://h:1", lifetime=10)
    choose = lambda: choose_route(  # noqa: E731
        broker.catalog.routes.values(),
        service_name="//x",
        broker_instance=None,
        local_services=broker.catalog.services,
        now=clock.now(),
    )
    assert choose().route_name == "Short"  # type: ignore[union-attr]
    clock.advance(10)
    assert choose().route_name == "AutoCreatedLocal"  # type: ignore[union-attr]
    assert "Short" in {r.name for r in broker.views.routes()}
    broker.alter_route("Short", lifetime=60)  # ALTER ROUTE makes it active again
    assert choose().route_name == "Short"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"address": "http://h:1"}, "ADDRESS"),
        ({"address": "TCP://h:0"}, "ADDRESS"),
        ({"address": "TCP://h:1", "broker_instance": "not-a-guid"}, "not a GUID"),
        ({"address": "TCP://h:1", "lifetime": 0}, "LIFETIME"),
        ({"address": "TCP://h:1", "lifetime": 1.5}, "LIFETIME"),
        ({"address": "TCP://h:1", "lifetime": 2**31}, "LIFETIME"),
        ({"address": "TCP://h:1", "service_name": ""}, "SERVICE_NAME"),
        ({"address": "TCP://h:1", "mirror_address": "TCP://m:1"}, "MIRROR_ADDRESS needs"),
        (
            {"address": "TCP://h:1", "service_name": "//x", "mirror_address": "TCP://m:1"},
            "MIRROR_ADDRESS needs",
        ),
        (
            {
                "address": "LOCAL",
                "service_name": "//x",
                "broker_instance": I1,
                "mirror_address": "TCP://m:1",
            },
            "cannot have a MIRROR_ADDRESS",
        ),
        (
            {
                "address": "TCP://h:1",
                "service_name": "//x",
                "broker_instance": I1,
                "mirror_address": "LOCAL",
            },
            "MIRROR_ADDRESS",
        ),
        ({"address": "TRANSPORT", "service_name": "//x"}, "TRANSPORT route cannot"),
        (
            {
                "address": "TCP://h:1",
                "service_name": "SQL/ServiceBroker/BrokerConfiguration",
                "broker_instance": I1,
            },
            "BrokerConfiguration",
        ),
    ],
)
def test_create_route_validation(broker: Broker, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(CatalogError, match=match):
        broker.create_route("r", **kwargs)  # type: ignore[arg-type]
    assert [r.name for r in broker.views.routes()] == ["AutoCreatedLocal"]


def test_route_name_taken_and_unknown(broker: Broker) -> None:
    broker.create_route("r", address="TCP://h:1")
    with pytest.raises(CatalogError, match="route 'r' already exists"):
        broker.create_route("r", address="LOCAL")
    with pytest.raises(CatalogError, match="route 'nope' does not exist"):
        broker.alter_route("nope", address="LOCAL")
    with pytest.raises(CatalogError, match="route 'nope' does not exist"):
        broker.drop_route("nope")


def test_alter_route_changes_only_the_clauses_given(broker: Broker) -> None:
    broker.create_route("r", service_name="//x", address="TCP://h:1")
    broker.alter_route("r", broker_instance=I1)
    broker.alter_route("r", address="TCP://10.2.19.72:1234")
    row = broker.catalog.route("r")
    assert (row.service_name, row.broker_instance, row.address) == (
        "//x",
        I1.lower(),
        "TCP://10.2.19.72:1234",
    )
    broker.alter_route("r", mirror_address="TCP://m:2")
    with pytest.raises(CatalogError, match="cannot have a MIRROR_ADDRESS"):
        broker.alter_route("r", address="LOCAL")
    with pytest.raises(CatalogError, match="at least one clause"):
        broker.alter_route("r")


def test_drop_route(broker: Broker) -> None:
    broker.drop_route("AutoCreatedLocal")
    assert broker.views.routes() == []
    assert broker.catalog.routes == {}


def test_cli_certificate_writes_the_pair(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from servicebroker.cli import main

    result = CliRunner().invoke(
        main, ["certificate", "node1", "--out", str(tmp_path), "--days", "5"]
    )
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "node1.pem") in result.output
    info = load_certificate_file(tmp_path / "node1.pem")
    assert info.subject == "CN=node1"
    assert (tmp_path / "node1.key").stat().st_mode & 0o077 == 0
