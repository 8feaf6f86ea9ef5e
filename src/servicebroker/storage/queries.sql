-- Named queries both backends share: written once, with "?" placeholders (converted to "%s"
-- for psycopg when loaded). Each block starts with "-- name: NAME"; a backend's own queries.sql
-- holds only what its dialect makes different and may override a name defined here (see
-- servicebroker.storage.queries.load_backend_queries).

-- name: get_setting
SELECT value FROM broker_settings WHERE name = ?;

-- name: put_setting
INSERT INTO broker_settings (name, value) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value;

-- name: bump_catalog_version
UPDATE broker_settings SET value = CAST(value AS INTEGER) + 1 WHERE name = 'catalog_version';

-- name: catalog_message_types
SELECT message_type_id, name, validation, is_system, xml_collection_id
FROM message_types ORDER BY message_type_id;

-- name: catalog_xml_schema_collections
SELECT xml_collection_id, name, create_date, modify_date
FROM xml_schema_collections ORDER BY xml_collection_id;

-- name: catalog_xml_schema_documents
SELECT xml_collection_id, ordinal, target_namespace, document
FROM xml_schema_documents ORDER BY xml_collection_id, ordinal;

-- name: catalog_contracts
SELECT service_contract_id, name, is_system FROM service_contracts ORDER BY service_contract_id;

-- name: catalog_contract_usages
SELECT service_contract_id, message_type_id, sent_by FROM service_contract_message_usages;

-- name: catalog_queues
SELECT queue_id, name, is_receive_enabled, is_retention_enabled,
       is_poison_message_handling_enabled, is_activation_enabled, activation_procedure,
       max_readers, modify_date, execute_as
FROM service_queues ORDER BY queue_id;

-- name: catalog_services
SELECT service_id, name, queue_id FROM services ORDER BY service_id;

-- name: catalog_service_contracts
SELECT service_id, service_contract_id FROM service_contract_usages;

-- name: insert_message_type
INSERT INTO message_types (name, validation) VALUES (?, ?) RETURNING message_type_id;

-- name: delete_message_type
DELETE FROM message_types WHERE message_type_id = ?;

-- name: insert_contract
INSERT INTO service_contracts (name) VALUES (?) RETURNING service_contract_id;

-- name: insert_contract_usage
INSERT INTO service_contract_message_usages (service_contract_id, message_type_id, sent_by)
VALUES (?, ?, ?);

-- name: delete_contract
DELETE FROM service_contracts WHERE service_contract_id = ?;

-- name: insert_queue
INSERT INTO service_queues (name, is_receive_enabled, is_retention_enabled,
    is_poison_message_handling_enabled, is_activation_enabled, activation_procedure,
    max_readers, modify_date)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING queue_id;

-- name: update_queue
UPDATE service_queues SET is_receive_enabled = ?, is_retention_enabled = ?,
    is_poison_message_handling_enabled = ?, is_activation_enabled = ?,
    activation_procedure = ?, max_readers = ?, modify_date = ?
WHERE queue_id = ?;

-- name: delete_queue
DELETE FROM service_queues WHERE queue_id = ?;

-- name: set_queue_execute_as
UPDATE service_queues SET execute_as = ? WHERE queue_id = ?;

-- name: drop_queue_activation
UPDATE service_queues SET is_activation_enabled = 0, activation_procedure = NULL,
    max_readers = 0, execute_as = 'SELF', modify_date = ?
WHERE queue_id = ?;

-- name: update_message_type
UPDATE message_types SET validation = ? WHERE message_type_id = ?;

-- name: set_message_type_xml_collection
UPDATE message_types SET xml_collection_id = ? WHERE message_type_id = ?;

-- name: insert_xml_schema_collection
INSERT INTO xml_schema_collections (name, create_date, modify_date) VALUES (?, ?, ?)
RETURNING xml_collection_id;

-- name: insert_xml_schema_document
INSERT INTO xml_schema_documents (xml_collection_id, ordinal, target_namespace, document)
VALUES (?, ?, ?, ?);

