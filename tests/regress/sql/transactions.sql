-- Transaction control inside procedures, and errors caught by exception
-- blocks: spans stay right, and the session keeps tracing afterwards.
CREATE TABLE tx_t (id int);
CREATE PROCEDURE tx_commit_rollback() LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tx_t VALUES (1);
  COMMIT;
  INSERT INTO tx_t VALUES (2);
  ROLLBACK;
END $$;
-- A loop over a query that commits: the commit keeps the query's rows and
-- ends its run, so its span ends there; the loop's later statements are the
-- procedure's, where the first was the query's (it ran inside the run).
CREATE PROCEDURE tx_loop_commit() LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT g FROM generate_series(11, 13) g LOOP
    INSERT INTO tx_t VALUES (r.g);
    COMMIT;
  END LOOP;
END $$;
CREATE FUNCTION tx_catch() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    PERFORM 1 / (SELECT count(*) FROM tx_t WHERE id < 0);
  EXCEPTION WHEN division_by_zero THEN
    RETURN 'caught';
  END;
  RETURN 'not caught';
END $$;
-- After a caught error the function goes on: its next statement is still
-- nested (no span of its own under track = top).
CREATE FUNCTION tx_catch_and_go_on() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    PERFORM 1 / (SELECT count(*) FROM tx_t WHERE id < 0);
  EXCEPTION WHEN division_by_zero THEN
    NULL;
  END;
  RETURN (SELECT count(*) FROM tx_t);
END $$;
-- An AFTER trigger runs in ExecutorFinish: its error ends the INSERT's span.
CREATE TABLE tx_guarded (id int);
CREATE FUNCTION tx_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'checking %', NEW.id;
  RAISE EXCEPTION 'row % refused', NEW.id USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER tx_refuse AFTER INSERT ON tx_guarded FOR EACH ROW EXECUTE FUNCTION tx_refuse();

SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
CALL tx_commit_rollback();
SELECT 'after the procedure' AS next;
SELECT tx_catch();
SELECT 'after the caught error' AS next;
SELECT tx_catch_and_go_on();
INSERT INTO tx_guarded VALUES (7);
SELECT 'after the trigger' AS next;
SET traceprof.track = 'all';
CALL tx_commit_rollback();
CALL tx_loop_commit();
SELECT tx_catch();
SELECT tx_catch_and_go_on();
SELECT 'after both, nested' AS next;
RESET traceprof.track;
BEGIN;
SAVEPOINT s;
SELECT 1 / 0;
ROLLBACK TO SAVEPOINT s;
SELECT 'after the savepoint' AS next;
COMMIT;
-- A ROLLBACK under an open savepoint ends well.
BEGIN;
SAVEPOINT s;
SELECT 'inside the savepoint' AS next;
ROLLBACK;
-- With errors kept out of the server log the abort still names the error.
SET log_min_messages = 'fatal';
SELECT 2 / 0;
RESET log_min_messages;
-- A COMMIT or PREPARE TRANSACTION of a failed block rolls it back: the
-- client gets ROLLBACK for its command tag, and so does the span's name.
BEGIN;
SELECT 3 / 0;
COMMIT;
BEGIN;
SELECT 4 / 0;
PREPARE TRANSACTION 'tx_never';
SET traceprof.traceparent = '';
SELECT id FROM tx_t ORDER BY id;

-- One span per statement, in order; the nested ones under their caller.
SELECT s.kind, s.name, s.status, s.status_message,
       s.attributes->>'db.response.status_code' AS sqlstate, s.query, p.query AS parent
  FROM traceprof.spans s LEFT JOIN traceprof.spans p ON p.span_id = s.parent_span_id
 WHERE s.name NOT IN ('plan', 'SET', 'RESET')
 ORDER BY s.start_time, s.kind DESC;

-- A CALL is named after its procedure: db.stored_procedure.name, no collection.
SELECT DISTINCT name, attributes->>'db.stored_procedure.name' AS procedure,
       attributes ? 'db.collection.name' AS has_collection
  FROM traceprof.spans WHERE name LIKE 'CALL%' ORDER BY name;

-- Transaction statements where nothing traces them (a short path): only
-- those carrying a comment get a span, under the comment's context.
SELECT traceprof.reset();
BEGIN;
SELECT 'untraced' AS next;
COMMIT /*traceparent='00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/;
BEGIN /*traceparent='00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01'*/;
SAVEPOINT s;
RELEASE SAVEPOINT s;
ROLLBACK;
SELECT name, trace_id, parent_span_id, status FROM traceprof.spans ORDER BY start_time;
-- Errors caught under a traced statement keep no memory (each is copied
-- for the spans it may close): 20000 of them leave the backend's top
-- memory context as it was (they added ~150 bytes each).
CREATE FUNCTION tx_many_caught(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  r int := 0;
BEGIN
  FOR k IN 1..n LOOP
    BEGIN
      RAISE EXCEPTION 'caught %', k;
    EXCEPTION WHEN others THEN
      r := r + 1;
    END;
  END LOOP;
  RETURN r;
END $$;
SET traceprof.traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT tx_many_caught(100);
SELECT used_bytes AS top_before FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext' \gset
SELECT tx_many_caught(20000);
SELECT used_bytes - :top_before < 100000 AS top_memory_kept
  FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext';
SET traceprof.traceparent = '';
DROP FUNCTION tx_many_caught(int);
DROP PROCEDURE tx_commit_rollback();
DROP PROCEDURE tx_loop_commit();
DROP FUNCTION tx_catch();
DROP FUNCTION tx_catch_and_go_on();
DROP TABLE tx_guarded;
DROP FUNCTION tx_refuse();
DROP TABLE tx_t;

-- PREPARE TRANSACTION does its work (deferred triggers, the state file) as
-- the transaction ends, as COMMIT does: its span ends there, with the
-- deferred check nested under it, and a check failing there fails it.
SELECT traceprof.reset();
CREATE TABLE tx_pk (id int PRIMARY KEY);
CREATE TABLE tx_fk (id int REFERENCES tx_pk DEFERRABLE INITIALLY DEFERRED);
INSERT INTO tx_pk VALUES (1);
SET traceprof.track = 'all';
SET traceprof.traceparent = '00-7bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
BEGIN;
INSERT INTO tx_fk VALUES (1);
PREPARE TRANSACTION 'tx_kept';
BEGIN;
INSERT INTO tx_fk VALUES (2);
PREPARE TRANSACTION 'tx_refused';
SET traceprof.traceparent = '';
RESET traceprof.track;
COMMIT PREPARED 'tx_kept';
SELECT s.kind, s.name, s.status, s.status_message, p.name AS parent
  FROM traceprof.spans s LEFT JOIN traceprof.spans p ON p.span_id = s.parent_span_id
 WHERE s.trace_id = '7bf92f3577b34da6a3ce929d0e0e4736' AND s.name NOT IN ('plan', 'SET', 'RESET')
 ORDER BY s.start_time, s.kind DESC;
DROP TABLE tx_fk, tx_pk;
