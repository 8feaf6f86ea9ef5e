-- servicebroker's main job in T-SQL (`servicebroker demo --engine tsql`): the activated stored
-- procedure of one carrier's queue, dbo.carrier_$(Carrier). Made once per carrier from this
-- script with sqlcmd's scripting variable Carrier (after carrier_tables.sql):
--     sqlcmd -d Carriers -v Carrier=UA -i carrier_activation.sql
--     ALTER QUEUE dbo.carrier_UA WITH ACTIVATION (STATUS = ON,
--         PROCEDURE_NAME = dbo.carrier_UA_activation, MAX_QUEUE_READERS = 1, EXECUTE AS SELF);
-- The same script runs on SQL Server and on servicebroker (`servicebroker sqlcmd`).
--
-- Each flight is one dialog from its origin airport's service: Scheduled, then Departed and
-- Arrived, or Cancelled (JSON bodies). The procedure receives up to @batch_size messages per
-- transaction and, in that transaction, settles each flight: one row in dbo.flight_results, a
-- FlightProcessed reply and END CONVERSATION. A departed flight whose Arrived has not come by
-- the end of the transaction is kept in dbo.carrier_pending with a conversation timer at its
-- scheduled arrival + 2 hours; if the timer's DialogTimer message comes first, the flight is
-- settled as arrival_missing. The procedure ends when its queue has had nothing for 5 seconds;
-- activation starts it again when messages come.
CREATE PROCEDURE dbo.carrier_$(Carrier)_activation
AS
SET NOCOUNT ON;
-- messages per receiving transaction: a transaction holds its rows' locks from its first
-- INSERT to its COMMIT (on servicebroker's SQLite storage, the database's one write lock), so
-- the transactions are kept short
DECLARE @batch_size INT = 20;
DECLARE @handle UNIQUEIDENTIFIER, @type NVARCHAR(256), @body VARCHAR(MAX), @priority INT;
DECLARE @got INT, @received INT, @json VARCHAR(MAX), @at INT, @timeout INT;
DECLARE @flight_id INT, @carrier VARCHAR(2), @origin VARCHAR(3), @status VARCHAR(20);
DECLARE @dep_delay FLOAT, @arr_delay FLOAT;
-- the departed flight received last, until its Arrived comes or the transaction ends
DECLARE @pending_handle UNIQUEIDENTIFIER, @pending_flight INT, @pending_carrier VARCHAR(2);
DECLARE @pending_origin VARCHAR(3), @pending_dep_delay FLOAT, @pending_due FLOAT;

