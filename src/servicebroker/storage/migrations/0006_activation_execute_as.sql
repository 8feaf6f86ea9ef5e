-- A queue's ACTIVATION ... EXECUTE AS SELF | OWNER | 'user_name' (CREATE QUEUE reference),
-- stored and shown (sys.service_queues), not enforced: there are no database principals here.
ALTER TABLE service_queues ADD COLUMN execute_as TEXT NOT NULL DEFAULT 'SELF';
