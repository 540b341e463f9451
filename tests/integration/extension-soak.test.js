'use strict';
// Two properties of the backend sampler that only show under concurrency:
//  - no cross-talk: two sessions with different trace ids burning CPU at the
//    same time each get a profile of their own work only, in proportion to
//    their own CPU time;
//  - a soak: pgbench with 16 clients, every statement traced
//    (sample_rate = 1), the sampler at its highest rate (250 Hz), spans and
//    profiles exported to endpoints that flap (up, then down: connection
//    refused, every 3 s): no crash, no assertion, samples stored, export
//    and its failures counted, backend and exporter memory flat.
//
// The soak runs 45 s in make check; `make soak` runs it for 30 minutes.
// Environment: TRACEPROF_SOAK_SECONDS (default 45), TRACEPROF_SOAK_CLIENTS
// (pgbench clients, default 16), TRACEPROF_SOAK_FLAP_MS (default 3000).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const { startTraced, connect } = require('./lib/traced');
const { PG_BIN, requireExecutable } = require('./lib/paths');
const { run } = require('./lib/run');
const { decodeTraces } = require('./lib/otlp');
const { decodePprof } = require('./lib/pprof');
const { startSwitchableEndpoints, flapEndpoints } = require('./lib/fault-endpoints');
const { exporterPid, rssAnonKb } = require('./lib/procs');

/** A positive integer from the environment, or its default; anything else is an error. */
function envInt(name, fallback) {
	const v = process.env[name];
	if (v === undefined || v === '')
		return fallback;
	if (!/^[1-9]\d*$/.test(v))
		throw new Error(`${name}=${JSON.stringify(v)}: expected a positive integer`);
	return Number(v);
}

const SOAK_SECONDS = envInt('TRACEPROF_SOAK_SECONDS', 45);
const SOAK_CLIENTS = envInt('TRACEPROF_SOAK_CLIENTS', 16);
const FLAP_MS = envInt('TRACEPROF_SOAK_FLAP_MS', 3000);

const newTrace = () => crypto.randomBytes(16).toString('hex');

/** Run sql in client traced under trace (a new parent span id each time). */
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
		'SELECT stack, samples, nanoseconds FROM traceprof.profile($1)', [trace])).rows
		.map((r) => ({ frames: r.stack.split(';'), samples: Number(r.samples), us: Number(r.nanoseconds) / 1000 }));
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
	const microseconds = pa.reduce((n, r) => n + r.us, 0);
	assert.ok(root && Number(root[1]) === microseconds,
		`the graph holds the trace's ${total(pa)} samples, ${microseconds} µs: ${root && root[1]}`);
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

test('static callers named from the hook\'s own stack and the executor\'s shapes: simple and extended protocol, a SELECT\'s and a write\'s portal, utility via PortalRunMulti and FillPortalStore', async (t) => {
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
	await client.query(`INSERT INTO made ${heavy}`);	// a write: PortalRunMulti, ProcessQuery
	await client.query(`EXPLAIN ANALYZE ${heavy}`);	// a utility whose rows fill the portal's store
	const stacks = (await client.query('SELECT stack FROM traceprof.profile($1)', [trace])).rows.map((r) => `;${r.stack};`);
	// Debian's build inlines exec_execute_message into PostgresMain: the
	// extended protocol's stacks have no frame there to name.
	for (const path of ['PostgresMain;exec_simple_query;PortalRun;',
		';PortalRun;PortalRunMulti;PortalRunUtility;', ';PortalRun;FillPortalStore;PortalRunUtility;'])
		assert.ok(stacks.some((s) => s.includes(path)), `a stack shows ${path}\n${stacks.join('\n')}`);
	assert.ok(!stacks.some((s) => /;PostgresMain;postgres\+0x[0-9a-f]+;PortalRun;/.test(s)),
		`no unnamed frame is left between PostgresMain and PortalRun:\n${stacks.join('\n')}`);
	// The executor's static frames, named by their shape around the traced
	// ExecutorRun hook (whose frame a traced statement's samples always have).
	for (const path of [';PortalRun;PortalRunSelect;traceprof_traced_ExecutorRun;standard_ExecutorRun;',
		';PortalRun;PortalRunMulti;ProcessQuery;traceprof_traced_ExecutorRun;standard_ExecutorRun;'])
		assert.ok(stacks.some((s) => s.includes(path)), `a stack shows ${path}\n${stacks.join('\n')}`);
	assert.ok(!stacks.some((s) => /;PortalRun;(postgres\+0x[0-9a-f]+;)+[A-Za-z_]*ExecutorRun;/.test(s)),
		`no unnamed frame is left between PortalRun and ExecutorRun:\n${stacks.join('\n')}`);
});

