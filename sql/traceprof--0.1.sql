/* traceprof--0.1.sql */

\echo Use "CREATE EXTENSION traceprof" to load this file. \quit

-- The extension makes its schema, so that it belongs to the extension:
-- nobody else owns it or has created objects in it that could replace the
-- functions a superuser calls, and DROP EXTENSION drops it.  The script
-- runs with search_path = pg_catalog (traceprof.control), so every object
-- is named with its schema.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_namespace WHERE nspname = 'traceprof') THEN
        RAISE EXCEPTION 'schema "traceprof" already exists'
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'CREATE EXTENSION traceprof creates that schema itself (and DROP EXTENSION '
                         'drops it), so that no other role can own it or objects in it.  Drop or '
                         'rename the existing schema first.';
    END IF;
END
$$;

CREATE SCHEMA traceprof;

COMMENT ON SCHEMA traceprof IS
    'traceprof''s views and functions: spans, stats, profiles and flame graphs of traced statements';

CREATE FUNCTION traceprof.spans_internal(
    OUT trace_id text,
    OUT span_id text,
    OUT parent_span_id text,
    OUT trace_state text,
    OUT name text,
    OUT kind text,
    OUT start_time timestamptz,
    OUT end_time timestamptz,
    OUT duration_ms float8,
    OUT cpu_time_ms float8,
    OUT status text,
    OUT status_message text,
    OUT backend_pid int4,
    OUT username text,
    OUT dbname text,
    OUT query text,
    OUT attributes jsonb)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'traceprof_spans'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION traceprof.spans_internal() IS
    'Spans retained in shared memory, oldest first; use the traceprof.spans view';

CREATE VIEW traceprof.spans AS SELECT * FROM traceprof.spans_internal();

COMMENT ON VIEW traceprof.spans IS
    'Finished spans of traced statements (the last traceprof.max_spans)';

-- Rows of the view's type: the same columns, declared once.
CREATE FUNCTION traceprof.trace_spans(trace_id text)
RETURNS SETOF traceprof.spans
AS 'MODULE_PATHNAME', 'traceprof_spans'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION traceprof.trace_spans(text) IS
    'The rows of traceprof.spans of one trace, oldest first, without reading the other traces'' spans';

CREATE FUNCTION traceprof.stats_internal(
    OUT spans_created int8,
    OUT spans_dropped int8,
    OUT spans_exported int8,
    OUT export_failures int8,
    OUT malformed_contexts int8,
    OUT spans_pending int8,
    OUT capacity int8,
    OUT last_export timestamptz,
    OUT last_failure timestamptz,
    OUT last_error text,
    OUT stats_reset timestamptz,
    OUT samples_stored int8,
    OUT samples_dropped int8,
    OUT samples_exported int8,
    OUT upload_failures int8,
    OUT named_frames_percent float8,
    OUT names_overflow int8)
RETURNS record
AS 'MODULE_PATHNAME', 'traceprof_stats'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION traceprof.stats_internal() IS
    'Span and sample counters of the whole server; use the traceprof.stats view';

CREATE VIEW traceprof.stats AS SELECT * FROM traceprof.stats_internal();

COMMENT ON VIEW traceprof.stats IS
    'Span and sample counters: created, dropped when shared memory was full, exported, span export and profile upload failures, malformed trace contexts';

CREATE FUNCTION traceprof.profile(
    trace_id text,
    span_id text DEFAULT NULL,
    OUT span_name text,
    OUT stack text,
    OUT samples int8,
    OUT nanoseconds int8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'traceprof_profile_stacks'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION traceprof.profile(text, text) IS
    'CPU (or wall) stack samples of a trace (or one span): folded stacks, root first, the heaviest first';

CREATE FUNCTION traceprof.profile_top(
    trace_id text,
    n int DEFAULT 20,
    span_id text DEFAULT NULL,
    OUT function text,
    OUT self_samples int8,
    OUT total_samples int8,
    OUT self_percent float8,
    OUT self_ns int8,
    OUT total_ns int8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'traceprof_profile_top'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION traceprof.profile_top(text, int, text) IS
    'The n functions of a trace (or one span) with the most self time (CPU or wall time where they were running), with their time on the stack (total) and both as samples';

CREATE FUNCTION traceprof.flamegraph(trace_id text, span_id text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'traceprof_flamegraph'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION traceprof.flamegraph(text, text) IS
    'A self-contained interactive SVG flame graph of a trace (or one span): hover, click to zoom, search';

CREATE FUNCTION traceprof.flamegraph_diff(trace_id text, span_id text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'traceprof_flamegraph_diff'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION traceprof.flamegraph_diff(text, text) IS
    'A differential flame graph of a trace (or span) against its baseline: all retained samples of spans with the same names; red grew, blue shrank';

CREATE FUNCTION traceprof.reset()
RETURNS void
AS 'MODULE_PATHNAME', 'traceprof_reset'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION traceprof.reset() IS
    'Zero the counters and hide the retained spans and samples from traceprof.spans and the profile functions (export is not affected)';

-- By name, not left to the default: a database whose default privileges
-- keep EXECUTE from PUBLIC would lock every other role out of the views.
REVOKE ALL ON FUNCTION traceprof.reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION traceprof.spans_internal(), traceprof.trace_spans(text), traceprof.stats_internal(),
    traceprof.profile(text, text), traceprof.profile_top(text, int, text),
    traceprof.flamegraph(text, text), traceprof.flamegraph_diff(text, text) TO PUBLIC;
GRANT USAGE ON SCHEMA traceprof TO PUBLIC;
GRANT SELECT ON traceprof.spans, traceprof.stats TO PUBLIC;
