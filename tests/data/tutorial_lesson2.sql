-- Microsoft's tutorial "Completing a Conversation in a Single Database", Lesson 2: Beginning a
-- Conversation and Transmitting Messages (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-2-beginning-a-conversation-and-transmitting-messages.md):
-- the page's first two code blocks, verbatim. The second is a T-SQL batch (DECLARE, BEGIN
-- TRANSACTION, BEGIN DIALOG, SEND …), not DDL: execute_ddl refuses it at its first line.
    USE AdventureWorks2008R2;
    GO

    DECLARE @InitDlgHandle UNIQUEIDENTIFIER;
    DECLARE @RequestMsg NVARCHAR(100);

    BEGIN TRANSACTION;

    BEGIN DIALOG @InitDlgHandle
         FROM SERVICE
          [//AWDB/1DBSample/InitiatorService]
         TO SERVICE
          N'//AWDB/1DBSample/TargetService'
         ON CONTRACT
          [//AWDB/1DBSample/SampleContract]
         WITH
             ENCRYPTION = OFF;

    SELECT @RequestMsg =
           N'<RequestMsg>Message for Target service.</RequestMsg>';

    SEND ON CONVERSATION @InitDlgHandle
         MESSAGE TYPE
         [//AWDB/1DBSample/RequestMessage]
         (@RequestMsg);

    SELECT @RequestMsg AS SentRequestMsg;

    COMMIT TRANSACTION;
    GO
