-- Stream readers and their conversation-group claims (issue 14). A stream reader (a Spark
-- Structured Streaming query reading a queue) takes messages batch by batch, and a batch stays
-- its own from the moment it is planned until the reader acknowledges it, across transactions,
-- processes and restarts: longer than any transaction, so longer than a group lock (DLG-9).
-- While a group is claimed no RECEIVE, GET CONVERSATION GROUP or other reader takes it (the
-- candidate queries skip it); the claim ends when the reader acknowledges the batch (its
-- messages leave the queue, or are kept with status 0 under RETENTION) or, for a reader that
-- did not come back within its time-out, when it is released.

-- One row per reader: the last batch it planned (latest), the last it acknowledged, the
-- last batch released for it by the time-out (released), and when it last showed life
-- (renewed, broker-clock seconds).
CREATE TABLE stream_readers (
    reader       TEXT PRIMARY KEY,
    queues       TEXT NOT NULL,
    latest       BIGINT NOT NULL,
    acknowledged BIGINT NOT NULL,
    released     BIGINT NOT NULL DEFAULT 0,
    renewed      DOUBLE PRECISION NOT NULL,
    claim_timeout DOUBLE PRECISION NOT NULL
);

-- The groups claimed, each by one reader's batch.
CREATE TABLE conversation_group_claims (
    conversation_group_id BYTEA PRIMARY KEY,
    queue_id    INTEGER NOT NULL,
    reader      TEXT NOT NULL,
    batch       BIGINT NOT NULL,
    claimed_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX conversation_group_claims_reader ON conversation_group_claims (reader, batch);

-- A batch's messages as they were when it was planned: a batch read again (a task retried, a
-- query restarted after a crash) reads exactly these, in this order, whatever happened to the
-- queue since (an END CONVERSATION committed by the same micro-batch deletes the queue's
-- copies). part: the Spark task that reads the message; position: its place in that task.
CREATE TABLE claimed_messages (
    reader      TEXT NOT NULL,
    batch       BIGINT NOT NULL,
    part        INTEGER NOT NULL,
    position    INTEGER NOT NULL,
    status      INTEGER NOT NULL,
    priority    INTEGER NOT NULL,
    queuing_order BIGINT NOT NULL,
    conversation_group_id BYTEA NOT NULL,
    conversation_handle BYTEA NOT NULL,
    message_sequence_number BIGINT NOT NULL,
    service_id  INTEGER NOT NULL,
    service_contract_id INTEGER NOT NULL,
    message_type_id INTEGER NOT NULL,
    validation  TEXT NOT NULL,
    message_body BYTEA NOT NULL,
    message_id  BYTEA NOT NULL,
    queue_id    INTEGER NOT NULL,
    message_enqueue_time DOUBLE PRECISION,
    PRIMARY KEY (reader, batch, part, position)
);

-- The micro-batches a stream writer committed, per query: a batch committed again (Spark runs
-- it again after a crash between the sink's commit and its own commit log) is skipped.
CREATE TABLE stream_commits (
    query_id     TEXT NOT NULL,
    batch_id     BIGINT NOT NULL,
    committed_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (query_id, batch_id)
);
