'use strict';
// The statement hooks against what a client sends in practice: where
// OpenTelemetry's database instrumentations put the sqlcommenter comment,
// SQL-level PREPARE / EXECUTE, and the other shapes an audit of the hooks
// found mishandled.  Spans are read back from traceprof.spans: a span is
// stored when its statement ends, before the client hears of it.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');

const { newContext, startTraced, connect } = require('./lib/traced');
const { connectWire, serialize } = require('./lib/wire');

let cluster;
let client;

before(async () => {
	cluster = await startTraced({ 'traceprof.track_planning': 'off' });
	client = await connect(cluster);
});

after(async () => {
	if (client)
		await client.end();
	if (cluster)
		await cluster.stop();
});

/** The spans of a trace, oldest first. */
async function spansOf(traceId) {
	const r = await client.query(
		`SELECT span_id, parent_span_id, kind, name, status, query, attributes
		   FROM traceprof.spans WHERE trace_id = $1 ORDER BY start_time, end_time`, [traceId]);
	return r.rows;
}

const comment = (ctx) => `/*traceparent='${ctx.header}'*/`;
const dump = (spans) => spans.map((s) => `${s.kind} ${s.name} parent=${s.parent_span_id} ${JSON.stringify(s.query)}`).join('\n  ');

// OpenTelemetry's instrumentations (@opentelemetry/sql-common's
// addSqlCommenterComment, used by instrumentation-pg) append
// ` /*traceparent='…'*/` to the text as the application wrote it, so a
// statement ending in a semicolon carries its comment after it; PostgreSQL
// ends the statement at the semicolon.
test('a comment after the statement\'s semicolon is its context: simple and extended protocol', async () => {
	const simple = newContext();
	await client.query(`SELECT 1 AS simple; ${comment(simple)}`);
	const s = await spansOf(simple.traceId);
	assert.equal(s.length, 1, `one span for the simple query:\n  ${dump(s)}`);
	assert.equal(s[0].kind, 'server');
	assert.equal(s[0].parent_span_id, simple.spanId);
	assert.equal(s[0].query, 'SELECT $1 AS simple');

	const extended = newContext();
	await client.query(`SELECT $1::int AS extended;\n${comment(extended)}\n`, [7]);
	const e = await spansOf(extended.traceId);
	assert.equal(e.length, 1, `one span for the Parse/Bind/Execute:\n  ${dump(e)}`);
	assert.equal(e[0].parent_span_id, extended.spanId);

	const utility = newContext();
	await client.query(`CREATE TEMP TABLE after_semicolon (id int); ${comment(utility)}`);
	const u = await spansOf(utility.traceId);
	assert.deepEqual(u.map((x) => x.name), ['CREATE TABLE after_semicolon'], dump(u));
	assert.equal(u[0].parent_span_id, utility.spanId);
});

test('a comment after the last semicolon of a multi-statement query is the last statement\'s only', async () => {
	const ctx = newContext();
	await client.query(`SELECT 1 AS first; SELECT 2 AS second; ${comment(ctx)}`);
	const spans = await spansOf(ctx.traceId);
	assert.deepEqual(spans.map((x) => x.query), ['SELECT $1 AS second'], dump(spans));
	assert.equal(spans[0].parent_span_id, ctx.spanId);

	// A comment followed by another statement does not end the first: it
	// opens the second, whose context it is.
	const before = newContext();
	await client.query(`SELECT 1 AS first; ${comment(before)} SELECT 2 AS second`);
	const opened = await spansOf(before.traceId);
	assert.deepEqual(opened.map((x) => x.query), ['SELECT $1 AS second'], dump(opened));
	assert.equal(opened[0].parent_span_id, before.spanId);
});