WHILE 1 = 1
BEGIN
    BEGIN TRY
        BEGIN TRANSACTION;
        WAITFOR (
            RECEIVE TOP (1)
                @handle = conversation_handle,
                @type = message_type_name,
                @body = CAST(message_body AS VARCHAR(MAX)),
                @priority = priority
            FROM dbo.carrier_$(Carrier)
        ), TIMEOUT 5000;
        SET @got = @@ROWCOUNT;
        IF @got = 0
        BEGIN
            ROLLBACK TRANSACTION;             -- nothing for 5 seconds: this reader ends
            BREAK;
        END;
        SET @received = 0;
        SET @pending_handle = NULL;

        WHILE @got = 1 OR @pending_handle IS NOT NULL
        BEGIN
            -- the departed flight before this message has not arrived in this transaction:
            -- keep it for its timer, due at scheduled arrival + 2 h (epoch seconds, UTC)
            IF @pending_handle IS NOT NULL AND (@got = 0 OR @handle <> @pending_handle)
            BEGIN
                INSERT INTO dbo.carrier_pending
                    (conversation_handle, flight_id, carrier, origin, dep_delay)
                VALUES
                    (@pending_handle, @pending_flight, @pending_carrier, @pending_origin,
                     @pending_dep_delay);
                SET @timeout = CAST(@pending_due AS INT)
                    - DATEDIFF(SECOND, '19700101', GETUTCDATE());
                IF @timeout < 1
                    SET @timeout = 1;
                BEGIN CONVERSATION TIMER (@pending_handle) TIMEOUT = @timeout;
                SET @pending_handle = NULL;
            END;
            IF @got = 0
                BREAK;

            SET @received += 1;
            SET @status = NULL;
            -- the flights' fields come from JSON bodies, flat objects of numbers and strings
            -- (on SQL Server 2016 and later: JSON_VALUE(@body, '$.flight_id') and so on);
            -- a field left out (a null delay) reads as NULL
            IF @type = N'//flights/Scheduled'
                SET @status = NULL;           -- nothing to settle until it departs or not
            ELSE IF @type = N'//flights/Departed'
            BEGIN
                SET @json = REPLACE(@body, '}', ',');
                SET @at = CHARINDEX('"flight_id":', @json) + 12;
                SET @pending_flight = CAST(SUBSTRING(@json, @at, CHARINDEX(',', @json, @at) - @at) AS INT);
                SET @at = CHARINDEX('"carrier":"', @json) + 11;
                SET @pending_carrier = SUBSTRING(@json, @at, CHARINDEX('"', @json, @at) - @at);
                SET @at = CHARINDEX('"origin":"', @json) + 10;
                SET @pending_origin = SUBSTRING(@json, @at, CHARINDEX('"', @json, @at) - @at);
                SET @at = NULLIF(CHARINDEX('"dep_delay":', @json), 0) + 12;
                SET @pending_dep_delay = CAST(SUBSTRING(@json, @at, CHARINDEX(',', @json, @at) - @at) AS FLOAT);
                SET @at = CHARINDEX('"timer_due":', @json) + 12;
                SET @pending_due = CAST(SUBSTRING(@json, @at, CHARINDEX(',', @json, @at) - @at) AS FLOAT);
                SET @pending_handle = @handle;  -- settled by its Arrived, or kept for its timer
            END
            ELSE IF @type IN (N'//flights/Arrived', N'//flights/Cancelled')
            BEGIN
                SET @json = REPLACE(@body, '}', ',');
                SET @at = CHARINDEX('"flight_id":', @json) + 12;
                SET @flight_id = CAST(SUBSTRING(@json, @at, CHARINDEX(',', @json, @at) - @at) AS INT);
                SET @at = CHARINDEX('"carrier":"', @json) + 11;
                SET @carrier = SUBSTRING(@json, @at, CHARINDEX('"', @json, @at) - @at);
                SET @at = CHARINDEX('"origin":"', @json) + 10;
                SET @origin = SUBSTRING(@json, @at, CHARINDEX('"', @json, @at) - @at);
                SET @at = NULLIF(CHARINDEX('"dep_delay":', @json), 0) + 12;
                SET @dep_delay = CAST(SUBSTRING(@json, @at, CHARINDEX(',', @json, @at) - @at) AS FLOAT);
                SET @at = NULLIF(CHARINDEX('"arr_delay":', @json), 0) + 12;
                SET @arr_delay = CAST(SUBSTRING(@json, @at, CHARINDEX(',', @json, @at) - @at) AS FLOAT);
                IF @type = N'//flights/Cancelled'
                    SET @status = 'cancelled';    -- its body has no delays: both NULL
                ELSE
                BEGIN
                    SET @status = 'arrived';
                    IF @pending_handle = @handle
                        SET @pending_handle = NULL;
                    ELSE                      -- departed in an earlier transaction
                        DELETE FROM dbo.carrier_pending WHERE conversation_handle = @handle;
                END;
            END
            ELSE IF @type = N'http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer'
            BEGIN
                -- scheduled arrival + 2 h has passed without an Arrived
                SELECT @flight_id = flight_id, @carrier = carrier, @origin = origin,
                       @dep_delay = dep_delay
                FROM dbo.carrier_pending
                WHERE conversation_handle = @handle;
                IF @@ROWCOUNT = 1
                BEGIN
                    DELETE FROM dbo.carrier_pending WHERE conversation_handle = @handle;
                    SET @arr_delay = NULL;
                    SET @status = 'arrival_missing';
                END;
            END
            ELSE IF @type IN (N'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog',
                              N'http://schemas.microsoft.com/SQL/ServiceBroker/Error')
                END CONVERSATION @handle;

            IF @status IS NOT NULL
            BEGIN
                INSERT INTO dbo.flight_results
                    (flight_id, carrier, origin, status, dep_delay, arr_delay, processed_at,
                     priority)
                VALUES
                    (@flight_id, @carrier, @origin, @status, @dep_delay, @arr_delay,
                     GETUTCDATE(), @priority);
                SEND ON CONVERSATION @handle
                    MESSAGE TYPE [//flights/FlightProcessed]
                    ('{"flight_id":' + CAST(@flight_id AS VARCHAR(11))
                     + ',"status":"' + @status + '"}');
                END CONVERSATION @handle;
            END;

            -- a departed flight's Arrived is most likely the next message: take it in this
            -- transaction rather than keep the flight for a timer
            SET @got = 0;
            IF @received < @batch_size
               OR (@pending_handle IS NOT NULL AND @received < 2 * @batch_size)
            BEGIN
                RECEIVE TOP (1)
                    @handle = conversation_handle,
                    @type = message_type_name,
                    @body = CAST(message_body AS VARCHAR(MAX)),
                    @priority = priority
                FROM dbo.carrier_$(Carrier);
                SET @got = @@ROWCOUNT;
            END;
        END;

        INSERT INTO dbo.carrier_batches (queue_name, messages, committed_at)
        VALUES (N'carrier_$(Carrier)', @received, GETUTCDATE());
        COMMIT TRANSACTION;
    END TRY
    BEGIN CATCH
        IF XACT_STATE() <> 0
            ROLLBACK TRANSACTION;
        THROW;
    END CATCH;
END;
GO
