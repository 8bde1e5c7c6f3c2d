-- spool's consistency checks of a SQLite ledger, beyond PRAGMA integrity_check: one row per
-- problem found, none when the ledger is consistent. `bun run verify` runs it after
-- integrity_check; run it yourself with
--   sqlite3 ROOT/ledger.db < packages/core/sql/sqlite/verify.sql
-- Every table is read NOT INDEXED: a check that used the index it checks would trust it.

-- Two processed rows for one msg_id: the PRIMARY KEY's index missed a key (a damaged index
-- page), so a redelivery was applied a second time.
SELECT 'duplicate-msg-id' AS check_name,
       'msg_id ' || quote(msg_id) || ': ' || count(*) || ' processed rows (files ' || group_concat(file, ', ') || ')' AS problem
FROM processed NOT INDEXED
GROUP BY msg_id HAVING count(*) > 1
UNION ALL
-- Two claims rows for one file name: two consumers may each believe they hold the file.
SELECT 'duplicate-claim',
       'file ' || quote(name) || ': ' || count(*) || ' claim rows (owners ' || group_concat(coalesce(owner_id, 'none'), ', ') || ')'
FROM claims NOT INDEXED
GROUP BY name HAVING count(*) > 1
UNION ALL
-- A claim whose owner has no consumers row: a consumer registers before it claims, and its
-- row is deleted only when it holds no claim, so the row was lost or removed by hand.
SELECT 'claim-without-consumer',
       'file ' || quote(c.name) || ' is claimed by ' || quote(c.owner_id) || ', which has no consumers row'
FROM claims AS c NOT INDEXED
WHERE c.owner_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM consumers AS o NOT INDEXED WHERE o.owner_id = c.owner_id)
ORDER BY 1, 2;
