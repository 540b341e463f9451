'use strict';
// span-tree.js - print one trace from the demo's span file as a tree.
//
//   node scripts/demo/span-tree.js SPANS.jsonl TRACE_ID
//
// Each line shows the span name, its service, duration, and for server
// spans the backend CPU time, rows and query text.  Exits 1 when the trace
// has no spans (so the demo fails loudly instead of printing nothing).

const fs = require('node:fs');

function ms(nanos) {
	return (Number(BigInt(nanos)) / 1e6).toFixed(2) + ' ms';
}

function describe(span) {
	const a = span.attributes;
	const parts = [`${span.name}  [${span.service}]  ${ms(BigInt(span.end) - BigInt(span.start))}`];
	if (a['traceprof.cpu_time_ns'] !== undefined)
		parts.push(`cpu ${ms(a['traceprof.cpu_time_ns'])}`);
	if (a['db.response.returned_rows'] !== undefined)
		parts.push(`rows ${a['db.response.returned_rows']}`);
	if (a['traceprof.rows_affected'] !== undefined)
		parts.push(`rows written ${a['traceprof.rows_affected']}`);
	if (span.status.code === 2)
		parts.push(`ERROR ${span.status.message}`);
	let line = parts.join(', ');
	if (a['db.query.text'])
		line += `\n      ${String(a['db.query.text']).slice(0, 100)}`;
	return line;
}

function main() {
	const [file, traceId] = process.argv.slice(2);
	const spans = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)
		.map((l) => JSON.parse(l)).filter((s) => s.traceId === traceId);
	if (spans.length === 0) {
		console.error(`span-tree: no spans of trace ${traceId} in ${file}`);
		process.exit(1);
	}
	const ids = new Set(spans.map((s) => s.spanId));
	const children = new Map();
	for (const s of spans) {
		const parent = ids.has(s.parentSpanId) ? s.parentSpanId : '';
		if (!children.has(parent))
			children.set(parent, []);
		children.get(parent).push(s);
	}
	const print = (parent, depth) => {
		const list = (children.get(parent) || []).sort((x, y) => (BigInt(x.start) < BigInt(y.start) ? -1 : 1));
		for (const s of list) {
			console.log('  '.repeat(depth) + (depth ? '└─ ' : '') + describe(s).replace(/\n/g, '\n' + '  '.repeat(depth)));
			print(s.spanId, depth + 1);
		}
	};
	print('', 0);
	const services = new Set(spans.map((s) => s.service));
	console.log(`\n${spans.length} spans from ${[...services].join(', ')} in trace ${traceId}`);
}

main();
