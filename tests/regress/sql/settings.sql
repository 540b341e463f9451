-- traceprof.query_text, traceprof.track, traceprof.sample_rate
SELECT traceprof.reset();
CREATE FUNCTION count_below(n int) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT count(*) FROM generate_series(1, 100) g WHERE g < n);
END $$;

SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SET traceprof.query_text = 'full';
SELECT 'secret literal' AS v;
SET traceprof.query_text = 'off';
SELECT 'secret literal' AS v;
SET traceprof.query_text = 'normalized';
SELECT 'secret literal' AS v, $$dollar$$ AS w, 1.5 AS x, B'101' AS y;
-- without a query id from PostgreSQL, every literal token is a constant
SELECT -5 AS neg, 'x'::varchar(10) AS typmod;
-- with compute_query_id = on, those the query jumble saw, as in
-- pg_stat_statements: a signed number is one, a typmod none, true one;
-- also in the second statement of a string of several
SET compute_query_id = on;
SELECT -5 AS neg, 'x'::varchar(10) AS typmod;
SELECT 1 AS first \;   SELECT -2 AS second, '4.5'::numeric(4,1) AS third, true AS fourth;
RESET compute_query_id;

-- track = top: the function's inner statement has no span of its own
SELECT count_below(10);
SET traceprof.track = 'all';
SELECT count_below(20);
SET traceprof.track = 'top';
SET traceprof.traceparent = '';

SELECT name, kind, query FROM traceprof.spans WHERE name <> 'plan' ORDER BY start_time;
-- query_text = off: the text is NULL, as its attribute is absent
SELECT query IS NULL AS query_null, attributes ? 'db.query.text' AS has_text_attribute
  FROM traceprof.spans WHERE name <> 'plan' AND coalesce(query, '') = '';

-- with track = all the nested statement is a child of the outer one
SELECT inner_span.query AS nested, outer_span.query AS parent
  FROM traceprof.spans inner_span JOIN traceprof.spans outer_span
    ON inner_span.parent_span_id = outer_span.span_id
 WHERE inner_span.kind = 'internal' AND inner_span.name <> 'plan';

-- sample_rate 1: statements without context start new root traces
SELECT traceprof.reset();
SET traceprof.sample_rate = 1;
SELECT 1 AS sampled;
SET traceprof.sample_rate = 0;
SELECT 2 AS not_sampled;
SELECT count(*) AS roots, bool_and(parent_span_id IS NULL) AS are_roots,
       bool_and(trace_id <> '4bf92f3577b34da6a3ce929d0e0e4736') AS new_trace
  FROM traceprof.spans WHERE kind = 'server';

-- shipped off, as pg_stat_statements.track_planning and track_io_timing
-- (traceprof.conf turns them on for these suites)
SELECT name, boot_val, setting FROM pg_settings
 WHERE name IN ('traceprof.track_planning', 'traceprof.track_cpu_time') ORDER BY name;
-- track_planning off: no plan span, planning time stays on the statement;
-- track_cpu_time off: no CPU time (NULL, no attribute), the rest unchanged
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT 1;
SET traceprof.track_planning = off;
SELECT 1, 2;
SET traceprof.track_cpu_time = off;
SELECT 1, 2, 3;
RESET traceprof.track_planning;
SELECT 1, 2, 3, 4;
RESET traceprof.track_cpu_time;
SET traceprof.traceparent = '';
SELECT s.query, count(p.span_id) AS plan_spans, count(p.cpu_time_ms) AS plan_cpu_times,
       s.attributes ? 'traceprof.planning_time_ns' AS planning_timed,
       s.cpu_time_ms IS NOT NULL AS cpu_timed,
       s.attributes ? 'traceprof.cpu_time_ns' AS cpu_attribute,
       s.attributes ? 'traceprof.shared_blks_hit' AS io_counted
  FROM traceprof.spans s LEFT JOIN traceprof.spans p ON p.parent_span_id = s.span_id AND p.name = 'plan'
 WHERE s.kind = 'server' AND s.name = 'SELECT'
 GROUP BY s.span_id, s.query, s.attributes, s.cpu_time_ms, s.start_time
 ORDER BY s.start_time;
-- Export settings are checked when written, not found out later from
-- traceprof.stats.
ALTER SYSTEM SET traceprof.otlp_endpoint = 'ftp://collector:4318';
ALTER SYSTEM SET traceprof.otlp_endpoint = 'http://';
ALTER SYSTEM SET traceprof.otlp_endpoint = 'collector';
ALTER SYSTEM SET traceprof.pyroscope_url = 'pyroscope';
-- what goes into a Pyroscope series name or a header
ALTER SYSTEM SET traceprof.application_name = 'my app{x=1},y';
ALTER SYSTEM SET traceprof.pyroscope_tenant_id = 'équipe';
ALTER SYSTEM SET traceprof.application_name = 'shop/db-1.x';
ALTER SYSTEM RESET traceprof.application_name;
ALTER SYSTEM SET traceprof.resource_attributes = 'team=db,owner';
ALTER SYSTEM SET traceprof.resource_attributes = 'team=%zz';
-- service.name is traceprof.service_name's, which may not be empty
ALTER SYSTEM SET traceprof.resource_attributes = 'team=db,service.name=orders';
ALTER SYSTEM SET traceprof.service_name = '';
ALTER SYSTEM SET traceprof.otlp_endpoint = 'collector:4318';
ALTER SYSTEM SET traceprof.resource_attributes = 'deployment.environment=prod,team=db%2Cpayments';
ALTER SYSTEM RESET traceprof.otlp_endpoint;
ALTER SYSTEM RESET traceprof.resource_attributes;
