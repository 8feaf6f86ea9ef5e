-- RECEIVE in one round trip (issue 29). servicebroker_receive finds the highest-priority
-- conversation group of a queue that no session holds, takes its advisory lock without waiting
-- and returns the group's ready messages in RECEIVE order (PRI-12, SYS-2), all in one call.
--
-- Each statement runs with EXECUTE: planned for the queue as it is at that call (static SQL
-- first planned on an empty queue kept a sequential scan and sort at every later call). The
-- function is VOLATILE and runs at READ COMMITTED (the broker's sessions are set so), so each
-- statement takes a snapshot of its own: the messages are read after the lock is had, and are
-- those the group's last holder left at its commit — never rows it deleted.
--
-- Arguments: the database's lock-key prefix, the queue, the groups not to try (held by this
-- session or known locked by others), TOP (NULL: all), and the catalog version the caller
-- checked the RECEIVE against (NULL: none).
-- Rows: first a header (message columns NULL) with the stored catalog version, the lock key of
-- the group now held (NULL: none) and the groups found locked by other sessions; then the
-- group's messages, in order. When the stored catalog version is not the caller's, the header
-- alone comes back and nothing is locked: the caller checks the RECEIVE against the new
-- catalog first (the queue may have been dropped or disabled, a permission revoked).
-- A group found empty once locked (its last holder took its last messages) is unlocked and the
-- next is tried, at most eight times.
CREATE FUNCTION servicebroker_receive(
    prefix TEXT, queue BIGINT, excluded BYTEA[], top BIGINT, checked_version BIGINT
)
RETURNS TABLE (
    catalog_version         BIGINT,
    lock_key                BIGINT,
    locked_elsewhere        BYTEA[],
    status                  INTEGER,
    priority                INTEGER,
    queuing_order           BIGINT,
    conversation_group_id   BYTEA,
    conversation_handle     BYTEA,
    message_sequence_number BIGINT,
    service_id              BIGINT,
    service_contract_id     BIGINT,
    message_type_id         BIGINT,
    validation              TEXT,
    message_body            BYTEA,
    message_id              BYTEA,
    queue_id                BIGINT,
    message_enqueue_time    DOUBLE PRECISION
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    candidate BYTEA;
    key BIGINT;
    busy BYTEA[] := '{}';
    emptied INTEGER := 0;
    taken INTEGER;
    stored BIGINT;
BEGIN
    stored := (SELECT s.value::BIGINT FROM broker_settings s WHERE s.name = 'catalog_version');
    IF checked_version IS NOT NULL AND stored <> checked_version THEN
        RETURN QUERY SELECT stored, NULL::BIGINT, busy, NULL::INTEGER, NULL::INTEGER,
            NULL::BIGINT, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT,
            NULL::BIGINT, NULL::TEXT, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT,
            NULL::DOUBLE PRECISION;
        RETURN;
    END IF;
    LOOP
        EXECUTE 'SELECT g.conversation_group_id FROM queue_groups g
                 WHERE g.queue_id = $1 AND NOT (g.conversation_group_id = ANY($2))
                   AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                                   WHERE c.conversation_group_id = g.conversation_group_id)
                 ORDER BY g.level DESC, g.head_order LIMIT 1'
            INTO candidate USING queue, excluded;
        IF candidate IS NULL OR emptied >= 8 THEN
            RETURN QUERY SELECT stored, NULL::BIGINT, busy, NULL::INTEGER, NULL::INTEGER,
                NULL::BIGINT, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT,
                NULL::BIGINT, NULL::TEXT, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT,
                NULL::DOUBLE PRECISION;
            RETURN;
        END IF;
        excluded := excluded || candidate;
        key := hashtextextended(prefix || encode(candidate, 'hex'), 0);
        IF NOT pg_try_advisory_lock(key) THEN
            busy := busy || candidate;
            CONTINUE;
        END IF;
        RETURN QUERY SELECT stored, key, busy, NULL::INTEGER, NULL::INTEGER, NULL::BIGINT,
            NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT,
            NULL::TEXT, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::DOUBLE PRECISION;
        RETURN QUERY EXECUTE
            'SELECT NULL::BIGINT, NULL::BIGINT, NULL::BYTEA[], m.status, m.priority, m.queuing_order,
                    m.conversation_group_id, m.conversation_handle, m.message_sequence_number,
                    m.service_id, m.service_contract_id, m.message_type_id, m.validation,
                    m.message_body, m.message_id, m.queue_id, m.message_enqueue_time
             FROM queue_messages m
             WHERE m.conversation_group_id = $1 AND m.status = 1
               AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                               WHERE c.conversation_group_id = $1)
             ORDER BY m.priority DESC, m.conversation_order, m.rank, m.message_sequence_number
             LIMIT $2'
            USING candidate, top;
        GET DIAGNOSTICS taken = ROW_COUNT;
        IF taken > 0 THEN
            RETURN;
        END IF;
        -- emptied by its last holder meanwhile: give it back and try the next (the header
        -- row already sent stays; the caller reads the last header before the messages)
        PERFORM pg_advisory_unlock(key);
        emptied := emptied + 1;
    END LOOP;
END
$$;