test('EXECUTE\'s own comment is its parent; the PREPARE\'s comment is not later EXECUTEs\'', async () => {
	const prepare = newContext();
	const execute = newContext();
	const session = newContext();
	await client.query(`PREPARE audit_prep(int) AS SELECT $1 + 1 AS x ${comment(prepare)}`);
	try {
		// The EXECUTE's comment, at its end or after its semicolon.
		await client.query(`EXECUTE audit_prep(1) ${comment(execute)}`);
		await client.query(`EXECUTE audit_prep(2); ${comment(execute)}`);
		// Under the session's context, with no comment of its own.
		await client.query(`SET traceprof.traceparent = '${session.header}'`);
		await client.query('EXECUTE audit_prep(3)');
		await client.query('RESET traceprof.traceparent');
		// No context at all: not traced.
		await client.query('EXECUTE audit_prep(4)');
	} finally {
		await client.query('DEALLOCATE audit_prep');
	}
	const e = await spansOf(execute.traceId);
	assert.equal(e.length, 2, `both EXECUTEs with a comment are its children:\n  ${dump(e)}`);
	for (const span of e)
		assert.equal(span.parent_span_id, execute.spanId);
	const s = await spansOf(session.traceId);
	assert.equal(s.length, 1, `the EXECUTE under the session's context is its child:\n  ${dump(s)}`);
	assert.equal(s[0].parent_span_id, session.spanId);
	const p = await spansOf(prepare.traceId);
	assert.deepEqual(p, [], `the PREPARE's comment parents no EXECUTE:\n  ${dump(p)}`);
});

// ExecuteQuery runs a prepared statement's cached plan in a portal holding a
// copy of its text: the planner never sees that run, the executor sees the
// copy.  A statement without parameters is planned once; one with them gets
// PostgreSQL's generic plan from its sixth run on.
test('an EXECUTE run from a cached plan takes its own comment, not the PREPARE\'s', async () => {
	const prepare = newContext();
	const session = newContext();
	const own = [];
	const execute = async (sql) => {
		const ctx = newContext();
		own.push({ ctx, sql });
		await client.query(`${sql} ${comment(ctx)}`);
	};
	await client.query(`PREPARE cached_plain AS SELECT 1 AS plain ${comment(prepare)}`);
	await client.query(`PREPARE cached_param(int) AS SELECT $1 + 1 AS param ${comment(prepare)}`);
	try {
		for (let i = 0; i < 3; i++)
			await execute('EXECUTE cached_plain');
		for (let i = 0; i < 8; i++)
			await execute(`EXECUTE cached_param(${i})`);
		// The comment wins over the session's context, which parents the rest.
		await client.query(`SET traceprof.traceparent = '${session.header}'`);
		await execute('EXECUTE cached_param(8)');
		await client.query('EXECUTE cached_param(9)');
		await client.query('EXECUTE cached_plain');
		await client.query('RESET traceprof.traceparent');
		// No context at all: untraced, whatever the PREPARE carried.
		await client.query('EXECUTE cached_param(10)');
		await client.query('EXECUTE cached_plain');
	} finally {
		await client.query('DEALLOCATE cached_plain');
		await client.query('DEALLOCATE cached_param');
	}
	for (const { ctx, sql } of own) {
		const spans = await spansOf(ctx.traceId);
		assert.equal(spans.length, 1, `${sql}: one span under its own comment:\n  ${dump(spans)}`);
		assert.equal(spans[0].kind, 'server');
		assert.equal(spans[0].parent_span_id, ctx.spanId, sql);
	}
	const s = await spansOf(session.traceId);
	assert.equal(s.length, 2, `the two EXECUTEs without a comment are the session's:\n  ${dump(s)}`);
	for (const span of s)
		assert.equal(span.parent_span_id, session.spanId);
	const p = await spansOf(prepare.traceId);
	assert.deepEqual(p, [], `the PREPARE's comment parents no EXECUTE:\n  ${dump(p)}`);
});

