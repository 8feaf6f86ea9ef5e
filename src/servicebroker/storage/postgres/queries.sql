-- Named queries of the PostgreSQL storage (psycopg placeholders). Each block starts with "-- name: NAME"; the storage
-- module loads them by name, so no SQL is written inline in Python.

-- name: get_setting
SELECT value FROM broker_settings WHERE name = %s;

-- name: put_setting
INSERT INTO broker_settings (name, value) VALUES (%s, %s)
ON CONFLICT (name) DO UPDATE SET value = excluded.value;

-- name: bump_catalog_version
UPDATE broker_settings SET value = CAST(value AS INTEGER) + 1 WHERE name = 'catalog_version';

-- name: catalog_message_types
SELECT message_type_id, name, validation, is_system FROM message_types ORDER BY message_type_id;

-- name: catalog_contracts
SELECT service_contract_id, name, is_system FROM service_contracts ORDER BY service_contract_id;

-- name: catalog_contract_usages
SELECT service_contract_id, message_type_id, sent_by FROM service_contract_message_usages;

-- name: catalog_queues
SELECT queue_id, name, is_receive_enabled, is_retention_enabled,
       is_poison_message_handling_enabled, is_activation_enabled, activation_procedure,
       max_readers, modify_date
FROM service_queues ORDER BY queue_id;

-- name: catalog_services
SELECT service_id, name, queue_id FROM services ORDER BY service_id;

-- name: catalog_service_contracts
SELECT service_id, service_contract_id FROM service_contract_usages;

-- name: insert_message_type
INSERT INTO message_types (name, validation) VALUES (%s, %s) RETURNING message_type_id;

-- name: delete_message_type
DELETE FROM message_types WHERE message_type_id = %s;

-- name: insert_contract
INSERT INTO service_contracts (name) VALUES (%s) RETURNING service_contract_id;

-- name: insert_contract_usage
INSERT INTO service_contract_message_usages (service_contract_id, message_type_id, sent_by)
VALUES (%s, %s, %s);

-- name: delete_contract
DELETE FROM service_contracts WHERE service_contract_id = %s;

-- name: insert_queue
INSERT INTO service_queues (name, is_receive_enabled, is_retention_enabled,
    is_poison_message_handling_enabled, is_activation_enabled, activation_procedure,
    max_readers, modify_date)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING queue_id;

-- name: update_queue
UPDATE service_queues SET is_receive_enabled = %s, is_retention_enabled = %s,
    is_poison_message_handling_enabled = %s, is_activation_enabled = %s,
    activation_procedure = %s, max_readers = %s, modify_date = %s
WHERE queue_id = %s;

-- name: delete_queue
DELETE FROM service_queues WHERE queue_id = %s;

-- name: insert_service
INSERT INTO services (name, queue_id) VALUES (%s, %s) RETURNING service_id;

-- name: insert_service_contract
INSERT INTO service_contract_usages (service_id, service_contract_id) VALUES (%s, %s);

-- name: delete_service
DELETE FROM services WHERE service_id = %s;

-- name: endpoints_using_service
SELECT count(*) FROM conversation_endpoints WHERE service_id = %s AND state <> 'CD';

-- name: endpoints_using_contract
SELECT count(*) FROM conversation_endpoints WHERE service_contract_id = %s AND state <> 'CD';

-- name: messages_using_message_type
WITH t(id) AS (VALUES (%s::bigint))
SELECT (SELECT count(*) FROM queue_messages, t WHERE message_type_id = t.id)
     + (SELECT count(*) FROM transmission_queue, t WHERE message_type_id = t.id);

-- name: delete_queue_messages
DELETE FROM queue_messages WHERE queue_id = %s;

-- name: add_rollback
UPDATE service_queues SET rollback_count = rollback_count + 1 WHERE queue_id = %s
RETURNING rollback_count;

-- name: reset_rollbacks
UPDATE service_queues SET rollback_count = 0 WHERE queue_id = %s AND rollback_count <> 0;

-- name: disable_queue
UPDATE service_queues SET is_receive_enabled = 0, rollback_count = 0, modify_date = %s
WHERE queue_id = %s;

-- name: get_endpoint
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority
FROM conversation_endpoints WHERE conversation_handle = %s;

-- name: get_far_endpoint
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority
FROM conversation_endpoints WHERE conversation_id = %s AND is_initiator = %s;

-- name: get_conversation
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority
FROM conversation_endpoints WHERE conversation_id = %s;

-- name: insert_endpoint
INSERT INTO conversation_endpoints (conversation_handle, conversation_id, is_initiator,
    service_contract_id, conversation_group_id, service_id, queue_id, far_service, lifetime,
    state, dialog_timer, send_sequence, receive_sequence, priority)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING endpoint_id;

