'use strict';
// TLS to https endpoints: certificates are verified by default, and a CA
// file makes a private CA trusted, for the binaries (OTEL_EXPORTER_OTLP_
// CERTIFICATE, PYROSCOPE_CA_FILE) and for the extension's exporter
// (traceprof.otlp_ca_file, traceprof.pyroscope_ca_file).
//
// A throwaway CA made with the openssl command signs two server
// certificates: one for 127.0.0.1, and one for another host name, which
// must be refused even with the CA trusted (host names are checked too).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const https = require('node:https');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { GENERATOR, requireExecutable } = require('./lib/paths');
const { run, describe } = require('./lib/run');
const { newContext, waitFor, startTraced, connect } = require('./lib/traced');
const { listen } = require('./lib/capture-server');
const { decodeTraces } = require('./lib/otlp');
const { decodePprof } = require('./lib/pprof');
const { makeTempDir, removeTempDir } = require('./lib/tmp');

let dir;
let ca;				// path of the CA certificate (PEM)
let good;			// {key, cert} for 127.0.0.1
let wrongHost;		// {key, cert} for wrong-host.invalid, signed by the same CA

function openssl(...args) {
	try {
		execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
	} catch (err) {
		throw new Error(`openssl ${args.join(' ')} failed (is the openssl package installed? make deps): ${err.stderr || err.message}`);
	}
}

/** A key and a certificate for subjectAltName san, signed by the test CA. */
function issue(name, san) {
	openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-subj', `/CN=${name}`, '-out', `${name}.csr`);
	fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
	openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
		'-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
	return { key: fs.readFileSync(path.join(dir, `${name}.key`)), cert: fs.readFileSync(path.join(dir, `${name}.pem`)) };
}

before(() => {
	dir = makeTempDir('traceprof-tls-');
	openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem',
		'-days', '2', '-subj', '/CN=traceprof test CA');
	ca = path.join(dir, 'ca.pem');
	fs.chmodSync(ca, 0o644);	// the server reads it as the postgres user
	good = issue('server', 'IP:127.0.0.1');
	wrongHost = issue('elsewhere', 'DNS:wrong-host.invalid');
});

after(() => removeTempDir(dir));

/**
 * An https server answering 200 to everything (an empty OTLP response is a
 * valid ExportTraceServiceResponse) and recording {path, body}.
 */
async function startHttps(t, identity) {
	const requests = [];
	const server = https.createServer(identity, (req, res) => {
		const chunks = [];
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			requests.push({ path: req.url, body: Buffer.concat(chunks) });
			res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 });
			res.end();
		});
	});
	const port = await listen(server);
	t.after(() => new Promise((resolve) => {
		server.closeAllConnections();
		server.close(resolve);
	}));
	return { requests, url: `https://127.0.0.1:${port}` };
}

/**
 * A cluster exporting every 100 ms (2 s budget) with settings, its admin
 * connection, traced(): statement run under a new trace, whose id it
 * returns, and stats(): traceprof.stats.
 */
async function startExporting(t, settings, statement) {
	const cluster = await startTraced({
		'traceprof.export_interval': '100',
		'traceprof.otlp_timeout': '2000',
		...settings,
	});
	t.after(() => cluster.stop());
	const admin = await connect(cluster);
	t.after(() => admin.end());
	const traced = async () => {
		const ctx = newContext();
		await admin.query(`SET traceprof.traceparent = '${ctx.header}'`);
		await admin.query(statement);
		await admin.query("SET traceprof.traceparent = ''");
		return ctx.traceId;
	};
	const stats = async () => (await admin.query('SELECT * FROM traceprof.stats')).rows[0];
	return { cluster, admin, traced, stats };
}

const warnings = (res) => res.stderr.split('\n').filter((l) => /warning/i.test(l));

/** Run the generator with env; records enough for CPU samples when profiling. */
async function generate(env, records = 2000) {
	requireExecutable(GENERATOR);
	const out = path.join(dir, `out-${crypto.randomBytes(4).toString('hex')}.json`);
	const res = await run(GENERATOR, [String(records), out], { env, timeout: 60000 });
	fs.rmSync(out, { force: true });
	assert.equal(res.code, 0, describe(res));
	return res;
}

