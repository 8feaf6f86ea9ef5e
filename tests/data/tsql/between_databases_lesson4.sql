-- Microsoft's tutorial "Completing a Conversation Between Databases", Lesson 4: Beginning a
-- Conversation and Transmitting Messages (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-4-beginning-a-conversation-and-transmitting-messages.md,
-- commit 3588c5cdebc86e3f2a294f1070c55c5787fe79bf), sections "Switch to the InitiatorDB
-- database", "Start a conversation and send a request message", "Switch to the TargetDB
-- database", "Receive the request and send a reply", "Switch to the InitiatorDB database" and
-- "Receive the reply and end the conversation": the page's six code blocks, verbatim.
    USE InitiatorDB;
    GO

    DECLARE @InitDlgHandle UNIQUEIDENTIFIER;
    DECLARE @RequestMsg NVARCHAR(100);

    BEGIN TRANSACTION;

    BEGIN DIALOG @InitDlgHandle
         FROM SERVICE [//InitDB/2DBSample/InitiatorService]
         TO SERVICE N'//TgtDB/2DBSample/TargetService'
         ON CONTRACT [//BothDB/2DBSample/SimpleContract]
         WITH
             ENCRYPTION = OFF;

    SELECT @RequestMsg =
       N'<RequestMsg>Message for Target service.</RequestMsg>';

    SEND ON CONVERSATION @InitDlgHandle
         MESSAGE TYPE [//BothDB/2DBSample/RequestMessage]
          (@RequestMsg);

    SELECT @RequestMsg AS SentRequestMsg;

    COMMIT TRANSACTION;
    GO

    USE TargetDB;
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
      FROM TargetQueue2DB
    ), TIMEOUT 1000;

    SELECT @RecvReqMsg AS ReceivedRequestMsg;

    IF @RecvReqMsgName =
       N'//BothDB/2DBSample/RequestMessage'
    BEGIN
         DECLARE @ReplyMsg NVARCHAR(100);
         SELECT @ReplyMsg =
            N'<ReplyMsg>Message for Initiator service.</ReplyMsg>';

         SEND ON CONVERSATION @RecvReqDlgHandle
              MESSAGE TYPE
                [//BothDB/2DBSample/ReplyMessage] (@ReplyMsg);

         END CONVERSATION @RecvReqDlgHandle;
    END

    SELECT @ReplyMsg AS SentReplyMsg;

    COMMIT TRANSACTION;
    GO

    USE InitiatorDB;
    GO

    DECLARE @RecvReplyMsg NVARCHAR(100);
    DECLARE @RecvReplyDlgHandle UNIQUEIDENTIFIER;

    BEGIN TRANSACTION;

    WAITFOR
    ( RECEIVE TOP(1)
        @RecvReplyDlgHandle = conversation_handle,
        @RecvReplyMsg = message_body
      FROM InitiatorQueue2DB
    ), TIMEOUT 1000;

    END CONVERSATION @RecvReplyDlgHandle;

    -- Display recieved request.
    SELECT @RecvReplyMsg AS ReceivedReplyMsg;

    COMMIT TRANSACTION;
    GO
