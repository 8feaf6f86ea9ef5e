-- Microsoft's tutorial "Completing a Conversation in a Single Database", Lesson 2: Beginning a
-- Conversation and Transmitting Messages (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-2-beginning-a-conversation-and-transmitting-messages.md,
-- commit 00537119c304e87d5db56d482e71fb043c4a11f4): the page's four code blocks, verbatim.
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

    DECLARE @RecvReqDlgHandle UNIQUEIDENTIFIER;
    DECLARE @RecvReqMsg NVARCHAR(100);
    DECLARE @RecvReqMsgName sysname;

    BEGIN TRANSACTION;

    WAITFOR
    ( RECEIVE TOP(1)
        @RecvReqDlgHandle = conversation_handle,
        @RecvReqMsg = message_body,
        @RecvReqMsgName = message_type_name
      FROM TargetQueue1DB
    ), TIMEOUT 1000;

    SELECT @RecvReqMsg AS ReceivedRequestMsg;

    IF @RecvReqMsgName =
       N'//AWDB/1DBSample/RequestMessage'
    BEGIN
         DECLARE @ReplyMsg NVARCHAR(100);
         SELECT @ReplyMsg =
         N'<ReplyMsg>Message for Initiator service.</ReplyMsg>';

         SEND ON CONVERSATION @RecvReqDlgHandle
              MESSAGE TYPE
              [//AWDB/1DBSample/ReplyMessage]
              (@ReplyMsg);

         END CONVERSATION @RecvReqDlgHandle;
    END

    SELECT @ReplyMsg AS SentReplyMsg;

    COMMIT TRANSACTION;
    GO

    DECLARE @RecvReplyMsg NVARCHAR(100);
    DECLARE @RecvReplyDlgHandle UNIQUEIDENTIFIER;

    BEGIN TRANSACTION;

    WAITFOR
    ( RECEIVE TOP(1)
        @RecvReplyDlgHandle = conversation_handle,
        @RecvReplyMsg = message_body
      FROM InitiatorQueue1DB
    ), TIMEOUT 1000;

    END CONVERSATION @RecvReplyDlgHandle;

    SELECT @RecvReplyMsg AS ReceivedReplyMsg;

    COMMIT TRANSACTION;
    GO
