'use strict';
// The loader carries its trace into the server: when the session knows the
// traceprof.traceparent setting (current_setting(..., true) is non-NULL) it
// runs SET traceprof.traceparent = '00-<trace>-<span>-01' with the span of
// the statement that follows (loader.copy before COPY, loader.commit before
// COMMIT).  The extension does not exist yet, so its presence is simulated
// with a placeholder GUC set per database, and the server log
// (log_statement = all) shows what the loader sent.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');

const { GENERATOR, LOADER, requireExecutable } = require('./lib/paths');
const { run, describe } = require('./lib/run');
const { startCluster } = require('./lib/cluster');
const { startReceiver } = require('./lib/receiver');
const { decodeTraces } = require('./lib/otlp');
const { makeTempDir, removeTempDir } = require('./lib/tmp');

const RECORDS = 2000;
let cluster;
let dir;
let input;

before(async () => {
	requireExecutable(GENERATOR);
	requireExecutable(LOADER);
	dir = makeTempDir('traceprof-prop-');
	input = path.join(dir, 'orders.json');
	const g = await run(GENERATOR, [String(RECORDS), input]);
	assert.equal(g.code, 0, describe(g));
	cluster = await startCluster({ settings: { log_statement: 'all' } });
	await cluster.psql(`
		ALTER DATABASE app SET traceprof.traceparent = '';
		CREATE DATABASE plain OWNER app;`, { db: 'postgres' });
});

after(async () => {
	if (cluster)
		await cluster.stop();
	removeTempDir(dir);
});

/** Server log lines written while fn ran, grouped by backend PID. */
async function logDuring(fn) {
	const start = cluster.readLog().length;
	const result = await fn();
	// The postmaster's stderr is a pipe to the log file: let it drain.
	await new Promise((r) => setTimeout(r, 300));
	const lines = cluster.readLog().slice(start).split('\n');
	return { result, lines };
}

const pidOf = (line) => (/ \[(\d+)\] /.exec(line) || [])[1];

function load(db, table, env) {
	return run(LOADER, [cluster.url('app', 'secret', db), input, '--table', table], { env, timeout: 60000 });
}

test('with the setting known: SET traceprof.traceparent carries loader.copy and loader.commit', async (t) => {
	const r = await startReceiver({ grpc: false });
	t.after(() => r.close());
	const { result: res, lines } = await logDuring(() =>
		load('app', 'prop_1', { OTEL_EXPORTER_OTLP_ENDPOINT: r.httpEndpoint }));
	assert.equal(res.code, 0, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM prop_1'), String(RECORDS));

	assert.equal(r.requests.length, 1, 'spans exported');
	const spans = decodeTraces(r.requests[0].body).spans;
	const one = (name) => {
		const s = spans.filter((x) => x.name === name);
		assert.equal(s.length, 1, `one ${name} span among ${spans.map((x) => x.name)}`);
		return s[0];
	};
	const root = one('loader.run');
	const copy = one('loader.copy');
	const commit = one('loader.commit');
	assert.equal(copy.traceId, root.traceId);
	assert.equal(commit.traceId, root.traceId);

	const setCopy = `SET traceprof.traceparent = '00-${root.traceId}-${copy.spanId}-01'`;
	const setCommit = `SET traceprof.traceparent = '00-${root.traceId}-${commit.spanId}-01'`;
	const copyAt = lines.findIndex((l) => l.includes(setCopy));
	assert.ok(copyAt >= 0, `the log has ${setCopy}\n--- log:\n${lines.join('\n')}`);
	const pid = pidOf(lines[copyAt]);
	const mine = lines.filter((l) => pidOf(l) === pid);
	const iSetCopy = mine.findIndex((l) => l.includes(setCopy));
	const iCopy = mine.findIndex((l) => /statement: COPY .*FROM STDIN/i.test(l));
	const iSetCommit = mine.findIndex((l) => l.includes(setCommit));
	const iCommit = mine.findIndex((l, i) => i > iSetCommit && /statement: (COMMIT|END)\b/i.test(l));
	const context = `\n--- backend ${pid}:\n${mine.join('\n')}`;
	assert.ok(iCopy > iSetCopy, `SET (loader.copy) comes before COPY${context}`);
	assert.ok(iSetCommit > iCopy, `the log has ${setCommit} after COPY${context}`);
	assert.ok(iCommit > iSetCommit, `SET (loader.commit) comes before COMMIT${context}`);
	// Every traceparent the loader sent belongs to this trace.
	for (const l of lines.filter((x) => /SET traceprof\.traceparent/.test(x)))
		assert.match(l, new RegExp(`'00-${root.traceId}-[0-9a-f]{16}-01'`), l);
});

test('with the setting known and no exporter: the traceparent still names the printed trace', async () => {
	const { result: res, lines } = await logDuring(() => load('app', 'prop_2', {}));
	assert.equal(res.code, 0, describe(res));
	const sets = lines.filter((l) => /SET traceprof\.traceparent = '00-[0-9a-f]{32}-[0-9a-f]{16}-01'/.test(l));
	assert.ok(sets.length >= 2, `SET before COPY and before COMMIT\n${lines.join('\n')}`);
	const traces = new Set(sets.map((l) => /'00-([0-9a-f]{32})-/.exec(l)[1]));
	assert.equal(traces.size, 1, 'one trace');
	const spanIds = new Set(sets.map((l) => /'00-[0-9a-f]{32}-([0-9a-f]{16})-/.exec(l)[1]));
	assert.ok(spanIds.size >= 2, 'copy and commit are different spans');
	const printed = /trace_id=([0-9a-f]{32})\b/.exec(res.stderr);
	if (printed)
		assert.ok(traces.has(printed[1]), `the trace printed on stderr (${printed[1]}) is the one sent`);
});

test('without the setting: no SET traceprof.traceparent, and the load succeeds', async () => {
	const { result: res, lines } = await logDuring(() => load('plain', 'prop_3', {}));
	assert.equal(res.code, 0, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM prop_3', { db: 'plain' }), String(RECORDS));
	const mine = lines.filter((l) => l.includes('app@plain'));
	assert.ok(mine.some((l) => /statement: COPY/i.test(l)), `the loader's session is in the log\n${lines.join('\n')}`);
	assert.deepEqual(mine.filter((l) => /SET traceprof\.traceparent/i.test(l)), [], 'no traceparent sent');
	assert.deepEqual(lines.filter((l) => /ERROR/.test(l)), [], 'no server error');
});
