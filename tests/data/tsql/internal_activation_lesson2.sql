-- Microsoft's internal-activation tutorial, Lesson 2: Creating an Internal Activation Procedure
-- (MicrosoftDocs/sql-docs, docs/database-engine/service-broker/lesson-2-creating-an-internal-activation-procedure.md,
-- commit 149c53d2f8e91ab2bd289f79f86709a7180e29c8): the page's three code blocks, verbatim —
-- including its comparisons with 'https://schemas.microsoft.com/…' system message type names,
-- which never match (the names are http://…), on SQL Server as here.
      USE AdventureWorks2008R2;
      GO

      CREATE PROCEDURE TargetActivProc
      AS
        DECLARE @RecvReqDlgHandle UNIQUEIDENTIFIER;
        DECLARE @RecvReqMsg NVARCHAR(100);
        DECLARE @RecvReqMsgName sysname;

        WHILE (1=1)
        BEGIN

          BEGIN TRANSACTION;

          WAITFOR
          ( RECEIVE TOP(1)
              @RecvReqDlgHandle = conversation_handle,
              @RecvReqMsg = message_body,
              @RecvReqMsgName = message_type_name
            FROM TargetQueueIntAct
          ), TIMEOUT 5000;

          IF (@@ROWCOUNT = 0)
          BEGIN
            ROLLBACK TRANSACTION;
            BREAK;
          END

          IF @RecvReqMsgName =
             N'//AWDB/InternalAct/RequestMessage'
          BEGIN
             DECLARE @ReplyMsg NVARCHAR(100);
             SELECT @ReplyMsg =
             N'<ReplyMsg>Message for Initiator service.</ReplyMsg>';

             SEND ON CONVERSATION @RecvReqDlgHandle
                    MESSAGE TYPE
                    [//AWDB/InternalAct/ReplyMessage]
                    (@ReplyMsg);
          END
          ELSE IF @RecvReqMsgName =
              N'https://schemas.microsoft.com/SQL/ServiceBroker/EndDialog'
          BEGIN
             END CONVERSATION @RecvReqDlgHandle;
          END
          ELSE IF @RecvReqMsgName =
              N'https://schemas.microsoft.com/SQL/ServiceBroker/Error'
          BEGIN
             END CONVERSATION @RecvReqDlgHandle;
          END

          COMMIT TRANSACTION;

        END
      GO

      ALTER QUEUE TargetQueueIntAct
          WITH ACTIVATION
          ( STATUS = ON,
            PROCEDURE_NAME = TargetActivProc,
            MAX_QUEUE_READERS = 10,
            EXECUTE AS SELF
          );
      GO
