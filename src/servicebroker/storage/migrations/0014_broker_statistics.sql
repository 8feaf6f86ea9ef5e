-- What each broker process has done (servicebroker.statistics, issue 15): one row per broker
-- object, its InstanceStatistics as JSON, written by that broker every second while started
-- and at stop. The web console, the Prometheus exporter and `servicebroker diagnose` read the
-- rows from their own processes. A broker that closes adds its counters to the row 'retired'
-- and deletes its own, so the sums only grow. `updated` is real time (liveness).
CREATE TABLE broker_statistics (
    instance_id TEXT PRIMARY KEY,
    process     TEXT NOT NULL,
    updated     DOUBLE PRECISION NOT NULL,
    state       TEXT NOT NULL,   -- running, stopped (may start again) or closed (final)
    snapshot    TEXT NOT NULL
);
