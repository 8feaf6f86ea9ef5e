-- MicrosoftDocs/sql-docs, docs/t-sql/statements/end-conversation-transact-sql.md,
-- commit 00e01244edabb266fbdde9727001a4f3d2272fd4, Examples:
-- "A. Ending a conversation".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
END CONVERSATION @dialog_handle ;
