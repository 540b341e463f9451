'use strict';
// Interoperability with a real OpenTelemetry database instrumentation, not
// comments written by hand: @opentelemetry/instrumentation-pg with
// addSqlCommenterCommentToQueries, registered with a real
// @opentelemetry/sdk-trace-node tracer provider (spans kept by an
// InMemorySpanExporter), instrumenting the npm `pg` client the other tests
// use.  Each statement runs inside an active span of the test's own; the
// instrumentation makes a CLIENT span for it and appends that CLIENT span's
// context as a sqlcommenter comment.  The extension's SERVER spans (decoded
// from the capture receiver with lib/otlp.js, and read from traceprof.spans)
// must be that CLIENT span's children, in its trace, with its tracestate.
//
// What the instrumentation (0.68.0, with @opentelemetry/sql-common 0.41.2)
// does, from its source (build/src/instrumentation.js, _getClientQueryPatch;
// sql-common build/src/index.js, addSqlCommenterComment):
//   - client.query(text[, values]): the text gets ` /*traceparent='…'*/`,
//     plus `,tracestate='…'` when the CLIENT span's context carries a
//     TraceState (W3CTraceContextPropagator.inject of
//     trace.setSpan(ROOT_CONTEXT, span)), keys sorted, values URL-encoded
//     (encodeURIComponent plus ! ' ( ) *).  With values, pg sends it in the
//     Parse message (extended protocol).
//   - client.query({text, values}) likewise, but only when the object has
//     no `name` key at all (`!('name' in arg0)`): a named prepared statement
//     is never commented, since its text is parsed once and a comment would
//     carry a stale context; `name: undefined` counts as named.
//   - a text already containing `--` or `/*…*/` anywhere (string literals
//     included: hasValidSqlComment's own NOTE says it gives false positives)
//     is never commented.
// The cases where it does not comment are asserted as what they are: the
// statement runs, untraced, and no server span joins the CLIENT span.
//
// Every wait polls a condition with a deadline; nothing sleeps blindly.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');

