'use strict';
// The traceprof extension end to end: real PostgreSQL 15 clusters with
// shared_preload_libraries = 'traceprof', the capture receiver as the OTLP
// collector (HTTP/protobuf and gRPC), payloads decoded by
// @opentelemetry/otlp-transformer's generated root, SQLCommenter comments
// sent through a real driver (npm `pg`: simple and extended protocol), the
// loader's trace continued inside the server, and the failure modes of the
// exporter (unreachable collector, bounded ring, retries, 400s).
//
// Every wait polls a condition with a deadline; nothing sleeps blindly.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');

const { GENERATOR, LOADER, requireExecutable } = require('./lib/paths');
const { run, describe: describeRun } = require('./lib/run');
const { freePort, startCluster } = require('./lib/cluster');
const { sleep, hex, newContext, waitFor, startTraced: startTracedCluster, connect, tracedSelect: tracedSelectIn } = require('./lib/traced');
const { startReceiver, GRPC_PATH } = require('./lib/receiver');
const { decodeTraces, SpanKind, StatusCode } = require('./lib/otlp');
const { makeTempDir, removeTempDir } = require('./lib/tmp');
const { connectWire, serialize } = require('./lib/wire');

const EXPORT_INTERVAL_MS = 100;

/** A traced cluster whose exporter runs every 100 ms. */
const startTraced = (settings = {}) => startTracedCluster({ 'traceprof.export_interval': String(EXPORT_INTERVAL_MS), ...settings });
const traceparent = (traceId, spanId, flags = '01') => `00-${traceId}-${spanId}-${flags}`;

/** traceprof.stats with the counters as Numbers. */
async function stats(client) {
	const row = (await client.query('SELECT * FROM traceprof.stats')).rows[0];
	const out = { ...row };
	for (const k of ['spans_created', 'spans_dropped', 'spans_exported', 'export_failures',
		'malformed_contexts', 'spans_pending', 'capacity'])
		out[k] = Number(row[k]);
	return out;
}

/** Decoded spans of the receiver's requests that belong to traceId. */
function spansOf(receiver, traceId) {
	return receiver.spans().filter((s) => s.traceId === traceId);
}

/** Wait until the receiver holds the SERVER span of trace ctx; returns it. */
function waitForServerSpan(receiver, ctx) {
	return waitFor(`the SERVER span of trace ${ctx.traceId}`,
		() => spansOf(receiver, ctx.traceId).find((x) => x.kind === SpanKind.SERVER));
}

/** A decoded span's duration in milliseconds. */
const durationMs = (s) => Number(s.endTimeUnixNano - s.startTimeUnixNano) / 1e6;

/** The receiver's requests that carry at least one span of traceId. */
function requestsWith(receiver, traceId) {
	return receiver.requests.filter((r) => decodeTraces(r.body).spans.some((s) => s.traceId === traceId));
}

/** Wait until the receiver holds at least n spans of traceId; returns them. */
function waitForSpans(receiver, traceId, n, timeoutMs) {
	return waitFor(() => `${n} span(s) of trace ${traceId} at the receiver ` +
		`(have ${spansOf(receiver, traceId).length}: ${spansOf(receiver, traceId).map((s) => s.name)})`,
	() => {
		const spans = spansOf(receiver, traceId);
		return spans.length >= n ? spans : null;
	}, timeoutMs);
}

const summary = (s) => `${s.name} [kind ${s.kind}] span=${s.spanId} parent=${s.parentSpanId} ` +
	`text=${JSON.stringify(s.attributes['db.query.text'])}`;
const dump = (spans) => spans.map(summary).join('\n  ');
const jsonish = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? x.toString() : x));

function logLines(cluster, from = 0) {
	return cluster.readLog().slice(from).split('\n');
}

// ---- 1 and 2: what a traced session exports ---------------------------

const RESOURCE_ATTRIBUTES = 'deployment.environment=ci%20test,team.name=data%2Cplatform%3D1';
const EXPECTED_RESOURCE = { 'deployment.environment': 'ci test', 'team.name': 'data,platform=1' };

/**
 * Run the same traced workload in a fresh session: a utility statement,
 * writes and reads with literals (that must not leave the server), a CPU
 * heavy query, and two failures.  Returns what the checks need.
 */
async function runWorkload(cluster, table) {
	const ctx = newContext();
	const client = await connect(cluster, 'app');
	try {
		const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
		const startedMs = Date.now();
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		await client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, note text)`);
		await client.query(`INSERT INTO ${table} VALUES (1, 'secret-one'), (2, 'secret-two'), (3, 'secret-three')`);
		const sel = await client.query(`SELECT id, note FROM ${table} WHERE id >= 2 AND note <> 'secret-none' ORDER BY id`);
		assert.equal(sel.rows.length, 2);
		await client.query('SELECT count(*) FROM generate_series(1, 300000) AS g');
		await assert.rejects(client.query('SELECT 1 / 0 AS boom'), (e) => e.code === '22012');
		await assert.rejects(client.query(`INSERT INTO ${table} VALUES (1, 'secret-dup')`), (e) => e.code === '23505');
		return { ctx, pid, startedMs, endedMs: Date.now() };
	} finally {
		await client.end();
	}
}

/** The statements runWorkload traced, as the server must describe them. */
function expectedStatements(table) {
	return [
		{ text: `CREATE TABLE ${table} (id int PRIMARY KEY, note text)`, name: `CREATE TABLE ${table}`,
			operation: 'CREATE TABLE', collection: table, planned: false },
		{ text: `INSERT INTO ${table} VALUES ($1, $2), ($3, $4), ($5, $6)`, name: `INSERT ${table}`,
			operation: 'INSERT', collection: table, affected: 3, planned: true },
		{ text: `SELECT id, note FROM ${table} WHERE id >= $1 AND note <> $2 ORDER BY id`, name: `SELECT ${table}`,
			operation: 'SELECT', collection: table, rows: 2, planned: true },
		{ text: 'SELECT count(*) FROM generate_series($1, $2) AS g', name: 'SELECT',
			operation: 'SELECT', rows: 1, planned: true, cpuHeavy: true },
		{ text: 'SELECT $1 / $2 AS boom', name: 'SELECT', operation: 'SELECT', planned: true,
			error: { sqlstate: '22012', message: 'division by zero' } },
		{ text: `INSERT INTO ${table} VALUES ($1, $2)`, name: `INSERT ${table}`, operation: 'INSERT', planned: true,
			collection: table,
			error: { sqlstate: '23505', message: `duplicate key value violates unique constraint "${table}_pkey"` } },
	];
}

/** Wait for the workload's spans and check every one of them. */
async function checkWorkloadExport(receiver, table, run, serviceName, port) {
	const expected = expectedStatements(table);
	const planned = expected.filter((e) => e.planned).length;
	const spans = await waitForSpans(receiver, run.ctx.traceId, expected.length + planned);
	// One more export round: anything duplicated or extra would show now.
	await sleep(3 * EXPORT_INTERVAL_MS);
	const all = spansOf(receiver, run.ctx.traceId);
	assert.equal(all.length, spans.length, `no span arrives twice or late:\n  ${dump(all)}`);

	const servers = all.filter((s) => s.kind === SpanKind.SERVER);
	const plans = all.filter((s) => s.name === 'plan');
	assert.equal(servers.length, expected.length, `one SERVER span per statement:\n  ${dump(all)}`);
	assert.equal(plans.length, planned, `one plan span per planned statement:\n  ${dump(all)}`);
	assert.equal(new Set(all.map((s) => s.spanId)).size, all.length, 'span ids are unique');

	const notBefore = BigInt(run.startedMs - 1000) * 1000000n;
	const notAfter = BigInt(run.endedMs + 1000) * 1000000n;
	for (const s of all) {
		assert.match(s.spanId, /^[0-9a-f]{16}$/);
		assert.notEqual(s.spanId, '0000000000000000');
		assert.ok(s.startTimeUnixNano >= notBefore && s.endTimeUnixNano <= notAfter &&
			s.startTimeUnixNano <= s.endTimeUnixNano, `times of ${summary(s)} lie within the run`);
		assert.equal(s.scope.name, 'traceprof');
		assert.equal(s.resource.attributes['service.name'], serviceName, 'service.name from traceprof.service_name');
		for (const [k, v] of Object.entries(EXPECTED_RESOURCE))
			assert.equal(s.resource.attributes[k], v, `resource attribute ${k} (percent-decoded)`);
		assert.equal(s.resource.attributes['host.name'], require('node:os').hostname(), 'host.name: the server\'s');
		assert.equal(s.resource.attributes['service.instance.id'], `${require('node:os').hostname()}:${port}`,
			'service.instance.id: the server\'s host and port');
		// OTLP span flags: sampled; bit 8, whether the parent is remote is
		// known; bit 9, it is (a top-level span's caller, not a span of ours).
		const remoteParent = s.kind === 2 && /[1-9a-f]/.test(s.parentSpanId);
		assert.equal(s.flags, remoteParent ? 0x301 : 0x101, `flags of ${summary(s)}`);
		assert.deepEqual(Object.keys(s.attributes).filter((k) => k.startsWith('__duplicate__')), [],
			`no repeated attribute in ${summary(s)}`);
		assert.doesNotMatch(jsonish(s.attributes), /secret/, `no literal value leaves the server: ${summary(s)}`);
	}

	for (const e of expected) {
		const matching = servers.filter((s) => s.attributes['db.query.text'] === e.text);
		assert.equal(matching.length, 1, `one SERVER span with db.query.text ${JSON.stringify(e.text)}:\n  ${dump(servers)}`);
		const s = matching[0];
		const a = s.attributes;
		assert.equal(s.name, e.name);
		assert.equal(s.parentSpanId, run.ctx.spanId, `${s.name}: parent is the traceparent's parent id`);
		assert.equal(a['db.system.name'], 'postgresql');
		assert.equal(a['db.namespace'], 'app');
		assert.equal(a['db.operation.name'], e.operation);
		assert.equal(a['db.collection.name'], e.collection, `db.collection.name of ${s.name}`);
		assert.equal(a['traceprof.backend_pid'], run.pid, 'traceprof.backend_pid is the session\'s backend');
		assert.equal(s.attributeTypes['traceprof.cpu_time_ns'], 'intValue');
		const wallNs = Number(s.endTimeUnixNano - s.startTimeUnixNano);
		assert.ok(a['traceprof.cpu_time_ns'] >= 0 && a['traceprof.cpu_time_ns'] <= wallNs + 1e6,
			`0 <= cpu_time_ns (${a['traceprof.cpu_time_ns']}) <= wall time (${wallNs}) for ${s.name}`);
		if (e.cpuHeavy)
			assert.ok(a['traceprof.cpu_time_ns'] > 1e6, `counting 300000 rows costs over 1 ms of CPU: ${a['traceprof.cpu_time_ns']} ns`);
		// Rows sent to the client (semantic conventions) and rows written (ours) apart.
		assert.equal(a['db.response.returned_rows'], e.rows, `db.response.returned_rows of ${e.text}`);
		assert.equal(a['traceprof.rows_affected'], e.affected, `traceprof.rows_affected of ${e.text}`);
		if (e.rows !== undefined)
			assert.equal(s.attributeTypes['db.response.returned_rows'], 'intValue');
		if (e.error) {
			assert.equal(s.status.code, StatusCode.ERROR, `${e.text}: status ERROR`);
			assert.equal(s.status.message, e.error.message);
			assert.equal(a['db.response.status_code'], e.error.sqlstate);
		} else {
			assert.equal(s.status.code, StatusCode.UNSET, `${e.text}: no error status`);
			assert.equal(a['db.response.status_code'], undefined);
		}
		const children = plans.filter((p) => p.parentSpanId === s.spanId);
		assert.equal(children.length, e.planned ? 1 : 0, `plan children of ${s.name}`);
		for (const p of children) {
			assert.equal(p.kind, SpanKind.INTERNAL, 'plan spans are INTERNAL');
			assert.ok(p.startTimeUnixNano >= s.startTimeUnixNano && p.endTimeUnixNano <= s.endTimeUnixNano,
				'planning happens inside its statement');
		}
	}
}

