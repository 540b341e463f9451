'use strict';
// Edges of the traceprof exporter background worker (commit ba9b30c):
//
//  1. Retry-After counts only on answers that are retried: a 200 carrying
//     Retry-After does not hold the next spans back, nor does an interim
//     103's before a 503 (1b);
//  2. a reload (pg_reload_conf) keeps a collector's Retry-After while the
//     endpoint and protocol stay the same; a new endpoint is tried at once;
//     the profile uploader keeps more samples than one upload takes in
//     shared memory behind a Retry-After (2c);
//  3. traceprof.otlp_endpoint is parsed as a URL: the /v1/traces suffix goes
//     before a query string, a port that is no number is refused, an
//     upper-case scheme is taken;
//  4. no byte that is not UTF-8 reaches a payload: resource attributes and
//     service_name that are not UTF-8 are refused by ALTER SYSTEM, and role
//     and database names written raw from a SQL_ASCII database become "?"
//     in the OTLP payload and in traceprof.spans;
//  5. the last drain at shutdown is bounded to about 2 s in all, not per
//     batch, against a collector that is slow but answers 200;
//  6. a batch refused with 413 (a proxy's body limit) goes again in
//     halves: every span arrives, and only a span too large alone is
//     dropped and counted (before: the whole batch was dropped); the
//     size refused is remembered, so the next batch goes in requests
//     under it without being refused again (6d);
//  7. the profile uploader behind a Pyroscope body limit (413): a profile
//     goes again in parts of its samples (same series and window), every
//     sample once; a part taken only in part counts its stored samples as
//     exported and dropped in proportion to the weight that arrived; one
//     refused even as single samples is dropped and the uploader goes on
//     (its own cluster, so that the sample counters start at zero); the
//     size refused is remembered while the endpoint stays, so a later
//     profile as large goes in parts without being refused first (7e).
//
// One real PostgreSQL 15 cluster for the file (shared_preload_libraries =
// 'traceprof', exporter every 100 ms), restarted by test 5; the
// capture receivers of lib/receiver.js as collectors, every payload decoded
// by @opentelemetry/otlp-transformer's generated root (lib/otlp.js).  Waits
// poll a condition with a deadline; the only sleeps are the short windows
// in which something must NOT happen.  Each test says which old behaviour
// (before ba9b30c) it catches.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');

const { sleep, newContext, waitFor, startTraced, connect, tracedSelect: tracedSelectIn } = require('./lib/traced');
const { startReceiver } = require('./lib/receiver');
const { freePort } = require('./lib/cluster');
const { decodeTraces, encodeTraceResponse } = require('./lib/otlp');
const { startIngest } = require('./lib/ingest');
const { decodePprof } = require('./lib/pprof');

const EXPORT_INTERVAL_MS = 100;
const QUIET_WINDOW_MS = 3000;	// how long "no request" is watched for

let cluster;
let receiver;	// the collector the cluster starts with
let other;		// a second collector, for a change of endpoint
let monitor;	// a session of the test's own (sample_rate 0: no spans of its own)

before(async () => {
	receiver = await startReceiver({ grpc: false });
	other = await startReceiver({ grpc: false });
	cluster = await startTraced({
		'traceprof.otlp_endpoint': receiver.httpEndpoint,
		'traceprof.export_interval': String(EXPORT_INTERVAL_MS),
		'traceprof.otlp_timeout': '5000',
		'traceprof.track_planning': 'off',	// one span per statement
	});
	monitor = await connect(cluster);
});

after(async () => {
	if (monitor)
		await monitor.end().catch(() => {});
	if (cluster)
		await cluster.stop();
	await Promise.all([receiver, other].filter(Boolean).map((r) => r.close()));
});

/** traceprof.stats with the counters as Numbers. */
async function stats() {
	const row = (await monitor.query('SELECT * FROM traceprof.stats')).rows[0];
	const out = { ...row };
	for (const k of ['spans_created', 'spans_dropped', 'spans_exported', 'export_failures', 'spans_pending'])
		out[k] = Number(row[k]);
	return out;
}

/** Wait until nothing waits in the ring (earlier tests' spans are out). */
const drained = () => waitFor((last) => `an empty ring (last: ${JSON.stringify(last)})`, async () => {
	const s = await stats();
	return s.spans_pending === 0 ? s : null;
});

const tracedSelect = (alias) => tracedSelectIn(cluster, alias);

/** The requests of r that carry at least one span of traceId. */
const requestsWith = (r, traceId) =>
	r.requests.filter((q) => decodeTraces(q.body).spans.some((s) => s.traceId === traceId));

/** Wait until r holds a span of traceId; returns the spans of that trace. */
function waitForSpan(r, traceId, timeoutMs = 10000) {
	return waitFor(`a span of trace ${traceId} at the receiver (${r.requests.length} request(s) so far)`, () => {
		const spans = r.spans().filter((s) => s.traceId === traceId);
		return spans.length ? spans : null;
	}, timeoutMs);
}

/**
 * ALTER SYSTEM SET (value null: RESET) each setting, reload, and wait until
 * a new session sees them: the postmaster has then signalled the exporter.
 */
async function reconfigure(settings) {
	for (const [name, value] of Object.entries(settings))
		await monitor.query(value === null ? `ALTER SYSTEM RESET ${name}` : `ALTER SYSTEM SET ${name} = '${value}'`);
	await monitor.query('SELECT pg_reload_conf()');
	const want = Object.keys(settings);
	await waitFor(`new sessions to see ${JSON.stringify(settings)}`, async () => {
		const c = await connect(cluster);
		try {
			const rows = (await c.query('SELECT name, setting, boot_val FROM pg_settings WHERE name = ANY($1)', [want])).rows;
			return rows.length === want.length &&
				rows.every((r) => r.setting === (settings[r.name] === null ? r.boot_val : String(settings[r.name])));
		} finally {
			await c.end();
		}
	});
}

/** A CPU-heavy traced statement in a fresh session of the app role: samples to upload. */
async function profiledStatement() {
	const client = await connect(cluster, 'app');
	try {
		await client.query(`SET traceprof.traceparent = '${newContext().header}'`);
		await client.query('SELECT sum(g::numeric * g) FROM generate_series(1, 1500000) AS g');
	} finally {
		await client.end();
	}
}

/** The SQL_ASCII database 4b and 4c use, created once. */
let asciiDb = null;
const asciiDatabase = () => (asciiDb ??= monitor.query(
	"CREATE DATABASE enc_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"));

test('1. a 200 that carries Retry-After: 600 does not hold back the next spans (they go in the next round)', async () => {
	// Old behaviour caught: Retry-After was honoured on any answer, so this
	// 200 stopped export for 10 minutes and the second span stayed pending.
	await drained();
	receiver.enqueue({ headers: { 'retry-after': '600' } });
	const first = await tracedSelect('first_of_two');
	await waitFor('the request answered 200 + Retry-After: 600', () => requestsWith(receiver, first.traceId).length >= 1);
	const answered = requestsWith(receiver, first.traceId)[0];
	assert.equal(answered.behaviour.headers['retry-after'], '600');
	const second = await tracedSelect('second_of_two');
	await waitForSpan(receiver, second.traceId);
	const next = requestsWith(receiver, second.traceId)[0];
	assert.ok(next.time > answered.endTime, 'the second span went in a later request');
	await drained();
	assert.equal(requestsWith(receiver, first.traceId).length, 1, 'the first span, taken with a 200, is not sent again');
});

