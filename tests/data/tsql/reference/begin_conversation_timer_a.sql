-- MicrosoftDocs/sql-docs, docs/t-sql/statements/begin-conversation-timer-transact-sql.md,
-- commit 0826c06843cafa37894e0a6eb72a3c1989e758ed, Examples:
-- "(unlettered, the only one) The following example sets a two-minute time-out on the dialog identified by @dialog_handle.".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
-- @dialog_handle is of type uniqueidentifier and
-- contains a valid conversation handle.

BEGIN CONVERSATION TIMER (@dialog_handle)
TIMEOUT = 120 ;
