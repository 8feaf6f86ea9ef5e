-- Named queries of the PostgreSQL storage that differ from the shared ones (../queries.sql),
-- with psycopg placeholders: arrays for sets of values, the queuing-order sequence, advisory
-- locks taken in the statement that finds the group, the activity tables. Each block starts
-- with "-- name: NAME"; a name defined here overrides the shared query of that name.

-- name: message_sequence
SELECT coalesce((SELECT last_order FROM queue_positions WHERE queue_id = %s), 0);

-- name: lock_queue_positions
SELECT queue_id FROM queue_positions WHERE queue_id = ANY(%s::bigint[])
ORDER BY queue_id FOR UPDATE;

-- name: insert_messages
-- One statement for a commit's messages. First (a one-time filter, before any queuing order is
-- drawn) it locks the queues' positions in queue order (already held when the commit locked
-- them), then the groups' existing queue_groups rows in (queue, group) order, as every commit
-- locks groups; the rows go in in array order (send order); each queue's last_order becomes
-- its highest new queuing order.
WITH ins AS (
    INSERT INTO queue_messages (queue_id, status, priority, conversation_group_id,
        conversation_handle, conversation_order, rank, message_sequence_number, service_id,
        service_contract_id, message_type_id, validation, message_body, message_id,
        message_enqueue_time)
    SELECT * FROM unnest(%b::bigint[], %b::int[], %b::int[], %b::bytea[], %b::bytea[],
        %b::bigint[], %b::int[], %b::bigint[], %b::bigint[], %b::bigint[], %b::bigint[],
        %b::text[], %b::bytea[], %b::bytea[], %b::float8[])
    WHERE (SELECT count(*) FROM (SELECT 1 FROM queue_positions
                                 WHERE queue_id = ANY(%b::bigint[])
                                 ORDER BY queue_id FOR UPDATE) AS positions)
        + (SELECT count(*) FROM (SELECT 1 FROM queue_groups g
                                 WHERE (g.conversation_group_id, g.queue_id) IN (
                                     SELECT * FROM unnest(%b::bytea[], %b::bigint[]))
                                 ORDER BY g.queue_id, g.conversation_group_id
                                 FOR UPDATE OF g) AS groups) >= 0
    RETURNING queue_id, queuing_order)
UPDATE queue_positions p SET last_order = n.last
FROM (SELECT queue_id, max(queuing_order) AS last FROM ins GROUP BY queue_id) AS n
WHERE p.queue_id = n.queue_id;

-- name: held_group_head
-- "queue_id + 0": read by the group's index, in RECEIVE order (migration 20), never by the
-- queue's, which would sort every ready message of the queue to find the group's first.
SELECT priority, queuing_order FROM queue_messages
WHERE conversation_group_id = %s AND queue_id + 0 = %s AND status = 1
  AND NOT (queuing_order = ANY(%s))
  AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                  WHERE c.conversation_group_id = queue_messages.conversation_group_id)
ORDER BY priority DESC, conversation_order, rank, message_sequence_number, queuing_order
LIMIT 1;

-- name: finish_received
-- Migration 18: ends received rows (retain: status 0, else deleted), their queue_groups rows
-- locked first in (queue, group) order, as inserting commits lock them — commits that touch the
-- same groups wait for each other instead of deadlocking; rows missing raise SB001 with the
-- message given (the broker's bools come as 0/1).
SELECT servicebroker_finish_received(%s::bigint[], %s::int <> 0, %s::text);

-- name: get_endpoints
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_handle = ANY(%b::bytea[]);

-- name: get_conversations
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_id = ANY(%b::bytea[]);

-- name: update_endpoints
-- update_endpoint for many endpoints in one statement: the endpoint ids, then each changeable
-- column as an array in update_endpoint's order (one element per endpoint, each id once; the
-- commit locked the rows when it read them).
UPDATE conversation_endpoints e
SET conversation_group_id = u.conversation_group_id, state = u.state,
    dialog_timer = u.dialog_timer, send_sequence = u.send_sequence,
    receive_sequence = u.receive_sequence, end_dialog_sequence = u.end_dialog_sequence,
    far_broker_instance = u.far_broker_instance, principal_id = u.principal_id,
    far_principal_id = u.far_principal_id,
    outbound_session_key_identifier = u.outbound_session_key_identifier,
    inbound_session_key_identifier = u.inbound_session_key_identifier,
    security_timestamp = u.security_timestamp, session_key = u.session_key,
    encryption_requested = u.encryption_requested, far_certificate = u.far_certificate
FROM unnest(%b::bigint[], %b::bytea[], %b::text[], %b::float8[], %b::bigint[], %b::bigint[],
            %b::bigint[], %b::text[], %b::int[], %b::int[], %b::text[], %b::text[],
            %b::float8[], %b::bytea[], %b::int[], %b::text[])
    AS u(endpoint_id, conversation_group_id, state, dialog_timer, send_sequence,
         receive_sequence, end_dialog_sequence, far_broker_instance, principal_id,
         far_principal_id, outbound_session_key_identifier, inbound_session_key_identifier,
         security_timestamp, session_key, encryption_requested, far_certificate)