test('1b. a 503 after a 103 Early Hints carrying Retry-After: 600 is retried after the backoff, by the exporter and the uploader', async (t) => {
	// Old behaviour caught: the interim answer's Retry-After was taken as
	// the 503's, beyond the budget, so export (and upload) held for 10 minutes.
	await drained();
	receiver.enqueue({ status: 503, interim: { 'retry-after': '600' } });
	const traced = await tracedSelect('after_early_hints');
	await waitFor('the span sent again after the 503', () => requestsWith(receiver, traced.traceId).length >= 2);
	const [refused, retried] = requestsWith(receiver, traced.traceId);
	assert.equal(refused.behaviour.status, 503);
	assert.ok(retried.time - refused.endTime < 5000, 'within the backoff, not the 103\'s Retry-After');

	const ingest = await startIngest();
	t.after(async () => {
		await reconfigure({ 'traceprof.pyroscope_url': null, 'traceprof.upload_interval': null });
		await ingest.close();
	});
	await reconfigure({ 'traceprof.pyroscope_url': ingest.url, 'traceprof.upload_interval': '200' });
	ingest.enqueue({ status: 503, interim: { 'retry-after': '600' } });
	await profiledStatement();
	await ingest.waitFor((requests) => requests.length >= 2, 15000);
});

test('2. a reload without a change keeps a 429\'s Retry-After (no request for its duration); a new endpoint is tried at once', async (t) => {
	// Old behaviour caught: every reload rebuilt the target and forgot the
	// Retry-After, so the held batch was sent again right after
	// pg_reload_conf() (within ~2 s, here within one 100 ms round).
	t.after(() => reconfigure({ 'traceprof.otlp_endpoint': receiver.httpEndpoint }));
	await drained();
	const before_ = await stats();
	receiver.enqueue({ status: 429, headers: { 'retry-after': '600' } });
	const ctx = await tracedSelect('throttled');
	await waitFor('the request answered 429', () => requestsWith(receiver, ctx.traceId).length >= 1);
	// Retry-After (600 s) is beyond traceprof.otlp_timeout (5 s): the export gives up at once.
	await waitFor('the throttled export to count as failed', async () => (await stats()).export_failures > before_.export_failures);
	const count = receiver.requests.length;

	await monitor.query('SELECT pg_reload_conf()');
	await sleep(QUIET_WINDOW_MS);
	assert.equal(receiver.requests.length, count,
		`no request after a reload that changed nothing, while Retry-After: 600 lasts (got ${
			receiver.requests.slice(count).map((r) => `${r.path} ${r.behaviour.status ?? 200}`).join(', ')})`);
	assert.ok((await stats()).spans_pending >= 1, 'the throttled span still waits');

	// Another collector: no Retry-After of its own, tried at once.
	await reconfigure({ 'traceprof.otlp_endpoint': other.httpEndpoint });
	const moved = await waitForSpan(other, ctx.traceId, 10000);
	assert.equal(moved.length, 1, 'the held span reaches the new endpoint');
	assert.equal(receiver.requests.length, count, 'and nothing more went to the throttling one');
	await drained();
});

test('2d. one WARNING per streak of failures, and a new one for a new endpoint failing too', async (t) => {
	// The streak outlived the change: the second endpoint's failures were
	// only counted, as if they were the first one's.
	t.after(async () => {
		await reconfigure({ 'traceprof.otlp_endpoint': receiver.httpEndpoint });
		await drained();
	});
	const [first, second] = [await freePort(), await freePort()];
	const logFrom = cluster.readLog().length;
	const failedOnce = async (alias) => {
		const before_ = await stats();
		await tracedSelect(alias);
		await waitFor(`an export failure after ${alias}`, async () => (await stats()).export_failures > before_.export_failures);
	};
	await reconfigure({ 'traceprof.otlp_endpoint': `http://127.0.0.1:${first}` });
	await failedOnce('first_down');
	await failedOnce('first_down_again');
	await reconfigure({ 'traceprof.otlp_endpoint': `http://127.0.0.1:${second}` });
	await failedOnce('second_down');
	const warnings = cluster.readLog().slice(logFrom).split('\n').filter((l) => /WARNING:.*cannot export spans/.test(l));
	assert.equal(warnings.length, 2, `one per endpoint:\n${warnings.join('\n')}`);
	assert.match(warnings[0], new RegExp(`127\\.0\\.0\\.1:${first}`));
	assert.match(warnings[1], new RegExp(`127\\.0\\.0\\.1:${second}`));
});

test('2b. the profile uploader too: a reload without a change keeps a 429\'s Retry-After; a bad pyroscope_url is refused', async (t) => {
	// Old behaviour caught: the uploader rebuilt its configuration on every
	// reload and uploaded again ~1 s after pg_reload_conf(); pyroscope_url
	// had no check, so a query string (or no host) failed only at upload.
	const ingest = await startIngest();
	t.after(async () => {
		await reconfigure({ 'traceprof.pyroscope_url': null, 'traceprof.upload_interval': null });
		await ingest.close();
	});
	for (const bad of [`${ingest.url}/?token=x`, 'http://', `${ingest.url.replace(/:\d+$/, ':0')}`])
		await assert.rejects(monitor.query(`ALTER SYSTEM SET traceprof.pyroscope_url = '${bad}'`),
			(e) => e.code === '22023' && /no query string/.test(e.detail), bad);
	await reconfigure({ 'traceprof.pyroscope_url': ingest.url, 'traceprof.upload_interval': '200' });
	ingest.enqueue({ status: 429, headers: { 'retry-after': '600' } });
	await profiledStatement();
	await ingest.waitFor((requests) => requests.length >= 1, 15000);
	await profiledStatement();	// more samples wait behind the Retry-After
	await monitor.query('SELECT pg_reload_conf()');
	await sleep(QUIET_WINDOW_MS);
	assert.equal(ingest.requests.length, 1,
		`no upload after a reload that changed nothing, while Retry-After: 600 lasts (got ${ingest.requests.length})`);
});

test('2c. a 429 with Retry-After: 600 on a backlog of more than one upload (8192 samples): only the refused upload is dropped, the rest waits and goes to the next server', { timeout: 120000 }, async (t) => {
	// Old behaviour caught: the uploader drained the ring in a loop while
	// each upload was full; after the 429 every further batch failed at once
	// ("not sent": Retry-After) and was dropped too, so the whole backlog
	// was lost instead of waiting in shared memory as documented.
	const BATCH = 8192;	// SAMPLES_PER_UPLOAD
	const throttling = await startIngest();
	const next = await startIngest();
	t.after(async () => {
		await reconfigure({ 'traceprof.pyroscope_url': null, 'traceprof.upload_interval': null });
		await Promise.all([throttling.close(), next.close()]);
	});
	// No upload while the backlog builds up.
	await reconfigure({ 'traceprof.pyroscope_url': throttling.url, 'traceprof.upload_interval': '3600000' });
	const sampleStats = async () => {
		const row = (await monitor.query('SELECT samples_stored, samples_dropped, samples_exported FROM traceprof.stats')).rows[0];
		return { stored: Number(row.samples_stored), dropped: Number(row.samples_dropped), exported: Number(row.samples_exported) };
	};
	const start = await sampleStats();
	// Wall samples at 250 Hz of sessions sleeping in traced statements:
	// each of 8 takes ~1250 (its own buffer holds 2048).
	const traceIds = new Set();
	const sleepers = async () => Promise.all(Array.from({ length: 8 }, async () => {
		const ctx = newContext();
		traceIds.add(ctx.traceId);
		const client = await connect(cluster, 'postgres');
		try {
			await client.query("SET traceprof.profile_mode = 'wall'");
			await client.query('SET traceprof.sample_hz = 250');
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await client.query('SELECT pg_sleep(5)');
		} finally {
			await client.end();
		}
	}));
	let built;
	do {
		await sleepers();
		built = await sampleStats();
	} while (built.stored - start.stored < BATCH + 1000);

	throttling.enqueue({ status: 429, headers: { 'retry-after': '600' } });
	await reconfigure({ 'traceprof.upload_interval': '200' });
	await throttling.waitFor((requests) => requests.length >= 1, 15000, 'the throttled upload');
	await waitFor('the throttled batch to count as dropped', async () => (await sampleStats()).dropped > built.dropped);
	await sleep(QUIET_WINDOW_MS);
	assert.equal(throttling.requests.length, 1, 'no upload while Retry-After: 600 lasts');
	const after429 = await sampleStats();
	assert.equal(after429.dropped - built.dropped, BATCH,
		`only the refused upload's ${BATCH} samples are dropped (stored ${built.stored - start.stored} since the start)`);
	assert.equal(after429.exported, built.exported, 'nothing exported meanwhile');

	// Another server: no Retry-After of its own, the samples that waited go there.
	await reconfigure({ 'traceprof.pyroscope_url': next.url });
	const uploaded = await waitFor('the waiting samples of the sleeping sessions at the next server', () => {
		let n = 0;
		for (const r of next.requests)
			for (const smp of decodePprof(r.body).samples)
				if (traceIds.has(smp.labels.trace_id))
					n += smp.values[0];
		return n;
	}, 20000);
	assert.ok(uploaded > 0, `samples of the sleeping sessions uploaded after the Retry-After's server was left (${uploaded})`);
});

