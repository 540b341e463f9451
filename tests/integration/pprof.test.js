'use strict';
// Profiles as others read them.  A small C program (fixtures/
// write_profile.c, compiled here against build/libtraceprof_common.a)
// symbolizes stacks of its own call chain and writes pprof, folded and
// speedscope files, or uploads the pprof to a capture server posing as
// Pyroscope.  The pprof is decoded by npm pprof-format (which accepts
// truncated input without complaint, so the structure is checked too) and,
// when Debian's golang-go is installed, by `go tool pprof`.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const zlib = require('node:zlib');
const { execFileSync } = require('node:child_process');
const { Profile } = require('pprof-format');
const { pprofTables, profileFields } = require('./lib/pprof');

const { ROOT } = require('./lib/paths');
const { run, describe } = require('./lib/run');
const { startIngest } = require('./lib/ingest');
const { makeTempDir, removeTempDir } = require('./lib/tmp');

const COMMON_LIB = path.join(ROOT, 'build', 'libtraceprof_common.a');
const FIXTURE_SRC = path.join(__dirname, 'fixtures', 'write_profile.c');
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const OTHER_SPAN_ID = 'b7ad6b7169203331';
const PERIOD = 4000000;

let dir;
let fixture;
let stripped;				// the same program without .symtab

/** The Makefile's LDLIBS (the libraries common/ needs), plus zlib. */
function linkLibraries() {
	const makefile = fs.readFileSync(path.join(ROOT, 'Makefile'), 'utf8');
	const libs = [];
	for (const m of makefile.matchAll(/^LDLIBS\s*[:+]?=\s*(.*)$/gm))
		libs.push(...m[1].trim().split(/\s+/).filter(Boolean));
	if (!libs.includes('-lz'))
		libs.push('-lz');
	return libs;
}

before(async () => {
	dir = makeTempDir('traceprof-pprof-');
	if (!fs.existsSync(COMMON_LIB))
		throw new Error(`${COMMON_LIB} is missing; build it first: make -C ${ROOT}`);
	fixture = path.join(dir, 'write_profile');
	// -O0 and frame pointers: the call chain the fixture records stays as written.
	const cc = await run(process.env.CC || 'cc', [
		'-std=c11', '-O0', '-g', '-fno-omit-frame-pointer', '-Wall', '-Wextra', '-Werror',
		'-D_GNU_SOURCE', '-I', path.join(ROOT, 'common'), '-I', path.join(ROOT, 'build', 'proto'),
		'-o', fixture, FIXTURE_SRC, COMMON_LIB, ...linkLibraries(),
	]);
	assert.equal(cc.code, 0, `cannot compile the fixture:\n${describe(cc)}`);
	stripped = path.join(dir, 'write_profile_stripped');
	const strip = await run(process.env.STRIP || 'strip', ['-o', stripped, fixture]);
	assert.equal(strip.code, 0, `cannot strip the fixture:\n${describe(strip)}`);
});

after(() => removeTempDir(dir));

/** Files written by the fixture into a fresh directory, and its summary. */
async function writeFiles(program = fixture) {
	const out = fs.mkdtempSync(path.join(dir, 'files-'));
	const res = await run(program, ['files', out]);
	assert.equal(res.code, 0, describe(res));
	return {
		summary: JSON.parse(res.stdout),
		pprof: fs.readFileSync(path.join(out, 'profile.pb.gz')),
		pprofPath: path.join(out, 'profile.pb.gz'),
		folded: fs.readFileSync(path.join(out, 'profile.folded'), 'utf8'),
		speedscope: fs.readFileSync(path.join(out, 'profile.speedscope.json'), 'utf8'),
	};
}

/**
 * Decode a gzip pprof with pprof-format and resolve it into plain objects,
 * checking on the way everything a truncated or inconsistent file would
 * break: ids non-zero and unique, references resolving, string indices in
 * range, one value per sample type.
 */
