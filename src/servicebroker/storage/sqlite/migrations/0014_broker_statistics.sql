-- What each broker process has done (servicebroker.statistics, issue 15): one row per broker
-- object, its InstanceStatistics as JSON, written by that broker every second while started,
-- at stop and at close. The web console, the Prometheus exporter and `servicebroker diagnose`
-- read the rows from their own processes. The leader folds the rows of brokers that closed, or
-- went silent for an hour (a killed process), into the row 'retired', so the sums only grow.
CREATE TABLE broker_statistics (
    instance_id TEXT PRIMARY KEY,
    process     TEXT NOT NULL,
    updated     REAL NOT NULL,
    state       TEXT NOT NULL,   -- running, stopped (may start again) or closed (final)
    snapshot    TEXT NOT NULL
);
