"""Joins in T-SQL SELECTs over catalog views, DMVs, queues and table variables (issue 28: the
catalog views scripts read are "readable and joinable"), on a folder instance and on a
PostgreSQL one. Semantics from MicrosoftDocs/sql-docs docs/t-sql/queries/from-transact-sql.md
(INNER / LEFT / RIGHT / FULL [OUTER] / CROSS JOIN, a comma; LEFT: "all rows from the left table
not meeting the join condition are included in the result set, and output columns from the
other table are set to NULL"); example C of docs/t-sql/statements/
create-xml-schema-collection-transact-sql.md run unchanged; the errors' numbers and texts from
docs/relational-databases/errors-events/ (Msg 209, 4104, 207, 107, 1011, 1013).
"""

from __future__ import annotations

import pytest

from servicebroker import Instance, TSqlError

SETUP = """
CREATE QUEUE iq; CREATE QUEUE tq; CREATE QUEUE idle;
CREATE SERVICE [//I] ON QUEUE iq;
CREATE SERVICE [//T] ON QUEUE tq ([DEFAULT]);
GO
CREATE PROCEDURE Reader AS BEGIN RETURN END
GO
ALTER QUEUE tq WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = Reader, MAX_QUEUE_READERS = 1,
    EXECUTE AS SELF);
CREATE TABLE audit (n INT);
"""

DIALOGS = """
DECLARE @h UNIQUEIDENTIFIER;
BEGIN DIALOG @h FROM SERVICE [//I] TO SERVICE '//T' WITH ENCRYPTION = OFF;
SEND ON CONVERSATION @h (0x01);
BEGIN DIALOG @h FROM SERVICE [//I] TO SERVICE '//T' WITH ENCRYPTION = OFF;
SEND ON CONVERSATION @h (0x02);
BEGIN DIALOG @h FROM SERVICE [//I] TO SERVICE '//Nowhere' WITH ENCRYPTION = OFF;
SEND ON CONVERSATION @h (0x03);
"""


@pytest.fixture
def db(instance: Instance) -> Instance:
    instance.execute("CREATE DATABASE d")
    instance.execute(SETUP, database="d")
    return instance


def rows(instance: Instance, text: str) -> tuple[list[str], list[list[object]]]:
    result = instance.execute(text, database="d").result_sets[-1]
    return result.names, result.values


def error(instance: Instance, text: str) -> tuple[int, str]:
    with pytest.raises(TSqlError) as caught:
        instance.execute(text, database="d")
    return caught.value.number, caught.value.message


def test_example_c_of_create_xml_schema_collection_runs_unchanged(db: Instance) -> None:
    """create-xml-schema-collection-transact-sql.md, example C: the collections that hold a
    schema with no target namespace, by a join of the two views named in full."""
    db.execute(
        "CREATE XML SCHEMA COLLECTION MySampleCollection AS '\n"
        '<schema xmlns="http://www.w3.org/2001/XMLSchema"  xmlns:ns="http://ns">\n'
        '<element name="e" type="dateTime"/>\n'
        "</schema>';\n"
        "GO\n"
        "CREATE XML SCHEMA COLLECTION Named AS '\n"
        '<schema xmlns="http://www.w3.org/2001/XMLSchema" targetNamespace="http://ns">\n'
        '<element name="e" type="string"/>\n'
        "</schema>';",
        database="d",
    )
    assert rows(
        db,
        "-- Query will return the names of all the collections that \n"
        "--contain a schema with no target namespace.\n"
        "SELECT sys.xml_schema_collections.name \n"
        "FROM   sys.xml_schema_collections \n"
        "JOIN   sys.xml_schema_namespaces \n"
        "ON     sys.xml_schema_collections.xml_collection_id = \n"
        "       sys.xml_schema_namespaces.xml_collection_id \n"
        "WHERE  sys.xml_schema_namespaces.name='';",
    ) == (["name"], [["MySampleCollection"]])


def test_open_dialogs_per_service_and_state(db: Instance) -> None:
    """sys.conversation_endpoints joined to sys.services on service_id, grouped with
    COUNT(*): what a maintenance script lists before cleaning up."""
    db.execute(DIALOGS, database="d")
    assert rows(
        db,
        "SELECT s.name AS service, ce.state_desc, COUNT(*) AS dialogs\n"
        "FROM sys.conversation_endpoints AS ce\n"
        "INNER JOIN sys.services AS s ON s.service_id = ce.service_id\n"
        "WHERE ce.state IN ('CO', 'SO', 'SI')\n"
        "GROUP BY s.name, ce.state_desc\n"
        "ORDER BY dialogs DESC, s.name",
    ) == (
        ["service", "state_desc", "dialogs"],
        [["//I", "CONVERSING", 3], ["//T", "CONVERSING", 2]],
    )


