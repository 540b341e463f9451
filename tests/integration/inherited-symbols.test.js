'use strict';
// The symbols of the server, the C library and traceprof.so are read once,
// in the postmaster, and inherited by every backend and parallel worker.
// Before, each process read them (/proc/self/maps, the ELF files, libc's
// 4 MB debug file: ~40-55 ms) when it first stored samples: a backend's
// first sampled statement, and every parallel worker that sampled, at its
// end, while the leader and its query waited.  The extension says at
// DEBUG1 which process reads them.

const { test } = require('node:test');
const assert = require('node:assert/strict');

const { startTraced, connect, traced, newContext } = require('./lib/traced');

test('backends and parallel workers sample with the postmaster\'s symbols: none reads its own', { timeout: 120000 }, async (t) => {
	const cluster = await startTraced({ 'traceprof.sample_hz': '250', log_min_messages: 'debug1' });
	t.after(() => cluster.stop());
	await cluster.psql('CREATE TABLE par_big AS SELECT g, g::numeric AS n FROM generate_series(1, 1000000) AS g; ANALYZE par_big');
	const sql = 'SELECT sum(n * n * n) AS s FROM par_big';
	for (let session = 0; session < 2; session++) {
		const client = await connect(cluster);
		try {
			await client.query(`SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
				SET parallel_leader_participation = off; SET max_parallel_workers_per_gather = 2`);
			const plan = (await client.query(`EXPLAIN (COSTS OFF) ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
			assert.match(plan, /Workers Planned: 2/, `the query runs in two workers:\n${plan}`);
			const ctx = newContext();
			await traced(client, ctx, sql);
			const rows = (await client.query('SELECT stack, samples FROM traceprof.profile($1)', [ctx.traceId])).rows;
			const ofWorkers = rows.filter((r) => r.stack.includes('ParallelWorkerMain'));
			assert.ok(ofWorkers.length > 0, `the workers sampled, and their frames are named:\n${rows.map((r) => r.stack).join('\n')}`);
			assert.ok(ofWorkers.every((r) => r.stack.includes('standard_ExecutorRun')),
				`workers' stacks are named from the inherited symbols:\n${ofWorkers.map((r) => r.stack).join('\n')}`);
			// A statement of the leader's own, sampled: its backend stores samples too.
			const own = newContext();
			await traced(client, own, 'SELECT sum(g::numeric * g) FROM generate_series(1, 1500000) AS g');
			const ownRows = (await client.query('SELECT count(*)::int AS n FROM traceprof.profile($1)', [own.traceId])).rows;
			assert.ok(ownRows[0].n > 0, 'the backend sampled its own statement');
		} finally {
			await client.end();
		}
	}
	const readers = cluster.readLog().split('\n').filter((l) => /traceprof: reading the symbols of process/.test(l));
	assert.deepEqual(readers.map((l) => Number(/process (\d+)/.exec(l)[1])), [cluster.pid],
		`only the postmaster (pid ${cluster.pid}) reads symbols:\n${readers.join('\n')}`);
});