test('another library\'s ExecutorRun hook between PostgreSQL\'s frames and ours (pg_stat_statements listed after traceprof) is no PostgreSQL frame: a SELECT is not named a write', async (t) => {
	// Before, its unnamed frame and PortalRunSelect's filled the rule for a
	// write's portal (PortalRunMulti, ProcessQuery): every SELECT read as a
	// write, and the wrong names stuck to those addresses.
	const cluster = await startTraced({
		shared_preload_libraries: 'traceprof,pg_stat_statements',
		'traceprof.sample_hz': '250', max_parallel_workers_per_gather: '0', jit: 'off',
	});
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	const trace = newTrace();
	await client.query(`SET traceprof.traceparent = '00-${trace}-${crypto.randomBytes(8).toString('hex')}-01'`);
	await client.query('SELECT sum(g::numeric * g) FROM generate_series(1, 600000) g');
	const stacks = (await client.query('SELECT stack FROM traceprof.profile($1)', [trace])).rows.map((r) => `;${r.stack};`);
	assert.ok(stacks.some((s) => s.includes(';traceprof_traced_ExecutorRun;')), `the SELECT was sampled:\n${stacks.join('\n')}`);
	assert.ok(!stacks.some((s) => /;(PortalRunMulti|ProcessQuery);/.test(s)),
		`a SELECT's stack names no write's frames:\n${stacks.join('\n')}`);
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
		const client = await connect(cluster, 'postgres', 'app', `-c jit_profiling_support=${profiling}`);
		try {
			const trace = newTrace();
			let seen;
			for (let run = 0; run < 8 && !(seen && enough(seen)); run++) {
				await traced(client, trace, sql);
				const rows = (await client.query('SELECT stack, samples FROM traceprof.profile($1)', [trace])).rows;
				// Samples of the code that runs, not of LLVM compiling it: a
				// backend's first JIT loads libLLVM after its code map was read,
				// and LLVM keeps no frame pointers, so such a sample's walk can
				// end on, or pass through, an address in no module (noted in
				// docs/configuration.md). Any LLVM frame marks one, whatever
				// its leaf (LLVM calling mmap while it loads, say), and so
				// does any C++ frame: the C++ standard library's templates in
				// libLLVM (std::map in its jitdump listener, _ZNSt8_Rb_tree...)
				// are only LLVM's in a backend.
				const running = rows.filter((r) => {
					const f = r.stack.split(';');
					return f.includes('PostgresMain') && !f.some((x) => /^(_Z|libLLVM|libstdc\+\+)/.test(x));
				});
				const count = (re) => running.filter((r) => r.stack.split(';').some((f) => re.test(f)))
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
		const kb = rssAnonKb(pid);
		if (kb !== null)	/* null: a backend that just exited */
			rss[pid] = kb;
	}
	return rss;
}

test(`soak: pgbench, ${SOAK_CLIENTS} clients, every statement traced, sampler at 250 Hz, endpoints flapping every ` +
	`${FLAP_MS} ms, ${SOAK_SECONDS} s: no crash, export goes on and its failures are counted, memory flat`,
{ timeout: (SOAK_SECONDS + 180) * 1000 }, async (t) => {
	const pgbench = path.join(PG_BIN, 'pgbench');
	requireExecutable(pgbench);
	const ep = await startSwitchableEndpoints();
	t.after(() => ep.close());
	const cluster = await startTraced({
		'traceprof.sample_rate': '1',
		'traceprof.sample_hz': '250',
		'traceprof.profile': 'traced',
		'traceprof.otlp_endpoint': ep.otlpUrl,
		'traceprof.pyroscope_url': ep.ingestUrl,
		'traceprof.export_interval': '200ms',
		'traceprof.upload_interval': '1s',
		'traceprof.otlp_timeout': '1s',
		max_connections: String(SOAK_CLIENTS + 14),
	});
	t.after(() => cluster.stop());
	const env = { PGHOST: cluster.socketDir, PGPORT: String(cluster.port), PGUSER: 'postgres', PGDATABASE: 'app' };
	const init = await run(pgbench, ['-i', '-s', '2', '-q'], { env, timeout: 120000 });
	assert.equal(init.code, 0, init.stderr);
	const reader = await connect(cluster);
	t.after(() => reader.end());
	await reader.query('SET traceprof.sample_rate = 0');	// the test's own queries stay untraced
	const exporter = exporterPid(cluster);
	assert.ok(exporter, 'the traceprof exporter runs');
	const before = Number((await reader.query('SELECT samples_stored FROM traceprof.stats')).rows[0].samples_stored);

	// What reached the endpoints is counted, spot-checked with the foreign
	// decoders, and forgotten: a long soak must not keep every body in memory.
	const delivered = { spanRequests: 0, uploads: 0, decodedSpans: 0, decodedSamples: 0 };
	const tally = () => {
		const { requests: spanReqs } = ep.otlp;
		const { requests: uploads } = ep.ingest;
		ep.forget();
		delivered.spanRequests += spanReqs.length;
		delivered.uploads += uploads.length;
		if (spanReqs.length)
			delivered.decodedSpans += decodeTraces(spanReqs.at(-1).body).spans.length;
		if (uploads.length)
			delivered.decodedSamples += decodePprof(uploads.at(-1).body).samples.length;
	};
	const tallyTimer = setInterval(tally, 2000);
	t.after(() => clearInterval(tallyTimer));

	const flapping = flapEndpoints(ep, { periodMs: FLAP_MS });
	const bench = run(pgbench, ['-c', String(SOAK_CLIENTS), '-j', '2', '-T', String(SOAK_SECONDS), '-n'],
		{ env, timeout: (SOAK_SECONDS + 60) * 1000 });
	await new Promise((r) => setTimeout(r, (SOAK_SECONDS * 1000) / 3));
	const early = await backendRss(reader);
	const exporterEarly = rssAnonKb(exporter);
	await new Promise((r) => setTimeout(r, (SOAK_SECONDS * 1000) / 2));
	const late = await backendRss(reader);
	const exporterLate = rssAnonKb(exporter);
	const res = await bench;
	await flapping.stop();	// and the endpoints stay up
	clearInterval(tallyTimer);
	tally();

	assert.equal(res.code, 0, `pgbench failed:\n${res.stdout}\n${res.stderr}`);
	const tps = /tps = ([\d.]+)/.exec(res.stdout);
	assert.ok(tps && Number(tps[1]) > 0, `pgbench ran transactions:\n${res.stdout}`);
	const log = cluster.readLog();
	assert.doesNotMatch(log, /terminated by signal|PANIC|TRAP:|server process .* was terminated/,
		'no backend crashed and no assertion fired');
	const stats = (await reader.query('SELECT * FROM traceprof.stats')).rows[0];
	t.diagnostic(`${tps[1]} tps; ${flapping.flips} flips; stats ${JSON.stringify(stats)}; ` +
		`delivered ${JSON.stringify(delivered)}`);
	assert.ok(Number(stats.spans_created) > 1000, `statements were traced: ${stats.spans_created} spans`);
	assert.ok(Number(stats.samples_stored) > before, `samples were stored: ${stats.samples_stored}`);

	// The endpoints flapped, export went on while they were up, and the
	// failures while they were down were counted.
	assert.deepEqual(flapping.errors, [], 'every flip of the endpoints succeeded');
	assert.ok(flapping.flips >= Math.min(4, Math.floor(SOAK_SECONDS * 1000 / FLAP_MS) - 1),
		`the endpoints flapped: ${flapping.flips} flips`);
	assert.ok(delivered.spanRequests > 0 && delivered.decodedSpans > 0, `spans reached the receiver: ${JSON.stringify(delivered)}`);
	assert.ok(delivered.uploads > 0 && delivered.decodedSamples > 0, `profiles reached the capture: ${JSON.stringify(delivered)}`);
	assert.ok(Number(stats.export_failures) > 0, `failures while down are counted: ${stats.export_failures}`);
	assert.ok(Number(stats.spans_exported) > 0 && Number(stats.samples_exported) > 0,
		`exported spans and samples are counted: ${stats.spans_exported}, ${stats.samples_exported}`);
	assert.ok(Number(stats.spans_pending) <= Number(stats.capacity), 'the ring stays bounded');
	// Up for good: whatever waited in the ring is delivered.
	const deadline = Date.now() + 60000;
	let pending;
	while ((pending = Number((await reader.query('SELECT spans_pending FROM traceprof.stats')).rows[0].spans_pending)) > 0 &&
		Date.now() < deadline)
		await new Promise((r) => setTimeout(r, 200));
	assert.equal(pending, 0, 'export resumes once the endpoints stay up: the ring drains');

	// Memory flat: a process's RSS may settle (caches, the sampler's buffer
	// and symbol tables, curl's connection cache come on first use) but must
	// not keep growing.
	const common = Object.keys(early).filter((pid) => pid in late);
	assert.ok(common.length >= 4, `backends observed twice: ${common.length}`);
	t.diagnostic(`backend RssAnon growth (kB) from 1/3 to 5/6 of the run: ${common.map((pid) => late[pid] - early[pid]).join(' ')} ` +
		`(at 5/6: ${Math.min(...common.map((pid) => late[pid]))}..${Math.max(...common.map((pid) => late[pid]))} kB)`);
	for (const pid of common)
		assert.ok(late[pid] - early[pid] < 8 * 1024,
			`backend ${pid}: RSS ${early[pid]} kB then ${late[pid]} kB (growth must stay under 8 MB)`);
	assert.equal(exporterPid(cluster), exporter, 'the exporter ran through the soak (never restarted)');
	t.diagnostic(`exporter RssAnon ${exporterEarly} kB at 1/3, ${exporterLate} kB at 5/6 of the run`);
	assert.ok(exporterEarly !== null && exporterLate !== null && exporterLate - exporterEarly < 4 * 1024,
		`exporter RssAnon ${exporterEarly} kB then ${exporterLate} kB (growth must stay under 4 MB)`);
});
