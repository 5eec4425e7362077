-- When a replay of a dead letter was applied: the records with none are the dead letters still waiting, whose oldest
-- the purge reports (idempotency.dead-letters.oldest.age) and warns of before it passes
-- idempotency.replay-horizon.dead-letter-retention. A copy of the replay is still taken (and discarded as a copy).
ALTER TABLE ${table}_dead_letter ADD COLUMN IF NOT EXISTS taken_back_at timestamptz;
