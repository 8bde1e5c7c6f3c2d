-- spool's consistency checks of a PostgreSQL ledger (every root that shares it): one row per
-- problem found, none when the ledger is consistent. `bun run verify --ledger URL` runs it;
-- run it yourself, in one transaction, with
--   psql "$SPOOL_LEDGER_URL" -1 -f packages/core/sql/postgres/verify.sql
-- The planner may not use an index here: a check that used the index it checks would trust it.
SET LOCAL enable_indexscan = off;
SET LOCAL enable_indexonlyscan = off;
SET LOCAL enable_bitmapscan = off;

-- Two processed rows for one msg_id: the PRIMARY KEY's index missed a key (a damaged index),
-- so a redelivery was applied a second time.
SELECT 'duplicate-msg-id' AS check_name,
       'msg_id ' || quote_literal(msg_id) || ': ' || count(*) || ' processed rows (files '
         || string_agg(file, ', ' ORDER BY file) || ')' AS problem
FROM processed
GROUP BY msg_id HAVING count(*) > 1
UNION ALL
-- Two claims rows for one file of one root: two consumers may each believe they hold the file.
SELECT 'duplicate-claim',
       'root ' || root_id || ', file ' || quote_literal(name) || ': ' || count(*) || ' claim rows (owners '
         || string_agg(coalesce(owner_id, 'none'), ', ' ORDER BY owner_id) || ')'
FROM claims
GROUP BY root_id, name HAVING count(*) > 1
UNION ALL
-- A claim whose owner has no consumers row: a consumer registers before it claims, and its
-- row is deleted only when it holds no claim, so the row was lost or removed by hand.
SELECT 'claim-without-consumer',
       'root ' || c.root_id || ', file ' || quote_literal(c.name) || ' is claimed by ' || quote_literal(c.owner_id)
         || ', which has no consumers row'
FROM claims AS c
WHERE c.owner_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM consumers AS o WHERE o.owner_id = c.owner_id)
ORDER BY 1, 2;
