'use strict';
// A session that cannot trace takes the planner, executor and utility hooks
// out of their chains (statement_spans.c, "Hook bypass"), and puts them back
// when it may trace again.  These are the ways back that could be missed: a
// setting assigned in the middle of a statement, a prepared statement run
// from its cached plan (no parse analysis to see it), a module loaded while
// our hooks were out.  Each case first runs plain statements, so that the
// session's hooks are out when it starts.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');

const { newContext, startTraced, connect, waitFor } = require('./lib/traced');

let cluster;
let reader;

before(async () => {
	cluster = await startTraced({ 'traceprof.track_planning': 'off', 'traceprof.track_cpu_time': 'off' });
	reader = await connect(cluster);
});

after(async () => {
	if (reader)
		await reader.end();
	if (cluster)
		await cluster.stop();
});

/** The spans of a trace, oldest first. */
async function spansOf(traceId) {
	const r = await reader.query(
		`SELECT span_id, parent_span_id, kind, name, query FROM traceprof.spans
		  WHERE trace_id = $1 ORDER BY start_time, end_time`, [traceId]);
	return r.rows;
}

const dump = (spans) => spans.map((s) => `${s.kind} ${s.name} parent=${s.parent_span_id} ${JSON.stringify(s.query)}`).join('\n  ');

/** fn on a new session whose hooks are out (a few untraced statements, simple and extended), closed after. */
async function inUntracedSession(fn) {
	const client = await connect(cluster);
	try {
		await client.query('SELECT 1');
		await client.query('SELECT $1::int', [2]);
		await client.query('BEGIN');
		await client.query('COMMIT');
		await fn(client);
	} finally {
		await client.end();
	}
}

test('set_config() in a parameterized query, then a prepared statement from its cached plan: traced', async () => {
	await inUntracedSession(async (client) => {
		const cached = { name: 'cached_select', text: 'SELECT $1::int AS cached' };
		await client.query({ ...cached, values: [1] });	// Parse now; later runs are Bind/Execute only
		const ctx = newContext();
		await client.query("SELECT set_config('traceprof.traceparent', $1, false)", [ctx.header]);
		await client.query({ ...cached, values: [2] });
		const spans = await spansOf(ctx.traceId);
		assert.equal(spans.length, 1, `the cached statement's span, and none for set_config's:\n  ${dump(spans)}`);
		assert.equal(spans[0].parent_span_id, ctx.spanId);
		assert.equal(spans[0].query, 'SELECT $1::int AS cached');
	});
});

test('SET in one message, a cached statement in the next transaction block: traced', async () => {
	await inUntracedSession(async (client) => {
		const cached = { name: 'cached_block', text: 'SELECT $1::int AS in_block' };
		await client.query({ ...cached, values: [1] });
		const ctx = newContext();
		await client.query('BEGIN');
		await client.query(`SET LOCAL traceprof.traceparent = '${ctx.header}'`);
		await client.query({ ...cached, values: [2] });
		await client.query('COMMIT');
		const spans = await spansOf(ctx.traceId);
		assert.deepEqual(spans.map((s) => s.query), ['SELECT $1::int AS in_block', 'COMMIT'], dump(spans));
		for (const s of spans)
			assert.equal(s.parent_span_id, ctx.spanId);
	});
});

test('a prepared statement whose comment was seen stays traced after untraced statements', async () => {
	await inUntracedSession(async (client) => {
		const ctx = newContext();
		const commented = { name: 'commented', text: `SELECT $1::int AS commented /*traceparent='${ctx.header}'*/` };
		await client.query({ ...commented, values: [1] });
		await client.query('SELECT 3');		// would take the hooks out, but for the comment seen
		await client.query({ ...commented, values: [2] });	// Bind/Execute of the cached plan only
		const spans = await spansOf(ctx.traceId);
		assert.equal(spans.length, 2, `both runs of the commented statement:\n  ${dump(spans)}`);
		for (const s of spans)
			assert.equal(s.parent_span_id, ctx.spanId);
	});
});

test('set_config() inside a DO block: its later statements are nested, not the client\'s; the next statement is traced', async () => {
	await inUntracedSession(async (client) => {
		const ctx = newContext();
		const other = newContext();
		await client.query(`DO $$
			BEGIN
				PERFORM set_config('traceprof.traceparent', '${ctx.header}', false);
				EXECUTE 'SELECT count(*) FROM pg_database /*traceparent=''${other.header}''*/';
				BEGIN
					PERFORM 1 / 0;
				EXCEPTION WHEN division_by_zero THEN
					PERFORM count(*) FROM pg_class;
				END;
				EXECUTE 'SELECT count(*) FROM pg_namespace /*traceparent=''${other.header}''*/';
			END $$`);
		assert.deepEqual(await spansOf(ctx.traceId), [], 'the DO was not traced, and what it ran is not a client\'s statement');
		assert.deepEqual(await spansOf(other.traceId), [], 'a nested statement\'s comment is no client\'s context');
		await client.query('SELECT 4 AS after_do');
		const spans = await spansOf(ctx.traceId);
		assert.deepEqual(spans.map((s) => [s.kind, s.query]), [['server', 'SELECT $1 AS after_do']], dump(spans));
	});
});

