-- Other users' query text (and query id, as pg_stat_statements shows them)
-- is visible only to superusers and pg_read_all_stats; so are the tables
-- their statements touched, which span names and db.collection.name carry
SELECT traceprof.reset();
SET compute_query_id = on;
CREATE ROLE traceprof_alice LOGIN;
CREATE ROLE traceprof_bob LOGIN;
CREATE ROLE traceprof_auditor LOGIN IN ROLE pg_read_all_stats;

SET ROLE traceprof_alice;
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT 'alice was here' AS v;
SELECT 1 / 0;
CREATE TEMP TABLE alice_layoffs (x int);
SELECT count(*) FROM alice_layoffs;
SET traceprof.traceparent = '';
RESET ROLE;

SET ROLE traceprof_bob;
SELECT username, name, query, status_message, attributes ? 'db.query.text' AS has_text,
       attributes ? 'traceprof.query_id' AS has_query_id,
       attributes ? 'db.collection.name' AS has_table
  FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
SELECT traceprof.reset();
RESET ROLE;

SET ROLE traceprof_auditor;
SELECT username, name, query, status_message, attributes ? 'traceprof.query_id' AS has_query_id,
       attributes->>'db.collection.name' AS table_name
  FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
RESET ROLE;

SET ROLE traceprof_alice;
SELECT username, name, query FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
RESET ROLE;

RESET compute_query_id;
DROP TABLE alice_layoffs;
DROP ROLE traceprof_alice, traceprof_bob, traceprof_auditor;
