'use strict';
// The binaries profile themselves (PYROSCOPE_* flags, --profile-out): the
// documented validation checklist, end to end.  generator and loader run
// against a capture server posing as Pyroscope's /ingest (lib/ingest.js)
// and the OTLP capture receiver; the uploaded pprof is decoded by npm
// pprof-format (which accepts truncated input silently, so the structure is
// checked too), the spans by @opentelemetry/otlp-transformer.
//
// Work is sized for the 100 Hz CPU sampler: `generator 2000000` burns
// ~0.6 s of CPU, ~60 samples; 1000000 gives ~30, plenty for "an upload
// happens".  Outputs (hundreds of MB) go to tmpfs when there is room and
// are deleted right after each run.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { decodePprof } = require('./lib/pprof');

const { GENERATOR, LOADER, requireExecutable } = require('./lib/paths');
const { run, describe } = require('./lib/run');
const { startCluster, freePort } = require('./lib/cluster');
const { startReceiver } = require('./lib/receiver');
const { decodeTraces, StatusCode } = require('./lib/otlp');
const { startIngest } = require('./lib/ingest');
const { makeTempDir, removeTempDir } = require('./lib/tmp');

const BIG = 2000000;			// ~60 samples
const SOME = 1000000;			// ~30 samples
const LOADER_RECORDS = 150000;	// ~15 samples of the loader's own CPU
const PERIOD_NS = 10000000;		// 100 Hz
const GEN_APP = 'traceprof.generator';
const LOADER_APP = 'traceprof.loader';
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

let dir;
let seq = 0;
let cluster = null;
let loaderInput = null;

/** A work dir on tmpfs when it has room (no disk I/O, fsync is free). */
function workDir() {
	try {
		const st = fs.statfsSync('/dev/shm');
		if (st.bavail * st.bsize > 8 * 1024 ** 3) {
			const d = fs.mkdtempSync('/dev/shm/traceprof-pyroscope-');
			fs.chmodSync(d, 0o755);
			return d;
		}
	} catch { /* no tmpfs here */ }
	return makeTempDir('traceprof-pyroscope-');
}

before(() => {
	requireExecutable(GENERATOR);
	requireExecutable(LOADER);
	dir = workDir();
});

after(async () => {
	if (cluster)
		await cluster.stop();
	removeTempDir(dir);
});

const file = (name) => path.join(dir, `${++seq}-${name}`);

/**
 * Run the generator on `records` into a fresh OUT (deleted afterwards
 * unless opts.out is given).  Returns {res, t0, t1 (Date.now ms), end
 * (performance.now when it exited), wrote (OUT existed)}.
 */
async function generate(env, { records = BIG, args = [], out, timeout = 30000 } = {}) {
	const target = out ?? file('gen.json');
	const t0 = Date.now();
	const res = await run(GENERATOR, [String(records), target, ...args], { env, timeout });
	const end = performance.now();
	const t1 = Date.now();
	const wrote = fs.existsSync(target) && fs.statSync(target).isFile();
	if (out === undefined)
		fs.rmSync(target, { force: true });
	return { res, t0, t1, end, wrote };
}

async function getLoaderSetup() {
	if (!cluster) {
		loaderInput = file('loader-input.json');
		const [c, g] = await Promise.all([
			startCluster(),
			run(GENERATOR, [String(LOADER_RECORDS), loaderInput, '--seed', '3']),
		]);
		cluster = c;
		assert.equal(g.code, 0, describe(g));
	}
	return cluster;
}

async function servers(t) {
	const ingest = await startIngest();
	t.after(() => ingest.close());
	const otlp = await startReceiver({ grpc: false });
	t.after(() => otlp.close());
	return { ingest, otlp };
}

/** PYROSCOPE_ENABLE at the capture server, spans to the OTLP receiver. */
function pyroEnv(ingest, otlp, extra = {}) {
	return {
		PYROSCOPE_ENABLE: 'true',
		PYROSCOPE_SERVER_ADDRESS: ingest.url,
		...(otlp ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.httpEndpoint } : {}),
		...extra,
	};
}

const stderrLines = (res) => res.stderr.split('\n').filter((l) => l !== '');

/** stderr lines beyond the normal ones (trace id, summary, link, profile written). */
function unexpectedLines(res, prog) {
	const normal = new RegExp(`^${prog}: (trace_id=[0-9a-f]{32}$|wrote \\d+ records |loaded \\d+ rows |` +
		'profiles of trace [0-9a-f]{32}: |profile written to )');
	return stderrLines(res).filter((l) => !normal.test(l));
}

const warnings = (res, prog) => stderrLines(res).filter((l) => l.startsWith(`${prog}: warning: `));

function printedTraceId(res, prog) {
	const m = new RegExp(`^${prog}: trace_id=([0-9a-f]{32})$`, 'm').exec(res.stderr);
	assert.ok(m, `${prog} prints its trace id: ${res.stderr}`);
	return m[1];
}

/** The one span named `name`, a root span; every OTLP request must decode. */
function rootSpan(otlp, name) {
	assert.ok(otlp.requests.length > 0, 'spans were exported over OTLP');
	const spans = otlp.requests.flatMap((r) => {
		assert.equal(r.bodyError, null, `OTLP request ${r.index}: ${r.bodyError}`);
		return decodeTraces(r.body).spans;
	});
	const found = spans.filter((s) => s.name === name);
	assert.equal(found.length, 1, `one span named ${name}; got ${spans.map((s) => s.name).join(', ')}`);
	const root = found[0];
	assert.equal(root.parentSpanId, '', `${name} is a root span`);
	assert.match(root.traceId, HEX32);
	assert.match(root.spanId, HEX16);
	return root;
}

/**
 * The link line `<prog>: profiles of trace <trace>: <server>/?query=
 * service%3D<app>%20trace_id%3D<trace>` (the documented pattern), exactly
 * once; returns the link.
 */
function checkLink(res, prog, server, app, trace) {
	const prefix = `${prog}: profiles of trace `;
	const found = stderrLines(res).filter((l) => l.startsWith(prefix));
	assert.equal(found.length, 1, `one link line: ${res.stderr}`);
	const m = /^\S+: profiles of trace ([0-9a-f]{32}): (\S+)$/.exec(found[0]);
	assert.ok(m, `link line shape: ${found[0]}`);
	assert.equal(m[1], trace, 'the link line names the root trace');
	const link = m[2];
	assert.equal(link, `${server}/?query=service%3D${encodeURIComponent(app)}%20trace_id%3D${trace}`);
	const u = new URL(link);
	assert.equal(`${u.protocol}//${u.host}${u.pathname}`, `${server}/`);
	assert.deepEqual([...u.searchParams.keys()], ['query']);
	assert.equal(u.searchParams.get('query'), `service=${app} trace_id=${trace}`, 'the query decodes back');
	return link;
}

