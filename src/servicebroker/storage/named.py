"""The storage operations that are the same on every backend, written once over each backend's
named queries (shared ones in ``storage/queries.sql``, the rest in the backend's own, see
:mod:`.queries`): endpoints, queue rows, the transmission queue, the poison counter and the
catalog. A backend subclasses :class:`NamedQueryConnection` and gives the primitives — run a
named query for one value, all rows, no rows or many parameter sets — plus its transaction
control, its group locks and what its SQL dialect makes different. Rows are returned as the
named tuples of :mod:`.base`. :func:`held_best` is the backends' shared rule for ranking the
groups a transaction holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from ..errors import IntegrityConflict
from .rows import (
    BrokerPriorityRow,
    CatalogRows,
    CertificateRow,
    ClosedConversationRow,
    ContractRow,
    ContractUsageRow,
    ConversationGroupListRow,
    EndpointGrantRow,
    EndpointListRow,
    EndpointRow,
    EventNotificationRow,
    GroupClaimRow,
    LoginRow,
    MessageRow,
    MessageTypeRow,
    PermissionRow,
    PrincipalRow,
    QueueCountRow,
    QueueInsert,
    QueueRow,
    ReadyGroupRow,
    RemoteServiceBindingRow,
    RouteRow,
    ServiceBrokerEndpointRow,
    ServiceContractRow,
    ServiceRow,
    StatisticsRow,
    StreamReaderRow,
    TransmissionListRow,
    TransmissionRow,
    TransmissionSummaryRow,
    TransportMark,
    TransportRow,
    XmlSchemaCollectionRow,
    XmlSchemaDocumentRow,
)

__all__ = ["HeldHeads", "NamedQueryConnection", "endpoint_update", "held_best", "rows_of"]

_Row = TypeVar("_Row", bound=tuple[Any, ...])


def rows_of(row_type: type[_Row], rows: Iterable[Iterable[Any]]) -> list[_Row]:
    """``rows`` (tuples as the driver read them) as ``row_type``, a named tuple of as many
    fields: what ``row_type._make`` does, in C (no Python call per row: this is RECEIVE's hot
    path); the named query fixes the number of columns."""
    return list(map(partial(tuple.__new__, row_type), rows))


def endpoint_update(row: EndpointRow) -> tuple[Any, ...]:
    """The parameters of the named statement ``update_endpoint`` for ``row``: its changeable
    columns in the statement's order, then its ``endpoint_id``."""
    return (
        row.conversation_group_id,
        row.state,
        row.dialog_timer,
        row.send_sequence,
        row.receive_sequence,
        row.end_dialog_sequence,
        row.far_broker_instance,
        *_security(row),
        row.endpoint_id,
    )


def _security(row: EndpointRow) -> tuple[Any, ...]:
    """The dialog-security columns of an endpoint (SEC-2), in the named queries' order."""
    return (
        row.principal_id,
        row.far_principal_id,
        row.outbound_session_key_identifier,
        row.inbound_session_key_identifier,
        row.security_timestamp,
        row.session_key,
        int(row.encryption_requested),
        row.far_certificate,
    )


HeldHeads = dict[bytes, tuple[int, tuple[int, int] | None]]
"""What a transaction knows of the groups it holds: per group, the watermark when its head was
read and that head, ``(priority, queuing order)`` of its first unreceived ready message in
RECEIVE order, or None when it had nothing left."""


