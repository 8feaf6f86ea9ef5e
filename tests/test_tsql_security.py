"""Security statements in T-SQL, on both backends: the database master key, CREATE CERTIFICATE …
WITH SUBJECT, EXECUTE AS / REVERT acting on SEND and RECEIVE permissions, a procedure's WITH
EXECUTE AS, ALTER AUTHORIZATION, GRANT / DENY / REVOKE of the permissions recorded, and
database roles (MicrosoftDocs/sql-docs docs/t-sql/statements/: create-master-key-transact-sql.md,
open-master-key-transact-sql.md, drop-master-key-transact-sql.md, create-certificate-transact-
sql.md, execute-as-transact-sql.md, revert-transact-sql.md, alter-authorization-transact-sql.md,
grant-transact-sql.md, create-role-transact-sql.md, alter-role-transact-sql.md; functions
user-name-transact-sql.md, original-login-transact-sql.md)."""

from __future__ import annotations

import pytest

from servicebroker import Instance, TSqlError
from servicebroker.tsql.results import Results

SETUP = """
CREATE DATABASE Shop
GO
USE Shop
CREATE QUEUE Q
CREATE SERVICE S ON QUEUE Q ([DEFAULT])
CREATE USER Clerk WITHOUT LOGIN
"""


def run(instance: Instance, text: str) -> Results:
    return instance.execute(text, database="Shop")


def values(instance: Instance, text: str, database: str = "Shop") -> list[list[object]]:
    return instance.execute(text, database=database).result_sets[-1].values


def error_of(instance: Instance, text: str, database: str = "Shop") -> TSqlError:
    with pytest.raises(TSqlError) as caught:
        instance.execute(text, database=database)
    return caught.value


def test_master_key_is_recorded_and_listed_and_guards_itself(instance: Instance) -> None:
    """The common guard: IF NOT EXISTS (… sys.symmetric_keys …) CREATE MASTER KEY."""
    instance.execute(SETUP)
    guard = """
        IF NOT EXISTS (SELECT * FROM sys.symmetric_keys
                       WHERE name = '##MS_DatabaseMasterKey##')
            CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'Pa55w.rd';
        SELECT name, algorithm_desc FROM sys.symmetric_keys
    """
    assert values(instance, guard) == [["##MS_DatabaseMasterKey##", "AES_256"]]
    assert values(instance, guard) == [["##MS_DatabaseMasterKey##", "AES_256"]]  # once
    assert values(instance, "SELECT COUNT(*) FROM sys.symmetric_keys", "master") == [[0]]
    again = error_of(instance, "CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'x'")
    assert again.number == 15578
    run(instance, "OPEN MASTER KEY DECRYPTION BY PASSWORD = 'Pa55w.rd'; CLOSE MASTER KEY")
    wrong = error_of(instance, "OPEN MASTER KEY DECRYPTION BY PASSWORD = 'nope'")
    assert (wrong.number, wrong.message) == (
        15313,
        "The key is not encrypted using the specified decryptor.",
    )
    run(instance, "ALTER MASTER KEY REGENERATE WITH ENCRYPTION BY PASSWORD = 'n3w'")
    assert error_of(instance, "OPEN MASTER KEY DECRYPTION BY PASSWORD = 'Pa55w.rd'").number == 15313
    run(instance, "OPEN MASTER KEY DECRYPTION BY PASSWORD = 'n3w'; DROP MASTER KEY")
    assert values(instance, "SELECT COUNT(*) FROM sys.symmetric_keys") == [[0]]
    assert error_of(instance, "DROP MASTER KEY").number == 15151


