-- What a client's statement runs is never a top-level span of its own:
-- statements of functions folded while planning, and of deferred triggers
-- at COMMIT (foreign keys declared INITIALLY DEFERRED run their checks
-- there).  With track = all they are children of the statement that ran
-- them; a deferred check that fails fails the COMMIT's span.
CREATE TABLE nest_parent (id int PRIMARY KEY);
CREATE TABLE nest_child (id int, parent_id int REFERENCES nest_parent
                         DEFERRABLE INITIALLY DEFERRED);
INSERT INTO nest_parent VALUES (1);
CREATE FUNCTION nest_count() RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN (SELECT count(*) FROM nest_parent);
END $$;

SELECT traceprof.reset();
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-20f067aa0ba902b7-01';
-- folded while planning: the function's SELECT runs inside the planner
SELECT nest_count() AS folded;
BEGIN;
INSERT INTO nest_child VALUES (1, 1);
COMMIT;
INSERT INTO nest_child VALUES (2, 1);
BEGIN;
INSERT INTO nest_child VALUES (3, 99);
COMMIT;
SET traceprof.traceparent = '';
SELECT name, kind, parent_span_id, status, status_message,
       attributes->>'db.response.status_code' AS sqlstate
  FROM traceprof.spans WHERE name <> 'plan'
 ORDER BY start_time;

SELECT traceprof.reset();
SET traceprof.track = 'all';
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-30f067aa0ba902b7-01';
SELECT nest_count() AS folded;
BEGIN;
INSERT INTO nest_child VALUES (4, 1);
COMMIT;
SET traceprof.traceparent = '';
RESET traceprof.track;
-- every span but the client's statements has its parent among ours
SELECT c.name, c.kind, coalesce(p.name, '(caller) ' || c.parent_span_id) AS parent
  FROM traceprof.spans c LEFT JOIN traceprof.spans p ON p.span_id = c.parent_span_id
 WHERE c.name <> 'plan'
 ORDER BY c.start_time;
-- the check ran inside the COMMIT's span
SELECT bool_and(c.start_time >= p.start_time AND c.end_time <= p.end_time) AS inside_commit
  FROM traceprof.spans c JOIN traceprof.spans p ON p.span_id = c.parent_span_id
 WHERE p.name = 'COMMIT';

-- Nested deeper than the spans a backend keeps open (32): the spans that
-- cannot be made are counted as dropped, and tracing goes on.
CREATE FUNCTION nest_deep(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF n = 0 THEN RETURN 0; END IF;
  RETURN (SELECT nest_deep(n - 1)) + 1;
END $$;
SELECT traceprof.reset();
SET traceprof.track = 'all';
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-40f067aa0ba902b7-01';
SELECT nest_deep(40) AS depth;
SELECT 'after the deep call' AS next;
SET traceprof.traceparent = '';
RESET traceprof.track;
SELECT spans_dropped > 0 AS counted FROM traceprof.stats;
SELECT count(*) FILTER (WHERE kind = 'server') AS server_spans,
       bool_or(query LIKE '%AS next') AS traced_after
  FROM traceprof.spans;

-- The nested span of the query a utility statement runs (CREATE TABLE AS,
-- REFRESH MATERIALIZED VIEW, EXPLAIN ANALYZE): PostgreSQL 15 gives that
-- query no place in the text, so it shows the whole statement, trimmed as
-- the statement's own span is: no trailing semicolon.
CREATE TABLE nest_src (n int);
INSERT INTO nest_src VALUES (1), (2);
CREATE MATERIALIZED VIEW nest_mv AS SELECT n FROM nest_src WITH NO DATA;
SELECT traceprof.reset();
SET traceprof.track = 'all';
SET traceprof.query_text = 'full';
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-50f067aa0ba902b7-01';
CREATE TABLE nest_ctas AS SELECT n FROM nest_src  ;
REFRESH MATERIALIZED VIEW nest_mv;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT n FROM nest_src;
SET traceprof.traceparent = '';
RESET traceprof.query_text;
RESET traceprof.track;
SELECT kind, name, query FROM traceprof.spans WHERE name <> 'plan' ORDER BY start_time;
DROP TABLE nest_ctas;
DROP MATERIALIZED VIEW nest_mv;

-- A nested statement that fails while it is planned (1/z folded by the
-- planner), its error caught by an exception block: not yet a span (a
-- nested span opens at ExecutorStart, after planning).
CREATE FUNCTION nest_divide(z int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 / z;
  RETURN 'ok';
EXCEPTION WHEN division_by_zero THEN
  RETURN 'caught';
END $$;
SELECT traceprof.reset();
SET traceprof.track = 'all';
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-60f067aa0ba902b7-01';
SELECT nest_divide(0) AS divided;
SET traceprof.traceparent = '';
RESET traceprof.track;
SELECT kind, name, status, query FROM traceprof.spans WHERE name <> 'plan' ORDER BY start_time;
DROP FUNCTION nest_divide(int);
DROP TABLE nest_src;
