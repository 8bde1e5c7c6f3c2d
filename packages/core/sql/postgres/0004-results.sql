-- spool ledger, schema version 4 (PostgreSQL): stored results (see sqlite/0004-results.sql).
ALTER TABLE processed ADD COLUMN result TEXT;
