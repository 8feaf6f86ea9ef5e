-- Database principals, permissions and remote service bindings (issue 13: SEC-2, SEC-3, SEC-4).
-- database_principals (sys.database_principals): public (0, a role) and dbo (1) always exist;
-- users made by CREATE USER get ids from 5 up, as SQL Server gives them.
CREATE TABLE database_principals (
    principal_id INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    type         TEXT NOT NULL CHECK (type IN ('R', 'S'))   -- R role, S user
);
INSERT INTO database_principals (principal_id, name, type) VALUES (0, 'public', 'R');
INSERT INTO database_principals (principal_id, name, type) VALUES (1, 'dbo', 'S');
-- certificates.principal_id: the owner (CREATE CERTIFICATE … AUTHORIZATION user); NULL or 1 is
-- dbo, so every certificate made before this migration belongs to dbo.
ALTER TABLE certificates ADD COLUMN principal_id INTEGER REFERENCES database_principals (principal_id);
-- database_permissions (sys.database_permissions): GRANT SEND ON SERVICE / RECEIVE ON QUEUE.
-- class: 'SERVICE' or 'QUEUE'; major_id the service_id or queue_id; state 'G' (granted).
CREATE TABLE database_permissions (
    class                TEXT NOT NULL,
    major_id             INTEGER NOT NULL,
    grantee_principal_id INTEGER NOT NULL REFERENCES database_principals (principal_id)
        ON DELETE CASCADE,
    grantor_principal_id INTEGER NOT NULL,
    permission_name      TEXT NOT NULL,
    state                TEXT NOT NULL DEFAULT 'G',
    PRIMARY KEY (class, major_id, grantee_principal_id, permission_name)
);
-- remote_service_bindings (sys.remote_service_bindings, SEC-3).
CREATE TABLE remote_service_bindings (
    remote_service_binding_id INTEGER PRIMARY KEY,
    name                      TEXT NOT NULL UNIQUE,
    remote_service_name       TEXT NOT NULL,
    principal_id              INTEGER NOT NULL REFERENCES database_principals (principal_id),
    is_anonymous_on           INTEGER NOT NULL
);
-- Dialog security (SEC-2), stored and shown (sys.conversation_endpoints): the principals of the
-- two sides, the session keys' identifiers, when the security header was last checked, the
-- session key, BEGIN DIALOG … WITH ENCRYPTION = ON (1, the default) | OFF (0) and the far side's
-- certificate.
ALTER TABLE conversation_endpoints ADD COLUMN principal_id INTEGER;
ALTER TABLE conversation_endpoints ADD COLUMN far_principal_id INTEGER;
ALTER TABLE conversation_endpoints ADD COLUMN outbound_session_key_identifier TEXT;
ALTER TABLE conversation_endpoints ADD COLUMN inbound_session_key_identifier TEXT;
ALTER TABLE conversation_endpoints ADD COLUMN security_timestamp REAL;
ALTER TABLE conversation_endpoints ADD COLUMN session_key BLOB;
ALTER TABLE conversation_endpoints ADD COLUMN encryption_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversation_endpoints ADD COLUMN far_certificate TEXT;
