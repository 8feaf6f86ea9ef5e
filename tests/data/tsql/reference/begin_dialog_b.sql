-- MicrosoftDocs/sql-docs, docs/t-sql/statements/begin-dialog-conversation-transact-sql.md,
-- commit 09a0bb13ca22daf585b30c73a0d9727a4704fff4, Examples:
-- "B. Beginning a dialog with an explicit lifetime".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @dialog_handle UNIQUEIDENTIFIER ;

BEGIN DIALOG CONVERSATION @dialog_handle
   FROM SERVICE [//Adventure-Works.com/ExpenseClient]
   TO SERVICE '//Adventure-Works.com/Expenses'
   ON CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission]
   WITH LIFETIME = 60 ;
