-- MicrosoftDocs/sql-docs, docs/t-sql/statements/move-conversation-transact-sql.md,
-- commit 0e01c62d17cf2e51e19a2e2ae051b2c261f82956, Examples:
-- "(unlettered, the only one) The following example moves a conversation to a different conversation group.".
-- The example verbatim (only the trailing blanks of the page's lines dropped).
DECLARE @conversation_handle UNIQUEIDENTIFIER,
        @conversation_group_id UNIQUEIDENTIFIER ;

SET @conversation_handle =
    <retrieve conversation handle from database> ;
SET @conversation_group_id =
    <retrieve conversation group ID from database> ;

MOVE CONVERSATION @conversation_handle TO @conversation_group_id ;
