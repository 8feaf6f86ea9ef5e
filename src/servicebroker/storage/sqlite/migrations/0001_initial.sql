-- servicebroker schema, version 1: the catalog, conversation endpoints, service queues and the
-- transmission queue. Handles, group ids and message ids are 16-byte BLOBs (uuid.bytes); times
-- are seconds since the epoch on the broker's clock (REAL), never the database's own clock.

CREATE TABLE broker_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO broker_settings (name, value) VALUES ('catalog_version', '1');

CREATE TABLE message_types (
    message_type_id INTEGER PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    validation      TEXT NOT NULL,
    is_system       INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE service_contracts (
    service_contract_id INTEGER PRIMARY KEY,
    name                TEXT NOT NULL UNIQUE,
    is_system           INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE service_contract_message_usages (
    service_contract_id INTEGER NOT NULL REFERENCES service_contracts ON DELETE CASCADE,
    message_type_id     INTEGER NOT NULL REFERENCES message_types,
    sent_by             TEXT NOT NULL CHECK (sent_by IN ('INITIATOR', 'TARGET', 'ANY')),
    PRIMARY KEY (service_contract_id, message_type_id)
);

CREATE TABLE service_queues (
    queue_id                          INTEGER PRIMARY KEY,
    name                              TEXT NOT NULL UNIQUE,
    is_receive_enabled                INTEGER NOT NULL,
    is_retention_enabled              INTEGER NOT NULL,
    is_poison_message_handling_enabled INTEGER NOT NULL,
    is_activation_enabled             INTEGER NOT NULL,
    activation_procedure              TEXT,
    max_readers                       INTEGER NOT NULL DEFAULT 0,
    rollback_count                    INTEGER NOT NULL DEFAULT 0,
    modify_date                       REAL NOT NULL
);

CREATE TABLE services (
    service_id INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    queue_id   INTEGER NOT NULL REFERENCES service_queues
);

CREATE TABLE service_contract_usages (
    service_id          INTEGER NOT NULL REFERENCES services ON DELETE CASCADE,
    service_contract_id INTEGER NOT NULL REFERENCES service_contracts,
    PRIMARY KEY (service_id, service_contract_id)
);

CREATE TABLE conversation_endpoints (
    endpoint_id           INTEGER PRIMARY KEY,
    conversation_handle   BLOB NOT NULL UNIQUE,
    conversation_id       BLOB NOT NULL,
    is_initiator          INTEGER NOT NULL,
    service_contract_id   INTEGER NOT NULL,
    conversation_group_id BLOB NOT NULL,
    service_id            INTEGER NOT NULL,
    queue_id              INTEGER NOT NULL,
    far_service           TEXT NOT NULL,
    lifetime              REAL NOT NULL,
    state                 TEXT NOT NULL,
    dialog_timer          REAL,
    send_sequence         INTEGER NOT NULL DEFAULT 0,
    receive_sequence      INTEGER NOT NULL DEFAULT 0,
    priority              INTEGER NOT NULL,
    UNIQUE (conversation_id, is_initiator)
);
CREATE INDEX conversation_endpoints_group ON conversation_endpoints (conversation_group_id);
CREATE INDEX conversation_endpoints_timer ON conversation_endpoints (dialog_timer)
    WHERE dialog_timer IS NOT NULL;
CREATE INDEX conversation_endpoints_lifetime ON conversation_endpoints (lifetime)
    WHERE state NOT IN ('ER', 'CD');

-- One row per message in a service queue. status: 0 retained received, 1 ready, 3 retained sent.
-- conversation_order is the receiving endpoint's endpoint_id and rank the SYS-2 order of
-- system messages, so that one index gives the RECEIVE order of a group (PRI-12, SYS-2).
CREATE TABLE queue_messages (
    queuing_order           INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id                INTEGER NOT NULL,
    status                  INTEGER NOT NULL,
    priority                INTEGER NOT NULL,
    conversation_group_id   BLOB NOT NULL,
    conversation_handle     BLOB NOT NULL,
    conversation_order      INTEGER NOT NULL,
    rank                    INTEGER NOT NULL,
    message_sequence_number INTEGER NOT NULL,
    service_id              INTEGER NOT NULL,
    service_contract_id     INTEGER NOT NULL,
    message_type_id         INTEGER NOT NULL,
    validation              TEXT NOT NULL,
    message_body            BLOB NOT NULL,
    message_id              BLOB NOT NULL
);
-- Next group to lock: the highest-priority ready message of the queue (PRI-12, PRI-13).
CREATE INDEX queue_messages_ready ON queue_messages (queue_id, status, priority DESC, queuing_order);
-- Messages of one group in RECEIVE order.
CREATE INDEX queue_messages_group ON queue_messages
    (conversation_group_id, status, priority DESC, conversation_order, rank, message_sequence_number);

-- Messages that could not be put on their target queue yet (QUE-3: queue OFF; target service
-- not created yet), in send order.
CREATE TABLE transmission_queue (
    transmission_id         INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_handle     BLOB NOT NULL,
    conversation_id         BLOB NOT NULL,
    is_initiator            INTEGER NOT NULL,
    to_service_name         TEXT NOT NULL,
    from_service_name       TEXT NOT NULL,
    service_contract_id     INTEGER NOT NULL,
    enqueue_time            REAL NOT NULL,
    message_sequence_number INTEGER NOT NULL,
    message_type_id         INTEGER NOT NULL,
    validation              TEXT NOT NULL,
    message_body            BLOB NOT NULL,
    message_id              BLOB NOT NULL,
    arrival                 TEXT NOT NULL,
    transmission_status     TEXT NOT NULL,
    priority                INTEGER NOT NULL,
    lifetime                REAL NOT NULL
);
CREATE INDEX transmission_queue_to_service ON transmission_queue (to_service_name, transmission_id);
CREATE INDEX transmission_queue_conversation ON transmission_queue (conversation_id);

-- The built-in message types and contract (SYS-1, DLG-1, DLG-2).
INSERT INTO message_types (message_type_id, name, validation, is_system) VALUES
    (1, 'DEFAULT', 'NONE', 1),
    (2, 'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog', 'EMPTY', 1),
    (3, 'http://schemas.microsoft.com/SQL/ServiceBroker/Error', 'WELL_FORMED_XML', 1),
    (4, 'http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer', 'EMPTY', 1);
INSERT INTO service_contracts (service_contract_id, name, is_system) VALUES (1, 'DEFAULT', 1);
INSERT INTO service_contract_message_usages (service_contract_id, message_type_id, sent_by)
    VALUES (1, 1, 'ANY');
