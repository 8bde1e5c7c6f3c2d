-- spool ledger, schema version 4 (SQLite): stored results. A handler may return a result
-- (JSON text), kept with the processed row in the same transaction, so that a redelivery can
-- be answered with what the first processing produced. NULL: the effect returned none.
ALTER TABLE processed ADD COLUMN result TEXT;
