'use strict';
// A capture receiver for OTLP traces: OTLP/HTTP (HTTP/1.1) and OTLP/gRPC
// (HTTP/2 cleartext, prior knowledge) on free 127.0.0.1 ports.  Every
// request is recorded (method, path, headers, body, time); responses are
// scripted per request from a queue of behaviours:
//
//   {}                                   default: 200 + empty ExportTraceServiceResponse
//   {status: 503, headers: {...}, body}  HTTP status (gRPC: that :status, no grpc-status)
//   {hang: true}                         never answer
//   {destroy: true}                      close the connection without answering
//   {reset: true}                        HTTP/1.1: abort the connection with a TCP RST
//   {trickle: true}                      HTTP/1.1: 200, then one body byte a second, never ending
//   {partialSuccess: {rejected: 2, message: 'x'}}
//                                        200 + ExportTraceServiceResponse.partial_success
//   {grpcStatus: 14, grpcMessage: 'x'}   gRPC: :status 200, empty body, trailers grpc-status
//   {grpcStatus: 14, trailersOnly: true} gRPC: the Trailers-Only form
//
// The queue is shared by both protocols; when it is empty the default
// applies.  Times are performance.now() milliseconds.

const http = require('node:http');
const http2 = require('node:http2');
const zlib = require('node:zlib');
const { performance } = require('node:perf_hooks');

const { decodeTraces, encodeTraceResponse } = require('./otlp');
const { answerFault } = require('./faulty-answers');

const GRPC_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

function grpcFrame(message) {
	const head = Buffer.alloc(5);
	head.writeUInt8(0, 0);
	head.writeUInt32BE(message.length, 1);
	return Buffer.concat([head, message]);
}

/** Split a gRPC body into its length-prefixed messages. */
function parseGrpcFrames(buf) {
	const frames = [];
	let off = 0;
	while (off < buf.length) {
		if (buf.length - off < 5)
			return { frames, error: `truncated gRPC frame header at byte ${off}` };
		const compressed = buf.readUInt8(off);
		const length = buf.readUInt32BE(off + 1);
		if (buf.length - off - 5 < length)
			return { frames, error: `gRPC frame at byte ${off} declares ${length} bytes, ${buf.length - off - 5} present` };
		frames.push({ compressed, length, message: buf.subarray(off + 5, off + 5 + length) });
		off += 5 + length;
	}
	return { frames, error: null };
}

function listen(server) {
	return new Promise((resolve, reject) => {
		server.once('error', reject);
		server.listen(0, '127.0.0.1', () => {
			server.off('error', reject);
			resolve(server.address().port);
		});
	});
}

class Receiver {
	constructor() {
		this.requests = [];
		this.queue = [];
		this.waiters = [];
		this.httpPort = 0;
		this.grpcPort = 0;
		this.sockets = new Set();
		this.sessions = new Set();
		this.hung = [];
		this.timers = new Set();
	}

	get httpEndpoint() { return `http://127.0.0.1:${this.httpPort}`; }
	get grpcEndpoint() { return `127.0.0.1:${this.grpcPort}`; }

	/** Script the next requests' responses, in order. */
	enqueue(...behaviours) {
		this.queue.push(...behaviours);
		return this;
	}

	/** Forget recorded requests and scripted behaviours. */
	reset() {
		this.requests = [];
		this.queue = [];
	}

	_next() {
		return this.queue.length ? this.queue.shift() : {};
	}

	_record(req) {
		req.index = this.requests.length;
		this.requests.push(req);
		const still = [];
		for (const w of this.waiters) {
			if (this.requests.length >= w.n)
				w.resolve(this.requests.slice());
			else
				still.push(w);
		}
		this.waiters = still;
	}

	/** Resolves with the requests once at least n arrived; rejects after timeoutMs. */
	waitForRequests(n, timeoutMs = 10000) {
		if (this.requests.length >= n)
			return Promise.resolve(this.requests.slice());
		return new Promise((resolve, reject) => {
			const w = { n, resolve: (r) => { clearTimeout(timer); resolve(r); } };
			const timer = setTimeout(() => {
				this.waiters = this.waiters.filter((x) => x !== w);
				reject(new Error(`receiver: ${this.requests.length} request(s) arrived, waited for ${n} during ${timeoutMs} ms`));
			}, timeoutMs);
			this.waiters.push(w);
		});
	}

	/** Decoded spans of every recorded request (each request must decode). */
	spans(filter = () => true) {
		const out = [];
		for (const r of this.requests.filter(filter))
			out.push(...decodeTraces(r.body).spans);
		return out;
	}

	async _startHttp() {
		const server = http.createServer((req, res) => {
			const chunks = [];
			const time = performance.now();
			req.on('data', (c) => chunks.push(c));
			req.on('end', () => {
				const rawBody = Buffer.concat(chunks);
				let body = rawBody;
				let bodyError = null;
				const enc = (req.headers['content-encoding'] || '').toLowerCase();
				try {
					if (enc === 'gzip')
						body = zlib.gunzipSync(rawBody);
				} catch (err) {
					bodyError = `content-encoding ${enc}: ${err.message}`;
				}
				const behaviour = this._next();
				this._record({
					protocol: 'http', method: req.method, path: req.url, httpVersion: req.httpVersion,
					headers: { ...req.headers }, rawHeaders: req.rawHeaders.slice(),
					rawBody, body, bodyError, time, endTime: performance.now(), wallTime: Date.now(), behaviour,
				});
				this._answerHttp(req, res, behaviour);
			});
		});
		server.on('connection', (s) => {
			this.sockets.add(s);
			s.on('close', () => this.sockets.delete(s));
		});
		server.keepAliveTimeout = 1000;
		this.httpServer = server;
		this.httpPort = await listen(server);
	}

