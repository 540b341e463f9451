'use strict';
// make demo, end to end: the script the README opens with runs against a
// throwaway cluster and tells the story; check the story it prints and the
// artifacts it leaves (in a temp dir, via DEMO_OUT).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { ROOT } = require('./lib/paths');
const { run } = require('./lib/run');

test('make demo: span tree from loader.run down to the server, top PostgreSQL functions, flame graphs', { timeout: 300000 }, async (t) => {
	const out = fs.mkdtempSync(path.join(os.tmpdir(), 'traceprof-demo-'));
	t.after(() => fs.rmSync(out, { recursive: true, force: true }));
	const res = await run(path.join(ROOT, 'scripts', 'demo.sh'), [], {
		env: { DEMO_OUT: out, DEMO_RECORDS: '20000' },
		timeout: 240000,
	});
	const text = res.stdout + res.stderr;
	assert.equal(res.code, 0, text);

	// The trace, as a tree: client spans with the server's under them.
	const trace = /trace ([0-9a-f]{32}): client spans/.exec(text);
	assert.ok(trace, `the demo names its trace:\n${text}`);
	const tree = fs.readFileSync(path.join(out, 'trace.txt'), 'utf8');
	const lines = tree.split('\n');
	const indexOf = (re) => lines.findIndex((l) => re.test(l));
	const depth = (i) => lines[i].search(/\S/);
	const run_ = indexOf(/^loader\.run +\[traceprof\.loader\]/);
	const copy = indexOf(/└─ loader\.copy +\[traceprof\.loader\]/);
	const serverCopy = indexOf(/└─ COPY orders +\[postgresql\].*cpu [\d.]+ ms, rows written 20000/);
	const commit = indexOf(/└─ loader\.commit/);
	const serverCommit = indexOf(/└─ COMMIT +\[postgresql\]/);
	assert.ok(run_ >= 0 && copy > run_ && serverCopy > copy && commit > serverCopy && serverCommit > commit, tree);
	assert.ok(depth(serverCopy) > depth(copy) && depth(copy) > depth(run_), `COPY orders nests under loader.copy:\n${tree}`);
	assert.ok(depth(serverCommit) > depth(commit), `COMMIT nests under loader.commit:\n${tree}`);
	assert.match(tree, /spans from .*postgresql.*traceprof\.loader|spans from .*traceprof\.loader.*postgresql/);

	// Rows loaded, and where PostgreSQL spent the CPU of that trace.
	assert.match(text, /\n\s*20000 \|/, 'the table holds the 20000 rows');
	const top = text.split('where PostgreSQL spent the CPU')[1];
	assert.ok(top, text);
	const rows = top.split('\n').filter((l) => /^\s*\S.*\|\s*\d+\s*\|\s*\d+\s*\|/.test(l));
	assert.ok(rows.length >= 3, `top functions listed:\n${top}`);
	// Self time spreads over many leaves (memcpy, the JSON lexer, btree
	// compares), so the COPY's share is read from the folded stacks.
	const folded = fs.readFileSync(path.join(out, 'server.folded'), 'utf8').trim().split('\n');
	const count = (keep) => folded.filter(keep).reduce((n, l) => n + Number(l.split(' ').pop()), 0);
	const all = count(() => true);
	const copying = count((l) => /;CopyFrom;/.test(l));
	assert.ok(all >= 10 && copying >= all / 2,
		`most server samples of the trace are under CopyFrom (${copying} of ${all}):\n${folded.join('\n')}`);

	// Artifacts: flame graphs of client and server, the diff, speedscope JSON.
	for (const f of ['server.svg', 'server-diff.svg', 'loader.svg']) {
		const svg = fs.readFileSync(path.join(out, f), 'utf8');
		assert.match(svg, /<svg[^]*<\/svg>\s*$/, `${f} is an SVG`);
	}
	const speedscope = JSON.parse(fs.readFileSync(path.join(out, 'generator.speedscope.json'), 'utf8'));
	assert.equal(speedscope.$schema, 'https://www.speedscope.app/file-format-schema.json');
});