def test_a_left_join_shows_nulls_for_queues_without_a_monitor(db: Instance) -> None:
    """sys.service_queues LEFT JOIN sys.dm_broker_queue_monitors ON object_id = queue_id: a
    row per queue, the monitor's columns NULL where activation is off; the same condition in
    WHERE instead of ON keeps only the matched rows (from-transact-sql.md)."""
    text = (
        "SELECT q.name, m.state, m.tasks_waiting\n"
        "FROM sys.service_queues q\n"
        "LEFT OUTER JOIN sys.dm_broker_queue_monitors m ON q.object_id = m.queue_id\n"
        "WHERE q.is_ms_shipped = 0\n"
        "ORDER BY q.name"
    )
    assert rows(db, text) == (
        ["name", "state", "tasks_waiting"],
        [["idle", None, None], ["iq", None, None], ["tq", "INACTIVE", 0]],
    )
    assert rows(
        db,
        "SELECT q.name FROM sys.service_queues q LEFT JOIN sys.dm_broker_queue_monitors m\n"
        "ON q.object_id = m.queue_id WHERE m.state IS NOT NULL",
    )[1] == [["tq"]]
    assert rows(
        db,
        "SELECT q.name, m.queue_name FROM sys.dm_broker_queue_monitors m\n"
        "RIGHT JOIN sys.service_queues q ON q.object_id = m.queue_id AND q.name = 'iq'\n"
        "WHERE q.name IN ('iq', 'tq') ORDER BY q.name",
    )[1] == [["iq", None], ["tq", None]]


def test_the_transmission_queue_joined_to_its_endpoints(db: Instance) -> None:
    """sys.transmission_queue joined to sys.conversation_endpoints on conversation_handle:
    which dialog a waiting message belongs to."""
    db.execute(DIALOGS, database="d")
    assert rows(
        db,
        "SELECT tq.to_service_name, ce.is_initiator, ce.far_service, s.name AS from_service\n"
        "FROM sys.transmission_queue tq\n"
        "JOIN sys.conversation_endpoints ce ON ce.conversation_handle = tq.conversation_handle\n"
        "JOIN sys.services s ON s.service_id = ce.service_id",
    ) == (
        ["to_service_name", "is_initiator", "far_service", "from_service"],
        [["//Nowhere", 1, "//Nowhere", "//I"]],
    )


def test_a_queue_joined_to_a_table_variable(db: Instance) -> None:
    """SELECT … FROM a queue JOIN @t: the queue's messages (nothing locked) with the table
    variable's rows; alias.* and * expand to the chosen source's columns, in FROM order."""
    db.execute(DIALOGS, database="d")
    names, values = rows(
        db,
        "DECLARE @labels TABLE (service_name NVARCHAR(256), label NVARCHAR(20));\n"
        "INSERT @labels VALUES (N'//T', N'target'), (N'//X', N'unused');\n"
        "SELECT l.label, q.message_body, l.*\n"
        "FROM tq AS q JOIN @labels AS l ON l.service_name = q.service_name\n"
        "ORDER BY q.message_body",
    )
    assert names == ["label", "message_body", "service_name", "label"]
    assert values == [["target", b"\x01", "//T", "target"], ["target", b"\x02", "//T", "target"]]
    names, values = rows(
        db,
        "DECLARE @t TABLE (n INT); INSERT @t VALUES (1), (2);\n"
        "SELECT * FROM @t a CROSS JOIN @t b, sys.services s WHERE s.name = '//T'"
        " ORDER BY a.n DESC, b.n",
    )
    assert names[:3] == ["n", "n", "name"]
    assert [v[:3] for v in values] == [[2, 1, "//T"], [2, 2, "//T"], [1, 1, "//T"], [1, 2, "//T"]]


