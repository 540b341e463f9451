-- traceprof.traceparent: strict W3C validation, empty clears, SET LOCAL
CREATE EXTENSION traceprof;

SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SHOW traceprof.traceparent;
-- each of these is rejected with what was expected
SET traceprof.traceparent = 'garbage';
SET traceprof.traceparent = 'zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SET traceprof.traceparent = '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01';
SET traceprof.traceparent = '00-00000000000000000000000000000000-00f067aa0ba902b7-01';
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01';
SET traceprof.traceparent = 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra';
-- a rejected value leaves the previous one in place
SHOW traceprof.traceparent;
-- a future version with extra fields is accepted
SET traceprof.traceparent = '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future';
SET traceprof.traceparent = '';
SHOW traceprof.traceparent;

BEGIN;
SET LOCAL traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SHOW traceprof.traceparent;
COMMIT;
SHOW traceprof.traceparent;

-- what gets traced: a context not sampled (flags 00) is honoured even under
-- sampling; SET LOCAL holds until the block ends, by COMMIT or ROLLBACK
SELECT traceprof.reset();
SET traceprof.sample_rate = 1;
SET traceprof.traceparent = '00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-1111111111111111-00';
SELECT 'not sampled' AS t;
SET traceprof.traceparent = '00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-2222222222222222-01';
SET traceprof.sample_rate = 0;
BEGIN;
SET LOCAL traceprof.traceparent = '00-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-3333333333333333-01';
SELECT 'local' AS t;
ROLLBACK;
SELECT 'session again' AS t;
SET traceprof.traceparent = '';
BEGIN;
SET LOCAL traceprof.traceparent = '00-cccccccccccccccccccccccccccccccc-4444444444444444-01';
SELECT 'local, committed' AS t;
COMMIT;
SELECT 'untraced after the block' AS t;
SELECT substr(trace_id, 1, 4) AS trace, parent_span_id, name, query
  FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;

-- tracestate: checked when set, kept on the spans made under its
-- traceparent (nested ones too), members past 512 bytes dropped from the end
SET traceprof.tracestate = 'Congo=1';
SET traceprof.tracestate = 'congo=1,rojo';
SET traceprof.tracestate = ' congo=t61rcWkgMzE , rojo=00f067aa0ba902b7 ,';
SHOW traceprof.tracestate;
SELECT traceprof.reset();
SET traceprof.traceparent = '00-dddddddddddddddddddddddddddddddd-5555555555555555-01';
SET traceprof.track = 'all';
DO $$ BEGIN PERFORM 1; END $$;
RESET traceprof.track;
-- a comment's tracestate goes with the comment's traceparent only: none
-- here, and the session's is not taken for it
SELECT 'comment' AS t /*traceparent='00-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee-6666666666666666-01'*/;
SELECT 'comment with state' AS t /*traceparent='00-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee-7777777777777777-01',tracestate='ot%3Dth%3A8'*/;
-- a malformed one is counted and left out; its traceparent still holds
SELECT 'bad state' AS t /*traceparent='00-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee-8888888888888888-01',tracestate='Bad%3D1'*/;
SELECT set_config('traceprof.tracestate', string_agg('k' || g || '=' || repeat('v', 100), ','), false) IS NOT NULL AS long_set
  FROM generate_series(1, 6) g;
SELECT 'long state' AS t;
SET traceprof.tracestate = '';
SELECT 'no state' AS t;
SET traceprof.traceparent = '';
SELECT substr(trace_id, 1, 4) AS trace, kind, name, length(trace_state) AS state_bytes,
       left(trace_state, 20) AS state
  FROM traceprof.spans ORDER BY start_time, kind DESC;
SELECT malformed_contexts FROM traceprof.stats;

-- only superusers may point the server elsewhere
CREATE ROLE traceprof_plain LOGIN;
SET ROLE traceprof_plain;
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SET traceprof.sample_rate = 1;
SET traceprof.query_text = 'full';
SET traceprof.track_cpu_time = off;
SET traceprof.otlp_endpoint = 'http://elsewhere:4318';
SELECT traceprof.reset();
RESET ROLE;

-- a context names one request's caller: not a default stored with the
-- server, a role, a database or a function, by which a database owner would
-- trace other roles' sessions; an empty one stores nothing to refuse
ALTER SYSTEM SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
ALTER SYSTEM SET traceprof.tracestate = 'congo=1';
ALTER ROLE traceprof_plain SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
ALTER ROLE traceprof_plain SET traceprof.tracestate = 'congo=1';
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET traceprof.traceparent = %L', current_database(),
                           '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'); END $$;
CREATE FUNCTION traced_always() RETURNS int LANGUAGE sql
  SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' AS 'SELECT 1';
ALTER ROLE traceprof_plain SET traceprof.traceparent = '';
SELECT setconfig FROM pg_db_role_setting WHERE setrole = 'traceprof_plain'::regrole;
ALTER ROLE traceprof_plain RESET ALL;
DROP ROLE traceprof_plain;
