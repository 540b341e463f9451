-- CREATE EXTENSION makes the schema "traceprof" itself, so that it belongs
-- to the extension: one that exists already is refused, whoever owns it
-- (its owner, or a role that could create objects in it, could have
-- planted a function that a superuser's call would run)
CREATE ROLE traceprof_mallory LOGIN;
CREATE SCHEMA traceprof AUTHORIZATION traceprof_mallory;
CREATE EXTENSION traceprof;
-- a superuser's empty schema too: nothing was created in either
ALTER SCHEMA traceprof OWNER TO CURRENT_USER;
CREATE EXTENSION traceprof;
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'traceprof';
SELECT count(*) AS objects FROM pg_proc WHERE pronamespace = 'traceprof'::regnamespace;
DROP SCHEMA traceprof;
-- the schema is fixed: installed into pg_catalog's search path, objects in traceprof
CREATE EXTENSION traceprof SCHEMA public;
CREATE EXTENSION traceprof;
SELECT n.nspname AS extension_schema, r.rolsuper AS schema_owner_is_superuser, s.nspacl AS schema_acl
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace,
       pg_namespace s JOIN pg_roles r ON r.oid = s.nspowner
 WHERE e.extname = 'traceprof' AND s.nspname = 'traceprof';
-- the schema is one of the extension's objects: DROP EXTENSION drops it
SELECT pg_describe_object(classid, objid, 0) AS member
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'traceprof')
 ORDER BY 1;
-- a role that is not a superuser cannot add objects to it
SET ROLE traceprof_mallory;
CREATE FUNCTION traceprof.planted() RETURNS int LANGUAGE sql AS 'SELECT 1';
RESET ROLE;
DROP EXTENSION traceprof;
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'traceprof';
-- hardened default privileges (no EXECUTE for PUBLIC on new functions) do
-- not lock other roles out: the readers are granted to PUBLIC by name
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
CREATE EXTENSION traceprof;
SELECT p.proname, has_function_privilege('traceprof_mallory', p.oid, 'EXECUTE') AS executable
  FROM pg_proc p WHERE p.pronamespace = 'traceprof'::regnamespace ORDER BY 1;
SET ROLE traceprof_mallory;
SELECT count(*) >= 0 AS spans_readable FROM traceprof.spans;
SELECT count(*) AS stats_rows FROM traceprof.stats;
RESET ROLE;
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
-- SQL objects of another build, declaring other columns than the library
-- writes, are refused by name instead of crashing the backend
CREATE FUNCTION public.spans_of_another_build(OUT trace_id text, OUT span_id text)
  RETURNS SETOF record AS '$libdir/traceprof', 'traceprof_spans' LANGUAGE C;
SELECT count(*) FROM public.spans_of_another_build();
DROP FUNCTION public.spans_of_another_build();
DROP EXTENSION traceprof;
DROP ROLE traceprof_mallory;
-- the schema check is PL/pgSQL: a database without it is told so, and
-- CASCADE installs it
SELECT requires FROM pg_available_extension_versions WHERE name = 'traceprof';
\set regress_database :DBNAME
CREATE DATABASE traceprof_no_plpgsql TEMPLATE template0;
\c traceprof_no_plpgsql
DROP EXTENSION plpgsql;
CREATE EXTENSION traceprof;
CREATE EXTENSION traceprof CASCADE;
SELECT extname FROM pg_extension WHERE extname IN ('plpgsql', 'traceprof') ORDER BY 1;
\c :regress_database
DROP DATABASE traceprof_no_plpgsql;
