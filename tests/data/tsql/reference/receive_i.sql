-- MicrosoftDocs/sql-docs, docs/t-sql/statements/receive-transact-sql.md,
-- commit 10fbb6cc80bf160cc9d35422e7aec00f856c3829, Examples:
-- "I. Receiving messages, modifying the type of a column".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
WAITFOR (
    RECEIVE message_type_name,
        CASE
            WHEN validation = 'X' THEN CAST(message_body as XML)
            ELSE NULL
         END AS message_body
         FROM ExpenseQueue ),
TIMEOUT 60000 ;