function decodePprof(gz) {
	assert.equal(gz[0], 0x1f, 'gzip magic');
	assert.equal(gz[1], 0x8b, 'gzip magic');
	const raw = zlib.gunzipSync(gz);
	const p = Profile.decode(raw);
	const { s, mappings, functions, locations } = pprofTables(p);

	const fn = (id) => {
		const f = functions.get(Number(id));
		assert.ok(f, `function ${id} is referenced but missing`);
		return { name: s(f.name), systemName: s(f.systemName), file: s(f.filename) };
	};
	const loc = (id) => {
		const l = locations.get(Number(id));
		assert.ok(l, `location ${id} is referenced but missing`);
		assert.equal(l.line.length, 1, `location ${id} has one line`);
		const mappingId = Number(l.mappingId);
		if (mappingId !== 0)
			assert.ok(mappings.has(mappingId), `mapping ${mappingId} is referenced but missing`);
		return { address: BigInt(l.address), mappingId, fn: fn(l.line[0].functionId) };
	};

	const samples = p.sample.map((smp) => {
		assert.equal(smp.value.length, p.sampleType.length, 'one value per sample type');
		const labels = {};
		for (const l of smp.label)
			labels[s(l.key)] = s(l.str);
		return {
			values: smp.value.map(Number),
			frames: smp.locationId.map((id) => loc(id)),
			labels,
		};
	});
	return {
		raw,
		...profileFields(p, s),
		samples,
		mappings: [...mappings.values()].map((m) => ({
			start: BigInt(m.memoryStart), limit: BigInt(m.memoryLimit),
			offset: BigInt(m.fileOffset), file: s(m.filename), buildId: s(m.buildId),
			hasFunctions: m.hasFunctions,
		})),
		functionCount: functions.size,
		locationCount: locations.size,
	};
}

/** What every pprof the fixture writes must contain. */
function checkFixtureProfile(prof, summary) {
	assert.deepEqual(prof.sampleTypes, ['samples/count', 'cpu/nanoseconds']);
	assert.equal(prof.periodType, 'cpu/nanoseconds');
	assert.equal(prof.period, PERIOD);
	assert.equal(prof.defaultSampleType, 'cpu');
	assert.equal(prof.timeNanos, BigInt(summary.start_ns));
	assert.equal(prof.durationNanos, BigInt(summary.end_ns) - BigInt(summary.start_ns));

	assert.equal(prof.samples.length, 3);
	const total = prof.samples.reduce((sum, x) => sum + x.values[0], 0);
	assert.equal(total, summary.total);
	for (const x of prof.samples)
		assert.equal(x.values[1], x.values[0] * PERIOD, 'cpu ns = count * period');

	const names = (x) => x.frames.map((f) => f.fn.name);
	const [a, b, c] = prof.samples;
	// leaf first: the interrupted function, then its callers
	assert.deepEqual(names(a), ['fixture_leaf', 'fixture_middle', 'fixture_root', 'stack']);
	assert.deepEqual(names(b), names(a));
	assert.deepEqual(names(c), ['fixture_other', 'fixture_root', 'stack']);
	assert.deepEqual([a.values[0], b.values[0], c.values[0]], [3, 1, 2]);
	assert.deepEqual(a.labels, { span_id: SPAN_ID, trace_id: TRACE_ID, span_name: 'SELECT' });
	assert.deepEqual(b.labels, { span_id: OTHER_SPAN_ID, trace_id: TRACE_ID, span_name: 'UPDATE' });
	assert.deepEqual(c.labels, {});
	for (const x of prof.samples) {
		assert.match(x.labels.span_id ?? '0'.repeat(16), /^[0-9a-f]{16}$/);
		assert.match(x.labels.trace_id ?? '0'.repeat(32), /^[0-9a-f]{32}$/);
	}
	// frames shared between stacks are the same location
	assert.equal(a.frames[3].address, c.frames[2].address);
	assert.equal(prof.locationCount, 6);
	assert.equal(prof.functionCount, 5);

	// every frame lies in the fixture's own text mapping
	assert.equal(prof.mappings.length, 1);
	const m = prof.mappings[0];
	assert.equal(path.basename(m.file), 'write_profile');
	assert.ok(m.hasFunctions);
	assert.ok(m.start < m.limit);
	for (const x of prof.samples) {
		for (const f of x.frames) {
			assert.equal(f.mappingId, 1);
			assert.ok(f.address >= m.start && f.address < m.limit, 'address inside its mapping');
			assert.equal(f.fn.systemName, f.fn.name);
			assert.equal(path.basename(f.fn.file), 'write_profile');
		}
	}
}

