-- When a replay of a dead letter was applied, on MariaDB. See V8__dead_letter_taken_back.sql of PostgreSQL.
ALTER TABLE ${table}_dead_letter ADD COLUMN IF NOT EXISTS taken_back_at TIMESTAMP(6) NULL DEFAULT NULL;