test('a setting made in a subtransaction that aborts: what the block runs next is still nested', async () => {
	await inUntracedSession(async (client) => {
		const ctx = newContext();
		const other = newContext();
		// The exception block's subtransaction began before the setting and
		// aborts after it: the setting reverts, and the nesting it puts back
		// must still count the DO, or the next statement's comment would
		// make it a client's traced statement.
		await client.query(`DO $$
			BEGIN
				BEGIN
					PERFORM set_config('traceprof.traceparent', '${ctx.header}', false);
					PERFORM 1 / 0;
				EXCEPTION WHEN division_by_zero THEN
					NULL;
				END;
				EXECUTE 'SELECT count(*) FROM pg_namespace /*traceparent=''${other.header}''*/';
			END $$`);
		assert.deepEqual(await spansOf(other.traceId), [], 'a nested statement\'s comment is no client\'s context');
		assert.equal((await client.query("SELECT current_setting('traceprof.traceparent') AS tp")).rows[0].tp, '');
		assert.deepEqual(await spansOf(ctx.traceId), []);
	});
});

test('a context set while the statement is planned: that statement and what its planning runs are untraced', async () => {
	await inUntracedSession(async (client) => {
		const ctx = newContext();
		const folded = newContext();
		// setctx() runs when the planner estimates the WHERE clause, with no
		// portal yet; folded_ctx() when it folds the IMMUTABLE call, and the
		// utility statement its callee runs is as nested as a portal's.
		await client.query(`CREATE FUNCTION setctx(tp text) RETURNS int STABLE LANGUAGE plpgsql AS
			$$ BEGIN PERFORM set_config('traceprof.traceparent', tp, false); RETURN 1; END $$`);
		await client.query(`CREATE FUNCTION make_temp() RETURNS int VOLATILE LANGUAGE plpgsql AS
			$$ BEGIN CREATE TEMP TABLE IF NOT EXISTS planning_temp (a int); RETURN 1; END $$`);
		// (set in its body: a function's SET clause may not hold a context)
		await client.query(`CREATE FUNCTION folded_ctx() RETURNS int IMMUTABLE LANGUAGE plpgsql AS
			$$ BEGIN PERFORM set_config('traceprof.traceparent', '${folded.header}', true); RETURN make_temp(); END $$`);
		await client.query('SELECT 14');
		await client.query('SELECT count(*) FROM pg_class WHERE relpages = setctx($1)', [ctx.header]);
		await client.query('RESET traceprof.traceparent');
		await client.query('SELECT 15');
		await client.query('SELECT folded_ctx() AS folded');
		await client.query('SELECT 16');
		await client.query(`SELECT count(*) FROM pg_class WHERE relpages = setctx('${ctx.header}')`);
		await client.query('SELECT 17 AS after_planning_set');
		const spans = await spansOf(ctx.traceId);
		assert.deepEqual(spans.map((s) => s.query), ['SELECT $1 AS after_planning_set'], dump(spans));
		const foldedSpans = await spansOf(folded.traceId);
		assert.deepEqual(foldedSpans, [], `no span for what a folded function ran:\n  ${dump(foldedSpans)}`);
	});
});

test('a statement that sets the context and then fails: no span for its error', async () => {
	await inUntracedSession(async (client) => {
		const ctx = newContext();
		await assert.rejects(client.query(`DO $$ BEGIN
			PERFORM set_config('traceprof.traceparent', '${ctx.header}', false);
			RAISE EXCEPTION 'after the setting';
		END $$`), /after the setting/);
		await client.query('SELECT 18');
		await assert.rejects(client.query(
			`SELECT set_config('traceprof.traceparent', '${ctx.header}', false), 1 / (relpages - relpages) FROM pg_class`),
		/division by zero/);
		const spans = await spansOf(ctx.traceId);
		assert.deepEqual(spans, [], `the failed statements were untraced when they began:\n  ${dump(spans)}`);
	});
});

