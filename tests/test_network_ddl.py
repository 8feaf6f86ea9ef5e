"""The transport's catalog in T-SQL through ``execute_ddl`` (docs/ddl.md): CREATE / ALTER / DROP
ROUTE (create-route-transact-sql.md), CREATE / ALTER / DROP ENDPOINT … FOR SERVICE_BROKER
(create-endpoint-transact-sql.md), CREATE CERTIFICATE … FROM FILE
(create-certificate-transact-sql.md), CREATE LOGIN … FROM CERTIFICATE
(create-login-transact-sql.md) and GRANT CONNECT ON ENDPOINT
(grant-endpoint-permissions-transact-sql.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servicebroker import Broker, CatalogError, ManualClock
from servicebroker.ddl.parser import parse_ddl
from servicebroker.transport.certificates import make_self_signed


def test_create_route_examples_of_the_reference_page(broker: Broker, clock: ManualClock) -> None:
    ran = broker.execute_ddl(
        """
        CREATE ROUTE ExpenseRoute
            WITH
            SERVICE_NAME = '//Adventure-Works.com/Expenses',
            BROKER_INSTANCE = 'D8D4D268-00A3-4C62-8F91-634B89C1E315',
            ADDRESS = 'TCP://www.Adventure-Works.com:1234' ;
        CREATE ROUTE Dispatch WITH ADDRESS = 'TCP://dispatch.Adventure-Works.com' ;
        CREATE ROUTE LogRequests
            WITH SERVICE_NAME = '//Adventure-Works.com/LogRequests', ADDRESS = 'LOCAL' ;
        CREATE ROUTE Timed
            WITH SERVICE_NAME = '//Adventure-Works.com/Expenses', LIFETIME = 259200,
            ADDRESS = 'TCP://services.Adventure-Works.com:1234' ;
        CREATE ROUTE Mirrored
            WITH SERVICE_NAME = '//Adventure-Works.com/Expenses',
            BROKER_INSTANCE = '69fcc80c-2239-4700-8437-1001ecddf933',
            ADDRESS = 'TCP://services.Adventure-Works.com:1234',
            MIRROR_ADDRESS = 'TCP://services-mirror.Adventure-Works.com:1234' ;
        CREATE ROUTE TransportRoute WITH ADDRESS = 'TRANSPORT' ;
        GO
        ALTER ROUTE ExpenseRoute WITH ADDRESS = 'TCP://10.2.19.72:1234';
        DROP ROUTE LogRequests;
        """
    )
    assert ran == 8
    rows = {r.name: r for r in broker.views.routes()}
    assert set(rows) == {
        "AutoCreatedLocal",
        "ExpenseRoute",
        "Dispatch",
        "Timed",
        "Mirrored",
        "TransportRoute",
    }
    assert rows["ExpenseRoute"].address == "TCP://10.2.19.72:1234"
    assert rows["ExpenseRoute"].broker_instance == "d8d4d268-00a3-4c62-8f91-634b89c1e315"
    assert rows["Dispatch"].address == "TCP://dispatch.Adventure-Works.com:4022"
    timed = rows["Timed"].lifetime  # LIFETIME = 259200 seconds from now (RTE-1)
    assert timed is not None and timed.timestamp() == pytest.approx(clock.now() + 259200)


def test_route_ddl_errors(broker: Broker) -> None:
    with pytest.raises(CatalogError, match="ADDRESS is required"):
        broker.execute_ddl("CREATE ROUTE r WITH SERVICE_NAME = 'x'")
    with pytest.raises(CatalogError, match="LIFETIME must be a number"):
        broker.execute_ddl("CREATE ROUTE r WITH LIFETIME = 'x', ADDRESS = 'LOCAL'")
    with pytest.raises(CatalogError, match="ADDRESS is given twice"):
        broker.execute_ddl("CREATE ROUTE r WITH ADDRESS = 'LOCAL', ADDRESS = 'LOCAL'")


def test_endpoint_certificate_login_and_grant(broker: Broker, tmp_path: Path) -> None:
    cert, key = make_self_signed("node1", tmp_path)
    peer, _ = make_self_signed("node2", tmp_path)
    ran = broker.execute_ddl(
        f"""
        CREATE CERTIFICATE node1 FROM FILE = '{cert}' WITH PRIVATE KEY (FILE = '{key}');
        CREATE CERTIFICATE node2 FROM FILE = N'{peer}';
        CREATE ENDPOINT ServiceBrokerEndpoint
            STATE = STARTED
            AS TCP (LISTENER_PORT = 4022, LISTENER_IP = (127.0.0.1))
            FOR SERVICE_BROKER (
                AUTHENTICATION = CERTIFICATE node1,
                ENCRYPTION = REQUIRED ALGORITHM AES,
                MESSAGE_FORWARDING = ENABLED,
                MESSAGE_FORWARD_SIZE = 20);
        CREATE LOGIN node2_user FROM CERTIFICATE node2;
        GRANT CONNECT ON ENDPOINT::ServiceBrokerEndpoint TO node2_user;
        """
    )
    assert ran == 5
    (ep,) = broker.views.service_broker_endpoints()
    assert (ep.name, ep.state_desc, ep.port, ep.ip_address) == (
        "ServiceBrokerEndpoint",
        "STARTED",
        4022,
        "127.0.0.1",
    )
    assert ep.is_message_forwarding_enabled and ep.message_forwarding_size == 20
    cat = broker.catalog
    assert cat.endpoint_grants == frozenset({cat.logins["node2_user"].login_id})
    broker.execute_ddl(
        "ALTER ENDPOINT ServiceBrokerEndpoint STATE = STOPPED "
        "FOR SERVICE_BROKER (ENCRYPTION = DISABLED, MESSAGE_FORWARDING = DISABLED)"
    )
    (ep,) = broker.views.service_broker_endpoints()
    assert (ep.state_desc, ep.encryption, ep.is_message_forwarding_enabled) == (
        "STOPPED",
        "DISABLED",
        False,
    )
    broker.execute_ddl(
        "DROP ENDPOINT ServiceBrokerEndpoint; DROP LOGIN node2_user; "
        "DROP CERTIFICATE node2; DROP CERTIFICATE node1"
    )
    assert broker.views.service_broker_endpoints() == [] and broker.views.certificates() == []


def test_create_endpoint_takes_the_pages_defaults(broker: Broker, tmp_path: Path) -> None:
    """create-endpoint-transact-sql.md: "If the state is not specified when the endpoint is
    created, STOPPED is the default"; LISTENER_IP "The default is ALL"."""
    cert, key = make_self_signed("n", tmp_path)
    broker.execute_ddl(
        f"CREATE CERTIFICATE n FROM FILE = '{cert}' WITH PRIVATE KEY (FILE = '{key}')\n"
        "CREATE ENDPOINT e AS TCP (LISTENER_PORT = 4022) "
        "FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE n)"
    )
    (ep,) = broker.views.service_broker_endpoints()
    assert (ep.state_desc, ep.ip_address, ep.encryption) == ("STOPPED", None, "REQUIRED")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1) FOR SERVICE_BROKER "
            "(AUTHENTICATION = WINDOWS KERBEROS)",
            "no Windows authentication",
        ),
        (
            "CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1) FOR SERVICE_BROKER ()",
            "needs AUTHENTICATION = CERTIFICATE",
        ),
        (
            "CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1) FOR SERVICE_BROKER "
            "(AUTHENTICATION = CERTIFICATE c, ENCRYPTION = DISABLED ALGORITHM AES)",
            "takes no ALGORITHM",
        ),
        (
            "CREATE ENDPOINT e AS TCP (LISTENER_PORT = 1) FOR SERVICE_BROKER "
            "(AUTHENTICATION = CERTIFICATE c, MESSAGE_FORWARDING = MAYBE)",
            "ENABLED or DISABLED",
        ),
        (
            "CREATE CERTIFICATE c FROM FILE = 'c.pem' WITH PRIVATE KEY (FILE = 'k.pem', "
            "DECRYPTION BY PASSWORD = 'x')",
            "DECRYPTION BY PASSWORD is not supported",
        ),
        ("CREATE CERTIFICATE c FROM FILE = 'no/such/file.pem'", "no/such/file.pem"),
        ("GRANT CONNECT ON ENDPOINT::nope TO someone", "endpoint 'nope' does not exist"),
    ],
)
def test_network_ddl_refusals_are_named(broker: Broker, text: str, match: str) -> None:
    with pytest.raises(CatalogError, match=match):
        broker.execute_ddl(text)


def test_network_statements_parse_with_their_place() -> None:
    st = parse_ddl("USE db\nGO\nGRANT CONNECT ON ENDPOINT::[sb ep] TO [a], b")
    assert [s.statement for s in st] == ["USE", "GRANT CONNECT"]
    assert st[1].name == "sb ep" and st[1].options == {"logins": ["a", "b"]}
    assert (st[1].line, st[1].column) == (3, 1)
