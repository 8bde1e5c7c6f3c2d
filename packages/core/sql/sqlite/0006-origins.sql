-- spool ledger, schema version 6 (SQLite): where a broker delivery came from. A delivery is
-- landed as a file in processing/ under a name made from its id at the source; its claim
-- transaction writes this row with the claim, so the ledger can tell a redelivery of a
-- committed delivery (same name, same bytes, an outcome row under one of its claims) from a
-- new one, and a replay can publish the file back where it came from. A deferred delivery's
-- pickup copies the row to the claim that takes it, so its later outcome is found the same way.
CREATE TABLE origins (
  claim_id     TEXT PRIMARY KEY,   -- the claim that landed it (or picked it up from deferred/)
  name         TEXT NOT NULL,      -- the landed file's name
  payload_hash TEXT NOT NULL,      -- sha256 of the body: which message it was
  delivery_id  TEXT NOT NULL,      -- its id at the source (JetStream stream:seq, AMQP message-id)
  source       TEXT NOT NULL,      -- the source URL without its password
  address      TEXT NOT NULL,      -- where a replay publishes: the AMQP queue, the JetStream subject
  headers      TEXT,               -- the transport's text headers, a JSON object
  message_id   TEXT,               -- the AMQP message-id property
  landed_at    TEXT NOT NULL
);
CREATE INDEX origins_name ON origins (name, payload_hash);