-- name: touch_xml_schema_collection
UPDATE xml_schema_collections SET modify_date = ? WHERE xml_collection_id = ?;

-- name: delete_xml_schema_documents
DELETE FROM xml_schema_documents WHERE xml_collection_id = ?;

-- name: delete_xml_schema_collection
DELETE FROM xml_schema_collections WHERE xml_collection_id = ?;

-- name: update_service_queue
UPDATE services SET queue_id = ? WHERE service_id = ?;

-- name: delete_service_contract
DELETE FROM service_contract_usages WHERE service_id = ? AND service_contract_id = ?;

-- name: messages_of_service
SELECT (SELECT count(*) FROM queue_messages WHERE service_id = t.id)
     + (SELECT count(*) FROM conversation_endpoints WHERE service_id = t.id AND state <> 'CD')
FROM (SELECT CAST(? AS BIGINT) AS id) AS t;

-- name: insert_service
INSERT INTO services (name, queue_id) VALUES (?, ?) RETURNING service_id;

-- name: insert_service_contract
INSERT INTO service_contract_usages (service_id, service_contract_id) VALUES (?, ?);

-- name: delete_service
DELETE FROM services WHERE service_id = ?;

-- name: endpoints_using_service
SELECT count(*) FROM conversation_endpoints WHERE service_id = ? AND state <> 'CD';

-- name: endpoints_using_contract
SELECT count(*) FROM conversation_endpoints WHERE service_contract_id = ? AND state <> 'CD';

-- name: messages_using_message_type
SELECT (SELECT count(*) FROM queue_messages WHERE message_type_id = t.id)
     + (SELECT count(*) FROM transmission_queue WHERE message_type_id = t.id)
FROM (SELECT CAST(? AS BIGINT) AS id) AS t;

-- name: delete_queue_messages
DELETE FROM queue_messages WHERE queue_id = ?;

-- name: add_rollback
UPDATE service_queues SET rollback_count = rollback_count + 1 WHERE queue_id = ?
RETURNING rollback_count;

-- name: reset_rollbacks
UPDATE service_queues SET rollback_count = 0 WHERE queue_id = ? AND rollback_count <> 0;

-- name: disable_queue
UPDATE service_queues SET is_receive_enabled = 0, rollback_count = 0, modify_date = ?
WHERE queue_id = ?;

-- name: get_endpoint
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_handle = ?;

-- name: get_far_endpoint
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_id = ? AND is_initiator = ?;

-- name: insert_endpoint
INSERT INTO conversation_endpoints (conversation_handle, conversation_id, is_initiator,
    service_contract_id, conversation_group_id, service_id, queue_id, far_service, lifetime,
    state, dialog_timer, send_sequence, receive_sequence, priority, end_dialog_sequence,
    far_broker_instance, principal_id, far_principal_id, outbound_session_key_identifier,
    inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
    far_certificate)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING endpoint_id;

-- name: update_endpoint
UPDATE conversation_endpoints SET conversation_group_id = ?, state = ?, dialog_timer = ?,
    send_sequence = ?, receive_sequence = ?, end_dialog_sequence = ?, far_broker_instance = ?,
    principal_id = ?, far_principal_id = ?, outbound_session_key_identifier = ?,
    inbound_session_key_identifier = ?, security_timestamp = ?, session_key = ?,
    encryption_requested = ?, far_certificate = ?
WHERE endpoint_id = ?;

-- name: delete_endpoint
DELETE FROM conversation_endpoints WHERE endpoint_id = ?;

-- name: group_queue
SELECT queue_id FROM conversation_endpoints WHERE conversation_group_id = ? LIMIT 1;

-- name: group_services
SELECT DISTINCT service_id FROM conversation_endpoints WHERE conversation_group_id = ?
ORDER BY service_id;

-- name: list_conversation_groups
SELECT conversation_group_id, min(service_id), min(queue_id)
FROM conversation_endpoints GROUP BY conversation_group_id ORDER BY min(endpoint_id);

