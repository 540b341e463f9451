'use strict';
// Only traceprof's two workers load libcurl: they run in a library of their
// own, traceprof_exporter, and the postmaster, which every backend is forked
// from, loads traceprof alone.  libcurl and the libraries it brings made
// each new connection cost more CPU (docs/benchmarks.md).  The endpoint
// settings are still checked when they are set, without libcurl, in the
// backend that sets them.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { startTraced, connect, traced, newContext, waitFor } = require('./lib/traced');
const { startCluster } = require('./lib/cluster');
const { startReceiver } = require('./lib/receiver');
const { PG_BIN } = require('./lib/paths');
const { childPids } = require('./lib/procs');
const { makeTempDir, removeTempDir } = require('./lib/tmp');

const PKGLIBDIR = execFileSync(path.join(PG_BIN, 'pg_config'), ['--pkglibdir'], { encoding: 'utf8' }).trim();

/** The file names of the shared objects pid maps (basename, once each). */
function mappedObjects(pid) {
	const names = new Set();
	for (const line of fs.readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
		const path = line.split(/\s+/)[5];
		if (path && path.includes('.so'))
			names.add(path.slice(path.lastIndexOf('/') + 1));
	}
	return [...names];
}

const has = (objects, re) => objects.some((o) => re.test(o));
const CURL = /^libcurl\.so/;

test('backends and the postmaster never map libcurl; the workers do, and export', { timeout: 120000 }, async (t) => {
	const receiver = await startReceiver({ grpc: false });
	t.after(() => receiver.close());
	const cluster = await startTraced({ 'traceprof.otlp_endpoint': receiver.httpEndpoint });
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());

	const ctx = newContext();
	await traced(client, ctx, 'SELECT count(*) FROM pg_class');
	await waitFor('the traced statement exported by the worker',
		() => receiver.spans().some((s) => s.traceId === ctx.traceId), 30000);

	const postmaster = mappedObjects(cluster.pid);
	assert.ok(has(postmaster, /^traceprof\.so$/), `the postmaster loaded traceprof:\n${postmaster.join('\n')}`);
	assert.ok(!has(postmaster, CURL), `the postmaster maps no libcurl:\n${postmaster.join('\n')}`);
	assert.ok(!has(postmaster, /^traceprof_exporter\.so$/), 'nor the workers\' library');

	const backendPid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
	const backend = mappedObjects(backendPid);
	assert.ok(has(backend, /^traceprof\.so$/), 'the backend runs traceprof');
	assert.ok(!has(backend, CURL) && !has(backend, /^traceprof_exporter\.so$/),
		`a tracing backend maps neither libcurl nor the workers' library:\n${backend.join('\n')}`);

	for (const title of [/^postgres: traceprof exporter\b/, /^postgres: traceprof profile uploader\b/]) {
		const pids = await waitFor(`a process titled ${title}`, () => {
			const found = childPids(cluster, title);
			return found.length === 1 ? found : null;
		});
		const worker = mappedObjects(pids[0]);
		assert.ok(has(worker, /^traceprof_exporter\.so$/) && has(worker, CURL),
			`${title} runs the workers' library, with libcurl:\n${worker.join('\n')}`);
	}

	// The settings' checks need no libcurl: a bad endpoint is refused at once
	// by the backend, and it still maps none.
	await assert.rejects(client.query("ALTER SYSTEM SET traceprof.otlp_endpoint = 'http://coll<ctor:4318'"),
		(e) => /invalid value for parameter "traceprof\.otlp_endpoint"/.test(e.message));
	await assert.rejects(client.query("ALTER SYSTEM SET traceprof.pyroscope_url = 'http://[::1'"),
		(e) => /invalid value for parameter "traceprof\.pyroscope_url"/.test(e.message));
	await client.query("ALTER SYSTEM SET traceprof.otlp_endpoint = 'http://[::1]:4318/v1?x=1'");
	await client.query('ALTER SYSTEM RESET traceprof.otlp_endpoint');
	assert.ok(!has(mappedObjects(backendPid), CURL), 'checking the settings loaded no libcurl');
});

/**
 * A cluster that finds its libraries in a directory of its own
 * (dynamic_library_path): traceprof linked to the installed one (PostgreSQL
 * knows a library by its file, so CREATE EXTENSION's '$libdir/traceprof'
 * is the same one), and the workers' library as exporter() leaves it there.
 */
