-- Transmission order by level (PRI-14): each level's oldest messages through one index.
-- The database option HONOR_BROKER_PRIORITY (PRI-16) is the broker_settings row
-- 'honor_broker_priority' ('1' ON; missing or '0' OFF, the default).
CREATE INDEX transmission_queue_level ON transmission_queue (priority, transmission_id);
