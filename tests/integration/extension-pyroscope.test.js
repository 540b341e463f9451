'use strict';
// The extension's profiles uploaded to Pyroscope: a capture server posing
// as Pyroscope (lib/ingest.js) takes the uploads, decoded with npm
// pprof-format and matched against the spans exported over OTLP to the
// capture receiver (lib/receiver.js).  Split from extension-profile.test.js,
// whose clusters and uploads neared the runner's 120 s per file; sampling
// is checked against plausibility bounds, as there.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { decodePprof } = require('./lib/pprof');

const { freePort } = require('./lib/cluster');
const { sleep, newContext, waitFor, connect, traced } = require('./lib/traced');
const { startReceiver } = require('./lib/receiver');
const { SpanKind } = require('./lib/otlp');
const { startIngest } = require('./lib/ingest');
const { startTraced, cpuSql, cpuResult, assertWithinFactor, closeAll, sampleStats, spansOf, serverSpan,
	profile, total, inOrder, crashLines } = require('./lib/profiles');

// ---- 4: upload to Pyroscope ---------------------------------------------

test('4. Pyroscope upload: /ingest with name, format, tenant; pprof span_id/trace_id labels match the OTLP spans', async (t) => {
	const HZ = 250;
	const N = 1000000;
	const TENANT = 'team-pg';
	const capture = await startIngest();
	const receiver = await startReceiver({ grpc: false });
	let cluster;
	let client;
	try {
		cluster = await startTraced({
			'traceprof.pyroscope_url': capture.url,
			'traceprof.upload_interval': '200ms',
			'traceprof.service_name': 'pg-test',
			'traceprof.pyroscope_tenant_id': TENANT,
			'traceprof.otlp_endpoint': receiver.httpEndpoint,
		});
		client = await connect(cluster);
		const before_ = await sampleStats(client);
		await client.query(`SET traceprof.sample_hz = ${HZ}`);
		const ctx = newContext();
		const startedMs = Date.now();
		const res = await traced(client, ctx, cpuSql(N));
		const endedMs = Date.now();
		assert.equal(res.rows[0].s, cpuResult(N));
		const sqlSpans = await spansOf(client, ctx.traceId);
		const stmt = serverSpan(sqlSpans, 'SELECT sum(');
		const stored = total(await profile(client, ctx.traceId));
		assert.ok(stored > 0, 'the statement was sampled');

		// Spans over OTLP.
		const otlp = await waitFor(() => `the statement's SERVER span at the OTLP receiver (${receiver.requests.length} requests)`,
			() => {
				const spans = receiver.spans().filter((s) => s.traceId === ctx.traceId);
				return spans.some((s) => s.spanId === stmt.span_id) ? spans : null;
			});
		const otlpStmt = otlp.find((s) => s.spanId === stmt.span_id);
		assert.equal(otlpStmt.kind, SpanKind.SERVER);
		assert.equal(otlpStmt.resource.attributes['service.name'], 'pg-test');

		// Samples of the trace at Pyroscope, possibly over several uploads.
		const traceSamples = (reqs) => {
			const out = [];
			for (const r of reqs)
				for (const smp of decodePprof(r.body).samples)
					if (smp.labels.trace_id === ctx.traceId)
						out.push(smp);
			return out;
		};
		const countIdx = (prof) => prof.sampleTypes.indexOf('samples/count');
		await capture.waitFor((reqs) => {
			const got = traceSamples(reqs).reduce((a, smp) => a + smp.values[0], 0);
			return got >= stored;
		}, 15000, `${stored} samples of trace ${ctx.traceId}`);
		// samples_exported grows until everything stored was sent.
		const after_ = await waitFor(() => 'samples_exported to reach samples_stored', async () => {
			const s = await sampleStats(client);
			return s.exported === s.stored && s.exported > before_.exported ? s : null;
		});
		assert.equal(after_.dropped, 0, 'nothing dropped');
		assert.ok(after_.exported - before_.exported >= 1);

		const uploads = capture.requests.filter((r) => traceSamples([r]).length > 0);
		const seenSpanIds = new Map();
		let cpuNsOfStmt = 0;
		let countOfStmt = 0;
		let executorWeight = 0;
		let traceWeight = 0;
		for (const r of capture.requests) {
			assert.equal(r.method, 'POST');
			assert.equal(r.path, '/ingest');
			assert.deepEqual([...r.queryKeys].sort(), ['format', 'from', 'name', 'until']);
			assert.equal(r.query.format, 'pprof');
			const m = /^pg-test\{(.*)\}$/.exec(r.query.name);
			assert.ok(m, `series name ${JSON.stringify(r.query.name)} is pg-test{…} (traceprof.service_name)`);
			for (const kv of m[1] ? m[1].split(',') : [])
				assert.match(kv, /^[A-Za-z0-9_.]+=[^,}=]*$/, `series label ${kv}`);
			assert.doesNotMatch(r.url, /[{},]/, 'the name is percent-encoded in the request line');
			assert.match(r.query.from, /^\d{10}$/, 'from: Unix seconds');
			assert.match(r.query.until, /^\d{10}$/, 'until: Unix seconds');
			assert.ok(Number(r.query.from) <= Number(r.query.until));
			assert.equal(r.headers['x-scope-orgid'], TENANT, 'X-Scope-OrgID is traceprof.pyroscope_tenant_id');

			const prof = decodePprof(r.body);
			assert.ok(prof.sampleTypes.includes('cpu/nanoseconds'), `sample types ${prof.sampleTypes}`);
			assert.equal(prof.periodType, 'cpu/nanoseconds');
			assert.equal(prof.defaultSampleType, 'cpu');
			assert.ok(prof.period > 0);
			assert.ok(prof.durationNanos > 0n);
			const cpuIdx = prof.sampleTypes.indexOf('cpu/nanoseconds');
			for (const smp of prof.samples) {
				assert.ok(smp.values[cpuIdx] > 0);
				if (smp.labels.trace_id !== ctx.traceId)
					continue;
				assert.match(smp.labels.span_id || '', /^[0-9a-f]{16}$/, 'span_id label: exactly 16 hex');
				assert.match(smp.labels.trace_id, /^[0-9a-f]{32}$/, 'trace_id label: exactly 32 hex');
				seenSpanIds.set(smp.labels.span_id, (seenSpanIds.get(smp.labels.span_id) || 0) + smp.values[countIdx(prof)]);
				const rootFirst = [...smp.frames].reverse();
				assert.ok(rootFirst.includes('PostgresMain'), `pprof stack (leaf first) holds PostgresMain: ${smp.frames.join(' <- ')}`);
				if (inOrder(rootFirst, ['PostgresMain', 'PortalRun', 'standard_ExecutorRun']))
					executorWeight += smp.values[countIdx(prof)];
				traceWeight += smp.values[countIdx(prof)];
				if (smp.labels.span_id === stmt.span_id) {
					cpuNsOfStmt += smp.values[cpuIdx];
					countOfStmt += smp.values[countIdx(prof)];
				}
			}
		}
		assert.ok(executorWeight >= 0.9 * traceWeight,
			`>= 90% of the uploaded samples (${executorWeight}/${traceWeight}) are leaf-first stacks with standard_ExecutorRun under PortalRun under PostgresMain`);
		for (const r of uploads) {
			// the upload window covers the statement's samples
			assert.ok(Number(r.query.from) * 1000 <= endedMs + 1000 && (Number(r.query.until) + 1) * 1000 >= startedMs,
				`window [${r.query.from}, ${r.query.until}] overlaps the statement [${startedMs}, ${endedMs}] ms`);
		}

		// Grafana's traces-to-profiles: the span's service.name is the series'
		// service_name, and the span_id label is the span's id.
		const otlpIds = new Set(otlp.map((s) => s.spanId));
		for (const id of seenSpanIds.keys())
			assert.ok(otlpIds.has(id), `span_id label ${id} is the id of a span exported over OTLP`);
		assert.ok(countOfStmt >= 0.95 * stored,
			`the SERVER span's id labels the uploaded samples: ${countOfStmt} of ${stored} (${JSON.stringify([...seenSpanIds])})`);
		assert.equal([...seenSpanIds.values()].reduce((a, b) => a + b, 0), stored,
			'every stored sample of the trace was uploaded exactly once');

		await t.test('the uploaded cpu/nanoseconds match the span\'s CPU time (samples taken at 250 Hz, server default 100 Hz)', () => {
			assertWithinFactor(cpuNsOfStmt / 1e6, otlpStmt.attributes['traceprof.cpu_time_ns'] / 1e6, 2,
				`cpu ms in the pprof (${countOfStmt} samples) vs traceprof.cpu_time_ns of the span`);
		});

		await t.test('the pprof header states the period its samples were taken at (the session\'s 250 Hz, not the server\'s 100 Hz); its window holds their CPU time', () => {
			for (const r of uploads) {
				const prof = decodePprof(r.body);
				assert.equal(prof.period, 1e9 / HZ, 'period: the samples\' own');
				const cpuIdx = prof.sampleTypes.indexOf('cpu/nanoseconds');
				const cpuNs = prof.samples.reduce((a, smp) => a + smp.values[cpuIdx], 0);
				// One backend sampled: its CPU time fits in the wall-clock window
				// (within a period: the signals arrive a little after the timer expires).
				assert.ok(prof.durationNanos + BigInt(prof.period) >= BigInt(cpuNs),
					`duration_nanos ${prof.durationNanos} + a period >= the samples' ${cpuNs} ns`);
			}
		});

		await t.test('spans with samples carry pyroscope.profile.id (Grafana shows "Profiles for this span" only then)', () => {
			for (const id of seenSpanIds.keys()) {
				const s = otlp.find((x) => x.spanId === id);
				assert.equal(s.attributes['pyroscope.profile.id'], id,
					`span ${s.name} ${id}: attribute pyroscope.profile.id (attributes: ${Object.keys(s.attributes).join(', ')})`);
			}
		});

		await t.test('samples taken in wall mode are not uploaded as cpu/nanoseconds', async () => {
			const w = await connect(cluster);
			const wctx = newContext();
			try {
				// profile_mode takes effect in a backend that has not sampled yet: a new session.
				await w.query('SET traceprof.profile_mode = wall');
				await traced(w, wctx, 'SELECT pg_sleep(0.5)');
			} finally {
				await closeAll(w);
			}
			const n = total(await profile(client, wctx.traceId));
			assert.ok(n >= 20, `wall mode sampled pg_sleep(0.5): ${n} samples`);
			const carrying = await capture.waitFor((reqs) => {
				const with_ = reqs.filter((r) => decodePprof(r.body).samples.some((x) => x.labels.trace_id === wctx.traceId));
				return with_.length ? with_ : null;
			}, 10000, `an upload with the wall-mode samples of trace ${wctx.traceId}`);
			for (const r of carrying) {
				const prof = decodePprof(r.body);
				assert.ok(!prof.sampleTypes.includes('cpu/nanoseconds') && prof.sampleTypes.includes('wall/nanoseconds'),
					`an upload holding wall-clock samples (pg_sleep) declares ${prof.sampleTypes.join(', ')}, ` +
					`period type ${prof.periodType}`);
			}
		});
	} finally {
		await closeAll(client);
		if (cluster) {
			const crashes = crashLines(cluster);
			await cluster.stop();
			assert.deepEqual(crashes, [], 'no backend crashed');
		}
		await capture.close();
		await receiver.close();
	}
});

