"""XML in T-SQL as activation procedures use it (issue 28), on both backends: the xml type's
methods value(), query(), exist() and nodes() (MicrosoftDocs/sql-docs docs/t-sql/xml/
value-method-xml-data-type.md, query-method-xml-data-type.md, exist-method-xml-data-type.md,
nodes-method-xml-data-type.md), WITH XMLNAMESPACES (docs/t-sql/xml/with-xmlnamespaces.md) and
FOR XML RAW / PATH with ROOT, TYPE and ELEMENTS (docs/relational-databases/xml/
for-xml-sql-server.md, use-raw-mode-with-for-xml.md, use-path-mode-with-for-xml.md,
use-the-root-directive-with-for-xml.md, type-directive-in-for-xml-queries.md); the xml type's
values as SQL Server keeps them (docs/t-sql/xml/xml-transact-sql.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from servicebroker import Instance, TSqlError
from servicebroker.cli import main

DOC = (
    'DECLARE @x XML = N\'<order id="7" xmlns:p="urn:parts">'
    '<line n="1"><p:part>bolt</p:part><qty>3</qty></line>'
    '<line n="2"><p:part>nut &amp; washer</p:part><qty>10</qty></line></order>\';\n'
)


def rows(instance: Instance, text: str, database: str = "master") -> list[list[Any]]:
    """The rows of the last result set of ``text``."""
    return instance.execute(text, database=database).result_sets[-1].values


def failing(instance: Instance, text: str) -> TSqlError:
    with pytest.raises(TSqlError) as info:
        instance.execute(text)
    return info.value


def test_value_query_exist_on_a_variable(instance: Instance) -> None:
    """value() converts the singleton it finds to the SQL type (NULL when nothing is found),
    query() returns xml, exist() 1 / 0 (and 1 for true() or false(): "a nonempty result"),
    each NULL on a NULL xml (value-, query-, exist-method-xml-data-type.md)."""
    got = rows(
        instance,
        DOC + "DECLARE @none XML;\n"
        "SELECT @x.value('(/order/line/qty)[2]', 'int') AS qty,"
        " @x.value('/order[1]/@id', 'nvarchar(10)') AS id,"
        " @x.value('(/order/line/nope)[1]', 'int') AS missing,"
        " @x.value('count(/order/line)', 'int') AS lines,"
        " @x.query('/order/line[@n=\"1\"]/qty') AS q,"
        " @x.exist('/order/line[qty > 5]') AS big, @x.exist('/order/none') AS none,"
        " @x.exist('false()') AS f, @none.exist('/a') AS n, @none.value('(/a)[1]', 'int') AS nv",
    )
    assert got == [[10, "7", None, 2, "<qty>3</qty>", 1, 0, 1, None, None]]


def test_value_requires_a_singleton_and_converts_as_cast(instance: Instance) -> None:
    """value() without a singleton path is Msg 2389 when the batch compiles (nothing runs:
    "the static typing rules require you to explicitly specify that the path expression returns
    a singleton"); a value that does not convert is CAST's error."""
    error = failing(instance, DOC + "PRINT 'ran';\nSELECT @x.value('/order/line/qty', 'int')")
    assert (error.number, error.severity, error.line) == (2389, 16, 3)
    assert error.message == (
        "XQuery [value()]: 'value()' requires a singleton (or empty sequence), found operand of "
        "type 'xdt:untypedAtomic *'"
    )
    assert error.results.messages == []  # type: ignore[attr-defined]
    error = failing(instance, DOC + "SELECT @x.value('(//p:part)[1]', 'int')")
    assert error.number == 2229  # the prefix p is not declared in the XQuery
    error = failing(
        instance, DOC + "SELECT @x.value('declare namespace p=\"urn:parts\"; (//p:part)[1]', 'int')"
    )
    assert (error.number, error.message) == (
        245,
        "Conversion failed when converting the nvarchar value 'bolt' to data type int.",
    )


def test_nodes_with_cross_and_outer_apply(instance: Instance) -> None:
    """nodes() gives a row per node; its column is read with value() / query() / exist(),
    not directly (Msg 493); CROSS APPLY drops a row whose nodes() is empty, OUTER APPLY keeps
    it with NULL (nodes-method-xml-data-type.md)."""
    got = rows(
        instance,
        DOC + "WITH XMLNAMESPACES ('urn:parts' AS p)\n"
        "SELECT T.c.value('@n', 'int') AS n, T.c.value('(p:part)[1]', 'nvarchar(30)') AS part,"
        " T.c.value('(qty/text())[1]', 'int') * 2 AS twice\n"
        "FROM @x.nodes('/order/line') AS T(c) WHERE T.c.exist('qty[. > 4]') = 1",
    )
    assert got == [[2, "nut & washer", 20]]
    got = rows(
        instance,
        "DECLARE @x XML = '<a><b><c>1</c><c>2</c></b><b/></a>';\n"
        "SELECT B.b.query('.') AS b, C.c.value('.', 'int') AS c FROM @x.nodes('/a/b') B(b)"
        " OUTER APPLY B.b.nodes('c') C(c);"
        "SELECT COUNT(*) FROM @x.nodes('/a/b') B(b) CROSS APPLY B.b.nodes('c') C(c)",
    )
    assert got == [[2]]
    results = instance.execute(
        "DECLARE @x XML = '<a><b><c>1</c><c>2</c></b><b/></a>';\n"
        "SELECT C.c.value('.', 'int') AS c FROM @x.nodes('/a/b') B(b) OUTER APPLY B.b.nodes('c') C(c)"
    )
    assert results.result_sets[0].values == [[1], [2], [None]]
    error = failing(instance, DOC + "SELECT T.c FROM @x.nodes('/order/line') T(c)")
    assert error.number == 493


def test_methods_on_a_queue_s_message_bodies(instance: Instance) -> None:
    """An activation procedure's forms: CAST(message_body AS XML).value(…) in RECEIVE, and
    nodes() over the bodies of a queue's rows with CROSS APPLY, under WITH XMLNAMESPACES and
    a prolog's default element namespace."""
    instance.execute(
        "CREATE MESSAGE TYPE Req VALIDATION = WELL_FORMED_XML; CREATE CONTRACT C (Req SENT BY INITIATOR);"
        " CREATE QUEUE Q; CREATE SERVICE S ON QUEUE Q (C);"
        " DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE S TO SERVICE 'S' ON CONTRACT C"
        " WITH ENCRYPTION = OFF;"
        " SEND ON CONVERSATION @h MESSAGE TYPE Req (N'<r xmlns=\"urn:r\"><id>1</id><id>2</id></r>');"
        " SEND ON CONVERSATION @h MESSAGE TYPE Req ('<r xmlns=\"urn:r\"><id>3</id></r>');"
    )
    got = rows(
        instance,
        "WITH XMLNAMESPACES (DEFAULT 'urn:r')\n"
        "SELECT q.message_sequence_number AS seq, T.c.value('.', 'int') AS id FROM Q AS q"
        " CROSS APPLY CAST(message_body AS XML).nodes('/r/id') AS T(c) ORDER BY id DESC",
    )
    assert got == [[1, 3], [0, 2], [0, 1]]
    got = rows(
        instance,
        "DECLARE @id INT;\n"
        "RECEIVE TOP (1) @id = CAST(message_body AS XML).value("
        "'declare default element namespace \"urn:r\"; (/r/id)[last()]', 'int') FROM Q;\n"
        "SELECT @id, @@ROWCOUNT",
    )
    assert got == [[2, 1]]


def test_sql_variable_and_sql_column(instance: Instance) -> None:
    """sql:variable("@v") and sql:column("c") bring SQL values into the XQuery
    (xquery-extension-functions-sql-variable.md, …-sql-column.md; value-method-xml-data-type.md
    D)."""
    got = rows(
        instance,
        DOC + "DECLARE @n INT = 2;\n"
        "SELECT @x.value('(/order/line[@n = sql:variable(\"@n\")]/qty)[1]', 'int') AS v,"
        " @x.exist('/order/line[@n = sql:column(\"database_id\")]') AS e"
        " FROM sys.databases WHERE name = 'master'",
    )
    assert got == [[10, 1]]


def test_xquery_beyond_xpath_is_refused_by_name(instance: Instance) -> None:
    """FLWOR, constructors and the other constructs XPath 1.0 cannot express are refused when
    the batch compiles, naming the construct (docs/tsql.md); modify() (XML DML) too."""
    for xquery, named in [
        ("for $l in /order/line return $l/qty", "'for' expression"),
        ("<total>{count(/order/line)}</total>", "constructors"),
        ("/order/line/qty, /order/@id", "sequences"),
        ("xs:int((/order/@id)[1])", "xs:int()"),
    ]:
        error = failing(instance, DOC + f"PRINT 'ran'; SELECT @x.query('{xquery}')")
        assert error.number == 40000 and named in error.message, error.message
        assert error.results.messages == []  # type: ignore[attr-defined]
    error = failing(instance, DOC + "SET @x.modify('delete /order/line[1]')")
    assert error.number in (40000, 102)


def test_xml_values_are_kept_as_sql_server_keeps_them(instance: Instance) -> None:
    """CAST to xml drops the declaration and white space between elements and writes empty
    elements as <a />, attributes in double quotes (xml-transact-sql.md); bad XML is Msg 9400;
    a method on a type other than xml is Msg 258."""
    got = rows(
        instance,
        "SELECT CAST('<?xml version=\"1.0\"?>\n<a  x=''1''>\n  <b></b> <c>t &amp; u</c>\n</a>' AS XML)",
    )
    assert got == [['<a x="1"><b /><c>t &amp; u</c></a>']]
    assert failing(instance, "SELECT CAST('<a><b></a>' AS XML)").number == 9400
    error = failing(instance, "DECLARE @s NVARCHAR(50) = '<a/>'; SELECT @s.value('(/a)[1]', 'int')")
    assert (error.number, error.message) == (258, "Cannot call methods on nvarchar(50).")


def test_for_xml_raw(instance: Instance) -> None:
    """RAW: an element per row, columns as attributes (ELEMENTS: child elements), NULL columns
    left out, one nvarchar column named XML_F52E2B61-… without TYPE (use-raw-mode-with-for-
    xml.md); ROOT wraps the rows; TYPE gives xml."""
    results = instance.execute(
        "SELECT name AS n, database_id AS id, NULL AS gone FROM sys.databases"
        " WHERE name = 'master' FOR XML RAW"
    )
    (result,) = results.result_sets
    assert result.names == ["XML_F52E2B61-18A1-11d1-B105-00805F49916B"]
    assert result.values == [['<row n="master" id="1"/>']]
    got = rows(
        instance,
        "SELECT 1 AS a, 'x<y' AS [b c] FOR XML RAW('item'), ELEMENTS, ROOT('items'), TYPE",
    )
    assert got == [["<items><item><a>1</a><b_x0020_c>x&lt;y</b_x0020_c></item></items>"]]


def test_for_xml_path(instance: Instance) -> None:
    """PATH: @name an attribute, a/b nested elements shared by adjacent columns, text() and
    unnamed columns inline, xml values unescaped, PATH('') no row element, attribute after an
    element is Msg 6852 (use-path-mode-with-for-xml.md), WITH XMLNAMESPACES' declarations on
    the outer element (with-xmlnamespaces.md)."""
    got = rows(
        instance,
        "SELECT 7 AS '@id', 'Ann' AS 'who/first', 'Lee' AS 'who/last', CAST('<x/>' AS XML) AS 'raw',"
        " 'tail' AS 'text()' FOR XML PATH('person'), ROOT('people')",
    )
    assert got == [
        [
            '<people><person id="7"><who><first>Ann</first><last>Lee</last></who>'
            "<raw><x /></raw>tail</person></people>"
        ]
    ]
    got = rows(
        instance,
        "SELECT (SELECT ',' + name FROM sys.databases ORDER BY name FOR XML PATH('')) AS list,"
        " (SELECT name AS 'data()' FROM sys.databases ORDER BY name FOR XML PATH('')) AS spaced,"
        " (SELECT name FROM sys.databases WHERE 1 = 0 FOR XML PATH('')) AS empty",
    )
    assert got == [[",master", "master", None]]
    got = rows(
        instance,
        "WITH XMLNAMESPACES ('urn:p' AS p) SELECT 5 AS 'p:v' FOR XML PATH('p:row'), TYPE",
    )
    assert got == [['<p:row xmlns:p="urn:p"><p:v>5</p:v></p:row>']]
    error = failing(instance, "SELECT 1 AS a, 2 AS '@b' FOR XML PATH")
    assert error.number == 6852
    assert failing(instance, "SELECT 1 AS a FOR XML AUTO").number == 40000
    assert failing(instance, "SELECT 1 AS a FOR XML EXPLICIT").number == 40000


def test_for_xml_assigned_and_read_back(instance: Instance) -> None:
    """SET @x = (SELECT … FOR XML …, TYPE) and the (… TYPE).value('.', …) idiom."""
    got = rows(
        instance,
        "DECLARE @x XML = (SELECT name AS '@n' FROM sys.databases FOR XML PATH('db'), ROOT('dbs'), TYPE);\n"
        "SELECT @x AS x, @x.value('(/dbs/db/@n)[1]', 'sysname') AS first,"
        " (SELECT ';' + name FROM sys.databases FOR XML PATH(''), TYPE).value('.', 'nvarchar(max)') AS joined",
    )
    assert got == [['<dbs><db n="master" /></dbs>', "master", ";master"]]


def test_on_the_application_s_tables_for_xml_is_refused_and_xml_columns_read(
    instance: Instance,
) -> None:
    """FOR XML on the application's tables is refused by name (docs/tsql.md)."""
    instance.execute(
        "CREATE TABLE T (id INT PRIMARY KEY, name NVARCHAR(20)); INSERT INTO T VALUES (1, N'a')"
    )
    assert failing(instance, "SELECT id FROM T FOR XML RAW").number == 40000


def test_sqlcmd_prints_an_xml_column(instance_location: str, tmp_path: Path) -> None:
    """sqlcmd shows an xml column as SQL Server serializes it, 256 characters wide (sqlcmd's
    -y default for the large types, sqlcmd-utility.md)."""
    script = tmp_path / "x.sql"
    script.write_text(
        "SET NOCOUNT ON;\nSELECT CAST('<a>  <b/></a>' AS XML) AS doc;\n"
        "SELECT 1 AS a FOR XML RAW;\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        main, ["sqlcmd", "-S", instance_location, "-i", str(script)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "doc".ljust(256)
    assert lines[1] == "-" * 256
    assert lines[2] == "<a><b /></a>".ljust(256)
    assert lines[4] == "XML_F52E2B61-18A1-11d1-B105-00805F49916B".ljust(256)
    assert lines[6] == '<row a="1"/>'.ljust(256)
