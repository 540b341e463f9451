-- Spans of traced statements: parentage, names, attributes, errors
SELECT traceprof.reset();
CREATE TABLE orders_t (id int PRIMARY KEY, note text);

-- untraced: nothing recorded
INSERT INTO orders_t VALUES (1, 'untraced');
SELECT count(*) AS spans FROM traceprof.spans;

SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
INSERT INTO orders_t SELECT g, 'note ' || g FROM generate_series(2, 50) g;
SELECT note FROM orders_t WHERE id = 7;
UPDATE orders_t SET note = 'x' WHERE id < 10;
SELECT 1 / 0;
SELECT * FROM orders_t WHERE id = 1 / (id - 3);
COPY orders_t TO stdout WITH (FORMAT csv) ;
-- COPY (query) TO names the table its query reads or writes, when one
COPY (SELECT id FROM orders_t WHERE id < 3 ORDER BY id) TO stdout;
COPY (WITH w AS (SELECT 1 AS one) SELECT * FROM w) TO stdout;
COPY (SELECT id FROM orders_t WHERE id IN (SELECT 1)) TO stdout;
CREATE INDEX orders_t_note ON orders_t (note);
-- RETURNING: rows sent and rows written
UPDATE orders_t SET note = note WHERE id = 2 RETURNING id;

-- a trailing sqlcommenter comment overrides the session's context
SELECT count(*) FROM orders_t /*db_driver='x',traceparent='00-11111111111111111111111111111111-2222222222222222-01'*/;
-- a malformed one is ignored (and counted): the session context applies
SELECT count(*) FROM orders_t /*traceparent='00-zz'*/;
-- not sampled (flags 00): no span
SELECT 42 /*traceparent='00-11111111111111111111111111111111-3333333333333333-00'*/;
SET traceprof.traceparent = '';

SELECT name, kind, parent_span_id, status, status_message, query,
       attributes->>'db.operation.name' AS operation,
       attributes->>'db.collection.name' AS collection,
       attributes->>'db.response.returned_rows' AS rows,
       attributes->>'traceprof.rows_affected' AS written,
       attributes->>'db.response.status_code' AS sqlstate,
       trace_id = '4bf92f3577b34da6a3ce929d0e0e4736' AS in_caller_trace
  FROM traceprof.spans
 WHERE kind = 'server'
 ORDER BY start_time;

-- other keys' values may be long (a route; sqlcommenter sorts keys, so they
-- come first): the traceparent after them still counts
SELECT 1 AS long_route /*route='%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi%2Fapi',traceparent='00-11111111111111111111111111111111-4444444444444444-01'*/;
SELECT name, trace_id
  FROM traceprof.spans WHERE parent_span_id = '4444444444444444';

-- a comment opening the statement counts when the one ending it has no
-- traceparent (sqlcommenters that prepend theirs); normalized text drops it
SELECT malformed_contexts AS malformed_before FROM traceprof.stats \gset
/*db_driver='x',traceparent='00-11111111111111111111111111111111-5555555555555555-01'*/ SELECT 2 AS leading;
/*traceparent='00-11111111111111111111111111111111-6666666666666666-01'*/ SELECT 3 AS both_ends /*traceparent='00-11111111111111111111111111111111-7777777777777777-01'*/;
/*traceparent='00-11111111111111111111111111111111-8888888888888888-01'*/ SELECT 4 AS other_keys_at_end /*route='%2Fx'*/;
/*traceparent='00-11111111111111111111111111111111-9999999999999999-01'*/ CREATE TABLE leading_t (id int);
PREPARE leading_p AS SELECT 7 AS executed;
/*traceparent='00-11111111111111111111111111111111-aaaaaaaaaaaaaaaa-01'*/ EXECUTE leading_p;
DEALLOCATE leading_p;
/* a note, not a context */ SELECT 5 AS plain_note;
/*traceparent='00-zz'*/ SELECT 6 AS malformed_leading;
SELECT name, parent_span_id, query
  FROM traceprof.spans
 WHERE kind = 'server' AND trace_id = '11111111111111111111111111111111'
   AND parent_span_id <> '4444444444444444'
 ORDER BY start_time;
SELECT malformed_contexts - :malformed_before AS malformed_counted FROM traceprof.stats;
DROP TABLE leading_t;

