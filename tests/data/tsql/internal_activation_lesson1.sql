-- Microsoft's tutorial "Completing a Conversation with Internal Activation" (the "Implementing
-- internal activation" lessons), Lesson 1: Creating the Base Conversation Objects
-- (MicrosoftDocs/sql-docs, docs/database-engine/service-broker/lesson-1-creating-the-base-conversation-objects.md,
-- commit 112734630bd8d5e5c16fb940cc5e2ccd2ea3f4b1): the page's five code blocks, verbatim.
       USE master;
       GO
       ALTER DATABASE AdventureWorks2008R2
             SET ENABLE_BROKER;
       GO
       USE AdventureWorks2008R2;
        GO

        CREATE MESSAGE TYPE
               [//AWDB/InternalAct/RequestMessage]
               VALIDATION = WELL_FORMED_XML;
        CREATE MESSAGE TYPE
               [//AWDB/InternalAct/ReplyMessage]
               VALIDATION = WELL_FORMED_XML;
        GO

        CREATE CONTRACT [//AWDB/InternalAct/SampleContract]
              ([//AWDB/InternalAct/RequestMessage]
               SENT BY INITIATOR,
               [//AWDB/InternalAct/ReplyMessage]
               SENT BY TARGET
              );
        GO

        CREATE QUEUE TargetQueueIntAct;
        
        CREATE SERVICE
               [//AWDB/InternalAct/TargetService]
               ON QUEUE TargetQueueIntAct
                  ([//AWDB/InternalAct/SampleContract]);
        GO

        CREATE QUEUE InitiatorQueueIntAct;
        
        CREATE SERVICE
               [//AWDB/InternalAct/InitiatorService]
               ON QUEUE InitiatorQueueIntAct;
        GO