/**
 * A traced pg_sleep(seconds) in wall mode at hz, on a cluster uploading to
 * a capture server every 200 ms: its span's start and end (µs since the
 * epoch) and the samples' weight stored.
 */
async function sleepSampled(t, hz, seconds) {
	const capture = await startIngest();
	t.after(() => capture.close());
	const cluster = await startTraced({ 'traceprof.pyroscope_url': capture.url, 'traceprof.upload_interval': '200ms' });
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	await client.query('SET traceprof.profile_mode = wall');
	await client.query(`SET traceprof.sample_hz = ${hz}`);
	const ctx = newContext();
	await traced(client, ctx, `SELECT pg_sleep(${seconds})`);
	const span = (await client.query(
		`SELECT (extract(epoch FROM start_time) * 1e6)::bigint AS start_us,
		        (extract(epoch FROM end_time) * 1e6)::bigint AS end_us
		   FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' AND query LIKE 'SELECT pg_sleep%'`,
		[ctx.traceId])).rows[0];
	return { capture, ctx, span, stored: total(await profile(client, ctx.traceId)) };
}

test('4h. an upload\'s window is the time its samples measured: a sample stands for the period before it (1 Hz: a second)', async (t) => {
	// Before, a sample's time was taken as the start of its period: at 1 Hz
	// the window began a second after the statement and ran a second past it.
	const { capture, ctx, span, stored } = await sleepSampled(t, 1, 1.6);
	assert.ok(stored >= 1, 'the sleep was sampled');
	const req = await capture.waitFor((rs) => rs.find((r) =>
		decodePprof(r.body).samples.some((smp) => smp.labels.trace_id === ctx.traceId)), 15000,
	`the samples of trace ${ctx.traceId}`);
	const prof = decodePprof(req.body);
	const startNs = BigInt(span.start_us) * 1000n;
	const endNs = BigInt(span.end_us) * 1000n;
	const slackNs = 300000000n;
	assert.ok(prof.timeNanos >= startNs - slackNs && prof.timeNanos <= startNs + slackNs,
		`the window starts with the statement: time_nanos ${prof.timeNanos}, statement from ${startNs}`);
	assert.ok(prof.timeNanos + prof.durationNanos <= endNs + slackNs,
		`the window ends by the statement's end: ${prof.timeNanos + prof.durationNanos}, statement to ${endNs}`);
	assert.ok(Number(req.query.from) <= Number(startNs / 1000000000n),
		`Pyroscope's from (${req.query.from}) is not after the statement's start second`);
});