// Protocol-level: the statement's comment is in its Parse message, and a
// named statement's Parse is its own; kept as it was.
test('a named protocol statement keeps its Parse message\'s comment', async () => {
	const ctx = newContext();
	const w = await connectWire(cluster, 'postgres', 'app');
	try {
		w.send(serialize.parse({ name: 'named', text: `SELECT 1 AS named ${comment(ctx)}`, types: [] }),
			serialize.sync());
		await w.until('readyForQuery');
		for (let i = 0; i < 2; i++) {
			w.send(serialize.bind({ statement: 'named', values: [] }), serialize.execute({ rows: 0 }), serialize.sync());
			await w.until('readyForQuery');
		}
	} finally {
		w.end();
	}
	const spans = await spansOf(ctx.traceId);
	assert.equal(spans.length, 2, dump(spans));
	for (const span of spans)
		assert.equal(span.parent_span_id, ctx.spanId);
});

// An Execute's run pauses its span (the portal may run again): the CPU
// clock was read after the wall clock there, so what ran in between (an
// interrupt taking the next message off the wire) counted as CPU time past
// the span's end.  With Bind, Execute and Sync sent together, 5-20% of such
// spans had more CPU time than duration.
test('a span paused at its Execute\'s end has no more CPU time than duration (Bind/Execute/Sync sent together)', async () => {
	const ctx = newContext();
	const w = await connectWire(cluster, 'postgres', 'app');
	try {
		w.send(serialize.parse({ name: 'cpu', text: `SELECT $1::int + 1 AS cpu ${comment(ctx)}`, types: [23] }),
			serialize.sync());
		await w.until('readyForQuery');
		for (let i = 0; i < 400; i++) {
			w.send(serialize.bind({ statement: 'cpu', values: [String(i)] }), serialize.execute({ rows: 0 }), serialize.sync());
			await w.until('readyForQuery');
		}
	} finally {
		w.end();
	}
	const r = await client.query(
		`SELECT count(*)::int AS spans, count(*) FILTER (WHERE cpu_time_ms > duration_ms)::int AS over,
		        max(cpu_time_ms - duration_ms) AS worst
		   FROM traceprof.spans WHERE trace_id = $1`, [ctx.traceId]);
	assert.equal(r.rows[0].spans, 400);
	assert.equal(r.rows[0].over, 0, `spans with cpu_time_ms > duration_ms (worst by ${r.rows[0].worst} ms)`);
});

// A statement planned at Bind and never executed ran no row: it reports
// none, as one that was not run (a SELECT's executor starts at Bind, and
// its portal's drop ended it with a count of 0).
test('a statement bound and never executed reports no rows', async () => {
	const select = newContext();
	const update = newContext();
	const w = await connectWire(cluster, 'postgres', 'app');
	try {
		await w.query('CREATE TEMP TABLE unrun (n int)');
		await w.query('INSERT INTO unrun VALUES (1), (2)');
		await w.query('BEGIN');
		w.send(serialize.parse({ text: `SELECT n FROM unrun ${comment(select)}` }),
			serialize.bind({}), serialize.sync());
		await w.until('readyForQuery');
		w.send(serialize.parse({ text: `UPDATE unrun SET n = n ${comment(update)}` }),
			serialize.bind({}), serialize.sync());
		await w.until('readyForQuery');
		await w.query('COMMIT');
	} finally {
		w.end();
	}
	const s = await spansOf(select.traceId);
	assert.equal(s.length, 1, dump(s));
	assert.equal(s[0].name, 'SELECT unrun');
	assert.equal(s[0].attributes['db.response.returned_rows'], undefined, JSON.stringify(s[0].attributes));
	const u = await spansOf(update.traceId);
	assert.equal(u.length, 1, dump(u));
	assert.equal(u[0].attributes['traceprof.rows_affected'], undefined, JSON.stringify(u[0].attributes));

	// Executed, the same statement counts its rows, 0 included.
	const ran = newContext();
	const w2 = await connectWire(cluster, 'postgres', 'app');
	try {
		w2.send(serialize.parse({ text: `SELECT 1 AS one WHERE false ${comment(ran)}` }),
			serialize.bind({}), serialize.execute({}), serialize.sync());
		await w2.until('readyForQuery');
	} finally {
		w2.end();
	}
	const r = await spansOf(ran.traceId);
	assert.equal(r.length, 1, dump(r));
	assert.equal(r[0].attributes['db.response.returned_rows'], 0);
});