def test_certificate_with_subject_needs_the_master_key(
    instance: Instance, instance_location: str
) -> None:
    instance.execute(SETUP)
    make = "CREATE CERTIFICATE ShopCert WITH SUBJECT = 'Shop certificate', EXPIRY_DATE = '20991231'"
    if instance_location.startswith("postgresql"):
        refused = error_of(instance, make)
        assert refused.number == 40000 and "WITH SUBJECT" in refused.message
        return
    assert error_of(instance, make).number == 15581  # no master key yet
    run(instance, "CREATE MASTER KEY ENCRYPTION BY PASSWORD = 'Pa55w.rd'")
    run(instance, make)
    rows = values(instance, "SELECT name, subject, expiry_date FROM sys.certificates")
    assert [r[:2] for r in rows] == [["ShopCert", "CN=Shop certificate"]]
    assert str(rows[0][2]).startswith("2099-12-31")
    assert error_of(instance, make).number == 15232
    dropped = error_of(instance, "DROP MASTER KEY")
    assert dropped.number == 15580 and "ShopCert" in dropped.message
    # a certificate with its own password needs no master key
    run(
        instance,
        "CREATE CERTIFICATE Own AUTHORIZATION Clerk ENCRYPTION BY PASSWORD = 'x' "
        "WITH SUBJECT = 'own'",
    )
    owner = (
        "SELECT name FROM sys.database_principals WHERE principal_id = "
        "(SELECT principal_id FROM sys.certificates WHERE name = 'Own')"
    )
    assert values(instance, owner) == [["Clerk"]]


def test_execute_as_user_acts_on_send_and_receive_until_revert(instance: Instance) -> None:
    """EXECUTE AS USER switches the principal SEND and RECEIVE are checked against; REVERT
    comes back; USER_NAME() / SUSER_SNAME() / ORIGINAL_LOGIN() show it."""
    instance.execute(SETUP)
    script = """
        EXECUTE AS USER = 'Clerk';
        SELECT USER_NAME(), SUSER_SNAME(), ORIGINAL_LOGIN();
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE S TO SERVICE 'S' WITH ENCRYPTION = OFF;
        SEND ON CONVERSATION @h (0x01);
    """
    denied = error_of(instance, script)
    assert denied.number == 229
    assert "database 'Shop', schema 'dbo'" in str(denied)  # the session's database
    assert denied.results.result_sets[0].values == [["Clerk", "Clerk", "sa"]]
    run(instance, "GRANT SEND ON SERVICE::S TO Clerk")
    out = run(instance, script + " REVERT; RECEIVE * FROM Q")
    assert [len(s.values) for s in out.result_sets] == [1, 1]  # USER_NAME(), the message
    receive = error_of(instance, "EXECUTE AS USER = 'Clerk'; RECEIVE * FROM Q")
    assert receive.number == 229
    back = run(
        instance,
        "EXECUTE AS USER = 'Clerk'; REVERT; SELECT USER_NAME(); RECEIVE message_body FROM Q",
    )
    assert back.result_sets[0].values == [["dbo"]]
    assert back.result_sets[1].values == []  # received above, as dbo after REVERT


def test_the_niladic_user_functions_follow_execute_as(instance: Instance) -> None:
    """CURRENT_USER, SESSION_USER and USER are USER_NAME(), SYSTEM_USER is SUSER_SNAME()
    (current-user-transact-sql.md, session-user-…, user-…, system-user-transact-sql.md),
    written without parentheses."""
    instance.execute(SETUP)
    niladic = "SELECT CURRENT_USER, SESSION_USER, USER, SYSTEM_USER"
    assert values(instance, niladic) == [["dbo", "dbo", "dbo", "sa"]]
    assert values(instance, f"EXECUTE AS USER = 'Clerk'; {niladic}; REVERT") == [
        ["Clerk", "Clerk", "Clerk", "Clerk"]
    ]


def test_execute_as_errors_stack_and_cookie(instance: Instance) -> None:
    instance.execute(SETUP + "\nCREATE USER Boss WITHOUT LOGIN")
    assert error_of(instance, "EXECUTE AS USER = 'Nobody'").number == 15517
    assert error_of(instance, "EXECUTE AS LOGIN = 'Nobody'").number == 15406
    stack = """
        EXECUTE AS USER = 'Clerk'; EXECUTE AS USER = 'Boss';
        SELECT USER_NAME(); REVERT; SELECT USER_NAME(); REVERT; SELECT USER_NAME(); REVERT;
        EXECUTE AS LOGIN = 'sa'; SELECT USER_NAME(), SUSER_SNAME(); EXECUTE AS CALLER;
    """
    sets = run(instance, stack).result_sets
    assert [s.values for s in sets] == [[["Boss"]], [["Clerk"]], [["dbo"]], [["dbo", "sa"]]]
    cookie = """
        DECLARE @c VARBINARY(100);
        EXECUTE AS USER = 'Clerk' WITH COOKIE INTO @c;
        SELECT DATALENGTH(@c);
        REVERT WITH COOKIE = @c;
        SELECT USER_NAME();
    """
    assert [s.values for s in run(instance, cookie).result_sets] == [
        [[20]],
        [["dbo"]],
    ]
    stuck = "EXECUTE AS USER = 'Clerk' WITH NO REVERT; REVERT"
    assert error_of(instance, stuck).number == 15196
    in_tran = error_of(instance, "BEGIN TRAN; EXECUTE AS USER = 'Clerk'")
    assert in_tran.number == 40000


