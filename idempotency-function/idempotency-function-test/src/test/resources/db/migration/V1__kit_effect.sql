-- The effect of the kit's test service.
CREATE TABLE kit_effect (
    id      bigserial PRIMARY KEY,
    kit_id  uuid NOT NULL
);
