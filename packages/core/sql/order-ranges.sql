-- order-check.sql's problems with each run of missing seqs as one row (first..last), and each
-- duplicated seq as a row of its own (first = last): one row per gap, however wide, where
-- order-check.sql lists every missing seq. The order-check command reads this first and runs
-- order-check.sql only when its rows are few enough to list. Standard SQL for both ledgers.
WITH
  seqs AS (
    SELECT order_no, CAST(seq AS BIGINT) AS seq, COUNT(*) AS n
    FROM processed
    GROUP BY order_no, seq
  ),
  gaps AS (
    SELECT s.order_no, s.seq,
           COALESCE(LAG(s.seq) OVER (PARTITION BY s.order_no ORDER BY s.seq),
                    (SELECT CAST(h.max_seq AS BIGINT) FROM horizon h WHERE h.order_no = s.order_no),
                    CAST(0 AS BIGINT)) AS prev
    FROM seqs s
  )
SELECT order_no, seq AS first, seq AS last, 'duplicate' AS problem FROM seqs WHERE n > 1
UNION ALL
SELECT order_no, prev + 1 AS first, seq - 1 AS last, 'missing' AS problem FROM gaps WHERE seq - prev > 1
ORDER BY order_no, first, problem;
