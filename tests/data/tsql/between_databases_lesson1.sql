-- Microsoft's tutorial "Completing a Conversation Between Databases", Lesson 1: Creating the
-- Databases (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-1-creating-the-databases.md,
-- commit 337946ad1b9c7a7b86236af19d48b9bdad40bb16), section "Create the databases and set the
-- trustworthy option": the page's code block, verbatim.
    USE master;
    GO

    IF EXISTS (SELECT * FROM sys.databases
               WHERE name = N'TargetDB')
         DROP DATABASE TargetDB;
    GO
    CREATE DATABASE TargetDB;
    GO

    IF EXISTS (SELECT * FROM sys.databases
               WHERE name = N'InitiatorDB')
         DROP DATABASE InitiatorDB;
    GO
    CREATE DATABASE InitiatorDB;
    GO
    ALTER DATABASE InitiatorDB SET TRUSTWORTHY ON;
    GO