test('pprof decodes with pprof-format: sample types, labels, functions, mapping', async () => {
	const { summary, pprof } = await writeFiles();
	const prof = decodePprof(pprof);
	checkFixtureProfile(prof, summary);
	// Re-encoding what was decoded gives the same bytes: nothing was lost.
	assert.equal(Buffer.compare(Buffer.from(Profile.decode(prof.raw).encode()), prof.raw), 0,
		'pprof-format re-encodes the decoded profile to the same bytes');
});

test('folded stacks: root first, one line per stack, labels merged, sorted', async () => {
	const { folded } = await writeFiles();
	assert.equal(folded,
		'stack;fixture_root;fixture_middle;fixture_leaf 4\n' +
		'stack;fixture_root;fixture_other 2\n');
});

test('speedscope file: valid JSON following the file-format schema', async () => {
	const { speedscope } = await writeFiles();
	const doc = JSON.parse(speedscope);
	assert.equal(doc.$schema, 'https://www.speedscope.app/file-format-schema.json');
	assert.equal(doc.name, 'fixture "profile"');
	assert.equal(doc.activeProfileIndex, 0);
	const frames = doc.shared.frames;
	assert.ok(Array.isArray(frames));
	for (const f of frames) {
		assert.equal(typeof f.name, 'string');
		assert.equal(path.basename(f.file), 'write_profile');
	}
	assert.equal(doc.profiles.length, 1);
	const p = doc.profiles[0];
	assert.equal(p.type, 'sampled');
	assert.equal(p.unit, 'nanoseconds');
	assert.equal(p.startValue, 0);
	assert.equal(p.samples.length, p.weights.length);
	assert.equal(p.endValue, p.weights.reduce((x, y) => x + y, 0));
	for (const smp of p.samples)
		for (const i of smp)
			assert.ok(Number.isInteger(i) && i >= 0 && i < frames.length, `frame index ${i}`);
	const stacks = p.samples.map((smp, i) => `${smp.map((k) => frames[k].name).join(';')} ${p.weights[i]}`);
	assert.deepEqual(stacks, [
		`stack;fixture_root;fixture_middle;fixture_leaf ${4 * PERIOD}`,
		`stack;fixture_root;fixture_other ${2 * PERIOD}`,
	]);
});

test('a stripped program: static functions named module+0xSTART from the unwind table, the same in every process', async () => {
	const one = await writeFiles(stripped);
	const two = await writeFiles(stripped);
	const prof = decodePprof(one.pprof);
	assert.equal(prof.samples.length, 3);
	assert.equal(prof.mappings.length, 1);
	const m = prof.mappings[0];
	assert.equal(path.basename(m.file), 'write_profile_stripped');
	assert.equal(m.hasFunctions, true, 'the unwind table names the functions');
	for (const x of prof.samples) {
		for (const f of x.frames) {
			// the link-time start of the enclosing function (.eh_frame_hdr),
			// at or below the frame's own link-time address
			const match = /^write_profile_stripped\+0x([0-9a-f]+)$/.exec(f.fn.name);
			assert.ok(match, `frame name ${f.fn.name}`);
			assert.ok(BigInt('0x' + match[1]) > 0n);
		}
	}
	// frames of one function share its name, whatever the address inside it
	const names = new Set(prof.samples.flatMap((x) => x.frames.map((f) => f.fn.name)));
	assert.ok(names.size < prof.samples.reduce((n, x) => n + x.frames.length, 0));
	assert.deepEqual(prof.samples.map((x) => x.frames.length), [4, 4, 3]);
	// ASLR moves the addresses, not the names: both runs fold the same
	assert.equal(one.folded, two.folded);
	assert.equal(one.folded.split('\n').filter(Boolean).length, 2);
});

