"""The catalog as the engine reads it: what exists in a broker database — message types,
contracts, queues, services, event notifications, broker priorities and the
HONOR_BROKER_PRIORITY option; the transport's certificates, endpoint, logins and routes;
database principals, their permissions and remote service bindings.

- :mod:`.model`: the definitions as frozen records and the :class:`CatalogSnapshot`;
- :mod:`.cache`: the per-broker snapshot cache and the transaction every change runs in;
- :mod:`.routing` (RTE-1..3) and :mod:`.priorities` (PRI-1..18): pure rules over the catalog;
- :mod:`.views`, :mod:`.network_views`, :mod:`.principal_views`: the catalog views as rows.

The statements that change the catalog are :mod:`servicebroker.ddl`, above the engine.
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
