-- MicrosoftDocs/sql-docs, docs/t-sql/statements/receive-transact-sql.md,
-- commit 10fbb6cc80bf160cc9d35422e7aec00f856c3829, Examples:
-- "H. Receiving messages and waiting for a specified interval".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
WAITFOR (
    RECEIVE *
    FROM ExpenseQueue ),
TIMEOUT 60000 ;
