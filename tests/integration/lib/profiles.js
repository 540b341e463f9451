'use strict';
// What the profile tests share (extension-profile.test.js,
// extension-pyroscope.test.js): a traced cluster, a CPU-bound statement,
// readers of traceprof.spans, traceprof.profile() and traceprof.stats, and
// checks over frames.

const assert = require('node:assert/strict');

const { startTraced: startTracedCluster } = require('./traced');

/** A traced cluster whose exporter runs every 100 ms. */
const startTraced = (settings = {}) => startTracedCluster({ 'traceprof.export_interval': '100', ...settings });

/** CPU-bound statement: numeric multiplication over n generated rows. */
const cpuSql = (n) => `SELECT sum(g::numeric * g) AS s FROM generate_series(1, ${n}) AS g`;
/** Its exact result, sum of g^2 = n(n+1)(2n+1)/6. */
const cpuResult = (n) => (BigInt(n) * BigInt(n + 1) * BigInt(2 * n + 1) / 6n).toString();

/** a lies within a factor f of b (both positive). */
function assertWithinFactor(actual, expected, factor, what) {
	assert.ok(expected > 0, `${what}: expected value ${expected} must be positive`);
	assert.ok(actual >= expected / factor && actual <= expected * factor,
		`${what}: ${actual} is not within a factor of ${factor} of ${expected.toFixed(1)} ` +
		`(plausibility bound: [${(expected / factor).toFixed(1)}, ${(expected * factor).toFixed(1)}])`);
}

async function closeAll(...clients) {
	for (const c of clients)
		if (c)
			await c.end().catch(() => {});
}

/** Sample counters of traceprof.stats, as Numbers. */
async function sampleStats(client) {
	const r = (await client.query('SELECT samples_stored, samples_dropped, samples_exported FROM traceprof.stats')).rows[0];
	return { stored: Number(r.samples_stored), dropped: Number(r.samples_dropped), exported: Number(r.samples_exported) };
}

/** traceprof.spans of a trace. */
async function spansOf(client, traceId) {
	return (await client.query(
		`SELECT span_id, parent_span_id, name, kind, duration_ms, cpu_time_ms, status, status_message,
		        backend_pid, query, attributes
		   FROM traceprof.spans WHERE trace_id = $1 ORDER BY start_time`, [traceId])).rows;
}

/** The one SERVER span of a trace whose query starts with prefix. */
function serverSpan(spans, prefix) {
	const found = spans.filter((s) => s.kind === 'server' && (s.query || '').startsWith(prefix));
	assert.equal(found.length, 1, `one SERVER span with a query starting ${JSON.stringify(prefix)}: ` +
		JSON.stringify(spans.map((s) => [s.name, s.kind, s.query])));
	return found[0];
}

/** The SERVER span whose query starts with prefix, and the one statement span nested directly under it. */
function topAndNested(spans, prefix) {
	const top = serverSpan(spans, prefix);
	const nested = spans.filter((s) => s.kind === 'internal' && s.parent_span_id === top.span_id && s.name !== 'plan');
	assert.equal(nested.length, 1, `one nested statement span under the top-level one: ${JSON.stringify(spans.map((s) => [s.name, s.kind, s.query]))}`);
	return { top, nested: nested[0] };
}

/** traceprof.profile rows with numbers. */
async function profile(client, traceId, spanId = null) {
	const rows = (await client.query('SELECT span_name, stack, samples, nanoseconds FROM traceprof.profile($1, $2)',
		[traceId, spanId])).rows;
	return rows.map((r) => ({ ...r, samples: Number(r.samples), sampled_ms: Number(r.nanoseconds) / 1e6, frames: r.stack.split(';') }));
}

async function topFunctions(client, traceId, spanId = null) {
	const rows = (await client.query(
		'SELECT function, self_samples, total_samples, self_percent FROM traceprof.profile_top($1, NULL, $2)',
		[traceId, spanId])).rows;
	return rows.map((r) => ({ ...r, self_samples: Number(r.self_samples), total_samples: Number(r.total_samples) }));
}

const total = (rows) => rows.reduce((n, r) => n + r.samples, 0);
const weightWhere = (rows, pred) => rows.filter(pred).reduce((n, r) => n + r.samples, 0);
const occurrences = (frames, name) => frames.filter((f) => f === name).length;
const showRows = (rows, n = 6) => [...rows].sort((a, b) => b.samples - a.samples).slice(0, n)
	.map((r) => `  ${r.samples} [${r.span_name}] ${r.stack}`).join('\n');

/**
 * A static function of Debian's stripped postgres: no symbol names it.  The
 * symbolizer shows it as "[unknown] (postgres)", or (since it reads the
 * unwind table) as "postgres+0x<link-time address>" for addr2line.
 */
const isStaticPostgresFrame = (f) => f === '[unknown] (postgres)' || /^postgres\+0x[0-9a-f]+$/.test(f);

/** The frames appear in this order (root first), not necessarily adjacent. */
function inOrder(frames, names) {
	let at = -1;
	for (const n of names) {
		const i = frames.indexOf(n, at + 1);
		if (i < 0)
			return false;
		at = i;
	}
	return true;
}

/** Server log lines that show a crashed backend or a failed assertion. */
function crashLines(cluster) {
	return cluster.readLog().split('\n')
		.filter((l) => /terminated by signal|was terminated|PANIC|TRAP:|server process .* exited with exit code [^0]/.test(l));
}

module.exports = {
	startTraced, cpuSql, cpuResult, assertWithinFactor, closeAll, sampleStats, spansOf, serverSpan,
	topAndNested, profile, topFunctions, total, weightWhere, occurrences, showRows, isStaticPostgresFrame,
	inOrder, crashLines,
};