def test_distinct_top_and_full_join(db: Instance) -> None:
    """DISTINCT, TOP and ORDER BY over a join as over one source; FULL JOIN keeps the
    unmatched rows of both sides (NULLs sort first)."""
    assert rows(
        db,
        "SELECT DISTINCT TOP (2) q.name FROM sys.services s\n"
        "JOIN sys.service_queues q ON q.object_id = s.service_queue_id ORDER BY q.name",
    )[1] == [["iq"], ["sys_event_notifications"]]
    assert rows(
        db,
        "SELECT s.name, q.name FROM sys.services s\n"
        "FULL OUTER JOIN sys.service_queues q ON q.object_id = s.service_queue_id\n"
        "AND q.name = 'tq' WHERE s.name LIKE '//%' OR q.name IS NOT NULL ORDER BY s.name, q.name",
    )[1] == [
        [None, "idle"],
        [None, "iq"],
        [None, "sys_event_notifications"],
        ["//I", None],
        ["//T", "tq"],
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "SELECT name FROM sys.services s JOIN sys.service_queues q"
            " ON s.service_queue_id = q.object_id",
            (209, "Ambiguous column name 'name'."),
        ),
        (
            "SELECT x.name FROM sys.services s JOIN sys.service_queues q"
            " ON s.service_queue_id = q.object_id",
            (4104, 'The multi-part identifier "x.name" could not be bound.'),
        ),
        (
            "SELECT sys.services.name FROM sys.services s JOIN sys.service_queues q"
            " ON s.service_queue_id = q.object_id",
            (4104, 'The multi-part identifier "sys.services.name" could not be bound.'),
        ),
        (
            "SELECT s.name FROM sys.services s JOIN sys.service_queues q"
            " ON s.service_queue_id = m.queue_id JOIN sys.dm_broker_queue_monitors m ON 1 = 1",
            (4104, 'The multi-part identifier "m.queue_id" could not be bound.'),
        ),
        (
            "SELECT s.nope FROM sys.services s CROSS JOIN sys.service_queues q",
            (207, "Invalid column name 'nope'."),
        ),
        (
            "SELECT z.* FROM sys.services s, sys.service_queues q",
            (
                107,
                "The column prefix 'z' does not match with a table name or alias name used in "
                "the query.",
            ),
        ),
        (
            "SELECT * FROM sys.services JOIN sys.services ON 1 = 1",
            (
                1013,
                'The objects "sys.services" and "sys.services" in the FROM clause have the same '
                "exposed names. Use correlation names to distinguish them.",
            ),
        ),
        (
            "SELECT * FROM sys.services s JOIN sys.service_queues s ON 1 = 1",
            (1011, "The correlation name 's' is specified multiple times in a FROM clause."),
        ),
        (
            "SELECT * FROM sys.services s JOIN nosuch n ON 1 = 1",
            (208, "Invalid object name 'nosuch'."),
        ),
    ],
)
def test_unbound_and_ambiguous_names_are_sql_servers_errors(
    db: Instance, text: str, expected: tuple[int, str]
) -> None:
    assert error(db, text) == expected


def test_a_join_with_an_application_table_is_refused_by_name(db: Instance) -> None:
    """A join of the application's tables with a view is refused, never run approximately;
    a join between the application's tables stays on the translated path."""
    number, message = error(db, "SELECT * FROM audit a JOIN sys.services s ON a.n = s.service_id")
    assert number == 40000
    assert message.startswith(
        "A join of the application's tables with catalog views, queues or table variables is "
        "not supported"
    )
    db.execute("INSERT audit VALUES (1), (2)", database="d")
    assert rows(db, "SELECT a.n, b.n FROM audit a JOIN audit b ON b.n = a.n + 1")[1] == [[1, 2]]


def test_a_correlated_subquery_and_an_assignment_over_a_join(db: Instance) -> None:
    """A subquery in WHERE reads the joined row's columns by alias; SELECT @v = … over a join
    assigns from the last row."""
    assert rows(
        db,
        "DECLARE @n INT;\n"
        "SELECT @n = COUNT(*) FROM sys.services s JOIN sys.service_queues q\n"
        "  ON q.object_id = s.service_queue_id;\n"
        "SELECT @n AS services,\n"
        "  (SELECT COUNT(*) FROM sys.services s JOIN sys.service_queues q\n"
        "   ON q.object_id = s.service_queue_id\n"
        "   WHERE EXISTS (SELECT 1 FROM sys.objects o WHERE o.object_id = q.object_id\n"
        "                 AND q.name LIKE '%q')) AS on_named_queues",
    ) == (["services", "on_named_queues"], [[3, 2]])
