-- spool ledger, schema version 5 (SQLite): deferrals. A message whose effect failed
-- transiently (TransientError) waits in deferred/ under `file`, one row per file there,
-- committed before the file moves (the move is the acknowledgement, as for done/ and error/).
-- `attempts` and `first_deferred_at` carry across retries; `claim_id` is the claim that holds
-- the file now: the one that deferred it, then the one that picked it up again when due. The
-- row goes in the transaction that commits the file's next outcome.
CREATE TABLE deferrals (
  file              TEXT PRIMARY KEY,   -- the name in deferred/
  msg_id            TEXT NOT NULL,
  attempts          INTEGER NOT NULL,   -- transient failures so far
  first_deferred_at TEXT NOT NULL,
  next_attempt_at   TEXT NOT NULL,      -- ISO 8601 UTC, so text order is time order
  last_error        TEXT NOT NULL,      -- storable text (toStorableText)
  payload_hash      TEXT,
  claim_id          TEXT NOT NULL
);
CREATE INDEX deferrals_due ON deferrals (next_attempt_at);
CREATE INDEX deferrals_claim ON deferrals (claim_id);