-- name: update_endpoint
UPDATE conversation_endpoints SET conversation_group_id = %s, state = %s, dialog_timer = %s,
    send_sequence = %s, receive_sequence = %s
WHERE endpoint_id = %s;

-- name: delete_endpoint
DELETE FROM conversation_endpoints WHERE endpoint_id = %s;

-- name: group_queue
SELECT queue_id FROM conversation_endpoints WHERE conversation_group_id = %s LIMIT 1;

-- name: due_timers
SELECT conversation_handle FROM conversation_endpoints
WHERE dialog_timer IS NOT NULL AND dialog_timer <= %s ORDER BY dialog_timer LIMIT %s;

-- name: due_lifetimes
SELECT conversation_handle FROM conversation_endpoints
WHERE lifetime <= %s AND state NOT IN ('ER', 'CD') ORDER BY lifetime LIMIT %s;

-- name: next_due_time
SELECT min(t) FROM (
    SELECT min(dialog_timer) AS t FROM conversation_endpoints WHERE dialog_timer IS NOT NULL
    UNION ALL
    SELECT min(lifetime) FROM conversation_endpoints WHERE state NOT IN ('ER', 'CD')) AS due;

-- name: list_endpoints
SELECT e.conversation_handle, e.conversation_id, e.is_initiator, e.service_contract_id,
       e.conversation_group_id, e.service_id, e.far_service, e.lifetime, e.state,
       e.dialog_timer, e.send_sequence, e.receive_sequence, e.priority, e.queue_id
FROM conversation_endpoints e ORDER BY e.endpoint_id;

