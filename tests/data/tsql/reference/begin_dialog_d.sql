-- MicrosoftDocs/sql-docs, docs/t-sql/statements/begin-dialog-conversation-transact-sql.md,
-- commit 09a0bb13ca22daf585b30c73a0d9727a4704fff4, Examples:
-- "D. Beginning a dialog, and relating it to an existing conversation group".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @dialog_handle UNIQUEIDENTIFIER ;
DECLARE @conversation_group_id UNIQUEIDENTIFIER ;

SET @conversation_group_id = <retrieve conversation group ID from database>

BEGIN DIALOG CONVERSATION @dialog_handle
   FROM SERVICE [//Adventure-Works.com/ExpenseClient]
   TO SERVICE '//Adventure-Works.com/Expenses'
   ON CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission]
   WITH RELATED_CONVERSATION_GROUP = @conversation_group_id ;
