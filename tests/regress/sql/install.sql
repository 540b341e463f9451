-- CREATE EXTENSION refuses a schema "traceprof" that another role could
-- use to replace the extension's functions (the control file fixes the
-- schema, and CREATE EXTENSION takes one that exists)
CREATE ROLE traceprof_mallory LOGIN;
CREATE SCHEMA traceprof AUTHORIZATION traceprof_mallory;
CREATE EXTENSION traceprof;
ALTER SCHEMA traceprof OWNER TO CURRENT_USER;
GRANT CREATE ON SCHEMA traceprof TO traceprof_mallory;
CREATE EXTENSION traceprof;
GRANT CREATE ON SCHEMA traceprof TO PUBLIC;
REVOKE CREATE ON SCHEMA traceprof FROM traceprof_mallory;
CREATE EXTENSION traceprof;
-- a schema of a superuser's, with nobody else creating in it, is fine
REVOKE CREATE ON SCHEMA traceprof FROM PUBLIC;
GRANT USAGE ON SCHEMA traceprof TO traceprof_mallory;
CREATE EXTENSION traceprof;
SELECT count(*) > 0 AS installed FROM pg_proc WHERE pronamespace = 'traceprof'::regnamespace;
DROP EXTENSION traceprof;
DROP SCHEMA traceprof;
DROP ROLE traceprof_mallory;