test('4j. an upload\'s samples lie within 10 s: a long statement\'s go in several, each filed near its own time', async (t) => {
	// Pyroscope files a profile at its time_nanos and Grafana looks for a
	// span's profile from 60 s before the span; a long statement's samples,
	// stored when it ends, went in one upload filed at its start, and with
	// them any fresh samples of the same batch.
	const { capture, ctx, span, stored } = await sleepSampled(t, 4, 10.8);
	const weightOf = (prof) => prof.samples.filter((smp) => smp.labels.trace_id === ctx.traceId)
		.reduce((n, smp) => n + smp.values[0], 0);
	const uploads = () => capture.requests.map((r) => decodePprof(r.body)).filter((p) => weightOf(p) > 0);
	await waitFor(() => `all ${stored} samples uploaded (${uploads().map(weightOf)})`,
		() => uploads().reduce((n, p) => n + weightOf(p), 0) >= stored, 15000);
	const profs = uploads();
	assert.equal(profs.reduce((n, p) => n + weightOf(p), 0), stored, 'each sample uploaded once');
	assert.ok(profs.length >= 2, `10.8 s of samples went in ${profs.length} upload(s)`);
	for (const p of profs)
		assert.ok(p.durationNanos <= 10000000000n, `an upload spans ${p.durationNanos} ns`);
	const slackNs = 300000000n;
	const first = profs.reduce((a, p) => (p.timeNanos < a ? p.timeNanos : a), profs[0].timeNanos);
	const last = profs.reduce((a, p) => (p.timeNanos + p.durationNanos > a ? p.timeNanos + p.durationNanos : a), 0n);
	assert.ok(first >= BigInt(span.start_us) * 1000n - slackNs && first <= BigInt(span.start_us) * 1000n + slackNs,
		`the first upload starts with the statement: ${first}`);
	assert.ok(last <= BigInt(span.end_us) * 1000n + slackNs && last >= BigInt(span.end_us) * 1000n - 1000000000n,
		`the last upload ends with the statement: ${last}`);
});

