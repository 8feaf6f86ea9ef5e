"""ALTER DATABASE … SET <service_broker_option> (alter-database-transact-sql-set-options.md) as
one catalog statement: HONOR_BROKER_PRIORITY ON | OFF, NEW_BROKER (every conversation removed
without a message, a new ``service_broker_guid``) and ERROR_BROKER_CONVERSATIONS (every open
endpoint ended with an Error, through :class:`~servicebroker.engine.delivery.Applier` as DROP CONTRACT
does). ENABLE_BROKER is checked by the caller (a broker is always enabled).
"""

from __future__ import annotations

import uuid

from ..arguments import check_flag
from ..catalog.model import CatalogSnapshot
from ..dialogs import State
from ..engine.delivery import Applier
from ..engine.system_messages import BROKER_CONVERSATIONS_ERRORED
from ..errors import CatalogError
from ..storage.base import StorageConnection

__all__ = ["alter_database", "check_database_options"]


def check_database_options(
    *, honor_broker_priority: object, new_broker: object, error_broker_conversations: object
) -> None:
    """Check the values of ALTER DATABASE's Service Broker options before anything runs.

    Raises:
        CatalogError: HONOR_BROKER_PRIORITY not a bool or None; NEW_BROKER or
            ERROR_BROKER_CONVERSATIONS not a bool; both of those at once.
    """
    if honor_broker_priority is not None:
        check_flag(honor_broker_priority, "HONOR_BROKER_PRIORITY (ON or OFF)", error=CatalogError)
    for what, value in (
        ("NEW_BROKER", new_broker),
        ("ERROR_BROKER_CONVERSATIONS", error_broker_conversations),
    ):
        check_flag(value, f"{what} (set with True, left out with False)", error=CatalogError)
    if new_broker and error_broker_conversations:
        raise CatalogError(
            "ALTER DATABASE: NEW_BROKER and ERROR_BROKER_CONVERSATIONS cannot be set together "
            "(NEW_BROKER removes the conversations ERROR_BROKER_CONVERSATIONS would end)"
        )


def alter_database(
    conn: StorageConnection,
    snap: CatalogSnapshot,
    *,
    honor_broker_priority: bool | None,
    new_broker: bool,
    error_broker_conversations: bool,
    now: float,
) -> set[int]:
    """ALTER DATABASE … SET the Service Broker options given (already checked by
    :func:`check_database_options`), in the catalog statement's transaction; returns the
    queues that got messages.

    - NEW_BROKER: "all existing conversations in the database are immediately removed without
      producing end dialog messages" and the database gets a new ``service_broker_guid``: every
      endpoint, every queue row (retained ones too), the transmission queue and the event
      notifications' dialogs go; queues, services and the rest of the catalog stay.
    - ERROR_BROKER_CONVERSATIONS: "ends all conversations in the database with an error"; the
      ``service_broker_guid`` is kept. Each endpoint not yet ended by an error or closed
      (SO, SI, CO, DI) gets one Error (:data:`~servicebroker.engine.system_messages.BROKER_CONVERSATIONS_ERRORED`)
      first on its own queue and goes to ER, its unsent messages dropped, as DROP CONTRACT
      does (:meth:`Applier.fail`: nothing is sent to the far side, so neither side gets an
      EndDialog or a second Error); an endpoint this side had ended (DO) closes, and a
      conversation whose endpoints are all closed is deleted. ER and CD endpoints stay as they
      are (an ER endpoint has had its Error; the application ends it).
    - HONOR_BROKER_PRIORITY ON | OFF (PRI-16).
    """
    woken: set[int] = set()
    if new_broker:
        conn.remove_all_conversations()
        conn.catalog_write("put_setting", ("service_broker_guid", str(uuid.uuid4())))
    if error_broker_conversations:
        woken = _error_conversations(conn, snap, now)
    if honor_broker_priority is not None:
        value = "1" if honor_broker_priority else "0"
        conn.catalog_write("put_setting", ("honor_broker_priority", value))
    return woken


def _error_conversations(conn: StorageConnection, snap: CatalogSnapshot, now: float) -> set[int]:
    rows = conn.list_endpoints()
    if not rows:
        return set()
    applier = Applier(conn, snap, now)
    applier.prefetch([e.conversation_id for e in rows])
    applier.lock_queues(())
    for e in rows:
        row = applier.endpoint(e.conversation_handle)
        if row is None or row.state in (State.ER, State.CD):
            continue
        applier.fail(row, *BROKER_CONVERSATIONS_ERRORED)
    applier.finish()
    return applier.woken_queues
