"""System procedures in T-SQL, on both backends: sp_configure and RECONFIGURE with
sys.configurations, sp_helptext, the role procedures, and the refusal of the others
(MicrosoftDocs/sql-docs docs/relational-databases/system-stored-procedures/
sp-configure-transact-sql.md, sp-helptext-transact-sql.md, sp-addrolemember-transact-sql.md;
docs/t-sql/language-elements/reconfigure-transact-sql.md;
docs/relational-databases/system-catalog-views/sys-configurations-transact-sql.md)."""

from __future__ import annotations

import pytest

from servicebroker import Instance, TSqlError


def error_of(instance: Instance, text: str, database: str = "master") -> TSqlError:
    with pytest.raises(TSqlError) as caught:
        instance.execute(text, database=database)
    return caught.value


CONFIGURATION = "SELECT value, value_in_use FROM sys.configurations WHERE name = '{}'"


def test_sp_configure_sets_reconfigure_installs_and_advanced_options_hide(
    instance: Instance,
) -> None:
    """The script every CLR or xp_cmdshell set-up starts with; values live in master and show
    in sys.configurations from any database."""
    hidden = error_of(instance, "EXEC sp_configure 'xp_cmdshell', 1")
    assert (hidden.number, hidden.message) == (
        15123,
        "The configuration option 'xp_cmdshell' does not exist, or it may be an advanced option.",
    )
    out = instance.execute(
        "sp_configure 'show advanced options', 1;\nRECONFIGURE;\n"
        "EXEC sp_configure 'clr enabled', 1;\nEXEC sp_configure 'xp_cmdshell', 1;\n"
        "RECONFIGURE WITH OVERRIDE;"
    )
    assert out.messages == [
        "Configuration option 'show advanced options' changed from 0 to 1. Run the "
        "RECONFIGURE statement to install.",
        "Configuration option 'clr enabled' changed from 0 to 1. Run the RECONFIGURE "
        "statement to install.",
        "Configuration option 'xp_cmdshell' changed from 0 to 1. Run the RECONFIGURE "
        "statement to install.",
    ]
    instance.execute("CREATE DATABASE Other")
    shown = instance.execute(CONFIGURATION.format("clr enabled"), database="Other")
    assert shown.result_sets[0].values == [[1, 1]]
    # set but not installed: config_value moves, run_value waits for RECONFIGURE
    instance.execute("EXEC sp_configure 'clr enabled', 0")
    one = instance.execute("EXEC sp_configure 'clr enabled'").result_sets[0]
    assert one.names == ["name", "minimum", "maximum", "config_value", "run_value"]
    assert one.values == [["clr enabled", 0, 1, 0, 1]]
    listing = instance.execute("EXEC sp_configure").result_sets[0].values
    assert ["xp_cmdshell", 0, 1, 1, 1] in listing
    assert [row[0] for row in listing] == sorted((row[0] for row in listing), key=str.casefold)
    bad = error_of(instance, "EXEC sp_configure 'show advanced options', 2")
    assert (bad.number, bad.message) == (
        15129,
        "'2' is not a valid value for configuration option 'show advanced options'.",
    )
    assert error_of(instance, "EXEC sp_configure 'no such thing', 1").number == 15123


def test_sp_helptext_returns_the_procedure_text(instance: Instance) -> None:
    instance.execute("CREATE DATABASE Shop")
    source = "CREATE PROCEDURE Hello\nAS\n    SELECT 'hello';\n"
    instance.execute(source, database="Shop")
    text = instance.execute("EXEC sp_helptext 'dbo.Hello'", database="Shop").result_sets[0]
    assert text.names == ["Text"]
    assert "".join(str(row[0]) for row in text.values).strip() == source.strip()
    instance.execute("CREATE QUEUE Q", database="Shop")
    queue = error_of(instance, "EXEC sp_helptext Q", "Shop")
    assert (queue.number, queue.message) == (15197, "There is no text for object 'Q'.")
    missing = error_of(instance, "EXEC sp_helptext 'Nope'", "Shop")
    assert (missing.number, missing.message) == (
        15009,
        "The object 'Nope' does not exist in database 'Shop' or is invalid for this operation.",
    )


def test_role_procedures_and_unknown_or_refused_procedures(instance: Instance) -> None:
    instance.execute("CREATE DATABASE Shop")
    instance.execute(
        "CREATE USER Clerk WITHOUT LOGIN; EXEC sp_addrole 'Clerks'; "
        "EXEC sp_addrolemember 'Clerks', 'Clerk'",
        database="Shop",
    )
    members = "SELECT member_name FROM sys.database_role_members WHERE role_name = 'Clerks'"
    assert instance.execute(members, database="Shop").result_sets[0].values == [["Clerk"]]
    instance.execute(
        "EXEC sp_droprolemember 'Clerks', 'Clerk'; EXEC sp_droprole 'Clerks'", database="Shop"
    )
    assert instance.execute(members, database="Shop").result_sets[0].values == []
    assert error_of(instance, "EXEC sp_addrolemember 'Clerks'", "Shop").number == 201
    unknown = error_of(instance, "EXEC sp_nosuchthing")
    assert (unknown.number, unknown.message) == (
        2812,
        "Could not find stored procedure 'sp_nosuchthing'.",
    )
    refused = error_of(instance, "EXEC sp_who; PRINT 'not reached'")
    assert refused.number == 40000 and "sp_who" in refused.message
    assert refused.results.messages == []
    assert error_of(instance, "EXEC master..xp_cmdshell 'dir'").number == 40000
