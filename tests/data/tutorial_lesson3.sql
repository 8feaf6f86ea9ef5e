-- Microsoft's tutorial "Completing a Conversation in a Single Database", Lesson 3: Dropping the
-- Conversation Objects (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-3-dropping-the-conversation-objects.md): the
-- DROP statements of the page's second code block, without their IF EXISTS (SELECT … FROM
-- sys.…) guards — T-SQL control flow, which execute_ddl refuses.
    USE AdventureWorks2008R2;
    GO

         DROP SERVICE
         [//AWDB/1DBSample/TargetService];
    
         DROP QUEUE TargetQueue1DB;
    
    -- Drop the intitator queue and service if they already exist.
         DROP SERVICE
         [//AWDB/1DBSample/InitiatorService];
    
         DROP QUEUE InitiatorQueue1DB;
    
         DROP CONTRACT
         [//AWDB/1DBSample/SampleContract];
    
         DROP MESSAGE TYPE
         [//AWDB/1DBSample/RequestMessage];
    
         DROP MESSAGE TYPE
         [//AWDB/1DBSample/ReplyMessage];
    GO
