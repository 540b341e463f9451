'use strict';
// Only traceprof's two workers load libcurl: they run in a library of their
// own, traceprof_exporter, and the postmaster, which every backend is forked
// from, loads traceprof alone.  libcurl and the libraries it brings made
// each new connection cost more CPU (docs/benchmarks.md).  The endpoint
// settings are still checked when they are set, without libcurl, in the
// backend that sets them.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');

const { startTraced, connect, traced, newContext, waitFor } = require('./lib/traced');
const { startReceiver } = require('./lib/receiver');
const { childPids } = require('./lib/procs');

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
