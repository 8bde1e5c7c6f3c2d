-- spool ledger, schema version 1 (SQLite).
-- Times are ISO 8601 UTC text. Every table that records an outcome carries the claim_id of
-- the delivery that produced it, so recovery can tell "already committed" from "new".

-- One row per distinct msg_id: the business effect. The PRIMARY KEY is the deduplication.
CREATE TABLE processed (
  msg_id       TEXT PRIMARY KEY,
  order_no     TEXT NOT NULL,
  seq          INTEGER NOT NULL,
  amount       TEXT NOT NULL,      -- the decimal exactly as written in the message
  file         TEXT NOT NULL,      -- name of the file that delivered it
  payload_hash TEXT NOT NULL,      -- sha256 of the file's bytes: which delivery it was
  content_hash TEXT NOT NULL,      -- sha256 of the canonical JSON: what it said
  claim_id     TEXT NOT NULL UNIQUE,
  processed_at TEXT NOT NULL
);
CREATE INDEX processed_order_seq ON processed (order_no, seq);

-- Every later delivery of a msg_id already in processed.
CREATE TABLE duplicates (
  id           INTEGER PRIMARY KEY,
  msg_id       TEXT NOT NULL,
  file         TEXT NOT NULL,
  payload_hash TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  is_conflict  INTEGER NOT NULL DEFAULT 0, -- 1 when the content differs from the processed one
  claim_id     TEXT NOT NULL UNIQUE,
  seen_at      TEXT NOT NULL
);
CREATE INDEX duplicates_msg_id ON duplicates (msg_id);

-- Every file sent to error/, under the name it has there.
CREATE TABLE failures (
  id           INTEGER PRIMARY KEY,
  file         TEXT NOT NULL,      -- name in error/
  original     TEXT NOT NULL,      -- name it arrived with in inbox/
  reason       TEXT NOT NULL,
  detail       TEXT NOT NULL,
  payload_hash TEXT,
  claim_id     TEXT NOT NULL UNIQUE,
  failed_at    TEXT NOT NULL,
  replayed_at  TEXT               -- set when replay moved it back to inbox/
);
CREATE INDEX failures_file ON failures (file);

-- Files a consumer has claimed and not yet finished. The row exists from before the file
-- enters processing/ until after it has left, so a file in processing/ always has an owner.
CREATE TABLE claims (
  name         TEXT PRIMARY KEY,   -- the file name in inbox/ and processing/
  claim_id     TEXT NOT NULL,
  owner_id     TEXT,
  attempts     INTEGER NOT NULL,   -- how many times processing of this file began
  state        TEXT NOT NULL CHECK (state IN ('claimed', 'committed')),
  dest         TEXT,               -- 'done' or 'error' once committed
  dest_name    TEXT,               -- the name chosen in error/ (done/ names are chosen at move)
  payload_hash TEXT,
  claimed_at   TEXT NOT NULL
);
CREATE INDEX claims_owner ON claims (owner_id, state);

-- Running and past consumers, to tell a live owner's claims from a dead one's.
CREATE TABLE consumers (
  owner_id     TEXT PRIMARY KEY,
  host         TEXT NOT NULL,
  pid          INTEGER NOT NULL,
  boot_id      TEXT NOT NULL,
  start_ticks  TEXT NOT NULL,      -- process start time in clock ticks since boot
  started_at   TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL
);

-- Every replay of a file from error/ back to inbox/.
CREATE TABLE replays (
  id          INTEGER PRIMARY KEY,
  file        TEXT NOT NULL,
  failure_id  INTEGER,
  replayed_at TEXT NOT NULL
);
CREATE INDEX replays_file ON replays (file);
