-- Per-order sequence problems in the ledger: one row per duplicated or missing seq.
-- Compares stored sequence numbers only (never processing times). Standard SQL that runs
-- unchanged in the sqlite3 shell and in psql:  sqlite3 ROOT/ledger.db < order-check.sql
WITH RECURSIVE
  seqs AS (
    SELECT order_no, CAST(seq AS BIGINT) AS seq, COUNT(*) AS n
    FROM processed
    GROUP BY order_no, seq
  ),
  gaps AS (
    -- For each stored seq, the previous stored seq of the same order; before the first, the
    -- highest seq that compact pruned from the order (the horizon), else 0.
    SELECT s.order_no, s.seq,
           COALESCE(LAG(s.seq) OVER (PARTITION BY s.order_no ORDER BY s.seq),
                    (SELECT CAST(h.max_seq AS BIGINT) FROM horizon h WHERE h.order_no = s.order_no),
                    CAST(0 AS BIGINT)) AS prev
    FROM seqs s
  ),
  missing (order_no, seq, upto) AS (
    SELECT order_no, prev + 1, seq - 1 FROM gaps WHERE seq - prev > 1
    UNION ALL
    SELECT order_no, seq + 1, upto FROM missing WHERE seq < upto
  )
SELECT order_no, seq, 'duplicate' AS problem FROM seqs WHERE n > 1
UNION ALL
SELECT order_no, seq, 'missing' AS problem FROM missing
ORDER BY order_no, seq, problem;