-- every planning span is a child of a statement span of the same trace
SELECT count(*) AS plan_spans,
       bool_and(p.name IS NOT NULL AND p.trace_id = c.trace_id) AS parented
  FROM traceprof.spans c LEFT JOIN traceprof.spans p ON p.span_id = c.parent_span_id
 WHERE c.name = 'plan';

-- server-side measurements are present and sane
SELECT bool_and(duration_ms >= 0 AND cpu_time_ms >= 0 AND cpu_time_ms <= duration_ms * 1.5 + 1) AS times_sane,
       bool_and((attributes->>'traceprof.backend_pid')::int = pg_backend_pid()) AS our_backend,
       bool_and(attributes ? 'traceprof.shared_blks_hit' AND attributes ? 'traceprof.wal_bytes') AS io_counted,
       bool_and(attributes->>'db.namespace' = current_database()) AS namespace,
       bool_and(attributes->>'db.system.name' = 'postgresql') AS system
  FROM traceprof.spans;
SELECT count(*) FILTER (WHERE attributes ? 'traceprof.planning_time_ns') > 0 AS planning_timed
  FROM traceprof.spans WHERE kind = 'server';
-- the counters are each statement's own: the INSERT wrote WAL, the lookup
-- touched pages and wrote none
SELECT name, (attributes->>'traceprof.wal_bytes')::int8 > 0 AS wrote_wal,
       (attributes->>'traceprof.shared_blks_hit')::int8 +
       (attributes->>'traceprof.shared_blks_read')::int8 > 0 AS touched_pages
  FROM traceprof.spans
 WHERE kind = 'server' AND name IN ('INSERT orders_t', 'SELECT orders_t')
 ORDER BY start_time;

SELECT spans_created, spans_dropped, malformed_contexts FROM traceprof.stats;

-- Query ids are PostgreSQL's: none while compute_query_id leaves them off
-- (traceprof does not jumble statements itself); with it on, the same id
-- for the same statement with other constants.
SHOW compute_query_id;
SELECT traceprof.reset();
SELECT note FROM orders_t WHERE id = 11;
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT note FROM orders_t WHERE id = 12;
SET compute_query_id = on;
SELECT note FROM orders_t WHERE id = 13;
SELECT note FROM orders_t WHERE id = 14;
RESET compute_query_id;
SET traceprof.traceparent = '';
SELECT count(*) AS spans, count(attributes->>'traceprof.query_id') AS with_query_id,
       count(DISTINCT attributes->>'traceprof.query_id') AS query_ids,
       bool_and((attributes->>'traceprof.query_id')::int8 <> 0) AS nonzero,
       min(query) AS query, max(query) AS same_query
FROM traceprof.spans WHERE name = 'SELECT orders_t';
-- A normalized text remembered for its query id does not stand in for the
-- full text.
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT note FROM orders_t WHERE id = 15;
SET traceprof.query_text = 'full';
SELECT note FROM orders_t WHERE id = 16;
RESET traceprof.query_text;
SET traceprof.traceparent = '';
SELECT query FROM traceprof.spans WHERE name = 'SELECT orders_t' ORDER BY start_time;
-- Table names are remembered per backend: a renamed table is named anew.
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT count(*) FROM orders_t;
ALTER TABLE orders_t RENAME TO orders_renamed;
SELECT count(*) FROM orders_renamed;
ALTER TABLE orders_renamed RENAME TO orders_t;
SELECT count(*) FROM orders_t;
SET traceprof.traceparent = '';
SELECT name, attributes->>'db.collection.name' AS collection
  FROM traceprof.spans WHERE kind = 'server' AND attributes->>'db.operation.name' = 'SELECT'
 ORDER BY start_time;