-- name: due_timers
SELECT conversation_handle FROM conversation_endpoints
WHERE dialog_timer IS NOT NULL AND dialog_timer <= ? ORDER BY dialog_timer LIMIT ?;

-- name: due_lifetimes
SELECT conversation_handle FROM conversation_endpoints
WHERE lifetime <= ? AND state NOT IN ('ER', 'CD') ORDER BY lifetime LIMIT ?;

-- name: next_due_time
SELECT min(t) FROM (
    SELECT min(dialog_timer) AS t FROM conversation_endpoints WHERE dialog_timer IS NOT NULL
    UNION ALL
    SELECT min(lifetime) FROM conversation_endpoints WHERE state NOT IN ('ER', 'CD')) AS due;

-- name: list_endpoints
SELECT e.conversation_handle, e.conversation_id, e.is_initiator, e.service_contract_id,
       e.conversation_group_id, e.service_id, e.far_service, e.lifetime, e.state,
       e.dialog_timer, e.send_sequence, e.receive_sequence, e.priority, e.queue_id,
       e.end_dialog_sequence, e.far_broker_instance, e.principal_id, e.far_principal_id,
       e.outbound_session_key_identifier, e.inbound_session_key_identifier,
       e.security_timestamp, e.encryption_requested
FROM conversation_endpoints e ORDER BY e.endpoint_id;

-- name: insert_message
INSERT INTO queue_messages (queue_id, status, priority, conversation_group_id,
    conversation_handle, conversation_order, rank, message_sequence_number, service_id,
    service_contract_id, message_type_id, validation, message_body, message_id,
    message_enqueue_time)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: group_messages
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id, message_enqueue_time
FROM queue_messages
WHERE conversation_group_id = ? AND status = 1
  AND NOT EXISTS (SELECT 1 FROM conversation_group_claims WHERE conversation_group_id = ?)
ORDER BY priority DESC, conversation_order, rank, message_sequence_number
LIMIT ?;

-- name: conversation_messages
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id, message_enqueue_time
FROM queue_messages
WHERE conversation_group_id = ? AND conversation_handle = ? AND status = 1
  AND NOT EXISTS (SELECT 1 FROM conversation_group_claims WHERE conversation_group_id = ?)
ORDER BY rank, message_sequence_number
LIMIT ?;

-- name: peek
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id, message_enqueue_time
FROM queue_messages WHERE queue_id = ?
ORDER BY priority DESC, queuing_order
LIMIT ?;

-- name: peek_after
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id, message_enqueue_time
FROM queue_messages WHERE queue_id = ? AND queuing_order > ?
ORDER BY queuing_order
LIMIT ?;

-- name: queue_has_ready
SELECT EXISTS (SELECT 1 FROM queue_groups g WHERE queue_id = ?
    AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                    WHERE c.conversation_group_id = g.conversation_group_id));

-- name: queue_counts
SELECT queue_id, status, count(*) FROM queue_messages GROUP BY queue_id, status;

-- name: delete_conversation_messages
DELETE FROM queue_messages WHERE conversation_group_id = ? AND conversation_handle = ?;

-- name: move_conversation_messages
UPDATE queue_messages SET conversation_group_id = ?
WHERE conversation_group_id = ? AND conversation_handle = ?;

-- name: insert_transmission
INSERT INTO transmission_queue (conversation_handle, conversation_id, is_initiator,
    to_service_name, from_service_name, service_contract_id, enqueue_time,
    message_sequence_number, message_type_id, validation, message_body, message_id, arrival,
    transmission_status, priority, lifetime, is_remote, to_broker_instance)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: transmission_pending_at_level
SELECT transmission_id, conversation_handle, conversation_id, is_initiator, to_service_name,
       from_service_name, service_contract_id, enqueue_time, message_sequence_number,
       message_type_id, validation, message_body, message_id, arrival, transmission_status,
       priority, lifetime, is_remote, to_broker_instance
FROM transmission_queue WHERE is_remote = 0 AND priority = ? ORDER BY transmission_id LIMIT ?;

