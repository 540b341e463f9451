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
//   {delayMs: 1000, ...}                 any of these, answered that much later (a slow server)
//
// setDefault(behaviour) changes what an empty queue means (e.g. hang every
// upload).  answerBy, when set to a function, sees each request's record
// first: a behaviour it returns is answered instead of the queue's (e.g. a
// body limit: {status: 413} above some size).  pause() / resume() take the listener down (connection refused)
// and bring it back on the same port.  Times are performance.now()
// milliseconds.

const http = require('node:http');
const { performance } = require('node:perf_hooks');

const { CaptureServer, listen } = require('./capture-server');
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

class IngestServer extends CaptureServer {
	constructor() {
		super('ingest');
		this.port = 0;
		this.answerBy = null;
	}

	/** "http://127.0.0.1:PORT", what PYROSCOPE_SERVER_ADDRESS is set to. */
	get url() { return `http://127.0.0.1:${this.port}`; }

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
			const body = Buffer.concat(chunks);
			const behaviour = (this.answerBy && this.answerBy({ query, body })) || this._next();
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
				body,
				time,
				endTime: performance.now(),
				wallTime: Date.now(),
				behaviour,
			});
			this._answer(req, res, behaviour);
		});
	}

	_answer(req, res, b) {
		if (b.delayMs) {
			const timer = setTimeout(() => {
				this.timers.delete(timer);
				this._answer(req, res, { ...b, delayMs: 0 });
			}, b.delayMs);
			this.timers.add(timer);
			return;
		}
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
		this.server = this._trackSockets(http.createServer((req, res) => this._handle(req, res)));
		this.port = await listen(this.server);
	}

	/** Stop listening and drop every connection. */
	pause() {
		return this._pause(this.server);
	}

	/** Listen again on the same port. */
	resume() {
		return this._resume(this.server, this.port);
	}

	close() {
		return this._closeAll([this.server]);
	}
}

/**
 * startIngest() -> IngestServer with port, url, requests (each: method,
 * url (as sent: percent-encoded), path, query {name, from, until, format,
 * ...}, queryKeys, repeatedParams, series {app, tags: [[k, v], ...]} or
 * seriesError, headers, body, time, endTime, wallTime, behaviour),
 * enqueue(), setDefault(), waitFor(), waitForRequests(), reset(), pause(),
 * resume(), close().
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
