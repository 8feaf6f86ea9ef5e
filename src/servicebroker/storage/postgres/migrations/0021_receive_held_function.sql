-- A RECEIVE in a transaction that holds groups already, in one round trip (issue 29). Before,
-- the client ranked the held groups (reading the queue's watermark, the groups that got
-- messages since, the head of each changed group) and then tried the free groups one
-- statement each: four round trips or more per RECEIVE, and a carrier of the main job
-- RECEIVEs again and again while it holds up to 100 groups.
--
-- servicebroker_receive_held ranks the held groups by their first ready message that the
-- transaction has not received (PRI-9: a held group qualifies by what it has left), compares
-- the best of them with the free groups of the queue in queue_groups order (PRI-12, PRI-13),
-- takes the lock of a free group that comes first without waiting (RCV-2), and returns the
-- chosen group's ready messages not received yet, in RECEIVE order — as servicebroker_receive
-- (migration 17) does for a transaction that holds none, with the same row shape: header rows
-- (message columns NULL; catalog_version NULL here) with the lock key taken (NULL: a held
-- group was chosen, or none) and the groups found locked by other sessions, then the messages.
-- A free group found empty once locked is unlocked and the next one tried, eight at most.
--
-- Arguments: the database's lock-key prefix, the queue, the groups this session holds, the
-- queuing orders this transaction received (from any group), the groups not to try (known
-- locked by others), TOP (NULL: all).
CREATE FUNCTION servicebroker_receive_held(
    prefix TEXT, queue BIGINT, held BYTEA[], received BIGINT[], excluded BYTEA[], top BIGINT
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
    best BYTEA;
    best_level INTEGER;
    best_order BIGINT;
    candidate BYTEA;
    level INTEGER;
    head_order BIGINT;
    chosen BYTEA;
    key BIGINT;
    busy BYTEA[] := '{}';
    emptied INTEGER := 0;
    taken INTEGER;
BEGIN
    EXECUTE 'SELECT g, h.priority, h.queuing_order
               FROM unnest($1) AS g,
            LATERAL (SELECT m.priority, m.queuing_order FROM queue_messages m
                      WHERE m.conversation_group_id = g AND m.queue_id + 0 = $2
                        AND m.status = 1 AND NOT (m.queuing_order = ANY($3))
                        AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                                        WHERE c.conversation_group_id = g)
                      ORDER BY m.priority DESC, m.conversation_order, m.rank,
                               m.message_sequence_number, m.queuing_order
                      LIMIT 1) AS h
              ORDER BY h.priority DESC, h.queuing_order
              LIMIT 1'
       INTO best, best_level, best_order USING held, queue, received;
    excluded := excluded || held;
    LOOP
        chosen := best;
        key := NULL;
        EXECUTE 'SELECT g.conversation_group_id, g.level, g.head_order FROM queue_groups g
                 WHERE g.queue_id = $1 AND NOT (g.conversation_group_id = ANY($2))
                   AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                                   WHERE c.conversation_group_id = g.conversation_group_id)
                 ORDER BY g.level DESC, g.head_order LIMIT 1'
            INTO candidate, level, head_order USING queue, excluded;
        IF candidate IS NOT NULL AND emptied < 8
           AND (best IS NULL OR (-level, head_order) < (-best_level, best_order)) THEN
            excluded := excluded || candidate;
            key := hashtextextended(prefix || encode(candidate, 'hex'), 0);
            IF NOT pg_try_advisory_lock(key) THEN
                busy := busy || candidate;
                CONTINUE;
            END IF;
            chosen := candidate;
        END IF;
        RETURN QUERY SELECT NULL::BIGINT, key, busy, NULL::INTEGER, NULL::INTEGER,
            NULL::BIGINT, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT,
            NULL::BIGINT, NULL::TEXT, NULL::BYTEA, NULL::BYTEA, NULL::BIGINT,
            NULL::DOUBLE PRECISION;
        IF chosen IS NULL THEN
            RETURN;
        END IF;
        RETURN QUERY EXECUTE
            'SELECT NULL::BIGINT, NULL::BIGINT, NULL::BYTEA[], m.status, m.priority, m.queuing_order,
                    m.conversation_group_id, m.conversation_handle, m.message_sequence_number,
                    m.service_id, m.service_contract_id, m.message_type_id, m.validation,
                    m.message_body, m.message_id, m.queue_id, m.message_enqueue_time
             FROM queue_messages m
             WHERE m.conversation_group_id = $1 AND m.status = 1
               AND NOT (m.queuing_order = ANY($3))
               AND NOT EXISTS (SELECT 1 FROM conversation_group_claims c
                               WHERE c.conversation_group_id = $1)
             ORDER BY m.priority DESC, m.conversation_order, m.rank, m.message_sequence_number
             LIMIT $2'
            USING chosen, top, received;
        GET DIAGNOSTICS taken = ROW_COUNT;
        IF taken > 0 OR key IS NULL THEN
            RETURN;
        END IF;
        -- a free group emptied by its last holder meanwhile: give it back and try the next
        PERFORM pg_advisory_unlock(key);
        emptied := emptied + 1;
    END LOOP;
END
$$;
