-- A RECEIVE's commit in one round trip (issue 29). servicebroker_finish_received ends the
-- messages a transaction received — deletes them, or with retain (queue RETENTION ON, RCV-3)
-- sets their status to 0 — after locking their groups' queue_groups rows in (queue, group)
-- order, as inserting commits lock them. When fewer rows than given are there (a DROP SERVICE,
-- DROP QUEUE or NEW_BROKER committed meanwhile removed some), it raises SQLSTATE SB001 with the
-- message the caller gave (none given: no check): the write transaction fails and nothing of
-- it is committed. So the call needs no answer, and travels with COMMIT.
--
-- Each statement runs with EXECUTE, planned for the tables as they are at that call (as
-- servicebroker_receive's, migration 17).
CREATE FUNCTION servicebroker_finish_received(orders BIGINT[], retain BOOLEAN, removed TEXT)
RETURNS VOID
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    ended BIGINT;
BEGIN
    EXECUTE 'SELECT count(*) FROM (SELECT 1 FROM queue_groups g
                WHERE (g.conversation_group_id, g.queue_id) IN (
                    SELECT conversation_group_id, queue_id FROM queue_messages
                     WHERE queuing_order = ANY($1))
                ORDER BY g.queue_id, g.conversation_group_id
                  FOR UPDATE OF g) AS locked' USING orders;
    IF retain THEN
        EXECUTE 'UPDATE queue_messages SET status = 0 WHERE queuing_order = ANY($1)' USING orders;
    ELSE
        EXECUTE 'DELETE FROM queue_messages WHERE queuing_order = ANY($1)' USING orders;
    END IF;
    GET DIAGNOSTICS ended = ROW_COUNT;
    IF removed IS NOT NULL AND ended < cardinality(orders) THEN
        RAISE EXCEPTION USING ERRCODE = 'SB001', MESSAGE = removed;
    END IF;
END
$$;