test('4b. unreachable Pyroscope: one WARNING, statements unaffected, samples dropped and counted, SQL profiles intact', async () => {
	const dead = await freePort();	// nothing listens there: connection refused
	const cluster = await startTraced({
		'traceprof.pyroscope_url': `http://127.0.0.1:${dead}`,
		'traceprof.upload_interval': '200ms',
	});
	let client;
	try {
		client = await connect(cluster);
		const N = 600000;
		const ctxs = [];
		for (let i = 0; i < 3; i++) {
			const ctx = newContext();
			const t0 = Date.now();
			const res = await traced(client, ctx, cpuSql(N));
			assert.equal(res.rows[0].s, cpuResult(N), 'the statement result is unaffected');
			const span = serverSpan(await spansOf(client, ctx.traceId), 'SELECT sum(');
			assert.ok(Date.now() - t0 < span.duration_ms + 2000, 'the statement does not wait for the upload');
			assert.equal(span.status, 'unset');
			ctxs.push(ctx);
			await sleep(300);	// more than one upload interval between statements
		}
		const s = await waitFor(() => 'every stored sample to be counted as dropped', async () => {
			const x = await sampleStats(client);
			return x.stored > 0 && x.dropped === x.stored ? x : null;
		});
		assert.equal(s.exported, 0, 'nothing counts as exported');
		const failures = (await client.query('SELECT export_failures, upload_failures, last_error FROM traceprof.stats')).rows[0];
		assert.ok(Number(failures.upload_failures) >= 1, `failed uploads are counted: ${JSON.stringify(failures)}`);
		assert.equal(Number(failures.export_failures), 0, 'as upload failures, not as span export failures');
		assert.ok(failures.last_error.includes(`127.0.0.1:${dead}`), `last_error says why: ${failures.last_error}`);
		for (const ctx of ctxs)
			assert.ok(total(await profile(client, ctx.traceId)) > 0, 'profiles stay readable in SQL');
		const warnings = cluster.readLog().split('\n').filter((l) => /WARNING: .*cannot upload profiles/.test(l));
		assert.equal(warnings.length, 1, `one WARNING per streak of failures:\n${warnings.join('\n')}`);
		assert.ok(warnings[0].includes(`127.0.0.1:${dead}/ingest`), `the WARNING names the endpoint: ${warnings[0]}`);
	} finally {
		await closeAll(client);
		const crashes = crashLines(cluster);
		await cluster.stop();
		assert.deepEqual(crashes, [], 'no backend crashed');
	}
});