def held_best(
    held: Iterable[bytes],
    known: HeldHeads,
    watermark: Callable[[], int],
    head_of: Callable[[bytes], Sequence[int] | None],
    arrived_since: Callable[[int], set[bytes]],
    skip: Mapping[bytes, Collection[int]],
) -> tuple[int, int, bytes] | None:
    """The best group among those a transaction holds, ranked by what it has not received yet
    (PRI-9): ``(-level, head queuing order, group)``, or None when none has anything left.

    ``head_of(group)`` reads a held group's head. A head once read is kept in ``known`` with the
    ``watermark()`` of that moment (every committed message's queuing_order is at most it) and
    read again only when the transaction has received it since (its queuing order is in
    ``skip[group]``, the queuing orders received from that group: RECEIVE takes a group's messages from its head) or when ``arrived_since(w)`` —
    the groups of ready messages of the queue with a queuing order above ``w``, one query for
    all of them — names the group (messages keep arriving in locked groups, RCV-2). Nothing
    else changes a held group's messages while the transaction holds it. So a RECEIVE in a
    transaction that took many groups reads only the groups that changed, not all of them.
    """
    best: tuple[int, int, bytes] | None = None
    mark = watermark()  # read before the heads: anything committed later is above it
    groups = list(held)
    older = [known[g][0] for g in groups if g in known and known[g][0] < mark]
    arrived = arrived_since(min(older)) if older else set()
    for group_id in groups:
        entry = known.get(group_id)
        if (
            entry is None
            or group_id in arrived
            or (entry[1] is not None and entry[1][1] in skip.get(group_id, ()))
        ):
            found = head_of(group_id)
            head = None if found is None else (int(found[0]), int(found[1]))
        else:
            head = entry[1]
        known[group_id] = (mark, head)
        if head is not None and (best is None or (-head[0], head[1]) < best[:2]):
            best = (-head[0], head[1], group_id)
    return best


