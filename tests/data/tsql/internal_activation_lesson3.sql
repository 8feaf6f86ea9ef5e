-- Microsoft's internal-activation tutorial, Lesson 3: Beginning a Conversation and Transmitting
-- Messages (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-3-beginning-a-conversation-and-transmitting-messages.md,
-- commit 112734630bd8d5e5c16fb940cc5e2ccd2ea3f4b1): the page's three code blocks, verbatim.
-- Between the second and the third, activation runs TargetActivProc, which replies.
        USE AdventureWorks2008R2;
        GO

        DECLARE @InitDlgHandle UNIQUEIDENTIFIER;
        DECLARE @RequestMsg NVARCHAR(100);
        
        BEGIN TRANSACTION;
        
        BEGIN DIALOG @InitDlgHandle
             FROM SERVICE
              [//AWDB/InternalAct/InitiatorService]
             TO SERVICE
              N'//AWDB/InternalAct/TargetService'
             ON CONTRACT
              [//AWDB/InternalAct/SampleContract]
             WITH
                 ENCRYPTION = OFF;
        
        -- Send a message on the conversation
        SELECT @RequestMsg =
               N'<RequestMsg>Message for Target service.</RequestMsg>';
        
        SEND ON CONVERSATION @InitDlgHandle
             MESSAGE TYPE 
             [//AWDB/InternalAct/RequestMessage]
             (@RequestMsg);
        
        -- Diplay sent request.
        SELECT @RequestMsg AS SentRequestMsg;
        
        COMMIT TRANSACTION;
        GO

        DECLARE @RecvReplyMsg NVARCHAR(100);
        DECLARE @RecvReplyDlgHandle UNIQUEIDENTIFIER;
        
        BEGIN TRANSACTION;
        
        WAITFOR
        ( RECEIVE TOP(1)
            @RecvReplyDlgHandle = conversation_handle,
            @RecvReplyMsg = message_body
            FROM InitiatorQueueIntAct
        ), TIMEOUT 5000;
        
        END CONVERSATION @RecvReplyDlgHandle;
        
        -- Display recieved request.
        SELECT @RecvReplyMsg AS ReceivedReplyMsg;
        
        COMMIT TRANSACTION;
        GO
