-- Microsoft's tutorial "Completing a Conversation Between Databases", Lesson 3: Creating the
-- Initiator Conversation Objects (MicrosoftDocs/sql-docs,
-- docs/database-engine/service-broker/lesson-3-creating-the-initiator-conversation-objects.md,
-- commit 112734630bd8d5e5c16fb940cc5e2ccd2ea3f4b1), sections "Switch to the InitiatorDB
-- database", "Create the message types", "Create the contract" and "Create the initiator queue
-- and service": the page's four code blocks, verbatim.
    USE InitiatorDB;
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

    CREATE QUEUE InitiatorQueue2DB;
    
    CREATE SERVICE [//InitDB/2DBSample/InitiatorService]
           ON QUEUE InitiatorQueue2DB;
    GO
