'use strict';
// What the extension's test files share: a cluster with traceprof
// preloaded and created, pg clients over its unix socket, fresh W3C
// contexts, and polling with a deadline (nothing sleeps blindly).

const assert = require('node:assert/strict');
const crypto = require('node:crypto');

const { startCluster } = require('./cluster');

let pg;
try {
	pg = require('pg');
} catch (err) {
	throw new Error(`the npm package "pg" is missing (${err.message}): run 'make deps' ` +
		'(npm ci in tests/integration)');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hex = (bytes) => crypto.randomBytes(bytes).toString('hex');

/** A new caller context: {traceId, spanId, header}. */
function newContext(flags = '01') {
	const traceId = hex(16);
	const spanId = hex(8);
	return { traceId, spanId, header: `00-${traceId}-${spanId}-${flags}` };
}

/**
 * Poll fn until it returns a truthy value; throw after timeoutMs with
 * what (a string, or a function of fn's last result) in the message.
 */
async function waitFor(what, fn, timeoutMs = 15000, intervalMs = 25) {
	const deadline = Date.now() + timeoutMs;
	let last;
	for (;;) {
		last = await fn();
		if (last)
			return last;
		if (Date.now() > deadline)
			throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what(last) : what}`);
		await sleep(intervalMs);
	}
}

/**
 * A cluster with traceprof preloaded (plus settings) and created in the app
 * database.  Spans in full detail (plan spans, CPU time: both off by
 * default) unless settings say otherwise: the suites check them.
 */
async function startTraced(settings = {}) {
	const cluster = await startCluster({
		settings: {
			shared_preload_libraries: 'traceprof',
			'traceprof.track_planning': 'on',
			'traceprof.track_cpu_time': 'on',
			...settings,
		},
	});
	try {
		await cluster.psql('CREATE EXTENSION traceprof;', { db: 'app' });
	} catch (err) {
		await cluster.stop();
		throw err;
	}
	return cluster;
}

/** A pg client over the cluster's unix socket (trusted), connected; options: "-c name=value ...". */
async function connect(cluster, user = 'postgres', database = 'app', options = undefined) {
	const client = new pg.Client({ host: cluster.socketDir, port: cluster.port, user, database, options });
	client.on('error', () => { /* a killed backend, the server going away at teardown */ });
	await client.connect();
	return client;
}

/** Run sql as a traced statement of ctx (SET traceparent, sql, RESET); returns its result. */
async function traced(client, ctx, sql) {
	await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
	try {
		return await client.query(sql);
	} finally {
		await client.query('RESET traceprof.traceparent');
	}
}

/** One traced `SELECT 1 AS alias` in a fresh session of the app role; returns its context. */
async function tracedSelect(cluster, alias) {
	const ctx = newContext();
	const client = await connect(cluster, 'app');
	try {
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		await client.query(`SELECT 1 AS ${alias}`);
	} finally {
		await client.end();
	}
	return ctx;
}

/** The query fails with SQLSTATE code, its message (and hint, if given) matching; a success is shown. */
async function assertRejectsWith(promise, code, messageRe, hintRe) {
	let result;
	try {
		result = await promise;
	} catch (e) {
		assert.equal(e.code, code, `SQLSTATE of ${JSON.stringify(e.message)}`);
		assert.match(e.message, messageRe);
		if (hintRe)
			assert.match(e.hint || '', hintRe, `hint of ${JSON.stringify(e.message)}`);
		return;
	}
	const shown = result && result.rows ? `${result.rows.length} row(s): ${JSON.stringify(result.rows.slice(0, 3))}` : String(result);
	assert.fail(`expected an error ${code} matching ${messageRe}, but the query succeeded with ${shown}`);
}

module.exports = { sleep, hex, newContext, waitFor, startTraced, connect, traced, tracedSelect, assertRejectsWith };