test('3a. otlp_endpoint http://127.0.0.1:PORT?x=1: requests go to /v1/traces?x=1 (the suffix before the query string)', async (t) => {
	// Old behaviour caught: the suffix was appended to the whole string,
	// so the path was "/?x=1/v1/traces".
	t.after(() => reconfigure({ 'traceprof.otlp_endpoint': receiver.httpEndpoint }));
	await drained();
	await reconfigure({ 'traceprof.otlp_endpoint': `${receiver.httpEndpoint}?x=1` });
	const ctx = await tracedSelect('with_query');
	await waitForSpan(receiver, ctx.traceId);
	assert.deepEqual(requestsWith(receiver, ctx.traceId).map((r) => r.path), ['/v1/traces?x=1']);
});

test('3b. otlp_endpoint http://127.0.0.1:abc (a port that is no number): refused by ALTER SYSTEM, SQLSTATE 22023', async (t) => {
	// Old behaviour caught: ALTER SYSTEM accepted it (only the scheme and a
	// leading ':' of the host were checked).
	t.after(() => monitor.query('ALTER SYSTEM RESET traceprof.otlp_endpoint'));
	await assert.rejects(monitor.query("ALTER SYSTEM SET traceprof.otlp_endpoint = 'http://127.0.0.1:abc'"),
		(e) => {
			assert.equal(e.code, '22023', `SQLSTATE of ${e.message}`);
			assert.match(e.message, /invalid value for parameter "traceprof.otlp_endpoint"/);
			return true;
		});
});

test('3c. otlp_endpoint HTTP://127.0.0.1:PORT (an upper-case scheme): accepted, and spans arrive at /v1/traces', async (t) => {
	// Old behaviour caught: the scheme was compared case-sensitively, so
	// ALTER SYSTEM refused "HTTP://".
	t.after(() => reconfigure({ 'traceprof.otlp_endpoint': receiver.httpEndpoint }));
	await drained();
	await reconfigure({ 'traceprof.otlp_endpoint': `HTTP://127.0.0.1:${receiver.httpPort}` });
	const ctx = await tracedSelect('upper_case_scheme');
	await waitForSpan(receiver, ctx.traceId);
	assert.deepEqual(requestsWith(receiver, ctx.traceId).map((r) => r.path), ['/v1/traces']);
});

test('3d. otlp_endpoint on a gRPC-only port with the default protocol: last_error says it seems to speak gRPC, ' +
	'and names traceprof.otlp_protocol (not the binaries\' environment variable)', async (t) => {
	const http2 = require('node:http2');
	const server = http2.createServer();
	server.on('stream', (stream) => stream.respond({ ':status': 200 }, { endStream: true }));
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	t.after(async () => {
		await reconfigure({ 'traceprof.otlp_endpoint': receiver.httpEndpoint });
		server.close();
	});
	await drained();
	await reconfigure({ 'traceprof.otlp_endpoint': `http://127.0.0.1:${server.address().port}` });
	await tracedSelect('grpc_only_port');
	const error = await waitFor('the failure in last_error', async () => {
		const e = (await monitor.query('SELECT last_error FROM traceprof.stats')).rows[0].last_error;
		return e && /seems to speak gRPC/.test(e) ? e : null;
	});
	assert.match(error, /set traceprof\.otlp_protocol = 'grpc'\)$/);
});

test('3e. otlp_protocol grpc against an HTTP/1.1 receiver: last_error says no HTTP/2 came back and names the http/protobuf setting', async (t) => {
	t.after(() => reconfigure({ 'traceprof.otlp_protocol': 'http/protobuf' }));
	await drained();
	await reconfigure({ 'traceprof.otlp_protocol': 'grpc', 'traceprof.otlp_endpoint': `http://127.0.0.1:${receiver.httpPort}` });
	await tracedSelect('grpc_to_http1');
	const error = await waitFor('the failure in last_error', async () => {
		const e = (await monitor.query('SELECT last_error FROM traceprof.stats')).rows[0].last_error;
		return e && /no HTTP\/2 answer/.test(e) ? e : null;
	});
	assert.match(error, /set traceprof\.otlp_protocol = 'http\/protobuf'\)/);
});

test('4a. resource_attributes deployment.environment=caf%E9 (not UTF-8 once decoded): refused by ALTER SYSTEM', async (t) => {
	// Old behaviour caught: ALTER SYSTEM accepted it, and every request then
	// carried the byte 0xE9 in a resource attribute.
	t.after(() => monitor.query('ALTER SYSTEM RESET traceprof.resource_attributes'));
	await assert.rejects(monitor.query("ALTER SYSTEM SET traceprof.resource_attributes = 'deployment.environment=caf%E9'"),
		(e) => {
			assert.equal(e.code, '22023', `SQLSTATE of ${e.message}`);
			assert.match(e.detail ?? '', /deployment\.environment=caf%E9.*is not valid UTF-8 once percent-decoded/);
			return true;
		});
});

test('4b. service_name with the raw byte 0xE9 (set from a SQL_ASCII database): refused by its check hook', async (t) => {
	// Old behaviour caught: ALTER SYSTEM accepted it (no check hook), and
	// every request then carried it as service.name.
	t.after(() => monitor.query('ALTER SYSTEM RESET traceprof.service_name'));
	await asciiDatabase();
	const ascii = await connect(cluster, 'postgres', 'enc_ascii');
	try {
		// E'\xe9' is the byte 0xE9: a SQL_ASCII database takes it as is.  The
		// session's client_encoding too: the error message quotes the value,
		// which would not convert to UTF8 (22021 instead of the refusal).
		await ascii.query("SET client_encoding = 'SQL_ASCII'");
		await assert.rejects(ascii.query("ALTER SYSTEM SET traceprof.service_name = E'caf\\xe9'"), (e) => {
			assert.equal(e.code, '22023', `SQLSTATE of ${e.message}`);
			assert.match(e.message, /invalid value for parameter "traceprof.service_name"/);
			assert.equal(e.detail, 'The value is not valid UTF-8.');
			return true;
		});
	} finally {
		await ascii.end();
	}
});

