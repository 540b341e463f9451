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
-- the statement's own span is: no trailing semicolon; in a query string of
-- several statements, that statement alone.  A plain EXPLAIN runs nothing:
-- its query is no span.  A statement on several tables is named after none.
CREATE TABLE nest_src (n int);
INSERT INTO nest_src VALUES (1), (2);
CREATE MATERIALIZED VIEW nest_mv AS SELECT n FROM nest_src WITH NO DATA;
SELECT traceprof.reset();
SET traceprof.track = 'all';
SET traceprof.query_text = 'full';
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-50f067aa0ba902b7-01';
CREATE TABLE nest_ctas AS SELECT n FROM nest_src  ;
SELECT 0 AS first \; CREATE TABLE nest_ctas2 AS SELECT n FROM nest_src;
REFRESH MATERIALIZED VIEW nest_mv;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT n FROM nest_src;
EXPLAIN (COSTS OFF) SELECT n FROM nest_src WHERE n > 1;
TRUNCATE nest_ctas;
ANALYZE nest_ctas, nest_src;
SET traceprof.traceparent = '';
RESET traceprof.query_text;
RESET traceprof.track;
SELECT kind, name, query FROM traceprof.spans WHERE name <> 'plan' ORDER BY start_time;
DROP TABLE nest_ctas, nest_ctas2;
DROP MATERIALIZED VIEW nest_mv;

-- A nested statement that fails while it is planned (1/z folded by the
-- planner into a division by zero) is a span of its own, as one failing
-- while it runs: the child of the statement that ran it, with its own
-- text, the error's SQLSTATE and message.  Caught by an exception block,
-- it ends when the block's subtransaction aborts; uncaught, when the error
-- is reported.  A generic plan (plan_cache_mode) does not fold z: the same
-- statement then fails while it runs, with the same span.  A plan that
-- failed is not cached: the next call plans, and fails, again.
CREATE FUNCTION nest_divide(z int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 / z;
  RETURN 'ok';
EXCEPTION WHEN division_by_zero THEN
  RETURN 'caught';
END $$;
CREATE FUNCTION nest_divide_uncaught(z int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 / z;
  RETURN 'ok';
END $$;
CREATE FUNCTION nest_divide_generic(z int) RETURNS text LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  PERFORM 1 / z;
  RETURN 'ok';
END $$;
-- Planned and not run by the executor (a simple expression), or planned
-- well: no span is made at planning.
CREATE FUNCTION nest_assign(z int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE r int;
BEGIN
  r := z + 1;
  RETURN r;
END $$;
-- A function the planner folds, failing while it runs: its statement's
-- span, open when the planning fails, ends with the same error.  Run while
-- a nested statement is planned, it is the enclosing span's child, as when
-- the planning succeeds.
CREATE FUNCTION nest_fail_folded() RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN (SELECT count(*) FROM nest_parent) / 0;
END $$;
CREATE FUNCTION nest_call_folded() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM nest_fail_folded();
  RETURN 'ok';
EXCEPTION WHEN division_by_zero THEN
  RETURN 'caught';
END $$;
SELECT traceprof.reset();
SET traceprof.track = 'all';
SET traceprof.query_text = 'full';
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-60f067aa0ba902b7-01';
SELECT nest_divide(0) AS caught, nest_divide(0) AS again;
SELECT nest_divide_uncaught(0) AS uncaught;
SELECT nest_divide_generic(0) AS generic;
SELECT nest_divide(1) AS divided;
SELECT nest_assign(1) AS assigned;
SELECT nest_call_folded() AS folded;
SET traceprof.traceparent = '';
RESET traceprof.query_text;
RESET traceprof.track;
SELECT c.kind, c.name, c.status, c.attributes->>'db.response.status_code' AS sqlstate,
       c.status_message, c.query, coalesce(p.query, '(caller)') AS parent
  FROM traceprof.spans c LEFT JOIN traceprof.spans p ON p.span_id = c.parent_span_id
 WHERE c.name <> 'plan'
 ORDER BY c.start_time;
-- the failed spans lie within their parents', measured as the others
SELECT bool_and(c.start_time >= p.start_time AND c.end_time <= p.end_time) AS inside_parent,
       bool_and(c.cpu_time_ms IS NOT NULL) AS cpu_measured
  FROM traceprof.spans c JOIN traceprof.spans p ON p.span_id = c.parent_span_id
 WHERE c.name <> 'plan' AND c.status = 'error' AND c.kind = 'internal';
DROP FUNCTION nest_divide(int);
DROP FUNCTION nest_divide_uncaught(int);
DROP FUNCTION nest_divide_generic(int);
DROP FUNCTION nest_assign(int);
DROP FUNCTION nest_call_folded();
DROP FUNCTION nest_fail_folded();
DROP TABLE nest_src;
