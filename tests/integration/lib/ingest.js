'use strict';
// A capture server posing as Grafana Pyroscope's /ingest endpoint, on a free
// 127.0.0.1 port (the one Pyroscope capture of the tests: binaries and
// extension alike).  Every request is recorded: method, path, the query
// parameters (decoded, and their keys in order), the series name split into
// application and tags, headers, raw body, time.  Responses are scripted per
// request from a queue of behaviours; when the queue is empty the default
// applies:
//
//   {}                                   default: 200, empty body
//   {status: 500, body: 'x', headers}    that status (and body)
//   {hang: true}                         never answer (the socket stays open)
//   {destroy: true}                      close the connection without answering
//   {reset: true}                        abort the connection with a TCP RST
//   {trickle: true}                      200, then one body byte a second, never ending
//
// setDefault(behaviour) changes what an empty queue means (e.g. hang every
// upload).  Times are performance.now() milliseconds.

const http = require('node:http');
const { performance } = require('node:perf_hooks');

const { answerFault } = require('./faulty-answers');

/**
 * Pyroscope's series name "app{k=v,k=v}" -> {app, tags: [[k, v], ...]}, the
 * tags in the order written.  Throws when the text does not have that shape
 * (no braces, a member without '=', braces or '=' in a value).
 */
function parseSeriesName(name) {
	const m = /^([^{}]*)\{([^{}]*)\}$/.exec(name);
	if (!m)
		throw new Error(`series name ${JSON.stringify(name)} is not app{k=v,...}`);
	const tags = [];
	if (m[2] !== '') {
		for (const member of m[2].split(',')) {
			const parts = member.split('=');
			if (parts.length !== 2)
				throw new Error(`series name ${JSON.stringify(name)}: member ${JSON.stringify(member)} is not k=v`);
			tags.push([parts[0], parts[1]]);
		}
	}
	return { app: m[1], tags };
}

class IngestServer {
	constructor() {
		this.requests = [];
		this.queue = [];
		this.waiters = [];
		this.defaultBehaviour = {};
		this.sockets = new Set();
		this.hung = [];
		this.timers = new Set();
		this.port = 0;
	}

	/** "http://127.0.0.1:PORT", what PYROSCOPE_SERVER_ADDRESS is set to. */
	get url() { return `http://127.0.0.1:${this.port}`; }

	/** Script the next requests' responses, in order. */
	enqueue(...behaviours) {
		this.queue.push(...behaviours);
		return this;
	}

	/** What to answer once the queue is empty. */
	setDefault(behaviour) {
		this.defaultBehaviour = behaviour;
		return this;
	}

	reset() {
		this.requests = [];
		this.queue = [];
		this.defaultBehaviour = {};
	}

	_record(r) {
		r.index = this.requests.length;
		this.requests.push(r);
		const still = [];
		for (const w of this.waiters) {
			if (this.requests.length >= w.n)
				w.resolve(this.requests.slice());
			else
				still.push(w);
		}
		this.waiters = still;
	}

	/** Poll until pred(requests) is truthy; resolves with its value. */
	async waitFor(pred, timeoutMs = 10000, what = 'a condition on the captured uploads') {
		const deadline = Date.now() + timeoutMs;
		for (;;) {
			const v = pred(this.requests);
			if (v)
				return v;
			if (Date.now() > deadline)
				throw new Error(`ingest: timed out after ${timeoutMs} ms waiting for ${what} ` +
					`(${this.requests.length} request(s) captured)`);
			await new Promise((r) => setTimeout(r, 25));
		}
	}

	/** Resolves with the requests once at least n arrived; rejects after timeoutMs. */
	waitForRequests(n, timeoutMs = 10000) {
		if (this.requests.length >= n)
			return Promise.resolve(this.requests.slice());
		return new Promise((resolve, reject) => {
			const w = { n, resolve: (r) => { clearTimeout(timer); resolve(r); } };
			const timer = setTimeout(() => {
				this.waiters = this.waiters.filter((x) => x !== w);
				reject(new Error(`ingest: ${this.requests.length} request(s) arrived, waited for ${n} during ${timeoutMs} ms`));
			}, timeoutMs);
			this.waiters.push(w);
		});
	}

	_handle(req, res) {
		const chunks = [];
		const time = performance.now();
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			const u = new URL(req.url, this.url);
			const query = {};
			const queryKeys = [];
			const repeated = [];
			for (const [k, v] of u.searchParams) {
				queryKeys.push(k);
				if (Object.prototype.hasOwnProperty.call(query, k))
					repeated.push(k);
				query[k] = v;
			}
			let series = null;
			let seriesError = null;
			if (query.name !== undefined) {
				try {
					series = parseSeriesName(query.name);
				} catch (err) {
					seriesError = err.message;
				}
			}
			const behaviour = this.queue.length ? this.queue.shift() : this.defaultBehaviour;
			this._record({
				method: req.method,
				url: req.url,
				path: u.pathname,
				query,
				queryKeys,
				repeatedParams: repeated,
				series,
				seriesError,
				headers: { ...req.headers },
				rawHeaders: req.rawHeaders.slice(),
				body: Buffer.concat(chunks),
				time,
				endTime: performance.now(),
				wallTime: Date.now(),
				behaviour,
			});
			this._answer(req, res, behaviour);
		});
	}

	_answer(req, res, b) {
		if (answerFault(this, req, res, b))
			return;
		const body = Buffer.from(b.body ?? '');
		res.writeHead(b.status ?? 200, {
			'content-type': 'text/plain; charset=utf-8',
			'content-length': body.length,
			...(b.headers || {}),
		});
		res.end(body);
	}

	async _start() {
		const server = http.createServer((req, res) => this._handle(req, res));
		server.on('connection', (s) => {
			this.sockets.add(s);
			s.on('close', () => this.sockets.delete(s));
		});
		server.keepAliveTimeout = 1000;
		this.server = server;
		this.port = await new Promise((resolve, reject) => {
			server.once('error', reject);
			server.listen(0, '127.0.0.1', () => {
				server.off('error', reject);
				resolve(server.address().port);
			});
		});
	}

	async close() {
		for (const t of this.timers)
			clearInterval(t);
		for (const s of this.sockets)
			s.destroy();
		if (!this.server)
			return;
		if (typeof this.server.closeAllConnections === 'function')
			this.server.closeAllConnections();
		await new Promise((r) => this.server.close(() => r()));
	}
}

/**
 * startIngest() -> IngestServer with port, url, requests (each: method,
 * url (as sent: percent-encoded), path, query {name, from, until, format,
 * ...}, queryKeys, repeatedParams, series {app, tags: [[k, v], ...]} or
 * seriesError, headers, body, time, endTime, wallTime, behaviour),
 * enqueue(), setDefault(), waitFor(), waitForRequests(), reset(), close().
 */
async function startIngest() {
	const s = new IngestServer();
	try {
		await s._start();
	} catch (err) {
		await s.close();
		throw err;
	}
	return s;
}

module.exports = { startIngest, parseSeriesName };
