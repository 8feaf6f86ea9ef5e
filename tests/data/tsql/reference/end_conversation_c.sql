-- MicrosoftDocs/sql-docs, docs/t-sql/statements/end-conversation-transact-sql.md,
-- commit 00e01244edabb266fbdde9727001a4f3d2272fd4, Examples:
-- "C. Cleaning up a conversation that cannot complete normally".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
END CONVERSATION @dialog_handle WITH CLEANUP ;
