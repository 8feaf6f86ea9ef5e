-- Conversations with another broker instance whose endpoint here has closed (issue 13, NET-2,
-- SEC-2). SQL Server keeps such an endpoint for half an hour "to prevent replay attacks"; this
-- table keeps only its key: a copy of one of its messages arriving late — resent by a sender
-- whose acknowledgement was lost, held by a forwarder, or replayed by one — is a duplicate
-- (acknowledged and discarded), never the start of a new dialog. forget_after is broker-clock
-- seconds; rows past it are deleted at TICK-4.
CREATE TABLE closed_conversations (
    conversation_id BYTEA NOT NULL,
    is_initiator    INTEGER NOT NULL,
    forget_after    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (conversation_id, is_initiator)
);
CREATE INDEX closed_conversations_forget ON closed_conversations (forget_after);
