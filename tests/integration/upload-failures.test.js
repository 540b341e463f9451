'use strict';
// The profile uploader when a part of a batch fails.  A batch goes to
// Pyroscope as one request per 10-s window and profile type; here one
// batch of two parts (a CPU statement's samples and a wall one's, taken at
// once), the capture server (lib/ingest.js) answering the first request as
// each test says, and traceprof.stats telling what was exported and what
// dropped.  Its own file: the uploads wait out a 5-s upload interval.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { decodePprof } = require('./lib/pprof');
const { sleep, newContext, waitFor, startTraced, connect, traced } = require('./lib/traced');
const { startIngest } = require('./lib/ingest');

const cpuSql = (n) => `SELECT sum(g::numeric * g) AS s FROM generate_series(1, ${n}) AS g`;

async function sampleStats(client) {
	const r = (await client.query('SELECT samples_stored, samples_dropped, samples_exported FROM traceprof.stats')).rows[0];
	return { stored: Number(r.samples_stored), dropped: Number(r.samples_dropped), exported: Number(r.samples_exported) };
}

/**
 * A cluster uploading to a capture server every 5 s, the server answering
 * its first requests with firstAnswers, and one batch of two parts stored.
 * Returns { capture, client, stored }.
 */
async function twoPartBatch(t, settings, ...firstAnswers) {
	const capture = await startIngest();
	capture.enqueue(...firstAnswers);
	const cluster = await startTraced({
		'traceprof.pyroscope_url': capture.url,
		'traceprof.upload_interval': '5s',	// both statements' samples in one batch
		'traceprof.sample_hz': '250',
		...settings,
	});
	const cpu = await connect(cluster);
	const wall = await connect(cluster);
	t.after(async () => {
		await Promise.all([cpu.end().catch(() => {}), wall.end().catch(() => {})]);
		await cluster.stop();
		await capture.close();
	});
	await wall.query('SET traceprof.profile_mode = wall');
	await Promise.all([traced(cpu, newContext(), cpuSql(600000)), traced(wall, newContext(), 'SELECT pg_sleep(0.5)')]);
	return { capture, client: cpu, stored: (await sampleStats(cpu)).stored };
}

/** traceprof.stats once every stored sample counts as exported or dropped. */
async function settled(client, stored) {
	let now;
	await waitFor(() => `every stored sample settled (${JSON.stringify(now)} of ${stored})`, async () => {
		now = await sampleStats(client);
		return now.exported + now.dropped >= stored;
	}, 20000);
	return now;
}

test('a profile Pyroscope refuses for itself (400) is dropped alone: the batch\'s other profile type still goes', async (t) => {
	// The parts after a failed one were dropped unsent, counted in samples_dropped.
	const { capture, client, stored } = await twoPartBatch(t, {}, { status: 400 });
	const now = await settled(client, stored);
	const [refused, ...taken] = capture.requests;
	assert.equal(refused.behaviour.status, 400);
	assert.ok(taken.length >= 1, 'the other profile type went');
	// The counts are of stored samples; a pprof sample merges those of one
	// stack and labels, its value their weights (a timer overrun weighs 2).
	const within = (body) => {
		const samples = decodePprof(body).samples;
		return { merged: samples.length, weight: samples.reduce((n, x) => n + x.values[0], 0) };
	};
	const refusedPart = within(refused.body);
	const takenParts = taken.map((r) => within(r.body)).reduce((a, b) => ({ merged: a.merged + b.merged, weight: a.weight + b.weight }));
	const shown = `${JSON.stringify(now)}, refused ${JSON.stringify(refusedPart)}, taken ${JSON.stringify(takenParts)}`;
	assert.ok(now.dropped >= refusedPart.merged && now.dropped <= refusedPart.weight,
		`only the refused profile's samples are dropped: ${shown}`);
	assert.ok(now.exported >= takenParts.merged && now.exported <= takenParts.weight, `the others are exported: ${shown}`);
	assert.equal(now.exported, stored - now.dropped);
});

test('a Retry-After beyond the upload\'s budget on one part: that part is dropped, the batch\'s other parts wait for it and go', async (t) => {
	// The parts after the refused one were dropped unsent.
	const RETRY_AFTER_S = 3;
	const { capture, client, stored } = await twoPartBatch(t, { 'traceprof.otlp_timeout': '1000' },
		{ status: 429, headers: { 'retry-after': String(RETRY_AFTER_S) } });
	const now = await settled(client, stored);
	const [refused, ...later] = capture.requests;
	assert.equal(refused.behaviour.status, 429);
	assert.ok(later.length >= 1, 'the other part went');
	for (const r of later)
		assert.ok(r.time - refused.endTime >= RETRY_AFTER_S * 1000 - 50,
			`a part went ${(r.time - refused.endTime).toFixed(0)} ms after the 429, before its Retry-After`);
	assert.ok(now.exported > 0 && now.dropped > 0, `the refused part dropped, the other taken: ${JSON.stringify(now)}`);
});

