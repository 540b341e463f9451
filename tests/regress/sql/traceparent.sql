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