test('binaries, OTLP over https: an unknown CA is refused with a warning, OTEL_EXPORTER_OTLP_CERTIFICATE makes it trusted', async (t) => {
	const server = await startHttps(t, good);
	const env = { OTEL_EXPORTER_OTLP_ENDPOINT: server.url, OTEL_EXPORTER_OTLP_TIMEOUT: '3000' };

	const refused = await generate(env);
	assert.equal(server.requests.length, 0, 'no request completes without trusting the CA');
	assert.ok(warnings(refused).some((w) => /certificate/i.test(w) && w.includes(server.url)),
		`a warning names the endpoint and the certificate problem:\n${refused.stderr}`);

	const trusted = await generate({ ...env, OTEL_EXPORTER_OTLP_CERTIFICATE: ca });
	assert.deepEqual(warnings(trusted), [], trusted.stderr);
	assert.equal(server.requests.length, 1);
	assert.equal(server.requests[0].path, '/v1/traces');
	const spans = decodeTraces(server.requests[0].body).spans;
	assert.ok(spans.some((s) => s.name === 'generator.run'), `the root span arrived: ${spans.map((s) => s.name)}`);
});

test('binaries, OTLP to a collector that wants a client certificate (mutual TLS): OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _KEY present one', async (t) => {
	// Before, the variables were ignored: five handshakes refused, then a
	// warning about a dropped connection.
	const client = issue('client', 'DNS:traceprof-client');
	fs.chmodSync(path.join(dir, 'client.key'), 0o644);
	const server = await startHttps(t, { ...good, ca: fs.readFileSync(ca), requestCert: true, rejectUnauthorized: true });
	const env = { OTEL_EXPORTER_OTLP_ENDPOINT: server.url, OTEL_EXPORTER_OTLP_TIMEOUT: '3000', OTEL_EXPORTER_OTLP_CERTIFICATE: ca };

	const refused = await generate(env);
	assert.equal(server.requests.length, 0, 'no request without a client certificate');
	assert.ok(warnings(refused).length > 0, refused.stderr);

	const presented = await generate({ ...env, OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: path.join(dir, 'client.pem'),
		OTEL_EXPORTER_OTLP_CLIENT_KEY: path.join(dir, 'client.key') });
	assert.deepEqual(warnings(presented), [], presented.stderr);
	assert.equal(server.requests.length, 1);
	assert.ok(decodeTraces(server.requests[0].body).spans.some((s) => s.name === 'generator.run'));
});

test('binaries, Pyroscope over https: refused without PYROSCOPE_CA_FILE, uploaded with it', async (t) => {
	const server = await startHttps(t, good);
	const env = { PYROSCOPE_ENABLE: 'true', PYROSCOPE_SERVER_ADDRESS: server.url, PYROSCOPE_UPLOAD_TIMEOUT: '3000' };

	const refused = await generate(env, 1000000);
	assert.equal(server.requests.length, 0);
	assert.ok(warnings(refused).some((w) => /certificate/i.test(w)), refused.stderr);

	const trusted = await generate({ ...env, PYROSCOPE_CA_FILE: ca }, 1000000);
	assert.deepEqual(warnings(trusted), [], trusted.stderr);
	assert.ok(server.requests.length >= 1);
	assert.match(server.requests[0].path, /^\/ingest\?/);
	const profile = decodePprof(server.requests[0].body);
	assert.ok(profile.samples.length > 0, 'a decodable pprof with samples');
});

test('binaries: a certificate for another host name is refused even with its CA trusted', async (t) => {
	const server = await startHttps(t, wrongHost);
	const res = await generate({
		OTEL_EXPORTER_OTLP_ENDPOINT: server.url, OTEL_EXPORTER_OTLP_TIMEOUT: '3000', OTEL_EXPORTER_OTLP_CERTIFICATE: ca,
	});
	assert.equal(server.requests.length, 0);
	assert.ok(warnings(res).some((w) => /certificate|subject|host/i.test(w)), res.stderr);
});