test('4c. a role "caf\\xE9" in a UTF-8 database "d\\xE9mo" (names written raw from SQL_ASCII): "caf?" and "d?mo" in the OTLP payload and in traceprof.spans', async () => {
	// Old behaviour caught: a UTF-8 database's spans kept the names' raw
	// bytes: invalid protobuf strings on the wire (a collector refuses the
	// whole request) and invalid UTF-8 in traceprof.spans.
	await drained();
	await monitor.query('SELECT pg_reload_conf()');	// whatever 4a and 4b left is not taken
	await asciiDatabase();
	// A role and a UTF-8 database named with the raw byte 0xE9, then a traced
	// statement there as that role.  psql passes the script's bytes through.
	const ctx = newContext();
	const e9 = (s) => Buffer.from(s.replace(/#/g, '\xe9'), 'latin1');
	await cluster.psql(Buffer.concat([
		e9('CREATE ROLE "caf#" LOGIN;\n'),
		e9("CREATE DATABASE \"d#mo\" ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;\n"),
		e9('\\connect "d#mo" "caf#"\n'),
		Buffer.from(`SET traceprof.traceparent = '${ctx.header}';\nSELECT 1 AS raw_names;\n`),
	]), { db: 'enc_ascii' });

	const [span] = await waitForSpan(receiver, ctx.traceId);
	assert.equal(span.attributes['db.namespace'], 'd?mo', 'the database name, its invalid byte as "?"');
	assert.equal(span.attributes['traceprof.user'], 'caf?', 'the role name, its invalid byte as "?"');
	assert.equal(span.resource.attributes['service.name'], 'postgresql', 'the refused service_name was not taken');
	assert.equal(span.resource.attributes['deployment.environment'], undefined, 'the refused resource attribute was not taken');
	const body = requestsWith(receiver, ctx.traceId)[0].body;
	assert.ok(!body.includes(Buffer.from('caf\xe9', 'latin1')) && !body.includes(Buffer.from('d\xe9mo', 'latin1')),
		'no raw name bytes in the payload');

	const rows = (await monitor.query('SELECT username, dbname FROM traceprof.spans WHERE trace_id = $1', [ctx.traceId])).rows;
	assert.deepEqual(rows, [{ username: 'caf?', dbname: 'd?mo' }], 'traceprof.spans, read in a UTF-8 database');
	// Read in a LATIN1 database, through the UTF-8 to LATIN1 conversion: the
	// bytes after the bad one stay (it once skipped the 3 bytes 0xE9 claims).
	await monitor.query("CREATE DATABASE enc_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
	await cluster.psql('CREATE EXTENSION traceprof;', { db: 'enc_latin1' });
	const latin1 = await connect(cluster, 'postgres', 'enc_latin1');
	try {
		const read = (await latin1.query('SELECT username, dbname FROM traceprof.spans WHERE trace_id = $1', [ctx.traceId])).rows;
		assert.deepEqual(read, [{ username: 'caf?', dbname: 'd?mo' }], 'traceprof.spans, read in a LATIN1 database');
	} finally {
		await latin1.end();
	}
	await drained();
});

test('4d. host.name and service.instance.id (host:port) on the resource: the server\'s by default, so that servers sharing a service name are told apart, on one host too; traceprof.resource_attributes\' own win', async (t) => {
	t.after(() => reconfigure({ 'traceprof.resource_attributes': null }));
	await drained();
	const host = require('node:os').hostname();
	let ctx = await tracedSelect('host_default');
	let [span] = await waitForSpan(receiver, ctx.traceId);
	assert.equal(span.resource.attributes['host.name'], host);
	assert.equal(span.resource.attributes['service.instance.id'], `${host}:${cluster.port}`);
	await reconfigure({ 'traceprof.resource_attributes': 'host.name=db-primary-1' });
	ctx = await tracedSelect('host_set');
	[span] = await waitForSpan(receiver, ctx.traceId);
	assert.equal(span.resource.attributes['host.name'], 'db-primary-1');
	assert.equal(span.resource.attributes['service.instance.id'], `db-primary-1:${cluster.port}`,
		'the instance id follows the host name set');
	await reconfigure({ 'traceprof.resource_attributes': 'service.instance.id=orders-db-a' });
	ctx = await tracedSelect('instance_set');
	[span] = await waitForSpan(receiver, ctx.traceId);
	assert.equal(span.resource.attributes['service.instance.id'], 'orders-db-a');
	assert.equal(span.resource.attributes['host.name'], host);
});

test('5. shutdown with 25 spans pending, batch size 1, a collector answering 200 after 1 s each: done within 10 s, at most 3 requests', { timeout: 90000 }, async () => {
	// Old behaviour caught: each batch of the last drain had its own 2 s, so
	// the 25 batches took ~25 s (25 requests) before the server could stop.
	const N = 25;
	await drained();
	// No round before the shutdown: only the last drain exports.
	await reconfigure({ 'traceprof.export_batch_size': '1', 'traceprof.export_interval': '3600000' });
	receiver.setDefault({ delayMs: 1000 });
	const ctx = newContext();
	const client = await connect(cluster, 'app');
	try {
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		for (let i = 0; i < N; i++)
			await client.query(`SELECT ${i} AS pending_at_shutdown`);
	} finally {
		await client.end();
	}
	const pending = (await stats()).spans_pending;
	assert.ok(pending >= N, `the ${N} spans wait in the ring at shutdown (spans_pending ${pending})`);
	assert.equal(requestsWith(receiver, ctx.traceId).length, 0, 'none was exported before the shutdown');

	await monitor.end();
	monitor = null;
	const logFrom = cluster.readLog().length;
	const count = receiver.requests.length;
	await cluster.restart();
	const during = receiver.requests.slice(count);

	const log = cluster.readLog().slice(logFrom);
	const at = (re) => {
		const m = new RegExp(`^(\\d{4}-\\d\\d-\\d\\d) (\\d\\d:\\d\\d:\\d\\d\\.\\d{3}) UTC .*${re}`, 'm').exec(log);
		assert.ok(m, `server log line /${re}/:\n${log}`);
		return Date.parse(`${m[1]}T${m[2]}Z`);
	};
	const tookMs = at('database system is shut down') - at('received fast shutdown request');
	assert.ok(tookMs >= 0 && tookMs < 10000, `the shutdown took ${tookMs} ms (the postmaster waits for the drain)`);
	assert.ok(during.length >= 1, 'the last drain still sends what it can');
	assert.ok(during.length <= 3, `at most 3 requests of 1 s fit the drain's 2 s; got ${during.length}`);
	for (const r of during) {
		const spans = decodeTraces(r.body).spans;
		assert.equal(spans.length, 1, 'batch size 1 during the drain');
		assert.equal(spans[0].traceId, ctx.traceId);
	}

	receiver.setDefault({});
	monitor = await connect(cluster);
	await reconfigure({ 'traceprof.export_batch_size': null, 'traceprof.export_interval': String(EXPORT_INTERVAL_MS) });
});

/** N spans of one new trace, written by a session of their own; returns the trace's context. */
async function writeSpans(n, alias) {
	const ctx = newContext();
	const client = await connect(cluster, 'app');
	try {
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		for (let i = 0; i < n; i++)
			await client.query(`SELECT ${i} AS ${alias}`);
	} finally {
		await client.end();
	}
	return ctx;
}

test('5b. a shutdown after the collector refused a batch (400) still sends what waits: a refusal is no unreachable collector', { timeout: 90000 }, async () => {
	// Before, any refusal (a 400, a partial success, a span too large alone)
	// marked the exporter failing, and the last drain did not even try:
	// the spans waiting at a fast shutdown were lost with a healthy collector.
	await drained();
	receiver.enqueue({ status: 400, body: 'bad batch' });
	const refused = await tracedSelect('refused_before_shutdown');
	await waitFor('the refusal counted', async () => (await stats()).spans_dropped > 0 &&
		requestsWith(receiver, refused.traceId).length > 0);
	await reconfigure({ 'traceprof.export_interval': '3600000' });
	const N = 10;
	const ctx = await writeSpans(N, 'pending_after_a_refusal');
	assert.equal(requestsWith(receiver, ctx.traceId).length, 0, 'none was exported before the shutdown');

	await monitor.end();
	monitor = null;
	await cluster.restart();
	const got = receiver.spans().filter((sp) => sp.traceId === ctx.traceId).length;
	assert.equal(got, N, `the last drain sent the ${N} spans waiting`);
	monitor = await connect(cluster);
	await reconfigure({ 'traceprof.export_interval': String(EXPORT_INTERVAL_MS) });
});

test('5c. a reload while a backlog drains in full batches applies at once: later requests carry the new service.name', { timeout: 90000 }, async (t) => {
	// Before, the settings were rebuilt only between rounds, and a drain of
	// full batches never ended one: a busy server kept the old resource,
	// compression and timeout for as long as the backlog lasted.
	t.after(async () => {
		receiver.setDefault({});
		await reconfigure({ 'traceprof.service_name': null, 'traceprof.export_batch_size': null,
			'traceprof.export_interval': String(EXPORT_INTERVAL_MS) });
	});
	await drained();
	await reconfigure({ 'traceprof.export_batch_size': '8', 'traceprof.export_interval': '3600000' });
	const N = 240;
	const ctx = await writeSpans(N, 'backlog');
	receiver.setDefault({ delayMs: 100 });	// 30 batches: 3 s or more
	await reconfigure({ 'traceprof.export_interval': String(EXPORT_INTERVAL_MS) });
	await waitFor('the backlog\'s first request', () => requestsWith(receiver, ctx.traceId).length > 0);
	await reconfigure({ 'traceprof.service_name': 'after_reload' });
	await waitFor(`the ${N} spans at the receiver`,
		() => receiver.spans().filter((sp) => sp.traceId === ctx.traceId).length >= N, 60000);
	const services = requestsWith(receiver, ctx.traceId).map((r) => decodeTraces(r.body).spans[0].resource.attributes['service.name']);
	assert.equal(services[0], 'postgresql', `the drain began with the old settings: ${services.join(' ')}`);
	assert.equal(services.at(-1), 'after_reload', `the backlog's last requests go with the new ones: ${services.join(' ')}`);
});

test('5d. export switched off with spans waiting: counted as dropped, and a LOG line says how many', async (t) => {
	// Before, they were neither exported nor counted: spans_created no
	// longer added up to exported + dropped + pending.
	t.after(() => reconfigure({ 'traceprof.otlp_endpoint': receiver.httpEndpoint,
		'traceprof.export_interval': String(EXPORT_INTERVAL_MS) }));
	await drained();
	await reconfigure({ 'traceprof.export_interval': '3600000' });
	const N = 12;
	await writeSpans(N, 'waiting_when_switched_off');
	const before = await stats();
	assert.equal(before.spans_pending, N);
	const logFrom = cluster.readLog().length;
	await reconfigure({ 'traceprof.otlp_endpoint': '' });
	const after = await waitFor('the waiting spans counted as dropped', async () => {
		const s = await stats();
		return s.spans_dropped === before.spans_dropped + N ? s : null;
	});
	assert.equal(after.spans_pending, 0);
	await waitFor('the LOG line', () => cluster.readLog().slice(logFrom)
		.includes(`traceprof exporter: export switched off with ${N} spans not exported`));
});

/**
 * A collector behind a body limit, as nginx's client_max_body_size: 413
 * (answered from Content-Length before the body is read, as nginx does)
 * to a body above limit bytes, else 200.  requests: {length, status,
 * spans}, every body decoded, refused or not.  unavailable: {after: n,
 * headers}: once n more requests were taken, answer the next one 503.
 */
async function startLimited(limit) {
	const c = { requests: [], limit, unavailable: null };
	const server = http.createServer((req, res) => {
		const length = Number(req.headers['content-length']);
		let status = length > c.limit ? 413 : 200;
		let headers = {};
		if (status === 200 && c.unavailable && c.unavailable.after-- === 0) {
			status = 503;
			headers = c.unavailable.headers;
			c.unavailable = null;
		}
		const body = status === 413 ? Buffer.from('Request Entity Too Large') :
			status === 503 ? Buffer.alloc(0) : encodeTraceResponse();
		res.writeHead(status, { 'content-length': body.length, ...headers });
		res.end(body);
		// Recorded on arrival; the body, read after the answer, decoded at its end.
		const entry = { length, status, spans: [] };
		c.requests.push(entry);
		const chunks = [];
		req.on('data', (d) => chunks.push(d));
		req.on('end', () => {
			const raw = Buffer.concat(chunks);
			if (raw.length === length)
				entry.spans = decodeTraces(raw).spans;
		});
	});
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	c.url = `http://127.0.0.1:${server.address().port}`;
	c.delivered = (traceId) => c.requests.filter((r) => r.status === 200)
		.flatMap((r) => r.spans).filter((sp) => sp.traceId === traceId);
	c.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); });
	return c;
}

