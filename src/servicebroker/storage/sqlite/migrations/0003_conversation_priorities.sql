-- Conversation priorities (PRI-1, PRI-2): NULL criteria mean ANY.

CREATE TABLE conversation_priorities (
    priority_id           INTEGER PRIMARY KEY,
    name                  TEXT NOT NULL UNIQUE,
    service_contract_name TEXT,
    local_service_name    TEXT,
    remote_service_name   TEXT,
    priority              INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 10)
);