test('extension: https endpoints are verified; traceprof.otlp_ca_file / pyroscope_ca_file make the CA trusted; only a superuser sets them', async (t) => {
	const otlp = await startHttps(t, good);
	const ingest = await startHttps(t, good);
	const { cluster, admin, traced, stats } = await startExporting(t, {
		'traceprof.upload_interval': '200',
		'traceprof.otlp_endpoint': otlp.url,
		'traceprof.pyroscope_url': ingest.url,
		'traceprof.sample_hz': '250',
	}, 'SELECT sum(g::numeric * g) FROM generate_series(1, 300000) g');

	await traced();
	const failed = await waitFor('a failed span export and a failed profile upload', async () => {
		const s = await stats();
		return Number(s.export_failures) > 0 && Number(s.upload_failures) > 0 && s.last_error ? s : null;
	}, 20000);
	assert.match(failed.last_error, /certificate/i, 'the failure says why');
	assert.equal(otlp.requests.length, 0, 'nothing sent to an endpoint whose certificate is not trusted');
	assert.equal(ingest.requests.length, 0);

	// Only a superuser may choose what is trusted.
	await admin.query('CREATE ROLE tls_user LOGIN');
	const user = await connect(cluster, 'tls_user');
	t.after(() => user.end());
	for (const guc of ['traceprof.otlp_ca_file', 'traceprof.pyroscope_ca_file']) {
		await assert.rejects(user.query(`SET ${guc} = '/tmp/x.pem'`), /cannot be changed now|permission denied/, guc);
		await assert.rejects(user.query(`ALTER SYSTEM SET ${guc} = '/tmp/x.pem'`), /permission denied|must be superuser/, guc);
	}

	await admin.query(`ALTER SYSTEM SET traceprof.otlp_ca_file = '${ca}'`);
	await admin.query(`ALTER SYSTEM SET traceprof.pyroscope_ca_file = '${ca}'`);
	await admin.query('SELECT pg_reload_conf()');
	const trace = await traced();
	await waitFor('the spans over https', () => otlp.requests.some((r) =>
		decodeTraces(r.body).spans.some((s) => s.traceId === trace)), 20000);
	await waitFor('a profile upload over https', () => ingest.requests.some((r) =>
		decodePprof(r.body).samples.some((s) => s.labels && s.labels.trace_id === trace)), 20000);
});

test('extension, OTLP to a collector that wants a client certificate (mutual TLS): traceprof.otlp_client_certificate and _key present one; only a superuser sets them', async (t) => {
	// Before, the server had no such settings: every export was refused at
	// the handshake, and spans stayed unsent.
	if (!fs.existsSync(path.join(dir, 'client.pem')))
		issue('client', 'DNS:traceprof-client');
	fs.chmodSync(path.join(dir, 'client.key'), 0o644);
	const otlp = await startHttps(t, { ...good, ca: fs.readFileSync(ca), requestCert: true, rejectUnauthorized: true });
	const { cluster, admin, traced, stats } = await startExporting(t, {
		'traceprof.otlp_endpoint': otlp.url,
		'traceprof.otlp_ca_file': ca,
	}, 'SELECT 1');
	const reload = async (settings) => {
		for (const [guc, value] of Object.entries(settings))
			await admin.query(`ALTER SYSTEM SET ${guc} = '${value}'`);
		await admin.query('SELECT pg_reload_conf()');
	};

	await traced();
	await waitFor('a failed export without a client certificate', async () =>
		Number((await stats()).export_failures) > 0, 20000);
	assert.equal(otlp.requests.length, 0, 'no request without a client certificate');

	// A key alone presents nothing, and says so.
	const logFrom = cluster.readLog().length;
	await reload({ 'traceprof.otlp_client_key': path.join(dir, 'client.key') });
	await waitFor('the warning about a key without a certificate', () =>
		/WARNING:.*traceprof\.otlp_client_key is ignored without traceprof\.otlp_client_certificate/
			.test(cluster.readLog().slice(logFrom)), 20000);

	await reload({ 'traceprof.otlp_client_certificate': path.join(dir, 'client.pem') });
	const trace = await traced();
	await waitFor('the spans over mutual TLS', () => otlp.requests.some((r) =>
		decodeTraces(r.body).spans.some((s) => s.traceId === trace)), 20000);

	await admin.query('CREATE ROLE mtls_user LOGIN');
	const user = await connect(cluster, 'mtls_user');
	t.after(() => user.end());
	for (const guc of ['traceprof.otlp_client_certificate', 'traceprof.otlp_client_key']) {
		await assert.rejects(user.query(`SET ${guc} = '/tmp/x.pem'`), /cannot be changed now|permission denied/, guc);
		await assert.rejects(user.query(`ALTER SYSTEM SET ${guc} = '/tmp/x.pem'`), /permission denied|must be superuser/, guc);
		await assert.rejects(user.query(`SELECT current_setting('${guc}')`), /must be superuser or have privileges of pg_read_all_settings/,
			`${guc} is hidden from other roles (it names a private key)`);
	}
});
