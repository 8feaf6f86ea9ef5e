-- Microsoft's internal-activation tutorial, Lesson 4: Dropping the Conversation Objects
-- (MicrosoftDocs/sql-docs, docs/database-engine/service-broker/lesson-4-dropping-the-conversation-objects.md,
-- commit 112734630bd8d5e5c16fb940cc5e2ccd2ea3f4b1): the page's two code blocks, verbatim (the
-- second has no GO after it on the page: the script's end runs it).
        USE AdventureWorks2008R2;
        GO

        IF EXISTS (SELECT * FROM sys.objects
                   WHERE name =
                   N'TargetActivProc')
             DROP PROCEDURE TargetActivProc;
        
        IF EXISTS (SELECT * FROM sys.services
                   WHERE name =
                   N'//AWDB/InternalAct/TargetService')
             DROP SERVICE
             [//AWDB/InternalAct/TargetService];
        
        IF EXISTS (SELECT * FROM sys.service_queues
                   WHERE name = N'TargetQueueIntAct')
             DROP QUEUE TargetQueueIntAct;
        
        -- Drop the intitator queue and service if they already exist.
        IF EXISTS (SELECT * FROM sys.services
                   WHERE name =
                   N'//AWDB/InternalAct/InitiatorService')
             DROP SERVICE
             [//AWDB/InternalAct/InitiatorService];
        
        IF EXISTS (SELECT * FROM sys.service_queues
                   WHERE name = N'InitiatorQueueIntAct')
             DROP QUEUE InitiatorQueueIntAct;
        
        -- Drop contract and message type if they already exist.
        IF EXISTS (SELECT * FROM sys.service_contracts
                   WHERE name =
                   N'//AWDB/InternalAct/SampleContract')
             DROP CONTRACT
             [//AWDB/InternalAct/SampleContract];
        
        IF EXISTS (SELECT * FROM sys.service_message_types
                   WHERE name =
                   N'//AWDB/InternalAct/RequestMessage')
             DROP MESSAGE TYPE
             [//AWDB/InternalAct/RequestMessage];
        
        IF EXISTS (SELECT * FROM sys.service_message_types
                   WHERE name =
                   N'//AWDB/InternalAct/ReplyMessage')
             DROP MESSAGE TYPE
             [//AWDB/InternalAct/ReplyMessage];
