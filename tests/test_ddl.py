"""The Service Broker DDL in its T-SQL form (``broker.execute_ddl``): statement by statement as
Microsoft's reference pages show them, the forms every statement accepts, and the errors
(docs/ddl.md). The tutorial and the ``servicebroker ddl`` command: test_ddl_tutorial.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servicebroker import Activation, Broker, CatalogError
from servicebroker.ddl.parser import parse_ddl
from servicebroker.testing.waiting import eventually
from servicebroker.views import ServiceQueueRow

from .conftest import make_pair

DATA = Path(__file__).parent / "data"
LESSON_1 = (DATA / "tutorial_lesson1.sql").read_text(encoding="utf-8")
REQUEST = "//AWDB/1DBSample/RequestMessage"
REPLY = "//AWDB/1DBSample/ReplyMessage"
CONTRACT = "//AWDB/1DBSample/SampleContract"
TARGET = "//AWDB/1DBSample/TargetService"
INITIATOR = "//AWDB/1DBSample/InitiatorService"


def procedure(context: object) -> None:
    """An activation procedure the DDL can name as 'tests.test_ddl:procedure'."""


SYSTEM_QUEUE = "sys_event_notifications"  # event notifications' own queue, always there


def user_queues(broker: Broker) -> set[str]:
    return set(broker.catalog.queues) - {SYSTEM_QUEUE}


def queue_rows(broker: Broker) -> list[ServiceQueueRow]:
    return [r for r in broker.views.service_queues() if r.name != SYSTEM_QUEUE]


# -- MESSAGE TYPE ----------------------------------------------------------------------


def test_create_alter_drop_message_type(broker: Broker) -> None:
    # CREATE MESSAGE TYPE (docs/t-sql/statements/create-message-type-transact-sql.md):
    # AUTHORIZATION is accepted (there are no principals here), VALIDATION defaults to NONE
    ran = broker.execute_ddl(
        """
        CREATE MESSAGE TYPE [//Adventure-Works.com/Expenses/SubmitExpense]
            AUTHORIZATION dbo
            VALIDATION = WELL_FORMED_XML ;
        create message type plain;
        CREATE MESSAGE TYPE [empty] VALIDATION = EMPTY
        CREATE MESSAGE TYPE "json" VALIDATION = json
        """
    )
    assert ran == 4
    cat = broker.catalog
    assert [
        cat.message_type(n).validation
        for n in ("//Adventure-Works.com/Expenses/SubmitExpense", "plain", "empty", "json")
    ] == ["WELL_FORMED_XML", "NONE", "EMPTY", "JSON"]
    # ALTER MESSAGE TYPE (docs/t-sql/statements/alter-message-type-transact-sql.md), its
    # example verbatim
    broker.execute_ddl(
        "ALTER MESSAGE TYPE\n    [//Adventure-Works.com/Expenses/SubmitExpense]\n"
        "    VALIDATION = NONE ;"
    )
    assert broker.catalog.message_type("//Adventure-Works.com/Expenses/SubmitExpense").validation
    assert (
        broker.catalog.message_type("//Adventure-Works.com/Expenses/SubmitExpense").validation
        == "NONE"
    )
    broker.execute_ddl("DROP MESSAGE TYPE [//Adventure-Works.com/Expenses/SubmitExpense]")
    assert "//Adventure-Works.com/Expenses/SubmitExpense" not in broker.catalog.message_types
    # VALID_XML WITH SCHEMA COLLECTION names an existing collection (the rest:
    # tests/test_xml_schema_collections.py)
    with pytest.raises(CatalogError, match=r"XML schema collection 's' does not exist"):
        broker.execute_ddl("CREATE MESSAGE TYPE m VALIDATION = VALID_XML WITH SCHEMA COLLECTION s")
    with pytest.raises(CatalogError, match="built in and cannot be altered"):
        broker.execute_ddl(
            "ALTER MESSAGE TYPE [http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog] "
            "VALIDATION = NONE"
        )


def test_altering_validation_leaves_queued_messages_as_they_are(broker: Broker) -> None:
    # ALTER MESSAGE TYPE (alter-message-type-transact-sql.md): "Changing the validation of a
    # message type does not affect messages that have already been delivered to a queue."
    broker.execute_ddl(LESSON_1)
    broker.execute_ddl(f"ALTER MESSAGE TYPE [{REQUEST}] VALIDATION = NONE")
    with broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(handle, REQUEST, "not xml")
    broker.execute_ddl(f"ALTER MESSAGE TYPE [{REQUEST}] VALIDATION = WELL_FORMED_XML")
    (queued,) = broker.peek("TargetQueue1DB")
    assert (queued.validation, queued.message_body) == ("N", b"not xml")
    with pytest.raises(Exception, match="XML"), broker.transaction() as tx:
        tx.send(handle, REQUEST, "still not xml")
    assert broker.alter_message_type(REQUEST, validation="json") is None
    assert broker.catalog.message_type(REQUEST).validation == "JSON"


# -- CONTRACT --------------------------------------------------------------------------


def test_create_and_drop_contract(broker: Broker) -> None:
    # CREATE CONTRACT (docs/t-sql/statements/create-contract-transact-sql.md): message types
    # SENT BY INITIATOR | TARGET | ANY; the DEFAULT message type bracketed
    broker.execute_ddl(
        """
        CREATE MESSAGE TYPE [//Adventure-Works.com/Expenses/SubmitExpense] VALIDATION = WELL_FORMED_XML;
        CREATE MESSAGE TYPE [//Adventure-Works.com/Expenses/ExpenseApprovedOrDenied] VALIDATION = WELL_FORMED_XML;
        CREATE MESSAGE TYPE [//Adventure-Works.com/Expenses/ExpenseReimbursed] VALIDATION = WELL_FORMED_XML;
        CREATE CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission]
            ( [//Adventure-Works.com/Expenses/SubmitExpense]
                  SENT BY INITIATOR,
              [//Adventure-Works.com/Expenses/ExpenseApprovedOrDenied]
                  SENT BY TARGET,
              [//Adventure-Works.com/Expenses/ExpenseReimbursed]
                  SENT BY TARGET
            ) ;
        CREATE CONTRACT c2 AUTHORIZATION dbo ([DEFAULT] SENT BY any)
        """
    )
    cat = broker.catalog
    sent_by = cat.contract("//Adventure-Works.com/Expenses/ExpenseSubmission").sent_by
    assert sorted(sent_by.values()) == ["INITIATOR", "TARGET", "TARGET"]
    assert list(cat.contract("c2").sent_by.values()) == ["ANY"]
    with pytest.raises(CatalogError, match=r"line 1, column 39: SENT BY must be INITIATOR"):
        broker.execute_ddl("CREATE CONTRACT c3 ([DEFAULT] SENT BY NOBODY)")
    with pytest.raises(CatalogError, match="message type 'DEFAULT' is listed twice"):
        broker.execute_ddl("CREATE CONTRACT c3 ([DEFAULT] SENT BY ANY, [DEFAULT] SENT BY TARGET)")
    # DROP CONTRACT (docs/t-sql/statements/drop-contract-transact-sql.md)
    broker.execute_ddl("DROP CONTRACT c2;")
    assert "c2" not in broker.catalog.contracts
    # T-SQL has no ALTER CONTRACT
    with pytest.raises(CatalogError, match="T-SQL has no ALTER CONTRACT"):
        broker.execute_ddl("ALTER CONTRACT c2 ([DEFAULT] SENT BY ANY)")


# -- QUEUE -----------------------------------------------------------------------------


def test_create_queue_examples(broker: Broker) -> None:
    # CREATE QUEUE (docs/t-sql/statements/create-queue-transact-sql.md), examples A, B and D
    # verbatim (the queue renamed for each), E with a Python procedure: "If this clause is
    # omitted, the default is ON, and the queue is available."
    broker.execute_ddl(
        """
        CREATE QUEUE ExpenseQueue ;
        CREATE QUEUE ExpenseQueueB WITH STATUS=OFF ;
        CREATE QUEUE ExpenseQueueD
            ON ExpenseWorkFileGroup ;
        CREATE QUEUE ExpenseQueueE
            WITH STATUS = OFF,
              RETENTION = ON,
              ACTIVATION (
                  PROCEDURE_NAME = [tests.test_ddl:procedure],
                  MAX_QUEUE_READERS = 10,
                  EXECUTE AS SELF )
            ON [DEFAULT] ;
        """
    )
    rows = {r.name: r for r in queue_rows(broker)}
    assert rows["ExpenseQueue"].is_receive_enabled
    assert not rows["ExpenseQueue"].is_retention_enabled
    assert rows["ExpenseQueue"].is_poison_message_handling_enabled
    assert rows["ExpenseQueue"].activation_procedure is None
    assert not rows["ExpenseQueueB"].is_receive_enabled
    assert rows["ExpenseQueueD"].is_receive_enabled
    e = rows["ExpenseQueueE"]
    assert (e.is_receive_enabled, e.is_retention_enabled) == (False, True)
    assert (e.activation_procedure, e.max_readers, e.is_activation_enabled, e.execute_as) == (
        "tests.test_ddl:procedure",
        10,
        True,
        "SELF",
    )


def test_create_queue_activation_names_a_registered_or_python_procedure(broker: Broker) -> None:
    # CREATE QUEUE (docs/t-sql/statements/create-queue-transact-sql.md), example C names a
    # T-SQL stored procedure: here a procedure is a Python callable registered under that name
    # (Broker.register_procedure), or a 'package.module:function' imported at activation
    example_c = """CREATE QUEUE ExpenseQueue
    WITH STATUS=ON,
    ACTIVATION (
        PROCEDURE_NAME = expense_procedure,
        MAX_QUEUE_READERS = 5,
        EXECUTE AS 'ExpenseUser' ) ;"""
    with pytest.raises(
        CatalogError,
        match=r"CREATE QUEUE at line 1, column 1 .* activation procedure 'expense_procedure' is "
        r"neither 'package.module:function' nor registered with Broker.register_procedure",
    ):
        broker.execute_ddl(example_c)
    broker.register_procedure("expense_procedure", procedure)
    broker.execute_ddl(example_c)  # as written
    (row,) = queue_rows(broker)
    assert (row.activation_procedure, row.max_readers, row.execute_as) == (
        "expense_procedure",
        5,
        "ExpenseUser",
    )
    # a database and schema prefix is dropped: the procedure is found by its own name
    broker.execute_ddl(
        "CREATE QUEUE q WITH ACTIVATION (PROCEDURE_NAME = AdventureWorks2012.dbo.expense_"
        "procedure, MAX_QUEUE_READERS = 1, EXECUTE AS SELF)"
    )
    assert broker.catalog.queue("q").activation_procedure == "expense_procedure"
    # the page's syntax: PROCEDURE_NAME, MAX_QUEUE_READERS and EXECUTE AS are not optional
    with pytest.raises(CatalogError, match=r"needs .* \(missing: EXECUTE AS\)"):
        broker.execute_ddl(
            "CREATE QUEUE q2 WITH ACTIVATION (PROCEDURE_NAME = 'tests.test_ddl:procedure', "
            "MAX_QUEUE_READERS = 1)"
        )
    broker.execute_ddl(
        example_c.replace("ExpenseQueue", "q3").replace(
            "expense_procedure", "N'tests.test_ddl:procedure'"
        )
    )
    assert broker.catalog.queue("q3").activation_procedure == "tests.test_ddl:procedure"
    for bad in ("a:b", "", "x\x00"):
        with pytest.raises(CatalogError):
            broker.register_procedure(bad, procedure)
    with pytest.raises(CatalogError, match="must be callable"):
        broker.register_procedure("p", "not callable")  # type: ignore[arg-type]


def test_a_registered_procedure_is_activated(broker: Broker) -> None:
    # CREATE QUEUE (docs/t-sql/statements/create-queue-transact-sql.md): PROCEDURE_NAME "Specifies
    # the name of the stored procedure to start to process messages in this queue" — the T-SQL
    # script as a migrating team has it, the procedure registered under its name
    pair = make_pair(broker)
    got: list[bytes] = []

    def process_orders(context: Any) -> None:
        with context.broker.transaction() as tx:
            got.extend(m.message_body for m in tx.receive(context.queue_name))

    broker.register_procedure("ProcessOrders", process_orders)
    broker.execute_ddl(
        f"ALTER QUEUE [{pair.tq}] WITH ACTIVATION (STATUS = ON, "
        "PROCEDURE_NAME = [dbo].[ProcessOrders], MAX_QUEUE_READERS = 1, EXECUTE AS OWNER)"
    )
    broker.start()
    with broker.transaction() as tx:
        h = tx.begin_dialog(pair.initiator, pair.target, contract="C")
        tx.send(h, "Req", b"order 1")
    eventually(
        lambda: got == [b"order 1"] and not broker.views.dm_broker_activated_tasks(), every=0.002
    )
    assert broker.peek(pair.tq) == []


def test_alter_queue_examples(broker: Broker) -> None:
    # ALTER QUEUE (docs/t-sql/statements/alter-queue-transact-sql.md), examples A to I, with
    # Python procedures where they name T-SQL ones
    broker.execute_ddl("CREATE QUEUE ExpenseQueue")
    broker.execute_ddl("ALTER QUEUE ExpenseQueue WITH STATUS = OFF ;")  # A
    assert not broker.catalog.queue("ExpenseQueue").status
    # "Altering a queue to add an activation stored procedure does not change the activation
    # status of the queue."
    broker.execute_ddl(
        "ALTER QUEUE ExpenseQueue\n    WITH ACTIVATION (\n"
        "        PROCEDURE_NAME = [tests.test_ddl:procedure],\n        EXECUTE AS SELF) ;"
    )  # B
    q = broker.catalog.queue("ExpenseQueue")
    assert (q.activation_procedure, q.activation_enabled) == ("tests.test_ddl:procedure", False)
    broker.execute_ddl("ALTER QUEUE ExpenseQueue WITH ACTIVATION (MAX_QUEUE_READERS = 7) ;")  # C
    assert broker.catalog.queue("ExpenseQueue").max_queue_readers == 7
    broker.execute_ddl(
        "ALTER QUEUE ExpenseQueue\n    WITH ACTIVATION (\n"
        "        PROCEDURE_NAME = [AdventureWorks2012].[dbo].[tests.test_ddl:procedure] ,\n"
        "        EXECUTE AS 'SecurityAccount') ;"
    )  # D
    (row,) = queue_rows(broker)
    assert (row.activation_procedure, row.execute_as, row.max_readers) == (
        "tests.test_ddl:procedure",
        "SecurityAccount",
        7,
    )
    broker.execute_ddl("ALTER QUEUE ExpenseQueue WITH RETENTION = ON ;")  # E
    assert broker.catalog.queue("ExpenseQueue").retention
    broker.execute_ddl("ALTER QUEUE ExpenseQueue WITH ACTIVATION (STATUS = ON)")
    assert broker.catalog.queue("ExpenseQueue").activation_enabled
    # F: "DROP Deletes all of the activation information associated with the queue."
    broker.execute_ddl("ALTER QUEUE ExpenseQueue WITH ACTIVATION (DROP) ;")
    (row,) = queue_rows(broker)
    assert (row.activation_procedure, row.is_activation_enabled, row.max_readers) == (
        None,
        False,
        0,
    )
    assert row.execute_as == "SELF"
    # G, H, I act on the queue's internal table and filegroup: accepted, nothing to do here
    assert (
        broker.execute_ddl(
            "ALTER QUEUE ExpenseQueue REBUILD WITH (MAXDOP = 2)\n"
            "ALTER QUEUE ExpenseQueue REORGANIZE\n"
            "ALTER QUEUE ExpenseQueue REORGANIZE WITH (LOB_COMPACTION = ON)\n"
            'ALTER QUEUE ExpenseQueue MOVE TO [NewFilegroup]\nALTER QUEUE ExpenseQueue MOVE TO "default"'
        )
        == 5
    )
    # the syntax's optional commas, options in any order, POISON_MESSAGE_HANDLING
    broker.execute_ddl(
        "alter queue dbo.ExpenseQueue with poison_message_handling (status = off) "
        "retention = off status = on"
    )
    q = broker.catalog.queue("ExpenseQueue")
    assert (q.poison_message_handling, q.retention, q.status) == (False, False, True)
    with pytest.raises(CatalogError, match="has no activation procedure"):
        broker.execute_ddl("ALTER QUEUE ExpenseQueue WITH ACTIVATION (STATUS = ON)")
    with pytest.raises(CatalogError, match=r"ACTIVATION \(DROP\) belongs to ALTER QUEUE"):
        broker.execute_ddl("CREATE QUEUE q2 WITH ACTIVATION (DROP)")
    with pytest.raises(CatalogError, match="STATUS is given twice"):
        broker.execute_ddl("ALTER QUEUE ExpenseQueue WITH STATUS = ON, STATUS = OFF")
    # DROP QUEUE (docs/t-sql/statements/drop-queue-transact-sql.md), schema-qualified
    broker.execute_ddl("DROP QUEUE [dbo].[ExpenseQueue]")
    assert user_queues(broker) == set()


def test_alter_queue_by_ddl_keeps_a_procedure_registered_in_python(broker: Broker) -> None:
    # a callable given to the Python API cannot be imported by its name (a lambda); ALTER QUEUE
    # … ACTIVATION (MAX_QUEUE_READERS = 2) keeps it registered, so activation still calls it
    pair = make_pair(broker)
    calls: list[str] = []
    broker.alter_queue(
        pair.tq, activation=Activation(lambda ctx: calls.append("called"), max_queue_readers=1)
    )
    broker.execute_ddl(f"ALTER QUEUE {pair.tq} WITH ACTIVATION (MAX_QUEUE_READERS = 2)")
    assert broker.catalog.queue(pair.tq).max_queue_readers == 2
    broker.start()
    with broker.transaction() as tx:
        tx.send(tx.begin_dialog(pair.initiator, pair.target, contract="C"), "Req", b"x")
    eventually(lambda: calls == ["called"], every=0.002)
    broker.stop()
    broker.alter_queue(pair.tq, drop_activation=True)
    assert broker.catalog.queue(pair.tq).activation_procedure is None
    with pytest.raises(CatalogError, match="drop_activation"):
        broker.alter_queue(pair.tq, activation=Activation("m:f"), drop_activation=True)


# -- SERVICE ---------------------------------------------------------------------------


def test_create_alter_drop_service(broker: Broker) -> None:
    # CREATE SERVICE (docs/t-sql/statements/create-service-transact-sql.md)
    broker.execute_ddl(
        """
        CREATE QUEUE ExpenseQueue; CREATE QUEUE NewQueue;
        CREATE CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission] ([DEFAULT] SENT BY ANY)
        CREATE CONTRACT [//Adventure-Works.com/Expenses/ExpenseProcessing] ([DEFAULT] SENT BY ANY)
        CREATE SERVICE [//Adventure-Works.com/Expenses] AUTHORIZATION dbo
            ON QUEUE [dbo].[ExpenseQueue]
            ([//Adventure-Works.com/Expenses/ExpenseSubmission]) ;
        """
    )
    cat = broker.catalog
    svc = cat.service("//Adventure-Works.com/Expenses")
    assert svc.queue_id == cat.queue("ExpenseQueue").queue_id
    submission = cat.contract("//Adventure-Works.com/Expenses/ExpenseSubmission")
    processing = cat.contract("//Adventure-Works.com/Expenses/ExpenseProcessing")
    assert svc.contract_ids == {submission.service_contract_id}
    # ALTER SERVICE (docs/t-sql/statements/alter-service-transact-sql.md), examples A, B, C
    broker.execute_ddl("ALTER SERVICE [//Adventure-Works.com/Expenses]\n    ON QUEUE NewQueue ;")
    assert broker.catalog.service("//Adventure-Works.com/Expenses").queue_id == (
        broker.catalog.queue("NewQueue").queue_id
    )
    with pytest.raises(CatalogError, match="already has contract"):
        broker.execute_ddl(
            "ALTER SERVICE [//Adventure-Works.com/Expenses]\n"
            "    (ADD CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission]) ;"
        )
    broker.execute_ddl(
        "ALTER SERVICE [//Adventure-Works.com/Expenses]\n"
        "    (ADD CONTRACT [//Adventure-Works.com/Expenses/ExpenseProcessing],\n"
        "     DROP CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission]) ;"
    )
    assert broker.catalog.service("//Adventure-Works.com/Expenses").contract_ids == {
        processing.service_contract_id
    }
    with pytest.raises(CatalogError, match="does not have contract"):
        broker.alter_service("//Adventure-Works.com/Expenses", drop_contracts=["DEFAULT"])
    with pytest.raises(CatalogError, match="ADD CONTRACT DEFAULT given twice"):
        broker.execute_ddl(
            "ALTER SERVICE [//Adventure-Works.com/Expenses] "
            "(ADD CONTRACT [DEFAULT], ADD CONTRACT [DEFAULT])"
        )
    with pytest.raises(CatalogError, match="ADD CONTRACT needs a list"):
        broker.alter_service("//Adventure-Works.com/Expenses", add_contracts="DEFAULT")
    # DROP SERVICE (docs/t-sql/statements/drop-service-transact-sql.md)
    broker.execute_ddl("DROP SERVICE [//Adventure-Works.com/Expenses]")
    assert "//Adventure-Works.com/Expenses" not in broker.catalog.services


def test_a_dropped_contract_stops_new_dialogs_and_spares_existing_ones(broker: Broker) -> None:
    # ALTER SERVICE (alter-service-transact-sql.md): "When the ALTER SERVICE statement deletes
    # a contract from a service, the service can no longer be a target for conversations that
    # use that contract. ... Existing conversations that use the contract are unaffected."
    broker.execute_ddl(LESSON_1)
    with broker.transaction() as tx:
        old = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(old, REQUEST, "<a/>")
    broker.execute_ddl(f"ALTER SERVICE [{TARGET}] (DROP CONTRACT [{CONTRACT}])")
    with broker.transaction() as tx:
        tx.send(old, REQUEST, "<b/>")
    assert [m.message_body for m in broker.peek("TargetQueue1DB")] == [b"<a/>", b"<b/>"]
    with broker.transaction() as tx:
        new = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        tx.send(new, REQUEST, "<c/>")
    bodies = [m.message_body for m in broker.peek("TargetQueue1DB")]
    assert b"<c/>" not in bodies  # refused by the target: an error comes back instead
    with broker.transaction() as tx:
        back = tx.receive("InitiatorQueue1DB", conversation_handle=new)
    assert [m.message_type_name for m in back] == [
        "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    ]


def test_moving_a_service_with_open_conversations_is_refused(broker: Broker) -> None:
    # ALTER SERVICE … ON QUEUE: "Service Broker moves all messages for this service from the
    # current queue to the new queue." Here a service moves only without open conversations
    # or queued messages (docs/ddl.md); the refusal says so and nothing changes
    broker.execute_ddl(LESSON_1 + "\nCREATE QUEUE Other")
    with broker.transaction() as tx:
        tx.send(tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT), REQUEST, "<a/>")
    with pytest.raises(
        CatalogError, match=r"ALTER SERVICE at line 1, column 1 .*has open conversations"
    ):
        broker.execute_ddl(f"ALTER SERVICE [{TARGET}] ON QUEUE Other")
    assert (
        broker.catalog.service(TARGET).queue_id == broker.catalog.queue("TargetQueue1DB").queue_id
    )


# -- EVENT NOTIFICATION ----------------------------------------------------------------


def test_create_and_drop_event_notification(broker: Broker) -> None:
    # CREATE EVENT NOTIFICATION (docs/t-sql/statements/create-event-notification-transact-
    # sql.md): "QUEUE can be specified only if FOR QUEUE_ACTIVATION or FOR
    # BROKER_QUEUE_DISABLED is also specified." "'current database' is a case-insensitive
    # string literal."
    broker.execute_ddl(
        """
        CREATE QUEUE NotifyQueue ;
        GO
        CREATE SERVICE NotifyService
        ON QUEUE NotifyQueue
        ([http://schemas.microsoft.com/SQL/Notifications/PostEventNotification]);
        GO
        CREATE QUEUE Work;
        CREATE EVENT NOTIFICATION activate ON QUEUE dbo.Work
            FOR QUEUE_ACTIVATION TO SERVICE 'NotifyService', 'current database';
        CREATE EVENT NOTIFICATION disabled ON QUEUE Work WITH FAN_IN
            FOR broker_queue_disabled TO SERVICE N'NotifyService', N'Current Database'
        """
    )
    rows = {(r.name, r.event_type) for r in broker.catalog.event_notifications.values()}
    assert rows == {("activate", "QUEUE_ACTIVATION"), ("disabled", "BROKER_QUEUE_DISABLED")}
    with pytest.raises(CatalogError, match="only event notifications ON QUEUE exist here"):
        broker.execute_ddl(
            "CREATE EVENT NOTIFICATION Notify_ALTER_T1\nON DATABASE\nFOR ALTER_TABLE\n"
            "TO SERVICE 'NotifyService',\n    '8140a771-3c4b-4479-8ac0-81008ab17984';"
        )
    with pytest.raises(CatalogError, match="only 'current database' exists here"):
        broker.execute_ddl(
            "CREATE EVENT NOTIFICATION n ON QUEUE Work FOR QUEUE_ACTIVATION "
            "TO SERVICE 'NotifyService', '8140a771-3c4b-4479-8ac0-81008ab17984'"
        )
    with pytest.raises(CatalogError, match="one event type per event notification"):
        broker.execute_ddl(
            "CREATE EVENT NOTIFICATION n ON QUEUE Work FOR QUEUE_ACTIVATION, "
            "BROKER_QUEUE_DISABLED TO SERVICE 'NotifyService', 'current database'"
        )
    # DROP EVENT NOTIFICATION (docs/t-sql/statements/drop-event-notification-transact-sql.md)
    with pytest.raises(CatalogError, match="'activate' is not on queue 'NotifyQueue'"):
        broker.execute_ddl("DROP EVENT NOTIFICATION activate ON QUEUE NotifyQueue")
    broker.execute_ddl("DROP EVENT NOTIFICATION activate, disabled ON QUEUE Work")
    assert broker.catalog.event_notifications == {}


# -- ALTER DATABASE --------------------------------------------------------------------


def test_alter_database_service_broker_options(broker: Broker) -> None:
    # ALTER DATABASE SET options (docs/t-sql/statements/alter-database-transact-sql-set-
    # options.md), <service_broker_option>: ENABLE_BROKER | DISABLE_BROKER | NEW_BROKER |
    # ERROR_BROKER_CONVERSATIONS | HONOR_BROKER_PRIORITY { ON | OFF }, with a termination clause
    assert (
        broker.execute_ddl(
            "ALTER DATABASE AdventureWorks2008R2 SET ENABLE_BROKER WITH ROLLBACK IMMEDIATE;\n"
            "ALTER DATABASE CURRENT SET ENABLE_BROKER, HONOR_BROKER_PRIORITY ON "
            "WITH ROLLBACK AFTER 10 SECONDS\nALTER DATABASE [x] SET ENABLE_BROKER WITH NO_WAIT"
        )
        == 3
    )
    assert broker.catalog.honor_broker_priority is True
    with pytest.raises(
        CatalogError, match=r"SET DISABLE_BROKER is not supported: .*this broker is always enabled"
    ):
        broker.execute_ddl("ALTER DATABASE db SET DISABLE_BROKER")
    # NEW_BROKER and ERROR_BROKER_CONVERSATIONS run (tests/test_database_options.py)
    guid = broker.service_broker_guid
    assert broker.execute_ddl("ALTER DATABASE db SET ERROR_BROKER_CONVERSATIONS") == 1
    assert broker.service_broker_guid == guid
    assert broker.execute_ddl("ALTER DATABASE db SET NEW_BROKER WITH ROLLBACK IMMEDIATE") == 1
    assert broker.service_broker_guid != guid
    with pytest.raises(CatalogError, match="SET TRUSTWORTHY is not a Service Broker option"):
        broker.execute_ddl("ALTER DATABASE db SET TRUSTWORTHY ON")
    with pytest.raises(CatalogError, match="DISABLE_BROKER is not supported"):
        broker.alter_database(enable_broker=False)
    broker.alter_database(enable_broker=True)
    assert broker.catalog.honor_broker_priority is True


# -- the forms every statement accepts -------------------------------------------------


def test_comments_go_use_names_and_strings(broker: Broker) -> None:
    # T-SQL's lexical forms (docs/t-sql/language-elements/transact-sql-syntax-conventions-
    # transact-sql.md): keywords in any case, [bracketed] and "quoted" identifiers with their
    # escapes, N'…' strings, -- and /* */ comments, ; optional, GO and USE lines
    ran = broker.execute_ddl(
        '''/* a script as SQL Server Management Studio writes one */
        USE [my db];
        GO
        -- a queue named like a keyword, and one with a closing bracket in its name
        cReAtE QuEuE [Status] /* inline */ WITH STATUS = ON -- trailing comment
        CREATE QUEUE [a]]b]
        CREATE QUEUE "say ""hi"""
        go
        CREATE QUEUE mydb..q4
        CREATE QUEUE mydb.dbo.q5;;
        CREATE SERVICE [s'1] ON QUEUE [Status] ([DEFAULT])
        CREATE BROKER PRIORITY p FOR CONVERSATION
            SET (REMOTE_SERVICE_NAME = N'it''s', CONTRACT_NAME = [DEFAULT], PRIORITY_LEVEL = 7)
        '''
    )
    assert ran == 7
    assert user_queues(broker) == {"Status", "a]b", 'say "hi"', "q4", "q5"}
    assert broker.catalog.priorities["p"].remote_service_name == "it's"
    assert "s'1" in broker.catalog.services
    assert broker.execute_ddl("") == 0
    assert broker.execute_ddl("-- nothing\nGO\n;\nUSE x") == 0


def test_parse_gives_statement_records() -> None:
    (use, queue) = parse_ddl("USE db\nCREATE QUEUE [dbo].q WITH RETENTION = ON")
    assert (use.statement, use.name) == ("USE", "db")
    assert (queue.statement, queue.name, queue.options, queue.line, queue.column) == (
        "CREATE QUEUE",
        "q",
        {"retention": True},
        2,
        1,
    )
    assert queue.text == "CREATE QUEUE [dbo].q WITH RETENTION = ON"


# -- errors ----------------------------------------------------------------------------


def test_statements_outside_service_broker_are_refused_with_their_place(broker: Broker) -> None:
    cases = {
        "CREATE DATABASE AdventureWorks2008R2": "line 1, column 1: not a Service Broker DDL "
        "statement: CREATE DATABASE",
        "CREATE QUEUE q\nCREATE TABLE t (a int)": "line 2, column 1: not a Service Broker DDL "
        "statement: CREATE TABLE",
        "  CREATE PROCEDURE p AS SELECT 1": "line 1, column 3: not a Service Broker DDL "
        "statement: CREATE PROCEDURE",
        "INSERT INTO t VALUES (1)": "line 1, column 1: not a Service Broker DDL statement: "
        "'INSERT INTO t VALUES",
        "CREATE QUEUE q;\n  SELECT * FROM q": "line 2, column 3: not a Service Broker DDL",
        "END CONVERSATION @h;": "Service Broker conversation statement",
        # CREATE REMOTE SERVICE BINDING runs now (tests/test_permissions.py); roles do not
        "CREATE ROLE r": "line 1, column 1: not a Service Broker DDL statement: CREATE ROLE",
    }
    for text, message in cases.items():
        with pytest.raises(CatalogError, match=message.replace("(", r"\(")):
            broker.execute_ddl(text)
    assert user_queues(broker) == set()  # none of these scripts ran anything


def test_syntax_errors_name_line_column_and_statement(broker: Broker) -> None:
    with pytest.raises(
        CatalogError,
        match=r"DDL syntax error at line 3, column 30 in 'CREATE QUEUE q WITH STATUS =': "
        r"unexpected input near 'MAYBE'; expected OFF, ON",
    ):
        broker.execute_ddl("CREATE QUEUE ok\nGO\nCREATE QUEUE q WITH STATUS = MAYBE")
    with pytest.raises(
        CatalogError, match=r"line 1, column 26 in 'CREATE SERVICE s ON QUEUE': unexpected end"
    ):
        broker.execute_ddl("CREATE SERVICE s ON QUEUE")
    with pytest.raises(CatalogError, match=r"line 2, column 21"):
        broker.execute_ddl("CREATE QUEUE q\n  WITH STATUS = ON  %")
    with pytest.raises(CatalogError, match="line 1, column 16: GO must stand alone on its line"):
        broker.execute_ddl("CREATE QUEUE q GO")
    with pytest.raises(CatalogError, match="DDL must be a string"):
        broker.execute_ddl(None)  # type: ignore[arg-type]
    assert user_queues(broker) == set()


def test_a_refused_statement_is_named_and_the_ones_before_it_stay(broker: Broker) -> None:
    with pytest.raises(
        CatalogError,
        match=r"CREATE SERVICE at line 3, column 1 \(CREATE SERVICE s ON QUEUE nowhere\) failed: "
        r"queue 'nowhere' does not exist \(2 statement\(s\) before it ran\)",
    ):
        broker.execute_ddl(
            "CREATE QUEUE q1\nCREATE QUEUE q2\nCREATE SERVICE s ON QUEUE nowhere\nCREATE QUEUE q3"
        )
    assert user_queues(broker) == {"q1", "q2"}


def test_execute_as_is_stored_by_the_python_api(broker: Broker) -> None:
    broker.create_queue("q", activation=Activation("m:f", execute_as="owner"))
    (row,) = queue_rows(broker)
    assert row.execute_as == "OWNER"
    broker.alter_queue("q", activation=Activation("m:f", execute_as="Someone"))
    assert broker.catalog.queue("q").execute_as == "Someone"
    with pytest.raises(CatalogError, match="EXECUTE AS must be"):
        Activation("m:f", execute_as="")


# -- any text --------------------------------------------------------------------------

_WORDS = [
    "CREATE",
    "ALTER",
    "DROP",
    "QUEUE",
    "SERVICE",
    "CONTRACT",
    "MESSAGE",
    "TYPE",
    "WITH",
    "STATUS",
    "=",
    "ON",
    "OFF",
    "(",
    ")",
    ",",
    ";",
    "ACTIVATION",
    "PROCEDURE_NAME",
    "'m:f'",
    "N'x'",
    "[a]]b]",
    '"q"',
    "dbo",
    ".",
    "GO",
    "\n",
    "USE",
    "EVENT",
    "NOTIFICATION",
    "FOR",
    "BROKER",
    "PRIORITY",
    "DATABASE",
    "SET",
    "--c\n",
    "/*",
    "*/",
    "x",
    "1",
    "-1",
    "\x00",
    "é",
]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.lists(st.sampled_from(_WORDS), max_size=30).map(" ".join),
    )
)
def test_any_text_parses_or_raises_a_catalog_error(text: str) -> None:
    try:
        statements = parse_ddl(text)
    except CatalogError as exc:
        assert "line" in str(exc)
    else:
        assert all(s.line >= 1 and s.column >= 1 for s in statements)
