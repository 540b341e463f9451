'use strict';
// The test harness itself: the capture receiver round-trips requests
// encoded by otlp-transformer's root over HTTP/1.1 and HTTP/2 (gRPC), its
// scripted behaviours do what they say, and a throwaway cluster has the
// promised authentication.  When these fail, the other files' results mean
// nothing.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const http2 = require('node:http2');
const path = require('node:path');

const { startReceiver, GRPC_PATH, grpcFrame, parseGrpcFrames } = require('./lib/receiver');
const { ExportTraceServiceRequest, ExportTraceServiceResponse, decodeTraces } = require('./lib/otlp');
const { startCluster } = require('./lib/cluster');
const { run } = require('./lib/run');
const { PG_BIN } = require('./lib/paths');

const sample = Buffer.from(ExportTraceServiceRequest.encode({
	resourceSpans: [{
		resource: { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }] },
		scopeSpans: [{
			scope: { name: 'scope', version: '1' },
			spans: [{
				traceId: Buffer.from('0af7651916cd43dd8448eb211c80319c', 'hex'),
				spanId: Buffer.from('b7ad6b7169203331', 'hex'),
				parentSpanId: Buffer.from('00f067aa0ba902b7', 'hex'),
				name: 'child',
				kind: 3,
				startTimeUnixNano: '1700000000123456789',
				endTimeUnixNano: '1700000000223456789',
				attributes: [
					{ key: 'n', value: { intValue: 50000 } },
					{ key: 'big', value: { intValue: '9007199254740993' } },
					{ key: 'b', value: { boolValue: true } },
					{ key: 'd', value: { doubleValue: 1.5 } },
					{ key: 's', value: { stringValue: 'Zoë' } },
				],
				status: { code: 2, message: 'bad' },
			}],
		}],
	}],
}).finish());

function post(url, body, headers = {}) {
	return new Promise((resolve, reject) => {
		const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/x-protobuf', ...headers } }, (res) => {
			const chunks = [];
			res.on('data', (c) => chunks.push(c));
			res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
		});
		req.on('error', reject);
		req.end(body);
	});
}

function grpcCall(endpoint, message) {
	return new Promise((resolve, reject) => {
		const session = http2.connect(`http://${endpoint}`);
		session.on('error', reject);
		const stream = session.request({
			':method': 'POST', ':path': GRPC_PATH, 'content-type': 'application/grpc', te: 'trailers',
		});
		let headers;
		let trailers = {};
		const chunks = [];
		stream.on('response', (h) => { headers = h; });
		stream.on('trailers', (tr) => { trailers = tr; });
		stream.on('data', (c) => chunks.push(c));
		stream.on('end', () => {
			session.close();
			resolve({ headers, trailers, body: Buffer.concat(chunks) });
		});
		stream.on('error', (e) => { session.destroy(); reject(e); });
		stream.end(grpcFrame(message));
	});
}

test('receiver: OTLP/HTTP request is recorded and decoded', async (t) => {
	const r = await startReceiver();
	t.after(() => r.close());
	const res = await post(`${r.httpEndpoint}/v1/traces`, sample, { 'x-k': 'v' });
	assert.equal(res.status, 200);
	assert.equal(res.headers['content-type'], 'application/x-protobuf');
	assert.deepEqual(ExportTraceServiceResponse.toObject(ExportTraceServiceResponse.decode(res.body)), {});
	assert.equal(r.requests.length, 1);
	assert.equal(r.requests[0].path, '/v1/traces');
	assert.equal(r.requests[0].headers['x-k'], 'v');
	const [s] = decodeTraces(r.requests[0].body).spans;
	assert.equal(s.traceId, '0af7651916cd43dd8448eb211c80319c');
	assert.equal(s.spanId, 'b7ad6b7169203331');
	assert.equal(s.parentSpanId, '00f067aa0ba902b7');
	assert.equal(s.kind, 3);
	assert.equal(s.startTimeUnixNano, 1700000000123456789n);
	assert.equal(s.endTimeUnixNano, 1700000000223456789n);
	assert.deepEqual(s.attributes, { n: 50000, big: 9007199254740993n, b: true, d: 1.5, s: 'Zoë' });
	assert.deepEqual(s.status, { code: 2, message: 'bad' });
	assert.deepEqual(s.resource.attributes, { 'service.name': 'svc' });
	assert.deepEqual(s.scope, { name: 'scope', version: '1' });
});

