-- servicebroker's main job in T-SQL (`servicebroker demo --engine tsql`): the carriers' tables.
-- Run once in the carriers' database, before carrier_activation.sql:
--     sqlcmd -d Carriers -i carrier_tables.sql
-- The same script runs on SQL Server and on servicebroker (`servicebroker sqlcmd`).

-- One row per settled flight, written in the same transaction as the RECEIVE that settled it.
-- receive_position is the carriers' receive order (the order the rows are written in): the
-- demo checks that disrupted flights (priority 9) are received ahead of routine ones (3).
CREATE TABLE dbo.flight_results (
    receive_position INT IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    flight_id INT NOT NULL,
    carrier VARCHAR(2) NOT NULL,
    origin VARCHAR(3) NOT NULL,
    status VARCHAR(20) NOT NULL,          -- arrived | cancelled | arrival_missing
    dep_delay FLOAT(53) NULL,             -- minutes
    arr_delay FLOAT(53) NULL,             -- minutes, for an arrived flight
    processed_at DATETIME2 NOT NULL,      -- the broker's clock (UTC) when it was settled
    priority INT NOT NULL                 -- the conversation's priority level (its contract's)
);
GO

-- A departed flight whose Arrived has not come yet: what the conversation timer (scheduled
-- arrival + 2 h) needs to settle it as arrival_missing.
CREATE TABLE dbo.carrier_pending (
    conversation_handle UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
    flight_id INT NOT NULL,
    carrier VARCHAR(2) NOT NULL,
    origin VARCHAR(3) NOT NULL,
    dep_delay FLOAT(53) NULL
);
GO

-- One row per receiving transaction of the carriers' activated procedures.
CREATE TABLE dbo.carrier_batches (
    batch_id INT IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    queue_name NVARCHAR(128) NOT NULL,
    messages INT NOT NULL,
    committed_at DATETIME2 NOT NULL
);
GO
