'use strict';
// generator N OUT [--seed S] [--format json|ndjson]: the output file is a
// valid, deterministic document of N records (docs/record-format.md), and
// is either complete or absent.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const { GENERATOR, requireExecutable } = require('./lib/paths');
const { startReceiver } = require('./lib/receiver');
const { startIngest } = require('./lib/ingest');
const { run, describe, closeOutputAfterFirstLine, closeStdoutAfterFirstBytes } = require('./lib/run');
const { makeTempDir, removeTempDir, lookupUser } = require('./lib/tmp');
const { checkRecord, splitRecords, KEYS } = require('./lib/records');

const N = 50000;
let dir;

before(() => {
	requireExecutable(GENERATOR);
	dir = makeTempDir('traceprof-gen-');
});
after(() => removeTempDir(dir));

function generate(args, options = {}) {
	return run(GENERATOR, args, { timeout: 60000, ...options });
}

function sha256(file) {
	return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Files in d other than the expected ones: leftovers such as temp files. */
function leftovers(d, expected) {
	return fs.readdirSync(d).filter((f) => !expected.includes(f));
}

/** Validate a whole generated document; returns the parsed records. */
function validateDocument(text, format, n) {
	const texts = splitRecords(text, format);
	assert.equal(texts.length, n, `${format}: record count`);
	const ids = new Set();
	const bad = [];
	const records = texts.map((t, i) => {
		const r = checkRecord(t);
		if (r.problems.length && bad.length < 5)
			bad.push(`record ${i + 1}: ${r.problems.join('; ')}: ${t.slice(0, 200)}`);
		if (r.raw)
			ids.add(r.raw.id);
		return r;
	});
	assert.deepEqual(bad, [], `${format}: invalid records`);
	for (const r of records)
		assert.deepEqual(Object.keys(r.value).sort(), KEYS.slice().sort());
	assert.equal(ids.size, n, 'ids are unique');
	// --help documents "ids run 1..N".
	const expectedIds = new Set(Array.from({ length: n }, (_, i) => String(i + 1)));
	assert.deepEqual(ids, expectedIds, 'ids run 1..N');
	return records;
}

test('generator 50000 out.json writes a valid JSON array of 50000 records', async () => {
	const out = path.join(dir, 'out.json');
	const res = await generate([String(N), out]);
	assert.equal(res.code, 0, describe(res));
	assert.match(res.stderr, /trace_id=[0-9a-f]{32}\b/, 'stderr names the trace id');
	assert.doesNotMatch(res.stderr, /trace_id=0{32}/, 'trace id is not all zero');
	assert.deepEqual(leftovers(dir, ['out.json']), [], 'no temporary files left behind');

	const bytes = fs.readFileSync(out);
	// Valid UTF-8 (a fatal decoder throws on any bad sequence), no BOM.
	const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
	assert.notEqual(text.charCodeAt(0), 0xfeff, 'no byte-order mark');

	const parsed = JSON.parse(text);
	assert.ok(Array.isArray(parsed), 'top level is an array');
	assert.equal(parsed.length, N);
	const records = validateDocument(text, 'json', N);

	// The data exercises the awkward parts of the format.
	const strings = records.flatMap((r) => [r.value.customer_name, ...r.value.tags]);
	assert.ok(strings.some((s) => /[^\x00-\x7f]/.test(s)), 'some strings are non-ASCII');
	assert.ok(records.some((r) => /\\["\\nrtbfu/]/.test(r.raw.customer_name) || /\\["\\nrtbfu/]/.test(r.raw.attributes)),
		'some strings need JSON escapes');
	assert.ok(records.some((r) => JSON.stringify(r.value.attributes).includes('null')),
		'null appears inside attributes');
});

test('--format ndjson writes one valid record per line', async () => {
	const out = path.join(dir, 'out.ndjson');
	const res = await generate([String(N), out, '--format', 'ndjson']);
	assert.equal(res.code, 0, describe(res));
	const text = new TextDecoder('utf-8', { fatal: true }).decode(fs.readFileSync(out));
	validateDocument(text, 'ndjson', N);
	for (const line of text.slice(0, -1).split('\n').slice(0, 1000))
		assert.equal(typeof JSON.parse(line), 'object');
	assert.deepEqual(leftovers(dir, ['out.json', 'out.ndjson']), []);
});

test('N = 0 gives "[]\\n" (json) and an empty file (ndjson)', async () => {
	const j = path.join(dir, 'zero.json');
	const nd = path.join(dir, 'zero.ndjson');
	let res = await generate(['0', j]);
	assert.equal(res.code, 0, describe(res));
	assert.equal(fs.readFileSync(j, 'utf8'), '[]\n');
	res = await generate(['0', nd, '--format=ndjson']);
	assert.equal(res.code, 0, describe(res));
	assert.equal(fs.readFileSync(nd, 'utf8'), '');
	fs.rmSync(j);
	fs.rmSync(nd);
});

test('same seed gives identical bytes, a different seed differs', async () => {
	const a = path.join(dir, 'seed-a.json');
	const b = path.join(dir, 'seed-b.json');
	const c = path.join(dir, 'seed-c.json');
	const d = path.join(dir, 'seed-default.json');
	const e = path.join(dir, 'seed-1.json');
	const results = await Promise.all([
		generate(['20000', a, '--seed', '42']),
		generate(['20000', b, '--seed=42']),
		generate(['20000', c, '--seed', '43']),
		generate(['20000', d]),
		generate(['20000', e, '--seed', '1']),
	]);
	for (const res of results)
		assert.equal(res.code, 0, describe(res));
	assert.equal(sha256(a), sha256(b), 'same seed, same bytes');
	assert.notEqual(sha256(a), sha256(c), 'different seed, different bytes');
	assert.equal(sha256(d), sha256(e), 'the default seed is 1 (as --help says)');
	// ndjson is deterministic too.
	const n1 = path.join(dir, 'seed-n1.ndjson');
	const n2 = path.join(dir, 'seed-n2.ndjson');
	for (const res of await Promise.all([
		generate(['5000', n1, '--seed', '7', '--format', 'ndjson']),
		generate(['5000', n2, '--format', 'ndjson', '--seed', '7']),
	]))
		assert.equal(res.code, 0, describe(res));
	assert.equal(sha256(n1), sha256(n2));
	for (const f of [a, b, c, d, e, n1, n2])
		fs.rmSync(f);
});

test('usage errors exit 2 and create no file', async (t) => {
	const out = path.join(dir, 'usage.json');
	const cases = [
		[],
		['5'],
		['abc', out],
		['-5', out],
		['1.5', out],
		['1000000001', out],
		['5', ''],
		['5', out, 'extra'],
		['5', out, '--bogus'],
		['5', out, '--format', 'xml'],
		['5', out, '--format'],
		['5', out, '--seed', 'x'],
		['5', out, '--seed', '-1'],
		['5', out, '--seed'],
	];
	for (const args of cases) {
		await t.test(JSON.stringify(args), async () => {
			const res = await generate(args);
			assert.equal(res.code, 2, describe(res));
			assert.match(res.stderr, /usage/i, 'stderr shows the usage');
			assert.ok(res.stderr.split('\n')[0].length > 0);
			assert.equal(res.stdout, '', 'nothing on stdout');
			assert.equal(fs.existsSync(out), false, 'no output file');
		});
	}
	const help = await generate(['--help']);
	assert.equal(help.code, 0, describe(help));
	assert.match(help.stdout, /usage: generator N OUT/);
});

test('--profile-out or TRACEPROF_PROFILE_OUT naming OUT (as is, through a link, a new OUT by another path): a usage error, OUT untouched', async (t) => {
	const sub = makeTempDir('traceprof-gen-prof-same-');
	t.after(() => removeTempDir(sub));
	const out = path.join(sub, 'same.json');
	fs.writeFileSync(out, 'keep\n');
	fs.symlinkSync('same.json', path.join(sub, 'link.json'));
	fs.mkdirSync(path.join(sub, 'd'));
	// A dangling link to the OUT about to be written: the profile would land on it.
	fs.symlinkSync('d/new.json', path.join(sub, 'dangling.json'));
	const cases = [
		[['1000', out, '--profile-out', out], {}, '--profile-out', out],
		[['1000', out, '--profile-out', path.join(sub, 'link.json')], {}, '--profile-out', out],
		[['1000', out], { TRACEPROF_PROFILE_OUT: path.join(sub, 'd', '..', 'same.json') }, 'TRACEPROF_PROFILE_OUT', out],
		[['1000', 'new.json', '--profile-out', path.join(sub, 'new.json')], {}, '--profile-out', 'new.json'],
		[['1000', path.join(sub, 'd', 'new.json'), '--profile-out', path.join(sub, 'dangling.json')], {}, '--profile-out',
			path.join(sub, 'd', 'new.json')],
	];
	for (const [args, env, source, shownOut] of cases) {
		const res = await generate(args, { env, cwd: sub });
		assert.equal(res.code, 2, describe(res));
		assert.match(res.stderr, new RegExp(`^generator: error: ${source} ".*" is the same file as OUT ` +
			`"${shownOut.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`), describe(res));
		assert.equal(fs.readFileSync(out, 'utf8'), 'keep\n', `OUT is untouched\n${describe(res)}`);
	}
	assert.deepEqual(fs.readdirSync(sub).sort(), ['d', 'dangling.json', 'link.json', 'same.json'], 'no new file');
	assert.deepEqual(fs.readdirSync(path.join(sub, 'd')), []);
	// Another name in the same place is fine; so is /dev/null for both.
	let res = await generate(['1000', out, '--profile-out', path.join(sub, 'same.json.svg')]);
	assert.equal(res.code, 0, describe(res));
	res = await generate(['1000', '/dev/null', '--profile-out', '/dev/null']);
	assert.equal(res.code, 0, describe(res));
});

test('an unwritable destination exits 1 and leaves no file behind', async (t) => {
	const sub = makeTempDir('traceprof-gen-io-');
	t.after(() => removeTempDir(sub));

	await t.test('missing directory', async () => {
		const res = await generate(['100', path.join(sub, 'no', 'such', 'dir', 'out.json')]);
		assert.equal(res.code, 1, describe(res));
		assert.match(res.stderr, /no\/such\/dir/, 'the message names the path');
		assert.deepEqual(fs.readdirSync(sub), []);
	});

	await t.test('parent is a regular file', async () => {
		fs.writeFileSync(path.join(sub, 'plainfile'), 'x');
		const res = await generate(['100', path.join(sub, 'plainfile', 'out.json')]);
		assert.equal(res.code, 1, describe(res));
		assert.deepEqual(fs.readdirSync(sub), ['plainfile']);
		fs.rmSync(path.join(sub, 'plainfile'));
	});

	await t.test('read-only directory', async () => {
		const ro = path.join(sub, 'ro');
		fs.mkdirSync(ro, { mode: 0o555 });
		fs.chmodSync(ro, 0o555);
		// Root ignores permissions: run as `nobody` then.
		const as = process.getuid() === 0 ? lookupUser('nobody') : {};
		const res = await generate(['100', path.join(ro, 'out.json')], as);
		assert.equal(res.code, 1, describe(res));
		assert.match(res.stderr, /ro\/|ro\b/);
		assert.deepEqual(fs.readdirSync(ro), [], 'nothing created in the directory');
	});
});

test('a write-protected OUT (chmod 444), or a link to one, is refused (exit 1, Permission denied) and left as it was', async (t) => {
	// Root may write anything: run as postgres then (the suite needs that user
	// as root; lookupUser throws, failing the test, when it is missing).
	const root = process.getuid() === 0;
	const as = root ? lookupUser('postgres') : {};
	const owner = root ? as : { uid: process.getuid(), gid: process.getgid() };
	const sub = makeTempDir('traceprof-gen-readonly-');
	t.after(() => removeTempDir(sub));
	const out = path.join(sub, 'out.json');
	const link = path.join(sub, 'link.json');
	fs.writeFileSync(out, 'keep\n');
	fs.symlinkSync('out.json', link);
	// The directory is the user's: the rename that replaced OUT was allowed.
	for (const p of [sub, out])
		fs.chownSync(p, owner.uid, owner.gid);
	fs.lchownSync(link, owner.uid, owner.gid);
	fs.chmodSync(out, 0o444);
	for (const target of [out, link]) {
		const res = await generate(['5', target], as);
		assert.equal(res.code, 1, describe(res));
		assert.match(res.stderr, new RegExp(`generator: error: cannot write "${target.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}": ` +
			'Permission denied\\n'), describe(res));
		assert.equal(fs.readFileSync(out, 'utf8'), 'keep\n', `OUT is untouched\n${describe(res)}`);
		assert.equal(fs.statSync(out).mode & 0o777, 0o444);
		assert.deepEqual(fs.readdirSync(sub).sort(), ['link.json', 'out.json'], 'no temporary file left');
	}
	// Writable again: replaced as usual.
	fs.chmodSync(out, 0o644);
	const res = await generate(['5', link], as);
	assert.equal(res.code, 0, describe(res));
	assert.notEqual(fs.readFileSync(out, 'utf8'), 'keep\n');
});

test('OUT as a link, a FIFO, /dev/fd/1, a directory, a long name', async (t) => {
	const sub = makeTempDir('traceprof-gen-kinds-');
	t.after(() => removeTempDir(sub));
	const reference = path.join(sub, 'reference.json');
	let res = await generate(['100', reference]);
	assert.equal(res.code, 0, describe(res));
	const want = fs.readFileSync(reference, 'utf8');

	await t.test('a link to a file: the file is replaced, keeps its mode, the link stays', async () => {
		const target = path.join(sub, 'target.json');
		fs.writeFileSync(target, 'old');
		fs.chmodSync(target, 0o600);
		fs.symlinkSync('target.json', path.join(sub, 'link.json'));
		res = await generate(['100', path.join(sub, 'link.json')]);
		assert.equal(res.code, 0, describe(res));
		assert.ok(fs.lstatSync(path.join(sub, 'link.json')).isSymbolicLink());
		assert.equal(fs.readFileSync(target, 'utf8'), want);
		assert.equal(fs.statSync(target).mode & 0o777, 0o600);
		assert.deepEqual(leftovers(sub, ['reference.json', 'target.json', 'link.json']), []);
	});

	await t.test('a dangling link is refused and left alone', async () => {
		fs.symlinkSync('nowhere.json', path.join(sub, 'dangling.json'));
		res = await generate(['100', path.join(sub, 'dangling.json')]);
		assert.equal(res.code, 1, describe(res));
		assert.match(res.stderr, /dangling\.json": it is a symbolic link to "nowhere\.json", which does not exist/);
		assert.ok(fs.lstatSync(path.join(sub, 'dangling.json')).isSymbolicLink());
		assert.equal(fs.existsSync(path.join(sub, 'nowhere.json')), false);
	});

	await t.test('a FIFO gets the data and stays a FIFO', async () => {
		const fifo = path.join(sub, 'pipe');
		assert.equal((await run('mkfifo', [fifo])).code, 0);
		const reader = run('cat', [fifo]);
		res = await generate(['100', fifo]);
		assert.equal(res.code, 0, describe(res));
		const got = await reader;
		assert.equal(got.stdout, want);
		assert.ok(fs.lstatSync(fifo).isFIFO());
		fs.rmSync(fifo);
	});

	// /dev/fd/1 rather than /dev/stdout: a regression then fails to create
	// its temporary file in /proc instead of replacing /dev/stdout.
	await t.test('/dev/fd/1 (a socket here)', async () => {
		res = await generate(['100', '/dev/fd/1']);
		assert.equal(res.code, 0, describe(res));
		assert.equal(res.stdout, want);
	});

	await t.test('a directory is refused with what was expected', async () => {
		fs.mkdirSync(path.join(sub, 'adir'));
		res = await generate(['100', path.join(sub, 'adir')]);
		assert.equal(res.code, 1, describe(res));
		assert.match(res.stderr, /adir": it is a directory; expected a regular file, a FIFO or a character device/);
		assert.deepEqual(fs.readdirSync(path.join(sub, 'adir')), []);
	});

	await t.test('a 255-byte name', async () => {
		const name = 'n'.repeat(250) + '.json';
		res = await generate(['100', path.join(sub, name)]);
		assert.equal(res.code, 0, describe(res));
		assert.equal(fs.readFileSync(path.join(sub, name), 'utf8'), want);
	});
});

// ulimit -f makes write() fail with EFBIG part-way (SIGXFSZ ignored, so the
// generator sees the error): a real I/O failure in the middle of the file.
// The generator ignores SIGXFSZ itself: past the limit a write fails with EFBIG.
function generateWithFileSizeLimit(args) {
	return run('/bin/sh', ['-c', 'ulimit -f 200; exec "$@"', 'sh', GENERATOR, ...args],
		{ timeout: 60000 });
}

test('a write error mid-file exits 1, removes the temp file, leaves no OUT', async (t) => {
	const sub = makeTempDir('traceprof-gen-full-');
	t.after(() => removeTempDir(sub));
	const out = path.join(sub, 'out.json');
	const res = await generateWithFileSizeLimit([String(N), out]);
	assert.equal(res.code, 1, describe(res));
	assert.match(res.stderr, /out\.json/, "the message names the output file");
	assert.deepEqual(fs.readdirSync(sub), [], 'no OUT and no temporary file');
});

test('an existing OUT is untouched when generation fails', async (t) => {
	const sub = makeTempDir('traceprof-gen-keep-');
	t.after(() => removeTempDir(sub));
	const out = path.join(sub, 'out.json');
	const original = 'previous content\n';
	fs.writeFileSync(out, original);
	const before = fs.statSync(out);

	let res = await generateWithFileSizeLimit([String(N), out]);
	assert.equal(res.code, 1, describe(res));
	assert.equal(fs.readFileSync(out, 'utf8'), original);
	assert.equal(fs.statSync(out).ino, before.ino, 'same inode: never replaced');
	assert.deepEqual(fs.readdirSync(sub), ['out.json'], 'no temporary file left');

	res = await generate(['abc', out]);
	assert.equal(res.code, 2, describe(res));
	assert.equal(fs.readFileSync(out, 'utf8'), original);

	// Killed while writing: the temp file goes, OUT stays as it was.
	await killWhileWriting(sub, out, 'SIGTERM');
	assert.equal(fs.readFileSync(out, 'utf8'), original);
});

/** Start a long run into out, signal it once its temporary file has data; none may be left. */
async function killWhileWriting(sub, out, signal) {
	let child;
	const name = path.basename(out);
	const pending = generate(['200000000', out], { onSpawn: (c) => { child = c; }, timeout: 30000 });
	const deadline = Date.now() + 10000;
	let sawTemp = false;
	while (Date.now() < deadline && child.exitCode === null) {
		const temps = fs.readdirSync(sub).filter((f) => f !== name);
		if (temps.length && fs.statSync(path.join(sub, temps[0]), { throwIfNoEntry: false })?.size > 0) {
			sawTemp = true;
			break;
		}
		await new Promise((r) => setTimeout(r, 5));
	}
	assert.ok(sawTemp, 'a temporary file appeared while writing');
	child.kill(signal);
	const res = await pending;
	assert.equal(res.timedOut, false, describe(res));
	assert.ok(res.signal === signal || (res.code !== 0 && res.code !== null), describe(res));
	assert.deepEqual(fs.readdirSync(sub).filter((f) => f !== name), [], `${signal}: the temporary file was removed`);
}

// Not only the usual interrupts: any signal that would end the run.
test('SIGQUIT, SIGPIPE, SIGUSR1, SIGALRM, SIGPROF, SIGVTALRM, SIGXCPU while writing: the temporary file is removed too', async (t) => {
	const sub = makeTempDir('traceprof-gen-signals-');
	t.after(() => removeTempDir(sub));
	for (const signal of ['SIGQUIT', 'SIGPIPE', 'SIGUSR1', 'SIGALRM', 'SIGPROF', 'SIGVTALRM', 'SIGXCPU'])
		await killWhileWriting(sub, path.join(sub, 'out.json'), signal);
	assert.deepEqual(fs.readdirSync(sub), [], 'no OUT either');
});

test('the reader of stderr gone once the run started (2>&1 | head -1): exit 0, OUT and --profile-out written', async (t) => {
	const sub = makeTempDir('traceprof-gen-stderr-gone-');
	t.after(() => removeTempDir(sub));
	const out = path.join(sub, 'out.ndjson');
	const prof = path.join(sub, 'run.svg');
	const res = await generate(['300000', out, '--format', 'ndjson', '--profile-out', prof],
		{ onSpawn: closeOutputAfterFirstLine });
	assert.equal(res.signal, null, `not killed by SIGPIPE\n${describe(res)}`);
	assert.equal(res.code, 0, describe(res));
	assert.match(res.stderr, /^generator: trace_id=[0-9a-f]{32}\n/, describe(res));
	assert.equal(fs.readFileSync(out, 'utf8').split('\n').length, 300001, 'OUT is complete');
	assert.match(fs.readFileSync(prof, 'utf8'), /^<\?xml|^<svg/, 'the profile was written');
	assert.deepEqual(leftovers(sub, ['out.ndjson', 'run.svg']), []);
});

test('OUT /dev/stdout whose reader goes away (| head -c 1): a failed write, exit 1, naming OUT; --profile-out still written', async (t) => {
	const sub = makeTempDir('traceprof-gen-stdout-gone-');
	t.after(() => removeTempDir(sub));
	const prof = path.join(sub, 'run.folded');
	const res = await generate(['2000000', '/dev/stdout', '--profile-out', prof],
		{ onSpawn: closeStdoutAfterFirstBytes });
	assert.equal(res.signal, null, `not killed by SIGPIPE\n${describe(res)}`);
	assert.equal(res.code, 1, describe(res));
	assert.match(res.stderr, /generator: error: cannot write "\/dev\/stdout" \(after \d+ bytes\): Broken pipe\n/, describe(res));
	assert.ok(fs.existsSync(prof), `the profile was written\n${describe(res)}`);
});

test('OTLP/HTTP (the default protocol) to a gRPC-only port: the warning says the endpoint seems to speak gRPC', async (t) => {
	// An HTTP/2-only (h2c) server, as a collector's 4317 is: its preface
	// reads as HTTP/0.9 to an HTTP/1.1 client.
	const http2 = require('node:http2');
	const server = http2.createServer();
	server.on('stream', (stream) => {
		stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' });
		stream.end();
	});
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	t.after(() => server.close());
	const endpoint = `http://127.0.0.1:${server.address().port}`;
	const res = await generate(['5', '/dev/null'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } });
	assert.equal(res.code, 0, describe(res));
	assert.match(res.stderr, /generator: warning: traces not exported: .*\/v1\/traces: .*it seems to speak gRPC; set OTEL_EXPORTER_OTLP_PROTOCOL=grpc\)\n/,
		describe(res));
	// Told the protocol, the same server gets the spans: no such hint.
	const grpc = await generate(['5', '/dev/null'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' } });
	assert.equal(grpc.code, 0, describe(grpc));
	assert.doesNotMatch(grpc.stderr, /speak gRPC|not exported/, describe(grpc));
});

test('OTLP/gRPC to an HTTP/1.1-only port: the warning says no HTTP/2 came back and names the OTLP/HTTP protocol setting', async (t) => {
	// A collector's 4318 is HTTP/1.1: it closes the connection on the
	// HTTP/2 preface, and "Empty reply from server" alone said nothing of why.
	const http = require('node:http');
	const server = http.createServer((req, res) => res.end());
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	t.after(() => server.close());
	const env = {
		OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${server.address().port}`,
		OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TIMEOUT: '2000',
	};
	const res = await generate(['5', '/dev/null'], { env });
	assert.equal(res.code, 0, describe(res));
	assert.match(res.stderr, /generator: warning: traces not exported: .*TraceService\/Export: .*\(no HTTP\/2 answer: if the endpoint serves OTLP\/HTTP, as a collector's port 4318 does, set OTEL_EXPORTER_OTLP_PROTOCOL=http\/protobuf\)/,
		describe(res));
});

test('--profile-out that cannot be written whole: a warning with the real cause, no file, no temp file, exit 0', async (t) => {
	const sub = makeTempDir('traceprof-gen-prof-full-');
	t.after(() => removeTempDir(sub));
	const prof = path.join(sub, 'run.svg');
	// A flame graph of a few hundred thousand records is well over 2 KiB:
	// write() takes the first 2 KiB, then fails with EFBIG.  OUT is
	// /dev/null, which the size limit does not apply to.
	const res = await run('/bin/sh', ['-c', 'ulimit -f 2; exec "$@"', 'sh', GENERATOR,
		'300000', '/dev/null', '--profile-out', prof], { timeout: 60000 });
	assert.equal(res.code, 0, describe(res));
	assert.match(res.stderr, new RegExp(`generator: warning: profile not written to ${prof.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ` +
		'File too large\\n'), `the warning says why (EFBIG), not a stale errno\n${describe(res)}`);
	assert.deepEqual(fs.readdirSync(sub), [], 'no profile and no temporary file');
});

test('--profile-out through a symbolic link replaces the file it names (the link stays); a FIFO is written to', async (t) => {
	const sub = makeTempDir('traceprof-gen-prof-link-');
	t.after(() => removeTempDir(sub));
	fs.mkdirSync(path.join(sub, 'profiles'));
	const real = path.join(sub, 'profiles', 'run.folded');
	fs.writeFileSync(real, 'old\n');
	fs.chmodSync(real, 0o640);
	const link = path.join(sub, 'latest.folded');
	fs.symlinkSync('profiles/run.folded', link);
	let res = await generate(['300000', '/dev/null', '--profile-out', link]);
	assert.equal(res.code, 0, describe(res));
	assert.ok(fs.lstatSync(link).isSymbolicLink(), `the link is still a link\n${describe(res)}`);
	assert.equal(fs.readlinkSync(link), 'profiles/run.folded');
	const folded = fs.readFileSync(real, 'utf8');
	assert.notEqual(folded, 'old\n', 'the file the link names was replaced');
	assert.match(folded, /^(\S.* \d+\n)+$/, 'with folded stacks');
	assert.equal(fs.statSync(real).mode & 0o777, 0o640, 'and keeps its mode');
	assert.deepEqual(fs.readdirSync(path.join(sub, 'profiles')), ['run.folded'], 'no temporary file left');

	// A FIFO is read by whoever waits on it, as a shell redirection would do.
	const fifo = path.join(sub, 'pipe.folded');
	assert.equal((await run('mkfifo', [fifo])).code, 0);
	const reader = run('cat', [fifo], { timeout: 20000 });
	res = await generate(['300000', '/dev/null', '--profile-out', fifo]);
	assert.equal(res.code, 0, describe(res));
	assert.ok(fs.lstatSync(fifo).isFIFO(), `the FIFO is still a FIFO\n${describe(res)}`);
	const got = await reader;
	assert.equal(got.timedOut, false, 'the reader got an end of file');
	assert.match(got.stdout, /^(\S.* \d+\n)+$/, `the reader got the folded stacks\n${describe(res)}`);
	assert.deepEqual(fs.readdirSync(sub).sort(), ['latest.folded', 'pipe.folded', 'profiles'], 'no temporary file left');
});

/**
 * Generate 300,000 records with the OTLP collector (and, with profiles,
 * Pyroscope) never answering; SIGINT once the first request of the final
 * export arrived.  The result, the output and --profile-out paths.
 */
async function interruptFinalExport(t, withProfiles) {
	const r = await startReceiver({ grpc: false });
	t.after(() => r.close());
	r.setDefault({ hang: true });
	const ingest = await startIngest();
	t.after(() => ingest.close());
	ingest.setDefault({ hang: true });
	const sub = makeTempDir('traceprof-gen-final-');
	t.after(() => removeTempDir(sub));
	const out = path.join(sub, 'orders.json');
	const prof = path.join(sub, 'run.folded');
	let child;
	const pending = generate(['300000', out, '--profile-out', prof], {
		timeout: 30000,
		env: {
			OTEL_EXPORTER_OTLP_ENDPOINT: r.httpEndpoint, OTEL_EXPORTER_OTLP_TIMEOUT: '60000',
			...(withProfiles ? { PYROSCOPE_ENABLE: 'true', PYROSCOPE_SERVER_ADDRESS: ingest.url, PYROSCOPE_UPLOAD_TIMEOUT: '60000' } : {}),
		},
		onSpawn: (c) => { child = c; },
	});
	await (withProfiles ? ingest : r).waitForRequests(1, 20000);
	child.kill('SIGINT');
	const res = await pending;
	assert.equal(r.requests.length + ingest.requests.length, 1, `one request, never answered\n${describe(res)}`);
	assert.equal(res.signal, null, `killed by the signal\n${describe(res)}`);
	assert.equal(res.timedOut, false, describe(res));
	assert.equal(res.code, 130, describe(res));
	assert.match(res.stderr, /^generator: wrote 300000 records /m, 'the run itself is told');
	assert.match(res.stderr, /^generator: warning: traces not exported: interrupted: 1 span\(s\) of 1 not sent$/m, describe(res));
	assert.match(res.stderr, /^generator: error: interrupted$/m, describe(res));
	assert.equal(splitRecords(fs.readFileSync(out, 'utf8')).length, 300000, 'the output was committed before');
	assert.match(fs.readFileSync(prof, 'utf8'), /^(\S.* \d+\n)+$/, `--profile-out is written\n${describe(res)}`);
	return res;
}

// The run's signal handler (it removes the temporary output) re-raised the
// signal: the generator was killed there, with no message, and while
// profiles uploaded, with no --profile-out file (written after the uploads).
test('SIGINT during the final export of spans: it stops at once, exit 130, says what was lost', async (t) => {
	await interruptFinalExport(t, false);
});

test('SIGINT during the final upload of profiles: the same, and --profile-out is still written', async (t) => {
	const res = await interruptFinalExport(t, true);
	assert.match(res.stderr, /^generator: warning: .*interrupted/m, `the upload says it was cut short\n${describe(res)}`);
	assert.doesNotMatch(res.stderr, /Callback aborted/, `libcurl's words for it stay out\n${describe(res)}`);
});