test('the uploader stopped in the middle of a batch (pg_terminate_backend): restarted, it sends no part Pyroscope took again', async (t) => {
	// The batch lived in the worker's memory only: the restarted worker read
	// it again from the ring and sent the part already taken a second time.
	const { capture, client, stored } = await twoPartBatch(t, { 'traceprof.otlp_timeout': '60s' },
		{ status: 200 }, { hang: true });
	await capture.waitFor((reqs) => reqs.length >= 2, 20000, 'the batch\'s second part (left hanging)');
	capture.setDefault({ status: 200 });
	const uploaderPids = async () => (await client.query(
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'traceprof profile uploader'")).rows.map((r) => r.pid);
	const [uploader] = await uploaderPids();
	await client.query('SELECT pg_terminate_backend($1)', [uploader]);
	await waitFor('the uploader restarted', async () => (await uploaderPids()).some((pid) => pid !== uploader), 20000);
	await sleep(1500);	// a round of the restarted worker
	const first = capture.requests[0];
	const again = capture.requests.slice(1).filter((r) => Buffer.compare(r.body, first.body) === 0);
	assert.equal(again.length, 0, `the part taken was sent again (${capture.requests.length} requests)`);
	const now = await sampleStats(client);
	assert.ok(now.exported > 0 && now.dropped > 0,
		`the part taken counts as exported, the one cut off as dropped: ${JSON.stringify(now)}`);
	assert.equal(now.exported + now.dropped, stored, 'every sample settled once');
});

test('uploads switched off in the middle of a batch: each sample counts once, as exported or dropped', async (t) => {
	// The batch not yet settled still waited in the ring: switching uploads
	// off counted its samples as given up, and giving the batch up counted
	// them again (and those Pyroscope took as exported too).
	const { capture, client, stored } = await twoPartBatch(t, { 'traceprof.otlp_timeout': '60s' },
		{ status: 200 }, { hang: true });
	await capture.waitFor((reqs) => reqs.length >= 2, 20000, 'the batch\'s second part (left hanging)');
	await client.query("ALTER SYSTEM SET traceprof.pyroscope_url = ''");
	await client.query('SELECT pg_reload_conf()');
	const now = await settled(client, stored);
	await sleep(500);	// anything counted twice would be by now
	const after = await sampleStats(client);
	assert.ok(after.exported > 0 && after.dropped > 0,
		`the part taken counts as exported, the one cut off as dropped: ${JSON.stringify(after)}`);
	assert.equal(after.exported + after.dropped, stored, `every sample settled once: ${JSON.stringify(now)}`);
});

test('reloads landing while profiles upload do not shorten traceprof.upload_interval', async (t) => {
	// A reload during an upload made the next round upload at once, also
	// when nothing was left: a reload every 100 ms gave ~21 uploads in 20 s
	// at a 5 s interval.  Only a drain a reload cut short goes on at once.
	const capture = await startIngest();
	capture.setDefault({ status: 200, delayMs: 300 });
	const cluster = await startTraced({
		'traceprof.pyroscope_url': capture.url,
		'traceprof.upload_interval': '3s',
		'traceprof.sample_hz': '250',
	});
	const worker = await connect(cluster);
	const reloader = await connect(cluster);
	t.after(async () => {
		await Promise.all([worker.end().catch(() => {}), reloader.end().catch(() => {})]);
		await cluster.stop();
		await capture.close();
	});
	const ctx = newContext();
	await worker.query(`SET traceprof.traceparent = '${ctx.header}'`);
	const from = capture.requests.length;
	const started = Date.now();
	let going = true;
	const reloads = (async () => {
		while (going) {
			await reloader.query('SELECT pg_reload_conf()');
			await sleep(100);
		}
	})();
	while (Date.now() - started < 9000)
		await worker.query(cpuSql(40000));
	going = false;
	await reloads;
	const uploads = capture.requests.length - from;
	assert.ok(uploads >= 1, 'profiles were uploaded');
	// 9 s at a 3 s interval: 3 rounds, 4 at a boundary, one more for a part.
	assert.ok(uploads <= 5, `${uploads} uploads in 9 s at a 3 s interval`);
});
