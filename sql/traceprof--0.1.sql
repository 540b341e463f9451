/* traceprof--0.1.sql */

\echo Use "CREATE EXTENSION traceprof" to load this file. \quit

-- The schema is fixed (traceprof.control), and CREATE EXTENSION uses one
-- that exists already.  Whoever owns it, or may create objects in it, could
-- later replace the functions a superuser calls: refuse such a schema.
-- These checks run with search_path = traceprof, that very schema, where a
-- function fitting their arguments better than pg_catalog's would win (an
-- aggregate string_agg(name, text) returning NULL hid every role): their
-- functions are qualified.
DO $$
DECLARE
    owner name;
    creators text;
BEGIN
    SELECT r.rolname INTO owner
      FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
     WHERE n.nspname = 'traceprof' AND NOT r.rolsuper;
    SELECT pg_catalog.string_agg(coalesce(r.rolname, 'PUBLIC'), ', ') INTO creators
      FROM pg_namespace n, pg_catalog.aclexplode(n.nspacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
     WHERE n.nspname = 'traceprof' AND a.privilege_type = 'CREATE' AND NOT coalesce(r.rolsuper, false);
    IF owner IS NOT NULL OR creators IS NOT NULL THEN
        RAISE EXCEPTION 'schema "traceprof" already exists and %',
            CASE WHEN owner IS NOT NULL THEN pg_catalog.format('is owned by role "%s", not a superuser', owner)
                 ELSE pg_catalog.format('grants CREATE to %s', creators) END
            USING HINT = 'Whoever owns the schema or may create objects in it could replace the '
                         'extension''s functions.  Drop or rename that schema (CREATE EXTENSION '
                         'traceprof creates its own), or make a superuser its only owner and creator.';
    END IF;
END
$$;

-- Nor one that lets a role that is not a superuser create objects in it
-- through membership: privileges granted to a role (a superuser role too:
-- its grants are inherited, its superuser status is not) are its members',
-- a member may SET ROLE to it, and a member of the owner may grant itself
-- CREATE.  (Kept apart from the check above, whose errors name the grant.)
DO $$
DECLARE
    members text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%s (a member of %s)', m.rolname, via), ', ' ORDER BY m.rolname) INTO members
      FROM pg_roles m,
           LATERAL (SELECT pg_catalog.string_agg(g.rolname, ', ' ORDER BY g.rolname) AS via
                      FROM pg_namespace n
                      JOIN pg_roles g
                        ON g.oid = n.nspowner
                        OR g.oid IN (SELECT a.grantee FROM pg_catalog.aclexplode(n.nspacl) a
                                      WHERE a.privilege_type = 'CREATE')
                     WHERE n.nspname = 'traceprof' AND g.oid <> m.oid
                       AND pg_catalog.pg_has_role(m.oid, g.oid, 'MEMBER')) AS v
     WHERE NOT m.rolsuper AND v.via IS NOT NULL;
    IF members IS NOT NULL THEN
        RAISE EXCEPTION 'schema "traceprof" already exists and roles that are not superusers may create objects in it through membership: %', members
            USING HINT = 'Whoever owns the schema or may create objects in it could replace the '
                         'extension''s functions.  Drop or rename that schema (CREATE EXTENSION '
                         'traceprof creates its own), or revoke those memberships.';
    END IF;
END
$$;

-- Nor one that holds objects a role that is not a superuser owns: made
-- while it could create them, they stay its own after its CREATE is
-- revoked, and a function or operator fitting a call better than ours
-- would run with the caller's rights.
DO $$
DECLARE
    owned text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%s (owned by %s)',
                                 pg_catalog.pg_describe_object(o.classid, o.objid, 0), r.rolname),
                                 ', ' ORDER BY o.classid, o.objid) INTO owned
      FROM (SELECT 'pg_catalog.pg_class'::pg_catalog.regclass AS classid, c.oid AS objid, c.relowner AS owner
              FROM pg_catalog.pg_class c WHERE c.relnamespace = 'traceprof'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid, p.proowner
              FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'traceprof'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid, t.typowner
              FROM pg_catalog.pg_type t WHERE t.typnamespace = 'traceprof'::pg_catalog.regnamespace
               AND t.typrelid = 0 AND t.typelem = 0
            UNION ALL
            SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass, o.oid, o.oprowner
              FROM pg_catalog.pg_operator o WHERE o.oprnamespace = 'traceprof'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'pg_catalog.pg_collation'::pg_catalog.regclass, c.oid, c.collowner
              FROM pg_catalog.pg_collation c WHERE c.collnamespace = 'traceprof'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'pg_catalog.pg_conversion'::pg_catalog.regclass, c.oid, c.conowner
              FROM pg_catalog.pg_conversion c WHERE c.connamespace = 'traceprof'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'pg_catalog.pg_opfamily'::pg_catalog.regclass, f.oid, f.opfowner
              FROM pg_catalog.pg_opfamily f WHERE f.opfnamespace = 'traceprof'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'pg_catalog.pg_ts_config'::pg_catalog.regclass, c.oid, c.cfgowner
              FROM pg_catalog.pg_ts_config c WHERE c.cfgnamespace = 'traceprof'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'pg_catalog.pg_ts_dict'::pg_catalog.regclass, d.oid, d.dictowner
              FROM pg_catalog.pg_ts_dict d WHERE d.dictnamespace = 'traceprof'::pg_catalog.regnamespace) o
      JOIN pg_catalog.pg_roles r ON r.oid = o.owner
     WHERE NOT r.rolsuper;
    IF owned IS NOT NULL THEN
        RAISE EXCEPTION 'schema "traceprof" already exists and holds objects that roles that are not superusers own: %', owned
            USING HINT = 'Their owners could have them run instead of the extension''s functions.  '
                         'Drop those objects, or drop or rename the schema (CREATE EXTENSION '
                         'traceprof creates its own).';
    END IF;
