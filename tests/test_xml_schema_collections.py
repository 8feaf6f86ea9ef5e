"""XML schema collections and message types VALIDATION = VALID_XML WITH SCHEMA COLLECTION (issue
28), on both backends: MicrosoftDocs/sql-docs docs/t-sql/statements/
create-xml-schema-collection-transact-sql.md, alter-xml-schema-collection-transact-sql.md,
drop-xml-schema-collection-transact-sql.md, create-message-type-transact-sql.md (example B run
unchanged), alter-message-type-transact-sql.md, and the catalog views
docs/relational-databases/system-catalog-views/sys-xml-schema-collections-transact-sql.md,
sys-xml-schema-namespaces-transact-sql.md, sys-service-message-types-transact-sql.md. Bodies
are validated by libxml2's XSD 1.0 (lxml) at SEND and when a message arrives over the
transport; T-SQL gives SQL Server's error numbers (docs/tsql.md)."""

from __future__ import annotations

import re
import threading
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from servicebroker import Broker, CatalogError, Instance, MessageValidationError, TSqlError
from servicebroker.catalog.xml_schemas import XmlSchemaCollectionDef, compiled
from servicebroker.cli import main
from servicebroker.clock import ManualClock
from servicebroker.messages import validate_body
from servicebroker.transport.arrival import VALIDATION_REFUSED_CODE, Verdict, take_arrival

from .test_transport_arrival import PLAIN, arriving, header

EXPENSE_NS = "http://Adventure-Works.com/schemas/expenseReport"
SUBMIT = "//Adventure-Works.com/Expenses/SubmitExpense"

EXAMPLE_B = """\
CREATE XML SCHEMA COLLECTION ExpenseReportSchema AS
N'<?xml version="1.0" encoding="UTF-16" ?>
  <xsd:schema xmlns:xsd="http://www.w3.org/2001/XMLSchema"
     targetNamespace="http://Adventure-Works.com/schemas/expenseReport"
     xmlns:expense="http://Adventure-Works.com/schemas/expenseReport"
     elementFormDefault="qualified"
   >
    <xsd:complexType name="expenseReportType">
       <xsd:sequence>
         <xsd:element name="EmployeeName" type="xsd:string"/>
         <xsd:element name="EmployeeID" type="xsd:string"/>
         <xsd:element name="ItemDetail"
           type="expense:ItemDetailType" maxOccurs="unbounded"/>
      </xsd:sequence>
    </xsd:complexType>

    <xsd:complexType name="ItemDetailType">
      <xsd:sequence>
        <xsd:element name="Date" type="xsd:date"/>
        <xsd:element name="CostCenter" type="xsd:string"/>
        <xsd:element name="Total" type="xsd:decimal"/>
        <xsd:element name="Currency" type="xsd:string"/>
        <xsd:element name="Description" type="xsd:string"/>
      </xsd:sequence>
    </xsd:complexType>

    <xsd:element name="ExpenseReport" type="expense:expenseReportType"/>

  </xsd:schema>' ;

  CREATE MESSAGE TYPE
    [//Adventure-Works.com/Expenses/SubmitExpense]
    VALIDATION = VALID_XML WITH SCHEMA COLLECTION ExpenseReportSchema ;
"""
"""Example B of create-message-type-transact-sql.md, as the page gives it."""

SERVICES = """\
CREATE CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission]
    ([//Adventure-Works.com/Expenses/SubmitExpense] SENT BY INITIATOR);
CREATE QUEUE ExpenseQueue;
CREATE SERVICE [//Adventure-Works.com/Expenses] ON QUEUE ExpenseQueue
    ([//Adventure-Works.com/Expenses/ExpenseSubmission]);
CREATE QUEUE SubmitterQueue;
CREATE SERVICE [//Adventure-Works.com/Submitter] ON QUEUE SubmitterQueue;
"""