// With traceprof.track = all, a nested statement whose planning fails (a
// constant the planner folds into an error) is a span of its own, as one
// failing while it runs: a child of the statement that ran it, with its
// own text, SQLSTATE and message, stored by the time the client hears of
// the error.  Nested spans open at ExecutorStart: before, such a statement
// had none, and the error showed on the client's statement only.
test('a nested statement that fails while planned is a span with its error: trigger, SQL function, dynamic SQL', async () => {
	await client.query(`CREATE TABLE planfail (n int);
		CREATE FUNCTION planfail_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM 1 / 0; RETURN NEW; END $$;
		CREATE TRIGGER planfail_before BEFORE INSERT ON planfail
			FOR EACH ROW EXECUTE FUNCTION planfail_trigger();
		CREATE FUNCTION planfail_sql() RETURNS int LANGUAGE sql AS 'SELECT 1; SELECT 1 / 0 AS sql_body';
		CREATE FUNCTION planfail_dynamic() RETURNS int LANGUAGE plpgsql AS $$
		BEGIN EXECUTE 'SELECT 1 / 0 AS dynamic'; RETURN 1; END $$`);
	await client.query("SET traceprof.track = 'all'");
	const cases = [
		// The client's statement, its span's name, the failed statement's text (normalized).
		['INSERT INTO planfail VALUES (1)', 'INSERT planfail', 'SELECT $1 / $2'],
		['SELECT planfail_sql()', 'SELECT', 'SELECT $1 / $2 AS sql_body'],
		['SELECT planfail_dynamic()', 'SELECT', 'SELECT $1 / $2 AS dynamic'],
	];
	try {
		for (const [sql, name, nested] of cases) {
			const ctx = newContext();
			await assert.rejects(client.query(`${sql} ${comment(ctx)}`), (err) => err.code === '22012');
			const r = await client.query(
				`SELECT span_id, parent_span_id, kind, name, status, status_message, query,
				        attributes->>'db.response.status_code' AS sqlstate
				   FROM traceprof.spans WHERE trace_id = $1 ORDER BY start_time`, [ctx.traceId]);
			const spans = r.rows;
			assert.equal(spans.length, 2, `${sql}: its span and the failed statement's:\n  ${dump(spans)}`);
			const [outer, inner] = spans;
			assert.equal(outer.name, name);
			assert.equal(outer.parent_span_id, ctx.spanId);
			assert.equal(inner.kind, 'internal');
			assert.equal(inner.name, 'SELECT');
			assert.equal(inner.parent_span_id, outer.span_id, `${sql}: the failed statement is its child`);
			assert.equal(inner.query, nested, dump(spans));
			for (const span of spans) {
				assert.equal(span.status, 'error', dump(spans));
				assert.equal(span.sqlstate, '22012');
				assert.equal(span.status_message, 'division by zero');
			}
		}
	} finally {
		await client.query('RESET traceprof.track');
		await client.query(`DROP TABLE planfail; DROP FUNCTION planfail_trigger(), planfail_sql(), planfail_dynamic()`);
	}
});

