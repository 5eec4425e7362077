-- The test service's own first migration, on MariaDB: version 1, like the library's, which keeps its own history.
CREATE TABLE thing_effect (
    id       BIGINT AUTO_INCREMENT PRIMARY KEY,
    thing_id UUID           NOT NULL,
    amount   DECIMAL(12, 3) NOT NULL
);

-- What a second function, auditThing, records of the same events.
CREATE TABLE thing_audit (
    id       BIGINT AUTO_INCREMENT PRIMARY KEY,
    thing_id UUID NOT NULL
);