-- The transport's rows (TransportRow): the body only when at most ? bytes (a large one is read
-- alone, when the transmitter offers it: transmission_remote_body), its size always.
-- name: transmission_remote_at_level
SELECT transmission_id, conversation_id, is_initiator, to_service_name, from_service_name,
       service_contract_id, enqueue_time, message_sequence_number, message_type_id, validation,
       message_id, transmission_status, priority, lifetime, to_broker_instance,
       length(message_body), CASE WHEN length(message_body) <= ? THEN message_body END
FROM transmission_queue WHERE is_remote = 1 AND priority = ? ORDER BY transmission_id LIMIT ?;

-- name: transmission_remote_after
SELECT transmission_id, conversation_id, is_initiator, to_service_name, from_service_name,
       service_contract_id, enqueue_time, message_sequence_number, message_type_id, validation,
       message_id, transmission_status, priority, lifetime, to_broker_instance,
       length(message_body), CASE WHEN length(message_body) <= ? THEN message_body END
FROM transmission_queue WHERE is_remote = 1 AND transmission_id > ?
ORDER BY transmission_id LIMIT ?;

-- name: transmission_remote_ids
SELECT transmission_id FROM transmission_queue
WHERE is_remote = 1 AND transmission_id BETWEEN ? AND ?;

-- name: transmission_remote_body
SELECT message_body FROM transmission_queue WHERE transmission_id = ? AND is_remote = 1;

-- name: transmission_exists
SELECT EXISTS (SELECT 1 FROM transmission_queue);

-- name: transmission_exists_of
SELECT EXISTS (SELECT 1 FROM transmission_queue WHERE is_remote = ?);

-- name: transmission_remote_mark
SELECT max(transmission_id), count(CASE WHEN transmission_id <= ? THEN 1 END)
FROM transmission_queue WHERE is_remote = 1;

-- name: delete_transmission_message
DELETE FROM transmission_queue
WHERE conversation_id = ? AND is_initiator = ? AND message_sequence_number = ? AND is_remote = 1;

-- name: set_transmission_message_status
UPDATE transmission_queue SET transmission_status = ?
WHERE conversation_id = ? AND is_initiator = ? AND message_sequence_number = ? AND is_remote = 1;

-- name: transmission_conversation_waiting
SELECT EXISTS (SELECT 1 FROM transmission_queue WHERE conversation_id = ? AND is_initiator = ?);

-- name: delete_transmission
DELETE FROM transmission_queue WHERE transmission_id = ?;

-- name: lock_transmission
SELECT transmission_id FROM transmission_queue WHERE transmission_id = ?;

-- name: set_transmission_status
UPDATE transmission_queue SET transmission_status = ? WHERE transmission_id = ?;

-- name: delete_transmission_of_endpoint
DELETE FROM transmission_queue WHERE conversation_id = ? AND is_initiator = ?;

-- name: list_transmission
SELECT conversation_handle, to_service_name, from_service_name, service_contract_id,
       enqueue_time, message_sequence_number, message_type_id, arrival, message_body,
       transmission_status, priority, to_broker_instance
FROM transmission_queue ORDER BY priority DESC, transmission_id;

-- name: transmission_count
SELECT count(*) FROM transmission_queue;

-- name: catalog_event_notifications
SELECT event_notification_id, name, queue_id, event_type, to_service, conversation_handle
FROM event_notifications ORDER BY event_notification_id;

-- name: insert_event_notification
INSERT INTO event_notifications (name, queue_id, event_type, to_service) VALUES (?, ?, ?, ?)
RETURNING event_notification_id;

-- name: delete_event_notification
DELETE FROM event_notifications WHERE event_notification_id = ?;

-- name: set_event_notification_conversation
UPDATE event_notifications SET conversation_handle = ? WHERE event_notification_id = ?;

-- name: catalog_broker_priorities
SELECT priority_id, name, service_contract_name, local_service_name, remote_service_name, priority
FROM conversation_priorities ORDER BY priority_id;

