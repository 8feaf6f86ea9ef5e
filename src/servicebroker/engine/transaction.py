"""A broker transaction: the Service Broker statements, run as one unit with the application's
own SQL (``tx.execute``), committed or rolled back together.

Statements lock the conversation group they touch until the transaction ends (DLG-9) and check
their arguments and the endpoint's state at once, raising a :class:`BrokerError`. Their effects
are recorded (:mod:`.recorded`) and written at commit in one storage transaction (see
:mod:`.commit`), so an open transaction never holds SQLite's single write lock unless the
application wrote through ``tx.execute``.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Concatenate, ParamSpec, TypeVar

from .. import arguments
from ..appsql import check_application_sql, driver_refusals
from ..arguments import MAX_INT, check_broker_instance, check_end_arguments, message_tuples
from ..catalog import SERVICE_STRING_LIMIT, CatalogSnapshot, MessageTypeDef, check_name
from ..clock import check_seconds
from ..dialogs import INITIATOR_START, EndMode, State, after_local_end, after_send, is_ended
from ..errors import (
    CatalogError,
    ConversationError,
    MessageValidationError,
    StorageError,
    TransactionError,
)
from ..messages import Message, Outgoing, fast_uuid, new_id
from ..storage.failures import DATABASE_FAILURES
from ..storage.rows import EndpointRow
from .commit import write_commit
from .context import BrokerContext
from .neighbours import neighbourhoods
from .permissions import DEFAULT_PRINCIPAL, check_send
from .receive import Receiving, to_handle
from .recorded import (
    BeginDialogOp,
    EndConversationOp,
    MoveOp,
    NotificationDialogOp,
    RecordedOp,
    SendOp,
    TimerOp,
)
from .savepoints import Savepoints
from .sending import sendable
from .working_copies import WorkingCopies

__all__ = ["Transaction"]

P = ParamSpec("P")
R = TypeVar("R")


def statement(
    method: Callable[Concatenate[Transaction, P], R],
) -> Callable[Concatenate[Transaction, P], R]:
    """A transaction's statement: refused once the transaction ended; sees every catalog change
    committed before it (:meth:`Receiving.verify`); when the database underneath fails (a
    :class:`StorageError`), the transaction is rolled back and ended before the error reaches
    the caller, as PostgreSQL aborts a transaction whose statement failed."""

    # RECEIVE and SEND check the catalog version with their storage call (Receiving.verify_later)
    checks_catalog = method.__name__ not in ("receive", "send", "send_many")

    @functools.wraps(method)
    def run(self: Transaction, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._check_active()
        try:
            if checks_catalog:
                self._receiving.verify()
            return method(self, *args, **kwargs)
        except StorageError as exc:
            self._failure = exc
            self._end(rolled_back=True, failed=isinstance(exc, DATABASE_FAILURES))
            raise

    return run


class Transaction:
    """One unit of work on a broker; get it from :meth:`Broker.transaction`.

    It commits when the ``with`` block ends normally and rolls back on an exception. Not for use
    by several threads at once; each thread opens its own. One the application loses — neither
    committed nor rolled back, then garbage — rolls back when it is collected, and
    :meth:`Broker.close` rolls back those still open (:mod:`.open_transactions`).

    Every statement, and the transaction's construction (it takes a session, and reads the
    catalog only when the broker has not yet), may also raise a
    :class:`~servicebroker.errors.StorageError` subclass when the database fails (connection
    lost, disk full, I/O error) or refuses the application's SQL: the transaction is then
    rolled back and ended, and further statements raise :class:`TransactionError`
    (docs/reliability.md).
    """

    def __init__(self, context: BrokerContext, principal: str = DEFAULT_PRINCIPAL) -> None:
        self._context = context
        self._clock = context.clock
        context.transactions.reap()  # the sessions of transactions lost before go back first
        self._conn = context.storage.connect()
        self._endpoints: dict[bytes, EndpointRow] = {}
        self._by_handle: dict[object, EndpointRow] = {}
        self._locked_group_of: dict[bytes, bytes] = {}
        self._new_groups: dict[bytes, int] = {}
        # the application's SQL is read as its database reads it (SQLite's placeholder is "?")
        self._postgres = context.storage.paramstyle != "qmark"
        self._ops: list[RecordedOp] = []
        self._failure: StorageError | None = None
        self._savepoints: Savepoints | None = None  # made by the first save()
        try:
            # the receiving side shares the working copies (plain data: no reference back
            # here, so a finished transaction is freed at once, not by the cycle collector)
            self._receiving = Receiving(
                context, self._conn, self._endpoints, self._new_groups, principal
            )
        except BaseException:
            context.storage.release(self._conn)  # the catalog could not be read
            raise
        self._copies = WorkingCopies(
            self._conn, self._receiving, self._endpoints, self._by_handle, self._locked_group_of
        )
        # a transaction the application loses (neither committed nor rolled back) rolls back
        # when it is collected; the broker's close rolls back those still open
        self._ending = context.transactions.track(self, context, self._conn, self._receiving)

    # -- context manager -----------------------------------------------------------------
    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._ending.active:
            if exc_type is None and self._failure is not None:
                self._check_active()  # a with block that caught a failed statement: say so
            return
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def _check_active(self) -> None:
        if self._failure is not None:  # as PostgreSQL's aborted transaction: nothing committed
            raise TransactionError(
                f"the transaction was rolled back when a statement failed ({self._failure}); "
                f"it must be run again from the start"
            )
        if not self._ending.active:
            raise TransactionError("the transaction has already committed or rolled back")

    @property
    def writing(self) -> bool:
        """True once the transaction holds its storage write transaction — its application SQL
        (``execute``) ran — until it ends: SQLite's write lock, PostgreSQL's row locks and the
        shared catalog lock. A catalog change (DDL) in a transaction of its own would wait for
        them."""
        return bool(self._conn.in_write)

    @property
    def principal(self) -> str:
        """The database principal this transaction acts as (SEC-4; ``dbo`` by default)."""
        return self._receiving.principal.name

    @property
    def catalog(self) -> CatalogSnapshot:
        """The catalog snapshot this transaction's statements work with: every change committed
        before its first statement (or before this is first read) included."""
        if self._ending.active and self._failure is None:
            self._read_catalog()
        return self._receiving.catalog

    @statement
    def _read_catalog(self) -> None:
        """Nothing more: the statement wrapper reads the stored catalog version (once per
        transaction) and ends the transaction if the database fails."""

    @statement
    def refresh_catalog(self) -> CatalogSnapshot:
        """Reload the catalog if another transaction or process changed it."""
        return self._receiving.refresh_catalog()

    # -- statements ----------------------------------------------------------------------
    @statement
    def begin_dialog(
        self,
        from_service: str,
        to_service: str,
        *,
        contract: str = "DEFAULT",
        related_conversation: uuid.UUID | str | None = None,
        related_conversation_group: uuid.UUID | str | None = None,
        lifetime: float | None = None,
        to_broker_instance: uuid.UUID | str | None = None,
        encryption: bool = True,
    ) -> uuid.UUID:
        """BEGIN DIALOG FROM SERVICE ``from_service`` TO SERVICE ``to_service``
        [, ``to_broker_instance``] ON CONTRACT ``contract`` (DLG-1). Returns the new
        conversation handle. ``to_broker_instance`` ('service_broker_guid' or 'CURRENT
        DATABASE') names the database of the target service for the routes (RTE-2).
        ``encryption``: WITH ENCRYPTION = ON (True) | OFF: with another instance the dialog is
        secured unless OFF and no remote service binding names ``to_service`` now (SEC-2,
        decided here, at the start); within one broker nothing is encrypted. The endpoint acts
        as :attr:`principal`.

        ``related_conversation`` joins that conversation's group; ``related_conversation_group``
        joins (or creates) that group; ``lifetime`` is in seconds (default 2**31-1). Service names
        match byte for byte. The target service need not exist yet: messages wait in the
        transmission queue until it does. Locks the conversation group (DLG-9).

        Raises:
            CatalogError: unknown FROM service or contract.
            ConversationError: a bad TO SERVICE (docs/limits.md), both related options, an
                unknown related conversation, or a related conversation or group whose
                conversations are not of the FROM service (DLG-1).
            BrokerError: a lifetime that is not seconds from 0 (excluded) to 2**31-1, or an
                ``encryption`` that is not a bool.
        """
        cat = self._receiving.catalog
        service = cat.service(from_service)
        contract_def = cat.contract(contract)
        check_name("TO SERVICE", to_service, limit=SERVICE_STRING_LIMIT, error=ConversationError)
        instance = check_broker_instance(
            to_broker_instance, cat.service_broker_guid, "BEGIN DIALOG"
        )
        # DLG-1: LIFETIME defaults to the largest 32-bit integer, in seconds
        life = (
            MAX_INT
            if lifetime is None
            else check_seconds(lifetime, "BEGIN DIALOG LIFETIME", allow_zero=False, maximum=MAX_INT)
        )
        if related_conversation is not None and related_conversation_group is not None:
            raise ConversationError(
                "BEGIN DIALOG takes RELATED_CONVERSATION or RELATED_CONVERSATION_GROUP, not both"
            )
        if related_conversation is not None:
            related = self._copies.endpoint(
                related_conversation, "BEGIN DIALOG WITH RELATED_CONVERSATION"
            )
            group = related.conversation_group_id
            self._receiving.check_group_service(group, service, "RELATED_CONVERSATION")
        elif related_conversation_group is not None:
            group = to_handle(related_conversation_group, "RELATED_CONVERSATION_GROUP").bytes
            self._receiving.join_group(group, service)
        else:
            group = new_id()
            self._new_groups[group] = service.queue_id
        self._receiving.lock_group(group, "BEGIN DIALOG", service.queue_id)
        handle = fast_uuid(new_id())
        row = EndpointRow(
            0,
            handle.bytes,
            new_id(),
            True,
            contract_def.service_contract_id,
            group,
            service.service_id,
            service.queue_id,
            to_service,
            self._clock.now() + life,
            INITIATOR_START,
            None,
            0,
            0,
            cat.level(contract_def.service_contract_id, service.name, to_service),  # PRI-3..6
            far_broker_instance=instance,
            principal_id=self._receiving.principal.principal_id,
            encryption_requested=int(
                arguments.check_flag(encryption, "BEGIN DIALOG ENCRYPTION")
                or cat.binding_for(to_service) is not None  # SEC-2: a binding secures it
            ),
        )
        self._endpoints[handle.bytes] = row
        self._ops.append(BeginDialogOp(handle.bytes, replace(row)))
        return handle

    @statement
    def send(
        self,
        handle_or_handles: uuid.UUID | str | Iterable[uuid.UUID | str],
        message_type: str = "DEFAULT",
        body: bytes | str = b"",
    ) -> None:
        """SEND ON CONVERSATION (DLG-2): one message on each conversation given, all or nothing.

        ``body`` is bytes (str is UTF-8 encoded); it may be empty but not None.

        Raises:
            ConversationError: an unknown handle, a handle named twice, or a state that forbids
                SEND (DO, CD, DI, ER) or an expired LIFETIME (DLG-5).
            CatalogError: an unknown message type.
            MessageValidationError: the type is not in the contract for this side, is a system
                type, or the body fails its validation (DLG-3).
            PermissionDeniedError: no SEND on a target service of this database (SEC-4).
        """
        one = handle_or_handles
        if isinstance(one, uuid.UUID | str) or not isinstance(one, Iterable):
            handles: list[uuid.UUID | str] = [to_handle(one)]  # None, 5: ConversationError
        else:
            handles = list(one)
            if not handles:
                raise ConversationError("SEND needs at least one conversation handle")
            seen: set[bytes] = set()
            for h in handles:
                b = to_handle(h).bytes
                if b in seen:  # "the same conversation handle cannot be used more than once"
                    raise ConversationError(
                        f"SEND: conversation handle {uuid.UUID(bytes=b)} is named more than once"
                    )
                seen.add(b)
        confirm = self._receiving.verify_later()
        try:
            mt, data = sendable(self._receiving.catalog, message_type, body, handles)
        except (CatalogError, MessageValidationError):
            if confirm is None or confirm():
                raise
            mt, data = sendable(self._receiving.catalog, message_type, body, handles)
        now = self._clock.now()
        rows = self._copies.endpoints_for(handles, "SEND")
        if confirm is not None and not confirm():  # checked on a catalog behind: again
            mt, data = sendable(self._receiving.catalog, message_type, body, handles)
        for row in rows:
            self._check_send(row, mt, now)
        for row in rows:
            self._record_send(row, mt, data)

    @statement
    def send_many(self, messages: Iterable[tuple[uuid.UUID | str, str, bytes | str]]) -> int:
        """SEND of many messages, each ``(conversation handle, message type, body)``, in the
        given order, all or nothing: what as many :meth:`send` calls do, with the endpoints
        the transaction has not used yet read (and their groups locked, DLG-9) in one query
        instead of one each — on PostgreSQL one round trip for the batch, not one per
        conversation. Returns the number of messages sent.

        Raises:
            ConversationError, CatalogError, MessageValidationError, PermissionDeniedError:
                as :meth:`send` (message types and bodies are checked first, then the
                conversations, each error naming the first message at fault); nothing of the
                batch is sent, and the groups it locked are released.
        """
        confirm = self._receiving.verify_later()
        source = message_tuples(messages, ConversationError)
        items: list[tuple[Any, str, bytes | str]] = []

        def typed(given: Iterable[tuple[Any, str, bytes | str]]) -> Iterator[tuple[Any, ...]]:
            for h, message_type, body in given:  # checked as read: errors in message order
                items.append((h, message_type, body))
                yield (h, *sendable(self._receiving.catalog, message_type, body, [h]))

        try:
            batch = list(typed(source))
        except (CatalogError, MessageValidationError):
            if confirm is None or confirm():
                raise
            again, items[:] = list(items), []
            batch = list(typed(itertools.chain(again, source)))  # on the stored catalog
        now = self._clock.now()
        rows = self._copies.endpoints_for([h for h, _, _ in batch], "SEND")
        if confirm is not None and not confirm():  # checked on a catalog behind: again
            again, items[:] = list(items), []
            batch = list(typed(again))
        for row, (_, mt, _) in zip(rows, batch, strict=True):
            self._check_send(row, mt, now)
        for row, (_, mt, data) in zip(rows, batch, strict=True):
            self._record_send(row, mt, data)
        return len(batch)

    def _check_send(self, row: EndpointRow, mt: MessageTypeDef, now: float) -> None:
        check_send(self._receiving.catalog, self._receiving.principal, row)  # SEC-4
        contract = self._receiving.catalog.contracts_by_id.get(row.service_contract_id)
        if (
            row.state != State.CO
            or row.lifetime <= now
            or contract is None  # dropped: the endpoint is in ER (DROP CONTRACT)
            or not contract.allows(mt.message_type_id, initiator=row.is_initiator)
        ):
            self._refuse_send(row, mt.message_type_id, mt.name, now)

    def _record_send(self, row: EndpointRow, mt: MessageTypeDef, data: bytes) -> None:
        if row.state != State.CO:
            row.state = after_send(row.state, fast_uuid(row.conversation_handle))
        seq = row.send_sequence
        row.send_sequence = seq + 1
        out = Outgoing(mt.message_type_id, mt.name, mt.validation_code, data, new_id(), seq)
        self._ops.append(SendOp(row.conversation_handle, out))

    def _refuse_send(self, row: EndpointRow, mt_id: int, mt_name: str, now: float) -> None:
        """Raise the error for a SEND the fast path did not accept (or return if it is fine)."""
        h = uuid.UUID(bytes=row.conversation_handle)
        contract = self._receiving.catalog.contracts_by_id.get(row.service_contract_id)
        if contract is not None and not contract.allows(mt_id, initiator=row.is_initiator):
            side = "initiator" if row.is_initiator else "target"
            raise MessageValidationError(
                f"SEND on conversation {h}: message type {mt_name!r} is not sent by the {side} "
                f"in contract {contract.name!r}"
            )
        after_send(row.state, h)
        if row.lifetime <= now:
            raise ConversationError(f"SEND on conversation {h}: its LIFETIME has expired")

    @statement
    def end_conversation(
        self,
        handle: uuid.UUID | str,
        *,
        error: int | None = None,
        description: str | None = None,
        cleanup: bool = False,
    ) -> None:
        """END CONVERSATION (DLG-4): plain (EndDialog to the far side, after its pending
        messages), WITH ERROR = ``error`` (> 0) DESCRIPTION = ``description`` (<= 3000
        characters: the far side gets an Error message and unsent messages are dropped), or WITH
        CLEANUP (the local endpoint and its messages go, the far side is not told). Removes the
        endpoint's messages from the local queue.

        Raises:
            ConversationError: unknown handle, already ended, or bad arguments (ERROR an int
                1..2**31-1, DESCRIPTION XML text <= 3000 characters, CLEANUP a bool).
        """
        check_end_arguments(cleanup, error, description)
        if error is not None or description is not None:
            mode = EndMode.ERROR
        else:
            mode = EndMode.CLEANUP if cleanup else EndMode.PLAIN
        # WITH CLEANUP also removes a closed endpoint left behind ("already completed")
        row = self._copies.endpoint(handle, "END CONVERSATION", closed=mode is EndMode.CLEANUP)
        new_state, _ = after_local_end(row.state, mode, to_handle(handle))
        row.state = new_state
        row.dialog_timer = None
        self._ops.append(EndConversationOp(row.conversation_handle, mode, error, description))

    @statement
    def begin_conversation_timer(self, handle: uuid.UUID | str, timeout: float) -> None:
        """BEGIN CONVERSATION TIMER (h) TIMEOUT = ``timeout`` seconds (DLG-6): replaces the
        conversation's timer on this side; when it fires a DialogTimer message is put on the
        local queue.

        Raises:
            ConversationError: unknown or closed conversation.
            BrokerError: a timeout that is not a number of seconds from 0 to 2**31-1.
        """
        seconds = check_seconds(timeout, "BEGIN CONVERSATION TIMER TIMEOUT", maximum=MAX_INT)
        row = self._copies.endpoint(handle, "BEGIN CONVERSATION TIMER")
        if is_ended(row.state):
            raise ConversationError(
                f"BEGIN CONVERSATION TIMER: conversation {to_handle(handle)} has ended (state {row.state})"
            )
        row.dialog_timer = self._clock.now() + seconds
        self._ops.append(TimerOp(row.conversation_handle, row.dialog_timer))

    @statement
    def move_conversation(
        self, handle: uuid.UUID | str, conversation_group_id: uuid.UUID | str
    ) -> None:
        """MOVE CONVERSATION ``handle`` TO ``conversation_group_id`` (DLG-7): only to an existing
        group of the same queue; locks both groups.

        Raises:
            ConversationError: unknown handle or group, of another queue, or claimed.
        """
        target = to_handle(conversation_group_id, "conversation group id").bytes
        row = self._copies.endpoint(handle, "MOVE CONVERSATION")
        queue_id = self._receiving.group_queue(target)
        if queue_id is None:
            raise ConversationError(
                f"MOVE CONVERSATION: conversation group {uuid.UUID(bytes=target)} does not exist"
            )
        if queue_id != row.queue_id:
            raise ConversationError(
                f"MOVE CONVERSATION: group {uuid.UUID(bytes=target)} is on another queue than conversation "
                f"{to_handle(handle)}"
            )
        self._receiving.lock_to_move(row.conversation_group_id, target, row.queue_id)
        row.conversation_group_id = target
        self._receiving.group_moved_into(target)
        self._ops.append(MoveOp(row.conversation_handle, target))

    @statement
    def receive(
        self,
        queue: str,
        *,
        top: int | None = None,
        conversation_handle: uuid.UUID | str | None = None,
        conversation_group_id: uuid.UUID | str | None = None,
        timeout: float | None = 0.0,
    ) -> list[Message]:
        """RECEIVE [TOP (``top``)] FROM ``queue`` [WHERE ...] (RCV-1..5, PRI-12, SYS-2).

        Returns the messages of one conversation group (the highest-priority unlocked group
        with messages, or the one named), locking it until the transaction ends; an empty list
        when nothing arrives within ``timeout`` seconds (0: do not wait; None: wait without
        limit). With RETENTION the messages stay, marked status 0, after commit.

        Raises:
            CatalogError: unknown queue.
            QueueDisabledError: the queue is OFF, or is turned OFF or dropped while waiting.
            ConversationError: a WHERE handle or group unknown on this queue, or both given.
            BrokerError: a bad ``top`` or ``timeout``.
            PermissionDeniedError: no RECEIVE on the queue (SEC-4): nothing taken or locked.
        """
        return self._receiving.receive(
            queue,
            top=top,
            conversation_handle=conversation_handle,
            conversation_group_id=conversation_group_id,
            timeout=timeout,
        )

    @statement
    def get_conversation_group(
        self, queue: str, *, timeout: float | None = 0.0
    ) -> uuid.UUID | None:
        """GET CONVERSATION GROUP FROM ``queue`` (RCV-5, PRI-13): lock and return the next
        group with messages, or None when none comes within ``timeout`` seconds.

        Raises:
            QueueDisabledError: the queue is OFF (or unknown).
            PermissionDeniedError: no RECEIVE on the queue (SEC-4).
        """
        return self._receiving.get_conversation_group(queue, timeout=timeout)

    @statement
    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run the application's own SQL in this transaction's database transaction, so its
        changes commit or roll back with the messages. Returns the rows (empty for DML).

        On SQLite the first call takes the database's single write lock until the transaction
        ends: do application writes late in the unit of work.

        Raises:
            TransactionError: a transaction-control statement (COMMIT, ROLLBACK, BEGIN, …:
                :mod:`.appsql`); use :meth:`commit` / :meth:`rollback`. The transaction goes on.
            BrokerError: SQL that is not text, or parameters the driver cannot take.
            StorageError: the database refused the SQL: the transaction is rolled back.
        """
        with driver_refusals("tx.execute"):
            checked = check_application_sql(sql, postgres=self._postgres)
            return self._conn.execute_app(checked, params)

    @statement
    def executemany(
        self, sql: str, seq_of_params: Iterable[Sequence[Any] | dict[str, Any]]
    ) -> None:
        """Run one application statement for each parameter set, in this transaction. Raises as
        :meth:`execute`."""
        with driver_refusals("tx.executemany"):
            checked = check_application_sql(sql, "tx.executemany", postgres=self._postgres)
            self._conn.executemany_app(checked, seq_of_params)

    # -- savepoints (engine/savepoints.py) ------------------------------------------------
    @statement
    def save(self, name: str) -> None:
        """SAVE TRANSACTION ``name`` (save-transaction-transact-sql.md): a savepoint that
        :meth:`rollback_to` goes back to; names may repeat (the latest counts).

        Raises:
            BrokerError: ``name`` is not a non-empty string.
        """
        if self._savepoints is None:
            self._savepoints = Savepoints(
                self._conn,
                self._ops,
                self._endpoints,
                self._by_handle,
                self._new_groups,
                self._locked_group_of,
                self._receiving,
            )
        self._savepoints.save(name)

    @statement
    def rollback_to(self, name: str) -> None:
        """ROLLBACK TRANSACTION ``name`` (rollback-transaction-transact-sql.md): undo the SENDs,
        BEGIN DIALOGs, ENDs, timers, MOVEs and application SQL since the latest savepoint
        ``name``, and put the messages RECEIVEd since back on their queues; the transaction
        goes on, keeping that savepoint and its conversation-group locks (:mod:`.savepoints`).

        Raises:
            TransactionError: no savepoint of that name.
        """
        if self._savepoints is None:
            raise TransactionError(f"no savepoint named {name!r} in this transaction")
        self._savepoints.rollback_to(name)

    @property
    def savepoints(self) -> tuple[str, ...]:
        """The names of the transaction's savepoints, oldest first."""
        return () if self._savepoints is None else self._savepoints.names

    # -- end of the transaction ----------------------------------------------------------
    def commit(self) -> None:
        """Write everything and release the group locks.

        Raises:
            TransactionError: already ended.
            StorageError: the database failed: everything is rolled back, or — the connection
                lost (or, on SQLite, an I/O error) during COMMIT — the outcome is unknown; the
                error's ``outcome`` says which (docs/reliability.md).
        """
        self._check_active()
        receiving = self._receiving
        started = self._clock.now()
        written = None
        try:
            if self._ops or receiving.received or self._conn.in_write:
                written = write_commit(
                    self._context,
                    self._conn,
                    receiving,
                    self._endpoints.values(),
                    self._locked_group_of,
                    self._ops,
                    started,
                )
        except BaseException as exc:
            self._end(rolled_back=True, failed=isinstance(exc, DATABASE_FAILURES))
            raise
        self._end(rolled_back=False)
        if written is None:
            self._context.events.committed(set(), receiving.locked_queues)
            return
        if written.catalog_changed:
            self._context.catalog.invalidate()
        applier = written.applier
        enqueued, sent = applier.tally()
        elapsed = self._clock.now() - started
        self._context.statistics.committed(elapsed, enqueued, sent, receiving.received_types)
        arrived_on_empty = frozenset(applier.arrived_on_empty)
        self._context.events.committed(
            applier.woken_queues, receiving.locked_queues, arrived_on_empty
        )
        if applier.to_neighbours:  # messages for another database of the instance: carried now
            neighbourhoods.committed(applier.own_instance)

    def rollback(self) -> None:
        """Undo everything: received messages return to their queues (RCV-3), group locks are
        released, and each queue received from counts one more rollback (POI-1)."""
        if not self._ending.active:
            return
        self._end(rolled_back=True)

    def _end(self, *, rolled_back: bool, failed: bool = False) -> None:
        """End the transaction (:meth:`Ending.end`): roll back (``rolled_back``), release the
        group locks and give the session back. ``failed``: the database underneath failed (one
        of ``DATABASE_FAILURES``), so the rollback does not count towards poison-message
        handling (POI-1 counts the rollbacks of the application's processing — its
        exceptions, its SQL refused — not a full disk or a lost server; docs/reliability.md)."""
        self._ending.end(rolled_back=rolled_back, count=not failed)

    # -- used by event notifications ----------------------------------------------------
    @statement
    def conversation_state(self, handle: uuid.UUID) -> State | None:
        """The state of the local endpoint ``handle`` as stored (not locked), or None when it
        does not exist (DLG-8)."""
        row = self._conn.get_endpoint(handle.bytes)
        return None if row is None else State(row.state)

    @statement
    def remember_notification_dialog(self, event_notification_id: int, handle: uuid.UUID) -> None:
        """Record, with this commit, the dialog an event notification now travels on (EVT-1):
        the next notification of that registration reuses it while it is open."""
        self._ops.append(NotificationDialogOp(handle.bytes, event_notification_id))
