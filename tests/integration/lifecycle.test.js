'use strict';
// The extension's lifecycle as a DBA goes through it: CREATE EXTENSION in
// several databases, from template1, in a schema it does not support;
// ALTER EXTENSION; databases without the extension; DROP EXTENSION (with
// CASCADE) while other sessions trace and sample; what PUBLIC may execute;
// pg_dump and pg_restore into clusters with and without the preload;
// session_preload_libraries without the shared preload; reloads while
// sessions hold the extension's functions.
//
// Two real PostgreSQL 15 clusters: one with shared_preload_libraries =
// 'traceprof', one without.  Waits poll a condition with a deadline.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const { PG_BIN } = require('./lib/paths');
const { run } = require('./lib/run');
const { startCluster } = require('./lib/cluster');
const { newContext, waitFor, connect, traced, assertRejectsWith } = require('./lib/traced');
const { makeTempDir, removeTempDir, lookupUser } = require('./lib/tmp');
const { startReceiver } = require('./lib/receiver');
const { childPids } = require('./lib/procs');

/** What the extension's CREATE makes, as pg_describe_object names it. */
const MEMBERS = [
	'function traceprof.flamegraph(text,text)',
	'function traceprof.flamegraph_diff(text,text)',
	'function traceprof.profile(text,text)',
	'function traceprof.profile_top(text,integer,text)',
	'function traceprof.reset()',
	'function traceprof.spans_internal()',
	'function traceprof.stats_internal()',
	'function traceprof.trace_spans(text)',
	'schema traceprof',
	'view traceprof.spans',
	'view traceprof.stats',
];

function crashLines(cluster) {
	return cluster.readLog().split('\n')
		.filter((l) => /terminated by signal|was terminated|PANIC|TRAP:|server process .* exited with exit code [^0]/.test(l));
}

async function members(client) {
	return (await client.query(
		'SELECT pg_describe_object(classid, objid, objsubid) AS o FROM pg_depend ' +
		"WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e' " +
		"AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'traceprof') ORDER BY 1")).rows.map((r) => r.o);
}

/** A PostgreSQL client program (pg_dump, pg_restore, psql) on cluster's socket as postgres; its result. */
function pgProgram(cluster, program, args, options = {}) {
	return run(path.join(PG_BIN, program), ['-h', cluster.socketDir, '-p', String(cluster.port), '-U', 'postgres', ...args],
		{ timeout: 30000, ...options });
}

test('L10. a single-user backend (postgres --single, as for a wraparound VACUUM) sampling every statement exits cleanly: ' +
	'the timer stops before its shared memory is unmapped', async () => {
	const cluster = await startCluster({ settings: { shared_preload_libraries: 'traceprof' } });
	try {
		await cluster.shutdown();
		const owner = process.getuid() === 0 ? lookupUser('postgres') : null;
		for (const mode of ['cpu', 'wall']) {
			for (let i = 0; i < 3; i++) {
				const res = await run(path.join(PG_BIN, 'postgres'), ['--single', '-D', cluster.dataDir,
					'-c', 'traceprof.profile=all', '-c', `traceprof.profile_mode=${mode}`, 'postgres'],
				{ input: 'VACUUM\n', timeout: 60000, ...(owner ? { uid: owner.uid, gid: owner.gid } : {}) });
				assert.equal(res.signal ?? null, null, `${mode} run ${i}: killed by ${res.signal}\n${res.stderr}`);
				assert.equal(res.code, 0, `${mode} run ${i}: exit ${res.code}\n${res.stderr}`);
			}
		}
	} finally {
		await cluster.stop();
	}
});

