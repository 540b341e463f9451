'use strict';
// The SQL functions over the sample store, as a demanding user calls them:
// traceprof.profile(), profile_top(), flamegraph() and flamegraph_diff() on
// a real cluster.  What extension-profile.test.js, flamegraph.test.js and
// extension-faults.test.js (section 5) cover already is not repeated here:
// this file holds what an audit of the API found besides.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFile } = require('node:child_process');

const { PG_BIN } = require('./lib/paths');
const { startTraced, connect, newContext, traced, sleep, assertRejectsWith } = require('./lib/traced');

/** psql -Atc sql, as the docs show it, its stdout as bytes; env adds to the environment. */
function psqlBytes(cluster, sql, env) {
	return new Promise((resolve, reject) => {
		execFile(path.join(PG_BIN, 'psql'), ['-X', '-At', '-h', cluster.socketDir, '-p', String(cluster.port),
			'-U', 'postgres', '-d', 'app', '-c', sql],
		{ encoding: 'buffer', maxBuffer: 64 << 20, env: { ...process.env, ...env } },
		(err, stdout, stderr) => (err ? reject(new Error(`psql: ${err.message}\n${stderr}`)) : resolve(stdout)));
	});
}

/** Stacks compared frame by frame from the root, a stack before its extensions. */
function compareFrames(a, b) {
	for (let i = 0; i < Math.min(a.length, b.length); i++)
		if (a[i] !== b[i])
			return a[i] < b[i] ? -1 : 1;
	return Math.sign(a.length - b.length);
}

