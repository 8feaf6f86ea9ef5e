-- Commits run in parallel (no database-wide commit lock any more). Where an order across
-- commits is needed, it is per queue: a transaction that puts messages on a queue first locks
-- the queue's row here, takes its queuing orders from the sequence while holding it, and
-- records the highest one in the same row before it commits. So on each queue, queuing_order
-- is commit order, and last_order is a watermark: every committed message of the queue has an
-- order at most it, every message committed later an order above it.
CREATE TABLE queue_positions (
    queue_id   BIGINT PRIMARY KEY,
    last_order BIGINT NOT NULL
);
INSERT INTO queue_positions (queue_id, last_order)
SELECT queue_id, coalesce(max(queuing_order), 0) FROM queue_messages GROUP BY queue_id;
INSERT INTO queue_positions (queue_id, last_order)
SELECT queue_id, 0 FROM service_queues ON CONFLICT (queue_id) DO NOTHING;

-- Every queue has its row from its creation to its drop.
CREATE FUNCTION queue_positions_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queue_positions (queue_id, last_order) VALUES (NEW.queue_id, 0)
        ON CONFLICT (queue_id) DO NOTHING;
    ELSE
        DELETE FROM queue_positions WHERE queue_id = OLD.queue_id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER queue_positions_keep AFTER INSERT OR DELETE ON service_queues
FOR EACH ROW EXECUTE FUNCTION queue_positions_keep();