/**
 * What every CPU profile of our binaries holds: sample types with
 * cpu/nanoseconds, the 100 Hz period, every sample labelled with the root
 * span (span_id 16 hex, trace_id 32 hex; span_name is the only other label,
 * since Pyroscope makes every other string label a series label).  Returns
 * {prof, total (sample count), names (function names)}.
 */
function checkCpuProfile(prof, { trace, span, spanName }) {
	assert.ok(prof.sampleTypes.includes('cpu/nanoseconds'), `sample types ${prof.sampleTypes}`);
	assert.deepEqual(prof.sampleTypes, ['samples/count', 'cpu/nanoseconds']);
	assert.equal(prof.periodType, 'cpu/nanoseconds');
	assert.equal(prof.period, PERIOD_NS);
	assert.equal(prof.defaultSampleType, 'cpu');
	assert.ok(prof.samples.length > 0, 'the profile has samples');
	let total = 0;
	const names = new Set();
	for (const x of prof.samples) {
		assert.ok(x.values[0] > 0, 'a sample counts at least once');
		assert.equal(x.values[1], x.values[0] * PERIOD_NS, 'cpu ns = count * period');
		total += x.values[0];
		assert.equal(x.labels.span_id, span, 'span_id label = the root span id');
		assert.equal(x.labels.trace_id, trace, 'trace_id label = the root trace id');
		for (const [k, v] of Object.entries(x.labels)) {
			if (k !== 'span_id' && k !== 'trace_id') {
				assert.equal(k, 'span_name', `unexpected sample label ${k}=${v} (would become a series label)`);
				assert.equal(v, spanName);
			}
		}
		for (const f of x.frames)
			names.add(f);
	}
	return { prof, total, names };
}

/**
 * Every upload the capture server got: POST /ingest with exactly name,
 * from, until, format=pprof; the series name app{tags} as expected; from /
 * until Unix seconds within the run; the body a decodable CPU pprof whose
 * window lies inside from..until.  Returns {uploads: [{req, prof, total}],
 * total, names}.
 */
function checkUploads(ingest, { app, tags, trace, span, spanName, t0, t1 }) {
	assert.ok(ingest.requests.length > 0, 'at least one upload arrived');
	const uploads = [];
	const names = new Set();
	let total = 0;
	for (const r of ingest.requests) {
		const where = `upload ${r.index} (${r.url})`;
		assert.equal(r.method, 'POST', where);
		assert.equal(r.path, '/ingest', where);
		assert.deepEqual(Object.keys(r.query).sort(), ['format', 'from', 'name', 'until'], where);
		assert.deepEqual(r.repeatedParams, [], where);
		assert.equal(r.query.format, 'pprof', where);
		assert.doesNotMatch(r.url, /[{},]/, `${where}: the name is percent-encoded`);
		assert.equal(r.seriesError, null, where);
		assert.equal(r.series.app, app, `${where}: application name`);
		assert.deepEqual(r.series.tags, tags, `${where}: series tags, in order`);
		assert.match(r.query.from, /^\d{10}$/, `${where}: from in Unix seconds`);
		assert.match(r.query.until, /^\d{10}$/, `${where}: until in Unix seconds`);
		const from = Number(r.query.from);
		const until = Number(r.query.until);
		assert.ok(from < until, `${where}: from < until`);
		assert.ok(from >= Math.floor(t0 / 1000) && until <= Math.ceil(t1 / 1000),
			`${where}: window ${from}..${until} inside the run ${t0 / 1000}..${t1 / 1000}`);
		assert.equal(r.headers['content-type'], 'application/octet-stream', where);
		assert.equal(Number(r.headers['content-length']), r.body.length, where);
		const c = checkCpuProfile(decodePprof(r.body), { trace, span, spanName });
		assert.ok(c.prof.timeNanos >= BigInt(from) * 1000000000n &&
			c.prof.timeNanos + c.prof.durationNanos <= BigInt(until) * 1000000000n,
			`${where}: the pprof window ${c.prof.timeNanos}+${c.prof.durationNanos} lies inside from..until`);
		assert.ok(c.prof.durationNanos > 0n, `${where}: the pprof has a duration`);
		total += c.total;
		for (const n of c.names)
			names.add(n);
		uploads.push({ req: r, prof: c.prof, total: c.total });
	}
	// One thread's CPU time cannot exceed the run's wall time.
	assert.ok(total * PERIOD_NS <= (t1 - t0) * 1e6 + 2 * PERIOD_NS,
		`${total} samples of 10 ms in a ${t1 - t0} ms run`);
	return { uploads, total, names };
}

function profileWrittenCount(res, prog, target) {
	const m = new RegExp(`^${prog}: profile written to (.+) \\((\\d+) samples\\)$`, 'm').exec(res.stderr);
	assert.ok(m, `"profile written" line: ${res.stderr}`);
	assert.equal(m[1], target);
	return Number(m[2]);
}

// ---- 1. the documented checklist --------------------------------------

