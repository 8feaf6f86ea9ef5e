-- Conversations with another broker instance whose endpoint here has closed (issue 13, NET-2,
-- SEC-2). SQL Server keeps such an endpoint for half an hour "to prevent replay attacks"; this
-- table keeps only its key: a copy of one of its messages arriving late — resent by a sender
-- whose acknowledgement was lost, held by a forwarder, or replayed by one — is a duplicate
-- (acknowledged and discarded), never the start of a new dialog; and its own messages still
-- waiting to be acknowledged (its END) are sealed with its key. forget_after is broker-clock
-- seconds; rows past it whose side has nothing left in the transmission queue are deleted at
-- TICK-4.
CREATE TABLE closed_conversations (
    conversation_id BYTEA NOT NULL,
    is_initiator    INTEGER NOT NULL,
    forget_after    DOUBLE PRECISION NOT NULL,
    -- the closed endpoint's dialog security (SEC-2): its messages still in the transmission
    -- queue (an END not yet acknowledged) are sealed with this key; NULL: not secured
    principal_id        INTEGER,
    far_principal_id    INTEGER,
    session_key_identifier TEXT,
    security_timestamp  DOUBLE PRECISION,
    session_key         BYTEA,
    far_certificate     TEXT,
    PRIMARY KEY (conversation_id, is_initiator)
);
CREATE INDEX closed_conversations_forget ON closed_conversations (forget_after);