test('L10b. a single-user backend with an endpoint set keeps the latest spans, as no worker can run there; ' +
	'a traceparent in the server\'s configuration is refused with a WARNING, never applied', async () => {
	const ctx = newContext();
	const cluster = await startCluster({ settings: { shared_preload_libraries: 'traceprof', 'traceprof.traceparent': ctx.header } });
	try {
		assert.match(cluster.readLog(), /WARNING: {2}traceprof.traceparent cannot be stored as a default of the server/);
		await cluster.psql('CREATE EXTENSION traceprof', { db: 'postgres' });
		assert.equal(await cluster.psql('SHOW traceprof.traceparent', { db: 'postgres' }), '');
		assert.equal(await cluster.psql(`SELECT count(*) FROM traceprof.spans WHERE trace_id = '${ctx.traceId}'`, { db: 'postgres' }), '0');
		await cluster.shutdown();
		// Before, the worker registered in single-user mode counted as an exporter:
		// the ring kept its first 128 spans for it and dropped the rest.
		const owner = process.getuid() === 0 ? lookupUser('postgres') : null;
		const selects = Array.from({ length: 300 }, (_, i) => `SELECT ${i};`).join('\n');
		const res = await run(path.join(PG_BIN, 'postgres'), ['--single', '-D', cluster.dataDir,
			'-c', 'traceprof.sample_rate=1', '-c', 'traceprof.max_spans=128',
			'-c', 'traceprof.otlp_endpoint=http://127.0.0.1:9', 'postgres'],
		{ input: `${selects}\nSELECT 'stats', spans_created, spans_dropped FROM traceprof.stats;\n`,
			timeout: 60000, ...(owner ? { uid: owner.uid, gid: owner.gid } : {}) });
		assert.equal(res.code, 0, res.stderr);
		const m = /1: \?column\? = "stats"[^\n]*\n\s*2: spans_created = "(\d+)"[^\n]*\n\s*3: spans_dropped = "(\d+)"/.exec(res.stdout);
		assert.ok(m, `stats row in:\n${res.stdout.slice(-2000)}`);
		assert.ok(Number(m[1]) >= 300, `created ${m[1]}`);
		assert.equal(Number(m[2]), 0, 'dropped');
	} finally {
		await cluster.stop();
	}
});