let goPath = null;
try {
	goPath = execFileSync('sh', ['-c', 'command -v go'], { encoding: 'utf8' }).trim() || null;
} catch {
	goPath = null;
}
if (goPath) {
	test('go tool pprof reads the profile (-raw)', async () => {
		const { pprofPath } = await writeFiles();
		const res = await run(goPath, ['tool', 'pprof', '-raw', pprofPath], {
			env: { PPROF_TMPDIR: dir, HOME: dir, GOFLAGS: '' },
		});
		assert.equal(res.code, 0, describe(res));
		const out = res.stdout;
		assert.match(out, /^PeriodType: cpu nanoseconds$/m);
		assert.match(out, /^Period: 4000000$/m);
		assert.match(out, /^samples\/count cpu\/nanoseconds\[dflt\]$/m);
		assert.match(out, /^\s+3\s+12000000: \d+ \d+ \d+ \d+ $/m);
		assert.match(out, /^\s+2\s+8000000: \d+ \d+ \d+ $/m);
		assert.ok(out.includes(`span_id:[${SPAN_ID}] span_name:[SELECT] trace_id:[${TRACE_ID}]`), out);
		assert.ok(out.includes(`span_id:[${OTHER_SPAN_ID}] span_name:[UPDATE] trace_id:[${TRACE_ID}]`), out);
		for (const name of ['fixture_leaf', 'fixture_middle', 'fixture_root', 'fixture_other', 'stack'])
			assert.match(out, new RegExp(`M=1 ${name} \\S*write_profile:0`), `${name} in ${out}`);
		assert.match(out, /^Mappings\n1: 0x[0-9a-f]+\/0x[0-9a-f]+\/0x[0-9a-f]+ \S*write_profile .*\[FN\]$/m);
	});
} else {
	// Optional cross-check; pprof-format above is the mandatory decoder.
	console.log('pprof.test.js: `go` is not installed (Debian golang-go): ' +
		'the go tool pprof cross-check is not registered');
}

/** The Pyroscope capture (lib/ingest.js), answering every request with behaviour. */
async function captureServer(t, behaviour = {}) {
	const srv = await startIngest();
	t.after(() => srv.close());
	return srv.setDefault(behaviour);
}

const INGEST_ENV = {
	PYROSCOPE_APPLICATION_NAME: 'traceprof.generator',
	PYROSCOPE_TAGS: 'env=dev,service=generator,version=1.0.0',
	PYROSCOPE_TRACE_CORRELATION: 'true',
	PYROSCOPE_TENANT_ID: 'team-a',
	PYROSCOPE_BASIC_AUTH_USER: '12345',
	PYROSCOPE_BASIC_AUTH_PASSWORD: 'glc_s3cret',
};