	_answerHttp(req, res, b) {
		if (answerFault(this, req, res, b))
			return;
		if (b.status && b.status !== 200 || b.body !== undefined) {
			const body = b.body === undefined ? Buffer.alloc(0) : Buffer.from(b.body);
			res.writeHead(b.status || 200, { 'content-length': body.length, ...(b.headers || {}) });
			res.end(body);
			return;
		}
		const body = encodeTraceResponse(b.partialSuccess);
		res.writeHead(200, {
			'content-type': 'application/x-protobuf',
			'content-length': body.length,
			...(b.headers || {}),
		});
		res.end(body);
	}

	async _startGrpc() {
		const server = http2.createServer();
		server.on('session', (session) => {
			this.sessions.add(session);
			session.on('close', () => this.sessions.delete(session));
			session.on('error', () => { /* peer went away */ });
		});
		server.on('stream', (stream, headers) => {
			const chunks = [];
			const time = performance.now();
			stream.on('error', () => { /* reset by peer */ });
			stream.on('data', (c) => chunks.push(c));
			stream.on('end', () => {
				const rawBody = Buffer.concat(chunks);
				const { frames, error } = parseGrpcFrames(rawBody);
				let body = frames.length ? frames[0].message : Buffer.alloc(0);
				let bodyError = error;
				if (!error && frames.length !== 1)
					bodyError = `expected exactly one gRPC message, got ${frames.length}`;
				if (frames.length && frames[0].compressed) {
					const enc = (headers['grpc-encoding'] || '').toLowerCase();
					try {
						body = enc === 'gzip' ? zlib.gunzipSync(body) : body;
					} catch (err) {
						bodyError = `grpc-encoding ${enc}: ${err.message}`;
					}
				}
				const behaviour = this._next();
				const plain = {};
				for (const [k, v] of Object.entries(headers))
					if (typeof k === 'string') plain[k] = v;
				this._record({
					protocol: 'grpc', method: headers[':method'], path: headers[':path'], headers: plain,
					rawBody, body, bodyError, frames: frames.map((f) => ({ compressed: f.compressed, length: f.length })),
					time, endTime: performance.now(), wallTime: Date.now(), behaviour,
				});
				this._answerGrpc(stream, behaviour);
			});
		});
		this.grpcServer = server;
		this.grpcPort = await listen(server);
	}

	_answerGrpc(stream, b) {
		if (stream.destroyed)
			return;
		if (b.destroy) {
			// Tear down the whole HTTP/2 connection (no GOAWAY, no RST_STREAM).
			stream.session.destroy();
			return;
		}
		if (b.hang) {
			this.hung.push(stream);
			return;
		}
		if (b.status && b.status !== 200) {
			stream.respond({ ':status': b.status, ...(b.headers || {}) }, { endStream: true });
			return;
		}
		if (b.grpcStatus !== undefined && b.grpcStatus !== 0) {
			const trailers = { 'grpc-status': String(b.grpcStatus) };
			if (b.grpcMessage)
				trailers['grpc-message'] = encodeURIComponent(b.grpcMessage);
			if (b.trailersOnly) {
				stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...trailers, ...(b.headers || {}) },
					{ endStream: true });
				return;
			}
			stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...(b.headers || {}) },
				{ waitForTrailers: true });
			stream.on('wantTrailers', () => stream.sendTrailers(trailers));
			stream.end();
			return;
		}
		const body = grpcFrame(encodeTraceResponse(b.partialSuccess));
		stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...(b.headers || {}) },
			{ waitForTrailers: true });
		stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
		stream.end(body);
	}

	async close() {
		for (const t of this.timers)
			clearInterval(t);
		for (const s of this.sessions)
			s.destroy();
		for (const s of this.sockets)
			s.destroy();
		const closing = [];
		for (const srv of [this.httpServer, this.grpcServer]) {
			if (!srv)
				continue;
			if (typeof srv.closeAllConnections === 'function')
				srv.closeAllConnections();
			closing.push(new Promise((r) => srv.close(() => r())));
		}
		await Promise.all(closing);
	}
}

/**
 * startReceiver({http = true, grpc = true}) -> Receiver with httpPort,
 * grpcPort, httpEndpoint ("http://127.0.0.1:P"), grpcEndpoint
 * ("127.0.0.1:P"), requests, enqueue(), waitForRequests(), spans(), reset(),
 * close().
 */
async function startReceiver({ http: wantHttp = true, grpc: wantGrpc = true } = {}) {
	const r = new Receiver();
	try {
		if (wantHttp)
			await r._startHttp();
		if (wantGrpc)
			await r._startGrpc();
	} catch (err) {
		await r.close();
		throw err;
	}
	return r;
}

module.exports = { startReceiver, GRPC_PATH, grpcFrame, parseGrpcFrames };