-- name: insert_broker_priority
INSERT INTO conversation_priorities (name, service_contract_name, local_service_name,
    remote_service_name, priority) VALUES (?, ?, ?, ?, ?) RETURNING priority_id;

-- name: update_broker_priority
UPDATE conversation_priorities SET service_contract_name = ?, local_service_name = ?,
    remote_service_name = ?, priority = ? WHERE priority_id = ?;

-- name: delete_broker_priority
DELETE FROM conversation_priorities WHERE priority_id = ?;

-- name: groups_arrived_since
SELECT DISTINCT conversation_group_id FROM queue_messages
WHERE queuing_order > ? AND queue_id = ? AND status = 1;

-- ALTER DATABASE … SET NEW_BROKER: every conversation goes, without a message (the groups'
-- index rows first, so the queue_messages triggers have no head to move).
-- name: remove_all_endpoints
DELETE FROM conversation_endpoints;

-- name: remove_all_queue_messages
DELETE FROM queue_messages;

-- name: remove_all_queue_groups
DELETE FROM queue_groups;

-- name: remove_all_transmission
DELETE FROM transmission_queue;

-- name: forget_notification_dialogs
UPDATE event_notifications SET conversation_handle = NULL WHERE conversation_handle IS NOT NULL;

-- The transport's catalog (issue 12): certificates, the Service Broker endpoint, logins,
-- CONNECT grants and routes.
-- name: catalog_certificates
SELECT certificate_id, name, certificate_pem, private_key_file, subject, issuer, thumbprint,
       cert_serial_number, start_date, expiry_date, principal_id
FROM certificates ORDER BY certificate_id;

