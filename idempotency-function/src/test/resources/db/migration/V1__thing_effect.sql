-- The test service's own first migration: version 1, like the library's, which keeps its own history.
CREATE TABLE thing_effect (
    id       bigserial PRIMARY KEY,
    thing_id uuid           NOT NULL,
    amount   numeric(12, 3) NOT NULL
);

-- What a second function, auditThing, records of the same events.
CREATE TABLE thing_audit (
    id       bigserial PRIMARY KEY,
    thing_id uuid NOT NULL
);
