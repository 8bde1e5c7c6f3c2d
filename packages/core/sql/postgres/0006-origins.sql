-- spool ledger, schema version 6 (PostgreSQL): where a broker delivery came from (see
-- sqlite/0006-origins.sql), per root.
CREATE TABLE origins (
  root_id      TEXT NOT NULL,
  claim_id     TEXT NOT NULL,
  name         TEXT NOT NULL,
  payload_hash TEXT NOT NULL,
  delivery_id  TEXT NOT NULL,
  source       TEXT NOT NULL,
  address      TEXT NOT NULL,
  headers      TEXT,
  message_id   TEXT,
  landed_at    TEXT NOT NULL,
  PRIMARY KEY (root_id, claim_id)
);
CREATE INDEX origins_name ON origins (root_id, name, payload_hash);
