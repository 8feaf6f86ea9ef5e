-- MicrosoftDocs/sql-docs, docs/t-sql/statements/end-conversation-transact-sql.md,
-- commit 00e01244edabb266fbdde9727001a4f3d2272fd4, Examples:
-- "B. Ending a conversation with an error".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @dialog_handle UNIQUEIDENTIFIER,
        @ErrorSave INT,
        @ErrorDesc NVARCHAR(100) ;
BEGIN TRANSACTION ;

<receive and process message>

SET @ErrorSave = @@ERROR ;

IF (@ErrorSave <> 0)
  BEGIN
      ROLLBACK TRANSACTION ;
      SET @ErrorDesc = N'An error has occurred.' ;
      END CONVERSATION @dialog_handle
      WITH ERROR = @ErrorSave DESCRIPTION = @ErrorDesc ;
  END
ELSE

COMMIT TRANSACTION ;
