-- MicrosoftDocs/sql-docs, docs/t-sql/statements/send-transact-sql.md,
-- commit 0012fba8a0bfa66945bf77c1329dde07e9e582e3, Examples:
-- "(unlettered, the first) The following example starts a dialog and sends an XML message on the dialog.".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @dialog_handle UNIQUEIDENTIFIER,
        @ExpenseReport XML ;

SET @ExpenseReport = < construct message as appropriate for the application > ;

BEGIN DIALOG @dialog_handle
FROM SERVICE [//Adventure-Works.com/Expenses/ExpenseClient]
TO SERVICE '//Adventure-Works.com/Expenses'
ON CONTRACT [//Adventure-Works.com/Expenses/ExpenseProcessing] ;

SEND ON CONVERSATION @dialog_handle
    MESSAGE TYPE [//Adventure-Works.com/Expenses/SubmitExpense]
    (@ExpenseReport) ;
