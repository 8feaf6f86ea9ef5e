-- MicrosoftDocs/sql-docs, docs/t-sql/statements/begin-dialog-conversation-transact-sql.md,
-- commit 09a0bb13ca22daf585b30c73a0d9727a4704fff4, Examples:
-- "C. Beginning a dialog with a specific broker instance".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @dialog_handle UNIQUEIDENTIFIER ;

BEGIN DIALOG CONVERSATION @dialog_handle
   FROM SERVICE [//Adventure-Works.com/ExpenseClient]
   TO SERVICE '//Adventure-Works.com/Expenses',
              'a326e034-d4cf-4e8b-8d98-4d7e1926c904'
   ON CONTRACT [//Adventure-Works.com/Expenses/ExpenseSubmission] ;
