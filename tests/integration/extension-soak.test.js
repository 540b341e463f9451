'use strict';
// Two properties of the backend sampler that only show under concurrency:
//  - no cross-talk: two sessions with different trace ids burning CPU at the
//    same time each get a profile of their own work only, in proportion to
//    their own CPU time;
//  - a short soak: pgbench with 8 clients, every statement traced
//    (sample_rate = 1), the sampler at its highest rate (250 Hz): no crash,
//    no assertion, samples stored, and backend memory flat.
// (The 30-minute soak is bench's business; this one runs in make check.)

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const { startCluster } = require('./lib/cluster');
const { PG_BIN, requireExecutable } = require('./lib/paths');
const { run } = require('./lib/run');

let pg;
try {
	pg = require('pg');
} catch (err) {
	throw new Error(`the npm package "pg" is missing (${err.message}): run 'make deps'`);
}

const SOAK_SECONDS = Number(process.env.TRACEPROF_SOAK_SECONDS || 45);

async function startTraced(settings = {}) {
	const cluster = await startCluster({
		settings: { shared_preload_libraries: 'traceprof', ...settings },
	});
	await cluster.psql('CREATE EXTENSION traceprof;', { db: 'app' });
	return cluster;
}

async function connect(cluster, options) {
	const client = new pg.Client({ host: cluster.socketDir, port: cluster.port, user: 'postgres', database: 'app', options });
	client.on('error', () => {});
	await client.connect();
	return client;
}

const newTrace = () => crypto.randomBytes(16).toString('hex');

/** Run sql traced under trace in client; return the statement span's CPU ms. */
async function traced(client, trace, sql) {
	await client.query(`SET traceprof.traceparent = '00-${trace}-${crypto.randomBytes(8).toString('hex')}-01'`);
	await client.query(sql);
	await client.query("SET traceprof.traceparent = ''");
}

test('no cross-talk: two concurrent traced sessions each profile only their own work', async (t) => {
	const cluster = await startTraced({ 'traceprof.sample_hz': '250' });
	t.after(() => cluster.stop());
	const [a, b, reader] = await Promise.all([connect(cluster), connect(cluster), connect(cluster)]);
	t.after(() => Promise.all([a.end(), b.end(), reader.end()]));
	const traceA = newTrace();
	const traceB = newTrace();

	// A: numeric arithmetic; B: md5 hashing.  Different functions, same time.
	await Promise.all([
		traced(a, traceA, 'SELECT sum(g::numeric * g::numeric) FROM generate_series(1, 1500000) g'),
		traced(b, traceB, "SELECT count(DISTINCT md5(g::text)) FROM generate_series(1, 400000) g"),
	]);

	const profile = async (trace) => (await reader.query(
		'SELECT stack, samples FROM traceprof.profile($1)', [trace])).rows
		.map((r) => ({ frames: r.stack.split(';'), samples: Number(r.samples) }));
	const cpuMs = async (trace) => Number((await reader.query(
		"SELECT sum(cpu_time_ms) AS ms FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server'", [trace])).rows[0].ms);
	const [pa, pb] = [await profile(traceA), await profile(traceB)];
	const total = (p) => p.reduce((n, r) => n + r.samples, 0);
	const withFrame = (p, re) => p.filter((r) => r.frames.some((f) => re.test(f))).reduce((n, r) => n + r.samples, 0);

	assert.ok(total(pa) > 20 && total(pb) > 20, `both sessions sampled: ${total(pa)} and ${total(pb)}`);
	// Each trace holds its own work and none of the other's.
	assert.ok(withFrame(pa, /^numeric_/) > 0, 'A samples show numeric functions');
	assert.equal(withFrame(pa, /md5/), 0, 'A carries none of B\'s md5 work');
	assert.ok(withFrame(pb, /md5/) > 0, 'B samples show md5');
	assert.equal(withFrame(pb, /^numeric_/), 0, 'B carries none of A\'s numeric work');
	// The same samples as flame graphs, straight from SQL.
	const svg = (await reader.query('SELECT traceprof.flamegraph($1) AS svg', [traceA])).rows[0].svg;
	assert.match(svg, /^<\?xml[^]*<svg[^]*<\/svg>\s*$/, 'a complete SVG document');
	const root = /data-total="(\d+)"/.exec(svg);
	assert.ok(root && Number(root[1]) === total(pa), `the graph holds the trace's ${total(pa)} samples: ${root && root[1]}`);
	assert.match(svg, /data-n="numeric_[a-z_]+"/, 'A\'s numeric frames are drawn');
	assert.doesNotMatch(svg, /md5/, 'and none of B\'s');
	const diff = (await reader.query('SELECT traceprof.flamegraph_diff($1) AS svg', [traceA])).rows[0].svg;
	assert.match(diff, /vs\. its baseline[^]*data-b="\d+"/, 'the differential graph carries baseline weights');
	// Samples follow each session's own CPU time (250 Hz: 4 ms a sample).
	for (const [name, p, trace] of [['A', pa, traceA], ['B', pb, traceB]]) {
		const expected = (await cpuMs(trace)) / 4;
		assert.ok(total(p) >= expected / 2 && total(p) <= expected * 2,
			`${name}: ${total(p)} samples for ${expected * 4} ms of CPU at 250 Hz (tolerance: within a factor of 2)`);
	}
});