def test_procedure_with_execute_as_runs_as_its_user_and_ends_with_it(instance: Instance) -> None:
    instance.execute(SETUP)
    run(instance, "CREATE PROCEDURE AsClerk WITH EXECUTE AS 'Clerk' AS SELECT USER_NAME()")
    run(
        instance,
        "CREATE PROCEDURE AsOwner WITH EXECUTE AS OWNER AS "
        "EXECUTE AS USER = 'Clerk'; SELECT USER_NAME()",
    )
    sets = run(
        instance, "EXEC AsClerk; SELECT USER_NAME(); EXEC AsOwner; SELECT USER_NAME()"
    ).result_sets
    assert [s.values for s in sets] == [[["Clerk"]], [["dbo"]], [["Clerk"]], [["dbo"]]]


def test_roles_members_and_db_owner(instance: Instance) -> None:
    instance.execute(SETUP)
    run(
        instance,
        "CREATE ROLE Clerks; ALTER ROLE Clerks ADD MEMBER Clerk; "
        "EXEC sp_addrolemember 'db_owner', 'Clerk'",
    )
    members = values(
        instance,
        "SELECT role_name, member_name FROM sys.database_role_members ORDER BY role_name, "
        "member_name",
    )
    assert members == [["Clerks", "Clerk"], ["db_owner", "Clerk"], ["db_owner", "dbo"]]
    assert error_of(instance, "CREATE ROLE Clerks").number == 15023
    assert error_of(instance, "ALTER ROLE Nope ADD MEMBER Clerk").number == 15151
    assert error_of(instance, "ALTER ROLE Clerks ADD MEMBER Nobody").number == 15151
    assert error_of(instance, "DROP ROLE Clerks").number == 15144
    # a member of db_owner acts as dbo: RECEIVE needs no grant
    out = run(instance, "EXECUTE AS USER = 'Clerk'; RECEIVE * FROM Q")
    assert out.result_sets[0].values == []
    run(
        instance,
        "ALTER ROLE Clerks DROP MEMBER Clerk; DROP ROLE Clerks; DROP ROLE IF EXISTS Clerks",
    )
    assert len(values(instance, "SELECT * FROM sys.database_role_members")) == 2


def test_alter_authorization_and_recorded_grants_check_their_names(instance: Instance) -> None:
    instance.execute(SETUP)
    run(
        instance,
        "ALTER AUTHORIZATION ON SERVICE::S TO Clerk; ALTER AUTHORIZATION ON OBJECT::Q TO "
        "SCHEMA OWNER; ALTER AUTHORIZATION ON DATABASE::Shop TO sa; "
        "GRANT EXECUTE ON dbo.AnyProc TO Clerk; GRANT VIEW DEFINITION ON SERVICE::S TO public; "
        "GRANT CONNECT TO Clerk; DENY CONTROL ON CONTRACT::[DEFAULT] TO Clerk; "
        "REVOKE EXECUTE ON dbo.AnyProc FROM Clerk",
    )
    missing = error_of(instance, "ALTER AUTHORIZATION ON SERVICE::Nope TO Clerk")
    assert (missing.number, missing.message) == (
        15151,
        "Cannot find the service 'Nope', because it does not exist or you do not have permission.",
    )
    assert error_of(instance, "GRANT EXECUTE ON dbo.p TO Nobody").number == 15151
    # CONTROL on the service is recorded: SEND is still what the broker checks
    instance.execute("GRANT CONTROL ON SERVICE::S TO Clerk", database="Shop")
    send = """EXECUTE AS USER = 'Clerk'; DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE S TO SERVICE 'S' WITH ENCRYPTION = OFF;
        SEND ON CONVERSATION @h (0x01)"""
    assert error_of(instance, send).number == 229
