-- MicrosoftDocs/sql-docs, docs/t-sql/statements/receive-transact-sql.md,
-- commit 10fbb6cc80bf160cc9d35422e7aec00f856c3829, Examples:
-- "A. Receiving all columns for all messages in a conversation group".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
RECEIVE * FROM ExpenseQueue ;
