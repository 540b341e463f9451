'use strict';
// otlp-sink.js - the demo's stand-in for an OpenTelemetry Collector.
//
//   node scripts/demo/otlp-sink.js OUT.jsonl PORT_FILE
//
// Listens for OTLP/HTTP on a free 127.0.0.1 port (written to PORT_FILE once
// ready), decodes each request with @opentelemetry/otlp-transformer's
// generated protobuf root (a decoder we did not write) and appends every
// span as one JSON line to OUT.jsonl.  With FORWARD_TO=<OTLP/HTTP base URL>
// every request is also passed on unchanged (to a real collector or Tempo).
// Stops on SIGTERM/SIGINT.

const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const { startReceiver } = require('../../tests/integration/lib/receiver');
const { decodeTraces } = require('../../tests/integration/lib/otlp');

// OTLP int64 values decode as BigInt, which JSON cannot hold as such.
function plain(key, value) {
	if (typeof value !== 'bigint')
		return value;
	return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
		? Number(value) : value.toString();
}

/* Pass one OTLP/HTTP request body on to FORWARD_TO; report, never throw. */
function forward(body) {
	const base = process.env.FORWARD_TO;
	if (!base)
		return;
	const url = new URL(base.replace(/\/+$/, '') + '/v1/traces');
	const req = (url.protocol === 'https:' ? https : http).request(url, {
		method: 'POST',
		headers: { 'content-type': 'application/x-protobuf', 'content-length': body.length },
		timeout: 5000,
	}, (res) => res.resume());
	req.on('error', (err) => console.error(`otlp-sink: forwarding to ${url.origin} failed: ${err.message}`));
	req.on('timeout', () => req.destroy(new Error('timed out')));
	req.end(body);
}

async function main() {
	const [out, portFile] = process.argv.slice(2);
	if (!out || !portFile) {
		console.error('usage: otlp-sink.js OUT.jsonl PORT_FILE');
		process.exit(2);
	}
	const receiver = await startReceiver({ grpc: false });
	const seen = new Set();
	const timer = setInterval(() => {
		for (const request of receiver.requests) {
			if (seen.has(request))
				continue;
			seen.add(request);
			forward(request.body);
			const lines = decodeTraces(request.body).spans.map((s) => JSON.stringify({
				traceId: s.traceId,
				spanId: s.spanId,
				parentSpanId: s.parentSpanId,
				name: s.name,
				kind: s.kind,
				start: s.startTimeUnixNano.toString(),
				end: s.endTimeUnixNano.toString(),
				attributes: s.attributes,
				status: s.status,
				service: s.resource.attributes['service.name'],
			}, plain));
			fs.appendFileSync(out, lines.map((l) => l + '\n').join(''));
		}
	}, 100);
	fs.writeFileSync(portFile, String(receiver.httpPort));
	const stop = async () => {
		clearInterval(timer);
		await receiver.close();
		process.exit(0);
	};
	process.on('SIGTERM', stop);
	process.on('SIGINT', stop);
}

main().catch((err) => {
	console.error(`otlp-sink: ${err.message}`);
	process.exit(1);
});
