"""RECEIVE and GET CONVERSATION GROUP (RCV-1..5, PRI-12, PRI-13, SYS-2, QUE-3), and the
conversation-group locks of a transaction (DLG-9).

:class:`Receiving` is the receiving side of one transaction: the groups it locked, the messages
it took (deleted or retained at commit, back on their queue at rollback). One RECEIVE takes
messages of one conversation group: the highest-priority group that no other transaction holds
(or one this transaction holds already, RCV-2), locked until the transaction ends. Within the
group: conversation by conversation, highest priority first, each in send order with
DialogTimer and Error messages first (SYS-2). A waiting call sleeps in the broker's wait loop
(:mod:`.waiting`) and wakes at once on an in-process commit or clock move, and on another
process's commit as the storage notices it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..arguments import MAX_TOP, check_top, check_wait
from ..catalog import CatalogSnapshot, QueueDef, ServiceDef
from ..clock import to_datetime
from ..dialogs import State
from ..errors import (
    CatalogError,
    ConversationError,
    LockTimeoutError,
    PermissionDeniedError,
    QueueDisabledError,
)
from ..messages import Message, fast_uuid
from ..storage.base import StorageConnection
from ..storage.rows import EndpointRow, MessageRow, PrincipalRow
from .context import BrokerContext
from .permissions import DEFAULT_PRINCIPAL, acting_principal, check_receive

__all__ = ["ReceivedMark", "Receiving", "to_handle", "to_messages"]


@dataclass(frozen=True)
class ReceivedMark:
    """What a transaction had received at a savepoint (:meth:`Receiving.mark`): per queue id
    the queuing orders taken, the message counts by (queue, type), the orders by group, and
    the conversations whose endpoints are not loaded yet."""

    received: dict[int, list[int]]
    received_types: Counter[tuple[str, str]]
    received_by: dict[bytes, set[int]]
    unloaded: dict[bytes, None]


class _QueueMoved(Exception):
    """A RECEIVE checked its queue on a cached catalog, and the stored one has another queue of
    that name: it starts again on the stored catalog."""


def to_handle(value: object, what: str = "conversation handle") -> uuid.UUID:
    """A :class:`uuid.UUID` from a UUID or its string form.

    Raises:
        ConversationError: ``value`` is neither; the message names ``what``.
    """
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise ConversationError(f"{what} must be a UUID, got {value!r}")


def to_messages(
    cat: CatalogSnapshot, rows: list[MessageRow], queue_name: str | None
) -> list[Message]:
    """Queue rows as :class:`Message` objects (QUE-2), names resolved through the catalog.

    Args:
        cat: the catalog the names come from.
        rows: the rows, in the order to keep.
        queue_name: the queue every row is on; None: each row's own queue, by its
            ``queue_id`` (rows of several queues: a stream reader's batch).
    """
    names: dict[tuple[int, int, int], tuple[str, str, str]] = {}
    queues: dict[int, str] = {}
    ids: dict[bytes, uuid.UUID] = {}
    out = []
    for row in rows:
        group, handle = row.conversation_group_id, row.conversation_handle
        g = ids.get(group)
        if g is None:
            g = ids[group] = fast_uuid(group)
        h = ids.get(handle)
        if h is None:
            h = ids[handle] = fast_uuid(handle)
        service_id, contract_id, mt_id = (
            row.service_id,
            row.service_contract_id,
            row.message_type_id,
        )
        key = (service_id, contract_id, mt_id)
        named = names.get(key)
        if named is None:
            service = cat.services_by_id.get(service_id)
            contract = cat.contracts_by_id.get(contract_id)
            named = names[key] = (
                service.name if service else "",
                contract.name if contract else "",
                cat.message_types_by_id[mt_id].name,
            )
        out.append(
            Message(
                row.status,
                row.priority,
                row.queuing_order,
                g,
                h,
                row.message_sequence_number,
                named[0],
                service_id,
                named[1],
                contract_id,
                named[2],
                mt_id,
                row.validation,
                row.message_body,
                fast_uuid(row.message_id),
                queue_name or _queue_name(cat, row.queue_id, queues),
                to_datetime(row.message_enqueue_time),
            )
        )
    return out


def _queue_name(cat: CatalogSnapshot, queue_id: int, names: dict[int, str]) -> str:
    """The name of queue ``queue_id`` (``#id`` for one dropped since), remembered in ``names``."""
    name = names.get(queue_id)
    if name is None:
        queue = cat.queues_by_id.get(queue_id)
        name = names[queue_id] = queue.name if queue else f"#{queue_id}"
    return name


class Receiving:
    """The receiving side of one transaction and its conversation-group locks.

    Args:
        context: the broker's shared parts.
        conn: the transaction's storage connection (its group locks are this transaction's).
        endpoints: the transaction's working copies of endpoints by 16-byte handle (those its
            statements loaded or created), shared with it.
        new_groups: the conversation groups the transaction creates, with their queue ids,
            shared with it.
        principal: the database principal the transaction acts as (SEC-4: RECEIVE needs the
            RECEIVE permission on the queue).

    Raises:
        CatalogError: an unknown ``principal``.

    Attributes:
        catalog: the transaction's catalog snapshot (:meth:`refresh_catalog` re-reads it).
        received: per queue id, the queuing orders of the messages taken, in RECEIVE order.
        received_types: the messages taken, by (queue name, message type name).
        locked_queues: queues whose groups this transaction locked (their waiters are woken
            when it ends).
        unloaded: handles of the conversations received from whose endpoints the transaction
            has not loaded yet (a SEND or END on one loads them all in one query, their groups
            being held already).
    """

    def __init__(
        self,
        context: BrokerContext,
        conn: StorageConnection,
        endpoints: dict[bytes, EndpointRow],
        new_groups: dict[bytes, int],
        principal: str = DEFAULT_PRINCIPAL,
    ) -> None:
        self.context = context
        self.conn = conn
        # a transaction sees every catalog change committed before it began, by any process
        # (a REVOKE honoured at once): its first statement reads the stored version first
        # (verify), or, a RECEIVE, has its storage call check it (no round trip of its own)
        cached = context.catalog.cached()
        self._verified = cached is None
        self.catalog: CatalogSnapshot = (
            context.catalog.snapshot(conn, fresh=True) if cached is None else cached
        )
        self._principal_name = principal
        try:
            self.principal: PrincipalRow = acting_principal(self.catalog, principal)
        except CatalogError:
            if self._verified:
                raise
            self.verify()  # made since the cached catalog was read?
        self.received: dict[int, list[int]] = {}
        self.received_types: Counter[tuple[str, str]] = Counter()
        self.locked_queues: set[int] = set()
        self.unloaded: dict[bytes, None] = {}
        self._endpoints = endpoints
        self._new_groups = new_groups
        self._received_set: set[int] = set()
        self._received_by: dict[bytes, set[int]] = {}  # queuing orders received, per group
        self._checked: set[int] = set()
        self._locked_elsewhere: set[bytes] = set()
        self._locked_elsewhere_seen: tuple[int, int] | None = None
        self._group_service: dict[bytes, int] = {}  # groups checked: the one service they hold

    def mark(self) -> ReceivedMark:
        """What this transaction has received so far, for a savepoint (:mod:`.savepoints`)."""
        return ReceivedMark(
            {q: list(orders) for q, orders in self.received.items()},
            Counter(self.received_types),
            {g: set(orders) for g, orders in self._received_by.items()},
            dict(self.unloaded),
        )

    def restore(self, mark: ReceivedMark) -> None:
        """Back to what was received at ``mark`` (ROLLBACK TRANSACTION to a savepoint): the
        messages received since are on their queues for the next RECEIVE again — still in this
        transaction's locked groups; ``mark`` stays usable."""
        self.received.clear()
        self.received.update({q: list(orders) for q, orders in mark.received.items()})
        self.received_types.clear()
        self.received_types.update(mark.received_types)
        self._received_by.clear()
        self._received_by.update({g: set(orders) for g, orders in mark.received_by.items()})
        self._received_set.clear()
        for orders in mark.received.values():
            self._received_set.update(orders)
        self.unloaded.clear()
        self.unloaded.update(mark.unloaded)
        self._group_service.clear()  # a group's service is checked afresh

    def verify(self) -> None:
        """Read the stored catalog version, and the catalog if it moved, unless this
        transaction has already: what every statement does first, so that it sees every
        catalog change committed before it (by any process).

        Raises:
            CatalogError: the acting principal no longer exists.
            StorageError: the catalog cannot be read.
        """
        if not self._verified:
            self.catalog = self.context.catalog.snapshot(self.conn, fresh=True)
            self.principal = acting_principal(self.catalog, self._principal_name)
            self._verified = True  # only now: a principal dropped meanwhile refuses each statement

    def verify_later(self) -> Callable[[], bool] | None:
        """For a statement that checks its arguments on the catalog it has, then goes to the
        database: None when this transaction has read the stored version already; else a
        function to call once that storage call ran (the version travels with it), True when
        the checks were made on the stored catalog, else False (the catalog is read anew: the
        statement checks again).

        Raises (the function):
            CatalogError: the acting principal no longer exists.
            StorageError: the catalog cannot be read.
        """
        if self._verified:
            return None
        stored, checked = self.conn.catalog_version_later(), self.catalog.version

        def confirm() -> bool:
            if self._verified:
                return True
            if stored() == checked:
                self._verified = True
                return True
            self.verify()
            return False

        return confirm

    def refresh_catalog(self) -> CatalogSnapshot:
        """Re-read the catalog if another transaction or process changed it."""
        self.catalog = self.context.catalog.snapshot(self.conn)
        return self.catalog

    def group_queue(self, group_id: bytes) -> int | None:
        """The queue id of conversation group ``group_id`` — one this transaction creates,
        holds a working copy in, or one stored — or None when it does not exist."""
        if group_id in self._new_groups:
            return self._new_groups[group_id]
        for row in self._endpoints.values():
            if row.conversation_group_id == group_id:
                return row.queue_id
        return self.conn.group_queue(group_id)

    def check_group_service(self, group_id: bytes, service: ServiceDef, what: str) -> None:
        """BEGIN DIALOG joining group ``group_id`` FROM ``service`` (DLG-1): "All conversations
        in a conversation group must have the service specified in the FROM clause as either
        the initiator or the target of the conversation" — the conversations this transaction
        holds in the group (new dialogs included) and those stored.

        Raises:
            ConversationError: a conversation of the group belongs to another service; the
                message starts with BEGIN DIALOG ``what`` and names the services.
        """
        known = self._group_service.get(group_id)
        if known == service.service_id:  # checked in this transaction: one look per group
            return
        if known is not None:
            services = {known}
        else:
            services = {
                r.service_id
                for r in self._endpoints.values()
                if r.conversation_group_id == group_id
            }
            services.update(self.conn.group_services(group_id))
        others = services - {service.service_id}
        if others:
            by_id = self.catalog.services_by_id
            names = ", ".join(
                sorted(repr(by_id[s].name) if s in by_id else f"#{s}" for s in others)
            )
            raise ConversationError(
                f"BEGIN DIALOG {what}: conversation group {uuid.UUID(bytes=group_id)} holds "
                f"conversations of service {names}, not of FROM service {service.name!r}: every "
                f"conversation of a group has the FROM service at one end"
            )
        self._group_service[group_id] = service.service_id

    def join_group(self, group_id: bytes, service: ServiceDef) -> None:
        """BEGIN DIALOG … WITH RELATED_CONVERSATION_GROUP = ``group_id`` FROM ``service``
        (DLG-1): lock the group (it may not exist yet: the dialog creates it), check that its
        conversations are of ``service``.

        Raises:
            LockTimeoutError: the group stayed locked by another transaction.
            ConversationError: a conversation of the group is of another service; the lock
                taken for the statement is released.
        """
        held = self.conn.held_groups()
        self.lock_group(group_id, "BEGIN DIALOG", service.queue_id)
        try:
            self.check_group_service(group_id, service, "RELATED_CONVERSATION_GROUP")
        except ConversationError:
            if group_id not in held:  # a refused statement keeps no lock it took
                self.conn.unlock_group(group_id)
            raise
        if self.group_queue(group_id) is None:
            self._new_groups[group_id] = service.queue_id

    def group_moved_into(self, group_id: bytes) -> None:
        """MOVE CONVERSATION moved a conversation into ``group_id``: check it afresh."""
        self._group_service.pop(group_id, None)

    # -- group locks (DLG-9) -------------------------------------------------------------
    def lock_group(
        self, group_id: bytes, what: str, queue_id: int, *, locked: bool = False
    ) -> None:
        """Lock conversation group ``group_id`` (of queue ``queue_id``) until the transaction
        ends, waiting up to the broker's ``lock_timeout`` while another transaction holds it;
        ``locked``: the storage already locked it.

        Raises:
            LockTimeoutError: still locked by another transaction after ``lock_timeout``
                seconds; the message starts with ``what``.
        """
        conn = self.conn
        self.locked_queues.add(queue_id)
        if locked or conn.try_lock_group(group_id):
            return
        context = self.context
        deadline = context.clock.now() + context.lock_timeout
        got = context.waiting.wait_for(
            lambda: True if conn.try_lock_group(group_id) else None, deadline
        )
        if got is None:
            raise LockTimeoutError(
                f"{what}: conversation group {uuid.UUID(bytes=group_id)} stayed locked by another "
                f"transaction for {context.lock_timeout:g} s"
            )

    def lock_to_move(self, source: bytes, target: bytes, queue_id: int) -> None:
        """MOVE CONVERSATION from group ``source`` to ``target`` (DLG-7): lock the target
        (as :meth:`lock_group`), refusing while a stream reader claims either group — moving a
        claimed conversation's messages out of its claim would let a RECEIVE take messages a
        batch holds (issue 14).

        Raises:
            ConversationError: a group is claimed; a lock taken for it is released.
            LockTimeoutError: the target stayed locked by another transaction.
        """
        held = self.conn.held_groups()
        self.lock_group(target, "MOVE CONVERSATION", queue_id)
        for group in (source, target):
            if self.conn.group_claimed(group):
                if target not in held:
                    self.conn.unlock_group(target)
                raise ConversationError(
                    f"MOVE CONVERSATION: conversation group {uuid.UUID(bytes=group)} is claimed "
                    f"by a stream reader's batch; move it once the reader acknowledged the batch"
                )

    def _known_locked(self) -> set[bytes]:
        """Groups this transaction found locked by others, forgotten whenever some transaction
        releases locks (so a RECEIVE does not knock on the same locked groups again)."""
        seen = self.context.waiting.locks_generation()
        if seen != self._locked_elsewhere_seen:
            self._locked_elsewhere_seen = seen
            self._locked_elsewhere.clear()
        return self._locked_elsewhere

    # -- statements ----------------------------------------------------------------------
    def _deadline(self, timeout: object, statement: str) -> float | None:
        seconds = check_wait(timeout, statement)
        return None if seconds is None else self.context.clock.now() + seconds

    def _live_queue(self, name: str, statement: str, *, refresh: bool = True) -> QueueDef:
        """The queue, checked to exist and be ON (QUE-3). ``refresh`` re-reads the catalog
        version first (on every wake-up of a waiting call; the first attempt uses the
        transaction's)."""
        if not isinstance(name, str):
            raise QueueDisabledError(f"{statement}: queue {name!r} does not exist")
        catalog = self.refresh_catalog() if refresh else self.catalog
        queue = catalog.queues.get(name)
        if queue is None:
            if self.context.catalog.was_dropped(name):
                raise QueueDisabledError(f"{statement}: queue {name!r} was dropped")
            raise QueueDisabledError(f"{statement}: queue {name!r} does not exist")
        if not queue.status:
            raise QueueDisabledError(f"{statement}: queue {name!r} is disabled (STATUS = OFF)")
        check_receive(catalog, self.principal, name)  # SEC-4, before anything is locked
        return queue

    def _where(
        self, group: bytes, read: Callable[[], list[MessageRow]], top: int
    ) -> list[MessageRow] | None:
        """One try of RECEIVE … WHERE (a handle or a group): lock the group, ``read`` its rows;
        None when another transaction holds it or it has nothing for this RECEIVE — then a lock
        taken for this try is given back, so a waiting RECEIVE never sits on a group (a
        stream reader's sink may need it to end the claim that empties it, issue 14)."""
        conn = self.conn
        held = group in conn.held_groups()
        if not conn.try_lock_group(group):
            return None
        rows = self._take(read(), top)
        if not rows and not held:
            conn.unlock_group(group)
        return rows or None

    def _take(self, rows: list[MessageRow], top: int) -> list[MessageRow]:
        skip = self._received_set
        if skip:
            rows = [r for r in rows if r.queuing_order not in skip]
        return rows if top < 0 else rows[:top]

    def receive(
        self,
        queue_name: str,
        *,
        top: int | None,
        conversation_handle: object,
        conversation_group_id: object,
        timeout: float | None,
    ) -> list[Message]:
        """RECEIVE for :meth:`servicebroker.Transaction.receive` (see there for arguments and
        errors)."""
        args = (queue_name, top, conversation_handle, conversation_group_id, timeout)
        try:
            return self._receive(*args)
        except _QueueMoved:  # the queue checked on a catalog behind: once more, on the stored
            return self._receive(*args)

    def _receive(
        self,
        queue_name: str,
        top: int | None,
        conversation_handle: object,
        conversation_group_id: object,
        timeout: float | None,
    ) -> list[Message]:
        limit = check_top(top, "RECEIVE")
        statement = f"RECEIVE FROM {queue_name!r}"
        if conversation_handle is not None and conversation_group_id is not None:
            raise ConversationError(
                f"{statement}: WHERE takes conversation_handle or conversation_group_id, not both"
            )
        conn = self.conn
        fast = conversation_handle is None and conversation_group_id is None
        if not fast or conn.held_groups():
            fast = False
            self.verify()
        try:
            queue = self._live_queue(queue_name, statement, refresh=False)
        except (QueueDisabledError, PermissionDeniedError):
            if self._verified:
                raise
            self.verify()  # the catalog it checked may be behind: check on the stored one
            queue = self._live_queue(queue_name, statement, refresh=False)
        deadline = self._deadline(timeout, statement)
        first = [True]

        def check_queue() -> None:
            if first[0]:
                first[0] = False
            else:
                self._live_queue(queue_name, statement)

        if limit == 0:
            return []

        def fetch(group: bytes) -> int:
            # rows of the group to read: TOP, plus those this transaction received from it
            # already (RECEIVE returns them first, and _take drops them)
            return -1 if limit < 0 else min(limit + len(self._received_by.get(group, ())), MAX_TOP)

        if conversation_handle is not None:
            handle = to_handle(conversation_handle)
            row = self._endpoints.get(handle.bytes) or conn.get_endpoint(handle.bytes)
            if row is None or row.queue_id != queue.queue_id or row.state == State.CD:
                raise ConversationError(
                    f"{statement}: conversation handle {handle} is not on this queue"
                )
            group = row.conversation_group_id

            def by_handle() -> list[MessageRow] | None:
                check_queue()
                return self._where(
                    group,
                    lambda: conn.conversation_messages(group, handle.bytes, fetch(group)),
                    limit,
                )

            attempt = by_handle
        elif conversation_group_id is not None:
            group_id = to_handle(conversation_group_id, "conversation_group_id").bytes
            if self.group_queue(group_id) != queue.queue_id:
                raise ConversationError(
                    f"{statement}: conversation group {uuid.UUID(bytes=group_id)} is not on this "
                    f"queue"
                )

            def by_group() -> list[MessageRow] | None:
                check_queue()
                return self._where(
                    group_id, lambda: conn.group_messages(group_id, fetch(group_id)), limit
                )

            attempt = by_group
        else:

            def next_group() -> list[MessageRow] | None:
                check_queue()
                if fast:  # the transaction's first RECEIVE: one storage call
                    return self._first_group(queue, statement, limit) or None
                for _ in range(8):
                    held = conn.held_groups()
                    group = conn.lock_next_group(
                        queue.queue_id, self._received_by, known_locked=self._known_locked()
                    )
                    if group is None:
                        return None
                    rows = self._take(conn.group_messages(group, fetch(group)), limit)
                    if rows:
                        return rows
                    if group not in held:
                        # read before its last holder committed: the group is empty now
                        conn.unlock_group(group)
                return None

            attempt = next_group

        where = conversation_handle is not None or conversation_group_id is not None
        self.locked_queues.add(queue.queue_id)
        started = self.context.clock.now()
        rows = self.context.waiting.wait_for(
            attempt, deadline, queue_id=queue.queue_id, counts_as_waiting=not where
        )
        self.context.statistics.waited(self.context.clock.now() - started)
        self._ran(queue.queue_id, empty=rows is None, where=where)
        if rows is None:
            return []
        orders = [r.queuing_order for r in rows]
        self.received.setdefault(queue.queue_id, []).extend(orders)
        self._received_set.update(orders)
        group = rows[0].conversation_group_id  # one RECEIVE: one group
        self._received_by.setdefault(group, set()).update(orders)
        self.unloaded.update(dict.fromkeys(r.conversation_handle for r in rows))
        messages = to_messages(self.catalog, rows, queue.name)
        self.received_types.update((queue.name, m.message_type_name) for m in messages)
        return messages

    def _first_group(self, queue: QueueDef, statement: str, limit: int) -> list[MessageRow]:
        """RECEIVE's try in a transaction that holds no group: one storage call, which also
        checks the catalog version this transaction checked the RECEIVE against (unless it has
        read the stored one already); when that moved, the RECEIVE is checked again on the
        stored catalog and tried again.

        Raises:
            QueueDisabledError, PermissionDeniedError: as RECEIVE, on the stored catalog.
            _QueueMoved: the queue of that name is another one there (dropped and made again).
        """
        while True:
            checked = None if self._verified else self.catalog.version
            rows = self.conn.receive_first_group(
                queue.queue_id, limit, known_locked=self._known_locked(), catalog_version=checked
            )
            if rows is not None:
                self._verified = True
                return rows
            self.verify()
            current = self._live_queue(queue.name, statement, refresh=False)  # QUE-3, SEC-4
            if current.queue_id != queue.queue_id:
                raise _QueueMoved

    def load_received(self) -> list[EndpointRow]:
        """Load the endpoints of every conversation received from and not loaded yet into the
        transaction's working copies, in one query (:attr:`unloaded`); returns those loaded.
        Their groups are this transaction's already (RECEIVE locked them), so nothing is
        locked or waited for; a closed endpoint is left out (a statement on it then fails as
        it would have)."""
        handles = [h for h in self.unloaded if h not in self._endpoints]
        self.unloaded.clear()
        if not handles:
            return []
        held = self.conn.held_groups()
        loaded = [
            row
            for row in self.conn.get_endpoints(handles)
            if row.state != State.CD and row.conversation_group_id in held
        ]
        for row in loaded:
            self._endpoints[row.conversation_handle] = row
        return loaded

    def get_conversation_group(self, queue_name: str, *, timeout: float | None) -> uuid.UUID | None:
        """GET CONVERSATION GROUP for :meth:`servicebroker.Transaction.get_conversation_group`
        (see there for arguments and errors)."""
        statement = f"GET CONVERSATION GROUP FROM {queue_name!r}"
        queue = self._live_queue(queue_name, statement)
        deadline = self._deadline(timeout, statement)
        conn = self.conn

        def attempt() -> bytes | None:
            self._live_queue(queue_name, statement)
            return conn.lock_next_group(
                queue.queue_id,
                self._received_by,
                exclude_held=True,
                known_locked=self._known_locked(),
            )

        self.locked_queues.add(queue.queue_id)
        started = self.context.clock.now()
        group = self.context.waiting.wait_for(
            attempt, deadline, queue_id=queue.queue_id, counts_as_waiting=True
        )
        self.context.statistics.waited(self.context.clock.now() - started)
        if group is None:
            self.context.events.received(queue.queue_id, empty=True, where=False, first=False)
            return None
        return uuid.UUID(bytes=group)

    def _ran(self, queue_id: int, *, empty: bool, where: bool) -> None:
        first = queue_id not in self._checked
        self._checked.add(queue_id)
        self.context.events.received(queue_id, empty=empty, where=where, first=first)