// With traceprof.track = all, a nested statement is a child of the
// statement that runs it, or untraced with it.  A top-level portal kept
// open through the extended protocol (a named one read in pages, or the
// unnamed SELECT portal of a transaction block, kept until the next
// unnamed Bind) stays on the extension's stack of open spans while later
// statements run: before, their nested statements (and a nested planning
// that fails) became children of the kept portal's span, as the innermost
// one open, and a named portal read again had its nested statements put
// under another portal opened since.
test('a portal kept open parents none of a later statement\'s nested statements (track = all)', async () => {
	await client.query(`CREATE FUNCTION kept_nested(n int) RETURNS int LANGUAGE plpgsql AS $$
		DECLARE r int; BEGIN SELECT n + 1 AS kept_inner INTO r; RETURN r; END $$;
		CREATE FUNCTION kept_planfail() RETURNS int LANGUAGE plpgsql AS $$
		BEGIN PERFORM 1 / 0; RETURN 1; EXCEPTION WHEN division_by_zero THEN RETURN 0; END $$`);
	const kept = newContext();
	const unnamed = newContext();
	const later = newContext();
	const other = newContext();
	const w = await connectWire(cluster, 'postgres', 'app');
	try {
		await w.query("SET traceprof.track = 'all'");
		await w.query('BEGIN');
		// A named portal, one row of three read: kept open, its span too.
		w.send(serialize.parse({ name: 'k', text: `SELECT kept_nested(g) FROM generate_series(1, 3) g ${comment(kept)}` }),
			serialize.bind({ statement: 'k', portal: 'k' }), serialize.execute({ portal: 'k', rows: 1 }), serialize.sync());
		await w.until('readyForQuery');
		// Untraced statements: one runs a nested statement, one a nested planning that fails (caught).
		await w.query('SELECT kept_nested(10)');
		await w.query('SELECT kept_planfail()');
		// Traced under another parent: its nested statement is its own.
		await w.query(`SELECT kept_nested(20) ${comment(later)}`);
		// Another portal opened and read, then the first read again: each runs its own.
		w.send(serialize.parse({ name: 'm', text: `SELECT kept_nested(g) FROM generate_series(100, 102) g ${comment(other)}` }),
			serialize.bind({ statement: 'm', portal: 'm' }), serialize.execute({ portal: 'm', rows: 1 }),
			serialize.execute({ portal: 'k', rows: 1 }), serialize.sync());
		await w.until('readyForQuery');
		// The unnamed SELECT portal, run to its end and kept; then an untraced statement through a named portal.
		w.send(serialize.parse({ text: `SELECT kept_nested(g) FROM generate_series(1, 2) g ${comment(unnamed)}` }),
			serialize.bind({}), serialize.execute({}), serialize.sync());
		await w.until('readyForQuery');
		w.send(serialize.parse({ name: 'u', text: 'SELECT kept_nested(30), kept_planfail()' }),
			serialize.bind({ statement: 'u', portal: 'u' }), serialize.execute({ portal: 'u' }), serialize.sync());
		await w.until('readyForQuery');
		await w.query('COMMIT');
	} finally {
		w.end();
		await client.query('DROP FUNCTION kept_nested(int), kept_planfail()');
	}
	// Its server span and one child per row it ran, nothing else.
	const expect = async (ctx, rows, what) => {
		const spans = await spansOf(ctx.traceId);
		const server = spans.filter((s) => s.kind === 'server');
		assert.equal(server.length, 1, `${what}: one server span:\n  ${dump(spans)}`);
		assert.equal(server[0].parent_span_id, ctx.spanId);
		const children = spans.filter((s) => s.kind !== 'server');
		assert.equal(children.length, rows, `${what}: ${rows} nested statements:\n  ${dump(spans)}`);
		for (const child of children) {
			assert.equal(child.parent_span_id, server[0].span_id, `${what}: its own children:\n  ${dump(spans)}`);
			assert.notEqual(child.status, 'error', dump(spans));
		}
	};
	await expect(kept, 2, 'the named portal read twice');
	await expect(later, 1, 'the traced later statement');
	await expect(other, 1, 'the second named portal');
	await expect(unnamed, 2, 'the unnamed portal kept');
});

