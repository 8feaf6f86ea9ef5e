"""The catalog: what exists in a broker database — message types, contracts, queues, services,
event notifications, broker priorities and the HONOR_BROKER_PRIORITY option; the transport's
certificates, endpoint, logins and routes; database principals, their permissions and remote
service bindings.

- :mod:`.model`: the definitions as frozen records and the :class:`CatalogSnapshot`;
- :mod:`.changes`: the CREATE / ALTER / DROP statements;
- :mod:`.cache`: the per-broker snapshot cache and the transaction every change runs in;
- :mod:`.ddl`: the Service Broker DDL in its T-SQL form, parsed into statement records;
- :mod:`.ddl_run`: those records run against the broker's catalog methods;
- :mod:`.principals`, :mod:`.principal_changes`, :mod:`.principal_views`: users, remote service
  bindings, GRANT / REVOKE and their views (SEC-3, SEC-4).
"""

from __future__ import annotations

from ..storage.rows import PrincipalRow, RemoteServiceBindingRow
from .cache import CatalogCache
from .model import (
    DBO,
    EVENT_NOTIFICATION,
    EVENT_NOTIFICATION_SERVICE,
    EVENT_TYPES,
    NAME_LIMIT,
    POST_EVENT_NOTIFICATION,
    PUBLIC,
    SERVICE_STRING_LIMIT,
    SYSTEM_MESSAGE_TYPES,
    Activation,
    CatalogSnapshot,
    ContractDef,
    EventNotificationDef,
    MessageTypeDef,
    Procedure,
    QueueDef,
    ServiceDef,
    check_name,
    resolve_procedure,
)

__all__ = [
    "DBO",
    "EVENT_NOTIFICATION",
    "EVENT_NOTIFICATION_SERVICE",
    "EVENT_TYPES",
    "NAME_LIMIT",
    "POST_EVENT_NOTIFICATION",
    "PUBLIC",
    "SERVICE_STRING_LIMIT",
    "SYSTEM_MESSAGE_TYPES",
    "Activation",
    "CatalogCache",
    "CatalogSnapshot",
    "ContractDef",
    "EventNotificationDef",
    "MessageTypeDef",
    "PrincipalRow",
    "Procedure",
    "QueueDef",
    "RemoteServiceBindingRow",
    "ServiceDef",
    "check_name",
    "resolve_procedure",
]