SEND = """\
DECLARE @h UNIQUEIDENTIFIER;
BEGIN DIALOG @h FROM SERVICE [//Adventure-Works.com/Submitter]
    TO SERVICE '//Adventure-Works.com/Expenses'
    ON CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission] WITH ENCRYPTION = OFF;
SEND ON CONVERSATION @h MESSAGE TYPE [//Adventure-Works.com/Expenses/SubmitExpense]
    (N'{body}');
"""


def report(total: str = "12.50") -> str:
    """An expense report for ExpenseReportSchema; its Total on line 4."""
    return (
        f'<ExpenseReport xmlns="{EXPENSE_NS}">\n'
        "  <EmployeeName>Terri Duffy</EmployeeName><EmployeeID>12</EmployeeID>\n"
        "  <ItemDetail><Date>2024-03-01</Date><CostCenter>HR</CostCenter>\n"
        f"    <Total>{total}</Total><Currency>USD</Currency><Description>Taxi</Description>\n"
        "  </ItemDetail>\n</ExpenseReport>"
    )


WARRANTY_NS = (
    "https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelWarrAndMain"
)
DESCRIPTION_NS = (
    "https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelDescription"
)
PRODUCT_DESCRIPTIONS = """\
CREATE XML SCHEMA COLLECTION ProductDescriptionSchemaCollection AS
'<xsd:schema targetNamespace="https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelWarrAndMain"
    xmlns="https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelWarrAndMain"
    elementFormDefault="qualified"
    xmlns:xsd="http://www.w3.org/2001/XMLSchema" >
    <xsd:element name="Warranty"  >
        <xsd:complexType>
            <xsd:sequence>
                <xsd:element name="WarrantyPeriod" type="xsd:string"  />
                <xsd:element name="Description" type="xsd:string"  />
            </xsd:sequence>
        </xsd:complexType>
    </xsd:element>
</xsd:schema>
 <xs:schema targetNamespace="https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelDescription"
    xmlns="https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelDescription"
    elementFormDefault="qualified"
    xmlns:mstns="https://tempuri.org/XMLSchema.xsd"
    xmlns:xs="http://www.w3.org/2001/XMLSchema"
    xmlns:wm="https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelWarrAndMain" >
    <xs:import
namespace="https://schemas.microsoft.com/sqlserver/2004/07/adventure-works/ProductModelWarrAndMain" />
    <xs:element name="ProductDescription" type="ProductDescription" />
        <xs:complexType name="ProductDescription">
            <xs:sequence>
                <xs:element name="Summary" type="Summary" minOccurs="0" />
            </xs:sequence>
            <xs:attribute name="ProductModelID" type="xs:string" />
            <xs:attribute name="ProductModelName" type="xs:string" />
        </xs:complexType>
        <xs:complexType name="Summary" mixed="true" >
            <xs:sequence>
                <xs:any processContents="skip" namespace="http://www.w3.org/1999/xhtml" minOccurs="0" maxOccurs="unbounded" />
            </xs:sequence>
        </xs:complexType>
</xs:schema>'
;
"""
"""Example B of create-xml-schema-collection-transact-sql.md: two namespaces, the second
importing the first without a schemaLocation."""

XS = "http://www.w3.org/2001/XMLSchema"


def schema(body: str, namespace: str | None = None) -> str:
    """An <xsd:schema> with ``body``, of ``namespace`` (none when None)."""
    target = "" if namespace is None else f' targetNamespace="{namespace}" xmlns:t="{namespace}"'
    return f'<xsd:schema xmlns:xsd="{XS}"{target}>{body}</xsd:schema>'


def failing(instance: Instance, text: str, database: str = "master") -> TSqlError:
    with pytest.raises(TSqlError) as info:
        instance.execute(text, database=database)
    return info.value