// A SECURITY DEFINER function runs as its owner: its nested statements'
// spans name the owner.  The name is looked up once per role switch, and
// no catalog is read once a planning failed: a session's first span under
// the owner, for a statement failing while planned, had an empty name.
test('a SECURITY DEFINER function\'s statement failing while planned names its owner, the first time too', async () => {
	await client.query(`CREATE ROLE definer_owner;
		CREATE FUNCTION definer_planfail() RETURNS int LANGUAGE plpgsql SECURITY DEFINER AS $$
		BEGIN PERFORM 1 / 0; RETURN 1; END $$;
		ALTER FUNCTION definer_planfail() OWNER TO definer_owner`);
	const ctx = newContext();
	// A new session: it has never looked the owner's name up.
	const w = await connectWire(cluster, 'postgres', 'app');
	try {
		await w.query("SET traceprof.track = 'all'");
		await assert.rejects(w.query(`SELECT definer_planfail() ${comment(ctx)}`), (err) => err.code === '22012');
	} finally {
		w.end();
		await client.query('DROP FUNCTION definer_planfail(); DROP ROLE definer_owner');
	}
	const r = await client.query(
		`SELECT kind, name, status, username, query FROM traceprof.spans
		  WHERE trace_id = $1 ORDER BY start_time`, [ctx.traceId]);
	assert.deepEqual(r.rows.map((s) => [s.kind, s.status, s.username]),
		[['server', 'error', 'postgres'], ['internal', 'error', 'definer_owner']], JSON.stringify(r.rows));
});

// A Bind's parameter checked by a domain whose CHECK calls another role's
// SECURITY DEFINER function: the error is reported while that function's
// owner is the current user.  The client's failed statement became that
// owner's span: the owner read the client's text, the client did not.
test('a statement failing at Bind in another role\'s SECURITY DEFINER check is the client\'s span', async () => {
	await client.query(`CREATE ROLE audit_definer LOGIN; CREATE ROLE audit_victim LOGIN;
		CREATE FUNCTION audit_definer_check(int) RETURNS bool LANGUAGE plpgsql SECURITY DEFINER AS $$
		BEGIN IF $1 = 42 THEN RAISE EXCEPTION 'rejected'; END IF; RETURN true; END $$;
		ALTER FUNCTION audit_definer_check(int) OWNER TO audit_definer;
		CREATE DOMAIN audit_definer_dom AS int CHECK (audit_definer_check(VALUE))`);
	const ctx = newContext();
	const victim = await connectWire(cluster, 'audit_victim', 'app');
	let seen;
	try {
		victim.send(serialize.parse({ text: `SELECT 'victim literal' AS note, $1::audit_definer_dom AS x ${comment(ctx)}` }),
			serialize.bind({ values: ['42'] }), serialize.execute({}), serialize.sync());
		await assert.rejects(victim.until('readyForQuery'), (err) => /rejected/.test(err.message));
		await victim.until('readyForQuery');
		const definer = await connect(cluster, 'audit_definer', 'app');
		try {
			seen = await definer.query('SELECT query FROM traceprof.spans WHERE trace_id = $1', [ctx.traceId]);
		} finally {
			await definer.end();
		}
	} finally {
		victim.end();
		await client.query(`DROP DOMAIN audit_definer_dom; DROP FUNCTION audit_definer_check(int);
			DROP ROLE audit_definer; DROP ROLE audit_victim`);
	}
	const r = await client.query('SELECT kind, status, username FROM traceprof.spans WHERE trace_id = $1', [ctx.traceId]);
	assert.deepEqual(r.rows.map((s) => [s.kind, s.status, s.username]), [['server', 'error', 'audit_victim']], JSON.stringify(r.rows));
	assert.deepEqual(seen.rows.map((x) => x.query), ['<insufficient privilege>'], 'the function\'s owner does not read it');
});

