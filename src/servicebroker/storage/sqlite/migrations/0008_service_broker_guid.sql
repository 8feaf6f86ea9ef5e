-- The database's Service Broker identifier (sys.databases service_broker_guid): made when the
-- database is created, or when an older one migrates to this version; kept across restarts;
-- replaced only by ALTER DATABASE … SET NEW_BROKER (Broker.alter_database(new_broker=True),
-- `servicebroker init --new-broker`). A random version-4 UUID in its canonical text form, the
-- broker_settings row 'service_broker_guid'.
INSERT INTO broker_settings (name, value)
SELECT 'service_broker_guid',
       substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-'
       || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(h, 18, 3) || '-'
       || substr(h, 21, 12)
FROM (SELECT lower(hex(randomblob(16))) AS h) AS r;
