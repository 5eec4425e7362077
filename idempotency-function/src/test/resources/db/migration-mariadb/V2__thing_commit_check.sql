-- On MariaDB a foreign key is checked at each statement, never at commit: a function that inserts a row of
-- thing_commit_check naming no parent fails at that insert, and its transaction rolls back.
CREATE TABLE thing_parent (
    id UUID PRIMARY KEY
);

CREATE TABLE thing_commit_check (
    parent_id UUID NOT NULL,
    CONSTRAINT thing_commit_check_parent FOREIGN KEY (parent_id) REFERENCES thing_parent (id)
);
