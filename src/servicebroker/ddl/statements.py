"""The catalog statements as the Broker's methods: CREATE / ALTER / DROP MESSAGE TYPE, XML SCHEMA
COLLECTION, CONTRACT, QUEUE, SERVICE, EVENT NOTIFICATION and BROKER PRIORITY, ALTER DATABASE,
and ``execute_ddl`` for their T-SQL form. :class:`CatalogStatements` is the base of
:class:`~servicebroker.Broker`: each method runs its :mod:`~servicebroker.ddl.changes` (or
:mod:`~servicebroker.ddl.xml_schema_changes`) function in a catalog transaction, then the
reaction the committed statement calls for (deliver held messages, reset a queue's activity,
check activation).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..activation.monitor import Trigger
from ..catalog.cache import CatalogCache
from ..catalog.model import Activation, CatalogSnapshot, check_name
from ..errors import CatalogError, StorageError
from . import changes, xml_schema_changes
from .database import alter_database, check_database_options

if TYPE_CHECKING:
    from ..activation.service import ActivationService
    from ..clock import Clock
    from ..storage.base import QueueActivityStore

__all__ = ["CatalogStatements"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class CatalogStatements:
    """The catalog methods of a broker (its base class).

    Args:
        cache: the broker's catalog cache (its snapshot and the transaction a change runs in).
        clock: the broker clock (QUE-1's modify dates, DROP SERVICE's error time).
        activity: the database's queue activity (reset for a new queue).
        drain_transmission: delivers what the transmission queue holds for queues and services
            that exist now (QUE-3); called after CREATE SERVICE, ALTER SERVICE, ALTER QUEUE ON.
        activation: the activation service (procedures registered, monitors told, ACT-4e).
        changed: called after every committed change (wakes the broker's background thread).
    """

    def __init__(
        self,
        cache: CatalogCache,
        *,
        clock: Clock,
        activity: QueueActivityStore,
        drain_transmission: Callable[[], object],
        activation: ActivationService,
        changed: Callable[[], None],
    ) -> None:
        self._catalog_cache = cache
        self._catalog_clock = clock
        self._catalog_activity = activity
        self._drain_transmission = drain_transmission
        self._catalog_activation = activation
        self._catalog_changed = changed

    @property
    def catalog(self) -> CatalogSnapshot:
        """The current catalog (message types, contracts, queues, services), read fresh."""
        return self._catalog_cache.current(fresh=True)

    def _change(self, statement: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        result = self._catalog_cache.change(statement, *args, **kwargs)
        self._catalog_changed()
        return result

    def _after_commit(self, statement: str, reaction: Callable[[], object]) -> None:
        """Run the reaction to a committed catalog statement (deliver held messages, reset the
        queue's activity, check activation). A storage failure here is logged, not raised: the
        statement committed, and an error would say it had not (the timer's next tick does the
        delivery and the activation check again)."""
        try:
            reaction()
        except StorageError as exc:
            log.warning("%s committed, but what follows it failed: %s", statement, exc)

    def create_message_type(
        self,
        name: str,
        *,
        validation: str = "NONE",
        xml_schema_collection: str | None = None,
    ) -> None:
        """CREATE MESSAGE TYPE ``name`` VALIDATION = NONE | EMPTY | WELL_FORMED_XML | JSON
        (DLG-3), or ``validation="VALID_XML"`` WITH SCHEMA COLLECTION ``xml_schema_collection``
        (an existing XML schema collection: bodies must be valid against it).

        Raises:
            CatalogError: a bad or taken name, an unknown validation or collection, VALID_XML
                without a collection, or a collection with another validation.
        """
        self._change(changes.create_message_type, name, validation, xml_schema_collection)

    def alter_message_type(
        self, name: str, *, validation: str, xml_schema_collection: str | None = None
    ) -> None:
        """ALTER MESSAGE TYPE ``name`` VALIDATION = NONE | EMPTY | WELL_FORMED_XML | JSON, or
        VALID_XML WITH SCHEMA COLLECTION ``xml_schema_collection``; queued messages keep theirs.
        Raises :class:`CatalogError`: unknown or built-in, a bad validation or collection."""
        self._change(changes.alter_message_type, name, validation, xml_schema_collection)

    def create_xml_schema_collection(self, name: str, schemas: str | bytes) -> None:
        """CREATE XML SCHEMA COLLECTION ``name`` AS ``schemas``: one or more ``<xsd:schema>``
        documents side by side (one per target namespace or more, a namespace possibly
        absent; an ``<xsd:import namespace="…"/>`` refers to another namespace of the
        collection), compiled together by libxml2 (XSD 1.0). The text may begin with an XML
        declaration (``<?xml version="1.0" encoding="UTF-16"?>``); bytes are read by their
        byte-order mark or declaration. Listed by ``views.xml_schema_collections()`` and
        ``views.xml_schema_namespaces()``.

        Raises:
            CatalogError: a bad or taken name; schemas that are not XML, not XML schemas, that
                do not compile (libxml2's first error and its line) or use what SQL Server
                refuses (``<xsd:include>``, ``<xsd:redefine>``, identity constraints).
        """
        self._change(
            xml_schema_changes.create_xml_schema_collection,
            name,
            schemas,
            now=self._catalog_clock.now(),
        )

    def alter_xml_schema_collection(self, name: str, add: str | bytes) -> None:
        """ALTER XML SCHEMA COLLECTION ``name`` ADD ``add``: new namespaces or new components
        of its namespaces; message types using the collection validate against them from the
        next message on.

        Raises:
            CatalogError: an unknown collection, a component it has already, schemas refused
                as by :meth:`create_xml_schema_collection`.
        """
        self._change(
            xml_schema_changes.alter_xml_schema_collection,
            name,
            add,
            now=self._catalog_clock.now(),
        )

    def drop_xml_schema_collection(self, name: str) -> None:
        """DROP XML SCHEMA COLLECTION ``name``. Raises :class:`CatalogError` for an unknown
        collection or one a message type validates against."""
        self._change(xml_schema_changes.drop_xml_schema_collection, name)

    def drop_message_type(self, name: str) -> None:
        """DROP MESSAGE TYPE. Raises :class:`CatalogError` if unknown, built in or in use."""
        self._change(changes.drop_message_type, name)

    def create_contract(self, name: str, messages: Mapping[str, str]) -> None:
        """CREATE CONTRACT ``name`` (message type SENT BY INITIATOR | TARGET | ANY, …) (DLG-2).

        Raises:
            CatalogError: a bad or taken name, unknown message types, bad SENT BY values.
        """
        self._change(changes.create_contract, name, messages)

    def drop_contract(self, name: str) -> None:
        """DROP CONTRACT: each endpoint of its conversations gets an Error (-8487) first on its
        queue and goes to ER. Raises :class:`CatalogError` if unknown, DEFAULT, or a service or
        broker priority refers to it."""
        woken = self._change(changes.drop_contract, name, now=self._catalog_clock.now())
        self._after_commit(f"DROP CONTRACT {name}", lambda: self._arrived(woken))

    def create_queue(
        self,
        name: str,
        *,
        status: bool = True,
        retention: bool = False,
        poison_message_handling: bool = True,
        activation: Activation | None = None,
    ) -> None:
        """CREATE QUEUE (QUE-1): STATUS, RETENTION, POISON_MESSAGE_HANDLING and ACTIVATION.

        Raises:
            CatalogError: a bad or taken name or bad settings; an activation procedure
                named without ``:`` that is not registered (:meth:`register_procedure`).
        """
        self._check_registered(name, activation)
        self._change(
            changes.create_queue,
            name,
            status=status,
            retention=retention,
            poison_message_handling=poison_message_handling,
            activation=activation,
            now=self._catalog_clock.now(),
        )
        self._register_procedure(name, activation)
        self._after_commit(
            f"CREATE QUEUE {name}",
            lambda: self._catalog_activity.forget(self.catalog.queue(name).queue_id),
        )

    def alter_queue(
        self,
        name: str,
        *,
        status: bool | None = None,
        retention: bool | None = None,
        poison_message_handling: bool | None = None,
        activation: Activation | None = None,
        drop_activation: bool = False,
    ) -> None:
        """ALTER QUEUE: change the settings given (None keeps one); ``drop_activation`` is
        ACTIVATION (DROP). Turning STATUS ON delivers the messages held for it in the
        transmission queue (QUE-3); turning it OFF ends waiting RECEIVEs with
        :class:`QueueDisabledError`.

        Raises:
            CatalogError: unknown queue or bad settings; an activation procedure named
                without ``:`` that is not registered (:meth:`register_procedure`).
        """
        self._check_registered(name, activation)
        before = self._change(
            changes.alter_queue,
            name,
            status=status,
            retention=retention,
            poison_message_handling=poison_message_handling,
            activation=activation,
            drop_activation=drop_activation,
            now=self._catalog_clock.now(),
        )
        if drop_activation or (  # the same procedure by name keeps a callable registered here
            activation is not None and activation.procedure != before.activation_procedure
        ):
            self._register_procedure(name, activation)

        def react() -> None:
            if status:
                self._drain_transmission()
            self._catalog_activation.altered(self.catalog.queue(name).queue_id)  # ACT-4e

        self._after_commit(f"ALTER QUEUE {name}", react)

    def drop_queue(self, name: str) -> None:
        """DROP QUEUE: its messages are deleted; waiting RECEIVEs end with an error (QUE-3).

        Raises:
            CatalogError: unknown queue, or a service still uses it.
        """
        self._change(changes.drop_queue, name)
        self._catalog_cache.note_dropped_queue(name)
        self._register_procedure(name, None)

    def create_service(self, name: str, *, queue: str, contracts: Sequence[str] = ()) -> None:
        """CREATE SERVICE ``name`` ON QUEUE ``queue`` (``contracts``); a service with no
        contracts can only initiate. Messages waiting for this service name are delivered.

        Raises:
            CatalogError: a bad or taken name, unknown queue or contract.
        """
        self._change(changes.create_service, name, queue, contracts)
        self._after_commit(f"CREATE SERVICE {name}", self._drain_transmission)

    def alter_service(
        self,
        name: str,
        *,
        queue: str | None = None,
        add_contracts: Sequence[str] = (),
        drop_contracts: Sequence[str] = (),
    ) -> None:
        """ALTER SERVICE ``name`` [ON QUEUE ``queue``] [(ADD CONTRACT …, DROP CONTRACT …)]: see
        :func:`~servicebroker.ddl.changes.alter_service` (a service with open conversations
        is not moved to another queue here). Raises :class:`CatalogError`."""
        self._change(changes.alter_service, name, queue, add_contracts, drop_contracts)
        self._after_commit(f"ALTER SERVICE {name}", self._drain_transmission)

    def drop_service(self, name: str) -> None:
        """DROP SERVICE: its endpoints and all their messages are deleted; the far side of each
        conversation gets an Error (-8470, "Remote service has been dropped.") and goes to ER.
        Raises :class:`CatalogError` if unknown, built in, or a broker priority names it."""
        woken = self._change(changes.drop_service, name, now=self._catalog_clock.now())
        self._after_commit(f"DROP SERVICE {name}", lambda: self._arrived(woken))

    def _arrived(self, queue_ids: set[int]) -> None:
        if queue_ids:  # messages a catalog statement put on queues: their monitors check
            self._catalog_activation.check(queue_ids, Trigger.MESSAGE_ARRIVED)

    def create_event_notification(
        self,
        name: str,
        *,
        queue: str,
        event: str,
        to_service: str,
        broker_instance: str = "current database",
    ) -> None:
        """CREATE EVENT NOTIFICATION ``name`` ON QUEUE ``queue`` FOR ``event`` TO SERVICE
        ``to_service``, ``broker_instance`` (EVT-1; only ``'current database'``, any case).
        ``event`` is ``"QUEUE_ACTIVATION"`` (external activation, ACT-8: raised when activation
        is necessary, then not again for ``external_activation_timeout`` seconds unless an
        application RECEIVEs from the queue) or ``"BROKER_QUEUE_DISABLED"`` (raised when
        poison-message handling turns the queue OFF, POI-1).

        Raises:
            CatalogError: a bad or taken name, an unknown queue or event, a bad service name,
                another broker instance.
        """
        self._change(
            changes.create_event_notification, name, queue, event, to_service, broker_instance
        )
        self._after_commit(
            f"CREATE EVENT NOTIFICATION {name}",
            lambda: self._catalog_activation.check(
                {self.catalog.queue(queue).queue_id}, Trigger.QUEUE_ALTERED
            ),
        )

    def drop_event_notification(self, name: str, *, queue: str | None = None) -> None:
        """DROP EVENT NOTIFICATION ``name`` [ON QUEUE ``queue``]. Raises :class:`CatalogError`
        for an unknown name, or one not on ``queue`` when it is given."""
        self._change(changes.drop_event_notification, name, queue)

    def create_broker_priority(
        self,
        name: str,
        *,
        contract_name: str = "ANY",
        local_service_name: str = "ANY",
        remote_service_name: str = "ANY",
        priority_level: int = 5,
    ) -> None:
        """CREATE BROKER PRIORITY ``name`` FOR CONVERSATION SET (CONTRACT_NAME, LOCAL_SERVICE_NAME,
        REMOTE_SERVICE_NAME, PRIORITY_LEVEL) (PRI-2): each criterion a name or "ANY", the level
        1 (lowest) to 10. Applies to endpoints created from now on (PRI-5). CONTRACT_NAME and
        LOCAL_SERVICE_NAME must name a contract and a service of this database (or be ANY),
        which then cannot be dropped while the priority refers to them.

        Raises:
            CatalogError: a bad or taken name, a bad criterion, a contract or local service
                that does not exist, a level outside 1..10.
        """
        self._change(
            changes.create_broker_priority,
            name,
            contract_name=contract_name,
            local_service_name=local_service_name,
            remote_service_name=remote_service_name,
            priority_level=priority_level,
        )

    def alter_broker_priority(
        self,
        name: str,
        *,
        contract_name: str | None = None,
        local_service_name: str | None = None,
        remote_service_name: str | None = None,
        priority_level: int | None = None,
    ) -> None:
        """ALTER BROKER PRIORITY: change what is given; existing conversations keep their levels
        (PRI-5). Raises :class:`CatalogError` for an unknown name or bad values."""
        self._change(
            changes.alter_broker_priority,
            name,
            contract_name=contract_name,
            local_service_name=local_service_name,
            remote_service_name=remote_service_name,
            priority_level=priority_level,
        )

    def drop_broker_priority(self, name: str) -> None:
        """DROP BROKER PRIORITY. Raises :class:`CatalogError` for an unknown name."""
        self._change(changes.drop_broker_priority, name)

    def alter_database(
        self,
        *,
        honor_broker_priority: bool | None = None,
        enable_broker: bool | None = None,
        new_broker: bool = False,
        error_broker_conversations: bool = False,
    ) -> None:
        """ALTER DATABASE … SET <service_broker_option> (alter-database-transact-sql-set-
        options.md), the options given in one catalog transaction:

        - HONOR_BROKER_PRIORITY ON | OFF (PRI-16): whether messages leave the transmission
          queue by their endpoint's level (ON) or all at level 5 (OFF, the default); read back
          as ``broker.catalog.honor_broker_priority``.
        - ENABLE_BROKER (``enable_broker=True``) does nothing: a broker is always enabled.
        - NEW_BROKER (``new_broker=True``): every conversation of the database is removed at
          once without a message — endpoints, the messages of every queue (retained ones too),
          the transmission queue, conversation groups, event notifications' dialogs — and the
          database gets a new :attr:`service_broker_guid`. Queues, services, contracts,
          message types, priorities, event notifications and the application's tables stay.
          For a copied database (``servicebroker init --new-broker``).
        - ERROR_BROKER_CONVERSATIONS (``error_broker_conversations=True``): each endpoint that
          is open (SO, SI, CO, DI) gets one Error (code -8499) first on its own queue and goes
          to ER, as DROP CONTRACT ends its conversations; the application RECEIVEs it and ENDs
          the conversation. The ``service_broker_guid`` is kept.

        Like every catalog change it runs alone: it waits for write transactions being
        committed (up to the storage's busy time-out, then :class:`StorageError`). A
        transaction holding conversation groups without writing yet (it RECEIVEd) is not
        waited for: what it did to a conversation NEW_BROKER removed comes to nothing when
        it commits (docs/ddl.md). Queues are left empty: activation finds nothing to do,
        a waiting RECEIVE keeps waiting.

        Raises:
            CatalogError: no option given (every one None or False); a value that is not a
                bool; ``enable_broker=False`` (DISABLE_BROKER is not supported); NEW_BROKER
                with ERROR_BROKER_CONVERSATIONS.
            StorageError: the database failed, or stayed locked beyond the busy time-out.
        """
        if enable_broker is not None and enable_broker is not True:
            raise CatalogError(
                f"ENABLE_BROKER: a broker is always enabled; DISABLE_BROKER is not supported "
                f"(enable_broker must be True or None, got {enable_broker!r})"
            )
        check_database_options(
            honor_broker_priority=honor_broker_priority,
            new_broker=new_broker,
            error_broker_conversations=error_broker_conversations,
        )
        if (
            honor_broker_priority is None
            and enable_broker is None
            and not new_broker
            and not error_broker_conversations
        ):
            raise CatalogError(
                "ALTER DATABASE … SET needs an option: honor_broker_priority=True or False, "
                "enable_broker=True, new_broker=True or error_broker_conversations=True"
            )
        if honor_broker_priority is None and not new_broker and not error_broker_conversations:
            return  # ENABLE_BROKER alone: a broker is always enabled
        try:
            woken = self._change(
                alter_database,
                honor_broker_priority=honor_broker_priority,
                new_broker=new_broker,
                error_broker_conversations=error_broker_conversations,
                now=self._catalog_clock.now(),
            )
        except StorageError as exc:
            if type(exc) is not StorageError:
                raise  # the database unavailable, full, failing: as it is
            raise StorageError(
                f"ALTER DATABASE did not run: {exc} (a catalog change waits for the write "
                f"transactions being committed: SQLite's write lock, PostgreSQL's catalog "
                f"lock; retry when they are done)",
                database=exc.database,
                outcome=exc.outcome,
            ) from exc
        self._after_commit("ALTER DATABASE", lambda: self._arrived(woken))

    def execute_ddl(self, text: str) -> int:
        """Run a script of Service Broker DDL written as T-SQL (docs/ddl.md): CREATE / ALTER /
        DROP MESSAGE TYPE, XML SCHEMA COLLECTION, CONTRACT, QUEUE, SERVICE, EVENT NOTIFICATION,
        BROKER PRIORITY, ROUTE and ENDPOINT … FOR SERVICE_BROKER; CREATE / DROP CERTIFICATE and LOGIN … FROM
        CERTIFICATE; GRANT CONNECT ON ENDPOINT; ALTER DATABASE … SET ENABLE_BROKER |
        NEW_BROKER | ERROR_BROKER_CONVERSATIONS | HONOR_BROKER_PRIORITY, with ``USE`` and
        ``GO`` lines doing nothing. The script is parsed whole, then its statements run one after
        another; returns how many ran.

        Raises:
            CatalogError: a syntax error or a statement that is not Service Broker DDL (with
                line and column; nothing ran), or a statement the catalog refuses (named, with
                its line and column; the statements before it have run).
        """
        from .parser import parse_ddl
        from .run import DdlTarget, run_ddl

        # the Broker has the transport's statements too (NetworkStatements, its other base)
        return run_ddl(cast("DdlTarget", self), parse_ddl(text))

    def register_procedure(self, name: str, procedure: Callable[[Any], object]) -> None:
        """Register ``procedure`` under a T-SQL procedure ``name`` (no ``:``; a database or
        schema prefix in DDL, ``dbo.ProcessOrders``, is dropped), so that a queue whose
        ACTIVATION names it — ``PROCEDURE_NAME = dbo.ProcessOrders`` in ``execute_ddl``, or
        ``Activation("ProcessOrders")`` — runs it: the activation stored procedure of CREATE
        QUEUE, as a Python callable taking an ``ActivationContext`` (ACT-7). The registration
        lives in this process: every process that activates the queue registers it (one
        that has not logs the failed start and retries at the next activation check).

        Raises:
            CatalogError: a name with ``:`` or that is not a valid name, or a procedure that is
                not callable.
        """
        if isinstance(name, str) and ":" in name:
            raise CatalogError(
                f"procedure name {name!r} holds ':': a 'module:function' name is imported, "
                f"not registered; register a plain name such as 'ProcessOrders'"
            )
        check_name("procedure", name)
        if not callable(procedure):
            raise CatalogError(f"procedure {name!r} must be callable, got {procedure!r}")
        self._catalog_activation.register_named_procedure(name, procedure)

    def register_procedure_finder(
        self, finder: Callable[[str], Callable[[Any], object] | None] | None
    ) -> None:
        """Give activation a way to find a procedure no :meth:`register_procedure` call named
        in this process: when a queue's ACTIVATION names one, ``finder(name)`` is asked and
        what it returns (a callable taking an ``ActivationContext``) is registered; None, not
        found (the start is logged as failed and tried again at the next activation check).
        A T-SQL instance finds the procedures stored in the database, whichever process
        created them (ACT-7). ``None`` removes the finder."""
        self._catalog_activation.set_procedure_finder(finder)

    def _check_registered(self, queue: str, activation: Activation | None) -> None:
        """A procedure named without ``:`` must be registered in this process (CREATE / ALTER
        QUEUE refuse an unknown one at once, not at the first activation)."""
        if (
            isinstance(activation, Activation)
            and isinstance(activation.procedure, str)
            and ":" not in activation.procedure
            and not self._catalog_activation.has_named_procedure(activation.procedure)
        ):
            raise CatalogError(
                f"queue {queue!r}: activation procedure {activation.procedure!r} is neither "
                f"'package.module:function' nor registered with Broker.register_procedure"
            )

    def _register_procedure(self, queue: str, activation: Activation | None) -> None:
        if activation is not None and not isinstance(activation.procedure, str):
            self._catalog_activation.register_procedure(queue, activation.procedure)
        else:
            self._catalog_activation.register_procedure(queue, None)
