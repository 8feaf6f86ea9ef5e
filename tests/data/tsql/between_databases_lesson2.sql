-- Microsoft's tutorial "Completing a Conversation Between Databases", Lesson 2: Creating the
-- Target Conversation Objects (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-2-creating-the-target-conversation-objects.md,
-- commit 1383046ebea2bb3b8292e3439d50924fc4291071), sections "Switch to the TargetDB
-- database", "Create the message types", "Create the contract" and "Create the target queue and
-- service": the page's four code blocks, verbatim.
    USE TargetDB;
    GO

    CREATE MESSAGE TYPE [//BothDB/2DBSample/RequestMessage]
           VALIDATION = WELL_FORMED_XML;
    CREATE MESSAGE TYPE [//BothDB/2DBSample/ReplyMessage]
           VALIDATION = WELL_FORMED_XML;
    GO

    CREATE CONTRACT [//BothDB/2DBSample/SimpleContract]
          ([//BothDB/2DBSample/RequestMessage]
             SENT BY INITIATOR,
           [//BothDB/2DBSample/ReplyMessage]
             SENT BY TARGET
          );
    GO

    CREATE QUEUE TargetQueue2DB;
    
    CREATE SERVICE [//TgtDB/2DBSample/TargetService]
           ON QUEUE TargetQueue2DB
           ([//BothDB/2DBSample/SimpleContract]);
    GO
