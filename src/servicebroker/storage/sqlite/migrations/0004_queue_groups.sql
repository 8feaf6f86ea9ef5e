-- Conversation groups that have ready messages: one row per (group, queue) naming the group's
-- level (PRI-9: the highest priority among its ready messages) and its head, the message a
-- RECEIVE would return first (PRI-12). Triggers keep it in the same transaction as the messages,
-- so RECEIVE and GET CONVERSATION GROUP walk groups through queue_groups_next (PRI-12, PRI-13)
-- instead of the queue's messages; a group held by another transaction costs one index entry.
CREATE TABLE queue_groups (
    conversation_group_id   BLOB NOT NULL,
    queue_id                INTEGER NOT NULL,
    level                   INTEGER NOT NULL,
    head_conversation_order INTEGER NOT NULL,
    head_rank               INTEGER NOT NULL,
    head_sequence           INTEGER NOT NULL,
    head_order              INTEGER NOT NULL,
    PRIMARY KEY (conversation_group_id, queue_id)
) WITHOUT ROWID;
CREATE INDEX queue_groups_next ON queue_groups (queue_id, level DESC, head_order);

INSERT INTO queue_groups
SELECT conversation_group_id, queue_id, priority, conversation_order, rank,
       message_sequence_number, queuing_order
FROM (SELECT *, row_number() OVER (
          PARTITION BY conversation_group_id, queue_id
          ORDER BY priority DESC, conversation_order, rank, message_sequence_number, queuing_order
      ) AS n
      FROM queue_messages WHERE status = 1)
WHERE n = 1;

-- A ready message becomes its group's head when it comes first in RECEIVE order.
CREATE TRIGGER queue_groups_after_insert AFTER INSERT ON queue_messages WHEN NEW.status = 1
BEGIN
    INSERT INTO queue_groups VALUES (NEW.conversation_group_id, NEW.queue_id, NEW.priority,
        NEW.conversation_order, NEW.rank, NEW.message_sequence_number, NEW.queuing_order)
    ON CONFLICT (conversation_group_id, queue_id) DO UPDATE SET
        level = excluded.level,
        head_conversation_order = excluded.head_conversation_order,
        head_rank = excluded.head_rank,
        head_sequence = excluded.head_sequence,
        head_order = excluded.head_order
    WHERE (-excluded.level, excluded.head_conversation_order, excluded.head_rank,
           excluded.head_sequence, excluded.head_order)
        < (-level, head_conversation_order, head_rank, head_sequence, head_order);
END;

-- A group's head leaving (received, ended, moved, retained) makes the next message the head.
CREATE TRIGGER queue_groups_after_delete AFTER DELETE ON queue_messages
WHEN OLD.status = 1 AND EXISTS (SELECT 1 FROM queue_groups
    WHERE conversation_group_id = OLD.conversation_group_id AND queue_id = OLD.queue_id
      AND head_order = OLD.queuing_order)
BEGIN
    DELETE FROM queue_groups
    WHERE conversation_group_id = OLD.conversation_group_id AND queue_id = OLD.queue_id
      AND head_order = OLD.queuing_order;
    INSERT INTO queue_groups
    SELECT conversation_group_id, queue_id, priority, conversation_order, rank,
           message_sequence_number, queuing_order
    FROM queue_messages
    WHERE conversation_group_id = OLD.conversation_group_id AND status = 1
      AND queue_id = OLD.queue_id
      AND NOT EXISTS (SELECT 1 FROM queue_groups
                      WHERE conversation_group_id = OLD.conversation_group_id
                        AND queue_id = OLD.queue_id)
    ORDER BY priority DESC, conversation_order, rank, message_sequence_number, queuing_order
    LIMIT 1;
END;

CREATE TRIGGER queue_groups_after_update
AFTER UPDATE OF status, conversation_group_id, queue_id, priority, conversation_order
ON queue_messages
BEGIN
    DELETE FROM queue_groups
    WHERE OLD.status = 1
      AND conversation_group_id = OLD.conversation_group_id AND queue_id = OLD.queue_id
      AND head_order = OLD.queuing_order;
    INSERT INTO queue_groups
    SELECT conversation_group_id, queue_id, priority, conversation_order, rank,
           message_sequence_number, queuing_order
    FROM queue_messages
    WHERE OLD.status = 1
      AND conversation_group_id = OLD.conversation_group_id AND status = 1
      AND queue_id = OLD.queue_id
      AND NOT EXISTS (SELECT 1 FROM queue_groups
                      WHERE conversation_group_id = OLD.conversation_group_id
                        AND queue_id = OLD.queue_id)
    ORDER BY priority DESC, conversation_order, rank, message_sequence_number, queuing_order
    LIMIT 1;
    INSERT INTO queue_groups
    SELECT NEW.conversation_group_id, NEW.queue_id, NEW.priority, NEW.conversation_order,
           NEW.rank, NEW.message_sequence_number, NEW.queuing_order
    WHERE NEW.status = 1
    ON CONFLICT (conversation_group_id, queue_id) DO UPDATE SET
        level = excluded.level,
        head_conversation_order = excluded.head_conversation_order,
        head_rank = excluded.head_rank,
        head_sequence = excluded.head_sequence,
        head_order = excluded.head_order
    WHERE (-excluded.level, excluded.head_conversation_order, excluded.head_rank,
           excluded.head_sequence, excluded.head_order)
        < (-level, head_conversation_order, head_rank, head_sequence, head_order);
END;
