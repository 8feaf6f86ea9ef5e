-- MicrosoftDocs/sql-docs, docs/t-sql/statements/begin-dialog-conversation-transact-sql.md,
-- commit 09a0bb13ca22daf585b30c73a0d9727a4704fff4, Examples:
-- "E. Beginning a dialog with an explicit lifetime, and relating the dialog to an existing conversation".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @dialog_handle UNIQUEIDENTIFIER
DECLARE @existing_conversation_handle UNIQUEIDENTIFIER

SET @existing_conversation_handle = <retrieve conversation handle from database>

BEGIN DIALOG CONVERSATION @dialog_handle
   FROM SERVICE [//Adventure-Works.com/ExpenseClient]
   TO SERVICE '//Adventure-Works.com/Expenses'
   ON CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission]
   WITH RELATED_CONVERSATION = @existing_conversation_handle
   LIFETIME = 600 ;
