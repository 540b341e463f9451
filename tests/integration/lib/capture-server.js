'use strict';
// What the capture servers (lib/receiver.js for OTLP, lib/ingest.js for
// Pyroscope) have in common: the recorded requests, the queue of scripted
// behaviours, waiting for n requests, and tearing down the sockets, hung
// responses and trickle timers (lib/faulty-answers.js) at close.

/** Listen on 127.0.0.1 (a free port unless one is given); resolves with the port. */
function listen(server, port = 0) {
	return new Promise((resolve, reject) => {
		server.once('error', reject);
		server.listen(port, '127.0.0.1', () => {
			server.off('error', reject);
			resolve(server.address().port);
		});
	});
}

class CaptureServer {
	/** label: how errors name this server ("receiver", "ingest"). */
	constructor(label) {
		this.label = label;
		this.requests = [];
		this.queue = [];
		this.defaultBehaviour = {};
		this.waiters = [];
		this.sockets = new Set();
		this.hung = [];
		this.timers = new Set();
	}

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

	/** The behaviour for the request that just arrived. */
	_next() {
		return this.queue.length ? this.queue.shift() : this.defaultBehaviour;
	}

	/** Forget recorded requests and scripted behaviours. */
	reset() {
		this.requests = [];
		this.queue = [];
		this.defaultBehaviour = {};
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
				reject(new Error(`${this.label}: ${this.requests.length} request(s) arrived, waited for ${n} during ${timeoutMs} ms`));
			}, timeoutMs);
			this.waiters.push(w);
		});
	}

	/** An HTTP/1.1 server whose sockets close() can destroy. */
	_trackSockets(server) {
		server.on('connection', (s) => {
			this.sockets.add(s);
			s.on('close', () => this.sockets.delete(s));
		});
		server.keepAliveTimeout = 1000;
		return server;
	}

	/**
	 * Go down: stop listening (connection refused) and drop every open
	 * connection, hung and trickling answers included.  _resume() listens
	 * again on the same port.
	 */
	async _pause(server) {
		for (const t of this.timers)
			clearInterval(t);
		this.timers.clear();
		this.hung = [];
		for (const s of this.sockets)
			s.destroy();
		if (typeof server.closeAllConnections === 'function')
			server.closeAllConnections();
		await new Promise((r) => server.close(() => r()));
	}

	/** Listen again on port after _pause(). */
	async _resume(server, port) {
		if (!server.listening)
			await listen(server, port);
	}

	/** Stop trickles, destroy sockets, close the servers. */
	async _closeAll(servers) {
		for (const t of this.timers)
			clearInterval(t);
		for (const s of this.sockets)
			s.destroy();
		await Promise.all(servers.filter(Boolean).map((srv) => {
			if (typeof srv.closeAllConnections === 'function')
				srv.closeAllConnections();
			return new Promise((r) => srv.close(() => r()));
		}));
	}
}

module.exports = { CaptureServer, listen };
