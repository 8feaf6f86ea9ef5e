-- servicebroker's main job in T-SQL (`servicebroker demo --engine tsql`): the activated stored
-- procedure of one airport's queue, dbo.airport_$(Airport). Made once per airport from this
-- script with sqlcmd's scripting variable Airport (after airport_tables.sql):
--     sqlcmd -d Airports -v Airport=JFK -i airport_activation.sql
--     ALTER QUEUE dbo.airport_JFK WITH ACTIVATION (STATUS = ON,
--         PROCEDURE_NAME = dbo.airport_JFK_activation, MAX_QUEUE_READERS = 2, EXECUTE AS SELF);
-- The same script runs on SQL Server and on servicebroker (`servicebroker sqlcmd`).
--
-- The carriers reply FlightProcessed on each flight's dialog and end it. The procedure receives
-- up to @batch_size messages per transaction (an aircraft's replies come in its conversation
-- group, under one lock), records each reply in dbo.airport_replies in that transaction, and
-- ends the airport's side of a dialog when the carrier's EndDialog (or an Error) comes. It ends
-- when its queue has had nothing for 5 seconds; activation starts it again when messages come.
CREATE PROCEDURE dbo.airport_$(Airport)_activation
AS
SET NOCOUNT ON;
-- messages per receiving transaction: a transaction holds its rows' locks from its first
-- INSERT to its COMMIT (on servicebroker's SQLite storage, the database's one write lock), so
-- the transactions are kept short
DECLARE @batch_size INT = 20;
DECLARE @handle UNIQUEIDENTIFIER, @group UNIQUEIDENTIFIER, @type NVARCHAR(256);
DECLARE @body VARCHAR(MAX), @got INT, @received INT, @json VARCHAR(MAX), @at INT;
DECLARE @flight_id INT, @status VARCHAR(20);

WHILE 1 = 1
BEGIN
    BEGIN TRY
        BEGIN TRANSACTION;
        WAITFOR (
            RECEIVE TOP (1)
                @handle = conversation_handle,
                @group = conversation_group_id,
                @type = message_type_name,
                @body = CAST(message_body AS VARCHAR(MAX))
            FROM dbo.airport_$(Airport)
        ), TIMEOUT 5000;
        SET @got = @@ROWCOUNT;
        IF @got = 0
        BEGIN
            ROLLBACK TRANSACTION;             -- nothing for 5 seconds: this reader ends
            BREAK;
        END;
        SET @received = 0;

        WHILE @got = 1
        BEGIN
            SET @received += 1;
            IF @type = N'//flights/FlightProcessed'
            BEGIN
                -- {"flight_id":…,"status":"…"} (SQL Server 2016 and later: JSON_VALUE)
                SET @json = REPLACE(@body, '}', ',');
                SET @at = CHARINDEX('"flight_id":', @json) + 12;
                SET @flight_id = CAST(SUBSTRING(@json, @at, CHARINDEX(',', @json, @at) - @at) AS INT);
                SET @at = CHARINDEX('"status":"', @json) + 10;
                SET @status = SUBSTRING(@json, @at, CHARINDEX('"', @json, @at) - @at);
                INSERT INTO dbo.airport_replies (flight_id, status, conversation_group_id)
                VALUES (@flight_id, @status, @group);
            END
            ELSE IF @type IN (N'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog',
                              N'http://schemas.microsoft.com/SQL/ServiceBroker/Error')
                END CONVERSATION @handle;

            SET @got = 0;
            IF @received < @batch_size
            BEGIN
                RECEIVE TOP (1)
                    @handle = conversation_handle,
                    @group = conversation_group_id,
                    @type = message_type_name,
                    @body = CAST(message_body AS VARCHAR(MAX))
                FROM dbo.airport_$(Airport);
                SET @got = @@ROWCOUNT;
            END;
        END;

        INSERT INTO dbo.airport_batches (queue_name, messages, committed_at)
        VALUES (N'airport_$(Airport)', @received, GETUTCDATE());
        COMMIT TRANSACTION;
    END TRY
    BEGIN CATCH
        IF XACT_STATE() <> 0
            ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO
