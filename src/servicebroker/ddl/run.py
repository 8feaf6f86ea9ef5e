"""Run parsed Service Broker DDL (:mod:`.parser`) against a broker: each statement record becomes
the Broker method of the same name (docs/ddl.md).

Statements run one after another, each in its own catalog transaction, as SQL Server runs a
batch's DDL outside an explicit transaction: when one is refused, the ones before it have run
and the error says which statement failed, where, and how many ran before it. A script with a
syntax error, or a statement that is not Service Broker DDL, runs nothing (it is parsed whole
first).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..catalog.model import Activation, CatalogSnapshot, QueueDef
from ..errors import CatalogError
from .parser import DdlStatement

__all__ = ["DdlTarget", "run_ddl"]


class DdlTarget(Protocol):
    """What :func:`run_ddl` calls: the catalog methods of :class:`~servicebroker.Broker`."""

    @property
    def catalog(self) -> CatalogSnapshot: ...

    def create_message_type(
        self, name: str, *, validation: str = ..., xml_schema_collection: str | None = ...
    ) -> None: ...
    def alter_message_type(
        self, name: str, *, validation: str, xml_schema_collection: str | None = ...
    ) -> None: ...
    def drop_message_type(self, name: str) -> None: ...
    def create_xml_schema_collection(self, name: str, schemas: str | bytes) -> None: ...
    def alter_xml_schema_collection(self, name: str, add: str | bytes) -> None: ...
    def drop_xml_schema_collection(self, name: str) -> None: ...
    def create_contract(self, name: str, messages: Mapping[str, str]) -> None: ...
    def drop_contract(self, name: str) -> None: ...
    def create_queue(
        self,
        name: str,
        *,
        status: bool = ...,
        retention: bool = ...,
        poison_message_handling: bool = ...,
        activation: Activation | None = ...,
    ) -> None: ...
    def alter_queue(
        self,
        name: str,
        *,
        status: bool | None = ...,
        retention: bool | None = ...,
        poison_message_handling: bool | None = ...,
        activation: Activation | None = ...,
        drop_activation: bool = ...,
    ) -> None: ...
    def drop_queue(self, name: str) -> None: ...
    def create_service(self, name: str, *, queue: str, contracts: Sequence[str] = ...) -> None: ...
    def alter_service(
        self,
        name: str,
        *,
        queue: str | None = ...,
        add_contracts: Sequence[str] = ...,
        drop_contracts: Sequence[str] = ...,
    ) -> None: ...
    def drop_service(self, name: str) -> None: ...
    def create_event_notification(
        self, name: str, *, queue: str, event: str, to_service: str
    ) -> None: ...
    def drop_event_notification(self, name: str) -> None: ...
    def create_broker_priority(
        self,
        name: str,
        *,
        contract_name: str = ...,
        local_service_name: str = ...,
        remote_service_name: str = ...,
        priority_level: int = ...,
    ) -> None: ...
    def alter_broker_priority(
        self,
        name: str,
        *,
        contract_name: str | None = ...,
        local_service_name: str | None = ...,
        remote_service_name: str | None = ...,
        priority_level: int | None = ...,
    ) -> None: ...
    def drop_broker_priority(self, name: str) -> None: ...
    def alter_database(
        self,
        *,
        honor_broker_priority: bool | None = ...,
        enable_broker: bool | None = ...,
        new_broker: bool = ...,
        error_broker_conversations: bool = ...,
    ) -> None: ...
    def create_route(
        self,
        name: str,
        *,
        service_name: str | None = ...,
        broker_instance: str | uuid.UUID | None = ...,
        address: str,
        mirror_address: str | None = ...,
        lifetime: int | None = ...,
    ) -> None: ...
    def alter_route(
        self,
        name: str,
        *,
        service_name: str | None = ...,
        broker_instance: str | uuid.UUID | None = ...,
        address: str | None = ...,
        mirror_address: str | None = ...,
        lifetime: int | None = ...,
    ) -> None: ...
    def drop_route(self, name: str) -> None: ...
    def create_endpoint(
        self,
        name: str,
        *,
        listener_port: int = ...,
        listener_ip: str = ...,
        authentication_certificate: str,
        encryption: str = ...,
        algorithm: str = ...,
        message_forwarding: bool = ...,
        message_forward_size: int = ...,
        state: str = ...,
    ) -> None: ...
    def alter_endpoint(
        self,
        name: str,
        *,
        listener_port: int | None = ...,
        listener_ip: str | None = ...,
        authentication_certificate: str | None = ...,
        encryption: str | None = ...,
        algorithm: str | None = ...,
        message_forwarding: bool | None = ...,
        message_forward_size: int | None = ...,
        state: str | None = ...,
    ) -> None: ...
    def drop_endpoint(self, name: str) -> None: ...
    def create_certificate(
        self,
        name: str,
        *,
        certificate_file: str | Path,
        private_key_file: str | Path | None = ...,
        authorization: str | None = ...,
    ) -> None: ...
    def drop_certificate(self, name: str) -> None: ...
    def create_login(self, name: str, *, certificate: str) -> None: ...
    def drop_login(self, name: str) -> None: ...
    def grant_connect(
        self, endpoint: str, login: str | None = ..., *, certificate: str | None = ...
    ) -> str: ...
    def create_user(self, name: str, *, certificate: str | None = ...) -> int: ...
    def drop_user(self, name: str) -> None: ...
    def create_remote_service_binding(
        self, name: str, *, to_service: str, user: str, anonymous: bool = ...
    ) -> None: ...
    def drop_remote_service_binding(self, name: str) -> None: ...
    def grant(self, permission: str, *, on: str, to: str) -> None: ...
    def revoke(self, permission: str, *, on: str, to: str) -> None: ...


def run_ddl(target: DdlTarget, statements: Sequence[DdlStatement]) -> int:
    """Run ``statements`` in order; returns how many ran (USE lines are not counted).

    Raises:
        CatalogError: a statement the catalog refuses; the message names the statement, its
            line and column, and how many statements ran before it (those stay done).
    """
    ran = 0
    for st in statements:
        if st.statement == "USE":
            continue  # a broker is one database
        try:
            _run(target, st)
        except CatalogError as exc:
            raise CatalogError(
                f"{st.statement} at {st.where} failed: {exc} ({ran} statement(s) before it ran)"
            ) from exc
        ran += 1
    return ran


def _activation(st: DdlStatement, given: Mapping[str, Any], old: QueueDef | None) -> Activation:
    """The ACTIVATION clause as an Activation: all of it for CREATE QUEUE (``old`` None), or
    what it changes over the queue's current settings for ALTER QUEUE — "altering a queue to
    add an activation stored procedure does not change the activation status of the queue"
    (alter-queue-transact-sql.md)."""
    procedure = given.get("procedure_name", old.activation_procedure if old else None)
    if old is None:
        missing = [
            k.upper().replace("_AS", " AS")
            for k in ("procedure_name", "max_queue_readers", "execute_as")
            if k not in given
        ]
        if missing:
            raise CatalogError(
                f"queue {st.name!r}: ACTIVATION of CREATE QUEUE needs PROCEDURE_NAME, "
                f"MAX_QUEUE_READERS and EXECUTE AS (missing: {', '.join(missing)})"
            )
    if procedure is None:
        raise CatalogError(
            f"queue {st.name!r} has no activation procedure: ACTIVATION needs PROCEDURE_NAME"
        )
    return Activation(
        procedure,
        max_queue_readers=given.get("max_queue_readers", old.max_queue_readers if old else 1),
        status=given.get("status", old.activation_enabled if old else True),
        execute_as=given.get("execute_as", old.execute_as if old else "SELF"),
    )


def _run(target: DdlTarget, st: DdlStatement) -> None:
    o = st.options
    kind = st.statement
    if kind == "CREATE MESSAGE TYPE":
        target.create_message_type(
            st.name,
            validation=o.get("validation", "NONE"),
            xml_schema_collection=o.get("xml_schema_collection"),
        )
    elif kind == "ALTER MESSAGE TYPE":
        target.alter_message_type(
            st.name,
            validation=o["validation"],
            xml_schema_collection=o.get("xml_schema_collection"),
        )
    elif kind == "DROP MESSAGE TYPE":
        target.drop_message_type(st.name)
    elif kind == "CREATE XML SCHEMA COLLECTION":
        target.create_xml_schema_collection(st.name, o["schemas"])
    elif kind == "ALTER XML SCHEMA COLLECTION":
        target.alter_xml_schema_collection(st.name, o["add"])
    elif kind == "DROP XML SCHEMA COLLECTION":
        target.drop_xml_schema_collection(st.name)
    elif kind == "CREATE CONTRACT":
        target.create_contract(st.name, o["messages"])
    elif kind == "DROP CONTRACT":
        target.drop_contract(st.name)
    elif kind == "CREATE QUEUE":
        if o.get("drop_activation"):
            raise CatalogError("ACTIVATION (DROP) belongs to ALTER QUEUE, not CREATE QUEUE")
        target.create_queue(
            st.name,
            status=o.get("status", True),
            retention=o.get("retention", False),
            poison_message_handling=o.get("poison_message_handling", True),
            activation=_activation(st, o["activation"], None) if "activation" in o else None,
        )
    elif kind == "ALTER QUEUE":
        if o.get("drop_activation") and "activation" in o:
            raise CatalogError("ACTIVATION (DROP) and ACTIVATION (…) in one ALTER QUEUE")
        old = target.catalog.queue(st.name)
        target.alter_queue(
            st.name,
            status=o.get("status"),
            retention=o.get("retention"),
            poison_message_handling=o.get("poison_message_handling"),
            activation=(_activation(st, o["activation"], old) if "activation" in o else None),
            drop_activation=bool(o.get("drop_activation")),
        )
    elif kind == "DROP QUEUE":
        target.drop_queue(st.name)
    elif kind == "CREATE SERVICE":
        target.create_service(st.name, queue=o["queue"], contracts=o.get("contracts", ()))
    elif kind == "ALTER SERVICE":
        target.alter_service(
            st.name,
            queue=o.get("queue"),
            add_contracts=o.get("add_contracts", ()),
            drop_contracts=o.get("drop_contracts", ()),
        )
    elif kind == "DROP SERVICE":
        target.drop_service(st.name)
    elif kind == "CREATE EVENT NOTIFICATION":
        if o["broker_instance"].lower() != "current database":
            raise CatalogError(
                f"event notification {st.name!r}: TO SERVICE names a broker instance "
                f"{o['broker_instance']!r}; only 'current database' exists here"
            )
        target.create_event_notification(
            st.name, queue=o["queue"], event=o["event"], to_service=o["to_service"]
        )
    elif kind == "DROP EVENT NOTIFICATION":
        _drop_event_notifications(target, st)
    elif kind == "CREATE BROKER PRIORITY":
        target.create_broker_priority(st.name, **o)
    elif kind == "ALTER BROKER PRIORITY":
        target.alter_broker_priority(st.name, **o)
    elif kind == "DROP BROKER PRIORITY":
        target.drop_broker_priority(st.name)
    elif kind == "ALTER DATABASE":
        _alter_database(target, o)
    elif kind in _NETWORK:
        _run_network(target, st)
    elif kind in _PRINCIPALS:
        _run_principals(target, st)
    else:  # pragma: no cover - the grammar has no other statement
        raise CatalogError(f"unknown statement {kind}")


def _drop_event_notifications(target: DdlTarget, st: DdlStatement) -> None:
    snap = target.catalog
    queue = snap.queue(st.options["queue"])
    for name in st.options["names"]:
        en = snap.event_notifications.get(name)
        if en is not None and en.queue_id != queue.queue_id:
            raise CatalogError(f"event notification {name!r} is not on queue {queue.name!r}")
        target.drop_event_notification(name)


_UNSUPPORTED = {
    "disable_broker": (
        "DISABLE_BROKER is not supported: this broker is always enabled (to stop a queue's "
        "delivery and RECEIVE, ALTER QUEUE … WITH STATUS = OFF)"
    ),
}


def _alter_database(target: DdlTarget, options: Mapping[str, Any]) -> None:
    for key in options:
        if key in _UNSUPPORTED:
            raise CatalogError(f"ALTER DATABASE … SET {_UNSUPPORTED[key]}")
    target.alter_database(
        honor_broker_priority=options.get("honor_broker_priority"),
        enable_broker=options.get("enable_broker"),
        new_broker=bool(options.get("new_broker")),
        error_broker_conversations=bool(options.get("error_broker_conversations")),
    )


_NETWORK = frozenset(
    {
        "CREATE ROUTE",
        "ALTER ROUTE",
        "DROP ROUTE",
        "CREATE ENDPOINT",
        "ALTER ENDPOINT",
        "DROP ENDPOINT",
        "CREATE CERTIFICATE",
        "DROP CERTIFICATE",
        "CREATE LOGIN",
        "DROP LOGIN",
        "GRANT CONNECT",
        "REVOKE CONNECT",
    }
)
_PRINCIPALS = frozenset(
    {
        "CREATE USER",
        "DROP USER",
        "CREATE REMOTE SERVICE BINDING",
        "DROP REMOTE SERVICE BINDING",
        "GRANT",
        "REVOKE",
    }
)
_ROUTE_CLAUSES = ("service_name", "broker_instance", "lifetime", "address", "mirror_address")
_ENDPOINT_SETTINGS = (
    "state",
    "listener_port",
    "listener_ip",
    "authentication_certificate",
    "encryption",
    "algorithm",
    "message_forwarding",
    "message_forward_size",
)


def _run_network(target: DdlTarget, st: DdlStatement) -> None:
    """The transport's catalog statements (routes, the endpoint, certificates, logins, GRANT
    CONNECT). CREATE ENDPOINT takes the page's defaults where the Python method has its own:
    STATE STOPPED and LISTENER_IP ALL (create-endpoint-transact-sql.md: "If the state is not
    specified when the endpoint is created, STOPPED is the default"; LISTENER_IP "The default
    is ALL")."""
    o = st.options
    kind = st.statement
    route = {k: o[k] for k in _ROUTE_CLAUSES if k in o}
    endpoint = {k: o[k] for k in _ENDPOINT_SETTINGS if k in o}
    if kind == "CREATE ROUTE":
        target.create_route(st.name, **{"address": None, **route})
    elif kind == "ALTER ROUTE":
        target.alter_route(st.name, **route)
    elif kind == "DROP ROUTE":
        target.drop_route(st.name)
    elif kind == "CREATE ENDPOINT":
        if "authentication_certificate" not in endpoint:
            raise CatalogError(
                f"endpoint {st.name!r}: FOR SERVICE_BROKER needs AUTHENTICATION = CERTIFICATE "
                f"certificate_name (the only authentication here, SEC-1)"
            )
        if "listener_port" not in endpoint:
            raise CatalogError(f"endpoint {st.name!r}: AS TCP needs LISTENER_PORT")
        target.create_endpoint(st.name, **{"state": "STOPPED", "listener_ip": "ALL", **endpoint})
    elif kind == "ALTER ENDPOINT":
        target.alter_endpoint(st.name, **endpoint)
    elif kind == "DROP ENDPOINT":
        target.drop_endpoint(st.name)
    elif kind == "CREATE CERTIFICATE":
        target.create_certificate(
            st.name,
            certificate_file=o["certificate_file"],
            private_key_file=o.get("private_key_file"),
            authorization=o.get("authorization"),
        )
    elif kind == "DROP CERTIFICATE":
        target.drop_certificate(st.name)
    elif kind == "CREATE LOGIN":
        target.create_login(st.name, certificate=o["certificate"])
    elif kind == "DROP LOGIN":
        target.drop_login(st.name)
    elif kind == "REVOKE CONNECT":
        for login in o["logins"]:
            target.revoke("CONNECT", on=f"ENDPOINT::{st.name}", to=login)
    else:  # GRANT CONNECT ON ENDPOINT::name TO login [, …]
        for login in o["logins"]:
            target.grant_connect(st.name, login)


def _run_principals(target: DdlTarget, st: DdlStatement) -> None:
    """CREATE USER … [WITHOUT LOGIN | FROM CERTIFICATE c], DROP USER, CREATE / DROP REMOTE
    SERVICE BINDING, GRANT / REVOKE SEND ON SERVICE:: and RECEIVE ON [OBJECT::]queue (SEC-3,
    SEC-4). A binding without ANONYMOUS is ANONYMOUS = OFF (the page's default)."""
    o = st.options
    kind = st.statement
    if kind == "CREATE USER":
        target.create_user(st.name, certificate=o.get("certificate"))
    elif kind == "DROP USER":
        target.drop_user(st.name)
    elif kind == "CREATE REMOTE SERVICE BINDING":
        if "user" not in o:
            raise CatalogError(f"remote service binding {st.name!r}: WITH USER = … is required")
        target.create_remote_service_binding(
            st.name, to_service=o["to_service"], user=o["user"], anonymous=o.get("anonymous", False)
        )
    elif kind == "DROP REMOTE SERVICE BINDING":
        target.drop_remote_service_binding(st.name)
    else:
        statement = target.grant if kind == "GRANT" else target.revoke
        for principal in o["principals"]:
            statement(o["permission"], on=o["on"], to=principal)
