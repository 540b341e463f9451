'use strict';
// A capture server posing as Grafana Pyroscope: listens on a free
// 127.0.0.1 port, records every request (method, path, decoded query
// parameters, headers, body, time) and answers 200 with an empty body, or
// what `answer(request)` returns ({status, body} or {hang: true}).
//
//   const srv = await startPyroscopeCapture();
//   ... traceprof.pyroscope_url = srv.url ...
//   await srv.waitFor((reqs) => reqs.length > 0, 10000, 'an upload');
//   await srv.close();

const http = require('node:http');
const { performance } = require('node:perf_hooks');

class PyroscopeCapture {
	constructor(answer) {
		this.answer = answer;
		this.requests = [];
		this.sockets = new Set();
		this.hung = [];
		this.server = null;
		this.port = 0;
	}

	get url() { return `http://127.0.0.1:${this.port}`; }

	_handle(req, res) {
		const chunks = [];
		const time = performance.now();
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			const u = new URL(req.url, this.url);
			const r = {
				method: req.method,
				url: req.url,		// as sent: percent-encoded
				path: u.pathname,
				query: Object.fromEntries(u.searchParams),	// decoded
				queryKeys: [...u.searchParams.keys()],
				headers: { ...req.headers },
				body: Buffer.concat(chunks),
				time,
				wallTime: Date.now(),
			};
			this.requests.push(r);
			const a = this.answer ? this.answer(r) : { status: 200, body: '' };
			if (a.hang) {
				this.hung.push(res);
				return;
			}
			const body = Buffer.from(a.body || '');
			res.writeHead(a.status || 200, { 'content-type': 'text/plain', 'content-length': body.length });
			res.end(body);
		});
	}

	/** Poll until pred(requests) is truthy; resolves with its value. */
	async waitFor(pred, timeoutMs = 10000, what = 'a condition on the captured uploads') {
		const deadline = Date.now() + timeoutMs;
		for (;;) {
			const v = pred(this.requests);
			if (v)
				return v;
			if (Date.now() > deadline)
				throw new Error(`pyroscope capture: timed out after ${timeoutMs} ms waiting for ${what} ` +
					`(${this.requests.length} request(s) captured)`);
			await new Promise((r) => setTimeout(r, 25));
		}
	}

	async close() {
		for (const s of this.sockets)
			s.destroy();
		if (!this.server)
			return;
		if (typeof this.server.closeAllConnections === 'function')
			this.server.closeAllConnections();
		await new Promise((r) => this.server.close(() => r()));
	}
}

/** startPyroscopeCapture({answer}) -> PyroscopeCapture, listening. */
async function startPyroscopeCapture({ answer } = {}) {
	const c = new PyroscopeCapture(answer);
	c.server = http.createServer((req, res) => c._handle(req, res));
	c.server.on('connection', (s) => {
		c.sockets.add(s);
		s.on('close', () => c.sockets.delete(s));
	});
	c.server.keepAliveTimeout = 1000;
	await new Promise((resolve, reject) => {
		c.server.once('error', reject);
		c.server.listen(0, '127.0.0.1', () => {
			c.server.off('error', reject);
			resolve();
		});
	});
	c.port = c.server.address().port;
	return c;
}

module.exports = { startPyroscopeCapture };