test('receiver: scripted HTTP answers', async (t) => {
	const r = await startReceiver();
	t.after(() => r.close());
	r.enqueue({ status: 503, headers: { 'retry-after': '1' } }, { status: 400, body: 'nope' },
		{ partialSuccess: { rejected: 2, message: 'x' } }, { destroy: true });
	let res = await post(r.httpEndpoint + '/v1/traces', sample);
	assert.equal(res.status, 503);
	assert.equal(res.headers['retry-after'], '1');
	res = await post(r.httpEndpoint + '/v1/traces', sample);
	assert.equal(res.status, 400);
	assert.equal(res.body.toString(), 'nope');
	res = await post(r.httpEndpoint + '/v1/traces', sample);
	assert.equal(res.status, 200);
	const ps = ExportTraceServiceResponse.decode(res.body).partialSuccess;
	assert.equal(Number(ps.rejectedSpans), 2);
	assert.equal(ps.errorMessage, 'x');
	await assert.rejects(post(r.httpEndpoint + '/v1/traces', sample), /socket hang up|ECONNRESET/);
	assert.equal(r.requests.length, 4);
	assert.ok(r.requests.every((q, i) => i === 0 || q.time >= r.requests[i - 1].time));
});

test('receiver: OTLP/gRPC over h2c, trailers, scripted status', async (t) => {
	const r = await startReceiver();
	t.after(() => r.close());
	let res = await grpcCall(r.grpcEndpoint, sample);
	assert.equal(res.headers[':status'], 200);
	assert.equal(res.headers['content-type'], 'application/grpc');
	assert.equal(res.trailers['grpc-status'], '0');
	const { frames, error } = parseGrpcFrames(res.body);
	assert.equal(error, null);
	assert.equal(frames.length, 1);
	ExportTraceServiceResponse.decode(frames[0].message);
	assert.equal(r.requests[0].protocol, 'grpc');
	assert.equal(r.requests[0].path, GRPC_PATH);
	assert.ok(r.requests[0].body.equals(sample));
	assert.equal(decodeTraces(r.requests[0].body).spans[0].name, 'child');

	r.enqueue({ grpcStatus: 14, grpcMessage: 'later' }, { grpcStatus: 14, trailersOnly: true },
		{ partialSuccess: { rejected: 1, message: 'm' } });
	res = await grpcCall(r.grpcEndpoint, sample);
	assert.equal(res.trailers['grpc-status'], '14');
	assert.equal(res.trailers['grpc-message'], 'later');
	res = await grpcCall(r.grpcEndpoint, sample);
	assert.equal(res.headers['grpc-status'], '14');
	res = await grpcCall(r.grpcEndpoint, sample);
	const ps = ExportTraceServiceResponse.decode(parseGrpcFrames(res.body).frames[0].message).partialSuccess;
	assert.equal(ps.errorMessage, 'm');
	assert.equal(r.requests.length, 4);
});

test('receiver: hang holds the request until close()', async () => {
	const r = await startReceiver();
	r.enqueue({ hang: true });
	const pending = post(r.httpEndpoint + '/v1/traces', sample).then(() => 'answered', () => 'reset');
	await r.waitForRequests(1, 5000);
	const early = await Promise.race([pending, new Promise((res) => setTimeout(() => res('pending'), 300))]);
	assert.equal(early, 'pending');
	await r.close();
	assert.equal(await pending, 'reset');
});

test('cluster: superuser over the socket, app/secret over TCP, wrong password refused, log readable', async (t) => {
	const c = await startCluster({ settings: { log_statement: 'all' } });
	t.after(() => c.stop());
	assert.equal(await c.psql('SELECT current_user'), 'postgres');
	assert.equal(await c.psql('SELECT rolsuper FROM pg_roles WHERE rolname = current_user'), 't');
	const psql = path.join(PG_BIN, 'psql');
	let res = await run(psql, ['-X', '-At', c.url(), '-c', 'SELECT current_user || current_database()']);
	assert.equal(res.code, 0, res.stderr);
	assert.equal(res.stdout.trim(), 'appapp');
	res = await run(psql, ['-X', '-At', c.url('app', 'wrong'), '-c', 'SELECT 1']);
	assert.notEqual(res.code, 0);
	assert.match(res.stderr, /password authentication failed/);
	res = await run(psql, ['-X', '-At', c.url('postgres', null, 'app'), '-c', 'SELECT 1'], { env: { PGPASSWORD: undefined } });
	assert.notEqual(res.code, 0, 'TCP is never trusted');
	assert.match(c.readLog(), /statement: SELECT current_user \|\| current_database\(\)/);
	const pid = c.pid;
	await c.stop();
	assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the postmaster is gone');
});
