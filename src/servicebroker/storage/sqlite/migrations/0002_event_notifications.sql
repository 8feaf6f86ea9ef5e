-- Event notifications (EVT-1, ACT-8): registrations, the built-in message type and contract
-- they travel under, and the service that sends them.

INSERT INTO message_types (name, validation, is_system)
    VALUES ('http://schemas.microsoft.com/SQL/Notifications/EventNotification', 'WELL_FORMED_XML', 1);
INSERT INTO service_contracts (name, is_system)
    VALUES ('http://schemas.microsoft.com/SQL/Notifications/PostEventNotification', 1);
INSERT INTO service_contract_message_usages (service_contract_id, message_type_id, sent_by)
    SELECT c.service_contract_id, m.message_type_id, 'INITIATOR'
    FROM service_contracts c, message_types m
    WHERE c.name = 'http://schemas.microsoft.com/SQL/Notifications/PostEventNotification'
      AND m.name = 'http://schemas.microsoft.com/SQL/Notifications/EventNotification';

INSERT INTO service_queues (name, is_receive_enabled, is_retention_enabled,
    is_poison_message_handling_enabled, is_activation_enabled, activation_procedure,
    max_readers, modify_date)
    VALUES ('sys_event_notifications', 1, 0, 0, 0, NULL, 0, 0);
INSERT INTO services (name, queue_id)
    SELECT 'http://schemas.microsoft.com/SQL/Notifications/EventNotificationService', queue_id
    FROM service_queues WHERE name = 'sys_event_notifications';

CREATE TABLE event_notifications (
    event_notification_id INTEGER PRIMARY KEY,
    name                  TEXT NOT NULL UNIQUE,
    queue_id              INTEGER NOT NULL REFERENCES service_queues ON DELETE CASCADE,
    event_type            TEXT NOT NULL CHECK (event_type IN ('QUEUE_ACTIVATION', 'BROKER_QUEUE_DISABLED')),
    to_service            TEXT NOT NULL,
    conversation_handle   BLOB
);