describe('the profile SQL API (one cluster)', () => {
	let cluster;
	let client;
	let ctx;			// a trace with a few hundred samples

	before(async () => {
		cluster = await startTraced({ 'traceprof.sample_hz': '250', jit: 'off' });
		client = await connect(cluster);
		ctx = newContext();
		await traced(client, ctx, 'SELECT sum(g::numeric * g) FROM generate_series(1, 1500000) AS g');
		const n = Number((await client.query('SELECT count(*) AS n FROM traceprof.profile($1)', [ctx.traceId])).rows[0].n);
		assert.ok(n >= 10, `the statement was sampled: ${n} distinct stacks`);
	});

	after(async () => {
		if (client)
			await client.end().catch(() => {});
		if (cluster)
			await cluster.stop();
	});

	test('the SVG read through a client encoding that is not UTF-8 (psql -Atc ... > f.svg) is still well-formed: ' +
		'ASCII, non-ASCII characters as character references', async () => {
		// Before, the unit "µs" (and the subtitle's "·") went out in the
		// client's encoding: byte 0xB5 in a file declaring UTF-8, which
		// xmllint and browsers refuse ("Input is not proper UTF-8").
		for (const fn of ['flamegraph', 'flamegraph_diff']) {
			for (const encoding of ['LATIN1', 'WIN1252']) {
				const bytes = await psqlBytes(cluster, `SELECT traceprof.${fn}('${ctx.traceId}')`,
					{ PGCLIENTENCODING: encoding });
				const nonAscii = bytes.findIndex((b) => b > 0x7f);
				assert.equal(nonAscii, -1, `${fn} through ${encoding}: a byte outside ASCII at ${nonAscii}: ` +
					JSON.stringify(bytes.subarray(Math.max(0, nonAscii - 40), nonAscii + 10).toString('latin1')));
				const svg = bytes.toString('utf8');
				assert.match(svg, /^<\?xml version="1.0" encoding="UTF-8"/);
				assert.match(svg, / data-unit="&#181;s"/, `${fn} through ${encoding}: the unit as a reference`);
				if (fn === 'flamegraph_diff')
					assert.match(svg, / &#183; colour: /, `${fn} through ${encoding}: the subtitle's separator as a reference`);
				assert.match(svg, /<\/svg>\n+$/, `${fn} through ${encoding}: the whole document`);
			}
		}
		// Through UTF-8 the document is UTF-8 as before.
		const utf8 = (await psqlBytes(cluster, `SELECT traceprof.flamegraph('${ctx.traceId}')`, { PGCLIENTENCODING: 'UTF8' }))
			.toString('utf8');
		assert.match(utf8, / data-unit="\u00b5s"/);
	});

	test('argument errors name the bad argument and say what is expected (errhint), first argument first', async () => {
		const hint = /32 lowercase hex digits/;
		for (const sql of ['SELECT * FROM traceprof.profile($1)', 'SELECT * FROM traceprof.profile_top($1)',
			'SELECT traceprof.flamegraph($1)', 'SELECT traceprof.flamegraph_diff($1)'])
			await assertRejectsWith(client.query(sql, [null]), '22004', /^trace_id must not be NULL$/, hint);
		// Both arguments bad: the first one is reported.
		await assertRejectsWith(client.query('SELECT * FROM traceprof.profile_top(NULL, -1)'),
			'22004', /^trace_id must not be NULL$/, hint);
		for (const n of [-1, -2147483648])
			await assertRejectsWith(client.query('SELECT * FROM traceprof.profile_top($1, $2)', [ctx.traceId, n]),
				'22023', new RegExp(`^invalid n ${n}$`), /0 or more.*NULL/);
	});

	test('the functions\' comments (\\df+, obj_description) say what they do: profile_top ranks by self time, ' +
		'profile() returns the heaviest stacks first', async () => {
		// Before, profile_top's comment said "the most samples" while it ranks
		// by self_ns (samples taken at another sample_hz weigh their time).
		const comment = async (fn) => (await client.query(
			'SELECT obj_description($1::regprocedure, \'pg_proc\') AS c', [fn])).rows[0].c;
		const top = await comment('traceprof.profile_top(text, int, text)');
		assert.match(top, /most self time/, top);
		assert.doesNotMatch(top, /most samples/, top);
		assert.match(await comment('traceprof.profile(text, text)'), /heaviest first/);
	});

	test('the samples of a statement that failed belong to the role that ran it, not the one its abort restored', async () => {
		// Samples are stored at the transaction's end; after an abort,
		// PostgreSQL has put back the role the transaction began with.
		// Before, they were stored under that role: alice, who began the
		// transaction, could read the stacks of what the superuser ran.
		const c = await connect(cluster);
		await client.query('CREATE ROLE traceprof_sampled_alice');
		try {
			const failed = newContext();
			await c.query('SET ROLE traceprof_sampled_alice');
			await c.query('BEGIN');
			await c.query('RESET ROLE');
			await c.query(`SET traceprof.traceparent = '${failed.header}'`);
			await assert.rejects(c.query('SELECT sum(g::numeric * g) / 0 FROM generate_series(1, 1500000) AS g'),
				(e) => e.code === '22012');
			await c.query('ROLLBACK');
			const stacks = async () => Number((await c.query(
				'SELECT count(*) AS n FROM traceprof.profile($1)', [failed.traceId])).rows[0].n);
			assert.equal((await c.query('SELECT current_user AS u')).rows[0].u, 'traceprof_sampled_alice',
				'the rollback restored alice');
			assert.equal(await stacks(), 0, 'alice sees none of the superuser\'s samples');
			await c.query('RESET ROLE');
			assert.ok(await stacks() > 0, 'the superuser sees them');
		} finally {
			await c.end();
			await client.query('DROP ROLE traceprof_sampled_alice');
		}
	});

	test('profile() returns the heaviest stacks first, in the same order every call', async () => {
		// Before, rows came in the order of a hash table: SELECT * ... LIMIT 10
		// showed ten arbitrary stacks, not the ten heaviest.
		const sql = 'SELECT span_name, stack, samples, nanoseconds FROM traceprof.profile($1)';
		const rows = (await client.query(sql, [ctx.traceId])).rows;
		for (let i = 1; i < rows.length; i++) {
			const [a, b] = [rows[i - 1], rows[i]];
			const order = Math.sign(Number(b.nanoseconds) - Number(a.nanoseconds)) ||
				Math.sign(Number(b.samples) - Number(a.samples)) ||
				(a.span_name < b.span_name ? -1 : a.span_name > b.span_name ? 1 : 0) ||
				compareFrames(a.stack.split(';'), b.stack.split(';'));
			assert.ok(order < 0, `row ${i - 1} before row ${i}: ${JSON.stringify(a)} / ${JSON.stringify(b)}`);
		}
		assert.deepEqual((await client.query(sql, [ctx.traceId])).rows, rows, 'the same order again');
	});
	test('names cut to fit the name table stay distinct: two LATIN1 tables\' span names, alike in their first 95 UTF-8 bytes, ' +
		'end in different hashes', async () => {
		// 62 "é" and one letter: 63 bytes in LATIN1, 132 as a UTF-8 span
		// name. Before, both were cut to the same 95 bytes, and one table's
		// samples showed under the other's name.
		await client.query("CREATE DATABASE names_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
		const latin1 = await connect(cluster, 'postgres', 'names_latin1');
		try {
			const names = {};
			for (const last of ['a', 'b']) {
				const table = `${'\u00e9'.repeat(62)}${last}`;
				const ctx = newContext();
				await latin1.query(`CREATE TABLE "${table}" (x int); INSERT INTO "${table}" VALUES (1)`);
				await traced(latin1, ctx, `SELECT sum(g::numeric * g) FROM "${table}", generate_series(1, 1500000) AS g`);
				const rows = (await client.query('SELECT DISTINCT span_name FROM traceprof.profile($1)', [ctx.traceId])).rows;
				assert.equal(rows.length, 1, JSON.stringify(rows));
				names[last] = rows[0].span_name;
			}
			for (const name of Object.values(names)) {
				assert.ok(Buffer.byteLength(name) <= 95, `${name}: at most 95 bytes`);
				assert.match(name, /^SELECT \u00e9+~[0-9a-f]{8}$/, 'cut on a character, then "~" and a hash');
			}
			assert.notEqual(names.a, names.b, 'the two tables\' spans keep distinct names');
		} finally {
			await latin1.end();
			await client.query('DROP DATABASE names_latin1');
		}
	});
});

describe('reading while the sample store is written (own cluster, a ring of 1024 samples)', () => {
	let cluster;

	before(async () => {
		cluster = await startTraced({
			'traceprof.sample_hz': '250', 'traceprof.max_samples': '1024', 'traceprof.backend_samples': '128', jit: 'off',
		});
	});

	after(async () => {
		if (cluster)
			await cluster.stop();
	});

	test('no torn read: while two sessions overwrite the ring, a trace\'s rows never carry the other trace\'s frames', async (t) => {
		// A runs numeric work, B md5 (libcrypto): a copy of a slot taken
		// while a writer refills it would show one trace's id with the
		// other's frames.  The ring comes round every second or two.
		const a = newContext();
		const b = newContext();
		const writers = [await connect(cluster), await connect(cluster)];
		const reader = await connect(cluster);
		// At least 3 s, until the ring came round one and a half times (at most 20 s on a loaded machine).
		const start = Date.now();
		const storedNow = async () => Number((await reader.query('SELECT samples_stored AS n FROM traceprof.stats')).rows[0].n);
		let stop = false;
		const write = async (c, ctx, sql) => {
			while (!stop)
				await traced(c, ctx, sql);
		};
		const running = [
			write(writers[0], a, 'SELECT sum(g::numeric * g) FROM generate_series(1, 200000) AS g'),
			write(writers[1], b, 'SELECT count(DISTINCT md5(g::text)) FROM generate_series(1, 60000) AS g'),
		];
		let reads = 0;
		let rowsA = 0;
		let rowsB = 0;
		try {
			while (Date.now() - start < 3000 || (Date.now() - start < 20000 && await storedNow() < 1536)) {
				const pa = (await reader.query('SELECT span_name, stack, samples FROM traceprof.profile($1)', [a.traceId])).rows;
				const pb = (await reader.query('SELECT span_name, stack, samples FROM traceprof.profile($1)', [b.traceId])).rows;
				const top = (await reader.query('SELECT function FROM traceprof.profile_top($1, NULL)', [a.traceId])).rows;
				const svg = (await reader.query('SELECT traceprof.flamegraph($1) AS svg', [a.traceId])).rows[0].svg;
				reads++;
				rowsA += pa.length;
				rowsB += pb.length;
				for (const r of pa) {
					assert.doesNotMatch(r.stack, /md5|libcrypto|OPENSSL|EVP_/, `a row of A with B's frames: ${r.stack}`);
					// Its statement's span, or its planning's (track_planning is on here).
					assert.ok(['SELECT', 'plan'].includes(r.span_name), `a row of A under span ${r.span_name}`);
					assert.ok(Number(r.samples) > 0);
				}
				for (const r of pb)
					assert.doesNotMatch(r.stack, /numeric_mul|int4_numeric/, `a row of B with A's frames: ${r.stack}`);
				assert.ok(!top.some((f) => /md5|libcrypto|OPENSSL|EVP_/.test(f.function)), 'profile_top of A names no frame of B');
				assert.doesNotMatch(svg, /data-n="[^"]*(md5|libcrypto|OPENSSL|EVP_)/, 'the flame graph of A draws no frame of B');
				await sleep(50);	// two cores: leave the writers most of them
			}
		} finally {
			stop = true;
			await Promise.all(running).catch(() => {});
			for (const c of [...writers, reader])
				await c.end().catch(() => {});
		}
		t.diagnostic(`${reads} rounds of reads, ${rowsA} rows of A and ${rowsB} of B`);
		assert.ok(reads >= 10 && rowsA > 0 && rowsB > 0, `the reads saw both traces: ${reads} rounds, ${rowsA} / ${rowsB} rows`);
		const stored = Number(await cluster.psql('SELECT samples_stored FROM traceprof.stats'));
		t.diagnostic(`${stored} samples stored in ${Date.now() - start} ms`);
		assert.ok(stored > 1024, `the ring of 1024 came round while it was read: ${stored} samples stored`);
	});
});

// Nothing frees a frame or span name until restart (span names hold their
// table's name, which a role that may trace makes up): span names may take
// only half of traceprof.max_functions, so frames keep being named however
// many tables are traced.  The operator must be able to see it.
test('span names fill half of traceprof.max_functions at most: counted (names_overflow), logged once, named by their operation, frames still named', async (t) => {
	const TABLES = 1100;	// span names "SELECT t<i>", beyond a table of 1024 names
	const cluster = await startTraced({
		'traceprof.max_functions': '1024', 'traceprof.sample_hz': '250', 'traceprof.profile_mode': 'wall',
		'traceprof.track': 'all', jit: 'off',
	});
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	await client.query(`DO $$ BEGIN FOR i IN 1..${TABLES} LOOP EXECUTE format('CREATE TABLE t%s AS SELECT 1 AS a', i); END LOOP; END $$`);
	const ctx = newContext();
	// Each nested SELECT sleeps 8 ms: two wall samples at 250 Hz, under its
	// own span.  In statements of 275: the backend's ring (2048 samples)
	// is drained at each one's end.
	for (let first = 1; first <= TABLES; first += 275) {
		await traced(client, ctx, `DO $$ BEGIN FOR i IN ${first}..${first + 274} LOOP
			EXECUTE format('SELECT pg_sleep(0.008) FROM t%s', i); END LOOP; END $$`);
	}
	const overflow = Number((await client.query('SELECT names_overflow FROM traceprof.stats')).rows[0].names_overflow);
	assert.ok(overflow > 0, `span names that found their half full are counted: ${overflow}`);
	const rows = (await client.query('SELECT span_name, stack FROM traceprof.profile($1)', [ctx.traceId])).rows;
	const spanNames = new Set(rows.map((r) => r.span_name));
	const own = [...spanNames].filter((n) => /^SELECT t\d+$/.test(n)).length;
	t.diagnostic(`${rows.length} rows, ${spanNames.size} distinct span names (${own} with their table), names_overflow ${overflow}`);
	assert.ok(own > 400 && own <= 512, `span names kept their table up to half of 1024 names: ${own}`);
	assert.ok(spanNames.has('SELECT'), 'span names past their half are named by their operation');
	assert.ok(!spanNames.has('[too many functions]'), 'no span name is lost');
	assert.ok(!spanNames.has(''), 'no sample reads as taken outside a span');
	const log = cluster.readLog().split('\n');
	const logged = log.filter((l) => /span names fill their half of traceprof\.max_functions \(1024\)/.test(l));
	assert.equal(logged.length, 1, `one LOG line, however many names overflow:\n${logged.join('\n')}`);
	assert.ok(!log.some((l) => /traceprof\.max_functions \(1024\) is full/.test(l)), 'the table itself is not full');

	// Frames first seen now still get names of their own.
	const later = newContext();
	await traced(client, later, 'SELECT count(*) FROM generate_series(1, 3000000)');
	const stacks = (await client.query('SELECT stack FROM traceprof.profile($1)', [later.traceId])).rows.map((r) => r.stack);
	assert.ok(stacks.length > 0, 'the later statement was sampled');
	assert.ok(stacks.some((s) => s.split(';').includes('ExecAgg')), `its frames are named:\n${stacks.slice(0, 3).join('\n')}`);
	assert.ok(!stacks.some((s) => s.includes('[too many functions]')), 'no frame is lost');
});