def test_example_b_of_create_message_type_runs_unchanged_through_sqlcmd(
    instance_location: str, tmp_path: Path
) -> None:
    """CREATE MESSAGE TYPE's example B — an XML schema collection given as N'…' that begins
    with <?xml … encoding="UTF-16"?>, then a message type VALID_XML WITH SCHEMA COLLECTION in
    the same batch — runs through ``servicebroker sqlcmd`` as the page gives it."""
    script = tmp_path / "example_b.sql"
    script.write_text(
        EXAMPLE_B
        + "GO\nSET NOCOUNT ON;\nSELECT name, validation_desc FROM sys.service_message_types "
        "WHERE xml_collection_id IS NOT NULL;\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        main, ["sqlcmd", "-S", instance_location, "-b", "-i", str(script)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert SUBMIT in result.output and "XML" in result.output
    assert "Msg " not in result.output


def test_a_valid_report_is_sent_and_received_an_invalid_one_refused_at_send(
    instance: Instance,
) -> None:
    """A body valid against the collection is sent and received (validation X, as SQL Server
    shows VALID_XML); one the schema refuses is refused at SEND with Msg 9615 ("failed XML
    validation") naming the message type, the collection and libxml2's first error with its
    line (send-transact-sql.md gives no number: docs/tsql.md)."""
    instance.execute("CREATE DATABASE shop")
    instance.execute(EXAMPLE_B + "GO\n" + SERVICES, database="shop")
    instance.execute(SEND.format(body=report()), database="shop")
    error = failing(instance, SEND.format(body=report("twelve")), database="shop")
    assert (error.number, error.severity, error.line) == (9615, 16, 5)
    assert error.message.startswith(f"A message of type '{SUBMIT}' failed XML validation")
    assert "XML schema collection 'ExpenseReportSchema': line 4: Element " in error.message
    assert "'twelve' is not a valid value of the atomic type 'xs:decimal'" in error.message
    got = instance.execute(
        "RECEIVE message_type_name, validation, CAST(message_body AS XML).value("
        f"'declare namespace e=\"{EXPENSE_NS}\"; (/e:ExpenseReport/e:ItemDetail/e:Total)[1]',"
        " 'decimal(9,2)') AS total FROM ExpenseQueue",
        database="shop",
    )
    [[name, validation, total]] = got.result_sets[-1].values
    assert (name, validation, str(total)) == (SUBMIT, "X", "12.50")
    # an empty body: the page says nothing for VALID_XML; it holds no XML and passes, as for
    # WELL_FORMED_XML (docs/tsql.md)
    instance.execute(SEND.format(body=""), database="shop")


def test_the_python_api_validates_at_send(broker: Broker) -> None:
    """broker.create_xml_schema_collection / create_message_type(validation="VALID_XML",
    xml_schema_collection=…): a bad body is refused at SEND with MessageValidationError and
    never queued (DLG-3); a valid one, a UTF-16 one (as N'…' makes it) and an empty one go."""
    # rule DLG-3: a VALID_XML body the schema refuses is refused at SEND and never queued
    xsd = EXAMPLE_B.split("N'", 1)[1].split("' ;", 1)[0]
    broker.create_xml_schema_collection("ExpenseReportSchema", xsd)
    broker.create_message_type(
        SUBMIT, validation="VALID_XML", xml_schema_collection="ExpenseReportSchema"
    )
    broker.create_contract("C", {SUBMIT: "INITIATOR"})
    broker.create_queue("q")
    broker.create_service("s", queue="q", contracts=["C"])
    with broker.transaction() as tx:
        handle = tx.begin_dialog("s", "s", contract="C")
        tx.send(handle, SUBMIT, report())
        tx.send(handle, SUBMIT, report("1").encode("utf-16-le"))
        tx.send(handle, SUBMIT, b"")
        with pytest.raises(MessageValidationError) as info:
            tx.send(handle, SUBMIT, report("twelve"))
    assert "message type '//Adventure-Works.com/Expenses/SubmitExpense' requires XML valid " in (
        str(info.value)
    )
    assert "collection 'ExpenseReportSchema': line 4: Element '{" in str(info.value)
    with (
        pytest.raises(MessageValidationError, match="requires XML valid"),
        broker.transaction() as tx,
    ):
        tx.send(handle, SUBMIT, "<ExpenseReport/>")
    assert [m.validation for m in broker.peek("q")] == ["X", "X", "X"]


def test_the_multi_namespace_example_compiles_and_validates(instance: Instance) -> None:
    """CREATE XML SCHEMA COLLECTION's example B: two <xsd:schema> side by side, the second
    importing the first namespace with no schemaLocation (it refers to the collection's own);
    sys.xml_schema_namespaces lists both; then the page's DROP."""
    instance.execute(PRODUCT_DESCRIPTIONS)
    rows = instance.execute(
        "SELECT xml_collection_id, name, xml_namespace_id FROM sys.xml_schema_namespaces"
    ).result_sets[-1]
    [collection] = instance.database("master").views.xml_schema_collections()
    assert rows.values == [
        [collection.xml_collection_id, WARRANTY_NS, 1],
        [collection.xml_collection_id, DESCRIPTION_NS, 2],
    ]
    checked = instance.database("master").catalog.xml_schema_collection(
        "ProductDescriptionSchemaCollection"
    )
    good = (
        f'<ProductDescription xmlns="{DESCRIPTION_NS}" ProductModelID="19">'
        "<Summary><p xmlns='http://www.w3.org/1999/xhtml'>Light</p> and strong</Summary>"
        "</ProductDescription>"
    ).encode()
    assert checked.check(good) is None
    assert checked.check(f'<Warranty xmlns="{WARRANTY_NS}"/>'.encode()) == (
        f"line 1: Element '{{{WARRANTY_NS}}}Warranty': Missing child element(s). Expected is "
        f"( {{{WARRANTY_NS}}}WarrantyPeriod )."
    )
    instance.execute("DROP XML SCHEMA COLLECTION ProductDescriptionSchemaCollection;")
    assert instance.database("master").views.xml_schema_collections() == []


def test_alter_adds_components_a_message_then_validates_against(
    broker: Broker, clock: ManualClock
) -> None:
    """ALTER XML SCHEMA COLLECTION's example: an element added to the namespace the collection
    has; a message of a type using the collection validates against the added element from the
    next message on. A component that exists is refused (the page: components are added, never
    changed); the modify date moves."""
    broker.execute_ddl(
        """
        CREATE XML SCHEMA COLLECTION MyColl AS '
           <schema
            xmlns="http://www.w3.org/2001/XMLSchema"
            targetNamespace="http://MySchema/test_xml_schema">
              <element name="root" type="string"/>
          </schema>'
        """
    )
    broker.create_message_type("m", validation="VALID_XML", xml_schema_collection="MyColl")
    another = b'<anotherElement xmlns="http://MySchema/test_xml_schema">7</anotherElement>'
    with pytest.raises(MessageValidationError, match="No matching global declaration"):
        validate_body("VALID_XML", another, message_type_name="m", schema=_collection(broker))
    clock.advance(60)
    broker.execute_ddl(
        """
        ALTER XML SCHEMA COLLECTION MyColl ADD '
          <schema xmlns="http://www.w3.org/2001/XMLSchema"
                 targetNamespace="http://MySchema/test_xml_schema">
             <element name="anotherElement" type="byte"/>
         </schema>';
        """
    )
    validate_body("VALID_XML", another, message_type_name="m", schema=_collection(broker))
    with pytest.raises(MessageValidationError, match="'300' is not a valid value"):
        validate_body(
            "VALID_XML",
            another.replace(b">7<", b">300<"),
            message_type_name="m",
            schema=_collection(broker),
        )
    [row] = broker.views.xml_schema_collections()
    assert row.modify_date is not None and row.create_date is not None
    assert (row.modify_date - row.create_date).total_seconds() == 60
    assert [n.name for n in broker.views.xml_schema_namespaces()] == [
        "http://MySchema/test_xml_schema"
    ]
    with pytest.raises(CatalogError, match="the element 'root' of namespace 'http://MySchema"):
        broker.alter_xml_schema_collection(
            "MyColl",
            schema('<xsd:element name="root" type="xsd:int"/>', "http://MySchema/test_xml_schema"),
        )


def _collection(broker: Broker) -> XmlSchemaCollectionDef:
    collection = broker.catalog.message_type("m").xml_collection
    assert collection is not None
    return collection


def test_drop_in_use_is_refused_and_the_catalog_views_show_the_rows(instance: Instance) -> None:
    """DROP XML SCHEMA COLLECTION of a collection a message type uses is Msg 6328; the views
    show the collection (sys.xml_schema_collections: schema_id 1, no owner), its namespaces
    (blank for none: example C) and sys.service_message_types.xml_collection_id; ALTER MESSAGE
    TYPE away from VALID_XML frees the collection."""
    instance.execute(EXAMPLE_B)
    instance.execute(
        "CREATE XML SCHEMA COLLECTION MySampleCollection AS '\n"
        '<schema xmlns="http://www.w3.org/2001/XMLSchema"  xmlns:ns="http://ns">\n'
        '<element name="e" type="dateTime"/>\n'
        "</schema>';"
    )
    error = failing(instance, "DROP XML SCHEMA COLLECTION ExpenseReportSchema")
    assert (error.number, error.message) == (
        6328,
        "Specified collection 'ExpenseReportSchema' cannot be dropped because it is used by "
        f"message type '{SUBMIT}'.",
    )
    collections = instance.execute(
        "SELECT xml_collection_id, schema_id, principal_id, name FROM sys.xml_schema_collections"
    ).result_sets[-1]
    assert [r[1:] for r in collections.values] == [
        [1, None, "ExpenseReportSchema"],
        [1, None, "MySampleCollection"],
    ]
    expense_id, sample_id = (r[0] for r in collections.values)
    namespaces = instance.execute(
        "SELECT xml_collection_id FROM sys.xml_schema_namespaces WHERE name = ''"
    ).result_sets[-1]
    assert namespaces.values == [[sample_id]]  # example C: no targetNamespace, a blank name
    types = instance.execute(
        "SELECT name, validation, validation_desc, xml_collection_id "
        "FROM sys.service_message_types WHERE xml_collection_id IS NOT NULL"
    ).result_sets[-1]
    assert types.values == [[SUBMIT, "X", "XML", expense_id]]
    instance.execute(f"ALTER MESSAGE TYPE [{SUBMIT}] VALIDATION = WELL_FORMED_XML")
    [mt] = [
        m for m in instance.database("master").views.service_message_types() if m.name == SUBMIT
    ]
    assert (mt.validation, mt.xml_collection_id) == ("X", None)
    instance.execute(
        "DROP XML SCHEMA COLLECTION ExpenseReportSchema;\n"
        f"ALTER MESSAGE TYPE [{SUBMIT}] VALIDATION = VALID_XML WITH SCHEMA COLLECTION "
        "MySampleCollection"
    )
    [mt] = [
        m for m in instance.database("master").views.service_message_types() if m.name == SUBMIT
    ]
    assert mt.xml_collection_id == sample_id


def test_tsql_errors_have_sql_servers_numbers(instance: Instance) -> None:
    """Unknown collection: 6314 in CREATE / ALTER MESSAGE TYPE, 6347 in ALTER XML SCHEMA
    COLLECTION, 15151 in DROP; a taken name 6348; a component that exists 6310; schemas that
    are not XML 9400; nested too deep 6335; a variable that is NULL 6361 or not a string 6352.
    A schema libxml2 does not compile keeps the broker's text (Msg 50000), naming the
    collection, libxml2's error and its line (docs/tsql.md)."""
    instance.execute(EXAMPLE_B)
    cases = {
        "CREATE MESSAGE TYPE m VALIDATION = VALID_XML WITH SCHEMA COLLECTION nope": (
            6314,
            "Collection specified does not exist in metadata : 'nope'",
        ),
        "ALTER XML SCHEMA COLLECTION nope ADD N'<a/>'": (
            6347,
            "Specified collection 'nope' cannot be altered because it does not exist or you do "
            "not have permission.",
        ),
        "DROP XML SCHEMA COLLECTION dbo.nope": (
            15151,
            "Cannot drop the xml schema collection 'nope', because it does not exist or you do "
            "not have permission.",
        ),
        "CREATE XML SCHEMA COLLECTION ExpenseReportSchema AS N'<a/>'": (
            6348,
            "Specified collection 'ExpenseReportSchema' cannot be created because it already "
            "exists or you do not have permission.",
        ),
        "ALTER XML SCHEMA COLLECTION ExpenseReportSchema ADD N'"
        + schema('<xsd:element name="ExpenseReport" type="xsd:int"/>', EXPENSE_NS)
        + "'": (
            6310,
            "Altering existing schema components is not allowed. There was an attempt to modify "
            f"an existing XML Schema component, component namespace: '{EXPENSE_NS}' component "
            "name: 'ExpenseReport' component kind:element",
        ),
        "CREATE XML SCHEMA COLLECTION c AS N'\n<xsd:schema>'": (
            9400,
            "XML parsing: line 2, character 13, unexpected end of input",
        ),
        "CREATE XML SCHEMA COLLECTION c AS N'" + "<a>" * 200 + "</a>" * 200 + "'": (
            6335,
            "XML datatype instance has too many levels of nested nodes. Maximum allowed depth is "
            "128 levels.",
        ),
        "DECLARE @x NVARCHAR(MAX); CREATE XML SCHEMA COLLECTION c AS @x": (
            6361,
            "Invalid null parameter specified. XML Schema Collections can only be created from "
            "a non-null value.",
        ),
        "DECLARE @x INT = 1; ALTER XML SCHEMA COLLECTION ExpenseReportSchema ADD @x": (
            6352,
            "Invalid parameter specified. XML Schema Collections can only be created from a "
            "string literal, or from a variable typed as a string or untyped XML.",
        ),
    }
    for text, expected in cases.items():
        error = failing(instance, text)
        assert (error.number, error.message) == expected, text
    error = failing(
        instance,
        "CREATE XML SCHEMA COLLECTION c AS N'\n"
        + schema('\n<xsd:element name="r" type="nope"/>')
        + "'",
    )
    assert error.number == 50000
    assert (
        "XML schema collection 'c': the schemas do not compile: line 3: element decl. 'r', "
        "attribute 'type': The QName value 'nope' does not resolve to a(n) type definition."
    ) in error.message
    assert instance.database("master").views.xml_schema_collections()[-1].name == (
        "ExpenseReportSchema"
    )  # nothing of a refused statement is stored


def test_the_schemas_may_be_a_variable_in_a_batch_not_in_execute_ddl(
    instance: Instance, broker: Broker
) -> None:
    """create-xml-schema-collection-transact-sql.md: "Is a string constant or scalar
    variable. Is varchar, varbinary, nvarchar, or xml type" — AS @variable (nvarchar(max), and
    xml: "implicitly converted to a string") and ADD @variable run in a T-SQL batch;
    execute_ddl has no variables and says so."""
    a = schema('<xsd:element name="a" type="xsd:int"/>')
    b = schema('<xsd:element name="b" type="xsd:int"/>', "urn:b")
    c = schema('<xsd:element name="c"/>', "urn:c")
    instance.execute(
        "DECLARE @MySchemaCollection nvarchar(max)\n"
        f"Set @MySchemaCollection  = N'{a}'\n"
        "CREATE XML SCHEMA COLLECTION MyCollection AS @MySchemaCollection\n"
        f"DECLARE @more xml = N'{b}'\n"
        "ALTER XML SCHEMA COLLECTION MyCollection ADD @more\n"
        f"DECLARE @bytes varbinary(max) = CAST(N'{c}' AS varbinary(max))\n"
        "ALTER XML SCHEMA COLLECTION MyCollection ADD @bytes\n"
    )
    collection = instance.database("master").catalog.xml_schema_collection("MyCollection")
    assert collection.namespaces == ("", "urn:b", "urn:c")
    with pytest.raises(CatalogError, match=r"line 1, column 1: CREATE XML SCHEMA COLLECTION … @x"):
        broker.execute_ddl("CREATE XML SCHEMA COLLECTION c AS @x")
    assert broker.views.xml_schema_collections() == []


def test_a_message_arriving_over_the_transport_is_validated(broker: Broker) -> None:
    """The target validates what arrives from another instance against its own message type
    (create-message-type-transact-sql.md: "Service Broker validates incoming messages"): a body
    its schema refuses is answered with an Error (-9615) naming the collection, never queued;
    a valid one is delivered."""
    broker.create_xml_schema_collection(
        "Orders", schema('<xsd:element name="order" type="xsd:positiveInteger"/>', "urn:o")
    )
    broker.create_message_type(
        "//far/Order", validation="VALID_XML", xml_schema_collection="Orders"
    )
    broker.create_contract("//far/OrderContract", {"//far/Order": "INITIATOR"})
    broker.create_queue("tq")
    broker.create_service("//here/Target", queue="tq", contracts=["//far/OrderContract"])
    broker.grant("SEND", on="SERVICE:://here/Target", to="public")
    conversation = uuid.uuid4().bytes
    fields = {"contract": "//far/OrderContract", "message_type": "//far/Order", "validation": "X"}
    good = b'<order xmlns="urn:o">3</order>'
    with arriving(broker) as applier:
        arrived = take_arrival(applier, header(conversation, 0, **fields), good, PLAIN)
    assert arrived.verdict is Verdict.DELIVERED
    bad = b'<order xmlns="urn:o">-3</order>'
    with arriving(broker) as applier:
        refused = take_arrival(applier, header(conversation, 1, **fields), bad, PLAIN)
    assert refused.verdict is Verdict.ERROR and refused.error is not None
    code, text = refused.error
    assert code == VALIDATION_REFUSED_CODE
    assert "XML schema collection 'Orders': line 1: Element '{urn:o}order': '-3' is not" in text
    assert [m.message_body for m in broker.peek("tq")] == [good]


def test_bad_input_gets_our_errors(broker: Broker, tmp_path: Path) -> None:
    """What is not a collection's schemas is refused, naming the collection: not a string, not
    XML, not <xsd:schema>, text between schemas, what SQL Server refuses (<xsd:include>,
    <xsd:redefine>, identity constraints), nesting beyond 128 levels. A schemaLocation is
    never followed (no file, no network): the import of a namespace the collection lacks finds
    nothing. A body nested too deeply or expanding entities is refused before the schema sees
    it; a large valid body passes."""
    refused = {
        None: "the schemas are NULL",
        42: "the schemas must be a string",
        "": "holds no <xsd:schema> document",
        "not xml": "line 1: expected an XML schema document, found text 'not xml'",
        "<a b='1'": "XML parsing: line 1, character 9, unexpected end of input",
        "<a/>": "line 1: expected an XML schema document",
        schema("") + " stray": "found text 'stray'",
        schema('<xsd:include schemaLocation="x.xsd"/>'): "<xsd:include> is not supported",
        schema('<xsd:redefine schemaLocation="x.xsd"/>'): "<xsd:redefine> is not supported",
        schema(
            '<xsd:element name="e"><xsd:complexType/><xsd:unique name="u">'
            '<xsd:selector xpath="."/><xsd:field xpath="@a"/></xsd:unique></xsd:element>'
        ): "<xsd:unique> constraints are not supported",
        "<a>" * 129 + "</a>" * 129: "nest elements more than 128 levels deep",
        b"\xff\xfe\x00": "the schema bytes are not utf-16 text",
    }
    for given, message in refused.items():
        with pytest.raises(
            CatalogError, match=f"XML schema collection 'c': .*{re.escape(message)}"
        ):
            broker.create_xml_schema_collection("c", given)  # type: ignore[arg-type]
    elsewhere = tmp_path / "other.xsd"
    elsewhere.write_text(schema('<xsd:element name="e" type="xsd:int"/>', "urn:other"))
    with pytest.raises(CatalogError, match=r"'\{urn:other\}e' does not resolve"):
        broker.create_xml_schema_collection(
            "c",
            '<xsd:schema xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:o="urn:other">'
            f'<xsd:import namespace="urn:other" schemaLocation="{elsewhere.as_uri()}"/>'
            '<xsd:element name="r"><xsd:complexType><xsd:sequence><xsd:element ref="o:e"/>'
            "</xsd:sequence></xsd:complexType></xsd:element></xsd:schema>",
        )
    assert broker.views.xml_schema_collections() == []
    broker.create_xml_schema_collection(
        "c",
        schema(
            '<xsd:element name="list"><xsd:complexType><xsd:sequence>'
            '<xsd:element name="i" type="xsd:int" maxOccurs="unbounded"/>'
            "</xsd:sequence></xsd:complexType></xsd:element>"
        ),
    )
    collection = broker.catalog.xml_schema_collection("c")
    deep = b"<list>" + b"<i>" * 200 + b"</i>" * 200 + b"</list>"
    with pytest.raises(MessageValidationError, match="more than 128 levels deep"):
        validate_body("VALID_XML", deep, message_type_name="m", schema=collection)
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE list [<!ENTITY a "1234567890">'
        + b"".join(
            f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">'.encode() for i in range(8)
        )
        + b"]><list><i>&i;</i></list>"
    )
    with pytest.raises(MessageValidationError, match="requires"):
        validate_body("VALID_XML", laughs, message_type_name="m", schema=collection)
    large = b"<list>" + b"<i>7</i>" * 200_000 + b"</list>"
    validate_body("VALID_XML", large, message_type_name="m", schema=collection)
    with pytest.raises(MessageValidationError, match="line 1: Element 'i': 'x' is not a valid"):
        validate_body(
            "VALID_XML", large[:-7] + b"<i>x</i></list>", message_type_name="m", schema=collection
        )
    for validation, given in (("NONE", "c"), ("VALID_XML", None), ("VALID_XML", "nope")):
        with pytest.raises(CatalogError, match=r"VALID_XML|does not exist"):
            broker.create_message_type("m", validation=validation, xml_schema_collection=given)


def test_the_compiled_schema_is_built_once_per_collection_version(broker: Broker) -> None:
    """The compiled validator is cached by the collection's documents: the same object for
    every message and thread until ALTER … ADD gives the collection a new version; validating
    from several threads at once gives each its own answer."""
    broker.create_xml_schema_collection(
        "c", schema('<xsd:element name="n" type="xsd:byte"/>', "urn:n")
    )
    first = broker.catalog.xml_schema_collection("c")
    assert compiled(first.documents) is compiled(
        broker.catalog.xml_schema_collection("c").documents
    )
    broker.alter_xml_schema_collection("c", schema('<xsd:element name="m"/>', "urn:m"))
    second = broker.catalog.xml_schema_collection("c")
    assert compiled(second.documents) is not compiled(first.documents)
    failures: list[str] = []

    def check(value: int) -> None:
        for _ in range(50):
            problem = second.check(f'<n xmlns="urn:n">{value}</n>'.encode())
            if (problem is None) != (value < 128):
                failures.append(f"{value}: {problem}")

    threads = [threading.Thread(target=check, args=(v,)) for v in (1, 127, 128, 500)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
