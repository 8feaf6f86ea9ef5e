-- MicrosoftDocs/sql-docs, docs/t-sql/statements/receive-transact-sql.md,
-- commit 10fbb6cc80bf160cc9d35422e7aec00f856c3829, Examples:
-- "E. Receiving messages for a specified conversation group".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @conversation_group_id UNIQUEIDENTIFIER ;

SET @conversation_group_id =
    <retrieve conversation group ID from database> ;

RECEIVE *
FROM ExpenseQueue
WHERE conversation_group_id = @conversation_group_id ;