WHERE e.endpoint_id = u.endpoint_id;

-- name: lock_unchanged
-- Migration 19: a commit writing from copies of its endpoints (not read again) locks them as
-- get_conversations_locked does and raises SB002 if any changed since its copy (row version
-- xmin), appeared or went, or if a local message waits in the transmission queue.
SELECT servicebroker_lock_unchanged(%b::bytea[], %b::bigint[], %b::bigint[]);

-- name: get_conversation_versions
-- The endpoints of the conversations as this transaction leaves them, each with its row version
-- (xmin): read just before COMMIT, kept as copies for the process's next commits.
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate, xmin::text::bigint
FROM conversation_endpoints WHERE conversation_id = ANY(%b::bytea[]);

-- Inside a commit, endpoints are read locked (FOR UPDATE: commits run in parallel, and each
-- writes the rows it read), a commit's many in endpoint_id order so commits never deadlock.
-- name: get_conversations_locked
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_id = ANY(%b::bytea[]) ORDER BY endpoint_id FOR UPDATE;

-- name: get_endpoint_locked
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_handle = %s FOR UPDATE;

-- name: get_far_endpoint_locked
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate
FROM conversation_endpoints WHERE conversation_id = %s AND is_initiator = %s FOR UPDATE;

-- name: get_endpoint_and_lock
SELECT endpoint_id, conversation_handle, conversation_id, is_initiator, service_contract_id,
       conversation_group_id, service_id, queue_id, far_service, lifetime, state, dialog_timer,
       send_sequence, receive_sequence, priority, end_dialog_sequence, far_broker_instance,
       principal_id, far_principal_id, outbound_session_key_identifier,
       inbound_session_key_identifier, security_timestamp, session_key, encryption_requested,
       far_certificate, k, pg_try_advisory_lock(k)
FROM (SELECT e.*, hashtextextended(%s || encode(e.conversation_group_id, 'hex'), 0) AS k
      FROM conversation_endpoints e WHERE e.conversation_handle = %s) AS e;

-- name: get_endpoints_and_lock
-- get_endpoint_and_lock for several handles: each group's lock tried once, however many of
-- the endpoints are in it (a session's advisory locks stack, and one unlock must free it).
WITH e AS MATERIALIZED (
    SELECT c.*, hashtextextended(%s || encode(c.conversation_group_id, 'hex'), 0) AS k
    FROM conversation_endpoints c WHERE c.conversation_handle = ANY(%b::bytea[])),
l AS MATERIALIZED (
    SELECT k, CASE WHEN k = ANY(%s::bigint[]) THEN true ELSE pg_try_advisory_lock(k) END AS got
    FROM (SELECT DISTINCT k FROM e) AS d)
SELECT e.endpoint_id, e.conversation_handle, e.conversation_id, e.is_initiator,
       e.service_contract_id, e.conversation_group_id, e.service_id, e.queue_id, e.far_service,
       e.lifetime, e.state, e.dialog_timer, e.send_sequence, e.receive_sequence, e.priority,
       e.end_dialog_sequence, e.far_broker_instance, e.principal_id, e.far_principal_id,
       e.outbound_session_key_identifier, e.inbound_session_key_identifier,
       e.security_timestamp, e.session_key, e.encryption_requested, e.far_certificate, e.k,
       l.got
FROM e JOIN l USING (k);

-- name: lock_transmission
SELECT transmission_id FROM transmission_queue WHERE transmission_id = %s FOR UPDATE;

-- name: try_lock_group
SELECT k, pg_try_advisory_lock(k)
FROM (SELECT hashtextextended(%s || encode(%s::bytea, 'hex'), 0) AS k) AS key;

-- name: advisory_try_lock
SELECT pg_try_advisory_lock(%s);

-- name: advisory_unlock
SELECT pg_advisory_unlock(%s);

-- name: lock_first_candidate
SELECT conversation_group_id, level, head_order, k, pg_try_advisory_lock(k)
FROM (SELECT conversation_group_id, level, head_order,
             hashtextextended(%s || encode(conversation_group_id, 'hex'), 0) AS k
      FROM queue_groups g
      WHERE queue_id = %s AND NOT (conversation_group_id = ANY(%b::bytea[]))
        AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                        WHERE c.conversation_group_id = g.conversation_group_id)
      ORDER BY level DESC, head_order
      LIMIT 1) AS c;

-- name: receive_first_group
-- RECEIVE of a transaction holding no group, in one round trip (migration 17).
SELECT * FROM servicebroker_receive(%s::text, %s::bigint, %b::bytea[], %s::bigint, %s::bigint);

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

-- name: locked_groups
-- the groups of the array whose advisory lock some session holds (pg_locks: a bigint key is
-- classid, the high 32 bits, and objid, the low ones, with objsubid 1); nothing is taken
WITH g AS (SELECT id, hashtextextended(%s || encode(id, 'hex'), 0) AS k
           FROM unnest(%b::bytea[]) AS id)
SELECT g.id FROM g
WHERE EXISTS (SELECT 1 FROM pg_locks l
              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND ((l.classid::bigint << 32) | l.objid::bigint) = g.k);
