-- The per-group index queue_groups kept once per statement, not once per row (issue 29). A
-- commit inserts its messages with one INSERT and a RECEIVE's commit deletes them with one
-- DELETE; the row trigger of migration 1 ran its PL/pgSQL once per message. Two statement
-- triggers now read the statement's rows as a transition table:
--   * after INSERT: each (group, queue) of the new ready rows gets its best new row as head,
--     unless its head is already better (the same upsert as the row trigger, one per group);
--   * after DELETE: the groups whose head was deleted lose their row and get the best ready
--     row left, if any.
-- Both lock the groups' rows in (queue, group) order first, the order every commit locks them
-- in. UPDATE (RETENTION's status 0, MOVE CONVERSATION, a priority or order change) keeps the
-- row trigger: PostgreSQL gives no transition table to a trigger with a column list.
--
-- The index a group's messages are read by ends with queuing_order, the last key of RECEIVE
-- order, so that the head of a group is its index's first entry: finding the next head when
-- a head is received read every ready message of the group (a backlog of thousands on one
-- conversation made each RECEIVE's commit scan them all). The queries that find a head
-- compare queue_id as "queue_id + 0", so that the planner, which cannot know how many ready
-- messages a queue holds, never walks the queue's index (queue_messages_ready) and sorts all
-- its ready messages to find one group's first; the row trigger's function gets the same.
DROP INDEX queue_messages_group;
CREATE INDEX queue_messages_group ON queue_messages
    (conversation_group_id, status, priority DESC, conversation_order, rank,
     message_sequence_number, queuing_order);

CREATE OR REPLACE FUNCTION queue_groups_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.status = 1 THEN
        DELETE FROM queue_groups
        WHERE conversation_group_id = OLD.conversation_group_id AND queue_id = OLD.queue_id
          AND head_order = OLD.queuing_order;
        IF FOUND THEN
            INSERT INTO queue_groups
            SELECT conversation_group_id, queue_id, priority, conversation_order, rank,
                   message_sequence_number, queuing_order
            FROM queue_messages
            WHERE conversation_group_id = OLD.conversation_group_id AND status = 1
              AND queue_id + 0 = OLD.queue_id
            ORDER BY priority DESC, conversation_order, rank, message_sequence_number,
                     queuing_order
            LIMIT 1
            ON CONFLICT (conversation_group_id, queue_id) DO NOTHING;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status = 1 THEN
        INSERT INTO queue_groups VALUES (NEW.conversation_group_id, NEW.queue_id, NEW.priority,
            NEW.conversation_order, NEW.rank, NEW.message_sequence_number, NEW.queuing_order)
        ON CONFLICT (conversation_group_id, queue_id) DO UPDATE SET
            level = EXCLUDED.level,
            head_conversation_order = EXCLUDED.head_conversation_order,
            head_rank = EXCLUDED.head_rank,
            head_sequence = EXCLUDED.head_sequence,
            head_order = EXCLUDED.head_order
        WHERE (-EXCLUDED.level, EXCLUDED.head_conversation_order, EXCLUDED.head_rank,
               EXCLUDED.head_sequence, EXCLUDED.head_order)
            < (-queue_groups.level, queue_groups.head_conversation_order, queue_groups.head_rank,
               queue_groups.head_sequence, queue_groups.head_order);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER queue_groups_keep ON queue_messages;

CREATE TRIGGER queue_groups_keep
AFTER UPDATE OF status, conversation_group_id, queue_id, priority, conversation_order
ON queue_messages FOR EACH ROW EXECUTE FUNCTION queue_groups_keep();

CREATE FUNCTION queue_groups_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM queue_groups g
     WHERE (g.conversation_group_id, g.queue_id) IN (
           SELECT conversation_group_id, queue_id FROM inserted_rows WHERE status = 1)
     ORDER BY g.queue_id, g.conversation_group_id
       FOR UPDATE OF g;
    INSERT INTO queue_groups AS g
    SELECT DISTINCT ON (queue_id, conversation_group_id)
           conversation_group_id, queue_id, priority, conversation_order, rank,
           message_sequence_number, queuing_order
      FROM inserted_rows
     WHERE status = 1
     ORDER BY queue_id, conversation_group_id, priority DESC, conversation_order, rank,
              message_sequence_number, queuing_order
    ON CONFLICT (conversation_group_id, queue_id) DO UPDATE SET
        level = EXCLUDED.level,
        head_conversation_order = EXCLUDED.head_conversation_order,
        head_rank = EXCLUDED.head_rank,
        head_sequence = EXCLUDED.head_sequence,
        head_order = EXCLUDED.head_order
    WHERE (-EXCLUDED.level, EXCLUDED.head_conversation_order, EXCLUDED.head_rank,
           EXCLUDED.head_sequence, EXCLUDED.head_order)
        < (-g.level, g.head_conversation_order, g.head_rank, g.head_sequence, g.head_order);
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_groups_inserted
AFTER INSERT ON queue_messages REFERENCING NEW TABLE AS inserted_rows
FOR EACH STATEMENT EXECUTE FUNCTION queue_groups_inserted();

CREATE FUNCTION queue_groups_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    groups BYTEA[];
    queues BIGINT[];
BEGIN
    PERFORM 1 FROM queue_groups g
     WHERE (g.conversation_group_id, g.queue_id, g.head_order) IN (
           SELECT conversation_group_id, queue_id, queuing_order FROM deleted_rows
            WHERE status = 1)
     ORDER BY g.queue_id, g.conversation_group_id
       FOR UPDATE OF g;
    WITH gone AS (
        DELETE FROM queue_groups g
         USING deleted_rows d
         WHERE d.status = 1 AND g.conversation_group_id = d.conversation_group_id
           AND g.queue_id = d.queue_id AND g.head_order = d.queuing_order
        RETURNING g.conversation_group_id, g.queue_id)
    SELECT array_agg(conversation_group_id ORDER BY queue_id, conversation_group_id),
           array_agg(queue_id ORDER BY queue_id, conversation_group_id)
      INTO groups, queues
      FROM gone;
    IF groups IS NOT NULL THEN
        INSERT INTO queue_groups
        SELECT head.*
          FROM unnest(groups, queues) AS k(conversation_group_id, queue_id),
       LATERAL (SELECT m.conversation_group_id, m.queue_id, m.priority, m.conversation_order,
                       m.rank, m.message_sequence_number, m.queuing_order
                  FROM queue_messages m
                 WHERE m.conversation_group_id = k.conversation_group_id
                   AND m.status = 1 AND m.queue_id + 0 = k.queue_id
                 ORDER BY m.priority DESC, m.conversation_order, m.rank,
                          m.message_sequence_number, m.queuing_order
                 LIMIT 1) AS head
        ON CONFLICT (conversation_group_id, queue_id) DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_groups_deleted
AFTER DELETE ON queue_messages REFERENCING OLD TABLE AS deleted_rows
FOR EACH STATEMENT EXECUTE FUNCTION queue_groups_deleted();