test('ingest: POST /ingest with series name, window, tenant, basic auth and a pprof body', async (t) => {
	const srv = await captureServer(t);
	const res = await run(fixture, ['ingest'], { env: { ...INGEST_ENV, PYROSCOPE_SERVER_ADDRESS: srv.url + '/' } });
	assert.equal(res.code, 0, describe(res));
	assert.equal(res.stderr, '', 'no warnings');
	const summary = JSON.parse(res.stdout);
	assert.equal(srv.requests.length, 1);
	const r = srv.requests[0];
	assert.equal(r.method, 'POST');
	const u = new URL(r.url, srv.url);
	assert.equal(u.pathname, '/ingest');
	assert.deepEqual([...u.searchParams.keys()].sort(), ['format', 'from', 'name', 'until']);
	assert.equal(u.searchParams.get('name'),
		'traceprof.generator{env=dev,service=generator,version=1.0.0,' +
		`trace_id=${TRACE_ID},root_span_id=${SPAN_ID}}`);
	assert.equal(u.searchParams.get('format'), 'pprof');
	// Unix seconds (10 digits): from rounded down, until rounded up
	const from = u.searchParams.get('from');
	const until = u.searchParams.get('until');
	assert.match(from, /^\d{10}$/);
	assert.match(until, /^\d{10}$/);
	assert.equal(BigInt(from), BigInt(summary.start_ns) / 1000000000n);
	assert.equal(BigInt(until), (BigInt(summary.end_ns) + 999999999n) / 1000000000n);
	// no raw '{', '}' or ',' in the request line: the name is percent-encoded
	assert.match(r.url, /name=traceprof\.generator%7Benv%3Ddev%2C/);
	assert.equal(r.headers['content-type'], 'application/octet-stream');
	assert.equal(r.headers['x-scope-orgid'], 'team-a');
	assert.equal(r.headers.authorization, 'Basic ' + Buffer.from('12345:glc_s3cret').toString('base64'));
	assert.equal(Number(r.headers['content-length']), r.body.length);
	checkFixtureProfile(decodePprof(r.body), summary);
});

test('ingest: no tenant and no credentials means no such headers', async (t) => {
	const srv = await captureServer(t);
	const res = await run(fixture, ['ingest'], { env: { PYROSCOPE_SERVER_ADDRESS: srv.url } });
	assert.equal(res.code, 0, describe(res));
	const r = srv.requests[0];
	assert.equal(r.headers['x-scope-orgid'], undefined);
	assert.equal(r.headers.authorization, undefined);
	assert.equal(new URL(r.url, srv.url).searchParams.get('name'), 'traceprof.fixture{}');
});

test('ingest: a rejection is reported with its status and body, without credentials', async (t) => {
	const srv = await captureServer(t, { status: 400, body: 'invalid profile:\nbad sample\n' });
	const addr = srv.url.replace('http://', 'http://someone:urlpass@');
	const res = await run(fixture, ['ingest'], { env: { ...INGEST_ENV, PYROSCOPE_SERVER_ADDRESS: addr } });
	assert.equal(res.code, 1, describe(res));
	assert.match(res.stderr, /ingest failed: http:\/\/\*\*\*@127\.0\.0\.1:\d+\/ingest: HTTP status 400: invalid profile: bad sample\n$/);
	for (const secret of ['urlpass', 'glc_s3cret', '12345', 'name='])
		assert.ok(!res.stderr.includes(secret), `stderr leaks ${secret}: ${res.stderr}`);
	assert.equal(res.stderr.trim().split('\n').length, 1, 'one line');
});

test('ingest: a dead server and a hanging server fail within the timeout', async (t) => {
	// a port that was just free: connection refused
	const srv = await captureServer(t);
	const closed = await new Promise((resolve) => {
		const s = http.createServer();
		s.listen(0, '127.0.0.1', () => {
			const port = s.address().port;
			s.close(() => resolve(port));
		});
	});
	let res = await run(fixture, ['ingest'], { env: { PYROSCOPE_SERVER_ADDRESS: `http://127.0.0.1:${closed}` } });
	assert.equal(res.code, 1, describe(res));
	assert.match(res.stderr, new RegExp(`ingest failed: http://127\\.0\\.0\\.1:${closed}/ingest: .+`));

	const hanging = await captureServer(t, { hang: true });
	res = await run(fixture, ['ingest'], {
		env: { PYROSCOPE_SERVER_ADDRESS: hanging.url, PYROSCOPE_UPLOAD_TIMEOUT: '500' },
		timeout: 10000,
	});
	assert.equal(res.code, 1, describe(res));
	assert.ok(res.durationMs < 5000, `took ${res.durationMs} ms`);
	assert.match(res.stderr, /ingest failed: .*\/ingest: .*(timed out|Timeout)/i);
	assert.equal(hanging.requests.length, 1);
	assert.equal(srv.requests.length, 0);
});
