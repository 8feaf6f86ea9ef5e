-- The database's Service Broker identifier (sys.databases service_broker_guid): made when the
-- broker schema is created, or when an older one migrates to this version; kept across
-- restarts; replaced only by ALTER DATABASE … SET NEW_BROKER (Broker.alter_database(
-- new_broker=True), `servicebroker init --new-broker`). A random version-4 UUID
-- (gen_random_uuid, PostgreSQL 13 and later) in its canonical text form, the broker_settings
-- row 'service_broker_guid'.
INSERT INTO broker_settings (name, value) VALUES ('service_broker_guid', gen_random_uuid()::text);