// The instrumentation patches `pg` when it is require()d, so everything
// here is set up before lib/traced (which requires pg) is loaded.  A missing
// package is an error, never a skip.
function need(name) {
	try {
		return require(name);
	} catch (err) {
		throw new Error(`the npm package "${name}" is missing (${err.message}): run 'make deps' ` +
			'(npm ci in tests/integration)');
	}
}
const api = need('@opentelemetry/api');
const { registerInstrumentations, isWrapped } = need('@opentelemetry/instrumentation');
const { PgInstrumentation } = need('@opentelemetry/instrumentation-pg');
const { NodeTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = need('@opentelemetry/sdk-trace-node');

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
// register(): the global provider, W3C propagator and AsyncLocalStorage
// context manager, so the instrumentation sees the test's active span.
provider.register();
const instrumentation = new PgInstrumentation({
	addSqlCommenterCommentToQueries: true,
	// The admin session's reads of traceprof.spans run outside any span:
	// they stay uninstrumented (and uncommented, so untraced).
	requireParentSpan: true,
});
registerInstrumentations({ instrumentations: [instrumentation], tracerProvider: provider });
const tracer = provider.getTracer('traceprof-instrumentation-test');

const pg = require('pg');
const { waitFor, startTraced: startTracedCluster, connect, hex } = require('./lib/traced');
const { startReceiver } = require('./lib/receiver');
const { SpanKind, StatusCode } = require('./lib/otlp');

const EXPORT_INTERVAL_MS = 100;
const PG_SCOPE = '@opentelemetry/instrumentation-pg';

/** traceparent='…' as the instrumentation writes it for a span context. */
const traceparentOf = (sc) => `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags.toString(16)}`;

/**
 * Record the protocol messages that carry statement texts (simple Query,
 * Parse) a pg client sends, to show what the instrumentation put on the
 * wire.  The methods are wrapped on this connection only and pass through.
 */
function recordWire(client) {
	const sent = [];
	const conn = client.connection;
	const query = conn.query.bind(conn);
	const parse = conn.parse.bind(conn);
	conn.query = (text) => {
		sent.push({ message: 'Query', text });
		return query(text);
	};
	conn.parse = (q) => {
		sent.push({ message: 'Parse', text: q.text, name: q.name || '' });
		return parse(q);
	};
	return sent;
}

/**
 * Run fn inside an active span of the test's own (a root span, or a child
 * of parentContext); returns {span, result}: the span ended.
 */
async function inSpan(name, fn, parentContext = api.ROOT_CONTEXT) {
	return tracer.startActiveSpan(name, {}, parentContext, async (span) => {
		try {
			return { span, result: await fn() };
		} finally {
			span.end();
		}
	});
}

/** The instrumentation's CLIENT span(s) whose parent is the test's span. */
function clientSpansOf(testSpan) {
	const own = testSpan.spanContext();
	return exporter.getFinishedSpans().filter((s) => s.kind === api.SpanKind.CLIENT &&
		s.spanContext().traceId === own.traceId && s.parentSpanContext?.spanId === own.spanId);
}

/** The one CLIENT span of testSpan, from the instrumentation. */
function oneClientSpan(testSpan, what) {
	const spans = clientSpansOf(testSpan);
	assert.equal(spans.length, 1, `one CLIENT span of instrumentation-pg for ${what}: ` +
		`${JSON.stringify(exporter.getFinishedSpans().map((s) => [s.name, s.kind, s.spanContext().traceId]))}`);
	assert.equal(spans[0].instrumentationScope.name, PG_SCOPE);
	return spans[0];
}

/** Decoded spans of the receiver's requests that belong to traceId. */
const spansOf = (receiver, traceId) => receiver.spans().filter((s) => s.traceId === traceId);

const summary = (s) => `${s.name} [kind ${s.kind}] trace=${s.traceId} span=${s.spanId} parent=${s.parentSpanId} ` +
	`state=${JSON.stringify(s.traceState)} text=${JSON.stringify(s.attributes['db.query.text'])}`;
const dump = (spans) => spans.map(summary).join('\n  ');

describe('@opentelemetry/instrumentation-pg with addSqlCommenterCommentToQueries (own cluster)', () => {
	let cluster;
	let receiver;
	let admin;
	let client;
	let wire;

	before(async () => {
		// Fail loudly if the instrumentation did not take hold of pg: every
		// case below would then test comments that were never written.
		assert.ok(isWrapped(pg.Client.prototype.query),
			'instrumentation-pg did not patch pg.Client.prototype.query (was pg required before it was registered?)');
		receiver = await startReceiver({ grpc: false });
		cluster = await startTracedCluster({
			'traceprof.otlp_endpoint': receiver.httpEndpoint,
			'traceprof.export_interval': String(EXPORT_INTERVAL_MS),
		});
		admin = await connect(cluster);
		await admin.query('CREATE TABLE orders_otel (id int PRIMARY KEY, note text); ' +
			"INSERT INTO orders_otel VALUES (1, 'a'), (2, 'b'), (3, 'c'); " +
			'ALTER TABLE orders_otel OWNER TO app');
		client = await connect(cluster, 'app');
		wire = recordWire(client);
	});

	after(async () => {
		for (const c of [client, admin])
			if (c)
				await c.end().catch(() => {});
		if (cluster)
			await cluster.stop();
		if (receiver)
			await receiver.close();
		instrumentation.disable();
		await provider.shutdown();
	});

	/**
	 * Run one statement through the instrumented client inside a test span
	 * (under parentContext); returns the test span, the instrumentation's
	 * CLIENT span, what went on the wire, and the result or error.
	 */
	async function instrumented(what, run, parentContext) {
		const from = wire.length;
		let error = null;
		const { span, result } = await inSpan(`case ${what}`, async () => {
			try {
				return await run(client);
			} catch (e) {
				error = e;
				return undefined;
			}
		}, parentContext);
		return { what, testSpan: span, clientSpan: oneClientSpan(span, what), sent: wire.slice(from), result, error };
	}

	/**
	 * The instrumentation commented c's statement with its CLIENT span's
	 * context, in the expected message: the text sent ends with that comment.
	 */
	function assertCommented(c, message, traceState) {
		const sc = c.clientSpan.spanContext();
		const keys = [`traceparent='${traceparentOf(sc)}'`];
		if (traceState !== undefined)
			keys.push(`tracestate='${encodeURIComponent(traceState)}'`);
		const comment = ` /*${keys.join(',')}*/`;
		const carrying = c.sent.filter((m) => m.text.endsWith(comment));
		assert.deepEqual(carrying.map((m) => m.message), [message],
			`${c.what}: one ${message} message ends with the CLIENT span's comment ${comment}: ${JSON.stringify(c.sent)}`);
		// The CLIENT span is the test span's child, in its trace: the comment
		// names the instrumentation's span, not the test's.
		assert.equal(sc.traceId, c.testSpan.spanContext().traceId);
		assert.notEqual(sc.spanId, c.testSpan.spanContext().spanId);
	}

	/**
	 * Wait for the SERVER spans of c's trace at the receiver (n of them);
	 * each must be the CLIENT span's child, in its trace, with its
	 * tracestate, and every other span of the trace (plan) a SERVER span's.
	 */
	async function assertServerChildren(c, n) {
		const sc = c.clientSpan.spanContext();
		const servers = await waitFor(() => `${n} SERVER span(s) of trace ${sc.traceId} (${c.what}):\n  ` +
			dump(spansOf(receiver, sc.traceId)), () => {
			const spans = spansOf(receiver, sc.traceId).filter((s) => s.kind === SpanKind.SERVER);
			return spans.length >= n ? spans : null;
		});
		const all = spansOf(receiver, sc.traceId);
		assert.equal(servers.length, n, `${c.what}: ${n} SERVER span(s):\n  ${dump(all)}`);
		const expectedState = sc.traceState ? sc.traceState.serialize() : '';
		for (const s of servers) {
			assert.equal(s.traceId, sc.traceId, `${c.what}: the server span shares the CLIENT span's trace id`);
			assert.equal(s.parentSpanId, sc.spanId,
				`${c.what}: the server span's parent is the instrumentation's CLIENT span ${sc.spanId} ` +
				`(the test span is ${c.testSpan.spanContext().spanId}):\n  ${dump(all)}`);
			assert.equal(s.traceState, expectedState, `${c.what}: trace_state is the CLIENT span's tracestate`);
			assert.ok(!/traceparent|\/\*/.test(s.attributes['db.query.text']),
				`${c.what}: the comment is not part of db.query.text: ${s.attributes['db.query.text']}`);
		}
		const serverIds = new Set(servers.map((s) => s.spanId));
		for (const s of all.filter((x) => x.kind !== SpanKind.SERVER))
			assert.ok(serverIds.has(s.parentSpanId), `${c.what}: ${s.name} is a SERVER span's child:\n  ${dump(all)}`);

		// The same, read in SQL.
		const rows = (await admin.query('SELECT trace_id, span_id, parent_span_id, trace_state, status, query ' +
			"FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [sc.traceId])).rows;
		const byId = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
		assert.deepEqual(rows.map((r) => [r.span_id, r.parent_span_id, r.trace_state]).sort(byId),
			servers.map((s) => [s.spanId, sc.spanId, expectedState || null]).sort(byId),
			`${c.what}: traceprof.spans agrees: ${JSON.stringify(rows)}`);
		return servers;
	}

	test('1. plain, parameterized (extended protocol), utility and failing statements: each SERVER span is the child of instrumentation-pg\'s CLIENT span', async () => {
		const plain = await instrumented('plain query', (cl) => cl.query('SELECT count(*)::int AS n FROM orders_otel'));
		assert.equal(plain.error, null);
		assert.deepEqual(plain.result.rows, [{ n: 3 }]);
		assertCommented(plain, 'Query');

		// pg sends a query with values as Parse/Bind/Execute: the comment
		// rides in the Parse message (unnamed statement).
		const param = await instrumented('parameterized query', (cl) =>
			cl.query('SELECT note FROM orders_otel WHERE id = $1', [2]));
		assert.equal(param.error, null);
		assert.deepEqual(param.result.rows, [{ note: 'b' }]);
		assertCommented(param, 'Parse');
		assert.deepEqual(param.sent.map((m) => [m.message, m.name ?? null]), [['Parse', '']]);

		// The query-object form, no `name` key: commented the same way.
		const config = await instrumented('parameterized query object', (cl) =>
			cl.query({ text: 'SELECT id FROM orders_otel WHERE note = $1', values: ['c'] }));
		assert.equal(config.error, null);
		assert.deepEqual(config.result.rows, [{ id: 3 }]);
		assertCommented(config, 'Parse');

		const utility = await instrumented('utility statement', (cl) => cl.query('CREATE TABLE otel_made (id int)'));
		assert.equal(utility.error, null);
		assertCommented(utility, 'Query');

		// Failing: at run time through the extended protocol, in planning
		// through the simple one, and in Parse (a syntax error).
		const dup = await instrumented('failing parameterized INSERT', (cl) =>
			cl.query('INSERT INTO orders_otel (id, note) VALUES ($1, $2)', [1, 'dup']));
		assert.equal(dup.error?.code, '23505', `duplicate key: ${dup.error}`);
		assertCommented(dup, 'Parse');
		const zero = await instrumented('failing simple SELECT', (cl) => cl.query('SELECT 1 / 0 AS boom'));
		assert.equal(zero.error?.code, '22012', `division by zero: ${zero.error}`);
		assertCommented(zero, 'Query');
		const syntax = await instrumented('statement failing in Parse', (cl) => cl.query('SELEC $1::int', [1]));
		assert.equal(syntax.error?.code, '42601', `syntax error: ${syntax.error}`);
		assertCommented(syntax, 'Parse');
		for (const c of [dup, zero, syntax])
			assert.equal(c.clientSpan.status.code, api.SpanStatusCode.ERROR, `${c.what}: the CLIENT span failed too`);

		const [p] = await assertServerChildren(plain, 1);
		assert.equal(p.attributes['db.query.text'], 'SELECT count(*)::int AS n FROM orders_otel');
		assert.equal(p.attributes['db.response.returned_rows'], 1);
		const [q] = await assertServerChildren(param, 1);
		assert.equal(q.attributes['db.query.text'], 'SELECT note FROM orders_otel WHERE id = $1');
		assert.equal(q.attributes['db.response.returned_rows'], 1);
		const [o] = await assertServerChildren(config, 1);
		assert.equal(o.attributes['db.query.text'], 'SELECT id FROM orders_otel WHERE note = $1');
		const [u] = await assertServerChildren(utility, 1);
		assert.equal(u.name, 'CREATE TABLE otel_made');
		const [d] = await assertServerChildren(dup, 1);
		assert.equal(d.status.code, StatusCode.ERROR);
		assert.equal(d.attributes['db.response.status_code'], '23505');
		assert.match(d.status.message, /duplicate key value violates unique constraint "orders_otel_pkey"/);
		const [z] = await assertServerChildren(zero, 1);
		assert.equal(z.status.code, StatusCode.ERROR);
		assert.equal(z.attributes['db.response.status_code'], '22012');
		const [s] = await assertServerChildren(syntax, 1);
		assert.equal(s.status.code, StatusCode.ERROR);
		assert.equal(s.attributes['db.response.status_code'], '42601');
	});

	test('2. a tracestate on the active context: the instrumentation comments it, and the SERVER spans carry it as trace_state', async () => {
		// The caller's context came from upstream (a remote parent) with a
		// tracestate; the SDK hands it down to the test span and to the CLIENT
		// span, whose comment then has tracestate='…' (URL-encoded).  One
		// upstream trace per case, so each trace holds one statement's spans.
		const state = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7,ot=th:8';
		const upstream = () => api.trace.setSpanContext(api.ROOT_CONTEXT, {
			traceId: hex(16), spanId: hex(8), traceFlags: api.TraceFlags.SAMPLED, isRemote: true,
			traceState: api.createTraceState(state),
		});
		const plain = await instrumented('plain query with tracestate', (cl) => cl.query('SELECT 1 AS ts_plain'), upstream());
		const param = await instrumented('parameterized query with tracestate', (cl) =>
			cl.query('SELECT $1::int AS ts_param', [2]), upstream());
		const utility = await instrumented('utility statement with tracestate', (cl) =>
			cl.query('CREATE TABLE otel_made_ts (id int)'), upstream());
		const failing = await instrumented('failing statement with tracestate', (cl) =>
			cl.query('SELECT 1 / $1::int AS ts_fail', [0]), upstream());
		assert.equal(failing.error?.code, '22012', `division by zero: ${failing.error}`);
		for (const c of [plain, param, utility])
			assert.equal(c.error, null, `${c.what}: ${c.error}`);

		for (const [c, message] of [[plain, 'Query'], [param, 'Parse'], [utility, 'Query'], [failing, 'Parse']]) {
			assert.equal(c.clientSpan.spanContext().traceState?.serialize(), state, `${c.what}: the CLIENT span has the tracestate`);
			assertCommented(c, message, state);
			const [s] = await assertServerChildren(c, 1);
			assert.equal(s.traceState, state);
		}
	});

	test('3. what the instrumentation appends after a trailing semicolon, and to a multi-statement query: the comment is the last statement\'s', async () => {
		// addSqlCommenterComment appends ` /*…*/` after the whole text, so a
		// text ending in `;` gets it after the semicolon.
		const semi = await instrumented('query ending in a semicolon', (cl) => cl.query('SELECT 2 AS semi;'));
		assert.equal(semi.error, null);
		assertCommented(semi, 'Query');
		assert.match(semi.sent[0].text, /^SELECT 2 AS semi; \/\*traceparent='[^']+'\*\/$/);
		const [s] = await assertServerChildren(semi, 1);
		assert.equal(s.attributes['db.query.text'], 'SELECT $1 AS semi');

		// Two statements in one simple Query under one CLIENT span: the comment
		// ends the second, which alone is traced (docs/configuration.md: "in a
		// multi-statement query such a comment is the last statement's"); the
		// first runs untraced, so not every statement of the CLIENT span has a
		// server span.
		const multi = await instrumented('multi-statement query', (cl) =>
			cl.query('SELECT 3 AS multi_first; SELECT 4 AS multi_second'));
		assert.equal(multi.error, null);
		assert.deepEqual(multi.result.map((r) => r.rows), [[{ multi_first: 3 }], [{ multi_second: 4 }]]);
		assertCommented(multi, 'Query');
		const [m] = await assertServerChildren(multi, 1);
		assert.equal(m.attributes['db.query.text'], 'SELECT $1 AS multi_second');
		const first = await admin.query("SELECT count(*)::int AS n FROM traceprof.spans WHERE query LIKE '%multi_first%'");
		assert.equal(first.rows[0].n, 0, 'the first statement of the multi-statement query is not traced');
	});

	test('4. what the instrumentation does not comment (named prepared statements, `name: undefined`, texts with -- or /* */): untraced, no server span joins the CLIENT span', async () => {
		// instrumentation.js: `else if (firstArgIsQueryObjectWithText &&
		// !('name' in arg0))`: a query object with a name key (even undefined)
		// is left alone; sql-common's hasValidSqlComment: any `--` or `/*…*/`
		// in the text (string literals included) means "already commented".
		const uncommented = [
			await instrumented('named prepared statement', (cl) =>
				cl.query({ name: 'otel_by_id', text: 'SELECT note AS uncommented_named FROM orders_otel WHERE id = $1', values: [1] })),
			// The second execution of the named statement sends no Parse at all.
			await instrumented('named prepared statement, again', (cl) =>
				cl.query({ name: 'otel_by_id', text: 'SELECT note AS uncommented_named FROM orders_otel WHERE id = $1', values: [3] })),
			await instrumented('query object with name: undefined', (cl) =>
				cl.query({ name: undefined, text: 'SELECT $1::int AS uncommented_undefined_name', values: [5] })),
			await instrumented('text with -- in a string literal', (cl) => cl.query("SELECT '--' AS uncommented_dashes")),
			await instrumented('text with its own /* */ comment', (cl) => cl.query('/* app */ SELECT 6 AS uncommented_own_comment')),
		];
		const rows = uncommented.map((c) => c.result && c.result.rows);
		assert.deepEqual(rows, [[{ uncommented_named: 'a' }], [{ uncommented_named: 'c' }],
			[{ uncommented_undefined_name: 5 }], [{ uncommented_dashes: '--' }], [{ uncommented_own_comment: 6 }]]);
		for (const c of uncommented) {
			assert.equal(c.error, null, `${c.what}: ${c.error}`);
			assert.ok(!c.sent.some((m) => /traceparent/.test(m.text)),
				`${c.what}: the instrumentation added no traceparent: ${JSON.stringify(c.sent)}`);
		}
		assert.deepEqual(uncommented[1].sent, [], 'the named statement\'s second run reuses its Parse');

		// A barrier the instrumentation does comment: once its span is
		// exported and in traceprof.spans, so would anything traced before it.
		const barrier = await instrumented('barrier', (cl) => cl.query('SELECT 7 AS barrier'));
		await assertServerChildren(barrier, 1);
		for (const c of uncommented) {
			const traceId = c.clientSpan.spanContext().traceId;
			assert.deepEqual(spansOf(receiver, traceId).map(summary), [], `${c.what}: no span exported in the CLIENT span's trace`);
			const n = await admin.query('SELECT count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1', [traceId]);
			assert.equal(n.rows[0].n, 0, `${c.what}: no span in traceprof.spans in the CLIENT span's trace`);
		}
		const anywhere = await admin.query("SELECT name, query FROM traceprof.spans WHERE query LIKE '%uncommented%'");
		assert.deepEqual(anywhere.rows, [], 'no statement the instrumentation left uncommented was traced at all');
	});
});