-- db.collection.name through views, subqueries and partitions: the relation
-- the statement names (a view, not the tables its definition reads on its
-- owner's behalf; a partitioned table, not its partitions), the same for a
-- plan made for the statement and a cached generic plan.
CREATE TABLE orders_part (id int, note text) PARTITION BY RANGE (id);
CREATE TABLE orders_part_1 PARTITION OF orders_part FOR VALUES FROM (0) TO (100);
CREATE TABLE orders_part_2 PARTITION OF orders_part FOR VALUES FROM (100) TO (200);
CREATE VIEW orders_v AS SELECT id, note FROM orders_t WHERE id > 0;
CREATE VIEW orders_vv AS SELECT id FROM orders_v;
CREATE VIEW orders_v_invoker WITH (security_invoker) AS SELECT id FROM orders_t;
PREPARE part_read AS SELECT count(*) FROM orders_part WHERE id < $1;
PREPARE part_write AS UPDATE orders_part SET note = 'p' WHERE id = $1;
PREPARE view_read AS SELECT count(*) FROM orders_v WHERE id < $1;
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT count(*) FROM orders_v;
SELECT count(*) FROM orders_vv;
SELECT count(*) FROM orders_v_invoker;
SELECT count(*) FROM orders_v JOIN orders_part USING (id);
SELECT count(*) FROM (SELECT id FROM orders_t WHERE id > 5) s;
SELECT count(*) FROM orders_part;
UPDATE orders_v SET note = note WHERE id = 3;
SET plan_cache_mode = force_custom_plan;
EXECUTE part_read(150);
EXECUTE part_write(150);
EXECUTE view_read(5);
SET plan_cache_mode = force_generic_plan;
EXECUTE part_read(150);
EXECUTE part_write(150);
EXECUTE view_read(5);
-- the generic plans again, from the cache: no planning
EXECUTE part_read(150);
EXECUTE part_write(150);
EXECUTE view_read(5);
RESET plan_cache_mode;
SET traceprof.traceparent = '';
SELECT name, attributes->>'db.collection.name' AS collection, query
  FROM traceprof.spans WHERE kind = 'server' AND name NOT IN ('SET', 'RESET') ORDER BY start_time;
DROP VIEW orders_vv, orders_v, orders_v_invoker;
DROP TABLE orders_part;
-- Tables named in sublinks and CTEs count too (the planner flattens them
-- into the plan's range table): each statement below is named the same
-- planned for it (the first EXECUTE) and from its cached plan (the second).
CREATE TABLE sub_a (id int);
CREATE TABLE sub_b (id int);
PREPARE sub_in AS SELECT count(*) FROM sub_a WHERE id IN (SELECT id FROM sub_b);
PREPARE sub_scalar AS SELECT (SELECT count(*) FROM sub_b) FROM sub_a;
PREPARE sub_cte AS WITH c AS MATERIALIZED (SELECT id FROM sub_b) SELECT count(*) FROM sub_a, c;
PREPARE sub_write AS WITH d AS (DELETE FROM sub_b RETURNING id) SELECT count(*) FROM d;
PREPARE sub_same AS SELECT count(*) FROM sub_a WHERE id IN (SELECT id FROM sub_a);
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SET plan_cache_mode = force_generic_plan;
EXECUTE sub_in;
EXECUTE sub_in;
EXECUTE sub_scalar;
EXECUTE sub_scalar;
EXECUTE sub_cte;
EXECUTE sub_cte;
EXECUTE sub_write;
EXECUTE sub_write;
EXECUTE sub_same;
EXECUTE sub_same;
RESET plan_cache_mode;
SET traceprof.traceparent = '';
SELECT name, attributes->>'db.collection.name' AS collection, query
  FROM traceprof.spans WHERE kind = 'server' AND name NOT IN ('SET', 'RESET') ORDER BY start_time;
DEALLOCATE ALL;
DROP TABLE sub_a, sub_b;
-- Spans are stored packed: every string at its longest comes back whole
-- (a 63-byte table name, a message cut to 255 bytes, a multibyte query
-- text cut to traceprof.max_query_length bytes on a character boundary).
SELECT traceprof.reset();
CREATE TABLE t23456789_123456789_123456789_123456789_123456789_123456789_123 (x int);
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SET traceprof.query_text = 'full';
SELECT format('SELECT count(*) FROM t23456789_123456789_123456789_123456789_123456789_123456789_123 WHERE x::text <> %L',
              repeat('é', 600)) \gexec
DO $$ BEGIN RAISE EXCEPTION '%', repeat('m', 400); END $$;
RESET traceprof.query_text;
SET traceprof.traceparent = '';
SELECT name, attributes->>'db.collection.name' AS collection,
       octet_length(query) AS query_bytes, right(query, 3) AS query_end,
       octet_length(status_message) AS message_bytes, attributes->>'error.type' AS sqlstate
  FROM traceprof.spans WHERE kind = 'server' AND name NOT IN ('SET', 'RESET') ORDER BY start_time;
DROP TABLE t23456789_123456789_123456789_123456789_123456789_123456789_123;
-- A normalized text longer than traceprof.max_query_length is cut before
-- its literals are replaced (where it is read): a string cut in its middle
-- is still one constant, and no part of it shows.
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SELECT format('SELECT 1 AS one, %L AS long_literal, 2 AS two', repeat('s', 2000)) \gexec
SELECT format('SELECT %s AS many', string_agg(g::text, ' + ')) FROM generate_series(1, 400) g \gexec
SET traceprof.traceparent = '';
SELECT left(query, 40) AS query_start, right(query, 12) AS query_end, octet_length(query) AS query_bytes,
       query !~ 's{2}' AS no_literal
  FROM traceprof.spans WHERE kind = 'server' AND name = 'SELECT' AND query NOT LIKE 'SELECT format%'
 ORDER BY start_time;
-- db.operation.name is the statement's command tag, for the statements
-- named without CreateCommandTag and for those left to it
SELECT traceprof.reset();
CREATE TABLE ops_t (id int PRIMARY KEY, n int);
INSERT INTO ops_t VALUES (1, 0);
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
BEGIN;
SELECT n FROM ops_t WHERE id = 1 FOR UPDATE;
SELECT n FROM ops_t WHERE id = 1 FOR KEY SHARE;
DECLARE c CURSOR FOR SELECT n FROM ops_t;
CLOSE c;
UPDATE ops_t SET n = n + 1;
END;
START TRANSACTION;
DELETE FROM ops_t WHERE id = 2;
ROLLBACK;
MERGE INTO ops_t USING (VALUES (1)) v(id) ON ops_t.id = v.id WHEN MATCHED THEN UPDATE SET n = 0;
CREATE TABLE ops_copy AS SELECT * FROM ops_t;
SELECT * INTO ops_into FROM ops_t;
SELECT 1 AS one;
SET traceprof.traceparent = '';
SELECT name, attributes->>'db.operation.name' AS operation, attributes->>'db.collection.name' AS collection
  FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
DROP TABLE ops_t, ops_copy, ops_into;
-- A statement a rule rewrites into several queries is one span: named and
-- counted as the client's statement, its comment read once, for the plan the
-- planner makes and for a cached one alike.
CREATE TABLE rule_main (id int, v text);
CREATE TABLE rule_log (id int);
CREATE RULE rule_also AS ON INSERT TO rule_main DO ALSO INSERT INTO rule_log VALUES (new.id);
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
INSERT INTO rule_main VALUES (1, 'a');
INSERT INTO rule_main VALUES (2, 'b') /*traceparent='00-badbad-01'*/;
SET plan_cache_mode = force_generic_plan;
PREPARE rule_insert(int) AS INSERT INTO rule_main VALUES ($1, 'p');
EXECUTE rule_insert(3);
EXECUTE rule_insert(4);
RESET plan_cache_mode;
SET traceprof.traceparent = '';
SELECT name, kind, status, query, attributes->>'traceprof.rows_affected' AS written
  FROM traceprof.spans WHERE name <> 'plan' AND kind = 'server'
 ORDER BY start_time;
SELECT malformed_contexts FROM traceprof.stats;
SELECT count(*) AS logged FROM rule_log;
-- UPDATE and DELETE run a DO ALSO rule's query first; a NOTIFY among the
-- actions; a DO ALSO SELECT; two INSTEAD queries; an action that fails.
CREATE TABLE rule_upd (id int, v text);
INSERT INTO rule_upd SELECT g, 'a' FROM generate_series(1, 5) g UNION ALL SELECT 1000, 'too big for the log';
CREATE RULE rule_upd_also AS ON UPDATE TO rule_upd DO ALSO (INSERT INTO rule_log VALUES (new.id); NOTIFY rule_chan);
CREATE RULE rule_del_also AS ON DELETE TO rule_upd DO ALSO INSERT INTO rule_log VALUES (old.id);
CREATE TABLE rule_sel (id int);
CREATE RULE rule_sel_also AS ON INSERT TO rule_sel DO ALSO SELECT new.id * 10 AS tenfold;
CREATE TABLE rule_two (id int);
CREATE RULE rule_two_instead AS ON INSERT TO rule_two DO INSTEAD (SELECT 1 AS a; SELECT 2 AS b, 3 AS c);
ALTER TABLE rule_log ADD CHECK (id < 1000);
SELECT traceprof.reset();
SELECT 0 AS before \; UPDATE rule_upd SET v = 'b' WHERE id <= 3 /*traceparent='00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-aaaaaaaaaaaaaaaa-01'*/ \; SELECT 1 AS after /*traceparent='00-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-bbbbbbbbbbbbbbbb-01'*/;
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
DELETE FROM rule_upd WHERE id = 5;
INSERT INTO rule_sel VALUES (1);
INSERT INTO rule_two VALUES (1);
INSERT INTO rule_main VALUES (1000, 'too big for the log');
-- a cached plan whose rule query runs first: one span still covers both, and
-- fails when the rule query does
SET plan_cache_mode = force_generic_plan;
PREPARE rule_update(int) AS UPDATE rule_upd SET v = 'p' WHERE id = $1;
EXECUTE rule_update(1);
EXECUTE rule_update(2);
EXECUTE rule_update(1000);
RESET plan_cache_mode;
SET traceprof.traceparent = '';
SELECT name, status, trace_id, query, attributes->>'traceprof.rows_affected' AS written,
       attributes->>'db.response.returned_rows' AS returned
  FROM traceprof.spans WHERE name <> 'plan' AND kind = 'server'
 ORDER BY start_time;
-- A DO INSTEAD rule's action is a statement PostgreSQL does not locate: its
-- context is in the comments of the client's statement it replaces, not in
-- those of other statements of the same query string.
CREATE VIEW rule_v AS SELECT id FROM rule_log;
CREATE RULE rule_v_instead AS ON INSERT TO rule_v DO INSTEAD INSERT INTO rule_log VALUES (new.id);
SELECT traceprof.reset();
/*traceparent='00-cccccccccccccccccccccccccccccccc-cccccccccccccccc-01'*/ SELECT 7 AS opens_the_string \; INSERT INTO rule_v VALUES (7);
INSERT INTO rule_v VALUES (8) \; SELECT 8 AS ends_the_string /*traceparent='00-dddddddddddddddddddddddddddddddd-dddddddddddddddd-01'*/;
SELECT 9 AS first \; /*traceparent='00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01'*/ INSERT INTO rule_v VALUES (9);
-- the same action run by EXECUTE: the PREPARE's text, not its message's
PREPARE rule_v_ins(int) AS INSERT INTO rule_v VALUES ($1) \; SELECT 10 AS after_prepare;
EXECUTE rule_v_ins(10) /*traceparent='00-abababababababababababababababab-abababababababab-01'*/;
DEALLOCATE rule_v_ins;
SELECT name, trace_id, query FROM traceprof.spans WHERE kind = 'server' ORDER BY start_time;
DROP VIEW rule_v;
DROP TABLE rule_main, rule_log, rule_upd, rule_sel, rule_two;
-- A PL/pgSQL function in EXECUTE's parameters plans its own expression at
-- the top level: that is no span; the prepared statement's run is.
CREATE FUNCTION plus_one(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN x + 1; END $$;
CREATE TABLE exec_t (id int);
INSERT INTO exec_t SELECT generate_series(1, 10);
PREPARE count_below(int) AS SELECT count(*) FROM exec_t WHERE id < $1;
SELECT traceprof.reset();
SET traceprof.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
EXECUTE count_below(plus_one(3));
SET traceprof.traceparent = '';
SELECT name, query, attributes->>'db.response.returned_rows' AS returned
  FROM traceprof.spans WHERE kind = 'server' AND name <> 'plan' ORDER BY start_time;
DEALLOCATE count_below;
DROP FUNCTION plus_one(int);
DROP TABLE exec_t;

-- a statement ending with a warning: its SQLSTATE as db.response.status_code, no error
SET traceprof.traceparent = '00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
DO $$ BEGIN RAISE WARNING 'careful' USING ERRCODE = '01000'; END $$;
SET traceprof.traceparent = '';
SELECT name, status, attributes->>'db.response.status_code' AS sqlstate, attributes ? 'error.type' AS error_type
  FROM traceprof.spans WHERE trace_id = '5bf92f3577b34da6a3ce929d0e0e4736' AND name = 'DO';