END
$$;

CREATE FUNCTION spans_internal(
    OUT trace_id text,
    OUT span_id text,
    OUT parent_span_id text,
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

COMMENT ON FUNCTION spans_internal() IS
    'Spans retained in shared memory, oldest first; use the traceprof.spans view';

CREATE VIEW spans AS SELECT * FROM spans_internal();

COMMENT ON VIEW spans IS
    'Finished spans of traced statements (the last traceprof.max_spans)';

CREATE FUNCTION stats_internal(
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

CREATE VIEW stats AS SELECT * FROM stats_internal();

COMMENT ON VIEW stats IS
    'Span and sample counters: created, dropped when shared memory was full, exported, span export and profile upload failures, malformed trace contexts';

CREATE FUNCTION profile(
    trace_id text,
    span_id text DEFAULT NULL,
    OUT span_name text,
    OUT stack text,
    OUT samples int8,
    OUT nanoseconds int8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'traceprof_profile_stacks'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION profile(text, text) IS
    'CPU (or wall) stack samples of a trace (or one span): folded stacks, root first, the heaviest first';

CREATE FUNCTION profile_top(
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

COMMENT ON FUNCTION profile_top(text, int, text) IS
    'The n functions of a trace (or one span) with the most self time (CPU or wall time where they were running), with their time on the stack (total) and both as samples';

CREATE FUNCTION flamegraph(trace_id text, span_id text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'traceprof_flamegraph'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION flamegraph(text, text) IS
    'A self-contained interactive SVG flame graph of a trace (or one span): hover, click to zoom, search';

CREATE FUNCTION flamegraph_diff(trace_id text, span_id text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'traceprof_flamegraph_diff'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION flamegraph_diff(text, text) IS
    'A differential flame graph of a trace (or span) against its baseline: all retained samples of spans with the same names; red grew, blue shrank';

CREATE FUNCTION reset()
RETURNS void
AS 'MODULE_PATHNAME', 'traceprof_reset'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION reset() IS
    'Zero the counters and hide the retained spans from traceprof.spans (export is not affected)';

REVOKE ALL ON FUNCTION reset() FROM PUBLIC;
GRANT USAGE ON SCHEMA traceprof TO PUBLIC;
GRANT SELECT ON spans, stats TO PUBLIC;
