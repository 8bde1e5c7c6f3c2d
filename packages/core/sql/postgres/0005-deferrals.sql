-- spool ledger, schema version 5 (PostgreSQL): deferrals (see sqlite/0005-deferrals.sql), per root.
CREATE TABLE deferrals (
  root_id           TEXT NOT NULL,
  file              TEXT NOT NULL,
  msg_id            TEXT NOT NULL,
  attempts          INTEGER NOT NULL,
  first_deferred_at TEXT NOT NULL,
  next_attempt_at   TEXT NOT NULL,
  last_error        TEXT NOT NULL,
  payload_hash      TEXT,
  claim_id          TEXT NOT NULL,
  PRIMARY KEY (root_id, file)
);
CREATE INDEX deferrals_due ON deferrals (root_id, next_attempt_at);
CREATE INDEX deferrals_claim ON deferrals (root_id, claim_id);
