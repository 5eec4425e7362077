-- A claim is the event's id and its name, so that an id taken by an event of another name (a neighbour publishing
-- an event of its own with the id of one it saw) does not make the genuine event a duplicate. The rows written
-- before keep the name '' and still count as a claim of their id under any name: the claim looks for them too.
-- Adding the column rewrites nothing; the primary key is built again (one pass over the table, under a lock that
-- holds claims back meanwhile). In partitioned mode the key of each partition is built again with it. A table created
-- from schema-postgresql.sql of this version has the column already.
ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS event_name text NOT NULL DEFAULT '';

DO $$
DECLARE
    key_name text;
    daily regclass;
BEGIN
    -- The key, whatever its name: a table created from schema-postgresql.sql under another name keeps the script's.
    SELECT conname INTO key_name FROM pg_constraint WHERE conrelid = to_regclass('${table}') AND contype = 'p';
    IF key_name IS NOT NULL THEN
        EXECUTE format('ALTER TABLE ${table} DROP CONSTRAINT %I', key_name);
    END IF;
    ALTER TABLE ${table} ADD CONSTRAINT ${table}_pkey PRIMARY KEY (event_id, scope, event_name);
    -- Partitioned mode: a daily table made and not attached yet (a maintenance run stopped in between) takes the
    -- column too, or it could never be attached.
    FOR daily IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.relkind = 'r' AND NOT c.relispartition AND c.relname ~ ('^${table}_p[0-9]{8}$')
          AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('${table}'))
    LOOP
        EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS event_name text NOT NULL DEFAULT %L', daily, '');
    END LOOP;
END $$;