// A statement a rule rewrites into several queries is one span, named and
// counted as the statement it is, at the top level and, with track = all,
// nested in a function: before, a nested INSERT with a DO ALSO rule was two
// spans, the rule's query named after the table it writes with the
// INSERT's text ("INSERT rule_nested_log" for "INSERT INTO rule_nested
// ..."), and a rule's NOTIFY a span of its own.
test('a nested statement a rule rewrites into several queries is one span (track = all)', async () => {
	await client.query(`CREATE TABLE rule_nested (id int); CREATE TABLE rule_nested_log (id int);
		CREATE RULE rule_nested_also AS ON INSERT TO rule_nested
			DO ALSO (INSERT INTO rule_nested_log VALUES (new.id); NOTIFY rule_nested_chan);
		CREATE FUNCTION rule_nested_insert(n int) RETURNS void LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO rule_nested VALUES (n); END $$`);
	const ctx = newContext();
	try {
		await client.query("SET traceprof.track = 'all'");
		await client.query(`SELECT rule_nested_insert(7) ${comment(ctx)}`);
	} finally {
		await client.query('RESET traceprof.track');
	}
	const logged = await client.query('SELECT id FROM rule_nested_log');
	await client.query('DROP FUNCTION rule_nested_insert(int); DROP TABLE rule_nested, rule_nested_log');
	assert.deepEqual(logged.rows, [{ id: 7 }], 'the rule ran');
	const spans = await spansOf(ctx.traceId);
	assert.deepEqual(spans.map((s) => [s.kind, s.name, s.query]),
		[['server', 'SELECT', 'SELECT rule_nested_insert($1)'], ['internal', 'INSERT rule_nested', 'INSERT INTO rule_nested VALUES (n)']],
		dump(spans));
	assert.equal(spans[1].parent_span_id, spans[0].span_id);
	assert.equal(spans[1].attributes['traceprof.rows_affected'], 1, JSON.stringify(spans[1].attributes));
});

// A write its Bind planned runs its executor at Execute: an error there
// (permission denied, checked at ExecutorStart) is the statement's own,
// one span with the error, as any statement failing while it runs.  Its
// span was planned in the Bind's message: taken for a statement that had
// ended with its planning, it ended OK, and the error became a second,
// 'postgresql' span.  Also when another Bind is pipelined ahead of the
// Execute: that one's span ends well, with its planning.
test('an Execute of a write its Bind planned, failing in ExecutorStart, is one span with the error', async () => {
	await client.query(`CREATE ROLE audit_noperm LOGIN; CREATE TABLE audit_perm (n int);
		GRANT SELECT ON audit_perm TO audit_noperm`);
	const alone = newContext();
	const piped = newContext();
	const n = await connectWire(cluster, 'audit_noperm', 'app');
	try {
		n.send(serialize.parse({ text: `INSERT INTO audit_perm VALUES (1) ${comment(alone)}` }),
			serialize.bind({}), serialize.execute({}), serialize.sync());
		await assert.rejects(n.until('readyForQuery'), (err) => err.code === '42501');
		await n.until('readyForQuery');
		// Bind a, Bind b, Execute a: a fails, b never runs.
		n.send(serialize.parse({ name: 'a', text: `UPDATE audit_perm SET n = 2 ${comment(piped)}` }),
			serialize.parse({ name: 'b', text: `SELECT n FROM audit_perm ${comment(piped)}` }),
			serialize.bind({ statement: 'a', portal: 'a' }), serialize.bind({ statement: 'b', portal: 'b' }),
			serialize.execute({ portal: 'a' }), serialize.execute({ portal: 'b' }), serialize.sync());
		await assert.rejects(n.until('readyForQuery'), (err) => err.code === '42501');
		await n.until('readyForQuery');
	} finally {
		n.end();
		await client.query('DROP TABLE audit_perm; DROP ROLE audit_noperm');
	}
	const brief = (spans) => spans.map((s) => [s.name, s.status, s.attributes['db.response.status_code'] || null]);
	const a = await spansOf(alone.traceId);
	assert.deepEqual(brief(a), [['INSERT audit_perm', 'error', '42501']], dump(a));
	const message = await client.query('SELECT status_message FROM traceprof.spans WHERE span_id = $1', [a[0].span_id]);
	assert.equal(message.rows[0].status_message, 'permission denied for table audit_perm');
	const p = await spansOf(piped.traceId);
	assert.deepEqual(brief(p), [['UPDATE audit_perm', 'error', '42501'], ['SELECT audit_perm', 'unset', null]], dump(p));
});
