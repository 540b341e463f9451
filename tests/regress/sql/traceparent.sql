-- traceprof.traceparent: strict W3C validation, empty clears, SET LOCAL
CREATE EXTENSION traceprof;

SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SHOW traceprof.traceparent;
-- each of these is rejected with what was expected
SET traceprof.traceparent = 'garbage';
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
DROP ROLE traceprof_plain;