-- name: insert_message
INSERT INTO queue_messages (queue_id, status, priority, conversation_group_id,
    conversation_handle, conversation_order, rank, message_sequence_number, service_id,
    service_contract_id, message_type_id, validation, message_body, message_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: lock_first_candidate
SELECT conversation_group_id, level, head_order, k, pg_try_advisory_lock(k)
FROM (SELECT conversation_group_id, level, head_order,
             hashtextextended(%s || encode(conversation_group_id, 'hex'), 0) AS k
      FROM queue_groups
      WHERE queue_id = %s AND NOT (conversation_group_id = ANY(%s::bytea[]))
      ORDER BY level DESC, head_order
      LIMIT 1) AS c;

-- name: held_group_head
SELECT priority, queuing_order FROM queue_messages
WHERE conversation_group_id = %s AND queue_id = %s AND status = 1
  AND NOT (queuing_order = ANY(%s))
ORDER BY priority DESC, conversation_order, rank, message_sequence_number, queuing_order
LIMIT 1;

-- name: group_messages
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id
FROM queue_messages
WHERE conversation_group_id = %s AND status = 1
ORDER BY priority DESC, conversation_order, rank, message_sequence_number
LIMIT %s;

-- name: conversation_messages
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id
FROM queue_messages
WHERE conversation_group_id = %s AND conversation_handle = %s AND status = 1
ORDER BY rank, message_sequence_number
LIMIT %s;

-- name: peek
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id
FROM queue_messages WHERE queue_id = %s
ORDER BY priority DESC, queuing_order
LIMIT %s;

-- name: peek_after
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id
FROM queue_messages WHERE queue_id = %s AND queuing_order > %s
ORDER BY queuing_order
LIMIT %s;

-- name: queue_has_ready
SELECT EXISTS (SELECT 1 FROM queue_groups WHERE queue_id = %s);

-- name: queue_counts
SELECT queue_id, status, count(*) FROM queue_messages GROUP BY queue_id, status;

-- name: delete_received
DELETE FROM queue_messages WHERE queuing_order = ANY(%s);

-- name: retain_received
UPDATE queue_messages SET status = 0 WHERE queuing_order = ANY(%s);

-- name: delete_conversation_messages
DELETE FROM queue_messages WHERE conversation_group_id = %s AND conversation_handle = %s;

-- name: move_conversation_messages
UPDATE queue_messages SET conversation_group_id = %s
WHERE conversation_group_id = %s AND conversation_handle = %s;

-- name: insert_transmission
INSERT INTO transmission_queue (conversation_handle, conversation_id, is_initiator,
    to_service_name, from_service_name, service_contract_id, enqueue_time,
    message_sequence_number, message_type_id, validation, message_body, message_id, arrival,
    transmission_status, priority, lifetime)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: transmission_pending_at_level
SELECT transmission_id, conversation_handle, conversation_id, is_initiator, to_service_name,
       from_service_name, service_contract_id, enqueue_time, message_sequence_number,
       message_type_id, validation, message_body, message_id, arrival, transmission_status,
       priority, lifetime
FROM transmission_queue WHERE priority = %s ORDER BY transmission_id LIMIT %s;

-- name: transmission_exists
SELECT EXISTS (SELECT 1 FROM transmission_queue);

-- name: transmission_conversation_waiting
SELECT EXISTS (SELECT 1 FROM transmission_queue WHERE conversation_id = %s AND is_initiator = %s);

-- name: delete_transmission
DELETE FROM transmission_queue WHERE transmission_id = %s;

-- name: set_transmission_status
UPDATE transmission_queue SET transmission_status = %s WHERE transmission_id = %s;

-- name: delete_transmission_of_endpoint
DELETE FROM transmission_queue WHERE conversation_id = %s AND is_initiator = %s;

-- name: list_transmission
SELECT conversation_handle, to_service_name, from_service_name, service_contract_id,
       enqueue_time, message_sequence_number, message_type_id, arrival, message_body,
       transmission_status, priority
FROM transmission_queue ORDER BY priority DESC, transmission_id;

-- name: transmission_count
SELECT count(*) FROM transmission_queue;

-- name: catalog_event_notifications
SELECT event_notification_id, name, queue_id, event_type, to_service, conversation_handle
FROM event_notifications ORDER BY event_notification_id;

-- name: insert_event_notification
INSERT INTO event_notifications (name, queue_id, event_type, to_service) VALUES (%s, %s, %s, %s)
RETURNING event_notification_id;

-- name: delete_event_notification
DELETE FROM event_notifications WHERE event_notification_id = %s;

-- name: set_event_notification_conversation
UPDATE event_notifications SET conversation_handle = %s WHERE event_notification_id = %s;

-- name: message_sequence
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM queue_messages_queuing_order;

-- name: catalog_broker_priorities
SELECT priority_id, name, service_contract_name, local_service_name, remote_service_name, priority
FROM conversation_priorities ORDER BY priority_id;

-- name: insert_broker_priority
INSERT INTO conversation_priorities (name, service_contract_name, local_service_name,
    remote_service_name, priority) VALUES (%s, %s, %s, %s, %s) RETURNING priority_id;

-- name: update_broker_priority
UPDATE conversation_priorities SET service_contract_name = %s, local_service_name = %s,
    remote_service_name = %s, priority = %s WHERE priority_id = %s;

-- name: delete_broker_priority
DELETE FROM conversation_priorities WHERE priority_id = %s;

-- name: set_waiting
INSERT INTO queue_waiters (queue_id, backend_pid, backend_start, waiting)
SELECT %s, pid, backend_start, %s FROM pg_stat_activity WHERE pid = pg_backend_pid()
ON CONFLICT (queue_id, backend_pid) DO UPDATE
SET backend_start = EXCLUDED.backend_start, waiting = EXCLUDED.waiting;

-- name: count_waiting
SELECT coalesce(sum(w.waiting), 0) FROM queue_waiters w
JOIN pg_stat_activity a ON a.pid = w.backend_pid AND a.backend_start = w.backend_start
WHERE w.queue_id = %s;

-- name: note_empty
INSERT INTO queue_activity (queue_id, last_empty) VALUES (%s, %s)
ON CONFLICT (queue_id) DO UPDATE
SET last_empty = greatest(queue_activity.last_empty, EXCLUDED.last_empty);

-- name: note_receive
INSERT INTO queue_activity (queue_id, last_receive) VALUES (%s, %s)
ON CONFLICT (queue_id) DO UPDATE
SET last_receive = greatest(queue_activity.last_receive, EXCLUDED.last_receive);

-- name: last_empty
SELECT last_empty FROM queue_activity WHERE queue_id = %s;

-- name: last_receive
SELECT last_receive FROM queue_activity WHERE queue_id = %s;

-- name: forget_activity
DELETE FROM queue_activity WHERE queue_id = %s;

-- name: forget_waiters
DELETE FROM queue_waiters WHERE queue_id = %s;

-- name: groups_arrived_since
SELECT DISTINCT conversation_group_id FROM queue_messages
WHERE queuing_order > %s AND queue_id = %s AND status = 1;

-- name: arrival_watermark
SELECT coalesce(max(queuing_order), 0) FROM queue_messages;

-- name: get_conversations
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority
FROM conversation_endpoints WHERE conversation_id = ANY(%s);

-- name: try_lock_group
SELECT k, pg_try_advisory_lock(k)
FROM (SELECT hashtextextended(%s || encode(%s::bytea, 'hex'), 0) AS k) AS key;

-- name: get_endpoint_and_lock
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, k,
       CASE WHEN k = ANY(%s::bigint[]) THEN true ELSE pg_try_advisory_lock(k) END
FROM (SELECT e.*, hashtextextended(%s || encode(e.conversation_group_id, 'hex'), 0) AS k
      FROM conversation_endpoints e WHERE e.conversation_handle = %s) AS e;
