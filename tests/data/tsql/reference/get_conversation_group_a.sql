-- MicrosoftDocs/sql-docs, docs/t-sql/statements/get-conversation-group-transact-sql.md,
-- commit 067d6a0d6f3494babdbf5882648932a48cb0253b, Examples:
-- "A. Getting a conversation group, waiting indefinitely".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @conversation_group_id UNIQUEIDENTIFIER ;

WAITFOR (
 GET CONVERSATION GROUP @conversation_group_id
     FROM ExpenseQueue
) ;