/**
 * Point the exporter at c, and hold export back (export_interval 1 h)
 * once a marker span has reached c; run statements (each a span of one
 * new trace) and then let the exporter go by setting the interval back:
 * the reload wakes it, and all the spans go in one batch.  Returns the
 * trace's context.
 */
async function exportAtOnce(c, statements, beforeRelease = () => {}) {
	await reconfigure({ 'traceprof.otlp_endpoint': c.url, 'traceprof.query_text': 'full' });
	const marker = await tracedSelect('limited_marker');
	await waitFor('the marker at the limited collector', () => c.delivered(marker.traceId).length > 0);
	await reconfigure({ 'traceprof.export_interval': '3600000' });
	const ctx = newContext();
	const client = await connect(cluster, 'app');
	try {
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		for (const sql of statements)
			await client.query(sql);
	} finally {
		await client.end();
	}
	beforeRelease();
	await reconfigure({ 'traceprof.export_interval': String(EXPORT_INTERVAL_MS) });
	return ctx;
}

async function restoreEndpoint() {
	await reconfigure({ 'traceprof.otlp_endpoint': receiver.httpEndpoint, 'traceprof.query_text': null });
}

test('6a. a batch refused with 413 goes again in halves: each of 24 spans arrives once, none dropped, no failure', async (t) => {
	// Old behaviour caught: a 413 was a refusal like a 400, so the whole
	// batch was dropped (spans_dropped +24, export_failures +1).
	const N = 24;
	await drained();
	const limited = await startLimited(4096);	// a span here is ~1 kB: a few per request
	t.after(() => limited.close());
	t.after(restoreEndpoint);
	const before = await stats();
	const statements = Array.from({ length: N }, (_, i) => `SELECT '${'x'.repeat(600)}' AS halves_${i}`);
	const ctx = await exportAtOnce(limited, statements);
	await waitFor(() => `${N} spans of the trace taken (${limited.delivered(ctx.traceId).length} so far)`,
		() => limited.delivered(ctx.traceId).length >= N);
	const after = await drained();

	const refused = limited.requests.filter((r) => r.status === 413 && r.spans.some((sp) => sp.traceId === ctx.traceId));
	assert.ok(refused.some((r) => r.spans.length === N), `the batch of ${N} went first and was refused`);
	const delivered = limited.delivered(ctx.traceId);
	assert.equal(delivered.length, N, 'each span delivered once');
	assert.equal(new Set(delivered.map((sp) => sp.spanId)).size, N, 'no span twice');
	for (const r of limited.requests.filter((q) => q.status === 200))
		assert.ok(r.length <= limited.limit, `a taken request (${r.length} bytes) is within the limit`);
	assert.equal(after.spans_dropped, before.spans_dropped, 'nothing dropped');
	assert.equal(after.export_failures, before.export_failures, 'no export failure');
	assert.equal(after.spans_exported - before.spans_exported, N + 1, 'the marker and the N spans exported');
});