async function clusterWithLibraries(t, exporter) {
	const dir = makeTempDir('traceprof-libdir-');
	t.after(() => removeTempDir(dir));
	fs.symlinkSync(path.join(PKGLIBDIR, 'traceprof.so'), path.join(dir, 'traceprof.so'));
	exporter(dir);
	const cluster = await startCluster({
		settings: { shared_preload_libraries: 'traceprof', dynamic_library_path: dir },
	});
	t.after(() => cluster.stop());
	return { cluster, dir };
}

test('without its workers\' library the server says so at start, and starts no worker', { timeout: 60000 }, async (t) => {
	const { cluster, dir } = await clusterWithLibraries(t, () => {});
	const warning = `traceprof: its workers' library cannot be loaded: "${dir}/traceprof_exporter.so" not found`;
	assert.ok(cluster.readLog().includes(warning), `the log says which file is missing:\n${cluster.readLog()}`);
	// Its SQL works, from the one traceprof loaded (no second copy refused).
	await cluster.psql('CREATE EXTENSION traceprof');
	assert.match(await cluster.psql('SELECT spans_dropped FROM traceprof.stats'), /^0\s*$/);
	await new Promise((r) => setTimeout(r, 1500));
	assert.deepEqual(childPids(cluster, /^postgres: traceprof (exporter|profile uploader)\b/), [], 'no worker runs');
	assert.ok(!/could not (access|load) file "traceprof_exporter"/.test(cluster.readLog()),
		'no worker failed trying to load it');
});

test('a workers\' library of another build is refused with a clear warning, once', { timeout: 60000 }, async (t) => {
	const { cluster } = await clusterWithLibraries(t, (dir) => {
		// The same library with its build identity changed by one byte.
		const image = fs.readFileSync(path.join(PKGLIBDIR, 'traceprof_exporter.so'));
		const marker = Buffer.from('traceprof-build-id:');
		let at = image.indexOf(marker);
		assert.ok(at >= 0, 'the library carries its build identity');
		for (; at >= 0; at = image.indexOf(marker, at + 1))
			image[at + marker.length] = image[at + marker.length] === 0x30 ? 0x31 : 0x30;
		fs.writeFileSync(path.join(dir, 'traceprof_exporter.so'), image, { mode: 0o755 });
	});
	const refusal = (worker) => `WARNING:  traceprof: the ${worker} cannot run: its library is of another build than the traceprof the server loaded`;
	const workers = ['traceprof exporter', 'traceprof profile uploader'];
	for (const worker of workers)
		await waitFor(`the ${worker} refusing the library`, () => cluster.readLog().includes(refusal(worker)));
	assert.match(cluster.readLog(), /DETAIL: {2}The server loaded traceprof-build-id:[0-9a-f]{16}; traceprof_exporter is traceprof-build-id:/);
	assert.match(cluster.readLog(), /HINT: {2}Restart the server after installing traceprof\./);
	// The workers idle rather than exit: restarted every 10 s, they would say it again.
	const pids = childPids(cluster, /^postgres: traceprof (exporter|profile uploader)\b/);
	assert.equal(pids.length, 2, 'both workers stay');
	await new Promise((r) => setTimeout(r, 11000));
	assert.deepEqual(childPids(cluster, /^postgres: traceprof (exporter|profile uploader)\b/).sort(), pids.sort(), 'the same two');
	for (const worker of workers)
		assert.equal(cluster.readLog().split(refusal(worker)).length - 1, 1, `the ${worker} said it once`);
	assert.match(await cluster.psql('SELECT 41 + 1'), /^42\s*$/, 'the server goes on');
});

test('a dynamic_library_path the loader would refuse is named at start', { timeout: 60000 }, async (t) => {
	const cluster = await startCluster({
		settings: { shared_preload_libraries: '$libdir/traceprof', dynamic_library_path: '$libdir:relative/dir' },
	});
	t.after(() => cluster.stop());
	assert.ok(cluster.readLog().includes('traceprof: its workers\' library cannot be loaded: ' +
		'dynamic_library_path has an entry that is not an absolute path: "relative/dir"'), cluster.readLog());
	assert.deepEqual(childPids(cluster, /^postgres: traceprof (exporter|profile uploader)\b/), [], 'no worker runs');
});

test('preloading the workers\' library as well is warned about', { timeout: 60000 }, async (t) => {
	const cluster = await startCluster({ settings: { shared_preload_libraries: 'traceprof, traceprof_exporter' } });
	t.after(() => cluster.stop());
	assert.match(cluster.readLog(), /WARNING: {2}traceprof_exporter need not be in shared_preload_libraries/);
	assert.match(cluster.readLog(), /DETAIL: {2}traceprof's workers load it themselves; preloaded, every backend maps libcurl\./);
	assert.match(await cluster.psql('SELECT 41 + 1'), /^42\s*$/, 'the server runs');
});
