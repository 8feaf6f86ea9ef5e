"""An instance's databases in T-SQL (create-database-transact-sql.md, drop-database-transact-sql.md,
use-transact-sql.md, alter-database-transact-sql-set-options.md): CREATE, DROP [IF EXISTS], USE,
ALTER DATABASE … SET with the Service Broker options, TRUSTWORTHY (recorded, shown in
sys.databases), the options with no effect here (accepted) and the rest (refused by name).
Each test runs on a folder instance and on a PostgreSQL one."""

from __future__ import annotations

import pytest

from servicebroker import Instance, TSqlError


def test_create_use_and_drop_a_database(instance: Instance) -> None:
    results = instance.execute(
        "CREATE DATABASE Shop;\nGO\nUSE Shop;\nSELECT DB_NAME() AS here, DB_ID('shop') AS id;\n"
        "USE master;\nDROP DATABASE Shop;\nDROP DATABASE IF EXISTS Shop;\n"
        "SELECT name FROM sys.databases;"
    )
    assert results.messages == [
        "Changed database context to 'Shop'.",
        "Changed database context to 'master'.",
    ]
    here, left = results.result_sets
    assert here.values == [["Shop", 2]]
    assert left.values == [["master"]]
    for text, number in (
        ("CREATE DATABASE master", 1801),
        ("DROP DATABASE Nowhere", 3701),
        ("USE Nowhere", 911),
    ):
        with pytest.raises(TSqlError) as caught:
            instance.execute(text)
        assert caught.value.number == number, text


def test_alter_database_options(instance: Instance) -> None:
    """The between-databases tutorial's ALTER DATABASE InitiatorDB SET TRUSTWORTHY ON, set-up
    scripts' RECOVERY and SINGLE_USER, and a Service Broker option beside them."""
    instance.execute(
        "CREATE DATABASE InitiatorDB;\n"
        "ALTER DATABASE InitiatorDB SET TRUSTWORTHY ON;\n"
        "ALTER DATABASE InitiatorDB SET RECOVERY SIMPLE, ENABLE_BROKER;\n"
        "ALTER DATABASE InitiatorDB SET SINGLE_USER WITH ROLLBACK IMMEDIATE;\n"
        "ALTER DATABASE InitiatorDB SET MULTI_USER;"
    )
    results = instance.execute(
        "SELECT name, is_trustworthy_on, is_broker_enabled FROM sys.databases ORDER BY name"
    )
    assert results.result_sets[0].values == [["InitiatorDB", 1, 1], ["master", 0, 1]]
    with pytest.raises(TSqlError) as caught:
        instance.execute("ALTER DATABASE InitiatorDB SET READ_ONLY")
    assert caught.value.number == 40000
    assert "ALTER DATABASE … SET READ_ONLY" in caught.value.message
