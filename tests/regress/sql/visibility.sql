-- Other users' query text (and query id, as pg_stat_statements shows them)
-- is visible only to superusers and pg_read_all_stats; so are the tables
-- their statements touched, which span names and db.collection.name carry
SELECT traceprof.reset();
SET compute_query_id = on;
CREATE ROLE traceprof_alice LOGIN;
CREATE ROLE traceprof_bob LOGIN;
CREATE ROLE traceprof_auditor LOGIN IN ROLE pg_read_all_stats;

SET ROLE traceprof_alice;
SET traceprof.tracestate = 'alice=private';
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT 'alice was here' AS v;
SELECT 1 / 0;
CREATE TEMP TABLE alice_layoffs (x int);
SELECT count(*) FROM alice_layoffs;
SET traceprof.traceparent = '';
RESET traceprof.tracestate;
RESET ROLE;

SET ROLE traceprof_bob;
SELECT username, name, query, trace_state, status_message, attributes ? 'db.query.text' AS has_text,
       attributes ? 'traceprof.query_id' AS has_query_id,
       attributes ? 'db.collection.name' AS has_table
  FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
SELECT traceprof.reset();
RESET ROLE;

SET ROLE traceprof_auditor;
SELECT username, name, query, trace_state, status_message, attributes ? 'traceprof.query_id' AS has_query_id,
       attributes->>'db.collection.name' AS table_name
  FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
RESET ROLE;

SET ROLE traceprof_alice;
SELECT username, name, query FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
RESET ROLE;

-- A message that fails at its implicit commit, after a SET ROLE in it: its
-- span holds the whole message's text and the error, of statements run under
-- both roles, so it is the login role's, not the role switched to
CREATE TABLE traceprof_pk (i int PRIMARY KEY);
CREATE TABLE traceprof_fk (i int REFERENCES traceprof_pk DEFERRABLE INITIALLY DEFERRED);
SET traceprof.traceparent = '00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
INSERT INTO traceprof_fk VALUES (1) /* admin secret */ \; SET ROLE traceprof_bob;
SET traceprof.traceparent = '';
SET ROLE traceprof_bob;
SELECT username = session_user AS login_role, name, query, status_message
  FROM traceprof.spans WHERE trace_id = '5bf92f3577b34da6a3ce929d0e0e4736' ORDER BY start_time;
-- traceprof.trace_spans(trace_id): the view's rows of that trace, by the same rules
SELECT name, query, status_message FROM traceprof.trace_spans('5bf92f3577b34da6a3ce929d0e0e4736');
SELECT count(*) AS rows_not_in_both FROM (
  (SELECT * FROM traceprof.spans WHERE trace_id = '5bf92f3577b34da6a3ce929d0e0e4736'
   EXCEPT ALL SELECT * FROM traceprof.trace_spans('5bf92f3577b34da6a3ce929d0e0e4736'))
  UNION ALL
  (SELECT * FROM traceprof.trace_spans('5bf92f3577b34da6a3ce929d0e0e4736')
   EXCEPT ALL SELECT * FROM traceprof.spans WHERE trace_id = '5bf92f3577b34da6a3ce929d0e0e4736')) d;
RESET ROLE;
SELECT username = session_user AS login_role, name, query, status_message
  FROM traceprof.spans WHERE trace_id = '5bf92f3577b34da6a3ce929d0e0e4736' ORDER BY start_time;
SELECT name, query, status_message FROM traceprof.trace_spans('5bf92f3577b34da6a3ce929d0e0e4736');
SELECT count(*) AS spans_of_all_traces, count(*) FILTER (WHERE trace_id = '5bf92f3577b34da6a3ce929d0e0e4736') AS of_this_one
  FROM traceprof.spans;
SELECT count(*) AS of_a_trace_without_spans FROM traceprof.trace_spans('00000000000000000000000000000001');
SELECT * FROM traceprof.trace_spans('5BF92F3577B34DA6A3CE929D0E0E4736X');
SELECT * FROM traceprof.trace_spans('00000000000000000000000000000000');
SELECT * FROM traceprof.trace_spans(NULL);
DROP TABLE traceprof_fk, traceprof_pk;

RESET compute_query_id;
DROP TABLE alice_layoffs;
DROP ROLE traceprof_alice, traceprof_bob, traceprof_auditor;