-- name: insert_certificate
INSERT INTO certificates (name, certificate_pem, private_key_file, subject, issuer, thumbprint,
    cert_serial_number, start_date, expiry_date, principal_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING certificate_id;

-- name: delete_certificate
DELETE FROM certificates WHERE certificate_id = ?;

-- name: catalog_service_broker_endpoints
SELECT endpoint_id, name, state, listener_ip, listener_port, certificate_id, encryption,
       algorithm, message_forwarding, message_forward_size
FROM service_broker_endpoints ORDER BY endpoint_id;

-- name: insert_service_broker_endpoint
INSERT INTO service_broker_endpoints (endpoint_id, name, state, listener_ip, listener_port,
    certificate_id, encryption, algorithm, message_forwarding, message_forward_size)
VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING endpoint_id;

-- name: update_service_broker_endpoint
UPDATE service_broker_endpoints SET state = ?, listener_ip = ?, listener_port = ?,
    certificate_id = ?, encryption = ?, algorithm = ?, message_forwarding = ?,
    message_forward_size = ?
WHERE endpoint_id = ?;

-- name: delete_service_broker_endpoint
DELETE FROM service_broker_endpoints WHERE endpoint_id = ?;

-- name: catalog_logins
SELECT login_id, name, certificate_id FROM logins ORDER BY login_id;

-- name: insert_login
INSERT INTO logins (name, certificate_id) VALUES (?, ?) RETURNING login_id;

-- name: delete_login
DELETE FROM logins WHERE login_id = ?;

-- name: catalog_endpoint_grants
SELECT endpoint_id, login_id FROM endpoint_grants ORDER BY endpoint_id, login_id;

-- name: insert_endpoint_grant
INSERT INTO endpoint_grants (endpoint_id, login_id) VALUES (?, ?) RETURNING login_id;

-- name: catalog_routes
SELECT route_id, name, service_name, broker_instance, address, mirror_address, expiry
FROM routes ORDER BY route_id;

-- name: insert_route
INSERT INTO routes (name, service_name, broker_instance, address, mirror_address, expiry)
VALUES (?, ?, ?, ?, ?, ?) RETURNING route_id;

-- name: update_route
UPDATE routes SET service_name = ?, broker_instance = ?, address = ?, mirror_address = ?,
    expiry = ?
WHERE route_id = ?;

-- name: delete_route
DELETE FROM routes WHERE route_id = ?;

-- Database principals, permissions and remote service bindings (issue 13: SEC-3, SEC-4).
-- name: catalog_principals
SELECT principal_id, name, type FROM database_principals ORDER BY principal_id;

-- name: insert_principal
INSERT INTO database_principals (principal_id, name, type)
SELECT CASE WHEN max(principal_id) < 5 THEN 5 ELSE max(principal_id) + 1 END, ?, ?
FROM database_principals
RETURNING principal_id;

-- name: delete_principal
DELETE FROM database_principals WHERE principal_id = ?;

-- name: set_certificate_owner
UPDATE certificates SET principal_id = ? WHERE certificate_id = ?;

-- name: release_certificates_of
UPDATE certificates SET principal_id = NULL WHERE principal_id = ?;

-- name: catalog_permissions
SELECT class, major_id, grantee_principal_id, grantor_principal_id, permission_name, state
FROM database_permissions ORDER BY class, major_id, grantee_principal_id, permission_name;

-- name: insert_permission
INSERT INTO database_permissions (class, major_id, grantee_principal_id, grantor_principal_id,
    permission_name, state)
VALUES (?, ?, ?, ?, ?, 'G');

-- name: delete_permission
DELETE FROM database_permissions
WHERE class = ? AND major_id = ? AND grantee_principal_id = ? AND permission_name = ?;

-- name: delete_permissions_on
DELETE FROM database_permissions WHERE class = ? AND major_id = ?;

-- name: delete_permissions_of
DELETE FROM database_permissions WHERE grantee_principal_id = ?;

-- name: delete_endpoint_grant
DELETE FROM endpoint_grants WHERE endpoint_id = ? AND login_id = ?;

-- name: catalog_remote_service_bindings
SELECT remote_service_binding_id, name, remote_service_name, principal_id, is_anonymous_on
FROM remote_service_bindings ORDER BY remote_service_binding_id;

-- name: insert_remote_service_binding
INSERT INTO remote_service_bindings (name, remote_service_name, principal_id, is_anonymous_on)
VALUES (?, ?, ?, ?) RETURNING remote_service_binding_id;

-- name: delete_remote_service_binding
DELETE FROM remote_service_bindings WHERE remote_service_binding_id = ?;

-- name: remember_closed_conversation
INSERT INTO closed_conversations (conversation_id, is_initiator, forget_after, principal_id,
    far_principal_id, session_key_identifier, security_timestamp, session_key, far_certificate)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (conversation_id, is_initiator) DO NOTHING;

-- name: closed_conversation
SELECT conversation_id, is_initiator, forget_after, principal_id, far_principal_id,
       session_key_identifier, security_timestamp, session_key, far_certificate
FROM closed_conversations WHERE conversation_id = ? AND is_initiator = ?;

-- name: closed_conversation_exists
SELECT EXISTS (
    SELECT 1 FROM closed_conversations WHERE conversation_id = ? AND is_initiator = ?
);

-- name: forget_closed_conversations
DELETE FROM closed_conversations WHERE forget_after <= ? AND NOT EXISTS (
    SELECT 1 FROM transmission_queue t
    WHERE t.conversation_id = closed_conversations.conversation_id
      AND t.is_initiator = closed_conversations.is_initiator
);

-- Stream readers and their conversation-group claims (issue 14, migration 0013).

-- name: stream_reader
SELECT reader, queues, latest, acknowledged, released, renewed, claim_timeout
FROM stream_readers WHERE reader = ?;

-- name: stream_reader_for_update
SELECT reader, queues, latest, acknowledged, released, renewed, claim_timeout
FROM stream_readers WHERE reader = ? FOR UPDATE;

-- name: renew_stream_reader
UPDATE stream_readers SET renewed = ? WHERE reader = ?;

-- name: put_stream_reader
INSERT INTO stream_readers (reader, queues, latest, acknowledged, released, renewed, claim_timeout)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (reader) DO UPDATE SET queues = excluded.queues, latest = excluded.latest,
    acknowledged = excluded.acknowledged, released = excluded.released,
    renewed = excluded.renewed, claim_timeout = excluded.claim_timeout;

-- name: expired_stream_readers
SELECT reader FROM stream_readers
WHERE latest > acknowledged AND latest > released AND renewed + claim_timeout <= ?
ORDER BY reader;

-- name: ready_groups
SELECT conversation_group_id FROM queue_groups g WHERE queue_id = ?
  AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                  WHERE c.conversation_group_id = g.conversation_group_id)