test('executor node functions are named from the running plan: hash join, sort, aggregate', async (t) => {
	const cluster = await startTraced({ 'traceprof.sample_hz': '250', max_parallel_workers_per_gather: '0' });
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	await client.query(`CREATE TABLE big AS SELECT g AS id, g % 1000 AS k, md5(g::text) AS v FROM generate_series(1, 300000) g;
		CREATE TABLE small AS SELECT g AS k, md5(g::text) AS w FROM generate_series(1, 1000) g;
		ANALYZE big; ANALYZE small;`);
	const trace = newTrace();
	await traced(client, trace, `SELECT k, count(*), max(v || w) FROM
		(SELECT * FROM big JOIN small USING (k) ORDER BY v) s GROUP BY k`);
	const frames = new Set((await client.query('SELECT stack FROM traceprof.profile($1)', [trace])).rows
		.flatMap((r) => r.stack.split(';')));
	for (const node of ['ExecHashJoin', 'ExecSort', 'ExecAgg'])
		assert.ok(frames.has(node), `${node} is named in the profile (static in Debian's stripped postgres): ${[...frames].join(' ')}`);
	const share = Number((await client.query('SELECT named_frames_percent FROM traceprof.stats')).rows[0].named_frames_percent);
	assert.ok(share > 0 && share <= 100, `traceprof.stats reports the share of named frames: ${share}`);
});

test('static callers named from the hook\'s own stack: simple and extended protocol, utility via PortalRunMulti and FillPortalStore', async (t) => {
	const cluster = await startTraced({ 'traceprof.sample_hz': '250', max_parallel_workers_per_gather: '0', jit: 'off' });
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	const trace = newTrace();
	const heavy = 'SELECT sum(g::numeric * g) FROM generate_series(1, 600000) g';
	await client.query(`SET traceprof.traceparent = '00-${trace}-${crypto.randomBytes(8).toString('hex')}-01'`);
	await client.query(heavy);	// simple protocol
	await client.query(`${heavy} WHERE g > $1`, [0]);	// parameters: Parse, Bind, Execute
	await client.query(`CREATE TABLE made AS ${heavy}`);	// a utility in a multi-query portal
	await client.query(`EXPLAIN ANALYZE ${heavy}`);	// a utility whose rows fill the portal's store
	const stacks = (await client.query('SELECT stack FROM traceprof.profile($1)', [trace])).rows.map((r) => `;${r.stack};`);
	// Debian's build inlines exec_execute_message into PostgresMain: the
	// extended protocol's stacks have no frame there to name.
	for (const path of ['PostgresMain;exec_simple_query;PortalRun;',
		';PortalRun;PortalRunMulti;PortalRunUtility;', ';PortalRun;FillPortalStore;PortalRunUtility;'])
		assert.ok(stacks.some((s) => s.includes(path)), `a stack shows ${path}\n${stacks.join('\n')}`);
	assert.ok(!stacks.some((s) => /;PostgresMain;postgres\+0x[0-9a-f]+;PortalRun;/.test(s)),
		`no unnamed frame is left between PostgresMain and PortalRun:\n${stacks.join('\n')}`);
});

