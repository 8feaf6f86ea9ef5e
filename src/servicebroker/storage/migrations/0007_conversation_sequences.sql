-- The columns of sys.conversation_endpoints and of a queue row that were missing (issue 11):
-- an endpoint's end_dialog_sequence (the sequence number of the EndDialog or Error message that
-- ended the dialog, sent or received; -1 while none has), and a queue row's
-- message_enqueue_time (broker-clock seconds at which the message entered the queue; NULL for
-- a message queued before this migration).
ALTER TABLE conversation_endpoints ADD COLUMN end_dialog_sequence BIGINT NOT NULL DEFAULT -1;
ALTER TABLE queue_messages ADD COLUMN message_enqueue_time DOUBLE PRECISION;
