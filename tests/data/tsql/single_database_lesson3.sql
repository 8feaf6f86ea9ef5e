-- Microsoft's tutorial "Completing a Conversation in a Single Database", Lesson 3: Dropping the
-- Conversation Objects (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-3-dropping-the-conversation-objects.md,
-- commit 112734630bd8d5e5c16fb940cc5e2ccd2ea3f4b1): the page's two code blocks, verbatim.
    USE AdventureWorks2008R2;
    GO

    IF EXISTS (SELECT * FROM sys.services
               WHERE name =
               N'//AWDB/1DBSample/TargetService')
         DROP SERVICE
         [//AWDB/1DBSample/TargetService];
    
    IF EXISTS (SELECT * FROM sys.service_queues
               WHERE name = N'TargetQueue1DB')
         DROP QUEUE TargetQueue1DB;
    
    -- Drop the intitator queue and service if they already exist.
    IF EXISTS (SELECT * FROM sys.services
               WHERE name =
               N'//AWDB/1DBSample/InitiatorService')
         DROP SERVICE
         [//AWDB/1DBSample/InitiatorService];
    
    IF EXISTS (SELECT * FROM sys.service_queues
               WHERE name = N'InitiatorQueue1DB')
         DROP QUEUE InitiatorQueue1DB;
    
    IF EXISTS (SELECT * FROM sys.service_contracts
               WHERE name =
               N'//AWDB/1DBSample/SampleContract')
         DROP CONTRACT
         [//AWDB/1DBSample/SampleContract];
    
    IF EXISTS (SELECT * FROM sys.service_message_types
               WHERE name =
               N'//AWDB/1DBSample/RequestMessage')
         DROP MESSAGE TYPE
         [//AWDB/1DBSample/RequestMessage];
    
    IF EXISTS (SELECT * FROM sys.service_message_types
               WHERE name =
               N'//AWDB/1DBSample/ReplyMessage')
         DROP MESSAGE TYPE
         [//AWDB/1DBSample/ReplyMessage];
    GO