test('set_config() then another statement in one simple-query message: the second is traced', async () => {
	await inUntracedSession(async (client) => {
		const ctx = newContext();
		await client.query(`SELECT set_config('traceprof.traceparent', '${ctx.header}', false); SELECT 5 AS same_message`);
		const spans = await spansOf(ctx.traceId);
		assert.deepEqual(spans.map((s) => s.query), ['SELECT $1 AS same_message'], dump(spans));
		assert.equal(spans[0].parent_span_id, ctx.spanId);
	});
});

test('a procedure sets the context and commits: its later statements are its own, the next CALL is traced', async () => {
	await inUntracedSession(async (client) => {
		try {
			const ctx = newContext();
			await client.query(`CREATE PROCEDURE bypass_proc(tp text) LANGUAGE plpgsql AS $$
				BEGIN
					PERFORM set_config('traceprof.traceparent', tp, false);
					COMMIT;
					PERFORM count(*) FROM pg_class;
				END $$`);
			await client.query('SELECT 6');
			await client.query('CALL bypass_proc($1)', [ctx.header]);
			assert.deepEqual(await spansOf(ctx.traceId), [], 'no span for what the untraced CALL ran');
			await client.query('SELECT 7 AS after_call');
			const spans = await spansOf(ctx.traceId);
			assert.deepEqual(spans.map((s) => s.query), ['SELECT $1 AS after_call'], dump(spans));
		} finally {
			await client.query('DROP PROCEDURE IF EXISTS bypass_proc(text)').catch(() => {});
		}
	});
});

test('a comment on a statement of an untraced session is its context, for plain, utility and failing statements', async () => {
	await inUntracedSession(async (client) => {
		const plain = newContext();
		await client.query(`SELECT 8 AS plain /*traceparent='${plain.header}'*/`);
		const utility = newContext();
		await client.query(`CREATE TEMP TABLE bypass_t (v int) /*traceparent='${utility.header}'*/`);
		const failing = newContext();
		await assert.rejects(client.query(`SELECT 1 / 0 AS failing /*traceparent='${failing.header}'*/`), /division by zero/);
		for (const [ctx, query] of [[plain, 'SELECT $1 AS plain'], [utility, 'CREATE TEMP TABLE bypass_t (v int)'],
			[failing, 'SELECT $1 / $2 AS failing']]) {
			const spans = await spansOf(ctx.traceId);
			assert.deepEqual(spans.map((s) => [s.query, s.parent_span_id]), [[query, ctx.spanId]], dump(spans));
		}
	});
});

test('a module loaded while our hooks are out still runs, under ours, once they are back', async () => {
	await inUntracedSession(async (client) => {
		const notices = [];
		client.on('notice', (n) => notices.push(n.message));
		await client.query("LOAD 'auto_explain'");
		await client.query("SET auto_explain.log_min_duration = 0; SET auto_explain.log_level = 'notice'");
		await client.query('SELECT 9');
		assert.ok(notices.some((m) => /Query Text: SELECT 9/.test(m)), `auto_explain's plan while ours are out: ${JSON.stringify(notices)}`);
		const ctx = newContext();
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		notices.length = 0;
		await client.query('SELECT 10 AS both_hooks');
		assert.ok(notices.some((m) => /Query Text: SELECT 10 AS both_hooks/.test(m)),
			`auto_explain's plan with ours back: ${JSON.stringify(notices)}`);
		const spans = await spansOf(ctx.traceId);
		assert.deepEqual(spans.map((s) => s.query), ['SELECT $1 AS both_hooks'], dump(spans));
		await client.query('RESET traceprof.traceparent');
		notices.length = 0;
		await client.query('SELECT 11');
		await client.query('SELECT 12 AS out_again');
		assert.ok(notices.some((m) => /Query Text: SELECT 12 AS out_again/.test(m)),
			`auto_explain's plan with ours out again: ${JSON.stringify(notices)}`);
	});
});

test('sampling turned on by a reload reaches a session whose hooks are out', async () => {
	await inUntracedSession(async (client) => {
		try {
			await reader.query('ALTER SYSTEM SET traceprof.sample_rate = 1');
			await reader.query('SELECT pg_reload_conf()');
			// The postmaster signals the backend, which reads the file between messages: until then, untraced.
			await waitFor('a statement of the session sampled after the reload', async () => {
				await client.query('SELECT 13 AS sampled_after_reload');
				return (await reader.query(
					"SELECT query FROM traceprof.spans WHERE query = 'SELECT $1 AS sampled_after_reload'")).rows.length > 0;
			});
		} finally {
			await reader.query('ALTER SYSTEM RESET traceprof.sample_rate');
			await reader.query('SELECT pg_reload_conf()');
		}
	});
});
