-- Dialogs between broker instances (NET, RTE).
-- conversation_endpoints.far_broker_instance: the far side's broker instance, the text of its
-- service_broker_guid; NULL while it is this database (a local dialog) or not known yet (an
-- initiator whose route goes to the network before the target's first acknowledgement pins
-- it, RTE-4).
ALTER TABLE conversation_endpoints ADD COLUMN far_broker_instance TEXT;
-- transmission_queue.is_remote: 1 for a message the transport sends to another instance (it
-- stays here until that instance acknowledges it, NET-3), 0 for one waiting to be put on a
-- queue of this database (QUE-3); to_broker_instance: the instance it goes to, when known.
ALTER TABLE transmission_queue ADD COLUMN is_remote INTEGER NOT NULL DEFAULT 0;
ALTER TABLE transmission_queue ADD COLUMN to_broker_instance TEXT;
DROP INDEX transmission_queue_level;
CREATE INDEX transmission_queue_level ON transmission_queue (is_remote, priority, transmission_id);
CREATE INDEX transmission_queue_remote ON transmission_queue (is_remote, transmission_id);
CREATE INDEX transmission_queue_message ON transmission_queue
    (conversation_id, is_initiator, message_sequence_number);