test('4c. Pyroscope 429 with a Retry-After longer than the upload budget: no upload until it has passed; ' +
	'samples taken meanwhile wait in shared memory and arrive after', async () => {
	const RETRY_AFTER_S = 4;
	const N = 600000;
	const capture = await startIngest();
	capture.enqueue({ status: 429, headers: { 'retry-after': String(RETRY_AFTER_S) } });
	const cluster = await startTraced({
		'traceprof.pyroscope_url': capture.url,
		'traceprof.upload_interval': '200ms',
		'traceprof.otlp_timeout': '2000',	// the upload's budget: shorter than the Retry-After
	});
	let client;
	try {
		client = await connect(cluster);
		await client.query('SET traceprof.sample_hz = 250');
		await traced(client, newContext(), cpuSql(N));
		const refused = await capture.waitFor((reqs) => reqs[0], 10000, 'the first upload (answered 429)');
		assert.equal(refused.behaviour.status, 429);

		const later = newContext();
		await traced(client, later, cpuSql(N));
		const stored = total(await profile(client, later.traceId));
		assert.ok(stored > 0, 'the second statement was sampled');
		const samplesOf = (r) => decodePprof(r.body).samples.filter((x) => x.labels.trace_id === later.traceId)
			.reduce((n, x) => n + x.values[0], 0);
		await capture.waitFor((reqs) => reqs.reduce((n, r) => n + samplesOf(r), 0) >= stored, 20000,
			`the ${stored} samples of trace ${later.traceId}, after the Retry-After`);
		for (const r of capture.requests.slice(1)) {
			const gap = r.time - refused.endTime;
			assert.ok(gap >= RETRY_AFTER_S * 1000 - 50,
				`an upload came ${gap.toFixed(0)} ms after the 429, before its Retry-After (${RETRY_AFTER_S} s) had passed`);
		}
	} finally {
		await closeAll(client);
		const crashes = crashLines(cluster);
		await cluster.stop();
		await capture.close();
		assert.deepEqual(crashes, [], 'no backend crashed');
	}
});

test('4d. a Pyroscope that never answers does not hold spans back: they keep reaching the OTLP collector while an upload hangs', async () => {
	const N = 600000;
	const capture = await startIngest();
	capture.setDefault({ hang: true });
	const receiver = await startReceiver({ grpc: false });
	const cluster = await startTraced({
		'traceprof.pyroscope_url': capture.url,
		'traceprof.upload_interval': '200ms',
		'traceprof.otlp_endpoint': receiver.httpEndpoint,
		'traceprof.otlp_timeout': '60s',	// an upload hangs for a minute
	});
	let client;
	try {
		client = await connect(cluster);
		await client.query('SET traceprof.sample_hz = 250');
		await traced(client, newContext(), cpuSql(N));
		await capture.waitFor((reqs) => reqs[0], 10000, 'the first upload (never answered)');
		for (let i = 0; i < 3; i++) {
			const ctx = newContext();
			const startedMs = Date.now();
			await traced(client, ctx, 'SELECT 1 AS one');
			await waitFor(`the span of statement ${i} at the collector while the upload hangs`,
				() => receiver.spans().some((x) => x.traceId === ctx.traceId && x.kind === SpanKind.SERVER), 5000);
			assert.ok(Date.now() - startedMs < 5000);
		}
		assert.equal(capture.requests.length >= 1 && capture.hung.length >= 1, true, 'the upload is still hanging');
	} finally {
		await closeAll(client);
		const crashes = crashLines(cluster);
		await cluster.stop();
		await capture.close();
		await receiver.close();
		assert.deepEqual(crashes, [], 'no backend crashed');
	}
});

