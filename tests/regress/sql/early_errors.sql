-- Statements that fail before planning or execution (syntax, names, types,
-- a transaction already aborted) still become error spans of their caller,
-- as statements that fail while running do.  Setting the context is not a
-- span of its own.
SELECT traceprof.reset();
CREATE TABLE early_t (id int PRIMARY KEY);
SET traceprof.traceparent = '00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01';
SELEC 1;
SELECT * FROM early_missing WHERE id = 42;
SELECT nope FROM early_t;
SELECT 'x' + 1;
-- the comment wins here too, and a malformed one is not counted twice
SELECT * FROM early_missing /*traceparent='00-11111111111111111111111111111111-2222222222222222-01'*/;
SELECT * FROM early_missing /*traceparent='00-zz'*/;
-- not sampled: no span
SELECT * FROM early_missing /*traceparent='00-11111111111111111111111111111111-3333333333333333-00'*/;
BEGIN;
SELECT 1 / 0;
SELECT 'refused' AS in_aborted_block;
ROLLBACK;
-- an invalid context is refused, and is not a span
SET traceprof.traceparent = '00-zz';
SET traceprof.traceparent = '';
-- untraced: no span
SELECT * FROM early_missing;

SELECT name, kind, parent_span_id, status, status_message, query,
       attributes->>'db.response.status_code' AS sqlstate,
       attributes ? 'db.operation.name' AS has_operation,
       trace_id = '5bf92f3577b34da6a3ce929d0e0e4736' AS in_caller_trace
  FROM traceprof.spans WHERE name <> 'plan'
 ORDER BY start_time;
-- they start when their message arrived and end when the error is reported
SELECT bool_and(start_time <= end_time AND start_time > now() - interval '1 minute') AS times_sane,
       bool_and((attributes->>'traceprof.backend_pid')::int = pg_backend_pid()) AS our_backend,
       bool_and(attributes->>'db.namespace' = current_database()) AS namespace,
       bool_and(username = current_user) AS username,
       bool_and(cpu_time_ms IS NULL) AS cpu_unknown
  FROM traceprof.spans WHERE name = 'postgresql';
SELECT spans_created, malformed_contexts FROM traceprof.stats;
-- Several statements in one message: a later one that fails before running
-- is a span too (the message's text), and so is a deferred check failing at
-- the implicit commit of a statement whose own span ended well.
SELECT traceprof.reset();
CREATE TABLE early_parent (id int PRIMARY KEY);
CREATE TABLE early_child (parent int REFERENCES early_parent DEFERRABLE INITIALLY DEFERRED);
SET traceprof.traceparent = '00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01';
SELECT 1 AS first \; SELECT * FROM early_missing;
INSERT INTO early_child VALUES (7);
SET traceprof.traceparent = '';
SELECT name, kind, status, status_message, query,
       attributes->>'db.response.status_code' AS sqlstate
  FROM traceprof.spans WHERE name <> 'plan'
 ORDER BY start_time;
-- Sampled, the commit's failure goes in the statement's trace, under the
-- statement that began it, not in a trace sampled anew (or none)
SELECT traceprof.reset();
SET traceprof.sample_rate = 1;
INSERT INTO early_child VALUES (8);
SET traceprof.sample_rate = 0;
SELECT f.trace_id = s.trace_id AS same_trace, f.parent_span_id = s.span_id AS under_the_statement,
       s.parent_span_id IS NULL AS statement_is_root, f.status, f.status_message
  FROM traceprof.spans s, traceprof.spans f
 WHERE s.name = 'INSERT early_child' AND f.name = 'postgresql';
SELECT count(*) AS spans FROM traceprof.spans WHERE name NOT IN ('plan', 'SET');
DROP TABLE early_child, early_parent;
-- The failed statement's span begins where the traced statement before it
-- in the message ended, not when the message arrived: that time was the
-- other's.
SELECT traceprof.reset();
SET traceprof.traceparent = '00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01';
SELECT pg_sleep(0.05) AS slept \; SELECT * FROM early_missing;
SET traceprof.traceparent = '';
SELECT f.start_time >= s.end_time AS begins_after_the_sleep
  FROM traceprof.spans s, traceprof.spans f
 WHERE s.kind = 'server' AND s.status = 'unset' AND s.query LIKE 'SELECT pg_sleep%' AND f.status = 'error';
-- With errors hidden from the log (no emit_log_hook call), a statement that
-- fails while planned ends at the abort, with its error, not as a success
-- (without a plan span, its statement's span is the innermost one then).
SELECT traceprof.reset();
SET log_min_messages = panic;
SET traceprof.track_planning = off;
SET traceprof.traceparent = '00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01';
SELECT 1 / 0 AS folded_while_planned;
-- At log, the server log takes FATAL and up, not ERROR: hidden as well.
SET log_min_messages = log;
SELECT 1 / (random() * 0)::int AS failed_while_run;
SET traceprof.traceparent = '';
RESET log_min_messages;
RESET traceprof.track_planning;
SELECT name, status, status_message, attributes->>'db.response.status_code' AS sqlstate
  FROM traceprof.spans WHERE name NOT IN ('plan', 'SET')
 ORDER BY start_time;
