-- A check PostgreSQL makes at commit: a row of thing_commit_check must name a thing_parent. A function that inserts
-- one naming no parent makes its message's commit fail (23503), after everything in the transaction succeeded.
CREATE TABLE thing_parent (
    id uuid PRIMARY KEY
);

CREATE TABLE thing_commit_check (
    parent_id uuid NOT NULL REFERENCES thing_parent (id) DEFERRABLE INITIALLY DEFERRED
);