test('4e. a batch goes as two requests (cpu, wall): a part taken is never sent again, and counts as exported', async (t) => {
	// Before, a reload (SIGHUP; one that moves the destination still does)
	// interrupting the wall request after the cpu one was taken left the
	// whole batch in the ring, and the next round sent the cpu part again:
	// Pyroscope counted those samples twice.  A refused wall request
	// counted the taken cpu samples as dropped.
	const capture = await startIngest();
	const cluster = await startTraced({
		'traceprof.pyroscope_url': capture.url,
		'traceprof.upload_interval': '1h',	// until both statements are stored
	});
	let admin;
	try {
		admin = await connect(cluster);
		const setInterval_ = async (value) => {
			await admin.query(`ALTER SYSTEM SET traceprof.upload_interval = '${value}'`);
			await admin.query('SELECT pg_reload_conf()');
		};
		/*
		 * A cpu-mode and a wall-mode traced statement, each in a session of
		 * its own: their samples' weight (what profile() and a pprof's
		 * samples/count add up; a timer overrun under load weighs 2) and
		 * how many samples were stored (what traceprof.stats counts).
		 */
		const twoStatements = async () => {
			const cpu = await connect(cluster);
			const wall = await connect(cluster);
			const ctx = { cpu: newContext(), wall: newContext() };
			const counts = [await sampleStats(admin)];
			try {
				await cpu.query('SET traceprof.sample_hz = 250');
				await traced(cpu, ctx.cpu, cpuSql(600000));
				counts.push(await sampleStats(admin));
				await wall.query('SET traceprof.profile_mode = wall; SET traceprof.sample_hz = 250');
				await traced(wall, ctx.wall, 'SELECT pg_sleep(0.3)');
				counts.push(await sampleStats(admin));
			} finally {
				await closeAll(cpu, wall);
			}
			const stored = { cpu: total(await profile(admin, ctx.cpu.traceId)), wall: total(await profile(admin, ctx.wall.traceId)) };
			const rows = { cpu: counts[1].stored - counts[0].stored, wall: counts[2].stored - counts[1].stored };
			assert.ok(stored.cpu > 0 && stored.wall > 0, `both statements were sampled: ${JSON.stringify(stored)}`);
			assert.ok(rows.cpu > 0 && rows.wall > 0 && rows.cpu <= stored.cpu && rows.wall <= stored.wall,
				`samples stored: ${JSON.stringify(rows)}, weighing ${JSON.stringify(stored)}`);
			return { ctx, stored, rows };
		};
		const countOf = (r, traceId) => {
			const prof = decodePprof(r.body);
			const idx = prof.sampleTypes.indexOf('samples/count');
			return prof.samples.filter((x) => x.labels.trace_id === traceId).reduce((n, x) => n + x.values[idx], 0);
		};
		const answered = () => capture.requests.filter((r) => !r.behaviour.hang);
		const uploadedOf = (traceId) => answered().reduce((n, r) => n + countOf(r, traceId), 0);

		// A: the cpu request is taken, the wall request hangs until a reload interrupts it.
		const before_ = await sampleStats(admin);
		const a = await twoStatements();
		assert.equal(capture.requests.length, 0, 'no upload before the interval is shortened');
		capture.enqueue({}, { hang: true });
		await setInterval_('200ms');
		await capture.waitFor(() => capture.hung.length === 1, 10000, 'the wall request, hanging');
		const [cpuReq, wallReq] = capture.requests;
		assert.equal(countOf(cpuReq, a.ctx.cpu.traceId), a.stored.cpu, 'the first request is the cpu part, whole');
		assert.ok(decodePprof(cpuReq.body).sampleTypes.includes('cpu/nanoseconds'));
		assert.equal(countOf(wallReq, a.ctx.wall.traceId), a.stored.wall, 'the second request is the wall part');
		assert.ok(decodePprof(wallReq.body).sampleTypes.includes('wall/nanoseconds'));
		// A new tenant: the hanging request ends, its part stays (a reload that moves nothing lets it go on).
		await admin.query("ALTER SYSTEM SET traceprof.pyroscope_tenant_id = 'tenant-4e'");
		await admin.query('SELECT pg_reload_conf()');
		await capture.waitFor(() => uploadedOf(a.ctx.wall.traceId) >= a.stored.wall, 10000, 'the wall part, sent again');
		const afterA = await waitFor('samples_exported to reach samples_stored', async () => {
			const s = await sampleStats(admin);
			return s.exported - before_.exported >= a.rows.cpu + a.rows.wall ? s : null;
		});
		await sleep(500);	// a negative is checked: a resent cpu part would come in the next round
		assert.equal(uploadedOf(a.ctx.cpu.traceId), a.stored.cpu,
			`the cpu samples were uploaded exactly once (${answered().length} answered requests: ` +
			`${answered().map((r) => countOf(r, a.ctx.cpu.traceId)).join(', ')} samples of the cpu trace)`);
		assert.equal(uploadedOf(a.ctx.wall.traceId), a.stored.wall, 'the wall samples were uploaded exactly once');
		assert.equal(afterA.dropped, before_.dropped, 'nothing dropped');
		assert.equal(afterA.exported - before_.exported, a.rows.cpu + a.rows.wall, 'every sample counted as exported once');

		await t.test('a refused wall part drops only its samples: the cpu part taken counts as exported', async () => {
			await setInterval_('1h');
			await sleep(300);	// the uploader takes the long interval before the statements end
			const seen = capture.requests.length;
			const before2 = await sampleStats(admin);
			const b = await twoStatements();
			assert.equal(capture.requests.length, seen, 'no upload before the interval is shortened');
			capture.enqueue({}, { status: 500, body: 'refused' });
			await setInterval_('200ms');
			const after2 = await waitFor('the batch to be settled', async () => {
				const s = await sampleStats(admin);
				return s.exported + s.dropped - before2.exported - before2.dropped >= b.rows.cpu + b.rows.wall ? s : null;
			});
			assert.equal(capture.requests.length, seen + 2, 'two requests: cpu taken, wall refused');
			assert.equal(countOf(capture.requests[seen], b.ctx.cpu.traceId), b.stored.cpu);
			assert.equal(after2.exported - before2.exported, b.rows.cpu, 'the cpu samples count as exported');
			assert.equal(after2.dropped - before2.dropped, b.rows.wall, 'the wall samples count as dropped');
		});
	} finally {
		await closeAll(admin);
		const crashes = crashLines(cluster);
		await cluster.stop();
		await capture.close();
		assert.deepEqual(crashes, [], 'no backend crashed');
	}
});