test('6b. a span too large even alone is dropped and counted, with 413 in last_error; the other spans arrive', async (t) => {
	// Old behaviour caught: the whole batch of 7 was dropped with the one
	// span the proxy could never take.
	await drained();
	const limited = await startLimited(1300);	// requests: a small span ~0.6 kB, two ~1.1 kB; the big one alone ~1.6 kB
	t.after(() => limited.close());
	t.after(restoreEndpoint);
	const before = await stats();
	const statements = [];
	for (let i = 0; i < 6; i++) {
		statements.push(`SELECT 1 AS small_${i}`);
		if (i === 2)
			statements.push(`SELECT '${'y'.repeat(1000)}' AS too_big`);
	}
	const ctx = await exportAtOnce(limited, statements);
	await waitFor(() => `6 spans of the trace taken (${limited.delivered(ctx.traceId).length} so far)`,
		() => limited.delivered(ctx.traceId).length >= 6);
	const after = await waitFor('the big span dropped and counted', async () => {
		const s = await stats();
		return s.spans_pending === 0 && s.spans_dropped > before.spans_dropped ? s : null;
	});

	const delivered = limited.delivered(ctx.traceId);
	assert.deepEqual(delivered.map((sp) => sp.attributes['db.query.text']).sort(),
		Array.from({ length: 6 }, (_, i) => `SELECT 1 AS small_${i}`).sort(), 'the six small spans, each once');
	const alone = limited.requests.filter((r) => r.status === 413 && r.spans.length === 1);
	assert.equal(alone.length, 1, 'the big span was refused alone, once');
	assert.match(alone[0].spans[0].attributes['db.query.text'], /AS too_big$/);
	assert.equal(after.spans_dropped - before.spans_dropped, 1, 'one span dropped');
	assert.equal(after.export_failures - before.export_failures, 1, 'one export failure');
	assert.equal(after.spans_exported - before.spans_exported, 6 + 1, 'the marker and the six small spans exported');
	assert.match(after.last_error, /too large.*HTTP status 413: Request Entity Too Large/);
	const log = cluster.readLog();
	assert.match(log, /WARNING:\s+traceprof exporter: a span too large for the collector even alone was dropped: .*HTTP status 413/);
});

test('6c. a 503 after part of a split batch was taken: the rest goes later, each span once, none dropped', async (t) => {
	// The spans taken before the failure must not go again (nor be lost):
	// the exporter moves past exactly those in the ring.
	const N = 24;
	await drained();
	const limited = await startLimited(4096);
	t.after(() => limited.close());
	t.after(() => reconfigure({ 'traceprof.otlp_timeout': '5000' }));
	t.after(restoreEndpoint);
	// A Retry-After beyond the budget ends the export at once; the next waits 2 s.
	await reconfigure({ 'traceprof.otlp_timeout': '1000' });
	const before = await stats();
	const statements = Array.from({ length: N }, (_, i) => `SELECT '${'x'.repeat(600)}' AS resumed_${i}`);
	const ctx = await exportAtOnce(limited, statements,
		() => { limited.unavailable = { after: 1, headers: { 'retry-after': '2' } }; });
	await waitFor(() => `${N} spans of the trace taken (${limited.delivered(ctx.traceId).length} so far)`,
		() => limited.delivered(ctx.traceId).length >= N);
	const after = await drained();

	const statuses = limited.requests.filter((r) => r.spans.some((sp) => sp.traceId === ctx.traceId)).map((r) => r.status);
	const failedAt = statuses.indexOf(503);
	assert.ok(failedAt > 0 && statuses.slice(0, failedAt).includes(200),
		`a request was taken before the 503: ${statuses.join(' ')}`);
	const delivered = limited.delivered(ctx.traceId);
	assert.equal(delivered.length, N, 'each span delivered once');
	assert.equal(new Set(delivered.map((sp) => sp.spanId)).size, N, 'no span twice');
	assert.equal(after.spans_dropped, before.spans_dropped, 'nothing dropped');
	assert.equal(after.export_failures - before.export_failures, 1, 'the 503 is one failure');
	assert.equal(after.spans_exported - before.spans_exported, N + 1, 'the marker and the N spans exported');
});

/**
 * The requests of c that carry spans of traceId, with whether each was
 * taken, for messages.
 */
const roundOf = (c, traceId) => c.requests.filter((r) => r.spans.some((sp) => sp.traceId === traceId));
const shownRound = (round) => round.map((r) => `${r.status}:${r.spans.length}:${r.length}`).join(' ');

test('6d. the size a collector refused is remembered: the next batch goes in requests under it, none refused', async (t) => {
	// Old behaviour caught: nothing was remembered, so every batch went
	// whole again and was refused and halved again (up to 2N - 1 requests).
	const N = 24;
	await drained();
	const limited = await startLimited(4096);
	t.after(() => limited.close());
	t.after(restoreEndpoint);
	const before = await stats();
	const first = await exportAtOnce(limited,
		Array.from({ length: N }, (_, i) => `SELECT '${'x'.repeat(600)}' AS first_${String(i).padStart(2, '0')}`));
	await waitFor(() => `${N} spans of the first batch taken (${limited.delivered(first.traceId).length} so far)`,
		() => limited.delivered(first.traceId).length >= N);
	const round1 = roundOf(limited, first.traceId);
	const refused = round1.filter((r) => r.status === 413);
	assert.ok(refused.some((r) => r.spans.length === N), `the first batch went whole and was refused: ${shownRound(round1)}`);
	const smallest = Math.min(...refused.map((r) => r.length));

	// Spans a little larger than the first ones: every request the first
	// round would send again whole is at least as large as one refused.
	const second = await exportAtOnce(limited,
		Array.from({ length: N }, (_, i) => `SELECT '${'x'.repeat(620)}' AS second_${String(i).padStart(2, '0')}`));
	await waitFor(() => `${N} spans of the second batch taken (${limited.delivered(second.traceId).length} so far)`,
		() => limited.delivered(second.traceId).length >= N);
	const after = await drained();
	const round2 = roundOf(limited, second.traceId);
	assert.deepEqual(round2.filter((r) => r.status !== 200), [], `no request of the second batch refused: ${shownRound(round2)}`);
	for (const r of round2)
		assert.ok(r.length < smallest, `a request (${r.length} bytes) under the smallest refused (${smallest}): ${shownRound(round2)}`);
	const delivered = limited.delivered(second.traceId);
	assert.equal(new Set(delivered.map((sp) => sp.spanId)).size, N, 'each span of the second batch once');
	assert.equal(delivered.length, N);
	assert.equal(after.spans_dropped, before.spans_dropped, 'nothing dropped');
	assert.equal(after.export_failures, before.export_failures, 'no export failure');
});

// ---- 7: the profile uploader behind a body limit (413) -------------------

/** "frames|labels" -> summed values, over the samples of decoded pprofs. */
function sampleTotals(profiles) {
	const totals = new Map();
	for (const p of profiles)
		for (const smp of p.samples) {
			const k = `${smp.frames.join(';')}|${JSON.stringify(smp.labels)}`;
			const v = totals.get(k) || smp.values.map(() => 0);
			totals.set(k, v.map((x, i) => x + smp.values[i]));
		}
	return totals;
}

/** The "samples" weight (first value) of decoded pprofs, of the samples pred keeps. */
const weightOf = (profiles, pred = () => true) =>
	profiles.reduce((n, p) => n + p.samples.filter(pred).reduce((m, smp) => m + smp.values[0], 0), 0);

/** The pprof of an ingest request, decoded; its samples' count when it cannot be. */
const samplesIn = (body) => {
	try {
		return decodePprof(body).samples;
	} catch {
		return null;
	}
};

