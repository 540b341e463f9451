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
//   {compressAnswer: true, ...}          gRPC: the answer's message gzipped (flag 1,
//                                        grpc-encoding: gzip), as grpc-go answers a gzip request
//   {grpcStatus: 14, grpcMessage: 'x'}   gRPC: :status 200, empty body, trailers grpc-status
//   {grpcStatus: 14, trailersOnly: true} gRPC: the Trailers-Only form
//   {grpcStatus: 8, trailers: {...}}     gRPC: more trailers (or headers, Trailers-Only),
//                                        e.g. 'grpc-status-details-bin'
//   {delayMs: 1000, ...}                 HTTP/1.1: the rest of the behaviour, delayMs later
//                                        (a slow collector; the request is recorded on arrival)
//
// The queue is shared by both protocols; when it is empty the default
// applies (setDefault(behaviour) changes it, e.g. answer every request 503).
// pause() / resume() take the HTTP/1.1 listener down (connection refused)
// and bring it back on the same port.  Times are performance.now()
// milliseconds.

const http = require('node:http');
const http2 = require('node:http2');
const zlib = require('node:zlib');
const { performance } = require('node:perf_hooks');

const { decodeTraces, encodeTraceResponse } = require('./otlp');
const { CaptureServer, listen } = require('./capture-server');
const { answerFault } = require('./faulty-answers');

const GRPC_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

function grpcFrame(message, compressed = false) {
	const head = Buffer.alloc(5);
	head.writeUInt8(compressed ? 1 : 0, 0);
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

class Receiver extends CaptureServer {
	constructor() {
		super('receiver');
		this.httpPort = 0;
		this.grpcPort = 0;
		this.sessions = new Set();
	}

	get httpEndpoint() { return `http://127.0.0.1:${this.httpPort}`; }
	get grpcEndpoint() { return `127.0.0.1:${this.grpcPort}`; }

	/** Stop listening on the HTTP/1.1 port and drop its connections. */
	pause() {
		return this._pause(this.httpServer);
	}

	/** Listen again on the same HTTP/1.1 port. */
	resume() {
		return this._resume(this.httpServer, this.httpPort);
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
					clientPort: req.socket.remotePort,
					headers: { ...req.headers }, rawHeaders: req.rawHeaders.slice(),
					rawBody, body, bodyError, time, endTime: performance.now(), wallTime: Date.now(), behaviour,
				});
				this._answerHttp(req, res, behaviour);
			});
		});
		this.httpServer = this._trackSockets(server);
		this.httpPort = await listen(server);
	}

	_answerHttp(req, res, b) {
		if (b.delayMs > 0) {
			const timer = setTimeout(() => {
				this.timers.delete(timer);
				if (!req.socket.destroyed)
					this._answerHttp(req, res, { ...b, delayMs: 0 });
			}, b.delayMs);
			this.timers.add(timer);
			return;
		}
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
			Object.assign(trailers, b.trailers || {});
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
		const answer = encodeTraceResponse(b.partialSuccess);
		const body = b.compressAnswer ? grpcFrame(zlib.gzipSync(answer), true) : grpcFrame(answer);
		const encoding = b.compressAnswer ? { 'grpc-encoding': 'gzip' } : {};
		stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...encoding, ...(b.headers || {}) },
			{ waitForTrailers: true });
		stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
		stream.end(body);
	}

	close() {
		for (const s of this.sessions)
			s.destroy();
		return this._closeAll([this.httpServer, this.grpcServer]);
	}
}

/**
 * startReceiver({http = true, grpc = true}) -> Receiver with httpPort,
 * grpcPort, httpEndpoint ("http://127.0.0.1:P"), grpcEndpoint
 * ("127.0.0.1:P"), requests, enqueue(), setDefault(), waitForRequests(),
 * spans(), reset(), pause(), resume(), close().
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
