-- servicebroker's main job in T-SQL (`servicebroker demo --engine tsql`): the airports' tables.
-- Run once in the airports' database, before airport_activation.sql:
--     sqlcmd -d Airports -i airport_tables.sql
-- The same script runs on SQL Server and on servicebroker (`servicebroker sqlcmd`).

-- One row per FlightProcessed reply, written in the same transaction as its RECEIVE.
CREATE TABLE dbo.airport_replies (
    flight_id INT NOT NULL,
    status VARCHAR(20) NOT NULL,
    conversation_group_id UNIQUEIDENTIFIER NOT NULL   -- the aircraft's conversation group
);
GO

-- One row per receiving transaction of the airports' activated procedures.
CREATE TABLE dbo.airport_batches (
    batch_id INT IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    queue_name NVARCHAR(128) NOT NULL,
    messages INT NOT NULL,
    committed_at DATETIME2 NOT NULL
);
GO
