'use strict';
// A span endpoint (OTLP/HTTP capture receiver) and a profile endpoint
// (Pyroscope /ingest capture) that both misbehave the same way, for the
// fault tests.  Their URLs carry user:password@ so that every message can be
// checked for the masked form.

const assert = require('node:assert/strict');

const { freePort } = require('./cluster');
const { startReceiver } = require('./receiver');
const { startIngest } = require('./ingest');

const USER = 'faultuser';
const PASSWORD = 'fault-s3cret';

// Every answer of the endpoint, per fault.  `down` has no server at all;
// `none` answers 200 (after the scripted `first` answers, a recovery).
const FAULTS = {
	none: {},
	down: null,
	http500: { status: 500, body: 'internal error' },
	throttled: { status: 429, headers: { 'retry-after': '1' } },
	unavailable: { status: 503, headers: { 'retry-after': '1' } },
	hang: { hang: true },
	reset: { reset: true },
	trickle: { trickle: true },
};

const withCredentials = (port) => `http://${USER}:${PASSWORD}@127.0.0.1:${port}`;

/**
 * Start both endpoints failing with FAULTS[fault] on every request (the
 * scripted `first` answers come before it, when given).  Returns
 * {otlp, ingest (null when down), env (the variables pointing the binaries
 * at them), otlpShown, ingestShown (the endpoints as messages must show
 * them)}.  The servers close when test t ends.
 */
async function startFaultyEndpoints(t, fault, { first = [] } = {}) {
	assert.ok(fault in FAULTS, `unknown fault ${fault}`);
	let otlp = null;
	let ingest = null;
	let otlpPort;
	let ingestPort;
	if (fault === 'down') {
		[otlpPort, ingestPort] = await Promise.all([freePort(), freePort()]);
	} else {
		otlp = await startReceiver({ grpc: false });
		t.after(() => otlp.close());
		ingest = await startIngest();
		t.after(() => ingest.close());
		// The receiver has no default answer: script more than any budget uses.
		otlp.enqueue(...first, ...Array.from({ length: 50 }, () => FAULTS[fault]));
		ingest.enqueue(...first).setDefault(FAULTS[fault]);
		otlpPort = otlp.httpPort;
		ingestPort = ingest.port;
	}
	return {
		otlp,
		ingest,
		env: {
			OTEL_EXPORTER_OTLP_ENDPOINT: withCredentials(otlpPort),
			PYROSCOPE_ENABLE: 'true',
			PYROSCOPE_SERVER_ADDRESS: withCredentials(ingestPort),
		},
		otlpShown: `http://***@127.0.0.1:${otlpPort}/v1/traces`,
		ingestShown: `http://***@127.0.0.1:${ingestPort}/ingest`,
	};
}

/** The lines every run prints: trace id, summary, Pyroscope link. */
function unexpectedLines(res, prog) {
	const normal = new RegExp(`^${prog}: (trace_id=[0-9a-f]{32}$|wrote \\d+ records |loaded \\d+ rows |` +
		'profiles of trace [0-9a-f]{32}: )');
	return res.stderr.split('\n').filter((l) => l !== '' && !normal.test(l));
}

/**
 * Pass rule for telemetry failures: beyond the normal lines, stderr holds
 * exactly two warnings, one line each, one naming the span endpoint and one
 * the profile endpoint, both with the password masked; the password
 * appears nowhere.
 */
function checkTelemetryWarnings(res, prog, ep, describe) {
	assert.ok(!res.stderr.includes(PASSWORD), `stderr leaks the endpoint password:\n${describe(res)}`);
	const lines = unexpectedLines(res, prog);
	for (const l of lines)
		assert.ok(l.startsWith(`${prog}: warning: `), `not a warning: ${l}\n${describe(res)}`);
	const spans = lines.filter((l) => l.includes(ep.otlpShown));
	const profiles = lines.filter((l) => l.includes(ep.ingestShown));
	assert.equal(spans.length, 1, `one warning names the span endpoint ${ep.otlpShown}:\n${describe(res)}`);
	assert.match(spans[0], /traces/);
	assert.equal(profiles.length, 1, `one warning names the profile endpoint ${ep.ingestShown}:\n${describe(res)}`);
	assert.match(profiles[0], /Pyroscope/);
	assert.equal(lines.length, 2, `no other warning:\n${describe(res)}`);
}

/**
 * A span endpoint (OTLP/HTTP) and a profile endpoint (/ingest) whose fault
 * is switched while a server keeps its configured URLs: set(fault) with a
 * FAULTS name; 'down' stops both listeners (connection refused), any other
 * name listens again on the same ports if needed and answers every request
 * with FAULTS[fault] ('none': 200).  Starts answering 200.
 *
 * -> {otlp, ingest, otlpUrl, ingestUrl, fault, set(fault), forget()
 *     (drop the recorded requests), close()}
 */
async function startSwitchableEndpoints() {
	const otlp = await startReceiver({ grpc: false });
	let ingest;
	try {
		ingest = await startIngest();
	} catch (err) {
		await otlp.close();
		throw err;
	}
	let down = false;
	const ep = {
		otlp,
		ingest,
		otlpUrl: otlp.httpEndpoint,
		ingestUrl: ingest.url,
		fault: 'none',
		async set(fault) {
			assert.ok(fault in FAULTS, `unknown fault ${fault}`);
			if (fault === 'down') {
				if (!down)
					await Promise.all([otlp.pause(), ingest.pause()]);
				down = true;
			} else {
				otlp.queue = [];
				ingest.queue = [];
				otlp.setDefault(FAULTS[fault]);
				ingest.setDefault(FAULTS[fault]);
				if (down)
					await Promise.all([otlp.resume(), ingest.resume()]);
				down = false;
			}
			ep.fault = fault;
		},
		forget() {
			otlp.requests = [];
			ingest.requests = [];
		},
		close() {
			return Promise.all([otlp.close(), ingest.close()]);
		},
	};
	return ep;
}

/**
 * Flap switchable endpoints: `fault` (default 'down') for periodMs, then
 * up (200) for periodMs, and so on until stop(), which leaves them up.
 * -> {flips (how many switches happened), errors (switches that failed,
 *     e.g. the port taken while down), stop()}
 */
function flapEndpoints(ep, { periodMs = 3000, fault = 'down' } = {}) {
	const state = { flips: 0, errors: [] };
	let running = true;
	let wake = null;
	let timer = null;
	const loop = (async () => {
		for (let next = fault; running; next = next === 'none' ? fault : 'none') {
			await new Promise((r) => {
				wake = r;
				timer = setTimeout(r, periodMs);
			});
			if (!running)
				break;
			try {
				await ep.set(next);
				state.flips++;
			} catch (err) {
				state.errors.push(`${next}: ${err.message}`);
			}
		}
	})();
	state.stop = async () => {
		running = false;
		clearTimeout(timer);
		if (wake)
			wake();
		await loop;
		await ep.set('none');
	};
	return state;
}

module.exports = {
	FAULTS, startFaultyEndpoints, unexpectedLines, checkTelemetryWarnings, PASSWORD,
	startSwitchableEndpoints, flapEndpoints,
};
