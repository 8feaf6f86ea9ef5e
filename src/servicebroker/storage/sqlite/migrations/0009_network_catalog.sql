-- The catalog of the transport between broker instances (issue 12): certificates (sys.certificates),
-- the one Service Broker endpoint (sys.service_broker_endpoints; SQL Server allows one per
-- instance), logins made FROM CERTIFICATE, the CONNECT permissions on the endpoint (SEC-1) and the
-- routing table (sys.routes, RTE-1). Times are broker-clock seconds; flags 0/1.

CREATE TABLE certificates (
    certificate_id   INTEGER PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    certificate_pem  TEXT NOT NULL,          -- read at CREATE CERTIFICATE, kept in the database
    private_key_file TEXT,                   -- the key's path; read when the endpoint starts
    subject          TEXT NOT NULL,
    issuer           TEXT NOT NULL,
    thumbprint       TEXT NOT NULL,          -- sha1 of the DER, hex
    cert_serial_number TEXT NOT NULL,
    start_date       REAL NOT NULL,          -- seconds since the epoch
    expiry_date      REAL NOT NULL
);

-- At most one row: the CHECK on the key keeps a second endpoint out.
CREATE TABLE service_broker_endpoints (
    endpoint_id          INTEGER PRIMARY KEY CHECK (endpoint_id = 1),
    name                 TEXT NOT NULL UNIQUE,
    state                TEXT NOT NULL CHECK (state IN ('STARTED', 'STOPPED', 'DISABLED')),
    listener_ip          TEXT NOT NULL,
    listener_port        INTEGER NOT NULL,
    certificate_id       INTEGER NOT NULL REFERENCES certificates (certificate_id),
    encryption           TEXT NOT NULL CHECK (encryption IN ('DISABLED', 'SUPPORTED', 'REQUIRED')),
    algorithm            TEXT NOT NULL,
    message_forwarding   INTEGER NOT NULL,
    message_forward_size INTEGER NOT NULL
);

CREATE TABLE logins (
    login_id       INTEGER PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    certificate_id INTEGER NOT NULL REFERENCES certificates (certificate_id)
);

CREATE TABLE endpoint_grants (
    endpoint_id INTEGER NOT NULL REFERENCES service_broker_endpoints (endpoint_id)
        ON DELETE CASCADE,
    login_id    INTEGER NOT NULL REFERENCES logins (login_id) ON DELETE CASCADE,
    PRIMARY KEY (endpoint_id, login_id)
);

CREATE TABLE routes (
    route_id        INTEGER PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    service_name    TEXT,                    -- NULL: any service
    broker_instance TEXT,                    -- NULL: any broker instance
    address         TEXT NOT NULL,           -- TCP://host:port, LOCAL or TRANSPORT
    mirror_address  TEXT,
    expiry          REAL                     -- broker-clock seconds; NULL never expires (RTE-1)
);

-- CREATE ROUTE: "By default, the routing table in each user database contains one route. This
-- route is named AutoCreatedLocal." (RTE-1)
INSERT INTO routes (name, service_name, broker_instance, address, mirror_address, expiry)
VALUES ('AutoCreatedLocal', NULL, NULL, 'LOCAL', NULL, NULL);
