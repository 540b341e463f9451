'use strict';
// otlp-sink.js - the demo's stand-in for an OpenTelemetry Collector.
//
//   node scripts/demo/otlp-sink.js OUT.jsonl PORT_FILE
//
// Listens for OTLP/HTTP on a free 127.0.0.1 port (written to PORT_FILE once
// ready), decodes each request with @opentelemetry/otlp-transformer's
// generated protobuf root (a decoder we did not write) and appends every
// span as one JSON line to OUT.jsonl.  Stops on SIGTERM/SIGINT.

const fs = require('node:fs');
const { startReceiver } = require('../../tests/integration/lib/receiver');
const { decodeTraces } = require('../../tests/integration/lib/otlp');

// OTLP int64 values decode as BigInt, which JSON cannot hold as such.
function plain(key, value) {
	if (typeof value !== 'bigint')
		return value;
	return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
		? Number(value) : value.toString();
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
