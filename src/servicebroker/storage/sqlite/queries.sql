-- Named queries of the SQLite storage that differ from the shared ones (../queries.sql): JSON
-- arrays for sets of values, SQLite's own sequence, the group index walked in Python. Each block
-- starts with "-- name: NAME"; a name defined here overrides the shared query of that name.

-- name: get_endpoints
-- "(?*)" stands for a list of placeholders, one per handle (see _in_list).
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_handle IN (?*);

-- name: get_conversations
-- "(?*)" stands for a list of placeholders, one per conversation id (see _in_list).
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_id IN (?*);

-- name: candidate_groups
SELECT conversation_group_id, level, head_order FROM queue_groups g WHERE queue_id = ?
  AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                  WHERE c.conversation_group_id = g.conversation_group_id)
ORDER BY level DESC, head_order;

-- name: candidate_groups_excluding
SELECT conversation_group_id, level, head_order FROM queue_groups g
WHERE queue_id = ? AND hex(conversation_group_id) NOT IN (SELECT value FROM json_each(?))
  AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                  WHERE c.conversation_group_id = g.conversation_group_id)
ORDER BY level DESC, head_order;

-- name: held_group_head
SELECT priority, queuing_order FROM queue_messages
WHERE conversation_group_id = ? AND queue_id = ? AND status = 1
  AND queuing_order NOT IN (SELECT value FROM json_each(?))
  AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                  WHERE c.conversation_group_id = queue_messages.conversation_group_id)
ORDER BY priority DESC, conversation_order, rank, message_sequence_number, queuing_order
LIMIT 1;

-- name: delete_received
DELETE FROM queue_messages WHERE queuing_order IN (SELECT value FROM json_each(?));

-- name: retain_received
UPDATE queue_messages SET status = 0 WHERE queuing_order IN (SELECT value FROM json_each(?));

-- name: message_sequence
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'queue_messages'), 0);

-- name: stream_reader_for_update
-- (the write transaction holds SQLite's single write lock: no row lock needed)
SELECT reader, queues, latest, acknowledged, released, renewed, claim_timeout
FROM stream_readers WHERE reader = ?;

-- name: statistics_for_update
-- (the write transaction holds SQLite's single write lock: no row lock needed)
SELECT instance_id, process, updated, state, snapshot FROM broker_statistics
WHERE instance_id = ?;