test('7. the profile uploader behind a body limit (413): parts within it, each sample once, counted as what arrived; ' +
	'samples refused even alone dropped and counted, and the uploader goes on', { timeout: 180000 }, async (t) => {
	// Old behaviour caught (the extension's side of 48e62c7): a profile
	// taken only in part (some samples refused even alone) made the whole
	// part count as dropped, though most of its samples had arrived.
	const ingest = await startIngest();
	// Its own cluster: the sample counters start at zero, and nothing of
	// the other tests waits in its ring.
	const own = await startTraced({
		'traceprof.pyroscope_url': ingest.url,
		'traceprof.upload_interval': '1h',	// until the statements of 7b are stored
		'traceprof.otlp_timeout': '60000',	// room for 2N - 1 requests
	});
	const admin = await connect(own);
	t.after(async () => {
		await admin.end().catch(() => {});
		await own.stop();
		await ingest.close();
	});
	/**
	 * Set traceprof.pyroscope_url (or another setting), reload, and wait
	 * until a new session sees it: the postmaster has then signalled the
	 * uploader.  Another endpoint (a path of the same capture server)
	 * forgets what the last one's refusals taught of its size limit.
	 */
	const setAndReload = async (name, value) => {
		await admin.query(`ALTER SYSTEM SET ${name} = '${value}'`);
		await admin.query('SELECT pg_reload_conf()');
		await waitFor(`new sessions to see ${name} = ${value}`, async () => {
			const c = await connect(own);
			try {
				return (await c.query('SELECT current_setting($1) AS v', [name])).rows[0].v === value;
			} finally {
				await c.end();
			}
		});
	};
	const toEndpoint = (path) => setAndReload('traceprof.pyroscope_url', `${ingest.url}/${path}`);
	/**
	 * Each sample of whole went alone once (parts of several samples were
	 * all refused), in at most 2N - 1 requests.  With none taken (no probe
	 * of a raised limit), a part of several samples went only while smaller
	 * than every body refused before it.
	 */
	const checkAlone = (reqs, whole) => {
		const n = whole.samples.length;
		const shown = reqs.map((q) => `${q.taken ? 200 : 413}:${q.samples.length}:${q.r.body.length}`).join(' ');
		assert.deepEqual(sampleTotals(reqs.filter((q) => q.samples.length === 1)), sampleTotals([whole]),
			`each sample went alone once: ${shown}`);
		assert.ok(reqs.length >= n && reqs.length <= 2 * n - 1, `${reqs.length} requests for ${n} samples`);
		if (reqs.some((q) => q.taken))
			return;
		let smallest = Infinity;
		for (const q of reqs) {
			if (q.samples.length > 1)
				assert.ok(q.r.body.length < smallest, `a part of several samples under every body refused before it: ${shown}`);
			smallest = Math.min(smallest, q.r.body.length);
		}
		assert.ok(n <= 2 || reqs.length < 2 * n - 1, `fewer than 2N - 1 requests: ${shown}`);
	};
	const counters = async () => {
		const r = (await admin.query('SELECT samples_stored, samples_dropped, samples_exported, upload_failures, last_error FROM traceprof.stats')).rows[0];
		return { stored: Number(r.samples_stored), dropped: Number(r.samples_dropped), exported: Number(r.samples_exported),
			failures: Number(r.upload_failures), lastError: r.last_error };
	};
	// Every stored sample exported or dropped: the batch is settled.
	const settled = (what) => waitFor(() => `${what}: every stored sample settled`, async () => {
		const s = await counters();
		return s.exported + s.dropped === s.stored ? s : null;
	}, 60000);
	/** A CPU-bound statement of a new trace, sampled at 250 Hz; its context and stored samples. */
	const statement = async () => {
		const ctx = newContext();
		const client = await connect(own);
		try {
			const s0 = await counters();
			await client.query('SET traceprof.sample_hz = 250');
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await client.query('SELECT sum(g::numeric * g) AS s FROM generate_series(1, 600000) AS g');
			// No RESET: traced too, a sample of it would be a profile of its own (the
			// clean clone's run at 9832a0f saw one in 7c, its window a second later).
			const s1 = await counters();
			assert.ok(s1.stored > s0.stored, 'the statement was sampled');
			return { ctx, rows: s1.stored - s0.stored };
		} finally {
			await client.end();
		}
	};
	/**
	 * n statements of statement(), uploads held meanwhile (the interval an
	 * hour), then uploads at 200 ms again.  A statement's samples go into the
	 * ring one by one as it ends, and a round reading them meanwhile sent the
	 * first ones as a profile of their own (the clean clone's run at e565033:
	 * a part of a second profile among 7a's).
	 */
	const heldStatements = async (n) => {
		const from = ingest.requests.length;
		await setAndReload('traceprof.upload_interval', '1h');
		const done = [];
		for (let i = 0; i < n; i++)
			done.push(await statement());
		assert.equal(ingest.requests.length, from, 'no upload while the interval is an hour');
		await setAndReload('traceprof.upload_interval', '200ms');
		return done;
	};
	/** The requests since from, each with its decoded samples, and whether the server took it. */
	const since = (from) => ingest.requests.slice(from).map((r) => ({ r, samples: samplesIn(r.body),
		taken: r.behaviour.status === undefined && !r.behaviour.hang }));
	/** The requests from `from` on all went for the first one's series and window; the taken ones keep its header. */
	const checkParts = (reqs, limit) => {
		const whole = decodePprof(reqs[0].r.body);
		for (const { r } of reqs)
			assert.deepEqual([r.query.name, r.query.from, r.query.until, r.query.format],
				[reqs[0].r.query.name, reqs[0].r.query.from, reqs[0].r.query.until, reqs[0].r.query.format],
				'the same series and window');
		const taken = reqs.filter((q) => q.taken).map((q) => decodePprof(q.r.body));
		for (const p of taken) {
			assert.deepEqual({ ...p, samples: null }, { ...whole, samples: null }, 'the same sample types, period and window');
			assert.ok(p.samples.length < whole.samples.length, 'a part has fewer samples than the whole');
		}
		if (limit !== undefined)
			for (const q of reqs.filter((x) => x.taken))
				assert.ok(q.r.body.length <= limit, `a part taken is within the limit (${q.r.body.length} <= ${limit})`);
		return { whole, taken };
	};

	await t.test('7b. some samples refused even alone: the others arrive once, and count as exported in proportion', async () => {
		// One profile of two statements' samples: those of `doomed` are
		// too large for the proxy even alone, every request of more than
		// one sample too.
		const kept = await statement();
		const doomed = await statement();
		assert.equal(ingest.requests.length, 0, 'no upload before the interval is shortened');
		const before = await counters();
		ingest.answerBy = ({ body }) => {
			const samples = samplesIn(body);
			if (samples === null)
				return { status: 400, body: 'not a pprof' };
			return samples.length > 1 || samples[0].labels.trace_id === doomed.ctx.traceId
				? { status: 413, body: '413 Request Entity Too Large' } : null;
		};
		await admin.query("ALTER SYSTEM SET traceprof.upload_interval = '200ms'");
		await admin.query('SELECT pg_reload_conf()');
		const after = await settled('7b');
		const reqs = since(0);
		const { whole, taken } = checkParts(reqs);
		assert.ok(whole.samples.some((smp) => smp.labels.trace_id === kept.ctx.traceId) &&
			whole.samples.some((smp) => smp.labels.trace_id === doomed.ctx.traceId), 'both statements in the one profile');
		checkAlone(reqs, whole);
		assert.deepEqual(sampleTotals(taken), sampleTotals([{ samples: whole.samples.filter((smp) => smp.labels.trace_id === kept.ctx.traceId) }]),
			'every sample of the kept statement arrived once, with its values; none of the doomed one');
		// Stored samples count in proportion to the weight that arrived.
		const takenWeight = weightOf(taken);
		const totalWeight = weightOf([whole]);
		const rows = kept.rows + doomed.rows;
		assert.equal(after.stored, before.stored, 'nothing else was stored meanwhile');
		assert.equal(before.stored, rows, 'the two statements\' samples are all the cluster stored');
		const dropped = Math.min(rows, Math.max(1, Math.round(rows * (totalWeight - takenWeight) / totalWeight)));
		assert.equal(after.dropped - before.dropped, dropped,
			`samples_dropped counts the stored samples of the weight refused (${totalWeight - takenWeight} of ${totalWeight})`);
		assert.equal(after.exported - before.exported, rows - dropped, 'samples_exported the stored samples of the weight that arrived');
		assert.ok(after.exported > before.exported, 'samples taken count as exported');
		assert.equal(after.failures - before.failures, 1, 'one upload failure: samples were lost');
		assert.match(after.lastError, /HTTP status 413: 413 Request Entity Too Large .*dropped: \d+ of \d+\)/);
		await sleep(1000);	// a negative: a part settled is never sent again
		assert.equal(ingest.requests.length, reqs.length, 'nothing sent again');
	});

	const state = { limit: null };	// 7a's limit, which 7e meets again
	await t.test('7a. a body limit that single samples fit: every sample arrives once, in parts within it, all exported', async () => {
		// Another endpoint: 7b's refusals (down to single samples) are
		// forgotten, so the profile goes whole first.
		await toEndpoint('7a');
		const before = await counters();
		const from = ingest.requests.length;
		ingest.answerBy = ({ body }) => {
			if (state.limit === null)
				state.limit = body.length - 1;	// a part of one sample takes ~40% of the whole here: all fit
			return body.length > state.limit ? { status: 413, body: '413 Request Entity Too Large' } : null;
		};
		const [s] = await heldStatements(1);
		const after = await settled('7a');
		const reqs = since(from);
		assert.equal(reqs[0].r.behaviour.status, 413, 'the profile went whole first and was refused');
		const { whole, taken } = checkParts(reqs, state.limit);
		assert.ok(whole.samples.length >= 2, `a profile of several samples (${whole.samples.length})`);
		assert.ok(taken.length >= 2, `${taken.length} parts taken`);
		assert.deepEqual(sampleTotals(taken), sampleTotals([whole]), 'every sample of the profile once, with its values');
		assert.ok(whole.samples.every((smp) => smp.labels.trace_id === s.ctx.traceId), 'the statement\'s samples');
		assert.equal(after.exported - before.exported, s.rows, 'every stored sample counts as exported');
		assert.equal(after.dropped, before.dropped, 'none dropped');
		assert.equal(after.failures, before.failures, 'no upload failure');
		await sleep(1000);
		assert.equal(ingest.requests.length, from + reqs.length, 'nothing sent again');
	});

	await t.test('7e. the size refused is remembered: a larger profile goes in parts at once, none refused; reloads to the same endpoint keep it', async (st) => {
		// Before, nothing was remembered between uploads: the profile went
		// whole again, was refused, and only then went in parts (one refused
		// request per upload, however often the limit had been met).
		const before = await counters();
		const from = ingest.requests.length;
		// Three statements in one upload, a profile larger than 7a's: the
		// uploads are held meanwhile, by reloads to the same endpoint.
		const statements = await heldStatements(3);
		const after = await settled('7e');
		const reqs = since(from);
		const shown = reqs.map((q) => `${q.taken ? 200 : 413}:${q.samples.length}:${q.r.body.length}`).join(' ');
		st.diagnostic(`requests (status:samples:bytes), 7a refused ${state.limit + 1} bytes: ${shown}`);
		assert.deepEqual(reqs.filter((q) => !q.taken).map((q) => q.r.index), [], `no request refused: ${shown}`);
		assert.ok(reqs.length >= 2, `in parts: ${shown}`);
		for (const q of reqs) {
			assert.ok(q.r.body.length <= state.limit, `a part (${q.r.body.length} bytes) under the size refused in 7a (${state.limit + 1})`);
			assert.deepEqual([q.r.path, q.r.query.name, q.r.query.from, q.r.query.until],
				[reqs[0].r.path, reqs[0].r.query.name, reqs[0].r.query.from, reqs[0].r.query.until], 'the same endpoint, series and window');
		}
		// Each sample once: a profile holds a stack and labels once, so no
		// part repeats another's; every statement's samples arrived.
		const keys = reqs.flatMap((q) => q.samples.map((smp) => `${smp.frames.join(';')}|${JSON.stringify(smp.labels)}`));
		assert.equal(new Set(keys).size, keys.length, 'no sample in two parts');
		for (const st of statements)
			assert.ok(reqs.some((q) => q.samples.some((smp) => smp.labels.trace_id === st.ctx.traceId)), 'every statement\'s samples arrived');
		const rows = statements.reduce((a, st) => a + st.rows, 0);
		assert.equal(after.exported - before.exported, rows, 'every stored sample counts as exported');
		assert.equal(after.dropped, before.dropped, 'none dropped');
		assert.equal(after.failures, before.failures, 'no upload failure');
	});

	await t.test('7d. a reload that moves the destination while the parts go: the samples not sent yet go in the next round, each once, none dropped', async () => {
		// Before, the part being split was settled when the reload cut its
		// requests short: the samples not sent yet were counted as dropped
		// (an upload failure) and never sent, though no server refused them.
		await toEndpoint('7d');
		const before = await counters();
		const from = ingest.requests.length;
		let taken = 0;
		ingest.answerBy = ({ body }) => {
			if (taken >= 2)
				return { hang: true };	// until the reload
			if (samplesIn(body).length > 1)
				return { status: 413, body: '413 Request Entity Too Large' };
			taken++;
			return null;
		};
		const [s] = await heldStatements(1);
		await ingest.waitFor(() => ingest.hung.length === 1, 20000, 'a request hanging after two single samples were taken');
		ingest.answerBy = null;
		// A new tenant: the hanging request ends (a reload that moves nothing lets it go on).
		await setAndReload('traceprof.pyroscope_tenant_id', 'tenant-7d');
		const after = await settled('7d');
		await setAndReload('traceprof.pyroscope_tenant_id', '');
		const reqs = since(from);
		const { whole, taken: parts } = checkParts(reqs);
		assert.ok(whole.samples.length >= 4, `a profile of several samples (${whole.samples.length})`);
		const hungAt = reqs.findIndex((q) => q.r.behaviour.hang);
		assert.ok(reqs.slice(hungAt + 1).some((q) => q.taken), 'more went after the reload');
		assert.deepEqual(sampleTotals(parts), sampleTotals([whole]), 'every sample of the profile once, with its values');
		assert.equal(after.exported - before.exported, s.rows, 'every stored sample counts as exported');
		assert.equal(after.dropped, before.dropped, 'none dropped');
		assert.equal(after.failures, before.failures, 'an interrupted upload is no failure');
	});

	await t.test('7c. a proxy refusing even single samples: all dropped and counted once (each alone once), and later uploads go on', async () => {
		await toEndpoint('7c');
		const before = await counters();
		const from = ingest.requests.length;
		ingest.answerBy = () => ({ status: 413, body: '413 Request Entity Too Large' });
		const [s] = await heldStatements(1);
		const after = await settled('7c');
		const reqs = since(from);
		const { whole, taken } = checkParts(reqs);
		const n = whole.samples.length;
		assert.ok(n >= 2, `a profile of several samples (${n})`);
		assert.equal(taken.length, 0);
		checkAlone(reqs, whole);
		assert.equal(after.dropped - before.dropped, s.rows, 'every stored sample counts as dropped');
		assert.equal(after.exported, before.exported, 'none as exported');
		assert.equal(after.failures - before.failures, 1, 'one upload failure');
		assert.match(after.lastError, /HTTP status 413: 413 Request Entity Too Large .*dropped: \d+ of \d+\)/);
		await sleep(1000);	// a negative: no loop on what was refused
		assert.equal(ingest.requests.length, from + reqs.length, 'the refused samples are not sent again');

		// The server takes uploads again: the next statement's samples arrive, nothing of the refused ones.
		ingest.answerBy = null;
		const [next] = await heldStatements(1);
		const later = await settled('7c, after');
		const sent = since(from + reqs.length);
		assert.ok(sent.length >= 1 && sent.every((q) => q.taken), 'the next upload went, and was taken');
		const arrived = sent.map((q) => decodePprof(q.r.body));
		assert.equal(weightOf(arrived, (smp) => smp.labels.trace_id === s.ctx.traceId), 0, 'the refused samples are not sent again');
		assert.ok(weightOf(arrived, (smp) => smp.labels.trace_id === next.ctx.traceId) > 0, 'the next statement\'s samples arrive');
		assert.equal(later.exported - after.exported, next.rows, 'and count as exported');
		assert.equal(later.dropped, after.dropped);
	});
});