test('L11. no room in max_worker_processes for the workers: a WARNING names them, and spans and samples are kept for SQL, ' +
	'the latest overwriting the oldest, never all dropped', async () => {
	// Before, the rings waited for an exporter that never came: once full,
	// every span was dropped, with only "too many background workers" said.
	const cluster = await startCluster({ settings: {
		shared_preload_libraries: 'traceprof', max_worker_processes: '0', 'traceprof.max_spans': '128',
		'traceprof.otlp_endpoint': 'http://127.0.0.1:9', 'traceprof.pyroscope_url': 'http://127.0.0.1:9',
		'traceprof.profile': 'all',
	} });
	try {
		const log = cluster.readLog();
		assert.match(log, /WARNING: {2}traceprof: the traceprof exporter cannot run/);
		assert.match(log, /WARNING: {2}traceprof: the traceprof profile uploader cannot run/);
		assert.match(log, /HINT: {2}traceprof's two workers need two of max_worker_processes \(0\)/);
		await cluster.psql('CREATE EXTENSION traceprof');
		const client = await connect(cluster, 'postgres', 'app');
		try {
			let last;
			for (let i = 0; i < 300; i++) {
				last = newContext();
				await traced(client, last, `SELECT ${i} AS n, sum(length(md5(g::text))) FROM generate_series(1, 2000) g`);
			}
			const stats = (await client.query('SELECT spans_created, spans_dropped, spans_exported FROM traceprof.stats')).rows[0];
			assert.equal(Number(stats.spans_dropped), 0, JSON.stringify(stats));
			assert.equal(Number(stats.spans_exported), 0, JSON.stringify(stats));
			const latest = (await client.query('SELECT count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1', [last.traceId])).rows[0].n;
			assert.ok(latest >= 1, 'the last statement\'s span is there');
			const samples = (await client.query('SELECT samples_stored, samples_dropped FROM traceprof.stats')).rows[0];
			assert.equal(Number(samples.samples_dropped), 0, JSON.stringify(samples));
		} finally {
			await client.end();
		}
	} finally {
		await cluster.stop();
	}
});

/** A TCP server that accepts and never answers; counts its connections. */
async function startSilentServer(t) {
	const sockets = [];
	const server = net.createServer((socket) => { sockets.push(socket); socket.on('error', () => {}); });
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	t.after(() => {
		for (const socket of sockets)
			socket.destroy();
		server.close();
	});
	return { url: `http://127.0.0.1:${server.address().port}`, connections: () => sockets.length };
}

/** Whether process pid still exists (a zombie counts as gone). */
function alive(pid) {
	try {
		return !/^\S+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
	} catch {
		return false;
	}
}

test('L12. the postmaster killed while both workers wait on endpoints that never answer (2-minute timeout): ' +
	'they exit within seconds, and the server starts again', async (t) => {
	// Before, each worker lived out its request's timeout, holding the shared
	// memory: "pre-existing shared memory block is still in use" until then.
	const otlp = await startSilentServer(t);
	const ingest = await startSilentServer(t);
	const cluster = await startCluster({ settings: {
		shared_preload_libraries: 'traceprof', 'traceprof.otlp_endpoint': otlp.url,
		'traceprof.pyroscope_url': ingest.url, 'traceprof.otlp_timeout': '120s', 'traceprof.export_interval': '100ms',
		'traceprof.upload_interval': '1s', 'traceprof.profile': 'traced', 'traceprof.sample_hz': '250',
	} });
	try {
		await cluster.psql('CREATE EXTENSION traceprof');
		const client = await connect(cluster, 'postgres', 'app');
		try {
			await waitFor('a request at each endpoint', async () => {
				await traced(client, newContext(), 'SELECT sum(length(md5(g::text))) FROM generate_series(1, 30000) g');
				return otlp.connections() > 0 && ingest.connections() > 0;
			}, 30000);
		} finally {
			await client.end();
		}
		const workers = childPids(cluster, /^postgres: traceprof /);
		assert.equal(workers.length, 2, 'the exporter and the uploader');
		process.kill(cluster.pid, 'SIGKILL');
		await waitFor('both workers to exit', () => workers.every((pid) => !alive(pid)), 10000);
		await cluster.restart();
		assert.equal(await cluster.psql('SELECT 1'), '1');
	} finally {
		await cluster.stop();
	}
});

test('L13. a fast shutdown exports the spans of the statements it terminates', async () => {
	// The postmaster signals the backends when it signals the exporter; the
	// exporter drained once and left, before most of them had stored theirs.
	const receiver = await startReceiver({ grpc: false });
	const cluster = await startCluster({ settings: {
		shared_preload_libraries: 'traceprof', 'traceprof.otlp_endpoint': receiver.httpEndpoint,
	} });
	const clients = [];
	try {
		await cluster.psql('CREATE EXTENSION traceprof');
		const contexts = Array.from({ length: 10 }, () => newContext());
		for (const ctx of contexts) {
			const client = await connect(cluster, 'postgres', 'app');
			clients.push(client);
			traced(client, ctx, 'SELECT pg_sleep(30)').catch(() => { /* terminated */ });
		}
		await waitFor('ten sleeping statements', async () => Number(await cluster.psql(
			"SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'")) === 10);
		await cluster.shutdown();
		const ended = receiver.spans().filter((s) => contexts.some((c) => c.traceId === s.traceId) && s.status.code === 2);
		assert.equal(ended.length, 10, `error spans exported: ${ended.length} of 10`);
		assert.ok(ended.every((s) => /terminating connection due to administrator command/.test(s.status.message)));
	} finally {
		for (const client of clients)
			await client.end().catch(() => {});
		await cluster.stop();
		await receiver.close();
	}
});

describe('lifecycle (a preloaded cluster, and one without the preload)', () => {
	let cluster;
	let bare;
	let admin;
	let appAdmin;

	before(async () => {
		[cluster, bare] = await Promise.all([
			startCluster({ settings: { shared_preload_libraries: 'traceprof', 'traceprof.sample_hz': '250' } }),
			startCluster(),
		]);
		await cluster.psql('CREATE EXTENSION traceprof;', { db: 'app' });
		admin = await connect(cluster, 'postgres', 'postgres');
		appAdmin = await connect(cluster, 'postgres', 'app');
	});

	after(async () => {
		if (admin)
			await admin.end();
		if (appAdmin)
			await appAdmin.end();
		if (cluster) {
			assert.deepEqual(crashLines(cluster), [], 'no backend crashed');
			await cluster.stop();
		}
		if (bare)
			await bare.stop();
	});

	test('L1. CREATE EXTENSION in two databases and from template1 share one ring; another schema, UPDATE and SET SCHEMA ' +
		'are refused with what to do; \\dx+ lists only the extension\'s objects', async () => {
		await admin.query('CREATE DATABASE lc_two');
		await cluster.psql('CREATE EXTENSION traceprof;', { db: 'template1' });
		await admin.query('CREATE DATABASE lc_tpl');
		await cluster.psql('DROP EXTENSION traceprof;', { db: 'template1' });
		const app = await connect(cluster, 'postgres', 'app');
		const two = await connect(cluster, 'postgres', 'lc_two');
		const tpl = await connect(cluster, 'postgres', 'lc_tpl');
		try {
			await assertRejectsWith(two.query('CREATE EXTENSION traceprof SCHEMA public'), '0A000',
				/extension "traceprof" must be installed in schema "pg_catalog"/);
			await two.query('CREATE EXTENSION traceprof');
			for (const c of [app, two, tpl])
				assert.deepEqual(await members(c), MEMBERS);

			const ctx = newContext();
			await traced(two, ctx, 'SELECT 1 AS in_lc_two');
			for (const c of [app, tpl]) {
				const rows = (await c.query("SELECT dbname, query FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server'",
					[ctx.traceId])).rows;
				assert.deepEqual(rows, [{ dbname: 'lc_two', query: 'SELECT $1 AS in_lc_two' }]);
			}

			const notices = [];
			app.on('notice', (n) => notices.push(n.message));
			await app.query('ALTER EXTENSION traceprof UPDATE');
			assert.deepEqual(notices, ['version "0.1" of extension "traceprof" is already installed']);
			await assertRejectsWith(app.query("ALTER EXTENSION traceprof UPDATE TO '0.2'"), '22023',
				/extension "traceprof" has no update path from version "0.1" to version "0.2"/);
			await assertRejectsWith(app.query('ALTER EXTENSION traceprof SET SCHEMA public'), '0A000',
				/extension "traceprof" does not support SET SCHEMA/);
		} finally {
			await app.end();
			await two.end();
			await tpl.end();
		}
	});

	test('L2. a database without the extension is traced too; its spans are read from one that has it', async () => {
		await admin.query('CREATE DATABASE lc_none');
		const none = await connect(cluster, 'app', 'lc_none');
		const app = await connect(cluster, 'app', 'app');
		try {
			assert.equal((await none.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'traceprof'")).rows[0].n, 0);
			const ctx = newContext();
			await traced(none, ctx, 'SELECT 1 AS in_lc_none');
			const rows = (await app.query("SELECT dbname, username, query FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server'",
				[ctx.traceId])).rows;
			assert.deepEqual(rows, [{ dbname: 'lc_none', username: 'app', query: 'SELECT $1 AS in_lc_none' }]);
		} finally {
			await none.end();
			await app.end();
		}
	});

	test('L3. DROP EXTENSION (CASCADE, over a user view) while other sessions trace and sample: no error there, ' +
		'no crash; CREATE again in the same sessions reads their spans and samples', async () => {
		const dba = await connect(cluster, 'postgres', 'app');
		const workers = [await connect(cluster, 'app', 'app'), await connect(cluster, 'app', 'app')];
		const reader = await connect(cluster, 'app', 'app');
		let stop = false;
		const errors = [];
		const ctxs = workers.map(() => newContext());
		const rounds = workers.map(() => 0);
		const loops = workers.map(async (w, i) => {
			await w.query(`SET traceprof.traceparent = '${ctxs[i].header}'`);
			let n = 0;
			while (!stop || n < 3) {
				try {
					await w.query("SELECT sum(length(md5(g::text))) FROM generate_series(1, 20000) g");
					await w.query('BEGIN; SELECT count(*) FROM pg_class; COMMIT');
				} catch (e) {
					errors.push(`worker ${i}: ${e.message}`);
				}
				rounds[i] = ++n;
			}
			return n;
		});
		try {
			await reader.query({ name: 'mine', text: 'SELECT count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1', values: [ctxs[0].traceId] });
			await dba.query('CREATE VIEW public.my_spans AS SELECT trace_id, name FROM traceprof.spans');
			await assertRejectsWith(dba.query('DROP EXTENSION traceprof'), '2BP01',
				/cannot drop extension traceprof because other objects depend on it/);
			await dba.query('DROP EXTENSION traceprof CASCADE');
			assert.equal((await dba.query("SELECT to_regclass('public.my_spans') IS NULL AS gone")).rows[0].gone, true);
			await assertRejectsWith(reader.query({ name: 'mine', values: [ctxs[0].traceId] }), '42P01',
				/relation "traceprof.spans" does not exist/);
			// The schema is one of its objects: gone with them.
			await assertRejectsWith(reader.query('SELECT traceprof.reset()'), '3F000', /schema "traceprof" does not exist/);
			assert.equal((await dba.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'traceprof'")).rows[0].n, 0);
			// Tracing and sampling go on without the SQL objects.
			const atDrop = rounds.slice();
			await waitFor('two rounds of each worker after the drop', () => rounds.every((n, i) => n >= atDrop[i] + 2));
			await dba.query('CREATE EXTENSION traceprof');
			stop = true;
			const runs = await Promise.all(loops);
			assert.deepEqual(errors, [], 'the tracing sessions saw no error');
			assert.ok(runs.every((n) => n >= 3), `every worker ran: ${runs}`);
			for (const [i, ctx] of ctxs.entries()) {
				const n = (await reader.query({ name: 'mine', values: [ctx.traceId] })).rows[0].n;
				assert.ok(n >= 2 * runs[i], `worker ${i}: ${n} spans for ${runs[i]} rounds, read through the re-planned statement`);
				const own = (await workers[i].query('SELECT count(*)::int AS n FROM traceprof.spans WHERE trace_id = $1', [ctx.traceId])).rows[0].n;
				assert.ok(own >= n, 'the worker session reads the new view too');
			}
			const sampled = (await reader.query('SELECT coalesce(sum(self_samples), 0)::int AS n FROM traceprof.profile_top($1, NULL)',
				[ctxs[0].traceId])).rows[0].n;
			assert.ok(sampled > 0, 'the worker\'s samples are read after CREATE again');
		} finally {
			stop = true;
			await Promise.allSettled(loops);
			for (const c of [dba, reader, ...workers])
				await c.end();
		}
	});

	test('L4. PUBLIC may read the views and the profile functions, not reset(); a role created after the extension ' +
		'sees its own spans whole and others\' redacted', async () => {
		const rows = (await appAdmin.query(
			"SELECT p.oid::regprocedure::text AS f, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may " +
			"FROM pg_proc p WHERE p.pronamespace = 'traceprof'::regnamespace ORDER BY 1")).rows;
		assert.equal(rows.length, 8);
		for (const r of rows)
			assert.equal(r.public_may, r.f !== 'traceprof.reset()', `${r.f}: PUBLIC may execute: ${r.public_may}`);
		// Counted from here: created after CREATE EXTENSION.
		await admin.query('CREATE ROLE lc_late LOGIN');
		const late = await connect(cluster, 'lc_late', 'app');
		const app = await connect(cluster, 'app', 'app');
		try {
			const ctx = newContext();
			await traced(late, ctx, "SELECT 'late' AS late_marker");
			await traced(app, ctx, "SELECT 'app' AS app_marker");
			const seen = (await late.query("SELECT username, query FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time",
				[ctx.traceId])).rows;
			assert.deepEqual(seen, [{ username: 'lc_late', query: 'SELECT $1 AS late_marker' },
				{ username: 'app', query: '<insufficient privilege>' }]);
			assert.deepEqual((await late.query("SELECT username, query FROM traceprof.trace_spans($1) WHERE kind = 'server' ORDER BY start_time",
				[ctx.traceId])).rows, seen, 'trace_spans() shows what the view shows');
			await assertRejectsWith(late.query('SELECT traceprof.reset()'), '42501', /permission denied for function reset/);
			await late.query('SELECT * FROM traceprof.stats');
			await late.query('SELECT * FROM traceprof.profile_top($1)', [ctx.traceId]);
		} finally {
			await late.end();
			await app.end();
		}
	});

	test('L5. pg_dump and pg_restore: a preloaded cluster restores the extension, the user view over it and a grant of reset(); ' +
		'one without the preload says what to do; --schema-only holds none of the extension\'s objects', async () => {
		const dir = makeTempDir('traceprof-dump-');
		try {
			await cluster.psql('CREATE ROLE lc_resetter; GRANT EXECUTE ON FUNCTION traceprof.reset() TO lc_resetter; ' +
				'CREATE TABLE lc_orders (id int); CREATE VIEW lc_recent AS SELECT trace_id, name FROM traceprof.spans;', { db: 'app' });
			const schema = await pgProgram(cluster, 'pg_dump', ['--schema-only', 'app']);
			assert.equal(schema.code, 0, schema.stderr);
			const lines = schema.stdout.split('\n').filter((l) => /traceprof/.test(l));
			assert.deepEqual(lines.filter((l) => !/^--/.test(l) && !/FROM traceprof\.spans/.test(l)), [
				'CREATE EXTENSION IF NOT EXISTS traceprof WITH SCHEMA pg_catalog;',
				"COMMENT ON EXTENSION traceprof IS 'OpenTelemetry spans for traced statements (W3C traceparent, sqlcommenter), exported over OTLP';",
				'GRANT ALL ON FUNCTION traceprof.reset() TO lc_resetter;',
			], 'the extension, its comment and the grant: nothing of what CREATE EXTENSION makes, its schema included');

			const file = path.join(dir, 'app.dump');
			const dumped = await pgProgram(cluster, 'pg_dump', ['-Fc', '-f', file, 'app']);
			assert.equal(dumped.code, 0, dumped.stderr);
			await admin.query('CREATE DATABASE lc_restored');
			const restored = await pgProgram(cluster, 'pg_restore', ['--exit-on-error', '-d', 'lc_restored', file]);
			assert.equal(restored.code, 0, restored.stderr);
			const r = await connect(cluster, 'postgres', 'lc_restored');
			try {
				assert.deepEqual(await members(r), MEMBERS);
				await r.query('SELECT count(*) FROM lc_recent');
				const acl = (await r.query("SELECT has_function_privilege('lc_resetter', 'traceprof.reset()', 'EXECUTE') AS g, " +
					"has_function_privilege('public', 'traceprof.reset()', 'EXECUTE') AS p")).rows[0];
				assert.deepEqual(acl, { g: true, p: false });
			} finally {
				await r.end();
			}

			// pg_dump | psql
			await admin.query('CREATE DATABASE lc_piped');
			const piped = await pgProgram(cluster, 'psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'lc_piped'], { input: schema.stdout });
			assert.equal(piped.code, 0, piped.stderr);

			// Without the preload: the restore names what is missing.
			const bareRestore = await pgProgram(bare, 'pg_restore', ['-x', '-d', 'app', file]);
			assert.notEqual(bareRestore.code, 0);
			assert.match(bareRestore.stderr, /ERROR: {2}traceprof must be loaded via shared_preload_libraries\nHINT: {2}Add traceprof to shared_preload_libraries in postgresql.conf and restart the server\.\nCommand was: CREATE EXTENSION IF NOT EXISTS traceprof WITH SCHEMA pg_catalog;/);
			assert.equal(await bare.psql("SELECT count(*) FROM pg_namespace WHERE nspname = 'traceprof'", { db: 'app' }), '0',
				'nothing of the extension is left behind, its schema included');
			assert.deepEqual(crashLines(bare), []);
		} finally {
			removeTempDir(dir);
		}
	});

	test('L6. session_preload_libraries = traceprof without the shared preload: a connection is refused with what to do, ' +
		'the server goes on', async () => {
		// As PostgreSQL does for any library that session_preload_libraries
		// cannot load; returning from _PG_init instead would leave the profile
		// functions reading shared memory that was never set up.
		await bare.psql("CREATE DATABASE lc_spl; ALTER DATABASE lc_spl SET session_preload_libraries = 'traceprof';", { db: 'postgres' });
		try {
			await assertRejectsWith(connect(bare, 'postgres', 'lc_spl'), '55000',
				/traceprof must be loaded via shared_preload_libraries/, /Add traceprof to shared_preload_libraries in postgresql.conf and restart the server/);
		} finally {
			await bare.psql('ALTER DATABASE lc_spl RESET session_preload_libraries;', { db: 'postgres' });
		}
		const client = await connect(bare, 'postgres', 'lc_spl');
		try {
			assert.equal((await client.query('SELECT 1 AS one')).rows[0].one, 1);
		} finally {
			await client.end();
		}
		assert.deepEqual(crashLines(bare), []);
	});

	test('L7. pg_reload_conf() with changed traceprof settings while sessions hold the extension\'s functions ' +
		'(an open cursor over traceprof.spans, a prepared profile_top)', async () => {
		const app = await connect(cluster, 'app', 'app');
		const holder = await connect(cluster, 'postgres', 'app');
		try {
			const ctx = newContext();
			await app.query(`SET traceprof.traceparent = '${ctx.header}'`);
			await app.query('SELECT sum(length(md5(g::text))) FROM generate_series(1, 100000) g');
			await holder.query('BEGIN');
			await holder.query('DECLARE c CURSOR FOR SELECT trace_id FROM traceprof.spans');
			await holder.query('FETCH 1 FROM c');
			await holder.query({ name: 'top', text: 'SELECT count(*)::int AS n FROM traceprof.profile_top($1, NULL)', values: [ctx.traceId] });
			await admin.query("ALTER SYSTEM SET traceprof.profile = 'off'");
			await admin.query("ALTER SYSTEM SET traceprof.sample_hz = 50");
			await admin.query("ALTER SYSTEM SET traceprof.max_spans = 256");
			await admin.query('SELECT pg_reload_conf()');
			await waitFor('the reload in the app session', async () =>
				(await app.query('SHOW traceprof.profile')).rows[0]['traceprof.profile'] === 'off');
			assert.equal((await app.query('SHOW traceprof.sample_hz')).rows[0]['traceprof.sample_hz'], '50');
			await holder.query('FETCH ALL FROM c');
			await holder.query('COMMIT');
			const before = (await holder.query({ name: 'top', values: [ctx.traceId] })).rows[0].n;
			assert.ok(before > 0, 'samples from before the reload');
			const samples = async () => Number((await appAdmin.query('SELECT samples_stored FROM traceprof.stats')).rows[0].samples_stored);
			const stored = await samples();
			await app.query('SELECT sum(length(md5(g::text))) FROM generate_series(1, 100000) g');
			assert.equal(await samples(), stored, 'profile = off after the reload: no sample');
			assert.match(cluster.readLog(), /parameter "traceprof.max_spans" cannot be changed without restarting the server/);
		} finally {
			await app.end();
			await holder.end();
			await admin.query('ALTER SYSTEM RESET ALL');
			await admin.query('SELECT pg_reload_conf()');
		}
	});

	test('L14. a walsender\'s database connection (logical replication): a statement failing before it runs ' +
		'has its error span, as in a backend; its replication commands, failing or not, have none', async () => {
		const ctx = newContext();
		const res = await run(path.join(PG_BIN, 'psql'), ['-X', '-At',
			`host=${cluster.socketDir} port=${cluster.port} user=postgres dbname=app replication=database`,
			'-c', 'DROP_REPLICATION_SLOT lc_no_such_slot', '-c', 'IDENTIFY_SYSTEM',
			'-c', 'SELECT * FROM lc_no_such_table', '-c', 'SELECT 1'],
		{ timeout: 30000, env: { PGOPTIONS: `-c traceprof.traceparent=${ctx.header}` } });
		assert.match(res.stderr, /replication slot "lc_no_such_slot" does not exist/);
		assert.match(res.stderr, /relation "lc_no_such_table" does not exist/);
		const rows = (await appAdmin.query(
			"SELECT status, status_message FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' ORDER BY start_time",
			[ctx.traceId])).rows;
		assert.deepEqual(rows.map((r) => r.status), ['error', 'unset']);
		assert.match(rows[0].status_message, /relation "lc_no_such_table" does not exist/);
	});

	test('L9. pg_cancel_backend() on the workers is ignored: they have no query, and their next log line is not made an ERROR', async () => {
		// Before, the cancel stayed pending, and the next LOG or WARNING a
		// worker wrote (errfinish checks for interrupts) ended it.
		const workers = async () => (await admin.query(
			"SELECT pid, backend_type FROM pg_stat_activity WHERE backend_type LIKE 'traceprof%' ORDER BY backend_type")).rows;
		const before = await workers();
		assert.equal(before.length, 2, JSON.stringify(before));
		for (const w of before) {
			assert.equal((await admin.query('SELECT pg_cancel_backend($1) AS ok', [w.pid])).rows[0].ok, true);
			// The memory context dump is the worker's own LOG lines.
			await admin.query('SELECT pg_log_backend_memory_contexts($1)', [w.pid]);
		}
		await waitFor('both workers to log their memory contexts', () =>
			before.every((w) => cluster.readLog().includes(`[${w.pid}] LOG:  logging memory contexts of PID ${w.pid}`)));
		await new Promise((r) => setTimeout(r, 500));
		assert.deepEqual(await workers(), before, 'the same two workers still run');
		assert.doesNotMatch(cluster.readLog(), /canceling statement due to user request/);
	});

	test('L8. DROP DATABASE while the exporters wait, and while one waits on a collector that never answers: ' +
		'they absorb its barrier, and it ends in seconds', async () => {
		// DROP DATABASE waits until every process has absorbed its
		// ProcSignalBarrier; the workers never did, and it waited forever.
		const receiver = await startReceiver({ grpc: false });
		const dropTakes = async (name) => {
			await admin.query(`CREATE DATABASE ${name}`);
			await admin.query("SET statement_timeout = '30s'");
			const started = Date.now();
			try {
				await admin.query(`DROP DATABASE ${name}`);
			} finally {
				await admin.query('RESET statement_timeout');
			}
			return Date.now() - started;
		};
		try {
			const idle = await dropTakes('dropped_idle');
			assert.ok(idle < 10000, `with the exporters waiting for their next round: ${idle} ms`);

			receiver.setDefault({ hang: true });
			await admin.query(`ALTER SYSTEM SET traceprof.otlp_endpoint = '${receiver.httpEndpoint}'`);
			await admin.query("ALTER SYSTEM SET traceprof.otlp_timeout = '60s'");
			await admin.query("ALTER SYSTEM SET traceprof.export_interval = '100ms'");
			await admin.query('SELECT pg_reload_conf()');
			// Spans stored before the exporter saw the endpoint are not for export: trace until one goes.
			await waitFor('a request at the collector', async () => {
				await traced(appAdmin, newContext(), 'SELECT 1');
				return receiver.requests.length > 0;
			});
			const sending = await dropTakes('dropped_sending');
			assert.ok(sending < 10000, `with the span exporter in a request that never ends (60 s timeout): ${sending} ms`);
		} finally {
			await admin.query('ALTER SYSTEM RESET ALL');
			await admin.query('SELECT pg_reload_conf()');
			await receiver.close();
		}
	});
});