/** A capture posing as Pyroscope, a cluster uploading to it every 200 ms (plus settings), a client; closed after t. */
async function uploadingCluster(t, settings) {
	const capture = await startIngest();
	t.after(() => capture.close());
	const cluster = await startTraced({
		'traceprof.pyroscope_url': capture.url,
		'traceprof.upload_interval': '200ms',
		'traceprof.sample_hz': '250',
		...settings,
	});
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	return { capture, client, cluster };
}

test('4i. traceprof.profile_trace_id = off: uploaded samples carry span_id alone (Pyroscope makes every other label a series label), and spans no trace link', async (t) => {
	const { capture, client } = await uploadingCluster(t, { 'traceprof.profile_trace_id': 'off' });
	const ctx = newContext();
	await traced(client, ctx, cpuSql(1000000));
	const stmt = serverSpan(await spansOf(client, ctx.traceId), 'SELECT sum(');
	const profileId = stmt.attributes['pyroscope.profile.id'];
	assert.ok(profileId, `the span was sampled: ${JSON.stringify(stmt.attributes)}`);
	assert.equal(stmt.attributes['pyroscope.profile.url'], undefined, 'no link whose trace_id label is never sent');
	const ofSpan = (r) => decodePprof(r.body).samples.filter((smp) => smp.labels.span_id === profileId);
	const upload = await waitFor(() => `an upload of the span's samples (${capture.requests.length} requests)`,
		() => capture.requests.find((r) => r.series !== null && ofSpan(r).length > 0));
	for (const smp of decodePprof(upload.body).samples)
		assert.deepEqual(Object.keys(smp.labels), ['span_id'], `labels of a sample: ${JSON.stringify(smp.labels)}`);
	// The SQL readers still have the trace.
	assert.ok(total(await profile(client, ctx.traceId)) > 0, 'traceprof.profile() by trace id');
});