test('checklist, generator: uploads tagged with the exported root span, span-labelled pprof, profile attributes, link', async (t) => {
	const { ingest, otlp } = await servers(t);
	const g = await generate(pyroEnv(ingest, otlp, { PYROSCOPE_TRACE_CORRELATION: 'true' }));
	assert.equal(g.res.code, 0, describe(g.res));
	assert.ok(g.wrote, 'OUT was written');
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');

	const root = rootSpan(otlp, 'generator.run');
	assert.equal(printedTraceId(g.res, 'generator'), root.traceId);
	const up = checkUploads(ingest, {
		app: GEN_APP,
		tags: [['service', GEN_APP], ['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
	assert.equal(ingest.requests.length, 1, 'one upload at the end (default interval 10 s)');
	for (const fn of ['main', 'gen_orders_emit', 'gen_orders_record'])
		assert.ok(up.names.has(fn), `the binary's own function ${fn} is in the profile: ${[...up.names].join(', ')}`);
	const r = ingest.requests[0];
	assert.equal(r.headers['x-scope-orgid'], undefined, 'no tenant header without PYROSCOPE_TENANT_ID');
	assert.equal(r.headers.authorization, undefined, 'no credentials without PYROSCOPE_BASIC_AUTH_*');

	// Tempo side: the span carries the profile id and link; the profiled
	// window lies inside the span.
	assert.equal(root.attributes['pyroscope.profile.id'], root.spanId);
	const link = checkLink(g.res, 'generator', ingest.url, GEN_APP, root.traceId);
	assert.equal(root.attributes['pyroscope.profile.url'], link);
	const prof = up.uploads[0].prof;
	assert.ok(prof.timeNanos >= root.startTimeUnixNano &&
		prof.timeNanos + prof.durationNanos <= root.endTimeUnixNano,
		`profile window ${prof.timeNanos}+${prof.durationNanos} inside generator.run ` +
		`${root.startTimeUnixNano}..${root.endTimeUnixNano}`);
});

/**
 * A generator run (after the servers are reset) whose application name had
 * to be made valid: one warning matching warned, uploads of application app.
 */
async function sanitizedRun(ingest, otlp, env, warned, app) {
	ingest.reset();
	otlp.reset();
	const g = await generate(pyroEnv(ingest, otlp, env), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], warned);
	const root = rootSpan(otlp, 'generator.run');
	checkUploads(ingest, { app, tags: [['service', app]], trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g });
	return { g, root };
}

test('checklist, generator: PYROSCOPE_APPLICATION_NAME names the series and the link; bad characters are replaced with a warning', async (t) => {
	const { ingest, otlp } = await servers(t);
	const app = 'team-a.gen/batch_1';
	const g = await generate(pyroEnv(ingest, otlp, { PYROSCOPE_TRACE_CORRELATION: 'true', PYROSCOPE_APPLICATION_NAME: app }),
		{ records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	const root = rootSpan(otlp, 'generator.run');
	checkUploads(ingest, {
		app, tags: [['service', app], ['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
	assert.match(ingest.requests[0].url, /[?&]name=team-a\.gen%2Fbatch_1%7B/, 'the name is percent-encoded');
	const link = checkLink(g.res, 'generator', ingest.url, app, root.traceId);
	assert.ok(link.includes('service%3Dteam-a.gen%2Fbatch_1%20trace_id%3D'), link);
	assert.equal(root.attributes['pyroscope.profile.url'], link);

	const bad = await sanitizedRun(ingest, otlp, { PYROSCOPE_APPLICATION_NAME: 'my gen!' },
		/PYROSCOPE_APPLICATION_NAME "my gen!".*"my_gen_"/, 'my_gen_');
	checkLink(bad.g.res, 'generator', ingest.url, 'my_gen_', bad.root.traceId);
});

test('checklist, generator: without PYROSCOPE_APPLICATION_NAME the series is named by the spans\' service.name, as Grafana\'s traces-to-profiles looks for it', async (t) => {
	const { ingest, otlp } = await servers(t);
	// The reference's own run: OTEL_RESOURCE_ATTRIBUTES="service.name=generator-otel,env=dev".
	const g = await generate(pyroEnv(ingest, otlp, {
		PYROSCOPE_TRACE_CORRELATION: 'true', OTEL_RESOURCE_ATTRIBUTES: 'service.name=generator-otel,env=dev',
	}), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	const root = rootSpan(otlp, 'generator.run');
	assert.equal(root.resource.attributes['service.name'], 'generator-otel');
	checkUploads(ingest, {
		app: 'generator-otel', tags: [['service', 'generator-otel'], ['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
	assert.equal(root.attributes['pyroscope.profile.url'], checkLink(g.res, 'generator', ingest.url, 'generator-otel', root.traceId));

	// OTEL_SERVICE_NAME wins, made into an application name with a warning.
	const svc = await sanitizedRun(ingest, otlp, { OTEL_SERVICE_NAME: 'gen svc' }, /service\.name "gen svc".*"gen_svc"/, 'gen_svc');
	assert.equal(svc.root.resource.attributes['service.name'], 'gen svc');
});

test('checklist, loader: uploads tagged with loader.run, span-labelled pprof, profile attributes, link', async (t) => {
	const c = await getLoaderSetup();
	const { ingest, otlp } = await servers(t);
	const folded = file('loader.folded');
	const t0 = Date.now();
	const res = await run(LOADER, [c.url(), loaderInput, '--table', 'pyro_checklist'], {
		env: pyroEnv(ingest, otlp, { PYROSCOPE_TRACE_CORRELATION: 'true', TRACEPROF_PROFILE_OUT: folded }),
		timeout: 60000,
	});
	const t1 = Date.now();
	assert.equal(res.code, 0, describe(res));
	assert.deepEqual(unexpectedLines(res, 'loader'), [], 'no warnings');
	assert.equal(await c.psql('SELECT count(*) FROM pyro_checklist'), String(LOADER_RECORDS));

	const root = rootSpan(otlp, 'loader.run');
	assert.equal(printedTraceId(res, 'loader'), root.traceId);
	const up = checkUploads(ingest, {
		app: LOADER_APP,
		tags: [['service', LOADER_APP], ['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'loader.run', t0, t1,
	});
	assert.equal(ingest.requests.length, 1, 'one upload at the end');
	assert.ok(up.names.has('main'), `main in ${[...up.names].join(', ')}`);
	assert.ok([...up.names].some((n) => /^(ld_|jr_|order_row_|pgb_)/.test(n)),
		`one of the loader's own functions is in the profile: ${[...up.names].join(', ')}`);
	assert.equal(root.attributes['pyroscope.profile.id'], root.spanId);
	assert.equal(root.attributes['pyroscope.profile.url'],
		checkLink(res, 'loader', ingest.url, LOADER_APP, root.traceId));

	// TRACEPROF_PROFILE_OUT holds the same samples as the upload.
	assert.equal(profileWrittenCount(res, 'loader', folded), up.total);
	const counts = fs.readFileSync(folded, 'utf8').trimEnd().split('\n').map((l) => Number(/ (\d+)$/.exec(l)[1]));
	assert.equal(counts.reduce((a, b) => a + b, 0), up.total);
	fs.rmSync(loaderInput, { force: true });
});

// ---- 2. switches ---------------------------------------------------------

test('without PYROSCOPE_TRACE_CORRELATION no trace_id/root_span_id tags (samples keep their span labels)', async (t) => {
	const { ingest, otlp } = await servers(t);
	const g = await generate(pyroEnv(ingest, otlp), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	const root = rootSpan(otlp, 'generator.run');
	checkUploads(ingest, { app: GEN_APP, tags: [['service', GEN_APP]], trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g });
	assert.equal(ingest.requests[0].query.name, `${GEN_APP}{service=${GEN_APP}}`);
	assert.equal(root.attributes['pyroscope.profile.id'], root.spanId);
	checkLink(g.res, 'generator', ingest.url, GEN_APP, root.traceId);
});

test('without PYROSCOPE_ENABLE nothing is uploaded at all (unset, false, or not a boolean), and PYROSCOPE_TRACE_CORRELATION says so', async (t) => {
	// The reference's correlation command sets no PYROSCOPE_ENABLE: it
	// profiled nothing, silently (helper-105's review).
	const { ingest, otlp } = await servers(t);
	const cases = [
		[undefined, 0],
		['false', 0],
		['0', 0],
		['enabled', 1],		// not a boolean: warned about, treated as false
	];
	for (const [value, nwarn] of cases) {
		otlp.reset();
		const g = await generate({
			PYROSCOPE_ENABLE: value,
			PYROSCOPE_TRACE_CORRELATION: 'true',
			PYROSCOPE_SERVER_ADDRESS: ingest.url,
			PYROSCOPE_UPLOAD_INTERVAL: '200',
			OTEL_EXPORTER_OTLP_ENDPOINT: otlp.httpEndpoint,
		}, { records: value === undefined ? BIG : SOME });
		const what = `PYROSCOPE_ENABLE=${value}`;
		assert.equal(g.res.code, 0, `${what}: ${describe(g.res)}`);
		const w = warnings(g.res, 'generator');
		assert.equal(w.length, nwarn + 1, `${what}: ${describe(g.res)}`);
		if (nwarn)
			assert.match(w[0], /PYROSCOPE_ENABLE="enabled" is not a boolean/);
		assert.match(w[nwarn], /PYROSCOPE_TRACE_CORRELATION is on but PYROSCOPE_ENABLE is not: no profile is taken or uploaded \(set PYROSCOPE_ENABLE=true\)/);
		assert.deepEqual(unexpectedLines(g.res, 'generator'), w, `${what}: nothing else on stderr`);
		assert.ok(!/profiles of trace/.test(g.res.stderr), `${what}: no Pyroscope link`);
		const root = rootSpan(otlp, 'generator.run');
		assert.equal(root.attributes['pyroscope.profile.id'], undefined, `${what}: no profile id on the span`);
		assert.equal(root.attributes['pyroscope.profile.url'], undefined, `${what}: no profile url on the span`);
	}
	await new Promise((r) => setTimeout(r, 200));
	assert.equal(ingest.requests.length, 0, 'no upload arrived');
});

test('PYROSCOPE_UPLOAD_INTERVAL is read trimmed, as every PYROSCOPE_* and OTEL_* value ("200\\n" from a file is 200 ms)', async (t) => {
	const { ingest, otlp } = await servers(t);
	const g = await generate(pyroEnv(ingest, otlp, { PYROSCOPE_UPLOAD_INTERVAL: ' 200\n' }), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warning');
	assert.ok(ingest.requests.length >= 1, 'uploaded');
});

// ---- 3. tags ---------------------------------------------------------------

test('PYROSCOPE_TAGS + correlation: env,service,version then trace_id,root_span_id, in that order', async (t) => {
	const { ingest, otlp } = await servers(t);
	const g = await generate(pyroEnv(ingest, otlp, {
		PYROSCOPE_TRACE_CORRELATION: 'true',
		PYROSCOPE_TAGS: 'env=dev,service=generator,version=1.0.0',
	}), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	const root = rootSpan(otlp, 'generator.run');
	checkUploads(ingest, {
		app: GEN_APP,
		tags: [['env', 'dev'], ['service', 'generator'], ['version', '1.0.0'],
			['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
	assert.equal(ingest.requests[0].query.name,
		`${GEN_APP}{env=dev,service=generator,version=1.0.0,trace_id=${root.traceId},root_span_id=${root.spanId}}`);
});

test('PYROSCOPE_TAGS: a user-set trace_id tag is not overwritten', async (t) => {
	const { ingest, otlp } = await servers(t);
	const g = await generate(pyroEnv(ingest, otlp, {
		PYROSCOPE_TRACE_CORRELATION: 'true',
		PYROSCOPE_TAGS: 'trace_id=from-user,env=dev',
	}), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	const root = rootSpan(otlp, 'generator.run');
	// The series keeps the user's value; the samples still carry the real trace.
	checkUploads(ingest, {
		app: GEN_APP,
		tags: [['trace_id', 'from-user'], ['env', 'dev'], ['service', GEN_APP], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
	checkLink(g.res, 'generator', ingest.url, GEN_APP, root.traceId);
});

test('malformed PYROSCOPE_TAGS: one clear warning per bad member, the run goes on with the valid ones', async (t) => {
	const { ingest, otlp } = await servers(t);
	const g = await generate(pyroEnv(ingest, otlp, {
		PYROSCOPE_TRACE_CORRELATION: 'true',
		PYROSCOPE_TAGS: 'noequals,=empty,my-key=1,env=dev,env=prod,bad=va}l,region=eu',
	}), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.ok(g.wrote, 'OUT was written');
	const w = warnings(g.res, 'generator');
	assert.deepEqual(unexpectedLines(g.res, 'generator'), w, 'only warnings beyond the normal lines');
	const bad = ['"noequals"', '"=empty"', '"my-key=1"', '"env=prod"', '"bad=va}l"'];
	assert.equal(w.length, bad.length, `one warning per bad member: ${JSON.stringify(w)}`);
	bad.forEach((part, i) => {
		assert.ok(w[i].includes('PYROSCOPE_TAGS') && w[i].includes(part),
			`warning ${i} names the variable and ${part}: ${w[i]}`);
	});
	assert.match(w[0], /no '='/);
	assert.match(w[1], /empty key/);
	assert.match(w[2], /character/);
	assert.match(w[3], /already set/);
	const root = rootSpan(otlp, 'generator.run');
	checkUploads(ingest, {
		app: GEN_APP,
		tags: [['env', 'dev'], ['region', 'eu'], ['service', GEN_APP], ['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
});

// ---- 4. tenant and credentials --------------------------------------------

test('PYROSCOPE_TENANT_ID -> X-Scope-OrgID, basic auth -> Authorization: Basic; credentials never on stderr', async (t) => {
	const { ingest, otlp } = await servers(t);
	const user = 'pyro_user_7731';
	const password = 'glc_s3cret_Zq9';
	const basic = Buffer.from(`${user}:${password}`).toString('base64');
	const env = pyroEnv(ingest, otlp, {
		PYROSCOPE_TRACE_CORRELATION: 'true',
		PYROSCOPE_TENANT_ID: 'team-a',
		PYROSCOPE_BASIC_AUTH_USER: user,
		PYROSCOPE_BASIC_AUTH_PASSWORD: password,
	});
	const secretFree = (text, what) => {
		for (const secret of [user, password, basic])
			assert.ok(!text.includes(secret), `${what} leaks ${secret}: ${text}`);
	};

	let g = await generate(env, { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	assert.equal(ingest.requests.length, 1);
	assert.equal(ingest.requests[0].headers['x-scope-orgid'], 'team-a');
	assert.equal(ingest.requests[0].headers.authorization, `Basic ${basic}`);
	secretFree(g.res.stderr, 'stderr');
	secretFree(JSON.stringify(rootSpan(otlp, 'generator.run').attributes), 'the root span');

	// Rejected: a warning with the status, still without credentials.
	ingest.reset();
	ingest.enqueue({ status: 401, body: 'invalid credentials' });
	g = await generate(env, { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], /profiles not uploaded to Pyroscope: .*HTTP status 401: invalid credentials$/);
	secretFree(g.res.stderr, 'stderr');
});

test('a 1500-character PYROSCOPE_TENANT_ID and basic-auth password arrive whole', async (t) => {
	// X-Scope-OrgID was formatted into 512 bytes: a long tenant arrived cut
	// to 497 characters, and the server filed the profile under another
	// tenant (or refused it) with no hint why.
	const { ingest, otlp } = await servers(t);
	const long = (seed) => Array.from({ length: 1500 }, (_, i) => `${seed}0123456789abcdefghijklmnopqrstuvwxyz`[i % 37]).join('');
	const tenant = long('T');
	const user = 'pyro_user_long';
	const password = long('P');
	const g = await generate(pyroEnv(ingest, otlp, {
		PYROSCOPE_TENANT_ID: tenant,
		PYROSCOPE_BASIC_AUTH_USER: user,
		PYROSCOPE_BASIC_AUTH_PASSWORD: password,
	}), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	assert.equal(ingest.requests.length, 1);
	const got = ingest.requests[0].headers['x-scope-orgid'];
	assert.equal(got.length, tenant.length, 'the X-Scope-OrgID value\'s length');
	assert.equal(got, tenant);
	assert.equal(ingest.requests[0].headers.authorization,
		`Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`);
	assert.ok(!g.res.stderr.includes(password.slice(0, 40)), `the password stays off stderr: ${g.res.stderr}`);
});

test('credentials in PYROSCOPE_SERVER_ADDRESS never reach stderr or the exported span', async (t) => {
	const { ingest, otlp } = await servers(t);
	const server = ingest.url.replace('http://', 'http://urluser:urlp4ss@');
	ingest.enqueue({ status: 500, body: 'boom' });
	const g = await generate(pyroEnv(ingest, otlp, {
		PYROSCOPE_SERVER_ADDRESS: server,
		PYROSCOPE_TRACE_CORRELATION: 'true',
	}), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.equal(ingest.requests.length, 1, 'the upload was attempted');
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], /HTTP status 500: boom$/);
	const root = rootSpan(otlp, 'generator.run');
	assert.ok(!g.res.stderr.includes('urlp4ss'), `stderr leaks the password of the server URL:\n${g.res.stderr}`);
	assert.ok(!JSON.stringify(root.attributes).includes('urlp4ss'),
		`the exported root span leaks the password of the server URL: ${JSON.stringify(root.attributes)}`);
});

// ---- 5. an unavailable server never changes the outcome --------------------

test('server down (closed port): one warning however many uploads fail, exit 0, quick', async (t) => {
	const { otlp } = await servers(t);
	const port = await freePort();
	const g = await generate({
		PYROSCOPE_ENABLE: 'true',
		PYROSCOPE_TRACE_CORRELATION: 'true',
		PYROSCOPE_SERVER_ADDRESS: `http://127.0.0.1:${port}`,
		PYROSCOPE_UPLOAD_INTERVAL: '200',
		OTEL_EXPORTER_OTLP_ENDPOINT: otlp.httpEndpoint,
	}, { records: BIG });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.ok(g.wrote, 'OUT was written');
	assert.ok(g.res.durationMs < 10000, `took ${g.res.durationMs} ms`);
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, `exactly one warning: ${describe(g.res)}`);
	assert.match(w[0], new RegExp(`^generator: warning: profiles not uploaded to Pyroscope: http://127\\.0\\.0\\.1:${port}/ingest: \\S.*$`));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), w);
	assert.ok(!/profiles of trace/.test(g.res.stderr), `no link to profiles that never arrived: ${g.res.stderr}`);
	assert.notEqual(rootSpan(otlp, 'generator.run').status.code, StatusCode.ERROR);
});

test('hanging server: bounded by PYROSCOPE_UPLOAD_TIMEOUT, exit 0', async (t) => {
	const { ingest, otlp } = await servers(t);
	ingest.setDefault({ hang: true });
	const g = await generate(pyroEnv(ingest, otlp, { PYROSCOPE_UPLOAD_TIMEOUT: '1000' }), { records: BIG, timeout: 20000 });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.equal(g.res.timedOut, false);
	assert.ok(g.wrote, 'OUT was written');
	assert.equal(ingest.requests.length, 1, 'one upload (at the end)');
	const waited = g.end - ingest.requests[0].time;
	assert.ok(waited >= 800 && waited < 3000,
		`exited ${waited.toFixed(0)} ms after the upload started: the 1000 ms timeout, not more`);
	assert.ok(g.res.durationMs < 8000, `took ${g.res.durationMs} ms`);
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], /profiles not uploaded to Pyroscope: http:\/\/127\.0\.0\.1:\d+\/ingest: .*(timed out|timeout)/i);
});

test('a 500 answer (not retried) or connections that keep dropping (retried within the budget): one warning, exit 0', async (t) => {
	const { ingest, otlp } = await servers(t);
	ingest.enqueue({ status: 500, body: 'internal error\nat ingest' });
	let g = await generate(pyroEnv(ingest, otlp), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.ok(g.wrote);
	let w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], /^generator: warning: profiles not uploaded to Pyroscope: http:\/\/127\.0\.0\.1:\d+\/ingest: HTTP status 500: internal error at ingest$/);
	assert.deepEqual(unexpectedLines(g.res, 'generator'), w);
	assert.ok(!/profiles of trace/.test(g.res.stderr), `no link to profiles that never arrived: ${g.res.stderr}`);

	// A dropped connection is retried (as OTLP does) until the budget ends.
	ingest.reset();
	ingest.setDefault({ destroy: true });
	g = await generate(pyroEnv(ingest, otlp, { PYROSCOPE_UPLOAD_TIMEOUT: '1000' }), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.ok(ingest.requests.length >= 2, `retried within the upload: ${ingest.requests.length} attempt(s)`);
	w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], /profiles not uploaded to Pyroscope: http:\/\/127\.0\.0\.1:\d+\/ingest: \S/);
});

/** A body limit as a proxy's: 413 above limit bytes (null: the first upload's size less one). */
function limitIngest(ingest, limit) {
	const state = { limit };
	ingest.answerBy = ({ body }) => {
		if (state.limit === null)
			state.limit = body.length - 1;
		return body.length > state.limit ? { status: 413, body: '413 Request Entity Too Large' } : null;
	};
	return state;
}

/** "frames|labels" -> summed values, over the samples of decoded pprofs. */
function sampleTotals(profiles) {
	const totals = new Map();
	for (const p of profiles)
		for (const smp of p.samples) {
			const k = `${smp.frames.join(';')}|${JSON.stringify(smp.labels)}`;
			const v = totals.get(k) || [0, 0];
			totals.set(k, [v[0] + smp.values[0], v[1] + smp.values[1]]);
		}
	return totals;
}

test('413: the profile goes again as parts of its samples for the same window, each sample once, no warning', async (t) => {
	// A 413 was a failure like a 500: the whole profile was lost.
	const { ingest, otlp } = await servers(t);
	const state = limitIngest(ingest, null);
	const g = await generate(pyroEnv(ingest, otlp), { records: BIG });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'every sample went: no warning');
	const [whole, ...parts] = ingest.requests;
	assert.equal(whole.behaviour.status, 413, 'the profile went whole first and was refused');
	const first = decodePprof(whole.body);
	assert.ok(first.samples.length >= 2, `a profile of several samples (${first.samples.length})`);
	assert.ok(parts.length >= 2 && parts.length < 2 * first.samples.length, `${parts.length} requests after it`);
	const taken = parts.filter((r) => r.behaviour.status === undefined);
	for (const r of parts) {
		assert.deepEqual([r.query.name, r.query.from, r.query.until, r.query.format],
			[whole.query.name, whole.query.from, whole.query.until, whole.query.format], 'the same series and window');
	}
	for (const r of taken)
		assert.ok(r.body.length <= state.limit, `a part taken is within the limit (${r.body.length} <= ${state.limit})`);
	const decoded = taken.map((r) => decodePprof(r.body));
	for (const p of decoded) {
		assert.deepEqual({ ...p, samples: null }, { ...first, samples: null }, 'the same sample types, period and window');
		assert.ok(p.samples.length < first.samples.length);
	}
	assert.deepEqual(sampleTotals(decoded), sampleTotals([first]), 'every sample of the profile once, with its values');
});

test('413 even for single samples: halved down to them, each refused alone dropped and counted in the warning', async (t) => {
	const { ingest, otlp } = await servers(t);
	limitIngest(ingest, 10);
	const g = await generate(pyroEnv(ingest, otlp), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	const first = decodePprof(ingest.requests[0].body);
	const n = first.samples.length;
	assert.ok(n >= 2, `a profile of several samples (${n})`);
	// Halves down to single samples, each sent once: it ends.  A part of
	// several samples goes only while smaller than every body refused
	// before it, so fewer than 2N - 1 requests may do.
	const sent = ingest.requests.map((r) => ({ len: r.body.length, p: decodePprof(r.body) }));
	assert.deepEqual(sampleTotals(sent.filter((q) => q.p.samples.length === 1).map((q) => q.p)), sampleTotals([first]),
		'each sample went alone once');
	let smallest = Infinity;
	for (const q of sent) {
		if (q.p.samples.length > 1)
			assert.ok(q.len < smallest, `a part of ${q.p.samples.length} samples (${q.len} bytes) under the smallest refused (${smallest})`);
		smallest = Math.min(smallest, q.len);
	}
	assert.ok(sent.length >= n && sent.length <= 2 * n - 1, `${sent.length} requests for ${n} samples`);
	const total = first.samples.reduce((a, smp) => a + smp.values[0], 0);
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], new RegExp(`profiles not uploaded to Pyroscope: .*HTTP status 413: 413 Request Entity Too Large .*dropped: ${total} of ${total}\\)$`));
});

test('413 remembered: later uploads as large as the one refused go in parts at once, none refused but a rare probe or a lone sample, each sample once', async (t) => {
	// Before, nothing was remembered between uploads: every later upload at
	// least as large as the one refused went whole again, was refused, and
	// only then went in parts (one refused request per upload, forever).
	const { ingest, otlp } = await servers(t);
	const refusal = { status: 413, body: '413 Request Entity Too Large' };
	let limit = null;
	ingest.answerBy = ({ body }) => {
		if (limit === null) {
			// The limit is set just under the first upload, which is answered
			// late: windows add up meanwhile, so a later upload is larger.
			limit = body.length - 1;
			return { ...refusal, delayMs: 1500 };
		}
		// A consistent limit, single samples too: one taken above it would
		// rightly teach the client that the limit was raised.  A small upload
		// is mostly the pprof's fixed part (12 samples in 764 bytes, 1 in
		// 833), so a lone sample may be refused: dropped and warned about.
		return body.length > limit ? refusal : null;
	};
	const whole = file('remembered.pprof');
	const g = await generate(pyroEnv(ingest, otlp, { PYROSCOPE_UPLOAD_INTERVAL: '200' }),
		{ records: 3000000, args: ['--profile-out', whole], timeout: 60000 });
	assert.equal(g.res.code, 0, describe(g.res));
	const reqs = ingest.requests.map((r) => ({ r, p: decodePprof(r.body), refused: r.behaviour.status === 413 }));
	const refusedSize = reqs[0].r.body.length;
	assert.ok(reqs[0].refused, 'the first upload went whole and was refused');
	const shown = reqs.map((q) => `${q.refused ? 413 : 200}:${q.p.samples.length}:${q.r.body.length}`).join(' ');

	// Lone samples refused are dropped, and said so in the run's one warning.
	const lone = reqs.slice(1).filter((q) => q.refused && q.p.samples.length === 1).map((q) => q.p);
	const unexpected = unexpectedLines(g.res, 'generator');
	if (lone.length === 0)
		assert.deepEqual(unexpected, [], `every sample went: no warning: ${shown}`);
	else {
		assert.equal(unexpected.length, 1, `one warning for ${lone.length} lone samples refused: ${describe(g.res)}`);
		assert.match(unexpected[0], /^generator: warning: profiles not uploaded to Pyroscope: .*HTTP status 413: .*(samples refused even alone were dropped: [1-9]\d* of \d+|a profile of one sample, refused even alone: dropped)\)$/);
	}

	// A size refused is asked again only as a probe of a raised limit: a
	// body of several samples, after at least 16 requests taken since the
	// last refusal (size_limit.c's PROBE_FIRST); a lone sample may be refused.
	let takenSince = 0;
	let probes = 0;
	for (const q of reqs.slice(1)) {
		if (!q.refused) {
			assert.ok(q.r.body.length <= limit, `a body taken is within the limit: ${shown}`);
			takenSince++;
			continue;
		}
		if (q.p.samples.length === 1)
			continue;
		assert.ok(q.r.body.length >= refusedSize && takenSince >= 16,
			`request ${q.r.index} refused (${q.r.body.length} bytes, ${takenSince} taken since the last refusal) is no probe: ${shown}`);
		probes++;
		takenSince = 0;
	}
	assert.ok(probes <= 1, `at most one probe in this run: ${shown}`);

	// The windows (pprof time_nanos) after the first: one at least went in
	// parts without being refused first (before: refused whole, then split).
	const windows = new Map();
	for (const q of reqs)
		windows.set(q.p.timeNanos, [...(windows.get(q.p.timeNanos) || []), q]);
	const later = [...windows.values()].slice(1);
	assert.ok(later.length >= 2, `several uploads after the first: ${shown}`);
	assert.ok(later.some((w) => w.length >= 2 && w.every((q) => !q.refused)),
		`a later upload went in parts at once, none refused: ${shown}`);

	// Every sample of the run arrived once, with its values, but lone ones refused.
	const taken = reqs.filter((q) => !q.refused).map((q) => q.p);
	assert.deepEqual(sampleTotals([...taken, ...lone]), sampleTotals([decodePprof(fs.readFileSync(whole))]),
		'the uploads taken, and lone samples refused, hold every sample of --profile-out once');
	t.diagnostic(`requests (status:samples:bytes): ${shown}`);
});

test('a 400 whose body is cut short (the connection closes): one attempt, the status in the warning', async (t) => {
	// The status line was read: the server refused the profile, so it is
	// not sent again (it was retried as a dropped connection until the
	// budget ended, and the warning said only "transfer closed").  A server
	// of this test's own, since the capture server cuts only 200s short.
	const { otlp } = await servers(t);
	let uploads = 0;
	const server = net.createServer((socket) => {
		let seen = Buffer.alloc(0);
		socket.on('data', (d) => {
			seen = Buffer.concat([seen, d]);
			const head = seen.indexOf('\r\n\r\n');
			if (head < 0)
				return;
			const m = /content-length: *(\d+)/i.exec(seen.subarray(0, head).toString('latin1'));
			if (!m || seen.length < head + 4 + Number(m[1]))
				return;
			uploads++;
			seen = Buffer.alloc(0);
			socket.end('HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nbad profile', () => socket.destroy());
		});
		socket.on('error', () => {});
	});
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	t.after(() => new Promise((resolve) => server.close(resolve)));
	const g = await generate(pyroEnv({ url: `http://127.0.0.1:${server.address().port}` }, otlp,
		{ PYROSCOPE_UPLOAD_TIMEOUT: '3000' }), { records: SOME });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.equal(uploads, 1, `one attempt, not retried (got ${uploads})`);
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.match(w[0], /profiles not uploaded to Pyroscope: http:\/\/127\.0\.0\.1:\d+\/ingest: HTTP status 400: bad profile$/);
});

test('a failing generator run (OUT cannot be renamed into place) still exits 1 and still uploads its profile', async (t) => {
	const { ingest, otlp } = await servers(t);
	// OUT's directory is removed under the run, once its temp file is there:
	// the rename at the end fails, after the records were made (and sampled).
	const dir = file('vanishing');
	fs.mkdirSync(dir);
	const out = path.join(dir, 'orders.json');
	const folded = file('failing.folded');
	const running = generate(pyroEnv(ingest, otlp, { PYROSCOPE_TRACE_CORRELATION: 'true' }),
		{ records: BIG, out, args: ['--profile-out', folded] });
	const deadline = Date.now() + 10000;
	while (!fs.readdirSync(dir).some((n) => n.includes('.tmp-')) && Date.now() < deadline)
		await new Promise((r) => setTimeout(r, 5));
	fs.rmSync(dir, { recursive: true });
	const g = await running;
	assert.equal(g.res.code, 1, describe(g.res));
	assert.match(g.res.stderr, /^generator: error: cannot rename .*orders\.json.*$/m);
	assert.ok(!fs.existsSync(dir), 'nothing was written where the directory was');
	const root = rootSpan(otlp, 'generator.run');
	assert.equal(root.status.code, StatusCode.ERROR);
	const up = checkUploads(ingest, {
		app: GEN_APP, tags: [['service', GEN_APP], ['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
	assert.ok(up.total > 0);
	checkLink(g.res, 'generator', ingest.url, GEN_APP, root.traceId);
	assert.equal(profileWrittenCount(g.res, 'generator', folded), up.total);
});

// ---- 6. periodic uploads ------------------------------------------------

test('PYROSCOPE_UPLOAD_INTERVAL=300: several uploads, windows forward and contiguous, no sample lost or doubled', async (t) => {
	const { ingest, otlp } = await servers(t);
	const whole = file('whole.pprof');
	const g = await generate(pyroEnv(ingest, otlp, { PYROSCOPE_TRACE_CORRELATION: 'true', PYROSCOPE_UPLOAD_INTERVAL: '300' }),
		{ records: 5000000, args: ['--profile-out', whole], timeout: 60000 });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	const root = rootSpan(otlp, 'generator.run');
	const up = checkUploads(ingest, {
		app: GEN_APP, tags: [['service', GEN_APP], ['trace_id', root.traceId], ['root_span_id', root.spanId]],
		trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g,
	});
	const n = up.uploads.length;
	assert.ok(n > 1, `more than one upload in a ${g.res.durationMs.toFixed(0)} ms run: ${n}`);
	assert.ok(n <= Math.ceil(g.res.durationMs / 300) + 1, `${n} uploads in ${g.res.durationMs.toFixed(0)} ms at 300 ms`);
	for (let i = 1; i < n; i++) {
		const a = up.uploads[i - 1];
		const b = up.uploads[i];
		assert.ok(Number(b.req.query.from) >= Number(a.req.query.from), `upload ${i}: from does not go backwards`);
		assert.ok(Number(b.req.query.until) >= Number(a.req.query.until), `upload ${i}: until does not go backwards`);
		assert.equal(b.prof.timeNanos, a.prof.timeNanos + a.prof.durationNanos,
			`upload ${i}: its pprof window starts where the previous one ended`);
		assert.ok(b.req.time >= a.req.time);
	}
	for (const u of up.uploads)
		assert.ok(u.total > 0, `upload ${u.req.index} has samples`);
	assert.ok(up.total > 0);
	// The whole run's profile holds exactly the samples of all uploads.
	const all = checkCpuProfile(decodePprof(fs.readFileSync(whole)),
		{ trace: root.traceId, span: root.spanId, spanName: 'generator.run' });
	assert.equal(all.total, up.total, 'sum of the uploads = the whole profile');
	assert.equal(profileWrittenCount(g.res, 'generator', whole), up.total);
});

// ---- 7. --profile-out -----------------------------------------------------

/** Generator with a profile file and no PYROSCOPE_ENABLE; an ingest server is set but must get nothing. */
async function profileToFile(t, { name, flag = true, env = {} }) {
	const { ingest, otlp } = await servers(t);
	const target = file(name);
	const g = await generate({
		PYROSCOPE_SERVER_ADDRESS: ingest.url,
		PYROSCOPE_TRACE_CORRELATION: 'true',
		OTEL_EXPORTER_OTLP_ENDPOINT: otlp.httpEndpoint,
		...(flag ? {} : { TRACEPROF_PROFILE_OUT: target }),
		...env,
	}, { records: BIG, args: flag ? ['--profile-out', target] : [] });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.ok(g.wrote, 'OUT was written');
	assert.deepEqual(unexpectedLines(g.res, 'generator'), [], 'no warnings');
	assert.ok(!/profiles of trace/.test(g.res.stderr), 'no Pyroscope link without PYROSCOPE_ENABLE');
	assert.equal(ingest.requests.length, 0, 'nothing uploaded without PYROSCOPE_ENABLE');
	const root = rootSpan(otlp, 'generator.run');
	const count = profileWrittenCount(g.res, 'generator', target);
	assert.ok(count > 0, 'samples were taken');
	assert.deepEqual(fs.readdirSync(dir).filter((n) => n.includes('.tmp-')), [], 'no temp file left');
	return { g, root, target, count, content: fs.readFileSync(target) };
}

for (const ext of ['pprof', 'pb.gz']) {
	test(`--profile-out FILE.${ext}: gzip pprof, decodable, labelled, the run's window`, async (t) => {
		const { g, root, content, count } = await profileToFile(t, { name: `p.${ext}` });
		const c = checkCpuProfile(decodePprof(content), { trace: root.traceId, span: root.spanId, spanName: 'generator.run' });
		assert.equal(c.total, count);
		assert.ok(c.names.has('gen_orders_record'), [...c.names].join(', '));
		assert.ok(c.prof.timeNanos >= BigInt(g.t0) * 1000000n && c.prof.durationNanos > 0n &&
			c.prof.timeNanos + c.prof.durationNanos <= BigInt(g.t1) * 1000000n,
			`time_nanos ${c.prof.timeNanos} / duration_nanos ${c.prof.durationNanos} cover the run ${g.t0}..${g.t1} ms`);
	});
}

test('--profile-out FILE.json: speedscope file format', async (t) => {
	const { content, count } = await profileToFile(t, { name: 'p.json' });
	const doc = JSON.parse(content.toString('utf8'));
	assert.equal(doc.$schema, 'https://www.speedscope.app/file-format-schema.json');
	const frames = doc.shared.frames;
	assert.ok(Array.isArray(frames) && frames.length > 0, 'shared.frames is not empty');
	for (const f of frames)
		assert.equal(typeof f.name, 'string');
	assert.ok(Array.isArray(doc.profiles) && doc.profiles.length >= 1);
	assert.ok(Number.isInteger(doc.activeProfileIndex ?? 0) && (doc.activeProfileIndex ?? 0) < doc.profiles.length);
	const p = doc.profiles[0];
	assert.equal(p.type, 'sampled');
	assert.equal(p.unit, 'nanoseconds');
	assert.ok(Array.isArray(p.samples) && p.samples.length > 0);
	assert.equal(p.samples.length, p.weights.length, 'samples and weights have the same length');
	for (const smp of p.samples) {
		assert.ok(smp.length > 0, 'a sample has frames');
		for (const i of smp)
			assert.ok(Number.isInteger(i) && i >= 0 && i < frames.length, `frame index ${i}`);
	}
	const sum = p.weights.reduce((a, b) => a + b, 0);
	assert.equal(sum, count * PERIOD_NS, 'weights add up to the samples taken');
	assert.equal(p.endValue - p.startValue, sum);
	// root first: main comes before the generator's own functions
	const stacks = p.samples.map((smp) => smp.map((i) => frames[i].name));
	const own = stacks.filter((s) => s.includes('gen_orders_record'));
	assert.ok(own.length > 0, 'gen_orders_record is sampled');
	for (const s of own)
		assert.ok(s.indexOf('main') >= 0 && s.indexOf('main') < s.indexOf('gen_orders_record'), s.join(';'));
});

test('--profile-out FILE.folded: "a;b;c N" lines', async (t) => {
	const { content, count } = await profileToFile(t, { name: 'p.folded' });
	checkFolded(content.toString('utf8'), count);
});

function checkFolded(text, count) {
	assert.ok(text.endsWith('\n'), 'ends with a newline');
	const lines = text.slice(0, -1).split('\n');
	let sum = 0;
	const stacks = new Set();
	for (const l of lines) {
		const m = /^(\S+) (\d+)$/.exec(l);
		assert.ok(m, `folded line ${JSON.stringify(l)}`);
		const frames = m[1].split(';');
		assert.ok(frames.every((f) => f.length > 0), `no empty frame in ${l}`);
		assert.ok(!stacks.has(m[1]), `stack ${m[1]} appears once`);
		stacks.add(m[1]);
		assert.ok(Number(m[2]) > 0);
		sum += Number(m[2]);
		if (frames.includes('gen_orders_record'))
			assert.ok(frames.indexOf('main') >= 0 && frames.indexOf('main') < frames.indexOf('gen_orders_record'), `root first: ${l}`);
	}
	assert.equal(sum, count, 'counts add up to the samples taken');
	assert.ok([...stacks].some((s) => s.split(';').includes('gen_orders_record')), 'gen_orders_record is sampled');
}

test('TRACEPROF_PROFILE_OUT works like --profile-out, and the flag wins over it', async (t) => {
	const { content, count } = await profileToFile(t, { name: 'env.folded', flag: false });
	checkFolded(content.toString('utf8'), count);

	const envTarget = file('env-loses.folded');
	const r = await profileToFile(t, { name: 'flag-wins.folded', env: { TRACEPROF_PROFILE_OUT: envTarget } });
	checkFolded(r.content.toString('utf8'), r.count);
	assert.ok(!fs.existsSync(envTarget), 'TRACEPROF_PROFILE_OUT is not written when --profile-out is given');
});

test('an unwritable --profile-out path: a warning, not a failure', async (t) => {
	const { ingest, otlp } = await servers(t);
	const target = path.join(dir, 'no-such-dir', 'p.pprof');
	const g = await generate(pyroEnv(ingest, otlp), { records: SOME, args: ['--profile-out', target] });
	assert.equal(g.res.code, 0, describe(g.res));
	assert.ok(g.wrote, 'OUT was written');
	const w = warnings(g.res, 'generator');
	assert.equal(w.length, 1, describe(g.res));
	assert.equal(w[0], `generator: warning: profile not written to ${target}: No such file or directory`);
	assert.ok(!fs.existsSync(path.dirname(target)));
	// Uploading is independent of the local file.
	const root = rootSpan(otlp, 'generator.run');
	checkUploads(ingest, { app: GEN_APP, tags: [['service', GEN_APP]], trace: root.traceId, span: root.spanId, spanName: 'generator.run', ...g });
});