ORDER BY level DESC, head_order
LIMIT ?;

-- name: group_claimed
SELECT EXISTS (SELECT 1 FROM conversation_group_claims WHERE conversation_group_id = ?);

-- name: insert_group_claim
INSERT INTO conversation_group_claims (conversation_group_id, queue_id, reader, batch, claimed_at)
VALUES (?, ?, ?, ?, ?);

-- name: insert_claimed_message
INSERT INTO claimed_messages (reader, batch, part, position, status, priority, queuing_order,
    conversation_group_id, conversation_handle, message_sequence_number, service_id,
    service_contract_id, message_type_id, validation, message_body, message_id, queue_id,
    message_enqueue_time)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: claimed_messages
SELECT status, priority, queuing_order, conversation_group_id, conversation_handle,
       message_sequence_number, service_id, service_contract_id, message_type_id, validation,
       message_body, message_id, queue_id, message_enqueue_time
FROM claimed_messages WHERE reader = ? AND batch > ? AND batch <= ? AND part = ?
ORDER BY batch, position;

-- name: claimed_counts
SELECT batch, part, count(*) FROM claimed_messages WHERE reader = ? AND batch > ? AND batch <= ?
GROUP BY batch, part ORDER BY batch, part;

-- name: claimed_orders
SELECT queue_id, queuing_order FROM claimed_messages WHERE reader = ? AND batch <= ?
ORDER BY batch, part, position;

-- name: delete_claimed_messages
DELETE FROM claimed_messages WHERE reader = ? AND batch <= ?;

-- name: delete_group_claims
DELETE FROM conversation_group_claims WHERE reader = ? AND batch <= ?;

-- name: list_group_claims
SELECT c.conversation_group_id, c.queue_id, c.reader, c.batch, c.claimed_at, r.renewed,
       r.claim_timeout, coalesce(m.n, 0)
FROM conversation_group_claims c
JOIN stream_readers r ON r.reader = c.reader
LEFT JOIN (SELECT reader, batch, conversation_group_id, count(*) AS n FROM claimed_messages
           GROUP BY reader, batch, conversation_group_id) m
  ON m.reader = c.reader AND m.batch = c.batch
 AND m.conversation_group_id = c.conversation_group_id
ORDER BY c.reader, c.batch, c.claimed_at;

-- name: list_stream_readers
SELECT reader, queues, latest, acknowledged, released, renewed, claim_timeout
FROM stream_readers ORDER BY reader;

-- name: publish_statistics
INSERT INTO broker_statistics (instance_id, process, updated, state, snapshot)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (instance_id) DO UPDATE SET process = excluded.process, updated = excluded.updated,
    state = excluded.state, snapshot = excluded.snapshot;

-- name: list_statistics
SELECT instance_id, process, updated, state, snapshot FROM broker_statistics
ORDER BY instance_id;

-- name: ensure_statistics
INSERT INTO broker_statistics (instance_id, process, updated, state, snapshot)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (instance_id) DO NOTHING;

-- name: statistics_for_update
SELECT instance_id, process, updated, state, snapshot FROM broker_statistics
WHERE instance_id = ? FOR UPDATE;

-- name: delete_statistics
DELETE FROM broker_statistics WHERE instance_id = ?;

-- name: endpoint_state_counts
SELECT state, count(*) FROM conversation_endpoints GROUP BY state;

-- name: ready_group_counts
SELECT queue_id, conversation_group_id, count(*) FROM queue_messages WHERE status = 1
GROUP BY queue_id, conversation_group_id;

-- name: transmission_summary
SELECT transmission_status, count(*), min(enqueue_time) FROM transmission_queue
GROUP BY transmission_status;