test('4g. a reload that moves no destination lets an upload in flight finish: Pyroscope gets the samples once', async (t) => {
	// Interrupted by every reload, the upload was sent again: Pyroscope
	// adds up profiles of one series and window, so the statement's CPU
	// showed once per reload.
	const { capture, client } = await uploadingCluster(t, { 'traceprof.otlp_timeout': '60000' });
	capture.setDefault({ delayMs: 3000 });	// the body taken at once, the answer late
	const ctx = newContext();
	await traced(client, ctx, cpuSql(1000000));
	const uploadsOfTrace = () => capture.requests.filter((r) =>
		decodePprof(r.body).samples.some((smp) => smp.labels.trace_id === ctx.traceId));
	await waitFor('the slow upload', () => uploadsOfTrace().length >= 1);
	for (let i = 0; i < 4; i++) {
		await client.query('SELECT pg_reload_conf()');
		await sleep(250);
	}
	const during = await sampleStats(client);
	assert.ok(during.exported < during.stored, `the reloads came while the upload waited for its answer: ${JSON.stringify(during)}`);
	await waitFor('samples_exported to reach samples_stored', async () => {
		const now = await sampleStats(client);
		return now.exported + now.dropped >= now.stored;
	}, 20000);
	assert.equal(uploadsOfTrace().length, 1, `the trace's samples went in one upload, sent once (${capture.requests.length} requests in all)`);
	assert.equal((await sampleStats(client)).dropped, 0);
});

test('4f. a span\'s Pyroscope links name the application its samples are uploaded under, a service name made into one; the baseline link only with span_name labels', async (t) => {
	// A space: not a Pyroscope application name.
	const { capture, client, cluster } = await uploadingCluster(t, { 'traceprof.service_name': 'orders db' });
	const ctx = newContext();
	await traced(client, ctx, cpuSql(1000000));
	const stmt = serverSpan(await spansOf(client, ctx.traceId), 'SELECT sum(');
	const link = stmt.attributes['pyroscope.profile.url'];
	assert.ok(link, `the sampled span links its profile: ${JSON.stringify(stmt.attributes)}`);
	const query = new URL(link).searchParams.get('query');
	assert.equal(query, `service=orders_db trace_id=${ctx.traceId}`, `the link's query: ${link}`);
	const upload = await waitFor(() => `an upload (${capture.requests.length} requests)`,
		() => capture.requests.find((r) => r.series !== null));
	assert.equal(upload.series.app, 'orders_db', 'uploads name the application the link names');
	// The baseline link filters on span_name, a label uploads carry only with traceprof.profile_span_name.
	assert.equal(stmt.attributes['pyroscope.profile.baseline.url'], undefined, 'no baseline link whose label is never sent');
	await client.query('ALTER SYSTEM SET traceprof.profile_span_name = on');
	await client.query('SELECT pg_reload_conf()');
	await waitFor('the setting in this session', async () =>
		(await client.query('SHOW traceprof.profile_span_name')).rows[0]['traceprof.profile_span_name'] === 'on');
	const again = serverSpan(await spansOf(client, ctx.traceId), 'SELECT sum(');
	assert.match(new URL(again.attributes['pyroscope.profile.baseline.url']).searchParams.get('query'),
		/^service=orders_db span_name=SELECT$/, 'the baseline link, with the setting');

	// The links show traceprof.pyroscope_url, which SHOW hides from roles
	// without pg_read_all_settings: so do their own spans (they showed its
	// host, port and path, where tokens are sometimes put).
	await client.query('CREATE ROLE link_plain LOGIN; CREATE ROLE link_settings LOGIN IN ROLE pg_read_all_settings');
	const linksSeenBy = async (role) => {
		const c = await connect(cluster, role);
		try {
			const own = newContext();
			await traced(c, own, cpuSql(1000000));
			const span = serverSpan(await spansOf(c, own.traceId), 'SELECT sum(');
			assert.ok(span.attributes['pyroscope.profile.id'], `${role}: the span was sampled`);
			return [span.attributes['pyroscope.profile.url'] !== undefined,
				span.attributes['pyroscope.profile.baseline.url'] !== undefined];
		} finally {
			await c.end();
		}
	};
	assert.deepEqual(await linksSeenBy('link_plain'), [false, false], 'a role that may not SHOW the setting: no links');
	assert.deepEqual(await linksSeenBy('link_settings'), [true, true], 'pg_read_all_settings: the links');
});