describe('OTLP/HTTP export, SQLCommenter, loader, privileges (one cluster)', () => {
	let cluster;
	let receiver;
	let admin;

	before(async () => {
		receiver = await startReceiver({ grpc: false });
		cluster = await startTraced({
			'traceprof.otlp_endpoint': receiver.httpEndpoint,
			'traceprof.service_name': 'orders-db',
			'traceprof.resource_attributes': RESOURCE_ATTRIBUTES,
		});
		admin = await connect(cluster);
		await admin.query('CREATE TABLE orders_sc (id int PRIMARY KEY, note text); ' +
			"INSERT INTO orders_sc VALUES (1, 'a'), (2, 'b'), (3, 'c'); " +
			'ALTER TABLE orders_sc OWNER TO app');
	});

	after(async () => {
		if (admin)
			await admin.end().catch(() => {});
		if (cluster)
			await cluster.stop();
		if (receiver)
			await receiver.close();
	});

	test('1. OTLP/HTTP: traced statements arrive as SERVER spans with plan children, db.* attributes, resource and errors', async () => {
		const table = 'orders_http';
		const r = await runWorkload(cluster, table);
		await checkWorkloadExport(receiver, table, r, 'orders-db', cluster.port);
		const carrying = requestsWith(receiver, r.ctx.traceId);
		assert.ok(carrying.length >= 1);
		for (const req of carrying) {
			assert.equal(req.method, 'POST');
			assert.equal(req.path, '/v1/traces', 'v1/traces appended to the base URL');
			assert.equal(req.headers['content-type'], 'application/x-protobuf');
			assert.match(req.headers['user-agent'], /^traceprof-OTLP-Exporter-C\/\d+\.\d+\.\d+$/);
			assert.equal(req.bodyError, null);
		}
	});

	test('1b. the exporter keeps its connection: a drain of 10-span requests arrives over one TCP connection', async () => {
		const ctx = newContext();
		await admin.query('ALTER SYSTEM SET traceprof.export_batch_size = 10');
		await admin.query('SELECT pg_reload_conf()');
		try {
			const client = await connect(cluster, 'app');
			try {
				// One transaction: the spans pile up while it runs and are drained at once.
				await client.query('BEGIN');
				await client.query(`SET LOCAL traceprof.traceparent = '${ctx.header}'`);
				for (let i = 0; i < 30; i++)
					await client.query(`SELECT ${i} AS reused`);
				await client.query('COMMIT');
			} finally {
				await client.end();
			}
			await waitForSpans(receiver, ctx.traceId, 30);
			const carrying = requestsWith(receiver, ctx.traceId);
			assert.ok(carrying.length >= 3, `batches of 10: ${carrying.length} requests`);
			assert.ok(carrying.every((r) => decodeTraces(r.body).spans.length <= 10), 'no request above the batch size');
			const ports = new Set(carrying.map((r) => r.clientPort));
			assert.ok(ports.size < carrying.length,
				`requests reuse a connection: ${carrying.length} requests from client ports ${[...ports]}`);
		} finally {
			await admin.query('ALTER SYSTEM RESET traceprof.export_batch_size');
			await admin.query('SELECT pg_reload_conf()');
		}
	});

	/**
	 * Run sql traced in a new session, terminate that backend while it sleeps
	 * in pg_sleep, and return the trace's SERVER spans once stored.
	 */
	async function terminatedWhileSleeping(sql) {
		const ctx = newContext();
		const victim = await connect(cluster, 'app');
		const pid = (await victim.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
		await victim.query(`SET traceprof.traceparent = '${ctx.header}'`);
		const sleeping = victim.query(sql).then(() => 'finished', (e) => e.message);
		await waitFor('the traced pg_sleep to be running', async () =>
			(await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'", [pid])).rowCount === 1);
		await admin.query('SELECT pg_terminate_backend($1)', [pid]);
		assert.match(await sleeping, /terminating connection due to administrator command/);
		const rows = await waitFor('the terminated statement\'s span', async () => {
			const r = await admin.query(
				"SELECT name, status, status_message, attributes->>'db.response.status_code' AS sqlstate, parent_span_id FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server'",
				[ctx.traceId]);
			return r.rowCount > 0 && r.rows;
		});
		return { ctx, rows };
	}

	test('1c. a traced statement whose backend is terminated (FATAL: no catch runs) still ends as an error span, with the FATAL\'s reason', async () => {
		const { ctx, rows } = await terminatedWhileSleeping('SELECT pg_sleep(60)');
		assert.deepEqual(rows.map((r) => r.name), ['SELECT'], 'one span: the SELECT (the SET ran before the context applied)');
		assert.equal(rows[0].status, 'error');
		assert.equal(rows[0].status_message, 'terminating connection due to administrator command');
		assert.equal(rows[0].sqlstate, '57P01', 'admin_shutdown');
		assert.equal(rows[0].parent_span_id, ctx.spanId);
	});

	test('1d. terminated inside an exception block (a subtransaction begun after the span): the span still gets the FATAL\'s reason', async () => {
		await admin.query(`CREATE OR REPLACE FUNCTION tp_sleep_guarded() RETURNS int LANGUAGE plpgsql AS $$
			BEGIN
				BEGIN
					PERFORM pg_sleep(60);
				EXCEPTION WHEN division_by_zero THEN
					RETURN 0;
				END;
				RETURN 1;
			END $$`);
		const { rows } = await terminatedWhileSleeping('SELECT tp_sleep_guarded()');
		assert.deepEqual(rows.map((r) => [r.name, r.status, r.status_message, r.sqlstate]),
			[['SELECT', 'error', 'terminating connection due to administrator command', '57P01']]);
	});

	test('1e. a transaction block\'s spans all reach other sessions: at COMMIT, at ROLLBACK, after an error, 40 statements long, and when the backend is terminated idle in the block', async () => {
		const serverSpans = async (ctx) => (await admin.query(
			"SELECT name, status FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time",
			[ctx.traceId])).rows.map((r) => `${r.name}${r.status === 'error' ? ' (error)' : ''}`);
		const client = await connect(cluster, 'app');
		try {
			const many = newContext();
			await client.query(`SET traceprof.traceparent = '${many.header}'`);
			await client.query('BEGIN');
			for (let i = 0; i < 40; i++)
				await client.query(`SELECT ${i} AS n`);
			await client.query('COMMIT');
			assert.deepEqual(await serverSpans(many), ['BEGIN', ...Array(40).fill('SELECT'), 'COMMIT']);

			const rolledBack = newContext();
			await client.query(`SET traceprof.traceparent = '${rolledBack.header}'`);
			await client.query('BEGIN');
			await client.query('SELECT 1');
			await client.query('ROLLBACK');
			assert.deepEqual(await serverSpans(rolledBack), ['BEGIN', 'SELECT', 'ROLLBACK']);

			// Read while the failed block is still open: nothing waits for its end.
			const failed = newContext();
			await client.query(`SET traceprof.traceparent = '${failed.header}'`);
			await client.query('BEGIN');
			await client.query('SELECT 1');
			await assert.rejects(client.query('SELECT 1 / 0'), (e) => e.code === '22012');
			assert.deepEqual(await serverSpans(failed), ['BEGIN', 'SELECT', 'SELECT (error)']);
			await client.query('ROLLBACK');
		} finally {
			await client.end();
		}

		// Terminated while idle in the block: the spans of its statements stay.
		const idle = newContext();
		const victim = await connect(cluster, 'app');
		victim.on('error', () => {});
		const pid = (await victim.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
		await victim.query(`SET traceprof.traceparent = '${idle.header}'`);
		await victim.query('BEGIN');
		await victim.query('SELECT 1');
		await victim.query('SELECT 2');
		assert.equal((await admin.query('SELECT pg_terminate_backend($1, 10000) AS done', [pid])).rows[0].done, true);
		assert.deepEqual(await serverSpans(idle), ['BEGIN', 'SELECT', 'SELECT']);
		await victim.end().catch(() => {});
	});

	test('1f. texts are cut on a character boundary: a long multibyte statement (normalized where read, by the exporter too) and a long multibyte error message arrive as valid UTF-8', async () => {
		const max = Number((await admin.query("SELECT setting FROM pg_settings WHERE name = 'traceprof.max_query_length'")).rows[0].setting);
		// 100 literal tokens, each "$n" when read, so the normalized text outgrows
		// the cap; the alias's 2-, 3- and 4-byte characters under every shift of
		// the cut (0..8 bytes) put it inside a character at least once.
		const alias = (k) => `${'x'.repeat(k)}${'é€😀'.repeat(120)}`;
		const ones = Array(100).fill('1').join(', ');
		const params = Array.from({ length: 100 }, (_, i) => `$${i + 1}`).join(', ');
		const ctx = newContext();
		const client = await connect(cluster, 'app');
		try {
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			for (let k = 0; k <= 8; k++)
				await client.query(`SELECT ${ones} AS "${alias(k)}"`);
			await assert.rejects(client.query("DO $$BEGIN RAISE EXCEPTION '%', repeat('é', 200); END$$"));
		} finally {
			await client.end();
		}
		const spans = await waitFor('the 10 SERVER spans at the receiver', () => {
			const server = spansOf(receiver, ctx.traceId).filter((x) => x.kind === SpanKind.SERVER);
			return server.length >= 10 ? server : null;
		});
		const check = (where, text, k) => {
			const full = `SELECT ${params} AS "${alias(k)}"`;
			assert.ok(Buffer.byteLength(text) <= max && Buffer.byteLength(text) > max - 4,
				`${where}: ${Buffer.byteLength(text)} bytes, cap ${max}`);
			assert.ok(full.startsWith(text), `${where}: not a prefix of the normalized text: ...${JSON.stringify(text.slice(-6))}`);
		};
		const selects = spans.filter((x) => x.name === 'SELECT').sort((a, b) => (a.startTimeUnixNano < b.startTimeUnixNano ? -1 : 1));
		assert.equal(selects.length, 9);
		selects.forEach((x, k) => check(`OTLP span ${k}`, x.attributes['db.query.text'], k));
		const failed = spans.find((x) => x.name === 'DO');
		assert.equal(failed.status.code, StatusCode.ERROR);
		assert.equal(failed.status.message, 'é'.repeat(127), 'the message cut to 255 bytes before a character');

		const rows = (await admin.query("SELECT name, query, status_message FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time",
			[ctx.traceId])).rows;
		rows.slice(0, 9).forEach((r, k) => check(`traceprof.spans row ${k}`, r.query, k));
		assert.equal(rows[9].status_message, 'é'.repeat(127));
	});

	test('1g. texts of LATIN1 and SQL_ASCII databases: UTF-8 in OTLP and in a UTF-8 database\'s traceprof.spans and profiles, LATIN1 in a LATIN1 one; "?" for what cannot be converted', async () => {
		await admin.query("CREATE DATABASE enc_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0 OWNER app");
		await admin.query("CREATE DATABASE enc_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0 OWNER app");
		const latin = newContext();
		const ascii = newContext();
		const utf8 = newContext();
		const runTraced = async (database, ctx, statements) => {
			const client = await connect(cluster, 'app', database);
			try {
				for (const [sql, fails] of statements) {
					if (sql.startsWith('SET traceprof'))
						await client.query(sql.replace('CTX', ctx.header));
					else if (fails)
						await assert.rejects(client.query(sql));
					else
						await client.query(sql);
				}
			} finally {
				await client.end();
			}
		};
		const select = 'SELECT count("naïve") AS "Ölmenge" FROM "café"';
		// Under the cap in LATIN1, over it in UTF-8 (ï takes two bytes there).
		const max = Number((await admin.query("SELECT setting FROM pg_settings WHERE name = 'traceprof.max_query_length'")).rows[0].setting);
		const long = `SELECT ${Array(Math.floor((max - 30) / 9)).fill('"naïve"').join(', ')} FROM "café"`;
		assert.ok(Buffer.byteLength(long, 'latin1') < max && Buffer.byteLength(long) > max);
		await runTraced('enc_latin1', latin, [
			['CREATE TABLE "café" ("naïve" int)'],
			["SET traceprof.traceparent = 'CTX'"],
			[select],
			[long],
			// CPU enough for the sampler (100 Hz): a profile of "INSERT café".
			['INSERT INTO "café" SELECT g FROM generate_series(1, 1500000) g'],
			["DO $$BEGIN RAISE EXCEPTION 'déjà vu'; END$$", true],
		]);
		// Bytes E9 20 C3 A9: no UTF-8 (E9 leads three bytes), then an é that is;
		// SQL_ASCII takes any.
		await runTraced('enc_ascii', ascii, [
			["SET traceprof.traceparent = 'CTX'"],
			["DO $$BEGIN RAISE EXCEPTION '%', convert_from('\\xe920c3a9'::bytea, 'SQL_ASCII'); END$$", true],
		]);
		// A character LATIN1 lacks, for a reader there.
		await runTraced('app', utf8, [["SET traceprof.traceparent = 'CTX'"], ['SELECT 1 AS "€uro"']]);

		const server = (ctx, n) => waitFor(`${n} SERVER span(s) of trace ${ctx.traceId}`, () => {
			const spans = spansOf(receiver, ctx.traceId).filter((x) => x.kind === SpanKind.SERVER);
			return spans.length >= n ? spans : null;
		});
		const [latinSpans, asciiSpans, utf8Spans] = [await server(latin, 4), await server(ascii, 1), await server(utf8, 1)];
		for (const x of [...latinSpans, ...asciiSpans, ...utf8Spans])
			for (const v of [x.name, x.status.message ?? '', ...Object.values(x.attributes).map(String)])
				assert.ok(!v.includes('\uFFFD'), `span ${x.name}: not valid UTF-8 on the wire: ${JSON.stringify(v)}`);
		const latinSelect = latinSpans.find((x) => x.name === 'SELECT café');
		assert.ok(latinSelect, `LATIN1 spans: ${latinSpans.map((x) => x.name)}`);
		assert.equal(latinSelect.attributes['db.query.text'], select);
		assert.equal(latinSelect.attributes['db.collection.name'], 'café');
		assert.equal(latinSelect.attributes['db.namespace'], 'enc_latin1');
		const longText = latinSpans.filter((x) => x.name === 'SELECT café').map((x) => x.attributes['db.query.text']).find((t) => t !== select);
		assert.ok(Buffer.byteLength(longText) <= max && Buffer.byteLength(longText) > max - 2 && long.startsWith(longText),
			`converted, then cut to ${max} bytes on a character: ${Buffer.byteLength(longText)} bytes, ends ${JSON.stringify(longText.slice(-8))}`);
		assert.equal(latinSpans.find((x) => x.name === 'DO').status.message, 'déjà vu');
		assert.equal(asciiSpans[0].status.message, '? é');
		assert.equal(utf8Spans[0].attributes['db.query.text'], 'SELECT $1 AS "€uro"');

		// Read in a UTF-8 database: the same texts.
		const rows = async (client, ctx) => (await client.query(
			"SELECT name, status_message, query, attributes->>'db.collection.name' AS collection FROM traceprof.spans " +
			"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId])).rows;
		const inUtf8 = await rows(admin, latin);
		assert.deepEqual(inUtf8.map((r) => [r.name, r.status_message, r.collection]),
			[['SELECT café', null, 'café'], ['SELECT café', null, 'café'], ['INSERT café', null, 'café'], ['DO', 'déjà vu', null]]);
		assert.equal(inUtf8[1].query, longText);
		const profiled = async (client) => (await client.query('SELECT DISTINCT span_name FROM traceprof.profile($1)', [latin.traceId]))
			.rows.map((r) => r.span_name);
		assert.ok((await profiled(admin)).includes('INSERT café'), `profile span names: ${await profiled(admin)}`);
		assert.equal(inUtf8[0].query, select);
		assert.equal((await rows(admin, ascii))[0].status_message, '? é');

		// Read in the LATIN1 database: LATIN1's own texts back, € as "?".
		const inLatin = await connect(cluster, 'postgres', 'enc_latin1');
		try {
			await inLatin.query('CREATE EXTENSION traceprof');
			assert.deepEqual((await rows(inLatin, latin)).map((r) => [r.name, r.status_message, r.collection]),
				[['SELECT café', null, 'café'], ['SELECT café', null, 'café'], ['INSERT café', null, 'café'], ['DO', 'déjà vu', null]]);
			assert.ok((await profiled(inLatin)).includes('INSERT café'), `profile span names there: ${await profiled(inLatin)}`);
			const svg = (await inLatin.query('SELECT traceprof.flamegraph($1) AS svg', [latin.traceId])).rows[0].svg;
			assert.match(svg, /^<\?xml[^]*data-total="[1-9][^]*<\/svg>\s*$/, 'the flame graph of its samples, read there');
			assert.equal((await rows(inLatin, utf8))[0].query, 'SELECT $1 AS "?uro"');
		} finally {
			await inLatin.end();
		}
	});

	test('3. SQLCommenter through npm pg: extended and simple protocol, utility, errors; the comment wins over the session', async () => {
		const client = await connect(cluster, 'app');
		try {
			const comment = (ctx) => `/*db_driver='node-postgres%3A8',route='%2Forders',traceparent='${ctx.header}'*/`;

			// Extended protocol (Parse/Bind/Execute), no session context.
			const ext = newContext();
			const res = await client.query({ text: `SELECT id, note FROM orders_sc WHERE id = $1 ${comment(ext)}`, values: [2] });
			assert.deepEqual(res.rows, [{ id: 2, note: 'b' }]);

			// The session's traceprof.traceparent applies to uncommented
			// statements; a comment overrides it.
			const session = newContext();
			await client.query(`SET traceprof.traceparent = '${session.header}'`);
			const over = newContext();
			await client.query({ text: `SELECT note FROM orders_sc WHERE id = $1 ${comment(over)}`, values: [3] });
			await client.query({ text: 'SELECT count(*) AS from_session FROM orders_sc WHERE id > $1', values: [0] });

			// Simple protocol and a utility statement.
			const simple = newContext();
			await client.query(`SELECT count(*) AS simple FROM orders_sc ${comment(simple)}`);
			const utility = newContext();
			await client.query(`CREATE TABLE sc_made (id int) ${comment(utility)}`);

			// A failing parameterized statement.
			const failing = newContext();
			await assert.rejects(
				client.query({ text: `INSERT INTO orders_sc (id, note) VALUES ($1, $2) ${comment(failing)}`, values: [1, 'dup'] }),
				(e) => e.code === '23505');

			// Not sampled (flags 00): no span, even with a session context.
			const unsampled = newContext('00');
			const un = await client.query({ text: `SELECT $1::int AS unsampled ${comment(unsampled)}`, values: [7] });
			assert.equal(un.rows[0].unsampled, 7);
			await client.query(`SELECT 8 AS unsampled_simple ${comment(unsampled)}`);

			// Malformed: the statement runs, the session context applies.
			const before_ = await stats(admin);
			const bad = await client.query({ text: "SELECT $1::int AS malformed /*traceparent='00-zz'*/", values: [5] });
			assert.equal(bad.rows[0].malformed, 5);
			const after_ = await stats(admin);
			assert.ok(after_.malformed_contexts > before_.malformed_contexts,
				`malformed_contexts grows (${before_.malformed_contexts} -> ${after_.malformed_contexts})`);

			// A barrier: once it arrived, everything traced before it did too.
			const barrier = newContext();
			await client.query(`SELECT 1 AS barrier ${comment(barrier)}`);
			await waitForSpans(receiver, barrier.traceId, 2);

			const one = (ctx, what, pred = (s) => s.kind === SpanKind.SERVER) => {
				const spans = spansOf(receiver, ctx.traceId).filter(pred);
				assert.equal(spans.length, 1, `one SERVER span for ${what}:\n  ${dump(spansOf(receiver, ctx.traceId))}`);
				const s = spans[0];
				assert.equal(s.parentSpanId, ctx.spanId, `${what}: the parent is the comment's span id`);
				return s;
			};
			const e = one(ext, 'the extended-protocol query');
			assert.equal(e.attributes['db.query.text'], 'SELECT id, note FROM orders_sc WHERE id = $1',
				'the comment is not part of db.query.text');
			assert.equal(e.attributes['db.response.returned_rows'], 1);
			assert.equal(spansOf(receiver, ext.traceId).filter((s) => s.name === 'plan' && s.parentSpanId === e.spanId).length, 1,
				'the extended-protocol statement has its plan span');

			one(over, 'the commented query in a session with traceprof.traceparent');
			const fromSession = spansOf(receiver, session.traceId).filter((s) => s.kind === SpanKind.SERVER);
			assert.ok(fromSession.some((s) => /from_session/.test(s.attributes['db.query.text'])),
				`the uncommented query joins the session's trace:\n  ${dump(fromSession)}`);
			assert.ok(fromSession.every((s) => s.parentSpanId === session.spanId));
			assert.ok(!fromSession.some((s) => /note FROM orders_sc WHERE id/.test(s.attributes['db.query.text'])),
				'the commented query did not also land in the session trace');

			const sp = one(simple, 'the simple-protocol statement');
			assert.equal(sp.attributes['db.query.text'], 'SELECT count(*) AS simple FROM orders_sc');
			const u = one(utility, 'the utility statement');
			assert.equal(u.name, 'CREATE TABLE sc_made');

			const f = one(failing, 'the failing parameterized statement');
			assert.equal(f.status.code, StatusCode.ERROR);
			assert.equal(f.attributes['db.response.status_code'], '23505');
			assert.match(f.status.message, /duplicate key value violates unique constraint "orders_sc_pkey"/);

			assert.deepEqual(spansOf(receiver, unsampled.traceId).map(summary), [], 'flags 00: no span exported');
			const local = await admin.query('SELECT count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1', [unsampled.traceId]);
			assert.equal(local.rows[0].n, 0, 'flags 00: no span in traceprof.spans');
			assert.ok(!fromSession.some((s) => /unsampled/.test(s.attributes['db.query.text'])),
				'an unsampled comment is not replaced by the session context');
			assert.ok(fromSession.some((s) => /AS malformed/.test(s.attributes['db.query.text'])),
				`a malformed comment falls back to the session context:\n  ${dump(fromSession)}`);
		} finally {
			await client.end();
		}
	});

	test('3b. a malformed SQLCommenter traceparent is counted exactly once per statement and never errors', async () => {
		const client = await connect(cluster, 'app');
		try {
			const statements = [
				['simple SELECT', () => client.query("SELECT 1 AS m1 /*traceparent='00-zz'*/")],
				['extended SELECT', () => client.query({ text: "SELECT $1::int AS m2 /*traceparent='00-zz'*/", values: [1] })],
				['uppercase ids', () => client.query(`SELECT 3 AS m3 /*traceparent='00-${hex(16).slice(1)}A-${hex(8)}-01'*/`)],
				['utility', () => client.query("CREATE TABLE malformed_t (id int) /*traceparent='garbage'*/")],
				['INSERT', () => client.query({ text: "INSERT INTO malformed_t VALUES ($1) /*traceparent='00-zz'*/", values: [1] })],
			];
			const counts = [];
			for (const [what, q] of statements) {
				const before_ = (await stats(admin)).malformed_contexts;
				await q();
				const after_ = (await stats(admin)).malformed_contexts;
				counts.push(`${what}: +${after_ - before_}`);
			}
			assert.deepEqual(counts, statements.map(([what]) => `${what}: +1`),
				'traceprof.stats.malformed_contexts grows by one per statement with a malformed comment');
		} finally {
			await client.end();
		}
	});

	test('3w. a comment opening the statement (sqlcommenters told to prepend it) through npm pg: extended and simple protocol, utility, failing; the ending one wins', async () => {
		const client = await connect(cluster, 'app');
		try {
			const comment = (ctx) => `/*db_driver='node-postgres%3A8',traceparent='${ctx.header}'*/`;
			const ext = newContext();
			const res = await client.query({ text: `${comment(ext)} SELECT id, note FROM orders_sc WHERE id = $1`, values: [2] });
			assert.deepEqual(res.rows, [{ id: 2, note: 'b' }]);
			const simple = newContext();
			await client.query(`${comment(simple)}\nSELECT count(*) AS leading_simple FROM orders_sc`);
			const utility = newContext();
			await client.query(`${comment(utility)} CREATE TABLE sc_leading (id int)`);
			const failing = newContext();
			await assert.rejects(
				client.query({ text: `${comment(failing)} INSERT INTO orders_sc (id, note) VALUES ($1, $2)`, values: [1, 'dup'] }),
				(e) => e.code === '23505');
			// Both ends: the ending comment is sqlcommenter's place, and wins.
			const leading = newContext();
			const ending = newContext();
			await client.query({ text: `${comment(leading)} SELECT $1::int AS both_ends ${comment(ending)}`, values: [4] });
			// A malformed one is counted once, as at the end.
			const before_ = (await stats(admin)).malformed_contexts;
			await client.query({ text: "/*traceparent='00-zz'*/ SELECT $1::int AS malformed_leading", values: [5] });
			assert.equal((await stats(admin)).malformed_contexts, before_ + 1, 'a malformed leading comment is counted once');

			await waitForSpans(receiver, ending.traceId, 1);
			await waitForSpans(receiver, failing.traceId, 1);
			const server = (ctx, what) => {
				const spans = spansOf(receiver, ctx.traceId).filter((s) => s.kind === SpanKind.SERVER);
				assert.equal(spans.length, 1, `one SERVER span for ${what}:\n  ${dump(spansOf(receiver, ctx.traceId))}`);
				assert.equal(spans[0].parentSpanId, ctx.spanId, `${what}: the parent is the comment's span id`);
				assert.ok(!/traceparent|\/\*/.test(spans[0].attributes['db.query.text']),
					`${what}: the comment is not part of db.query.text: ${spans[0].attributes['db.query.text']}`);
				return spans[0];
			};
			const e = server(ext, 'the extended-protocol query');
			assert.equal(e.attributes['db.query.text'], 'SELECT id, note FROM orders_sc WHERE id = $1');
			assert.equal(spansOf(receiver, ext.traceId).filter((s) => s.name === 'plan' && s.parentSpanId === e.spanId).length, 1,
				'the extended-protocol statement has its plan span');
			assert.equal(server(simple, 'the simple-protocol statement').attributes['db.query.text'],
				'SELECT count(*) AS leading_simple FROM orders_sc');
			assert.equal(server(utility, 'the utility statement').name, 'CREATE TABLE sc_leading');
			const f = server(failing, 'the failing parameterized statement');
			assert.equal(f.status.code, StatusCode.ERROR);
			assert.equal(f.attributes['db.response.status_code'], '23505');
			server(ending, 'the statement with a comment at both ends');
			assert.deepEqual(spansOf(receiver, leading.traceId).map(summary), [],
				'the leading comment of a statement whose ending comment has a traceparent makes no span');
		} finally {
			await client.end();
		}
	});

	test('3v. tracestate rides with its traceparent: a comment\'s (extended and simple protocol, failing) or traceprof.tracestate\'s, exported as Span.trace_state', async () => {
		// Before, it was dropped: vendors' entries and sampling thresholds stopped at the server.
		const client = await connect(cluster, 'app');
		try {
			const comment = (ctx, state) => `/*traceparent='${ctx.header}',tracestate='${encodeURIComponent(state)}'*/`;
			const ext = newContext();
			await client.query({ text: `SELECT $1::int AS ts1 ${comment(ext, 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7')}`, values: [1] });
			const simple = newContext();
			await client.query(`SELECT 2 AS ts2 ${comment(simple, 'ot=th:8')}`);
			const failing = newContext();
			await assert.rejects(client.query({ text: `SELECT 1 / $1::int AS ts3 ${comment(failing, 'vendor@sys=x')}`, values: [0] }),
				(e) => e.code === '22012');
			const session = newContext();
			await client.query("SET traceprof.tracestate = 'rojo=1'");
			await client.query(`SET traceprof.traceparent = '${session.header}'`);
			await client.query('SELECT 4 AS ts4');
			await client.query("SET traceprof.traceparent = ''");
			await client.query("SET traceprof.tracestate = ''");

			const expected = [[ext, 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'], [simple, 'ot=th:8'],
				[failing, 'vendor@sys=x'], [session, 'rojo=1']];
			for (const [ctx, state] of expected) {
				const spans = await waitForSpans(receiver, ctx.traceId, 1);
				for (const s of spans)
					assert.equal(s.traceState, state, `${s.name} of trace ${ctx.traceId}`);
			}
			const rows = (await admin.query('SELECT trace_id, trace_state FROM traceprof.spans WHERE trace_id = ANY($1)',
				[expected.map(([ctx]) => ctx.traceId)])).rows;
			for (const [ctx, state] of expected) {
				const states = rows.filter((r) => r.trace_id === ctx.traceId).map((r) => r.trace_state);
				assert.ok(states.length > 0 && states.every((s) => s === state), `traceprof.spans of ${ctx.traceId}: ${states}`);
			}
		} finally {
			await client.end();
		}
	});

	test('3c. statements that fail before running (Parse, Bind, an aborted block) through npm pg: error spans of their caller, exported', async () => {
		const client = await connect(cluster, 'app');
		try {
			const comment = (ctx) => `/*traceparent='${ctx.header}'*/`;
			const parse = newContext();
			await assert.rejects(client.query({ text: `SELEC $1::int ${comment(parse)}`, values: [1] }),
				(e) => e.code === '42601');
			const bind = newContext();
			await assert.rejects(client.query({ text: `SELECT $1::int AS n ${comment(bind)}`, values: ['not a number'] }),
				(e) => e.code === '22P02');
			const analysis = newContext();
			await assert.rejects(client.query({ text: `SELECT * FROM no_such_table WHERE id = $1 ${comment(analysis)}`, values: [1] }),
				(e) => e.code === '42P01');
			const aborted = newContext();
			await client.query('BEGIN');
			await assert.rejects(client.query('SELECT 1 / 0'), (e) => e.code === '22012');
			await assert.rejects(client.query({ text: `SELECT $1::int AS refused ${comment(aborted)}`, values: [1] }),
				(e) => e.code === '25P02');
			await client.query('ROLLBACK');

			for (const [ctx, sqlstate, text, message] of [
				[parse, '42601', 'SELEC $1::int', /syntax error at or near "SELEC"/],
				[bind, '22P02', 'SELECT $1::int AS n', /invalid input syntax for type integer/],
				[analysis, '42P01', 'SELECT * FROM no_such_table WHERE id = $1', /relation "no_such_table" does not exist/],
				[aborted, '25P02', 'SELECT $1::int AS refused', /current transaction is aborted/],
			]) {
				const [span] = await waitForSpans(receiver, ctx.traceId, 1);
				await sleep(3 * EXPORT_INTERVAL_MS);
				const all = spansOf(receiver, ctx.traceId);
				assert.equal(all.length, 1, `one span for the ${sqlstate} failure:\n  ${dump(all)}`);
				assert.equal(span.kind, SpanKind.SERVER);
				assert.equal(span.name, 'postgresql', 'no operation is known: the span is named after db.system.name');
				assert.equal(span.parentSpanId, ctx.spanId, 'the comment\'s span is the parent');
				assert.equal(span.status.code, StatusCode.ERROR);
				assert.match(span.status.message, message);
				assert.equal(span.attributes['db.response.status_code'], sqlstate);
				assert.equal(span.attributes['db.query.text'], text, 'the text without its comment');
				assert.ok(span.startTimeUnixNano <= span.endTimeUnixNano);
			}
		} finally {
			await client.end();
		}
	});

	test('3d. a SELECT whose portal stays open in a transaction block (extended protocol) ends when it ran, not when the next Bind drops it', async () => {
		const client = await connect(cluster, 'app');
		const PAUSE_MS = 600;
		try {
			const ctx = newContext();
			await client.query('BEGIN');
			await client.query({ text: `SELECT id FROM orders_sc WHERE id = $1 /*traceparent='${ctx.header}'*/`, values: [1] });
			await sleep(PAUSE_MS);
			await client.query({ text: 'SELECT $1::int AS next', values: [2] });
			await client.query('COMMIT');
			const spans = await waitForSpans(receiver, ctx.traceId, 2);
			const select = spans.find((x) => x.kind === SpanKind.SERVER);
			assert.ok(durationMs(select) < PAUSE_MS / 2,
				`the SELECT took ${durationMs(select).toFixed(1)} ms: its span must not include the client's ${PAUSE_MS} ms pause`);
			assert.equal(select.attributes['db.response.returned_rows'], 1);
		} finally {
			await client.end();
		}
	});

	test('3e. a named portal kept after its last page is not failed by a later error of its transaction, and ends with that page', async () => {
		const { Query } = require('pg');
		const client = await connect(cluster, 'app');
		const PAUSE_MS = 600;
		try {
			const ctx = newContext();
			await client.query('BEGIN');
			// rows: 1 fetches page by page (Execute with a row limit) from the portal "kept".
			const rows = await new Promise((resolve, reject) => {
				const got = [];
				const q = client.query(new Query({ text: `SELECT g FROM generate_series(1, 3) g /*traceparent='${ctx.header}'*/`,
					portal: 'kept', rows: 1 }));
				q.on('row', (r) => got.push(r.g));
				q.on('end', () => resolve(got));
				q.on('error', reject);
			});
			assert.deepEqual(rows, [1, 2, 3]);
			await sleep(PAUSE_MS);
			await assert.rejects(client.query('SELECT 1 / 0 AS later'), (e) => e.code === '22012');
			await client.query('ROLLBACK');
			const select = (await waitForSpans(receiver, ctx.traceId, 2)).find((x) => x.kind === SpanKind.SERVER);
			assert.notEqual(select.status.code, StatusCode.ERROR,
				`the SELECT did not fail (${select.status.message}): a later statement did`);
			assert.equal(select.attributes['db.response.returned_rows'], 3);
			assert.ok(durationMs(select) < PAUSE_MS / 2, `the SELECT's span ends with its last page (${durationMs(select).toFixed(1)} ms)`);
		} finally {
			await client.end();
		}
	});

	test('3f. two named portals read in turns: the older one ends with its page, not its Close; the newer one\'s span stays open for all its pages', async () => {
		const wire = await connectWire(cluster);
		const PAUSE_MS = 400;
		try {
			const older = newContext();
			const newer = newContext();
			const open = (portal, ctx) => wire.send(
				serialize.parse({ text: `SELECT g FROM generate_series(1, 3) g /*traceparent='${ctx.header}'*/` }),
				serialize.bind({ portal }), serialize.execute({ portal, rows: 1 }), serialize.sync());
			const rowsOf = (messages) => messages.filter((m) => m.name === 'dataRow').length;
			await wire.query('BEGIN');
			open('older', older);
			assert.equal(rowsOf(await wire.until('readyForQuery')), 1);
			open('newer', newer);
			assert.equal(rowsOf(await wire.until('readyForQuery')), 1);
			// The older portal is closed first, a pause after its page: its span
			// ends with that page; the newer one's must not end at all.
			await sleep(PAUSE_MS);
			wire.send(serialize.close({ type: 'P', name: 'older' }), serialize.sync());
			await wire.until('readyForQuery');
			await sleep(PAUSE_MS);
			wire.send(serialize.execute({ portal: 'newer', rows: 0 }), serialize.sync());
			assert.equal(rowsOf(await wire.until('readyForQuery')), 2, 'the newer portal\'s last two rows');
			await wire.query('COMMIT');

			const olderSpan = await waitForServerSpan(receiver, older);
			const newerSpan = await waitForServerSpan(receiver, newer);
			assert.equal(olderSpan.attributes['db.response.returned_rows'], 1, 'the older portal sent one page of one row');
			assert.equal(newerSpan.attributes['db.response.returned_rows'], 3,
				'the newer portal\'s span counts the pages read after the older one closed');
			assert.ok(durationMs(olderSpan) < PAUSE_MS / 2,
				`the older span ends with its page, not at its Close (${durationMs(olderSpan).toFixed(1)} ms)`);
			assert.ok(durationMs(newerSpan) >= 2 * PAUSE_MS,
				`the newer span ends with its last page, after both pauses (${durationMs(newerSpan).toFixed(1)} ms)`);
			assert.notEqual(newerSpan.status.code, StatusCode.ERROR);
		} finally {
			wire.end();
		}
	});

	test('3g. a traced portal from before a savepoint, closed inside it: a statement failing there still ends at its error, with it', async () => {
		const wire = await connectWire(cluster);
		const PAUSE_MS = 400;
		try {
			const ctx = newContext();
			const portalCtx = newContext();
			await wire.query('BEGIN');
			wire.send(serialize.parse({ text: `SELECT g FROM generate_series(1, 3) g /*traceparent='${portalCtx.header}'*/` }),
				serialize.bind({ portal: 'before' }), serialize.execute({ portal: 'before', rows: 1 }), serialize.sync());
			await wire.until('readyForQuery');
			await wire.query('SAVEPOINT s');
			wire.send(serialize.close({ type: 'P', name: 'before' }), serialize.sync());
			await wire.until('readyForQuery');
			await assert.rejects(wire.query(`SELECT 1 / 0 AS inside /*traceparent='${ctx.header}'*/`), (e) => e.code === '22012');
			await wire.until('readyForQuery');
			await sleep(PAUSE_MS);
			await wire.query('ROLLBACK TO s');
			await wire.query('COMMIT');
			const failed = await waitForServerSpan(receiver, ctx);
			assert.equal(failed.status.code, StatusCode.ERROR);
			assert.equal(failed.attributes['db.response.status_code'], '22012', failed.status.message);
			assert.ok(durationMs(failed) < PAUSE_MS / 2,
				`it ended at its error, not at the ROLLBACK TO or the COMMIT (${durationMs(failed).toFixed(1)} ms)`);
		} finally {
			wire.end();
		}
	});

	test('3h. a deferred foreign key failing at a Sync\'s implicit commit (extended protocol): an error span beside its statement, with its text', async () => {
		const client = await connect(cluster, 'app');
		try {
			await client.query('CREATE TABLE deferred_parent (id int PRIMARY KEY)');
			await client.query('CREATE TABLE deferred_child (parent int REFERENCES deferred_parent DEFERRABLE INITIALLY DEFERRED)');
			const ctx = newContext();
			// npm pg sends Parse, Bind, Describe, Execute, Sync: the INSERT runs
			// well in its Execute, the check fails when the Sync commits.
			await assert.rejects(client.query({ text: `INSERT INTO deferred_child VALUES ($1) /*traceparent='${ctx.header}'*/`, values: [42] }),
				(e) => e.code === '23503');
			await waitForSpans(receiver, ctx.traceId, 2);
			await sleep(3 * EXPORT_INTERVAL_MS);
			const server = spansOf(receiver, ctx.traceId).filter((x) => x.kind === SpanKind.SERVER);
			const insert = server.find((x) => x.name === 'INSERT deferred_child');
			const failed = server.find((x) => x.name === 'postgresql');
			assert.equal(server.length, 2, `the INSERT and its commit's failure:\n  ${dump(server)}`);
			assert.ok(insert && failed, dump(server));
			assert.equal(insert.status.code, StatusCode.UNSET, 'the INSERT itself ran well');
			assert.equal(failed.status.code, StatusCode.ERROR);
			assert.match(failed.status.message, /violates foreign key constraint/);
			assert.equal(failed.attributes['db.response.status_code'], '23503');
			assert.equal(failed.parentSpanId, ctx.spanId, 'beside the INSERT, under its caller\'s span');
			assert.notEqual(failed.spanId, insert.spanId);
			assert.equal(failed.attributes['db.query.text'], 'INSERT INTO deferred_child VALUES ($1)', 'the statement\'s text');
			assert.ok(failed.startTimeUnixNano >= insert.endTimeUnixNano && failed.startTimeUnixNano <= failed.endTimeUnixNano,
				'the commit follows the statement');

			// The next transaction's failing commit, untraced, is nobody's.
			const before = await stats(client);
			await assert.rejects(client.query({ text: 'INSERT INTO deferred_child VALUES ($1)', values: [43] }),
				(e) => e.code === '23503');
			const after = await stats(client);
			assert.equal(after.spans_created, before.spans_created, 'no span for an untraced transaction\'s commit');

			// A statement that began its own trace (traceprof.sample_rate, a
			// superuser's setting): the failure is its child, so the trace
			// keeps one root.
			const text = 'INSERT INTO deferred_child (parent) VALUES ($1)';
			await admin.query('SET traceprof.sample_rate = 1');
			try {
				await assert.rejects(admin.query({ text, values: [44] }), (e) => e.code === '23503');
			} finally {
				await admin.query('RESET traceprof.sample_rate');
			}
			const rows = (await admin.query('SELECT name, trace_id, span_id, parent_span_id, status FROM traceprof.spans ' +
				'WHERE query = $1 ORDER BY start_time', [text])).rows;
			assert.deepEqual(rows.map((r) => [r.name, r.status]), [['INSERT deferred_child', 'unset'], ['postgresql', 'error']],
				jsonish(rows));
			assert.equal(rows[0].parent_span_id, null, 'the INSERT is its trace\'s root');
			assert.equal(rows[1].parent_span_id, rows[0].span_id, 'the commit\'s failure is its child');
			assert.equal(rows[1].trace_id, rows[0].trace_id);
		} finally {
			await client.query('DROP TABLE IF EXISTS deferred_child, deferred_parent');
			await client.end();
		}
	});

	test('3i. portals read in turns before a Sync whose commit fails: the failure goes to the statement that ended last, wherever it stood in the stack', async () => {
		const wire = await connectWire(cluster);
		try {
			await wire.query('CREATE TABLE deferred_p2 (id int PRIMARY KEY); ' +
				'CREATE TABLE deferred_c2 (parent int REFERENCES deferred_p2 DEFERRABLE INITIALLY DEFERRED)');
			const [older, insert, newer] = [newContext(), newContext(), newContext()];
			const comment = (ctx) => `/*traceparent='${ctx.header}'*/`;
			// One implicit transaction up to the Sync: portal "older" opens,
			// the INSERT runs (its check deferred), portal "newer" opens above
			// "older", then both are closed, the older first.
			wire.send(
				serialize.parse({ name: 'older', text: `SELECT g FROM generate_series(1, 3) g ${comment(older)}` }),
				serialize.bind({ statement: 'older', portal: 'older' }), serialize.execute({ portal: 'older', rows: 1 }),
				serialize.parse({ text: `INSERT INTO deferred_c2 VALUES (42) ${comment(insert)}` }),
				serialize.bind({}), serialize.execute({}),
				serialize.parse({ name: 'newer', text: `SELECT g FROM generate_series(1, 4) g ${comment(newer)}` }),
				serialize.bind({ statement: 'newer', portal: 'newer' }), serialize.execute({ portal: 'newer', rows: 1 }),
				serialize.close({ type: 'P', name: 'older' }), serialize.close({ type: 'P', name: 'newer' }),
				serialize.sync());
			await assert.rejects(wire.until('readyForQuery'), (e) => e.code === '23503');
			await wire.until('readyForQuery');
			const traces = [older, insert, newer];
			const failed = await waitFor('the commit\'s failure span', () => traces
				.flatMap((ctx) => spansOf(receiver, ctx.traceId)).find((x) => x.name === 'postgresql'));
			const context = `\n  ${dump(traces.flatMap((ctx) => spansOf(receiver, ctx.traceId)))}`;
			assert.equal(failed.traceId, newer.traceId, `the statement that ended last is "newer"${context}`);
			assert.equal(failed.parentSpanId, newer.spanId, context);
			assert.match(failed.attributes['db.query.text'], /generate_series\(\$1, \$2\)/);
			assert.equal(failed.attributes['db.response.status_code'], '23503');
		} finally {
			await wire.query('DROP TABLE IF EXISTS deferred_c2, deferred_p2');
			wire.end();
		}
	});

	test('3o. a kept portal\'s span counts the buffers and WAL of its own runs, not of statements run before its Close; unused Binds\' spans end with their planning', async () => {
		const wire = await connectWire(cluster, 'app');
		const PAUSE_MS = 400;
		try {
			const kept = newContext();
			const unused = newContext();
			const unusedSelect = newContext();
			await wire.query('CREATE TABLE busy_3o (n int)');
			await wire.query('BEGIN');
			wire.send(serialize.parse({ text: `SELECT 1 AS one /*traceparent='${kept.header}'*/` }),
				serialize.bind({ portal: 'kept' }), serialize.execute({ portal: 'kept', rows: 0 }), serialize.sync());
			await wire.until('readyForQuery');
			// Another statement's work while the portal stays open: WAL and buffers.
			await wire.query('INSERT INTO busy_3o SELECT g FROM generate_series(1, 5000) g');
			wire.send(serialize.close({ type: 'P', name: 'kept' }), serialize.sync());
			await wire.until('readyForQuery');
			// Planned at Bind, never executed: the next statement's planning
			// closes it.  A SELECT's executor starts at Bind: its portal's drop does.
			wire.send(serialize.parse({ text: `UPDATE busy_3o SET n = n WHERE false /*traceparent='${unused.header}'*/` }),
				serialize.bind({}), serialize.sync());
			await wire.until('readyForQuery');
			await sleep(PAUSE_MS);
			wire.send(serialize.parse({ text: `SELECT n FROM busy_3o /*traceparent='${unusedSelect.header}'*/` }),
				serialize.bind({}), serialize.sync());
			await wire.until('readyForQuery');
			await sleep(PAUSE_MS);
			await wire.query('SELECT 2 AS next');
			await wire.query('COMMIT');

			const keptSpan = await waitForServerSpan(receiver, kept);
			assert.equal(keptSpan.attributes['traceprof.wal_bytes'], 0, 'a SELECT 1 writes no WAL: the INSERT\'s is not its own');
			assert.ok(keptSpan.attributes['traceprof.shared_blks_hit'] < 50,
				`the INSERT's buffers are not its own: ${keptSpan.attributes['traceprof.shared_blks_hit']}`);
			const unusedSpan = await waitForServerSpan(receiver, unused);
			assert.equal(unusedSpan.name, 'UPDATE busy_3o');
			assert.ok(durationMs(unusedSpan) < PAUSE_MS / 2,
				`it ends with its planning, not when the next statement planned (${durationMs(unusedSpan).toFixed(1)} ms)`);
			assert.notEqual(unusedSpan.status.code, StatusCode.ERROR);
			const selectSpan = await waitForServerSpan(receiver, unusedSelect);
			assert.equal(selectSpan.name, 'SELECT busy_3o');
			assert.ok(durationMs(selectSpan) < PAUSE_MS / 2,
				`it ends with its planning, not when its portal was dropped (${durationMs(selectSpan).toFixed(1)} ms)`);
			assert.equal(selectSpan.attributes['traceprof.wal_bytes'], 0);
		} finally {
			await wire.query('ROLLBACK').catch(() => {});
			await wire.query('DROP TABLE IF EXISTS busy_3o').catch(() => {});
			wire.end();
		}
	});

	test('3s. a Sync\'s failed commit stays the last traced statement\'s whatever messages follow it; a Bind of a cached plan never executed takes no later error', async () => {
		const wire = await connectWire(cluster);
		const serverSpans = async (ctx) => (await admin.query(
			'SELECT name, status, query FROM traceprof.spans WHERE trace_id = $1 AND kind = \'server\' ORDER BY start_time',
			[ctx.traceId])).rows.map((r) => [r.name, r.status, r.query]);
		const syncFails = async (...messages) => {
			wire.send(...messages, serialize.sync());
			await assert.rejects(wire.until('readyForQuery'), (e) => e.code === '23503' || e.code === '22021');
			await wire.until('readyForQuery');
		};
		try {
			await wire.query('CREATE TABLE deferred_p4 (id int PRIMARY KEY); ' +
				'CREATE TABLE deferred_c4 (parent int REFERENCES deferred_p4 DEFERRABLE INITIALLY DEFERRED); ' +
				'CREATE FUNCTION bad_bytes() RETURNS trigger LANGUAGE plpgsql AS ' +
				"$$BEGIN PERFORM convert_from('\\xff'::bytea, 'UTF8'); RETURN NULL; END$$; " +
				'CREATE CONSTRAINT TRIGGER bad_bytes AFTER INSERT ON deferred_p4 INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION bad_bytes()');
			// Its generic plan cached: a Bind plans nothing, the executor starts there.
			wire.send(serialize.parse({ name: 'cached', text: 'SELECT id FROM deferred_p4 WHERE id > $1' }), serialize.sync());
			await wire.until('readyForQuery');
			for (let i = 0; i < 6; i++) {
				wire.send(serialize.bind({ statement: 'cached', values: ['1'] }), serialize.execute({}), serialize.sync());
				await wire.until('readyForQuery');
			}
			const insertText = 'INSERT INTO deferred_c4 VALUES ($1)';

			// The INSERT traced by its comment; an untraced Parse before the Sync.
			const byComment = newContext();
			await syncFails(serialize.parse({ text: `INSERT INTO deferred_c4 VALUES (42) /*traceparent='${byComment.header}'*/` }),
				serialize.bind({}), serialize.execute({}), serialize.parse({ text: 'SELECT 2' }));
			// The session's context; a statement whose comment is not sampled runs before the Sync.
			const session = newContext();
			const unsampled = `00-${newContext().traceId}-${newContext().spanId}-00`;
			await wire.query(`SET traceprof.traceparent = '${session.header}'`);
			await syncFails(serialize.parse({ text: 'INSERT INTO deferred_c4 VALUES (43)' }), serialize.bind({}), serialize.execute({}),
				serialize.parse({ text: `SELECT 2 /*traceparent='${unsampled}'*/` }), serialize.bind({}), serialize.execute({}));
			// A deferred trigger failing at the commit as a message can fail
			// before its text is known (bytes not UTF-8): still the commit's.
			const converting = newContext();
			await wire.query(`SET traceprof.traceparent = '${converting.header}'`);
			await syncFails(serialize.parse({ text: 'INSERT INTO deferred_p4 VALUES (44)' }), serialize.bind({}), serialize.execute({}));
			await wire.query("SET traceprof.traceparent = ''");
			await wire.query('DROP TRIGGER bad_bytes ON deferred_p4; DROP FUNCTION bad_bytes()');
			for (const ctx of [byComment, session])
				assert.deepEqual(await serverSpans(ctx), [['INSERT deferred_c4', 'unset', insertText], ['postgresql', 'error', insertText]]);
			assert.deepEqual(await serverSpans(converting), [['INSERT deferred_p4', 'unset', 'INSERT INTO deferred_p4 VALUES ($1)'],
				['postgresql', 'error', 'INSERT INTO deferred_p4 VALUES ($1)']]);

			// A portal of the cached plan, bound and never executed, while
			// the block fails, and while it is rolled back.
			const failing = newContext();
			await wire.query(`SET traceprof.traceparent = '${failing.header}'`);
			await wire.query('BEGIN');
			wire.send(serialize.bind({ statement: 'cached', portal: 'p', values: ['1'] }), serialize.sync());
			await wire.until('readyForQuery');
			await assert.rejects(wire.query('SELECT 1 / 0'), (e) => e.code === '22012');
			await wire.until('readyForQuery');
			await wire.query('ROLLBACK');
			const rolledBack = newContext();
			await wire.query(`SET traceprof.traceparent = '${rolledBack.header}'`);
			await wire.query('BEGIN');
			wire.send(serialize.bind({ statement: 'cached', portal: 'p', values: ['1'] }), serialize.sync());
			await wire.until('readyForQuery');
			await wire.query('ROLLBACK');
			await wire.query("SET traceprof.traceparent = ''");
			const portal = ['SELECT deferred_p4', 'unset', 'SELECT id FROM deferred_p4 WHERE id > $1'];
			assert.deepEqual(await serverSpans(failing), [['BEGIN', 'unset', 'BEGIN'], portal,
				['SELECT', 'error', 'SELECT $1 / $2'], ['ROLLBACK', 'unset', 'ROLLBACK']]);
			assert.deepEqual(await serverSpans(rolledBack), [['BEGIN', 'unset', 'BEGIN'], portal, ['ROLLBACK', 'unset', 'ROLLBACK']]);
		} finally {
			await wire.query('DROP TABLE IF EXISTS deferred_c4, deferred_p4');
			wire.end();
		}
	});

	test('3t. in a transaction block, messages that fail with no text are spans of their own (an Execute or Describe refused, a fast-path call), not the last statement\'s commit', async () => {
		const wire = await connectWire(cluster);
		const ctx = newContext();
		// A fast-path call is answered with its ReadyForQuery: no Sync.
		const refused = async (code, message, sync = true) => {
			wire.send(message, ...(sync ? [serialize.sync()] : []));
			await assert.rejects(wire.until('readyForQuery'), (e) => e.code === code);
			await wire.until('readyForQuery');
		};
		// A fast-path call of lo_open (oid 952) on a large object that does not exist.
		const fastPath = () => {
			const body = Buffer.alloc(4 + 2 + 2 + 2 + 2 * 8 + 2);
			let at = body.writeInt32BE(952, 0);
			at = body.writeInt16BE(1, at);	// one format code for all arguments
			at = body.writeInt16BE(1, at);	// binary
			at = body.writeInt16BE(2, at);
			for (const v of [999999, 0x40000]) {
				at = body.writeInt32BE(4, at);
				at = body.writeInt32BE(v, at);
			}
			body.writeInt16BE(1, at);
			const head = Buffer.alloc(5);
			head.write('F', 0);
			head.writeInt32BE(4 + body.length, 1);
			return Buffer.concat([head, body]);
		};
		try {
			wire.send(serialize.parse({ name: 'known', text: 'SELECT 1 AS known' }), serialize.sync());
			await wire.until('readyForQuery');
			await wire.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await wire.query('BEGIN');
			await wire.query('SELECT 2 AS before_them');
			await refused('34000', serialize.execute({ portal: 'nope' }));
			await wire.query('ROLLBACK');
			await wire.query('BEGIN');
			await wire.query('SELECT 2 AS before_them');
			await refused('42704', fastPath(), false);
			await wire.query('ROLLBACK');
			await wire.query('BEGIN');
			await assert.rejects(wire.query('SELECT 1 / 0'), (e) => e.code === '22012');
			await wire.until('readyForQuery');
			await refused('25P02', serialize.describe({ type: 'S', name: 'known' }));
			await wire.query('ROLLBACK');
			await wire.query("SET traceprof.traceparent = ''");
		} finally {
			wire.end();
		}
		const { rows } = await admin.query('SELECT name, status, status_message, query FROM traceprof.spans ' +
			"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId]);
		const block = [['BEGIN', 'unset', 'BEGIN'], ['SELECT', 'unset', 'SELECT $1 AS before_them'],
			['postgresql', 'error', null], ['ROLLBACK', 'unset', 'ROLLBACK']];
		assert.deepEqual(rows.map((r) => [r.name, r.status, r.query]), [
			...block, ...block,
			['BEGIN', 'unset', 'BEGIN'], ['SELECT', 'error', 'SELECT $1 / $2'], ['postgresql', 'error', null], ['ROLLBACK', 'unset', 'ROLLBACK']],
			JSON.stringify(rows, null, 1));
		assert.match(rows[2].status_message, /portal "nope" does not exist/);
		assert.match(rows[6].status_message, /large object 999999 does not exist/);
		assert.match(rows[10].status_message, /current transaction is aborted/);
	});

	test('3u. a Sync\'s commit failing after a SET ROLE in its transaction: the failure\'s span is the login role\'s, not the role switched to, who may not read it', async () => {
		const wire = await connectWire(cluster);
		const ctx = newContext();
		const comment = `/*traceparent='${ctx.header}'*/`;
		const step = (text) => [serialize.parse({ text: `${text} ${comment}` }), serialize.bind({}), serialize.execute({})];
		try {
			await wire.query('CREATE ROLE tenant_3u LOGIN; CREATE TABLE deferred_p5 (id int PRIMARY KEY); ' +
				'CREATE TABLE deferred_c5 (parent int REFERENCES deferred_p5 DEFERRABLE INITIALLY DEFERRED)');
			// One implicit transaction: the login role's INSERT, then the tenant's statement; the Sync's commit fails.
			wire.send(...step('INSERT INTO deferred_c5 VALUES (42)'), ...step('SET ROLE tenant_3u'),
				...step('SELECT 1 AS tenant_work'), serialize.sync());
			await assert.rejects(wire.until('readyForQuery'), (e) => e.code === '23503');
			await wire.until('readyForQuery');
			const query = 'SELECT name, username, status_message, query FROM traceprof.spans ' +
				"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time";
			const all = (await admin.query(query, [ctx.traceId])).rows;
			assert.deepEqual(all.map((r) => [r.name, r.username]), [['INSERT deferred_c5', 'postgres'], ['SET', 'postgres'],
				['SELECT', 'tenant_3u'], ['postgresql', 'postgres']], jsonish(all));
			assert.match(all[3].status_message, /deferred_c5/);
			const tenant = await connect(cluster, 'tenant_3u');
			try {
				const seen = (await tenant.query(query, [ctx.traceId])).rows;
				assert.deepEqual(seen.map((r) => [r.name, r.status_message, r.query]), [
					['INSERT', null, '<insufficient privilege>'], ['SET', null, '<insufficient privilege>'],
					['SELECT', null, 'SELECT $1 AS tenant_work'],
					['postgresql', '<insufficient privilege>', '<insufficient privilege>']], jsonish(seen));
			} finally {
				await tenant.end();
			}
		} finally {
			await wire.query('DROP TABLE IF EXISTS deferred_c5, deferred_p5; DROP ROLE IF EXISTS tenant_3u');
			wire.end();
		}
	});

	test('3p. extended protocol: an error after the run (an immediate foreign key, checked in ExecutorFinish) and an error after planning (a Bind refused) fail their statements\' spans', async () => {
		const wire = await connectWire(cluster, 'app');
		try {
			const fk = newContext();
			const refused = newContext();
			await wire.query('CREATE TABLE fk_parent_3p (id int PRIMARY KEY); CREATE TABLE fk_child_3p (pid int REFERENCES fk_parent_3p)');
			wire.send(serialize.parse({ text: `INSERT INTO fk_child_3p VALUES ($1) /*traceparent='${fk.header}'*/` }),
				serialize.bind({ values: ['7'] }), serialize.execute({}), serialize.sync());
			await assert.rejects(wire.until('readyForQuery'), (e) => e.code === '23503');
			await wire.until('readyForQuery');
			// Two result formats for a one-column result: planned at Bind, then refused by it.
			const bindTwoFormats = Buffer.from([0x42, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0]);
			wire.send(serialize.parse({ text: `INSERT INTO fk_parent_3p VALUES (1) RETURNING id /*traceparent='${refused.header}'*/` }),
				bindTwoFormats, serialize.execute({}), serialize.sync());
			await assert.rejects(wire.until('readyForQuery'), (e) => e.code === '08P01');
			await wire.until('readyForQuery');

			const fkSpan = await waitForServerSpan(receiver, fk);
			assert.equal(fkSpan.name, 'INSERT fk_child_3p');
			assert.equal(fkSpan.status.code, StatusCode.ERROR, 'the foreign key failed it after its run');
			assert.equal(fkSpan.attributes['db.response.status_code'], '23503');
			const refusedSpan = await waitForServerSpan(receiver, refused);
			assert.equal(refusedSpan.name, 'INSERT fk_parent_3p');
			assert.equal(refusedSpan.status.code, StatusCode.ERROR, 'the Bind failed it after its planning');
			assert.equal(refusedSpan.attributes['db.response.status_code'], '08P01');
			await sleep(3 * EXPORT_INTERVAL_MS);
			const servers = (ctx) => spansOf(receiver, ctx.traceId).filter((x) => x.kind === SpanKind.SERVER);
			assert.equal(servers(fk).length, 1, 'one span for the failed INSERT');
			assert.equal(servers(refused).length, 1, 'one span for the refused INSERT');
		} finally {
			await wire.query('DROP TABLE IF EXISTS fk_child_3p, fk_parent_3p').catch(() => {});
			wire.end();
		}
	});

	test('3j. a commit failing at a Sync after an extended-protocol SELECT, whose portal is still open then: an error span beside the SELECT', async () => {
		const client = await connect(cluster, 'app');
		try {
			await client.query('CREATE TABLE deferred_p3 (id int PRIMARY KEY); ' +
				'CREATE TABLE deferred_c3 (parent int REFERENCES deferred_p3 DEFERRABLE INITIALLY DEFERRED); ' +
				"CREATE FUNCTION insert_c3(int) RETURNS int LANGUAGE sql AS 'INSERT INTO deferred_c3 VALUES ($1) RETURNING parent'");
			const ctx = newContext();
			// The SELECT's unnamed portal lives until the Sync's commit, which fails.
			await assert.rejects(client.query({ text: `SELECT insert_c3($1) /*traceparent='${ctx.header}'*/`, values: [42] }),
				(e) => e.code === '23503');
			const server = await waitFor(() => `the SELECT and its commit's failure:\n  ${dump(spansOf(receiver, ctx.traceId))}`, () => {
				const found = spansOf(receiver, ctx.traceId).filter((x) => x.kind === SpanKind.SERVER);
				return found.length >= 2 ? found : null;
			});
			const select = server.find((x) => x.name === 'SELECT');
			const failed = server.find((x) => x.name === 'postgresql');
			assert.ok(select && failed, dump(server));
			assert.equal(select.status.code, StatusCode.UNSET, 'the SELECT itself ran well');
			assert.equal(failed.status.code, StatusCode.ERROR);
			assert.equal(failed.attributes['db.response.status_code'], '23503');
			assert.equal(failed.parentSpanId, ctx.spanId);
		} finally {
			await client.query('DROP FUNCTION IF EXISTS insert_c3(int); DROP TABLE IF EXISTS deferred_c3, deferred_p3');
			await client.end();
		}
	});

	test('3l. a domain CHECK calling PL/pgSQL at Bind (an expression planned outside any statement) makes no span; the statement keeps its own', async () => {
		await admin.query('CREATE FUNCTION positive_ok(x int) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN RETURN x > 0; END $$; ' +
			'CREATE DOMAIN positive_id AS int CHECK (positive_ok(VALUE))');
		try {
			const text = 'SELECT count(*) AS n FROM orders_sc WHERE id < $1::positive_id';
			for (let run = 0; run < 2; run++) {
				const ctx = newContext();
				const client = await connect(cluster, 'app');	// a new session: PL/pgSQL plans its expression afresh
				try {
					await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
					assert.equal((await client.query({ text, values: [3] })).rows[0].n, '2');
				} finally {
					await client.end();
				}
				const rows = (await admin.query("SELECT name, query FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server'",
					[ctx.traceId])).rows;
				assert.deepEqual(rows, [{ name: 'SELECT orders_sc', query: text }], `run ${run}: ${jsonish(rows)}`);
			}
		} finally {
			await admin.query('DROP DOMAIN positive_id; DROP FUNCTION positive_ok(int)');
		}
	});

	test('3m. named prepared statements through npm pg, their generic plan cached (no planning at Bind): every execution is a span', async () => {
		const ctx = newContext();
		const client = await connect(cluster, 'app');
		try {
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await client.query('SET plan_cache_mode = force_generic_plan');
			for (let i = 1; i <= 8; i++) {
				await client.query({ name: 'by_id', text: 'SELECT note FROM orders_sc WHERE id = $1', values: [1 + (i % 3)] });
				await client.query({ name: 'touch', text: 'UPDATE orders_sc SET note = note WHERE id = $1', values: [1 + (i % 3)] });
			}
		} finally {
			await client.end();
		}
		const rows = (await admin.query("SELECT name, count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' " +
			"AND name IN ('SELECT orders_sc', 'UPDATE orders_sc') GROUP BY name ORDER BY name", [ctx.traceId])).rows;
		assert.deepEqual(rows, [{ name: 'SELECT orders_sc', n: 8 }, { name: 'UPDATE orders_sc', n: 8 }]);
	});

	test('3n. pipelined Binds, one statement planned and another run from its cached plan first: each run is its own span (query ids off)', async () => {
		const wire = await connectWire(cluster);
		try {
			const ctx = newContext();
			await wire.query(`SET traceprof.traceparent = '${ctx.header}'; SET plan_cache_mode = force_generic_plan`);
			wire.send(serialize.parse({ name: 'pick', text: 'SELECT note, pg_sleep(0.1) FROM orders_sc WHERE id = $1', types: [23] }),
				serialize.bind({ statement: 'pick', values: ['1'] }), serialize.execute({}), serialize.sync());
			await wire.until('readyForQuery');	// its generic plan is cached now
			await admin.query('SELECT traceprof.reset()');
			wire.send(serialize.parse({ name: 'add', text: 'INSERT INTO orders_sc VALUES ($1, $2)', types: [23, 25] }),
				serialize.bind({ statement: 'add', portal: 'a', values: ['900', 'piped'] }),	// planned here
				serialize.bind({ statement: 'pick', portal: 'b', values: ['2'] }),	// its cached plan
				serialize.execute({ portal: 'b' }), serialize.execute({ portal: 'a' }), serialize.sync());
			await wire.until('readyForQuery');
			const rows = (await admin.query("SELECT name, duration_ms, attributes->>'traceprof.rows_affected' AS written, " +
				"attributes->>'db.response.returned_rows' AS returned FROM traceprof.spans " +
				"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId])).rows;
			assert.deepEqual(rows.map((r) => [r.name, r.written, r.returned]),
				[['INSERT orders_sc', '1', null], ['SELECT orders_sc', null, '1']], jsonish(rows));
			assert.ok(rows[1].duration_ms >= 100, `the SELECT's span holds its 100 ms sleep: ${jsonish(rows)}`);
			assert.ok(rows[0].duration_ms >= 100, 'the INSERT was planned at its Bind, before the SELECT ran');
		} finally {
			await wire.query('DELETE FROM orders_sc WHERE id = 900');
			wire.end();
		}
	});

	test('3q. hand-pipelined Binds of two writes, both planned before either runs (named portals): one span each, with its planning and its rows', async () => {
		const wire = await connectWire(cluster);
		try {
			const ctx = newContext();
			await wire.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await admin.query('SELECT traceprof.reset()');
			wire.send(serialize.parse({ name: 'add', text: 'INSERT INTO orders_sc VALUES ($1, $2)', types: [23, 25] }),
				serialize.parse({ name: 'slow', text: 'UPDATE orders_sc SET note = note WHERE id = $1 AND pg_sleep(0.1) IS NOT NULL', types: [23] }),
				serialize.bind({ statement: 'add', portal: 'a', values: ['901', 'piped'] }),	// planned here
				serialize.bind({ statement: 'slow', portal: 'b', values: ['1'] }),	// and this one
				serialize.execute({ portal: 'a' }), serialize.execute({ portal: 'b' }), serialize.sync());
			await wire.until('readyForQuery');
			const rows = (await admin.query("SELECT name, duration_ms, attributes->>'traceprof.rows_affected' AS written, " +
				"(attributes->>'traceprof.planning_time_ns') IS NOT NULL AS planned FROM traceprof.spans " +
				"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId])).rows;
			assert.deepEqual(rows.map((r) => [r.name, r.written, r.planned]),
				[['INSERT orders_sc', '1', true], ['UPDATE orders_sc', '1', true]], jsonish(rows));
			assert.ok(rows[1].duration_ms >= 100, `the UPDATE's span holds its run: ${jsonish(rows)}`);
		} finally {
			await wire.query('DELETE FROM orders_sc WHERE id = 901');
			wire.end();
		}
	});

	test('3r. a Bind never executed, then an untraced statement an INSTEAD rule turns into two SELECTs: the rule\'s queries are not the Bind\'s', async () => {
		const wire = await connectWire(cluster);
		try {
			const ctx = newContext();
			await admin.query('DROP TABLE IF EXISTS rule_instead; CREATE TABLE rule_instead (id int); ' +
				'CREATE RULE rule_instead_two AS ON INSERT TO rule_instead DO INSTEAD (SELECT 1 AS a; SELECT 2 AS b)');
			await wire.query('BEGIN');
			wire.send(serialize.parse({ text: `INSERT INTO orders_sc VALUES (902, 'never') /*traceparent='${ctx.header}'*/` }),
				serialize.bind({}), serialize.flush());
			await wire.until('bindComplete');
			await wire.query('INSERT INTO rule_instead VALUES (1)');
			await wire.query('COMMIT');
			const rows = (await admin.query('SELECT name, duration_ms, attributes FROM traceprof.spans ' +
				"WHERE trace_id = $1 AND kind = 'server'", [ctx.traceId])).rows;
			assert.deepEqual(rows.map((r) => r.name), ['INSERT orders_sc'], jsonish(rows));
			// Ended with its planning, which reads no CPU clock; a rule query's run would have.
			assert.equal(rows[0].attributes['traceprof.cpu_time_ns'], undefined, `the Bind's span ran nothing: ${jsonish(rows)}`);
		} finally {
			await admin.query('DROP TABLE IF EXISTS rule_instead');
			wire.end();
		}
	});

	test('3x. a Bind failing after it dropped the unnamed portal of a statement never run: its failure is under its own comment\'s parent', async () => {
		// The dropped statement's span ended in the failing Bind's message,
		// which made the failure look like a commit's beside it, in its trace.
		const wire = await connectWire(cluster);
		try {
			const first = newContext();
			const second = newContext();
			await wire.query('SET plan_cache_mode = force_generic_plan');
			wire.send(serialize.parse({ name: 'bind_s1', text: `SELECT $1::int AS first_stmt /*traceparent='${first.header}'*/` }),
				serialize.parse({ name: 'bind_s2', text: `SELECT $1::int AS second_stmt /*traceparent='${second.header}'*/` }),
				serialize.sync());
			await wire.until('readyForQuery');
			wire.send(serialize.bind({ statement: 'bind_s1', values: ['1'] }), serialize.execute({}), serialize.sync());
			await wire.until('readyForQuery');
			wire.send(serialize.bind({ statement: 'bind_s1', values: ['2'] }),
				serialize.bind({ statement: 'bind_s2', values: ['abc'] }), serialize.sync());
			await assert.rejects(wire.until('readyForQuery'), /invalid input syntax for type integer/);
			const failed = await waitFor('the failed Bind\'s span',
				() => receiver.spans().find((x) => x.status.code === StatusCode.ERROR && /second_stmt/.test(x.attributes['db.query.text'] || '')));
			assert.equal(failed.traceId, second.traceId, 'the failing statement\'s own comment\'s trace');
			assert.equal(failed.parentSpanId, second.spanId, 'under its comment\'s span');
		} finally {
			wire.end();
		}
	});

	test('3k. more portals kept open than spans fit (32): a traced statement beyond them is counted as dropped, not lost silently', async () => {
		const wire = await connectWire(cluster);
		try {
			const ctx = newContext();
			const comment = `/*traceparent='${ctx.header}'*/`;
			await wire.query('BEGIN');
			const before = await stats(admin);
			const messages = [];
			for (let i = 0; i < 34; i++)
				messages.push(serialize.parse({ name: `p${i}`, text: `SELECT g FROM generate_series(1, 3) g ${comment}` }),
					serialize.bind({ statement: `p${i}`, portal: `p${i}` }), serialize.execute({ portal: `p${i}`, rows: 1 }));
			wire.send(...messages, serialize.sync());
			await wire.until('readyForQuery');
			await wire.query('COMMIT');
			const after = await stats(admin);
			const kinds = (await admin.query('SELECT name, count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1 GROUP BY name ORDER BY name',
				[ctx.traceId])).rows;
			// The 32nd statement fills the stack: its plan span (track_planning) is dropped too.
			assert.deepEqual(kinds, [{ name: 'SELECT', n: 32 }, { name: 'plan', n: 31 }]);
			assert.equal(after.spans_dropped - before.spans_dropped, 3, 'the two portals beyond room and the last one\'s plan are counted');
		} finally {
			wire.end();
		}
	});

	test('4. generator -> loader: the server COPY and COMMIT spans are children of loader.copy and loader.commit, one trace', async () => {
		requireExecutable(GENERATOR);
		requireExecutable(LOADER);
		const dir = makeTempDir('traceprof-ext-');
		try {
			const input = path.join(dir, 'orders.json');
			const g = await run(GENERATOR, ['2000', input]);
			assert.equal(g.code, 0, describeRun(g));
			const res = await run(LOADER, [cluster.url(), input, '--table', 'loaded_orders'],
				{ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.httpEndpoint }, timeout: 60000 });
			assert.equal(res.code, 0, describeRun(res));
			assert.equal((await admin.query('SELECT count(*)::int AS n FROM loaded_orders')).rows[0].n, 2000);

			const named = (name) => {
				const s = receiver.spans().filter((x) => x.name === name);
				return s.length === 1 ? s[0] : null;
			};
			const root = await waitFor('the loader.run span at the receiver', () => named('loader.run'));
			const copy = named('loader.copy');
			const commit = named('loader.commit');
			assert.ok(copy && commit, 'loader.copy and loader.commit were exported');
			assert.equal(copy.traceId, root.traceId);
			assert.equal(commit.traceId, root.traceId);

			const serverCopy = await waitFor('the server COPY span', () => spansOf(receiver, root.traceId)
				.find((s) => s.kind === SpanKind.SERVER && s.attributes['db.operation.name'] === 'COPY'));
			const serverCommit = await waitFor('the server COMMIT span', () => spansOf(receiver, root.traceId)
				.find((s) => s.kind === SpanKind.SERVER && s.attributes['db.operation.name'] === 'COMMIT'));
			const context = `\n  ${dump(spansOf(receiver, root.traceId))}`;
			assert.equal(serverCopy.parentSpanId, copy.spanId, `COPY is a child of loader.copy${context}`);
			assert.equal(serverCommit.parentSpanId, commit.spanId, `COMMIT is a child of loader.commit${context}`);
			assert.equal(serverCopy.attributes['db.collection.name'], 'loaded_orders');
			assert.equal(serverCopy.attributes['traceprof.rows_affected'], 2000, 'COPY FROM reports the rows it loaded');
			assert.equal(serverCopy.attributes['db.response.returned_rows'], undefined, 'COPY FROM returns no rows');
			assert.equal(copy.attributes['traceprof.rows_affected'], 2000, 'and so does the loader\'s own span');
			assert.equal(serverCopy.resource.attributes['service.name'], 'orders-db');
			assert.notEqual(copy.resource.attributes['service.name'], 'orders-db', 'client and server are different services');
			for (const [server, client] of [[serverCopy, copy], [serverCommit, commit]]) {
				assert.ok(server.startTimeUnixNano >= client.startTimeUnixNano - 1000000n &&
					server.endTimeUnixNano <= client.endTimeUnixNano + 1000000n,
				`${server.name} runs inside ${client.name}`);
			}

			// Every server span of the trace hangs under a span of the trace.
			await sleep(3 * EXPORT_INTERVAL_MS);
			const trace = spansOf(receiver, root.traceId);
			const ids = new Set(trace.map((s) => s.spanId));
			for (const s of trace.filter((x) => x.resource.attributes['service.name'] === 'orders-db'))
				assert.ok(ids.has(s.parentSpanId), `${summary(s)} has its parent in the trace${context}`);
		} finally {
			removeTempDir(dir);
		}
	});

	test('7. privileges: a non-superuser cannot redirect export, rename the service or reset, and sees other roles\' spans redacted', async () => {
		await admin.query('CREATE ROLE other_user LOGIN');
		const app = await connect(cluster, 'app');
		const other = await connect(cluster, 'other_user');
		try {
			const denied = async (sql, codes, what) => {
				await assert.rejects(app.query(sql), (e) => {
					assert.ok(codes.includes(e.code), `${what}: SQLSTATE ${e.code} (${e.message}), expected one of ${codes}`);
					return true;
				}, `${what} must fail for a non-superuser`);
			};
			// SET of a SIGHUP parameter: "cannot be changed now" (55P02) or
			// permission denied (42501); ALTER SYSTEM: permission denied.
			await denied("SET traceprof.otlp_endpoint = 'http://attacker.example:4318'", ['55P02', '42501'], 'SET otlp_endpoint');
			await denied("ALTER SYSTEM SET traceprof.otlp_endpoint = 'http://attacker.example:4318'", ['42501'], 'ALTER SYSTEM otlp_endpoint');
			await denied("SET traceprof.service_name = 'spoofed'", ['55P02', '42501'], 'SET service_name');
			await denied("ALTER SYSTEM SET traceprof.service_name = 'spoofed'", ['42501'], 'ALTER SYSTEM service_name');
			await denied("ALTER SYSTEM SET traceprof.resource_attributes = 'a=b'", ['42501'], 'ALTER SYSTEM resource_attributes');
			await denied('SHOW traceprof.otlp_endpoint', ['42501'], 'SHOW otlp_endpoint (superuser only)');
			await denied('SELECT traceprof.reset()', ['42501'], 'traceprof.reset()');
			await denied('SET traceprof.sample_rate = 1', ['42501'], 'SET sample_rate');
			assert.equal((await admin.query('SHOW traceprof.otlp_endpoint')).rows[0]['traceprof.otlp_endpoint'],
				receiver.httpEndpoint, 'the endpoint is unchanged');
			assert.equal((await admin.query('SHOW traceprof.service_name')).rows[0]['traceprof.service_name'], 'orders-db');
			const auto = await admin.query("SELECT count(*)::int AS n FROM pg_file_settings WHERE name LIKE 'traceprof.%' AND sourcefile LIKE '%postgresql.auto.conf'");
			assert.equal(auto.rows[0].n, 0, 'nothing reached postgresql.auto.conf');

			// Another role's spans: query and error message redacted.
			const ctx = newContext();
			await other.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await other.query("SELECT 'other-private-value' AS other_marker");
			await assert.rejects(other.query("SELECT 1 / 0 AS other_failure"), (e) => e.code === '22012');
			await app.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await app.query('SELECT 2 AS app_marker');
			await app.query("SET traceprof.traceparent = ''");

			const seen = (await app.query(
				'SELECT username, query, status_message, attributes FROM traceprof.spans ' +
				"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId])).rows;
			const others = seen.filter((r) => r.username === 'other_user');
			const mine = seen.filter((r) => r.username === 'app');
			assert.equal(others.length, 2, `app sees other_user's two spans: ${JSON.stringify(seen)}`);
			for (const r of others) {
				assert.equal(r.query, '<insufficient privilege>');
				assert.ok(!('db.query.text' in r.attributes), 'no db.query.text attribute for another role\'s span');
				assert.doesNotMatch(JSON.stringify(r), /other-private-value|other_marker|other_failure/);
			}
			const failure = others.find((r) => r.status_message !== null);
			assert.ok(failure, 'the failed statement of other_user is listed');
			assert.equal(failure.status_message, '<insufficient privilege>');
			assert.ok(mine.some((r) => r.query === 'SELECT $1 AS app_marker'), `app sees its own query: ${JSON.stringify(mine)}`);
			const superView = (await admin.query(
				"SELECT query FROM traceprof.spans WHERE trace_id = $1 AND username = 'other_user' AND kind = 'server'",
				[ctx.traceId])).rows.map((r) => r.query);
			assert.ok(superView.includes('SELECT $1 AS other_marker'), `a superuser sees every query: ${superView}`);
		} finally {
			await app.end();
			await other.end();
		}
	});
});

describe('OTLP/gRPC export (own cluster)', () => {
	let cluster;
	let receiver;

	before(async () => {
		receiver = await startReceiver({ http: false });
		cluster = await startTraced({
			'traceprof.otlp_protocol': 'grpc',
			'traceprof.otlp_endpoint': `http://${receiver.grpcEndpoint}`,
			'traceprof.service_name': 'orders-db-grpc',
			'traceprof.resource_attributes': RESOURCE_ATTRIBUTES,
		});
	});

	after(async () => {
		if (cluster)
			await cluster.stop();
		if (receiver)
			await receiver.close();
	});

	test('2. OTLP/gRPC: the same spans arrive over TraceService/Export', async () => {
		const table = 'orders_grpc';
		const r = await runWorkload(cluster, table);
		await checkWorkloadExport(receiver, table, r, 'orders-db-grpc', cluster.port);
		const carrying = requestsWith(receiver, r.ctx.traceId);
		assert.ok(carrying.length >= 1);
		for (const req of carrying) {
			assert.equal(req.protocol, 'grpc');
			assert.equal(req.method, 'POST');
			assert.equal(req.path, GRPC_PATH);
			assert.match(String(req.headers['content-type']), /^application\/grpc/);
			assert.equal(req.bodyError, null, 'exactly one well-formed gRPC message');
		}
	});

	test('2b. traceprof.otlp_compression = gzip: the message is flagged compressed, with grpc-encoding: gzip', async () => {
		const admin = await connect(cluster);
		try {
			await admin.query('ALTER SYSTEM SET traceprof.otlp_compression = gzip');
			await admin.query('SELECT pg_reload_conf()');
			const table = 'orders_grpc_gzip';
			const r = await runWorkload(cluster, table);
			await checkWorkloadExport(receiver, table, r, 'orders-db-grpc', cluster.port);
			for (const req of requestsWith(receiver, r.ctx.traceId)) {
				assert.equal(req.headers['grpc-encoding'], 'gzip');
				assert.deepEqual(req.frames.map((f) => f.compressed), [1]);
				assert.equal(req.bodyError, null, 'the message gunzips');
			}
		} finally {
			await admin.query('ALTER SYSTEM RESET traceprof.otlp_compression');
			await admin.query('SELECT pg_reload_conf()');
			await admin.end();
		}
	});
});

// ---- 5: a collector that is not there --------------------------------

describe('unreachable endpoint, small ring (own cluster)', () => {
	const STATEMENTS = 200;
	const SPANS_PER_STATEMENT = 2;	/* SELECT: the statement and its plan span */
	let cluster;
	let closedPort;
	let monitor;
	let ctx;
	let created;
	let receiver;

	before(async () => {
		closedPort = await freePort();
		cluster = await startTraced({
			'traceprof.otlp_endpoint': `http://127.0.0.1:${closedPort}`,
			'traceprof.max_spans': '128',
			'traceprof.otlp_timeout': '1000',
		});
		monitor = await connect(cluster);
		// Let the exporter run a few rounds with nothing to send before
		// anything is traced: the situation test 5b is about.
		await sleep(3 * EXPORT_INTERVAL_MS);
	});

	after(async () => {
		if (monitor)
			await monitor.end().catch(() => {});
		if (cluster)
			await cluster.stop();
		if (receiver)
			await receiver.close();
	});

	test('5. unreachable endpoint: statements stay fast, failures counted and warned once, ring bounded, drops counted exactly', async () => {
		const samples = [];
		let sampling = true;
		const sampler = (async () => {
			while (sampling) {
				samples.push(await stats(monitor));
				await sleep(10);
			}
		})();

		ctx = newContext();
		let elapsed;
		let s;
		try {
			const client = await connect(cluster, 'app');
			try {
				await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
				const t0 = Date.now();
				for (let i = 0; i < STATEMENTS; i++)
					await client.query(`SELECT ${i} AS n`);
				elapsed = Date.now() - t0;
			} finally {
				await client.end();
			}
			s = await waitFor((last) => `export_failures >= 3 (stats: ${JSON.stringify(last)})`, async () => {
				const x = await stats(monitor);
				return x.export_failures >= 3 ? x : null;
			});
		} finally {
			sampling = false;
			await sampler;
		}
		samples.push(s);
		// Hang guard only: export must never sit on a query's path.
		assert.ok(elapsed < 10000, `${STATEMENTS} traced statements took ${elapsed} ms with the collector down`);

		const expectedSpans = STATEMENTS * SPANS_PER_STATEMENT;
		assert.equal(s.capacity, 128);
		assert.equal(s.spans_created + s.spans_dropped, expectedSpans,
			`created (${s.spans_created}) + dropped (${s.spans_dropped}) = the ${expectedSpans} spans of ${STATEMENTS} SELECTs`);
		assert.ok(s.spans_dropped > 0, 'spans were dropped once the ring was full');
		assert.equal(s.spans_created, s.capacity, 'with nothing exported, exactly the ring\'s capacity was kept');
		assert.equal(s.spans_exported, 0);
		assert.equal(s.spans_pending, s.spans_created);
		for (const x of samples)
			assert.ok(x.spans_pending <= x.capacity, `spans_pending ${x.spans_pending} <= capacity ${x.capacity}`);
		assert.ok(s.last_failure instanceof Date, 'last_failure is set');
		assert.ok(s.last_error && s.last_error.includes(`127.0.0.1:${closedPort}`),
			`last_error names the endpoint: ${JSON.stringify(s.last_error)}`);

		const warnings = logLines(cluster).filter((l) => /WARNING:\s+traceprof exporter: cannot export spans/.test(l));
		assert.equal(warnings.length, 1,
			`one WARNING for the streak of ${s.export_failures} failures:\n${warnings.join('\n')}`);
		assert.ok(warnings[0].includes(`127.0.0.1:${closedPort}`), `the WARNING names the endpoint: ${warnings[0]}`);
		created = s.spans_created;
	});

	test('5b. last_export stays NULL while no span was ever exported', async () => {
		assert.ok(created > 0, 'test 5 ran first');
		const s = await stats(monitor);
		assert.equal(s.spans_exported, 0);
		assert.equal(s.last_export, null,
			`nothing was delivered (spans_exported = 0, ${s.export_failures} failures), yet last_export = ${s.last_export}`);
	});

	test('5c. pointing the endpoint at a live collector (ALTER SYSTEM + reload) resumes export and drains the ring', async () => {
		assert.ok(created > 0, 'test 5 ran first');
		receiver = await startReceiver({ grpc: false });
		await monitor.query(`ALTER SYSTEM SET traceprof.otlp_endpoint = '${receiver.httpEndpoint}'`);
		await monitor.query('SELECT pg_reload_conf()');

		const arrived = await waitForSpans(receiver, ctx.traceId, created);
		assert.equal(arrived.length, created, 'every kept span arrives, once');
		const s = await waitFor((last) => `the ring to drain (stats: ${JSON.stringify(last)})`, async () => {
			const x = await stats(monitor);
			return x.spans_pending === 0 && x.spans_exported >= created ? x : null;
		});
		assert.equal(s.spans_exported, created);

		// New statements are exported as they come.
		const more = newContext();
		const client = await connect(cluster, 'app');
		try {
			await client.query(`SET traceprof.traceparent = '${more.header}'`);
			for (let i = 0; i < 10; i++)
				await client.query(`SELECT ${i} AS again`);
		} finally {
			await client.end();
		}
		await waitForSpans(receiver, more.traceId, 10 * SPANS_PER_STATEMENT);
		const t = await waitFor((last) => `spans_exported to reach ${created + 20} (stats: ${JSON.stringify(last)})`, async () => {
			const x = await stats(monitor);
			return x.spans_exported >= created + 20 && x.spans_pending === 0 ? x : null;
		});
		assert.equal(t.spans_exported, created + 20);
		assert.ok(t.last_export instanceof Date);
	});

	test('5d. spans longer than a ring slot (512 bytes) wrap around the small ring and arrive whole, each counted once', async () => {
		assert.ok(receiver, 'test 5c ran first');
		const before = await stats(monitor);
		const long = newContext();
		const STATEMENTS_LONG = 150;	/* 300 spans, a third of them 3 slots long: the 128-slot ring wraps */
		const textOf = (i) => `SELECT ${i} AS n, '${'x'.repeat(900)}' AS pad`;	/* under max_query_length */
		const su = await connect(cluster);
		try {
			await su.query("SET traceprof.query_text = 'full'");
			await su.query(`SET traceprof.traceparent = '${long.header}'`);
			for (let i = 0; i < STATEMENTS_LONG; i++)
				await su.query(textOf(i));
		} finally {
			await su.end();
		}
		const s = await waitFor((last) => `the ring to drain (stats: ${JSON.stringify(last)})`, async () => {
			const x = await stats(monitor);
			return x.spans_pending === 0 && x.spans_created + x.spans_dropped >=
				before.spans_created + before.spans_dropped + 2 * STATEMENTS_LONG ? x : null;
		});
		assert.equal(s.spans_created + s.spans_dropped - before.spans_created - before.spans_dropped, 2 * STATEMENTS_LONG,
			`every span counted once, created or dropped: ${JSON.stringify(s)}`);
		const arrived = await waitForSpans(receiver, long.traceId, s.spans_created - before.spans_created);
		const statements = arrived.filter((x) => x.attributes['db.query.text']);
		assert.ok(statements.length > 0, 'statement spans arrived');
		for (const x of statements) {
			const n = Number(/^SELECT (\d+) AS n/.exec(x.attributes['db.query.text'])[1]);
			assert.equal(x.attributes['db.query.text'], textOf(n), 'the text spread over three slots comes back whole');
		}
		assert.equal(new Set(statements.map((x) => x.attributes['db.query.text'])).size, statements.length,
			'no span arrives twice');
	});

	test('5e. traceprof.stats.last_error: no password, path or query token of the endpoint, and only for privileged roles', async () => {
		const password = `pw${hex(6)}`;
		const token = `tok${hex(6)}`;
		const pathToken = `path${hex(6)}`;
		const failuresBefore = (await stats(monitor)).export_failures;
		await monitor.query(`ALTER SYSTEM SET traceprof.otlp_endpoint = 'http://tpuser:${password}@127.0.0.1:${closedPort}/${pathToken}/?api_key=${token}'`);
		await monitor.query('SELECT pg_reload_conf()');
		const app = await connect(cluster, 'app');
		try {
			const c = newContext();
			await app.query(`SET traceprof.traceparent = '${c.header}'`);
			// Keep tracing until the exporter runs with the new endpoint and fails.
			const s = await waitFor((last) => `an export failure after the reload (stats: ${JSON.stringify(last)})`, async () => {
				await app.query('SELECT 1 AS keep_failing');
				const x = await stats(monitor);
				return x.export_failures > failuresBefore ? x : null;
			});
			assert.ok(s.last_error.includes(`127.0.0.1:${closedPort}/***/v1/traces?***`), `last_error names the endpoint: ${s.last_error}`);
			for (const secret of [password, token, pathToken])
				assert.ok(!s.last_error.includes(secret), `${secret} of the endpoint stays out of last_error: ${s.last_error}`);
			await app.query("SET traceprof.traceparent = ''");
			// The endpoint is GUC_SUPERUSER_ONLY (SHOW is refused to this
			// role), and a collector's refusal may quote other roles' spans.
			await assert.rejects(app.query('SHOW traceprof.otlp_endpoint'), (e) => e.code === '42501');
			assert.equal((await stats(app)).last_error, '<insufficient privilege>');
		} finally {
			await app.end();
		}
	});
});

// ---- 6: retries --------------------------------------------------------

describe('long texts, large batch setting (own cluster)', () => {
	let cluster;
	let receiver;

	before(async () => {
		receiver = await startReceiver({ grpc: false });
		cluster = await startTraced({
			'traceprof.otlp_endpoint': receiver.httpEndpoint,
			'traceprof.max_query_length': '65536',
			'traceprof.export_batch_size': '65536',
			// 32 MB of slots: a quarter (when backends wake the exporter) holds all the spans.
			'traceprof.max_spans': '65536',
			'traceprof.query_text': 'full',
			'traceprof.track_planning': 'off',
			// The statements go in before the exporter's next round.
			'traceprof.export_interval': '3s',
			// Every span links to Pyroscope (nothing listens there): two
			// links quoting this long URL, which the records do not hold.
			'traceprof.pyroscope_url': `http://127.0.0.1:9/${'p'.repeat(2000)}`,
		});
	});

	after(async () => {
		if (cluster)
			await cluster.stop();
		if (receiver)
			await receiver.close();
	});

	test('5f. a request stays within 4 MiB whatever export_batch_size says, with texts at max_query_length and long links; every span arrives once', async () => {
		const N = 150;
		const ctx = newContext();
		const client = await connect(cluster, 'app');
		try {
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			for (let i = 0; i < N; i++)
				await client.query(`SELECT ${i} AS i, length('${'x'.repeat(65536)}') AS n`);
		} finally {
			await client.end();
		}
		await waitForSpans(receiver, ctx.traceId, N, 30000);
		const carrying = requestsWith(receiver, ctx.traceId);
		const sizes = carrying.map((r) => `${decodeTraces(r.body).spans.length} spans, ${r.body.length} bytes`);
		assert.ok(carrying.length >= 2, `${N} spans of 64 kB are split into several requests: ${sizes.join('; ')}`);
		for (const r of carrying)
			assert.ok(r.body.length <= 4 * 1024 * 1024, `every request within 4 MiB: ${sizes.join('; ')}`);
		const ids = carrying.flatMap((r) => decodeTraces(r.body).spans.map((x) => x.spanId));
		assert.equal(new Set(ids).size, N, 'each span once');
		assert.equal(ids.length, N);
	});
});

describe('a LATIN1 database, the shortest max_query_length (own cluster)', () => {
	let cluster;

	before(async () => {
		cluster = await startTraced({ 'traceprof.max_query_length': '64' });
		const admin = await connect(cluster);
		try {
			await admin.query("CREATE DATABASE enc_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0 OWNER app");
		} finally {
			await admin.end();
		}
	});

	after(async () => {
		if (cluster)
			await cluster.stop();
	});

	test('1h. texts that grow in UTF-8: a 255-byte message, a 40-letter table name; the first span of a session refused in an aborted transaction is converted too', async () => {
		const ctx = newContext();
		const table = 'é'.repeat(40);	// 40 bytes in LATIN1, 80 in UTF-8
		const latin = await connect(cluster, 'app', 'enc_latin1');
		try {
			await latin.query(`CREATE TABLE "${table}" (id int)`);
			await latin.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await latin.query(`INSERT INTO "${table}" VALUES (1)`);
			await assert.rejects(latin.query("DO $$BEGIN RAISE EXCEPTION '%', repeat('é', 300); END$$"));
		} finally {
			await latin.end();
		}
		// A new session whose first traced statement is refused: no catalog
		// lookup is possible then, the conversion was looked up before.
		const refused = newContext();
		const late = await connect(cluster, 'app', 'enc_latin1');
		try {
			await late.query('BEGIN');
			await assert.rejects(late.query('SELECT 1 / 0'));
			await assert.rejects(late.query(`SELECT 1 AS "ñandú" /*traceparent='${refused.header}'*/`), (e) => e.code === '25P02');
			await late.query('ROLLBACK');
		} finally {
			await late.end();
		}

		const admin = await connect(cluster);
		try {
			const rows = async (c) => (await admin.query(
				"SELECT name, status_message, query, attributes->>'db.collection.name' AS collection FROM traceprof.spans " +
				"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [c.traceId])).rows;
			const [insert, failed] = await rows(ctx);
			assert.equal(insert.name, `INSERT ${table}`);
			assert.equal(insert.collection, table, 'the whole name: 80 bytes in UTF-8');
			assert.equal(failed.status_message, 'é'.repeat(127), '255 LATIN1 bytes, in UTF-8 cut to 255 bytes before a character');
			const [first] = await rows(refused);
			assert.equal(first.name, 'postgresql');
			assert.ok(first.query.includes('"ñandú"'), `converted, not "?": ${first.query}`);
		} finally {
			await admin.end();
		}
	});

	test('1i. a session whose first statement fails before parse analysis: its span is stored with no catalog lookup, so a lock on a catalog cannot block the error', async () => {
		const ctx = newContext();
		const locker = await connect(cluster, 'postgres', 'enc_latin1');
		// A client in the database's own encoding: nothing has looked up the conversion to UTF-8 yet.
		const first = await connectWire(cluster, 'app', 'enc_latin1', 'LATIN1');
		let outcome;
		try {
			// What a VACUUM FULL of the catalogs holds.  The error is reported
			// with interrupts held: a lookup waiting here could not be cancelled.
			await locker.query('BEGIN');
			await locker.query('LOCK TABLE pg_catalog.pg_conversion IN ACCESS EXCLUSIVE MODE');
			outcome = await Promise.race([
				first.query(`SELEC x /*traceparent='${ctx.header}'*/`).then(() => 'succeeded', (e) => e.code),
				sleep(10000).then(() => 'blocked behind the lock')]);
		} finally {
			await locker.query('ROLLBACK');
			await locker.end();
		}
		try {
			assert.equal(outcome, '42601', 'the syntax error, at once');
			await first.until('readyForQuery');
			// Its next statement is analysed, and looks the conversion up then.
			await first.query(`SELECT 1 AS later /*traceparent='${ctx.header}'*/`);
		} finally {
			first.end();
		}

		const admin = await connect(cluster);
		try {
			const { rows } = await admin.query(
				"SELECT name, status, attributes->>'db.namespace' AS namespace, attributes->>'traceprof.user' AS usr " +
				"FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId]);
			assert.deepEqual(rows.map((r) => [r.name, r.status, r.namespace, r.usr]), [
				['postgresql', 'error', 'enc_latin1', 'app'],	// the names the client connected with
				['SELECT', 'unset', 'enc_latin1', 'app']]);
		} finally {
			await admin.end();
		}
	});

	test('1j. a profiled span whose name is over 95 bytes in UTF-8 keeps a name valid in UTF-8, cut before a character, then a hash', async () => {
		// 63 LATIN1 bytes, 124 in UTF-8: "SELECT ab" and 61 é's is 131 bytes.
		// A long name keeps 86 bytes at most, then "~" and a hash; the
		// 86th byte here is the second of an é, which is left out whole.
		const table = `ab${'é'.repeat(61)}`;
		const ctx = newContext();
		const latin = await connect(cluster, 'app', 'enc_latin1');
		try {
			await latin.query(`CREATE TABLE "${table}" (x int)`);
			await latin.query(`INSERT INTO "${table}" SELECT generate_series(1, 200000)`);
			await latin.query(`SET traceprof.traceparent = '${ctx.header}'`);
			// Enough CPU for samples at 100 Hz.
			await latin.query(`SELECT count(*) FROM "${table}" t, generate_series(1, 5) WHERE md5(x::text) > 'f'`);
		} finally {
			await latin.end();
		}
		const admin = await connect(cluster);
		try {
			const { rows } = await admin.query(
				"SELECT DISTINCT span_name, encode(convert_to(span_name, 'UTF8'), 'hex') AS bytes " +
				'FROM traceprof.profile($1)', [ctx.traceId]);
			assert.equal(rows.length, 1, `one span profiled: ${JSON.stringify(rows)}`);
			const bytes = Buffer.from(rows[0].bytes, 'hex');
			assert.match(bytes.toString('utf8'), new RegExp(`^SELECT ab${'é'.repeat(38)}~[0-9a-f]{8}$`), `94 bytes: ${rows[0].bytes}`);
		} finally {
			await admin.end();
		}
	});

	test('1k. a statement whose text has no equivalent in the database\'s encoding fails before it exists: a span of its own, in a block or not, never its predecessor\'s', async () => {
		// The server converts a message's text as it reads it, before any
		// statement or hook: the error is the message's.  In a block it
		// was taken for a Sync's failed commit, the last statement's.
		const ctx = newContext();
		const latin = await connect(cluster, 'app', 'enc_latin1');	// client_encoding UTF8
		try {
			await latin.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await latin.query('BEGIN');
			await latin.query('SELECT 1 AS before_it');
			await assert.rejects(latin.query("SELECT '€' AS in_block"), (e) => e.code === '22P05');
			await latin.query('ROLLBACK');
			await assert.rejects(latin.query("SELECT '€' AS alone"), (e) => e.code === '22P05');
		} finally {
			await latin.end();
		}
		const admin = await connect(cluster);
		try {
			const { rows } = await admin.query(
				'SELECT name, status, status_message, query, parent_span_id FROM traceprof.spans ' +
				"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId]);
			assert.deepEqual(rows.map((r) => [r.name, r.status, r.query]), [
				['BEGIN', 'unset', 'BEGIN'],
				['SELECT', 'unset', 'SELECT $1 AS before_it'],
				['postgresql', 'error', null],
				['ROLLBACK', 'unset', 'ROLLBACK'],
				['postgresql', 'error', null]]);
			for (const r of rows)
				assert.equal(r.parent_span_id, ctx.spanId, `${r.name}: a child of the caller's span`);
			assert.match(rows[2].status_message, /has no equivalent in encoding "LATIN1"/);
		} finally {
			await admin.end();
		}
	});
});

describe('retries and rejections (own cluster)', () => {
	let cluster;
	let receiver;
	let monitor;

	before(async () => {
		receiver = await startReceiver({ grpc: false });
		cluster = await startTraced({
			'traceprof.otlp_endpoint': receiver.httpEndpoint,
			'traceprof.otlp_timeout': '5000',
		});
		monitor = await connect(cluster);
	});

	after(async () => {
		if (monitor)
			await monitor.end().catch(() => {});
		if (cluster)
			await cluster.stop();
		if (receiver)
			await receiver.close();
	});

	const tracedSelect = (alias) => tracedSelectIn(cluster, alias);

	/** The span ids a request carries, sorted. */
	const ids = (req) => decodeTraces(req.body).spans.map((s) => s.spanId).sort();
	/** The span ids of a trace in the requests answered 200 (the default), sorted. */
	const deliveredIds = (traceId) => requestsWith(receiver, traceId)
		.filter((r) => r.behaviour.status === undefined).flatMap(ids).sort();

	test('6. 503 + Retry-After: 1, then 200: the batch is delivered by the retry, no failure counted', async () => {
		const logStart = cluster.readLog().length;
		const before_ = await stats(monitor);
		receiver.enqueue({ status: 503, headers: { 'retry-after': '1' } }, {});
		const ctx = await tracedSelect('retried');
		// The plan span is stored before the statement span: an export tick
		// between them sends them in two batches, so count spans, not requests.
		const delivered = () => deliveredIds(ctx.traceId);
		await waitFor(() => `both spans of trace ${ctx.traceId} delivered (have ${delivered().length})`,
			() => delivered().length >= 2);
		const reqs = requestsWith(receiver, ctx.traceId);
		assert.equal(reqs[0].behaviour.status, 503);
		assert.equal(reqs[1].behaviour.status, undefined, 'the retry got the default 200');
		const gap = reqs[1].time - reqs[0].endTime;
		assert.ok(gap >= 950, `the retry honours Retry-After: 1 (came ${gap.toFixed(0)} ms later)`);
		assert.deepEqual(ids(reqs[1]), ids(reqs[0]), 'the retry carries the same batch');

		const s = await waitFor((last) => `the batch to count as exported (${JSON.stringify(last)})`, async () => {
			const x = await stats(monitor);
			return x.spans_exported >= before_.spans_exported + 2 && x.spans_pending === 0 ? x : null;
		});
		await sleep(3 * EXPORT_INTERVAL_MS);
		const spans = delivered();
		assert.equal(spans.length, 2, 'the statement and its plan span, each delivered once: no further copies');
		assert.equal(new Set(spans).size, 2, 'two different spans');
		assert.equal(s.export_failures, before_.export_failures, 'a delivered retry is no failure');
		assert.equal(s.spans_exported, before_.spans_exported + 2);
		assert.deepEqual(logLines(cluster, logStart).filter((l) => /WARNING/.test(l)), [], 'no WARNING for a delivered retry');
	});

	test('6h. 502, then 504, without Retry-After: retried with backoff, then delivered; no failure counted', async () => {
		const before_ = await stats(monitor);
		receiver.enqueue({ status: 502 }, { status: 504 }, {});
		const ctx = await tracedSelect('gateway_errors');
		const delivered = () => deliveredIds(ctx.traceId);
		await waitFor(() => `both spans of trace ${ctx.traceId} delivered (have ${delivered().length})`,
			() => delivered().length >= 2);
		const reqs = requestsWith(receiver, ctx.traceId);
		assert.deepEqual(reqs.slice(0, 3).map((r) => r.behaviour.status ?? 200), [502, 504, 200],
			'502 and 504 are retried until the 200');
		assert.deepEqual(ids(reqs[1]), ids(reqs[0]), 'the first retry carries the same batch');
		assert.deepEqual(ids(reqs[2]), ids(reqs[0]), 'the second retry carries the same batch');
		const s = await waitFor((last) => `the batch to count as exported (${JSON.stringify(last)})`, async () => {
			const x = await stats(monitor);
			return x.spans_exported >= before_.spans_exported + 2 && x.spans_pending === 0 ? x : null;
		});
		assert.equal(s.export_failures, before_.export_failures, 'a delivered retry is no failure');
		assert.equal(new Set(delivered()).size, 2, 'each span delivered once');
	});

	test('6b. 400: not retried (the batch is sent once), counted as a failure', async () => {
		const before_ = await stats(monitor);
		receiver.enqueue({ status: 400, body: 'bad request' });
		const rejected = await tracedSelect('rejected');
		await waitFor('the request answered 400', () => requestsWith(receiver, rejected.traceId).length >= 1);
		// Later spans still flow; once they arrived, any resend of the
		// rejected batch would have happened too.
		const barrier = await tracedSelect('after_rejection');
		await waitForSpans(receiver, barrier.traceId, 2);
		await sleep(3 * EXPORT_INTERVAL_MS);

		const s = await stats(monitor);
		const carrying = requestsWith(receiver, rejected.traceId);
		assert.deepEqual(carrying.map((r) => r.behaviour.status ?? 200), [400],
			'the batch answered 400 is sent exactly once (OTLP: a 400 MUST NOT be retried)');
		assert.equal(s.export_failures, before_.export_failures + 1, 'the 400 counts as one export failure');
		assert.match(s.last_error || '', /400/, 'last_error tells the status');
	});

	test('6e. a partial success: the refused spans are counted as dropped, the rest as exported; one WARNING for the streak', async () => {
		const logStart = cluster.readLog().length;
		const before_ = await stats(monitor);
		receiver.enqueue({ partialSuccess: { rejected: 1, message: 'span too large' } },
			{ partialSuccess: { rejected: 1, message: 'span too large' } });
		const first = await tracedSelect('partly_refused');
		await waitFor('the first request answered with a partial success', () => requestsWith(receiver, first.traceId).length >= 1);
		const second = await tracedSelect('partly_refused_again');
		await waitFor('the second request answered with a partial success', () => requestsWith(receiver, second.traceId).length >= 1);
		const barrier = await tracedSelect('after_partial');
		await waitForSpans(receiver, barrier.traceId, 2);
		await sleep(3 * EXPORT_INTERVAL_MS);

		const s = await stats(monitor);
		const sent = receiver.requests.filter((r) => r.behaviour.partialSuccess).reduce((n, r) => n + decodeTraces(r.body).spans.length, 0);
		assert.equal(s.spans_dropped - before_.spans_dropped, 2, 'each request\'s refused span counts as dropped');
		assert.ok(s.spans_exported - before_.spans_exported >= sent - 2, `the rest count as exported (${sent} sent)`);
		assert.equal(s.export_failures - before_.export_failures, 2);
		assert.match(s.last_error || '', /rejected 1 span\(s\): span too large/);
		assert.equal(requestsWith(receiver, first.traceId).length, 1, 'a partial success is not sent again');
		const warnings = logLines(cluster, logStart).filter((l) => /WARNING:.*rejected 1 span/.test(l));
		assert.equal(warnings.length, 1, `one WARNING for the streak:\n${warnings.join('\n')}`);
	});

	test('6f. a collector\'s warning (a partial success refusing nothing) is delivered, and logged once while it repeats', async () => {
		const logStart = cluster.readLog().length;
		const before_ = await stats(monitor);
		const warning = { partialSuccess: { rejected: 0, message: 'just a warning' } };
		receiver.enqueue(warning, warning, warning);
		const contexts = [];
		for (let i = 0; i < 3; i++) {
			const ctx = await tracedSelect(`warned_${i}`);
			contexts.push(ctx);
			await waitFor(`request ${i} answered with the warning`, () => requestsWith(receiver, ctx.traceId).length >= 1);
		}
		const s = await stats(monitor);
		assert.equal(s.spans_dropped, before_.spans_dropped, 'a warning refuses no span');
		assert.equal(s.export_failures, before_.export_failures, 'nor is it a failure');
		const logged = logLines(cluster, logStart).filter((l) => /LOG:.*accepted the request with a warning: just a warning/.test(l));
		assert.equal(logged.length, 1, `three requests, one line while the warning repeats:\n${logged.join('\n')}`);
	});

	test('6i. a collector\'s long multibyte message: last_error is cut before a character, valid UTF-8; a LATIN1 database reads it in LATIN1', async () => {
		// After the 55-byte "collector accepted ... 1 span(s): " and an "x",
		// the 255 bytes last_error keeps end inside the 100th é.
		receiver.enqueue({ partialSuccess: { rejected: 1, message: `x${'é'.repeat(150)}` } });
		const ctx = await tracedSelect('long_refusal');
		await waitFor('the request answered with a partial success', () => requestsWith(receiver, ctx.traceId).length >= 1);
		const expected = `collector accepted the request but rejected 1 span(s): x${'é'.repeat(99)}`;
		const hex = await waitFor('last_error to name the refusal', async () => {
			const r = (await monitor.query(
				"SELECT encode(convert_to(last_error, 'UTF8'), 'hex') AS hex FROM traceprof.stats")).rows[0];
			return r.hex && Buffer.from(r.hex, 'hex').toString('utf8').startsWith('collector accepted the request but rejected 1 span(s): x') ? r.hex : null;
		});
		assert.equal(Buffer.from(hex, 'hex').toString('utf8'), expected, `bytes: ${hex}`);
		const admin = await connect(cluster);
		try {
			await admin.query("CREATE DATABASE enc_latin1_err ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
		} finally {
			await admin.end();
		}
		const latin = await connect(cluster, 'postgres', 'enc_latin1_err');
		try {
			await latin.query('CREATE EXTENSION traceprof');
			// In LATIN1, é is one byte (E9), not the two of UTF-8.
			const r = (await latin.query(
				"SELECT encode(convert_to(last_error, 'LATIN1'), 'hex') AS hex FROM traceprof.stats")).rows[0];
			assert.equal(r.hex, Buffer.from(expected, 'latin1').toString('hex'));
		} finally {
			await latin.end();
		}
	});

	test('6f. a 200 whose body is cut short: delivered (the status is the answer), not sent again', async () => {
		const before_ = await stats(monitor);
		receiver.enqueue({ cutBody: true });
		const ctx = await tracedSelect('cut_answer');
		await waitFor('the request answered with a cut 200', () => requestsWith(receiver, ctx.traceId).length >= 1);
		const barrier = await tracedSelect('after_cut_answer');
		await waitForSpans(receiver, barrier.traceId, 2);
		await sleep(3 * EXPORT_INTERVAL_MS);
		assert.equal(requestsWith(receiver, ctx.traceId).length, 1, 'sent once: a resend would duplicate its spans');
		const s = await stats(monitor);
		assert.equal(s.export_failures, before_.export_failures);
		assert.equal(s.spans_dropped, before_.spans_dropped);
	});

	test('6g. a redirect (307) is not followed: the batch is refused once, and last_error says what to change', async () => {
		const before_ = await stats(monitor);
		receiver.enqueue({ status: 307, headers: { location: 'http://127.0.0.1:9/v1/traces' } });
		const ctx = await tracedSelect('redirected');
		await waitFor('the request answered 307', () => requestsWith(receiver, ctx.traceId).length >= 1);
		const barrier = await tracedSelect('after_redirect');
		await waitForSpans(receiver, barrier.traceId, 2);
		const s = await stats(monitor);
		assert.equal(requestsWith(receiver, ctx.traceId).length, 1);
		assert.equal(s.export_failures, before_.export_failures + 1);
		assert.match(s.last_error || '', /HTTP status 307, a redirect, which is not followed: set the endpoint to the address it names/);
	});

	test('6d. 429 + Retry-After longer than the export budget: no request until it has passed, then the batch is delivered', async () => {
		const RETRY_AFTER_S = 7;	// traceprof.otlp_timeout is 5 s: the export gives up at once
		const before_ = await stats(monitor);
		receiver.enqueue({ status: 429, headers: { 'retry-after': String(RETRY_AFTER_S) } });
		const ctx = await tracedSelect('throttled');
		await waitFor('the request answered 429', () => requestsWith(receiver, ctx.traceId).length >= 1);
		const first = requestsWith(receiver, ctx.traceId)[0];
		const count = receiver.requests.length;
		await sleep(4000);
		assert.equal(receiver.requests.length, count,
			'no request while the collector\'s Retry-After lasts (the exporter runs every 100 ms)');
		await waitFor('the batch delivered after Retry-After', () =>
			requestsWith(receiver, ctx.traceId).some((r) => r.behaviour.status === undefined), 15000);
		const delivered = requestsWith(receiver, ctx.traceId).find((r) => r.behaviour.status === undefined);
		const gap = delivered.time - first.endTime;
		assert.ok(gap >= RETRY_AFTER_S * 1000 - 50, `sent again ${gap.toFixed(0)} ms after the 429, not before Retry-After`);
		const s = await stats(monitor);
		assert.equal(s.export_failures, before_.export_failures + 1, 'the export that gave up counts once');
		assert.match(s.last_error || '', /429/);
	});

	test('sampling: traceprof.sample_rate = 0.5 traces about half of the statements, each with its plan span', async () => {
		const client = await connect(cluster);
		const N = 1000;
		try {
			await client.query('SET traceprof.sample_rate = 0.5');
			for (let i = 0; i < N; i++)
				await client.query('SELECT 1 AS sample_probe');
			await client.query('SET traceprof.sample_rate = 0');
		} finally {
			await client.end();
		}
		const rows = (await monitor.query(
			'WITH spans AS MATERIALIZED (SELECT span_id, parent_span_id, name, kind, query FROM traceprof.spans) ' +
			'SELECT s.span_id, s.parent_span_id, ' +
			"(SELECT count(*)::int FROM spans p WHERE p.parent_span_id = s.span_id AND p.name = 'plan') AS plans " +
			"FROM spans s WHERE s.kind = 'server' AND s.query = 'SELECT $1 AS sample_probe'")).rows;
		const fraction = rows.length / N;
		assert.ok(fraction > 0.4 && fraction < 0.6,
			`sample_rate 0.5 sampled ${rows.length} of ${N} statements (${(100 * fraction).toFixed(1)}%)`);
		assert.ok(rows.every((r) => r.parent_span_id === null), 'sampled statements start new root traces');
		const withoutPlan = rows.filter((r) => r.plans !== 1).length;
		assert.equal(withoutPlan, 0, `${withoutPlan} of ${rows.length} sampled statements have no plan span`);
	});

	test('6c. the exporter has a row in pg_stat_activity: active, "exporting spans", wait event Extension while the collector holds the request; idle after', async () => {
		const exporterRow = async () => (await monitor.query(
			"SELECT state, query, wait_event_type FROM pg_stat_activity WHERE backend_type = 'traceprof exporter'")).rows;
		assert.equal((await exporterRow()).length, 1, 'one row for the exporter');
		receiver.enqueue({ hang: true });
		const held = await tracedSelect('held');
		const busy = await waitFor((last) => `the exporter shown sending (last: ${JSON.stringify(last)})`, async () => {
			const rows = await exporterRow();
			return rows.length === 1 && rows[0].state === 'active' ? rows[0] : null;
		});
		assert.equal(busy.query, 'exporting spans', 'says what it sends, never the endpoint');
		assert.equal(busy.wait_event_type, 'Extension');
		// The request times out (otlp_timeout = 5s) and the spans go in a later round.
		await waitForSpans(receiver, held.traceId, 2, 20000);
		const idle = await waitFor((last) => `the exporter idle again (last: ${JSON.stringify(last)})`, async () => {
			const rows = await exporterRow();
			return rows.length === 1 && rows[0].state === 'idle' ? rows[0] : null;
		});
		assert.equal(idle.wait_event_type, 'Extension', 'waiting for its next round');
	});
});

describe('reload while a request hangs (own cluster)', () => {
	test('5g. a new endpoint takes effect at the reload, not when the hanging request times out; the interrupted batch is neither a failure nor lost', async () => {
		const hanging = await startReceiver({ grpc: false });
		hanging.setDefault({ hang: true });
		const live = await startReceiver({ grpc: false });
		const cluster = await startTraced({
			'traceprof.otlp_endpoint': hanging.httpEndpoint,
			'traceprof.otlp_timeout': '60000',
		});
		const admin = await connect(cluster);
		try {
			const ctx = newContext();
			await admin.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await admin.query('SELECT 1 AS before_reload');
			await admin.query("SET traceprof.traceparent = ''");
			await waitFor('the request that hangs', () => requestsWith(hanging, ctx.traceId).length >= 1);
			const before_ = await stats(admin);
			const reloadedMs = Date.now();
			await admin.query(`ALTER SYSTEM SET traceprof.otlp_endpoint = '${live.httpEndpoint}'`);
			await admin.query('SELECT pg_reload_conf()');
			await waitForServerSpan(live, ctx);
			assert.ok(Date.now() - reloadedMs < 10000, `the batch reached the new endpoint ${Date.now() - reloadedMs} ms after the reload`);
			const after_ = await stats(admin);
			assert.equal(after_.export_failures, before_.export_failures, 'an interrupted request is not a failure');
			assert.equal(after_.spans_dropped, before_.spans_dropped);
		} finally {
			await admin.end();
			await cluster.stop();
			await hanging.close();
			await live.close();
		}
	});
});

describe('reload while a request is slow (own cluster)', () => {
	test('5h. a reload that moves no destination lets the request in flight finish: each span reaches the collector once', async () => {
		// Interrupted by every reload, the request was sent again: the
		// collector got the batch once per reload, and reloads in a row
		// kept export from ever finishing.
		const slow = await startReceiver({ grpc: false });
		slow.setDefault({ delayMs: 3000 });	// the body taken at once, the answer late
		const cluster = await startTraced({
			'traceprof.otlp_endpoint': slow.httpEndpoint,
			'traceprof.otlp_timeout': '60000',
		});
		const admin = await connect(cluster);
		try {
			const ctx = newContext();
			await admin.query(`SET traceprof.traceparent = '${ctx.header}'`);
			for (let i = 0; i < 10; i++)
				await admin.query(`SELECT ${i} AS n`);
			await admin.query("SET traceprof.traceparent = ''");
			await waitFor('the slow request', () => requestsWith(slow, ctx.traceId).length >= 1);
			const before_ = await stats(admin);
			// Reloads while it waits for its answer; one changes a setting that is no destination.
			await admin.query('ALTER SYSTEM SET traceprof.export_batch_size = 256');
			for (let i = 0; i < 4; i++) {
				await admin.query('SELECT pg_reload_conf()');
				await sleep(250);
			}
			assert.ok((await stats(admin)).spans_pending > 0, 'the reloads came while the request waited for its answer');
			await waitFor('every span exported', async () => (await stats(admin)).spans_pending === 0, 20000);
			const server = spansOf(slow, ctx.traceId).filter((x) => x.kind === SpanKind.SERVER);
			const ids = spansOf(slow, ctx.traceId).map((x) => x.spanId);
			assert.equal(server.length, 10, `the ten statements' spans, each once: ${requestsWith(slow, ctx.traceId).length} request(s)`);
			assert.equal(new Set(ids).size, ids.length, 'no span sent twice');
			const after_ = await stats(admin);
			assert.equal(after_.export_failures, before_.export_failures);
			assert.equal(after_.spans_dropped, before_.spans_dropped);
		} finally {
			await admin.query('ALTER SYSTEM RESET traceprof.export_batch_size').catch(() => {});
			await admin.end();
			await cluster.stop();
			await slow.close();
		}
	});
});

describe('shutdown (own cluster)', () => {
	test('9b. a clean shutdown sends the spans still waiting in the ring (one last, bounded export)', async () => {
		const receiver = await startReceiver({ grpc: false });
		const cluster = await startTraced({
			'traceprof.otlp_endpoint': receiver.httpEndpoint,
			'traceprof.export_interval': '60000',	// no round before the shutdown
		});
		let running = true;
		try {
			const client = await connect(cluster);
			const ctx = newContext();
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			for (let i = 0; i < 20; i++)
				await client.query(`SELECT ${i} AS n`);
			await client.end();
			assert.equal(receiver.requests.length, 0, 'nothing was exported before the shutdown');
			await cluster.stop();
			running = false;
			const server = spansOf(receiver, ctx.traceId).filter((x) => x.kind === SpanKind.SERVER);
			assert.equal(server.length, 20, `every statement's span arrived before the server stopped:\n  ${dump(server)}`);
		} finally {
			if (running)
				await cluster.stop();
			await receiver.close();
		}
	});

	test('9c. a shutdown while the collector hangs says how much was not exported', async () => {
		const hanging = await startReceiver({ grpc: false });
		hanging.setDefault({ hang: true });
		const cluster = await startTraced({
			'traceprof.otlp_endpoint': hanging.httpEndpoint,
			'traceprof.otlp_timeout': '60000',
		});
		try {
			const client = await connect(cluster);
			const ctx = newContext();
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			for (let i = 0; i < 5; i++)
				await client.query(`SELECT ${i} AS n`);
			await client.end();
			await waitFor('the request that hangs', () => requestsWith(hanging, ctx.traceId).length >= 1);
			await cluster.restart();	// its log stays, where stop() removes it
			const lines = cluster.readLog().split('\n').filter((l) => /traceprof exporter: stopping with spans not exported \(\d+ ring slots\)/.test(l));
			assert.equal(lines.length, 1, `one LOG line:\n${lines.join('\n')}`);
			assert.ok(Number(/\((\d+) ring slots\)/.exec(lines[0])[1]) >= 5, lines[0]);
		} finally {
			await cluster.stop();
			await hanging.close();
		}
	});
});

describe('restart (own cluster)', () => {
	let cluster;
	let receiver;

	before(async () => {
		receiver = await startReceiver({ grpc: false });
		cluster = await startTraced({ 'traceprof.otlp_endpoint': receiver.httpEndpoint });
	});

	after(async () => {
		if (cluster)
			await cluster.stop();
		if (receiver)
			await receiver.close();
	});

	test('9. after a clean restart the extension traces and exports again; the ring starts empty', async () => {
		const before_ = newContext();
		let client = await connect(cluster, 'app');
		await client.query(`SELECT 1 AS before_restart /*traceparent='${before_.header}'*/`);
		await waitForSpans(receiver, before_.traceId, 2);
		await client.end();
		const oldPid = cluster.pid;

		await cluster.restart();
		assert.notEqual(cluster.pid, oldPid, 'a new postmaster');
		const after_ = newContext();
		client = await connect(cluster, 'app');
		try {
			const s = await stats(client);
			assert.equal(s.spans_created, 0, 'counters start afresh with shared memory');
			await client.query(`SELECT 1 AS after_restart /*traceparent='${after_.header}'*/`);
			const spans = await waitForSpans(receiver, after_.traceId, 2);
			assert.ok(spans.some((x) => x.kind === SpanKind.SERVER && x.parentSpanId === after_.spanId));
			const local = await client.query('SELECT count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1', [after_.traceId]);
			assert.equal(local.rows[0].n, 2, 'the statement and its plan span, in SQL too');
		} finally {
			await client.end();
		}
	});
});

describe('hot standby (primary and standby clusters)', () => {
	let primary;
	let standby;
	let receiver;

	before(async () => {
		receiver = await startReceiver({ grpc: false });
		primary = await startTraced();
		await primary.psql("CREATE TABLE standby_t (id int); INSERT INTO standby_t VALUES (1), (2);", { db: 'app' });
		standby = await startCluster({
			standbyOf: primary,
			settings: {
				shared_preload_libraries: 'traceprof',
				'traceprof.otlp_endpoint': receiver.httpEndpoint,
				'traceprof.export_interval': String(EXPORT_INTERVAL_MS),
			},
		});
	});

	after(async () => {
		if (standby)
			await standby.stop();
		if (primary)
			await primary.stop();
		if (receiver)
			await receiver.close();
	});

	test('8. a hot standby exports the spans of its read-only statements (the exporter starts once it is consistent)', async () => {
		const client = await connect(standby);
		try {
			assert.equal((await client.query('SELECT pg_is_in_recovery() AS r')).rows[0].r, true);
			const ctx = newContext();
			await waitFor('standby_t replicated', async () =>
				(await client.query("SELECT to_regclass('standby_t') IS NOT NULL AS ok")).rows[0].ok);
			const res = await client.query(`SELECT count(*)::int AS n FROM standby_t /*traceparent='${ctx.header}'*/`);
			assert.equal(res.rows[0].n, 2);
			// The standby copied the primary's settings: a plan span comes too.
			const span = (await waitForSpans(receiver, ctx.traceId, 2)).find((x) => x.kind === SpanKind.SERVER);
			assert.equal(span.name, 'SELECT standby_t');
			assert.equal(span.parentSpanId, ctx.spanId);
			const exporter = await client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'traceprof exporter'");
			assert.equal(exporter.rows[0].n, 1, 'the exporter runs on the standby');
		} finally {
			await client.end();
		}
	});
});

describe('without the preload (own cluster)', () => {
	let cluster;

	before(async () => {
		cluster = await startCluster();
	});

	after(async () => {
		if (cluster)
			await cluster.stop();
	});

	test('10. CREATE EXTENSION, LOAD and a restore-style CREATE EXTENSION fail with what to do; nothing crashes', async () => {
		const client = await connect(cluster);
		try {
			const wantsPreload = (err) => {
				assert.equal(err.code, '55000', `SQLSTATE of: ${err.message}`);
				assert.match(err.message, /traceprof must be loaded via shared_preload_libraries/);
				assert.match(err.hint ?? '', /shared_preload_libraries.*restart/);
				return true;
			};
			await assert.rejects(client.query('CREATE EXTENSION traceprof'), wantsPreload);
			await assert.rejects(client.query("LOAD 'traceprof'"), wantsPreload);
			// pg_restore creates functions without checking their bodies: the
			// library is loaded, and refused, at the first call at the latest.
			await client.query('SET check_function_bodies = off');
			let created = true;
			try {
				await client.query('CREATE EXTENSION traceprof');
			} catch (err) {
				wantsPreload(err);
				created = false;
			}
			if (created)
				await assert.rejects(client.query('SELECT * FROM traceprof.stats'), wantsPreload);
			assert.equal((await client.query('SELECT 1 AS one')).rows[0].one, 1, 'the session goes on');
		} finally {
			await client.end();
		}
		assert.doesNotMatch(cluster.readLog(), /terminated by signal|server process .* was terminated|PANIC/);
	});
});

describe('hooks chained under other extensions (own cluster)', () => {
	let cluster;

	before(async () => {
		// auto_explain's executor hooks under ours (we call them as the
		// previous holder), pg_stat_statements' over ours (it calls ours);
		// normalize.test.js has pg_stat_statements under.
		cluster = await startTraced({
			shared_preload_libraries: 'auto_explain,traceprof,pg_stat_statements',
			'auto_explain.log_min_duration': '0',
			'auto_explain.log_nested_statements': 'on',
			'pg_stat_statements.track': 'all',
			'traceprof.track': 'all',
		});
		await cluster.psql('CREATE EXTENSION pg_stat_statements;', { db: 'app' });
	});

	after(async () => {
		if (cluster)
			await cluster.stop();
	});

	test('11b. utility statements keep their query id under pg_stat_statements, which zeroes it before calling our hook: ' +
		'traceprof.query_id is pg_stat_statements\' queryid', async () => {
		const client = await connect(cluster);
		try {
			await client.query('SELECT pg_stat_statements_reset()');
			const ctx = newContext();
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			const statements = ['CREATE TABLE ids_11b (x int)', 'VACUUM ids_11b', 'BEGIN', 'SELECT 1 AS inside', 'COMMIT',
				'DROP TABLE ids_11b'];
			await client.query(`CREATE TABLE ids_11b_pl (x int);
				CREATE PROCEDURE ids_11b_util() LANGUAGE plpgsql AS $$ BEGIN TRUNCATE ids_11b_pl; ANALYZE ids_11b_pl; END $$`);
			for (const sql of statements)
				await client.query(sql);
			// PL/pgSQL runs its statements from cached plans built from a copy
			// of the parsed statement: matched by kind, place and text, not
			// by the node's address (helper-103's review: no id before).
			await client.query('CALL ids_11b_util()');
			await client.query('RESET traceprof.traceparent');
			const spans = (await client.query("SELECT query, attributes->>'traceprof.query_id' AS id FROM traceprof.spans " +
				"WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time", [ctx.traceId])).rows;
			const pgss = new Map((await client.query('SELECT query, queryid::text AS id FROM pg_stat_statements')).rows
				.map((r) => [r.query, r.id]));
			for (const sql of statements.filter((q) => !q.startsWith('SELECT'))) {
				const span = spans.find((r) => r.query === sql);
				assert.ok(span, `a span for ${sql}: ${JSON.stringify(spans)}`);
				assert.ok(pgss.has(sql), `pg_stat_statements has ${sql}: ${JSON.stringify([...pgss.keys()])}`);
				assert.equal(span.id, pgss.get(sql), `${sql}: the span's query id is pg_stat_statements' queryid`);
			}
			const nested = (await client.query("SELECT query, attributes->>'traceprof.query_id' AS id FROM traceprof.spans " +
				"WHERE trace_id = $1 AND kind = 'internal' AND query IN ('TRUNCATE ids_11b_pl', 'ANALYZE ids_11b_pl')",
			[ctx.traceId])).rows;
			assert.equal(nested.length, 2, `the procedure's two statements: ${JSON.stringify(nested)}`);
			for (const span of nested) {
				assert.ok(pgss.has(span.query), `pg_stat_statements has ${span.query}`);
				assert.equal(span.id, pgss.get(span.query), `${span.query} in PL/pgSQL: the span's query id is pg_stat_statements' queryid`);
			}
		} finally {
			await client.end();
		}
	});

	test('11. every extension sees each statement: traceprof spans, pg_stat_statements counts, auto_explain plans', async () => {
		const client = await connect(cluster);
		try {
			await client.query('CREATE TABLE chained_t (id int PRIMARY KEY, v text)');
			await client.query(`CREATE FUNCTION chained_count() RETURNS bigint LANGUAGE sql
				AS 'SELECT count(*) FROM chained_t WHERE v <> ''nested_marker'''`);
			await client.query('SELECT pg_stat_statements_reset()');
			const logStart = cluster.readLog().length;
			const ctx = newContext();
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await client.query("INSERT INTO chained_t SELECT g, 'v' || g FROM generate_series(1, 5) g");
			await client.query({ text: 'SELECT v FROM chained_t WHERE id = $1', values: [3] });
			await client.query('SELECT chained_count() AS n');
			await client.query('CREATE INDEX chained_t_v ON chained_t (v)');
			await client.query('RESET traceprof.traceparent');

			const spans = (await client.query(
				'SELECT name, kind, parent_span_id FROM traceprof.spans WHERE trace_id = $1 ORDER BY start_time',
				[ctx.traceId])).rows;
			const server = spans.filter((s) => s.kind === 'server');
			assert.deepEqual(server.map((s) => s.name),
				['INSERT chained_t', 'SELECT chained_t', 'SELECT', 'CREATE INDEX chained_t'], JSON.stringify(spans));
			assert.ok(server.every((s) => s.parent_span_id === ctx.spanId), 'children of the caller\'s span');
			assert.ok(spans.some((s) => s.kind === 'internal' && s.name === 'SELECT chained_t'),
				`the function's statement has its own span under track = all: ${JSON.stringify(spans)}`);

			const calls = (await client.query(
				"SELECT query, calls FROM pg_stat_statements WHERE query ~ 'chained_t|chained_count' ORDER BY query")).rows;
			const callsOf = (re) => calls.filter((r) => re.test(r.query)).reduce((n, r) => n + Number(r.calls), 0);
			assert.equal(callsOf(/^INSERT INTO chained_t/), 1, JSON.stringify(calls));
			assert.equal(callsOf(/^SELECT v FROM chained_t WHERE id = \$1/), 1, JSON.stringify(calls));
			assert.equal(callsOf(/^SELECT count\(\*\) FROM chained_t WHERE v <> \$1/), 1, 'pg_stat_statements sees the nested statement (track = all)');
			assert.equal(callsOf(/^CREATE INDEX chained_t_v/), 1, 'and the utility statement');

			const log = await waitFor('auto_explain\'s plans in the server log', () => {
				const text = cluster.readLog().slice(logStart);
				return /duration: .* plan:[\s\S]*Query Text: SELECT v FROM chained_t WHERE id = \$1/.test(text) ? text : null;
			});
			assert.match(log, /Query Text: INSERT INTO chained_t/);
			assert.match(log, /Query Text: SELECT count\(\*\) FROM chained_t WHERE v <> 'nested_marker'/,
				'auto_explain sees the nested statement');
		} finally {
			await client.end();
		}
	});
});