test('JIT code is named from PostgreSQL\'s jitdump file with jit_profiling_support, "[unknown] (no module)" without', async (t) => {
	const cluster = await startTraced({
		'traceprof.sample_hz': '250', max_parallel_workers_per_gather: '0',
		// No inlining or optimization: compiling stays short, so the samples land in the JIT code itself.
		jit: 'on', jit_above_cost: '0', jit_inline_above_cost: '-1', jit_optimize_above_cost: '-1',
	});
	t.after(() => cluster.stop());
	await cluster.psql(`CREATE TABLE numbers AS SELECT g AS a, g % 97 AS b, g % 13 AS c FROM generate_series(1, 1500000) g;
		ANALYZE numbers;`);
	const sql = 'SELECT sum(a * 3 + b * c - (a % 11)), count(*) FILTER (WHERE b > c + 5) FROM numbers';
	// Runs the query in one trace until `enough` holds (at most 8 times: a slow
	// machine may need more than one run for five samples in JIT code).
	const frames = async (profiling, enough) => {
		// Set at connection start: LLVM's perf listener is chosen when the backend starts JIT.
		const client = await connect(cluster, `-c jit_profiling_support=${profiling}`);
		try {
			const trace = newTrace();
			let seen;
			for (let run = 0; run < 8 && !(seen && enough(seen)); run++) {
				await traced(client, trace, sql);
				const rows = (await client.query('SELECT stack, samples FROM traceprof.profile($1)', [trace])).rows;
				const count = (re) => rows.filter((r) => r.stack.split(';').some((f) => re.test(f)))
					.reduce((n, r) => n + Number(r.samples), 0);
				seen = { jit: count(/^\[jit\] (evalexpr|deform)$/), unknown: count(/^\[unknown\] \(no module\)$/),
					all: count(/./), runs: run + 1, stacks: rows.map((r) => r.stack).join('\n') };
			}
			return seen;
		} finally {
			await client.end();
		}
	};
	const on = await frames('on', (f) => f.jit >= 5);
	assert.ok(on.jit >= 5 && on.unknown === 0,
		`with jit_profiling_support, JIT frames are named (${on.jit} of ${on.all} samples in ${on.runs} runs; ${on.unknown} unnamed):\n${on.stacks}`);
	const off = await frames('off', (f) => f.unknown >= 5);
	t.diagnostic(`JIT frames: named ${on.jit} of ${on.all} in ${on.runs} runs; unnamed without the setting ${off.unknown} of ${off.all} in ${off.runs} runs`);
	assert.ok(off.jit === 0 && off.unknown >= 5,
		`without it, no jitdump: JIT frames stay "[unknown] (no module)" (${off.unknown} of ${off.all} in ${off.runs} runs):\n${off.stacks}`);
});

/** RssAnon (private memory; shared buffers a backend touches do not count) in kB of each backend serving pgbench (application_name pgbench). */
async function backendRss(reader) {
	const pids = (await reader.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'")).rows.map((r) => r.pid);
	const rss = {};
	for (const pid of pids) {
		try {
			const m = /RssAnon:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
			if (m)
				rss[pid] = Number(m[1]);
		} catch {
			/* a backend that just exited */
		}
	}
	return rss;
}

test(`soak: pgbench, 8 clients, every statement traced, sampler at 250 Hz, ${SOAK_SECONDS} s: no crash, memory flat`, { timeout: (SOAK_SECONDS + 120) * 1000 }, async (t) => {
	const pgbench = path.join(PG_BIN, 'pgbench');
	requireExecutable(pgbench);
	const cluster = await startTraced({
		'traceprof.sample_rate': '1',
		'traceprof.sample_hz': '250',
		'traceprof.profile': 'traced',
		max_connections: '30',
	});
	t.after(() => cluster.stop());
	const env = { PGHOST: cluster.socketDir, PGPORT: String(cluster.port), PGUSER: 'postgres', PGDATABASE: 'app' };
	const init = await run(pgbench, ['-i', '-s', '2', '-q'], { env, timeout: 120000 });
	assert.equal(init.code, 0, init.stderr);
	const reader = await connect(cluster);
	t.after(() => reader.end());
	const before = Number((await reader.query('SELECT samples_stored FROM traceprof.stats')).rows[0].samples_stored);

	const bench = run(pgbench, ['-c', '8', '-j', '2', '-T', String(SOAK_SECONDS), '-n'], { env, timeout: (SOAK_SECONDS + 60) * 1000 });
	await new Promise((r) => setTimeout(r, (SOAK_SECONDS * 1000) / 3));
	const early = await backendRss(reader);
	await new Promise((r) => setTimeout(r, (SOAK_SECONDS * 1000) / 2));
	const late = await backendRss(reader);
	const res = await bench;

	assert.equal(res.code, 0, `pgbench failed:\n${res.stdout}\n${res.stderr}`);
	const tps = /tps = ([\d.]+)/.exec(res.stdout);
	assert.ok(tps && Number(tps[1]) > 0, `pgbench ran transactions:\n${res.stdout}`);
	const log = cluster.readLog();
	assert.doesNotMatch(log, /terminated by signal|PANIC|TRAP:|server process .* was terminated/,
		'no backend crashed and no assertion fired');
	const stats = (await reader.query('SELECT spans_created, samples_stored FROM traceprof.stats')).rows[0];
	assert.ok(Number(stats.spans_created) > 1000, `statements were traced: ${stats.spans_created} spans`);
	assert.ok(Number(stats.samples_stored) > before, `samples were stored: ${stats.samples_stored}`);
	// Memory flat: a backend's RSS may settle (caches, the sampler's buffer
	// and symbol tables come on first use) but must not keep growing.
	const common = Object.keys(early).filter((pid) => pid in late);
	assert.ok(common.length >= 4, `backends observed twice: ${common.length}`);
	for (const pid of common)
		assert.ok(late[pid] - early[pid] < 8 * 1024,
			`backend ${pid}: RSS ${early[pid]} kB then ${late[pid]} kB (growth must stay under 8 MB)`);
});
