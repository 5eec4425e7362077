-- The scopes ${table} holds claims under, registered by the guard at start-up. A start-up whose guarded bindings no
-- longer use a scope that still holds claims (the key scope changed, a function was renamed) refuses to run, unless
-- a binding takes those claims over (idempotency.bindings.<binding>.former-scopes) or they are retired on purpose
-- (idempotency.retired-scopes): a copy of an event claimed there would be applied a second time. copied_to names the
-- scopes a former scope's claims were copied to.
CREATE TABLE IF NOT EXISTS ${table}_scope (
    scope         text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    copied_to     text,
    CONSTRAINT ${table}_scope_pkey PRIMARY KEY (scope)
);

INSERT INTO ${table}_scope (scope) SELECT DISTINCT scope FROM ${table} ON CONFLICT DO NOTHING;
