-- A claim is the event's id and its name, so that an id taken by an event of another name (a neighbour publishing
-- an event of its own with the id of one it saw) does not make the genuine event a duplicate. The rows written
-- before keep the name '' and still count as a claim of their id under any name: the claim looks for them too.
-- Adding the column rewrites nothing; the primary key is built again (one pass over the table, under a lock that
-- holds claims back meanwhile). In partitioned mode the key of each partition is built again with it. A table created
-- from schema-postgresql.sql of this version has the column already.
ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS event_name text NOT NULL DEFAULT '';

ALTER TABLE ${table}
    DROP CONSTRAINT ${table}_pkey,
    ADD CONSTRAINT ${table}_pkey PRIMARY KEY (event_id, scope, event_name);
