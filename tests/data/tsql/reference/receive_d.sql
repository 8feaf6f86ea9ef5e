-- MicrosoftDocs/sql-docs, docs/t-sql/statements/receive-transact-sql.md,
-- commit 10fbb6cc80bf160cc9d35422e7aec00f856c3829, Examples:
-- "D. Receiving all messages for a specified conversation".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @conversation_handle UNIQUEIDENTIFIER ;

SET @conversation_handle = <retrieve conversation from database> ;

RECEIVE *
FROM ExpenseQueue
WHERE conversation_handle = @conversation_handle ;
