-- CREATE EXTENSION refuses a schema "traceprof" that another role could
-- use to replace the extension's functions (the control file fixes the
-- schema, and CREATE EXTENSION takes one that exists)
CREATE ROLE traceprof_mallory LOGIN;
CREATE SCHEMA traceprof AUTHORIZATION traceprof_mallory;
CREATE EXTENSION traceprof;
ALTER SCHEMA traceprof OWNER TO CURRENT_USER;
GRANT CREATE ON SCHEMA traceprof TO traceprof_mallory;
CREATE EXTENSION traceprof;
-- The checks run with search_path = traceprof: an aggregate planted there
-- that fits their arguments better than pg_catalog's must not blind them
GRANT USAGE ON SCHEMA traceprof TO traceprof_mallory;
SET ROLE traceprof_mallory;
CREATE FUNCTION traceprof.blind(text, name, text) RETURNS text LANGUAGE sql AS 'SELECT NULL::text';
CREATE AGGREGATE traceprof.string_agg(name, text) (SFUNC = traceprof.blind, STYPE = text);
RESET ROLE;
CREATE EXTENSION traceprof;
DROP EXTENSION IF EXISTS traceprof;
-- through membership too: a member of a superuser role granted CREATE
REVOKE CREATE ON SCHEMA traceprof FROM traceprof_mallory;
CREATE ROLE traceprof_root SUPERUSER NOLOGIN;
GRANT CREATE ON SCHEMA traceprof TO traceprof_root;
GRANT traceprof_root TO traceprof_mallory;
CREATE EXTENSION traceprof;
DROP EXTENSION IF EXISTS traceprof;
-- what a role planted while it could create objects stays its own: refused
-- after its CREATE is gone too
REVOKE traceprof_root FROM traceprof_mallory;
REVOKE CREATE ON SCHEMA traceprof FROM traceprof_root;
DROP ROLE traceprof_root;
CREATE EXTENSION traceprof;
DROP EXTENSION IF EXISTS traceprof;
DROP AGGREGATE traceprof.string_agg(name, text);
DROP FUNCTION traceprof.blind(text, name, text);
GRANT CREATE ON SCHEMA traceprof TO PUBLIC;
CREATE EXTENSION traceprof;
-- a schema of a superuser's, with nobody else creating in it, is fine
REVOKE CREATE ON SCHEMA traceprof FROM PUBLIC;
GRANT USAGE ON SCHEMA traceprof TO traceprof_mallory;
CREATE EXTENSION traceprof;
SELECT count(*) > 0 AS installed FROM pg_proc WHERE pronamespace = 'traceprof'::regnamespace;
DROP EXTENSION traceprof;
DROP SCHEMA traceprof;
DROP ROLE traceprof_mallory;