class NamedQueryConnection:
    """Shared :class:`~servicebroker.storage.base.StorageConnection` operations (see there for
    the contract); subclasses implement :meth:`_one`, :meth:`_all`, :meth:`_run`,
    :meth:`_many` and :meth:`_snapshot` (raising the storage's errors, never the driver's:
    a refusing constraint is :class:`~servicebroker.errors.IntegrityConflict`), and may adapt
    :meth:`_limit`."""

    # -- primitives (per backend) --------------------------------------------------------
    def _one(self, name: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row of named query ``name``; None when it returns
        no row or is a statement without result."""
        raise NotImplementedError

    def _all(self, name: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of named query ``name``."""
        raise NotImplementedError

    def _run(self, name: str, params: Sequence[Any] = ()) -> None:
        """Run named statement ``name``."""
        raise NotImplementedError

    def _many(self, name: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run named statement ``name`` once per parameter set, batched by the backend."""
        raise NotImplementedError

    def _snapshot(self) -> AbstractContextManager[None]:
        """A block whose reads see one consistent state of the database."""
        raise NotImplementedError

    def _reading(self, name: str, for_update: bool) -> str:
        """The named query that reads like ``name`` — locking its rows when ``for_update``
        on a backend whose commits run in parallel (PostgreSQL: ``name + "_locked"``).
        SQLite's single writer needs no row locks: ``name``."""
        return name

    def _limit(self, n: int) -> int | None:
        """A LIMIT value; -1 means no limit (SQLite's own meaning)."""
        return n

    def _refusable(self, name: str, params: Sequence[Any]) -> Any:
        """:meth:`_one` for a write a constraint may refuse.

        Raises:
            IntegrityConflict: it did.
        """
        try:
            return self._one(name, params)
        except IntegrityConflict as exc:
            raise IntegrityConflict(f"{name}: {exc}", database=exc.database) from exc

    # -- catalog -------------------------------------------------------------------------
    def load_catalog(self) -> CatalogRows:
        """Every catalog row, from one consistent snapshot."""
        with self._snapshot():
            return CatalogRows(
                version=self.catalog_version(),
                message_types=rows_of(MessageTypeRow, self._all("catalog_message_types")),
                contracts=rows_of(ContractRow, self._all("catalog_contracts")),
                contract_usages=rows_of(ContractUsageRow, self._all("catalog_contract_usages")),
                queues=rows_of(QueueRow, self._all("catalog_queues")),
                services=rows_of(ServiceRow, self._all("catalog_services")),
                service_contracts=rows_of(
                    ServiceContractRow, self._all("catalog_service_contracts")
                ),
                event_notifications=rows_of(
                    EventNotificationRow, self._all("catalog_event_notifications")
                ),
                broker_priorities=rows_of(
                    BrokerPriorityRow, self._all("catalog_broker_priorities")
                ),
                honor_broker_priority=self._one("get_setting", ("honor_broker_priority",)) == "1",
                service_broker_guid=str(self._one("get_setting", ("service_broker_guid",)) or ""),
                certificates=rows_of(CertificateRow, self._all("catalog_certificates")),
                service_broker_endpoints=rows_of(
                    ServiceBrokerEndpointRow, self._all("catalog_service_broker_endpoints")
                ),
                logins=rows_of(LoginRow, self._all("catalog_logins")),
                endpoint_grants=rows_of(EndpointGrantRow, self._all("catalog_endpoint_grants")),
                routes=rows_of(RouteRow, self._all("catalog_routes")),
                principals=rows_of(PrincipalRow, self._all("catalog_principals")),
                permissions=rows_of(PermissionRow, self._all("catalog_permissions")),
                remote_service_bindings=rows_of(
                    RemoteServiceBindingRow, self._all("catalog_remote_service_bindings")
                ),
                xml_schema_collections=rows_of(
                    XmlSchemaCollectionRow, self._all("catalog_xml_schema_collections")
                ),
                xml_schema_documents=rows_of(
                    XmlSchemaDocumentRow, self._all("catalog_xml_schema_documents")
                ),
            )

    def catalog_version(self) -> int:
        """The catalog's version number (bumped by every catalog change)."""
        return int(self._one("get_setting", ("catalog_version",)))

    def catalog_version_later(self) -> Callable[[], int]:
        """:meth:`catalog_version` now (a backend without round trips has nothing to save)."""
        version = self.catalog_version()
        return lambda: version

    def catalog_write(self, name: str, params: Sequence[Any]) -> int:
        """Run the catalog statement ``name``; the new row's id for inserts (RETURNING), else 0.

        Raises:
            IntegrityConflict: a constraint refused it.
        """
        return int(self._refusable(name, params) or 0)

    def catalog_count(self, name: str, params: Sequence[Any]) -> int:
        """Run the counting query ``name`` and return its number."""
        return int(self._one(name, params) or 0)

    def bump_catalog_version(self) -> None:
        """Mark the catalog changed, so every process reloads it."""
        self._run("bump_catalog_version")

    def add_rollback(self, queue_id: int) -> int:
        """Count one more consecutive rolled-back receive on the queue (POI-1); returns it."""
        return int(self._one("add_rollback", (queue_id,)) or 0)

    def reset_rollbacks(self, queue_id: int) -> None:
        """A receive on the queue committed: the run of rollbacks is broken (POI-1)."""
        self._run("reset_rollbacks", (queue_id,))

    def disable_queue(self, queue_id: int, now: float) -> None:
        """Turn the queue's STATUS OFF (POI-1)."""
        self._run("disable_queue", (now, queue_id))
        self.bump_catalog_version()

    # -- endpoints -----------------------------------------------------------------------
    def get_endpoint(self, handle: bytes, *, for_update: bool = False) -> EndpointRow | None:
        """The endpoint with this conversation handle, or None (locked: see the contract)."""
        rows = self._all(self._reading("get_endpoint", for_update), (handle,))
        return EndpointRow(*rows[0]) if rows else None

    def get_endpoints(self, handles: Sequence[bytes]) -> list[EndpointRow]:
        """The endpoints with these handles (one query: ``get_endpoints`` takes the list)."""
        return [EndpointRow(*row) for row in self._all("get_endpoints", (list(handles),))]

    def get_far_endpoint(
        self, conversation_id: bytes, far_is_initiator: bool, *, for_update: bool = False
    ) -> EndpointRow | None:
        """The endpoint of ``conversation_id`` on the given side, or None."""
        rows = self._all(
            self._reading("get_far_endpoint", for_update),
            (conversation_id, int(far_is_initiator)),
        )
        return EndpointRow(*rows[0]) if rows else None

    def insert_endpoint(self, row: EndpointRow) -> int:
        """Insert an endpoint; returns its ``endpoint_id``.

        Raises:
            IntegrityConflict: its handle or its (conversation, side) exists.
        """
        return int(
            self._refusable(
                "insert_endpoint",
                (
                    row.conversation_handle,
                    row.conversation_id,
                    int(row.is_initiator),
                    row.service_contract_id,
                    row.conversation_group_id,
                    row.service_id,
                    row.queue_id,
                    row.far_service,
                    row.lifetime,
                    row.state,
                    row.dialog_timer,
                    row.send_sequence,
                    row.receive_sequence,
                    row.priority,
                    row.end_dialog_sequence,
                    row.far_broker_instance,
                    *_security(row),
                ),
            )
        )

    def update_endpoints(self, rows: Sequence[EndpointRow]) -> None:
        """Write several endpoints' changeable columns, in one batch."""
        self._many("update_endpoint", [endpoint_update(r) for r in rows])

    def delete_endpoints(self, endpoint_ids: Sequence[int]) -> None:
        """Delete endpoints, in one batch."""
        self._many("delete_endpoint", [(i,) for i in endpoint_ids])

    def group_queue(self, group_id: bytes) -> int | None:
        """The queue of an existing conversation group, or None if no endpoint is in it."""
        value = self._one("group_queue", (group_id,))
        return None if value is None else int(value)

    def group_services(self, group_id: bytes) -> list[int]:
        """The service ids of the endpoints in conversation group ``group_id``, ascending."""
        return [int(r[0]) for r in self._all("group_services", (group_id,))]

    def list_conversation_groups(self) -> list[ConversationGroupListRow]:
        """Rows for the ``conversation_groups`` view."""
        return rows_of(ConversationGroupListRow, self._all("list_conversation_groups"))

    def due_timers(self, now: float, limit: int) -> list[bytes]:
        """Handles whose conversation timer is due at ``now`` (DLG-6)."""
        return [bytes(r[0]) for r in self._all("due_timers", (now, self._limit(limit)))]

    def due_lifetimes(self, now: float, limit: int) -> list[bytes]:
        """Handles of live endpoints whose LIFETIME has passed at ``now`` (DLG-5)."""
        return [bytes(r[0]) for r in self._all("due_lifetimes", (now, self._limit(limit)))]

    def next_due_time(self) -> float | None:
        """The earliest conversation timer or lifetime still to fire."""
        value = self._one("next_due_time")
        return None if value is None else float(value)

    def list_endpoints(self) -> list[EndpointListRow]:
        """Rows for the ``conversation_endpoints`` view."""
        return rows_of(EndpointListRow, self._all("list_endpoints"))

    # -- queues --------------------------------------------------------------------------
    def insert_messages(self, rows: Iterable[QueueInsert]) -> None:
        """Put messages on their queues, in the given order."""
        self._many("insert_message", rows)

    def group_messages(self, group_id: bytes, limit: int) -> list[MessageRow]:
        """Ready messages of a group in RECEIVE order (PRI-12, SYS-2), at most ``limit``."""
        return rows_of(
            MessageRow, self._all("group_messages", (group_id, group_id, self._limit(limit)))
        )

    def conversation_messages(self, group_id: bytes, handle: bytes, limit: int) -> list[MessageRow]:
        """Ready messages of one conversation (in group ``group_id``) in RECEIVE order."""
        return rows_of(
            MessageRow,
            self._all("conversation_messages", (group_id, handle, group_id, self._limit(limit))),
        )

    def peek(self, queue_id: int, limit: int) -> list[MessageRow]:
        """Every row of a queue (any status), at most ``limit``."""
        return rows_of(MessageRow, self._all("peek", (queue_id, self._limit(limit))))

    def peek_after(self, queue_id: int, after: int, limit: int) -> list[MessageRow]:
        """Rows of a queue with ``queuing_order > after``, in queuing order."""
        return rows_of(MessageRow, self._all("peek_after", (queue_id, after, self._limit(limit))))

    def message_sequence(self, queue_id: int) -> int:
        """The queue's watermark: see the contract."""
        return int(self._one("message_sequence", (queue_id,)) or 0)

    def queue_has_ready(self, queue_id: int) -> bool:
        """True when the queue holds a message with status 1."""
        return bool(self._one("queue_has_ready", (queue_id,)))

    # -- stream readers and their group claims (issue 14) --------------------------------
    def stream_reader(self, reader: str, *, for_update: bool = False) -> StreamReaderRow | None:
        """The stream reader named ``reader``, or None (``for_update``: its row locked)."""
        rows = self._all("stream_reader_for_update" if for_update else "stream_reader", (reader,))
        return StreamReaderRow._make(rows[0]) if rows else None

    def renew_stream_reader(self, reader: str, now: float) -> None:
        """Set the reader's ``renewed`` to ``now`` (nothing else of its row)."""
        self._run("renew_stream_reader", (now, reader))

    def put_stream_reader(self, row: StreamReaderRow) -> None:
        """Insert or replace a stream reader's row."""
        self._run("put_stream_reader", tuple(row))

    def list_stream_readers(self) -> list[StreamReaderRow]:
        """Every stream reader, by name."""
        return rows_of(StreamReaderRow, self._all("list_stream_readers"))

    def expired_stream_readers(self, now: float) -> list[str]:
        """Readers holding an unacknowledged batch whose claim time-out passed at ``now``."""
        return [str(r[0]) for r in self._all("expired_stream_readers", (now,))]

    def ready_groups(self, queue_id: int, limit: int) -> list[bytes]:
        """Unclaimed groups of the queue with ready messages, in RECEIVE's order."""
        return [bytes(r[0]) for r in self._all("ready_groups", (queue_id, self._limit(limit)))]

    def group_claimed(self, group_id: bytes) -> bool:
        """True while a stream reader claims the group."""
        return bool(self._one("group_claimed", (group_id,)))

    def insert_group_claims(self, rows: Iterable[tuple[bytes, int, str, int, float]]) -> None:
        """Claim groups: (group id, queue id, reader, batch, claimed_at) each."""
        self._many("insert_group_claim", rows)

    def insert_claimed_messages(
        self, reader: str, batch: int, rows: Iterable[tuple[int, int, MessageRow]]
    ) -> None:
        """Copy a batch's messages: (part, position, message row) each."""
        self._many(
            "insert_claimed_message",
            ((reader, batch, part, position, *row) for part, position, row in rows),
        )

    def claimed_messages(self, reader: str, low: int, high: int, part: int) -> list[MessageRow]:
        """The messages of ``reader``'s batches ``low`` (excluded) to ``high`` read by task
        ``part``, in batch and then planned order."""
        return rows_of(MessageRow, self._all("claimed_messages", (reader, low, high, part)))

    def claimed_counts(self, reader: str, low: int, high: int) -> list[tuple[int, int, int]]:
        """(batch, part, messages) of ``reader``'s batches ``low`` (excluded) to ``high``."""
        return [
            (int(b), int(p), int(n)) for b, p, n in self._all("claimed_counts", (reader, low, high))
        ]

    def claimed_orders(self, reader: str, up_to: int) -> list[tuple[int, int]]:
        """(queue id, queuing order) of the messages of ``reader``'s batches up to ``up_to``."""
        return [(int(q), int(o)) for q, o in self._all("claimed_orders", (reader, up_to))]

    def drop_claims(self, reader: str, up_to: int) -> None:
        """Delete ``reader``'s claims and claimed copies of batches up to ``up_to``."""
        self._run("delete_group_claims", (reader, up_to))
        self._run("delete_claimed_messages", (reader, up_to))

    def list_group_claims(self) -> list[GroupClaimRow]:
        """Rows for the ``conversation_group_claims`` view."""
        return rows_of(GroupClaimRow, self._all("list_group_claims"))

    def queue_counts(self) -> list[QueueCountRow]:
        """(queue_id, status, messages) for every queue holding messages."""
        return rows_of(QueueCountRow, self._all("queue_counts"))

    def delete_conversation_messages(self, endpoints: Sequence[tuple[bytes, bytes]]) -> None:
        """Delete every queue row of the (group, handle) endpoints (END CONVERSATION)."""
        self._many("delete_conversation_messages", endpoints)

    def delete_queue_messages(self, queue_id: int) -> None:
        """Delete every row of a queue (DROP QUEUE)."""
        self._run("delete_queue_messages", (queue_id,))

    def remove_all_conversations(self) -> None:
        """Delete every endpoint, queue row and transmission row (NEW_BROKER)."""
        for name in (
            "remove_all_endpoints",
            "remove_all_queue_groups",  # first: the messages' triggers then find no head to move
            "remove_all_queue_messages",
            "remove_all_transmission",
            "forget_notification_dialogs",
        ):
            self._run(name)

    def move_conversation_messages(self, handle: bytes, old_group: bytes, group_id: bytes) -> None:
        """Move a conversation's queue rows from ``old_group`` to ``group_id`` (DLG-7)."""
        self._run("move_conversation_messages", (group_id, old_group, handle))

    # -- transmission queue --------------------------------------------------------------
    def insert_transmissions(self, rows: Iterable[Sequence[Any]]) -> None:
        """Hold messages in the transmission queue, in order (TransmissionRows without ids)."""
        self._many("insert_transmission", rows)

    def transmission_pending(self, limit: int) -> list[TransmissionRow]:
        """For each level 10..1, its oldest ``limit`` transmission-queue rows in send order
        (one index range each): every row the first ``limit`` to leave can come from, whatever
        the levels' ages (PRI-14, PRI-18); the rows waiting for a queue of this database."""
        return self._per_level(TransmissionRow, "transmission_pending_at_level", (), limit)

    def transmission_remote(
        self, limit: int, *, inline_bytes: int, after: int | None = None
    ) -> list[TransportRow]:
        """The transport's rows: each level's oldest ``limit`` (``after`` None) or the first
        ``limit`` above id ``after``; bodies over ``inline_bytes`` left out (None)."""
        if after is not None:
            return rows_of(
                TransportRow,
                self._all("transmission_remote_after", (inline_bytes, after, self._limit(limit))),
            )
        return self._per_level(TransportRow, "transmission_remote_at_level", (inline_bytes,), limit)

    def _per_level(
        self, row_type: type[_Row], name: str, params: tuple[Any, ...], limit: int
    ) -> list[_Row]:
        """Named query ``name`` (``params``, then the level and ``limit``) for each level
        10 down to 1, its rows in that order: one index range per level (PRI-14)."""
        rows: list[_Row] = []
        for level in range(10, 0, -1):
            rows += rows_of(row_type, self._all(name, (*params, level, self._limit(limit))))
        return rows

    def transmission_remote_ids(self, low: int, high: int) -> set[int]:
        """The ids of the transport's rows from ``low`` to ``high``."""
        return {int(r[0]) for r in self._all("transmission_remote_ids", (low, high))}

    def transmission_remote_body(self, transmission_id: int) -> bytes | None:
        """The body of the transport's row ``transmission_id`` (None: gone)."""
        value = self._one("transmission_remote_body", (transmission_id,))
        return None if value is None else bytes(value)

    def transmission_count(self) -> int:
        """How many rows the transmission queue holds."""
        return int(self._one("transmission_count") or 0)

    def transmission_exists(self) -> bool:
        """True when the transmission queue holds anything."""
        return bool(self._one("transmission_exists"))

    def transmission_exists_of(self, *, remote: bool) -> bool:
        """True when the transmission queue holds a row for this database (or, ``remote``,
        one for the transport)."""
        return bool(self._one("transmission_exists_of", (int(remote),)))

    def transmission_remote_mark(self, known_up_to: int) -> TransportMark:
        """The highest ``transmission_id`` of the transport's rows (None: none) and how many
        have an id at or below ``known_up_to``."""
        mark, count = self._all("transmission_remote_mark", (known_up_to,))[0]
        return TransportMark(None if mark is None else int(mark), int(count or 0))

    def delete_transmission_messages(self, keys: Iterable[tuple[bytes, bool, int]]) -> None:
        """Remove the transport's rows other instances acknowledged (NET-3), by
        (conversation_id, is_initiator, message_sequence_number)."""
        self._many("delete_transmission_message", ((c, int(i), n) for c, i, n in keys))

    def remember_closed_conversations(self, closed: Iterable[tuple[EndpointRow, float]]) -> None:
        """Keep each closed endpoint of a dialog with another instance, with its
        ``forget_after`` and its dialog security columns (NET-2, SEC-2), in one batch; a side
        kept already stays."""
        self._many(
            "remember_closed_conversation",
            (
                (
                    row.conversation_id,
                    int(row.is_initiator),
                    after,
                    row.principal_id,
                    row.far_principal_id,
                    row.outbound_session_key_identifier,
                    row.security_timestamp,
                    row.session_key,
                    row.far_certificate,
                )
                for row, after in closed
            ),
        )

    def closed_conversation(
        self, conversation_id: bytes, is_initiator: bool
    ) -> ClosedConversationRow | None:
        """That side of the conversation while it is remembered as closed here, else None."""
        rows = self._all("closed_conversation", (conversation_id, int(is_initiator)))
        if not rows:
            return None
        row = ClosedConversationRow(*rows[0])
        if row.session_key is not None:
            row = row._replace(session_key=bytes(row.session_key))
        return row

    def was_closed(self, conversation_id: bytes, is_initiator: bool) -> bool:
        """True while that side of the conversation is remembered as closed here."""
        return bool(self._one("closed_conversation_exists", (conversation_id, int(is_initiator))))

    def forget_closed_conversations(self, now: float) -> None:
        """Forget the closed conversations whose ``forget_after`` is ``now`` or earlier and
        whose side has nothing left in the transmission queue."""
        self._run("forget_closed_conversations", (now,))

    def set_transmission_message_statuses(
        self, updates: Iterable[tuple[tuple[bytes, bool, int], str]]
    ) -> None:
        """Record why other instances did not take messages (NET-7), in one batch."""
        self._many(
            "set_transmission_message_status",
            ((status, c, int(i), n) for (c, i, n), status in updates),
        )

    def transmission_waiting(self, conversation_id: bytes, is_initiator: bool) -> bool:
        """True when a message sent by that side of the conversation waits in the transmission
        queue (later ones must wait behind it to keep the send order)."""
        return bool(
            self._one("transmission_conversation_waiting", (conversation_id, int(is_initiator)))
        )

    def lock_transmission(self, transmission_id: int) -> bool:
        """True when the row is still there (now locked for this write transaction)."""
        return self._one("lock_transmission", (transmission_id,)) is not None

    def delete_transmission(self, transmission_id: int) -> None:
        """Remove a delivered or dropped transmission-queue row."""
        self._run("delete_transmission", (transmission_id,))

    def set_transmission_status(self, transmission_id: int, status: str) -> None:
        """Record why a row is still waiting (``transmission_status``)."""
        self._run("set_transmission_status", (status, transmission_id))

    def delete_transmission_of_endpoint(self, conversation_id: bytes, is_initiator: bool) -> None:
        """Drop the unsent messages of one side of a conversation (DLG-4 WITH ERROR/CLEANUP)."""
        self._run("delete_transmission_of_endpoint", (conversation_id, int(is_initiator)))

    def list_transmission(self) -> list[TransmissionListRow]:
        """Rows for the ``transmission_queue`` view."""
        return rows_of(TransmissionListRow, self._all("list_transmission"))

    # -- statistics and summaries (StatisticsStore) ----------------------------------------
    def publish_statistics(self, row: StatisticsRow) -> None:
        """Insert or replace one broker object's published statistics (write transaction)."""
        self._run("publish_statistics", tuple(row))

    def list_statistics(self) -> list[StatisticsRow]:
        """Every published row, by ``instance_id``."""
        return rows_of(StatisticsRow, self._all("list_statistics"))

    def ensure_statistics(self, row: StatisticsRow) -> None:
        """Insert ``row`` unless its ``instance_id`` has one (write transaction)."""
        self._run("ensure_statistics", tuple(row))

    def statistics_for_update(self, instance_id: str) -> StatisticsRow | None:
        """The row of ``instance_id``, locked to the end of the write transaction, or None."""
        rows = rows_of(StatisticsRow, self._all("statistics_for_update", (instance_id,)))
        return rows[0] if rows else None

    def delete_statistics(self, instance_id: str) -> None:
        """Remove one published row (write transaction)."""
        self._run("delete_statistics", (instance_id,))

    def endpoint_state_counts(self) -> list[tuple[str, int]]:
        """(state, endpoints) for each state that has some."""
        return [(str(state), int(n)) for state, n in self._all("endpoint_state_counts")]

    def ready_group_counts(self) -> list[ReadyGroupRow]:
        """(queue id, group id, ready messages) of each group holding ready messages."""
        return [
            ReadyGroupRow(int(q), bytes(g), int(n)) for q, g, n in self._all("ready_group_counts")
        ]

    def transmission_summary(self) -> list[TransmissionSummaryRow]:
        """The transmission queue by ``transmission_status``."""
        return rows_of(TransmissionSummaryRow, self._all("transmission_summary"))
