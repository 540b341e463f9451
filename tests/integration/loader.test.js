'use strict';
// loader URL FILE: a generated file lands in PostgreSQL exactly; bad input
// and database errors give their documented exit code (0 loaded, 2 usage,
// 3 bad input, 4 database), a message naming the place, and zero rows.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { GENERATOR, LOADER, requireExecutable } = require('./lib/paths');
const { run, describe, closeOutputAfterFirstLine } = require('./lib/run');
const { startCluster, freePort } = require('./lib/cluster');
const { startReceiver } = require('./lib/receiver');
const { decodeTraces } = require('./lib/otlp');
const { makeTempDir, removeTempDir } = require('./lib/tmp');
const { sampleRecords, serialize, ORDERS_DDL } = require('./lib/records');
const { tableState, compareChecksums, compareRows, tableShape } = require('./lib/loadcheck');

const N = 50000;
let cluster;
let dir;
let jsonFile;
let ndjsonFile;

before(async () => {
	requireExecutable(GENERATOR);
	requireExecutable(LOADER);
	dir = makeTempDir('traceprof-load-');
	cluster = await startCluster();
	jsonFile = path.join(dir, 'orders.json');
	ndjsonFile = path.join(dir, 'orders.ndjson');
	const gens = await Promise.all([
		run(GENERATOR, [String(N), jsonFile, '--seed', '11']),
		run(GENERATOR, [String(N), ndjsonFile, '--seed', '12', '--format', 'ndjson']),
	]);
	for (const g of gens)
		assert.equal(g.code, 0, describe(g));
});

after(async () => {
	if (cluster)
		await cluster.stop();
	removeTempDir(dir);
});

function load(args, options = {}) {
	return run(LOADER, args, { timeout: 120000, ...options });
}

const EXPECTED_COLUMNS = 'id bigint NOT NULL, customer_id bigint NOT NULL, customer_name text NOT NULL, ' +
	'amount numeric(12,2) NOT NULL, currency text NOT NULL, created_at timestamp with time zone NOT NULL, ' +
	'tags text[] NOT NULL, attributes jsonb NOT NULL';

async function assertLoadedExactly(table, file, format) {
	const state = await tableState(cluster, table);
	const { expected, actual } = await compareChecksums(cluster, table, file, format);
	assert.equal(state, expected.count, `row count of ${table}`);
	assert.deepEqual(actual, expected, `checksums of ${table} vs ${file}`);
	const rows = await compareRows(cluster, table, file, format);
	assert.deepEqual({ missing: rows.missing, extra: rows.extra, differing: rows.differing },
		{ missing: 0, extra: 0, differing: 0 },
		`rows of ${table} vs PostgreSQL's reading of ${file}: ${JSON.stringify(rows.samples)}`);
}

test('generator 50000 (json) -> loader: every row arrives exactly', async () => {
	const res = await load([cluster.url(), jsonFile]);
	assert.equal(res.code, 0, describe(res));
	assert.doesNotMatch(res.stderr, /:secret@|password=secret/, 'the password is not printed');
	const shape = await tableShape(cluster, 'orders');
	assert.equal(shape.columns, EXPECTED_COLUMNS, 'the table the loader creates');
	assert.equal(shape.primaryKey, 'id');
	await assertLoadedExactly('orders', jsonFile, 'json');
});

test('generator 50000 --format ndjson -> loader --table: every row arrives exactly', async () => {
	const res = await load([cluster.url(), ndjsonFile, '--table', 'orders_nd']);
	assert.equal(res.code, 0, describe(res));
	assert.equal((await tableShape(cluster, 'orders_nd')).columns, EXPECTED_COLUMNS);
	await assertLoadedExactly('orders_nd', ndjsonFile, 'ndjson');
});

test('awkward but valid records load exactly (escapes, non-ASCII, BOM, whitespace)', async (t) => {
	const recs = sampleRecords(60);
	const cases = [
		['json', serialize(recs, 'json'), 'json'],
		['ndjson', serialize(recs, 'ndjson'), 'ndjson'],
		['json-bom', '\ufeff' + serialize(recs, 'json'), 'json'],
		['ndjson-bom-leading-blank', '\ufeff\n \n' + serialize(recs, 'ndjson'), 'ndjson'],
		['json-compact', JSON.stringify(recs), 'json'],
		['json-pretty', JSON.stringify(recs, null, 2) + '\n', 'json'],
	];
	for (const [name, text, format] of cases) {
		await t.test(name, async () => {
			const file = path.join(dir, `sample-${name}.${format}`);
			fs.writeFileSync(file, text);
			const table = `sample_${name.replace(/-/g, '_')}`;
			const res = await load([cluster.url(), file, '--table', table]);
			assert.equal(res.code, 0, describe(res));
			// PostgreSQL reads the BOM-less, blank-less equivalent.
			const plain = path.join(dir, `sample-${name}.plain.${format}`);
			fs.writeFileSync(plain, serialize(recs, format));
			await assertLoadedExactly(table, plain, format);
		});
	}
});

// ---- bad input: exit 3, zero rows -------------------------------------

// Five records; the defect goes into record 4 (1-based) so that the
// message has to name that record, and where in the file it is.  --help
// documents the message:
//   loader: error: FILE: record N (line L, column C, byte offset O): what
// (lines and columns from 1, columns in bytes, offsets from 0).
const GOOD = sampleRecords(5).map((r) => JSON.stringify(r));

const rec4 = () => JSON.parse(GOOD[3]);
function rec4With(mutate) {
	const r = rec4();
	mutate(r);
	return JSON.stringify(r);
}

/**
 * A five-record file with text4 as record 4.  Returns the bytes and where
 * record 4 is: {content, line, start, end} (end: just past its last byte).
 * raw4: optional Buffer replacing text4's bytes (same length).
 */
function withRecord4(text4, format = 'json', { raw4, truncateAfter } = {}) {
	const texts = GOOD.slice();
	texts[3] = text4;
	const before = format === 'json'
		? '[\n' + texts.slice(0, 3).join(',\n') + ',\n'
		: texts.slice(0, 3).map((x) => x + '\n').join('');
	let content = Buffer.from(serialize(texts, format));
	const start = Buffer.byteLength(before);
	let end = start + Buffer.byteLength(text4);
	if (raw4)
		raw4.copy(content, start);
	if (truncateAfter !== undefined) {
		content = content.subarray(0, start + truncateAfter);
		end = content.length;
	}
	return { content, line: format === 'json' ? 5 : 4, start, end };
}

function invalidUtf8Record() {
	const text4 = rec4With((r) => { r.customer_name = 'BAD@@BYTE'; });
	const raw = Buffer.from(text4);
	const at = raw.indexOf('@@');
	raw[at] = 0xff;
	raw[at + 1] = 0x41;
	return withRecord4(text4, 'json', { raw4: raw });
}

const BAD_RECORD_CASES = [
	['wrong type: "id":"x"', () => withRecord4(GOOD[3].replace(/"id":4/, '"id":"x"'))],
	['wrong type: tags is a string', () => withRecord4(rec4With((r) => { r.tags = 'gift'; }))],
	['wrong type: a tag is a number', () => withRecord4(rec4With((r) => { r.tags = ['a', 1]; }))],
	['wrong type: attributes is an array', () => withRecord4(rec4With((r) => { r.attributes = [1]; }))],
	['wrong type: amount is a string', () => withRecord4(GOOD[3].replace(/"amount":([^,]+)/, '"amount":"$1"'))],
	['null outside attributes', () => withRecord4(rec4With((r) => { r.customer_name = null; }))],
	['record is not an object', () => withRecord4('[1,2]')],
	['extra key', () => withRecord4(rec4With((r) => { r.extra = 1; }))],
	['missing key', () => withRecord4(rec4With((r) => { delete r.currency; }))],
	['repeated key', () => withRecord4(GOOD[3].replace(/^\{/, '{"currency":"USD",'))],
	['bad timestamp (month 13)', () => withRecord4(rec4With((r) => { r.created_at = '2026-13-01T00:00:00Z'; }))],
	['bad timestamp (no offset)', () => withRecord4(rec4With((r) => { r.created_at = '2026-03-14T09:26:53'; }))],
	['bad timestamp (Feb 30)', () => withRecord4(rec4With((r) => { r.created_at = '2026-02-30T00:00:00Z'; }))],
	['bad timestamp (7 fraction digits)', () => withRecord4(rec4With((r) => { r.created_at = '2026-03-14T09:26:53.1234567Z'; }))],
	['amount with 3 decimals', () => withRecord4(GOOD[3].replace(/"amount":[^,]+/, '"amount":1.234'))],
	['amount with an exponent', () => withRecord4(GOOD[3].replace(/"amount":[^,]+/, '"amount":1e3'))],
	['amount with 11 integer digits', () => withRecord4(GOOD[3].replace(/"amount":[^,]+/, '"amount":12345678901.5'))],
	['id beyond 64 bits', () => withRecord4(GOOD[3].replace(/"id":4/, '"id":9223372036854775808'))],
	['id with a fraction', () => withRecord4(GOOD[3].replace(/"id":4/, '"id":4.5'))],
	['currency not 3 uppercase letters', () => withRecord4(rec4With((r) => { r.currency = 'eur'; }))],
	['U+0000 in customer_name', () => withRecord4(rec4With((r) => { r.customer_name = 'a\u0000b'; }))],
	['invalid UTF-8 byte', invalidUtf8Record],
	['lone surrogate escape', () => withRecord4(GOOD[3].replace(/"customer_name":"[^"]*"/, '"customer_name":"x\\ud800y"'))],
	['truncated JSON (cut mid-record)', () => withRecord4(GOOD[3], 'json', { truncateAfter: 25 })],
	['ndjson: wrong type on line 4', () => withRecord4(GOOD[3].replace(/"id":4/, '"id":"x"'), 'ndjson')],
	['ndjson: truncated line 4', () => withRecord4(GOOD[3].slice(0, 30), 'ndjson')],
];

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The documented error line for record 4 of file, checked against where it really is. */
function assertRecordError(res, file, where) {
	const re = new RegExp(`^loader: error: ${escapeRe(file)}: record 4 \\(line (\\d+), column (\\d+), byte offset (\\d+)\\): \\S`, 'm');
	const m = re.exec(res.stderr);
	assert.ok(m, `stderr has "loader: error: ${file}: record 4 (line L, column C, byte offset O): ..."\n${describe(res)}`);
	const [line, column, offset] = m.slice(1).map(Number);
	assert.equal(line, where.line, `line of record 4\n${m[0]}`);
	assert.ok(offset >= where.start && offset <= where.end,
		`byte offset ${offset} lies within record 4 (${where.start}..${where.end})\n${m[0]}`);
	assert.equal(column, offset - where.start + 1, `column matches the byte offset\n${m[0]}`);
}

test('bad records: exit 3, the message names the record and the place, zero rows', async (t) => {
	let n = 0;
	for (const [name, make] of BAD_RECORD_CASES) {
		n++;
		await t.test(name, async () => {
			const where = make();
			const file = path.join(dir, `bad-${n}.json`);
			fs.writeFileSync(file, where.content);
			const table = `bad_${n}`;
			const res = await load([cluster.url(), file, '--table', table]);
			assert.equal(res.code, 3, describe(res));
			assertRecordError(res, file, where);
			assert.doesNotMatch(res.stderr, /:secret@/);
			const state = await tableState(cluster, table);
			assert.ok(state === 'absent' || state === '0', `table ${table} must be absent or empty, is ${state}`);
		});
	}
});

test('unusable files (missing, empty, no records, not JSON): exit 3, zero rows', async (t) => {
	const cases = [
		['missing file', null],
		['empty file', ''],
		['only whitespace', ' \n\t\n'],
		['only a BOM', '\ufeff'],
		['[] (zero records)', '[]\n'],
		['[ ] with blanks (zero records)', '[ \n ]'],
		['not JSON', 'hello\n'],
		['a top-level string', '"x"\n'],
		['an array that never closes', '[\n'],
		['trailing garbage after the array', serialize(GOOD.slice(0, 2), 'json') + 'x\n'],
		['two arrays', serialize(GOOD.slice(0, 2), 'json') + serialize(GOOD.slice(2, 3), 'json')],
	];
	let n = 0;
	for (const [name, content] of cases) {
		n++;
		await t.test(name, async () => {
			const file = path.join(dir, `unusable-${n}.json`);
			if (content !== null)
				fs.writeFileSync(file, content);
			const table = `unusable_${n}`;
			const res = await load([cluster.url(), file, '--table', table]);
			assert.equal(res.code, 3, describe(res));
			assert.match(res.stderr, new RegExp(`^loader: error: .*${escapeRe(file)}`, 'm'),
				`the error names the input file\n${describe(res)}`);
			const state = await tableState(cluster, table);
			assert.ok(state === 'absent' || state === '0', `table ${table} must be absent or empty, is ${state}`);
		});
	}
});

test('--batch-size: batches committed before a bad record stay, and the message says how many', async () => {
	const where = withRecord4(GOOD[3].replace(/"id":4/, '"id":"x"'));
	const file = path.join(dir, 'batched.json');
	fs.writeFileSync(file, where.content);
	const res = await load([cluster.url(), file, '--table', 'batched', '--batch-size', '2']);
	assert.equal(res.code, 3, describe(res));
	assertRecordError(res, file, where);
	assert.equal(await cluster.psql('SELECT string_agg(id::text, \',\' ORDER BY id) FROM batched'), '1,2',
		'records 1-2 (the first batch) are committed, the failed batch is not');
	assert.match(res.stderr, /\b2 rows?\b/, `the message says 2 rows stay committed\n${describe(res)}`);
});

// ---- database errors: exit 4 ------------------------------------------

test('duplicate id: the server rejects it, exit 4, zero rows', async () => {
	const texts = GOOD.slice();
	texts[3] = GOOD[3].replace(/"id":4/, '"id":2');
	const file = path.join(dir, 'dup.json');
	fs.writeFileSync(file, serialize(texts));
	const res = await load([cluster.url(), file, '--table', 'dup_ids']);
	assert.equal(res.code, 4, describe(res));
	assert.match(res.stderr,
		new RegExp(`^loader: error: ${escapeRe(file)}: record 4: rejected by the server: .*duplicate key`, 'm'),
		describe(res));
	assert.doesNotMatch(res.stderr, /:secret@/);
	const state = await tableState(cluster, 'dup_ids');
	assert.ok(state === 'absent' || state === '0', `table must be absent or empty, is ${state}`);
});

test('a conflict with existing rows leaves the table as it was', async () => {
	await cluster.psql(`CREATE TABLE existing ${ORDERS_DDL};
		ALTER TABLE existing OWNER TO app;
		INSERT INTO existing VALUES (5, 1, 'keep me', 1.00, 'EUR', now(), '{}', '{}');`);
	const file = path.join(dir, 'conflict.json');
	fs.writeFileSync(file, serialize(GOOD));
	const res = await load([cluster.url(), file, '--table', 'existing']);
	assert.equal(res.code, 4, describe(res));
	assert.match(res.stderr,
		new RegExp(`^loader: error: ${escapeRe(file)}: record 5: rejected by the server: .*duplicate key`, 'm'),
		describe(res));
	assert.equal(await cluster.psql('SELECT count(*) || customer_name FROM existing GROUP BY customer_name'), '1keep me');
});

test('an existing table whose columns cannot take the records unchanged is refused before any row is sent (exit 4); ' +
	'ones that can are loaded', async (t) => {
	const columns = (over) => Object.entries({
		id: 'bigint', customer_id: 'bigint', customer_name: 'text', amount: 'numeric(12,2)', currency: 'text',
		created_at: 'timestamptz', tags: 'text[]', attributes: 'jsonb', ...over,
	}).filter(([, type]) => type !== null).map(([name, type]) => `${name} ${type}`).join(', ');
	const file = path.join(dir, 'existing-types.json');
	fs.writeFileSync(file, serialize(GOOD));
	await cluster.psql('CREATE DOMAIN money_whole AS numeric(12,0); CREATE DOMAIN money_whole_too AS money_whole; ' +
		'CREATE DOMAIN money_cents AS numeric(12,2); CREATE DOMAIN money_cents_too AS money_cents');
	const refused = [
		['no amount column', { amount: null }, /has no column "amount"/],
		['id int', { id: 'int' }, /column "id" of table .* has type integer, but the loader sends bigint/],
		['amount numeric(14,0): rounds to whole units', { amount: 'numeric(14,0)' },
			/column "amount" of table .* has type numeric\(14,0\), which would round the loader's values \(numeric with 2 decimal places\)/],
		['amount numeric(12,1)', { amount: 'numeric(12,1)' }, /has type numeric\(12,1\), which would round/],
		['amount of a domain over numeric(12,0)', { amount: 'money_whole' }, /has type money_whole, which would round/],
		['amount of a domain over that domain', { amount: 'money_whole_too' }, /has type money_whole_too, which would round/],
		['created_at timestamptz(0): rounds to seconds', { created_at: 'timestamptz(0)' },
			/column "created_at" of table .* has type timestamp\(0\) with time zone, which would round the loader's values \(timestamptz with microseconds\)/],
	];
	let n = 0;
	for (const [what, over, message] of refused) {
		await t.test(`refused: ${what}`, async () => {
			const table = `typed_${n++}`;
			await cluster.psql(`CREATE TABLE ${table} (${columns(over)}); ALTER TABLE ${table} OWNER TO app`);
			const res = await load([cluster.url(), file, '--table', table]);
			assert.equal(res.code, 4, describe(res));
			assert.match(res.stderr, message, describe(res));
			assert.equal(await tableState(cluster, table), '0', 'nothing loaded');
		});
	}
	for (const [what, over] of [['numeric', { amount: 'numeric' }], ['numeric(14,4)', { amount: 'numeric(14,4)' }],
		['timestamptz(6)', { created_at: 'timestamptz(6)' }], ['varchar(200) names', { customer_name: 'varchar(200)' }],
		['a domain over a domain over numeric(12,2)', { amount: 'money_cents_too' }]]) {
		await t.test(`loaded: ${what}`, async () => {
			const table = `typed_${n++}`;
			await cluster.psql(`CREATE TABLE ${table} (${columns(over)}); ALTER TABLE ${table} OWNER TO app`);
			const res = await load([cluster.url(), file, '--table', table]);
			assert.equal(res.code, 0, describe(res));
			assert.equal(await tableState(cluster, table), String(GOOD.length));
		});
	}
});

test('a role that may only INSERT into an existing table (no CREATE on its schema) loads into it', async () => {
	// CREATE TABLE IF NOT EXISTS checks the schema's CREATE right before it
	// looks for the table: the loader failed with "permission denied for
	// schema public" for a role psql's COPY served.
	await cluster.psql(`CREATE ROLE inserter LOGIN PASSWORD 'ins-secret';
		CREATE TABLE insert_only ${ORDERS_DDL};
		GRANT SELECT, INSERT ON insert_only TO inserter;`);
	assert.equal(await cluster.psql("SELECT has_schema_privilege('inserter', 'public', 'CREATE')"), 'f');
	const file = path.join(dir, 'insert-only.json');
	fs.writeFileSync(file, serialize(GOOD));
	const res = await load([cluster.url('inserter', 'ins-secret'), file, '--table', 'insert_only']);
	assert.equal(res.code, 0, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM insert_only'), String(GOOD.length));
	// A table it would have to create is refused by the server, as before.
	const refused = await load([cluster.url('inserter', 'ins-secret'), file, '--table', 'not_made']);
	assert.equal(refused.code, 4, describe(refused));
	assert.match(refused.stderr, /^loader: error: cannot create table not_made: permission denied for schema public/m, describe(refused));
});

test('two loaders creating the same missing table at once: the second waits for the first, then loads into its table', async () => {
	// The second's CREATE TABLE waited for the first's uncommitted one, then
	// failed: "cannot create table: duplicate key value violates unique
	// constraint pg_type_typname_nsp_index" (helper-102's review).
	const big = path.join(dir, 'race-big.json');
	const gen = await run(GENERATOR, ['150000', big, '--seed', '21']);
	assert.equal(gen.code, 0, describe(gen));
	const small = path.join(dir, 'race-small.json');
	fs.writeFileSync(small, serialize(sampleRecords(5, 10000000)));
	const first = load([cluster.url(), big, '--table', 'raced']);
	await waitFor(async () => (await cluster.psql(
		"SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND query LIKE 'COPY%'")) === '1',
	20000, 'the first loader is in its COPY, after its CREATE TABLE');
	const second = await load([cluster.url(), small, '--table', 'raced']);
	const res = await first;
	assert.equal(res.code, 0, describe(res));
	assert.equal(second.code, 0, describe(second));
	assert.equal(await cluster.psql('SELECT count(*) FROM raced'), '150005');
});

test('a COPY cancelled or timed out at some record: the message blames the COPY, not the record', async () => {
	// copy_failure() blamed the record the COPY had reached whatever the
	// error: "record 3: rejected by the server: canceling statement due
	// to statement timeout" sent the user to a record that was fine.
	await cluster.psql(`CREATE TABLE slow_rows ${ORDERS_DDL};
		ALTER TABLE slow_rows OWNER TO app;
		CREATE FUNCTION slow_rows_wait() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN IF NEW.id = ${JSON.parse(GOOD[2]).id} THEN PERFORM pg_sleep(5); END IF; RETURN NEW; END $$;
		CREATE TRIGGER slow_rows_wait BEFORE INSERT ON slow_rows FOR EACH ROW EXECUTE FUNCTION slow_rows_wait();`);
	const file = path.join(dir, 'slow-rows.json');
	fs.writeFileSync(file, serialize(GOOD));
	const url = `${cluster.url()}&options=${encodeURIComponent('-c statement_timeout=500')}`;
	const res = await load([url, file, '--table', 'slow_rows']);
	assert.equal(res.code, 4, describe(res));
	assert.match(res.stderr, /^loader: error: COPY into slow_rows failed at record 3: canceling statement due to statement timeout/m,
		describe(res));
	assert.doesNotMatch(res.stderr, /rejected/, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM slow_rows'), '0');
});

test('COMMIT refused by a deferred constraint: one error, no warning about a ROLLBACK with no transaction', async () => {
	// The loader sent ROLLBACK after the failed COMMIT had ended the
	// transaction, and printed the server's "there is no transaction in progress".
	await cluster.psql(`CREATE TABLE refused_commit ${ORDERS_DDL};
		ALTER TABLE refused_commit OWNER TO app;
		CREATE FUNCTION refused_commit_check() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'record % refused at commit', NEW.id; END $$;
		CREATE CONSTRAINT TRIGGER refused_commit_check AFTER INSERT ON refused_commit DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (NEW.id = ${JSON.parse(GOOD[1]).id}) EXECUTE FUNCTION refused_commit_check();`);
	const file = path.join(dir, 'refused-commit.json');
	fs.writeFileSync(file, serialize(GOOD));
	const res = await load([cluster.url(), file, '--table', 'refused_commit']);
	assert.equal(res.code, 4, describe(res));
	assert.match(res.stderr, /^loader: error: COMMIT failed: record \d+ refused at commit/m, describe(res));
	assert.doesNotMatch(res.stderr, /warning/, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM refused_commit'), '0');
});

test('wrong password: exit 4, says so, never prints the password', async () => {
	const password = 'Wr0ng-Passw0rd-7f3a';
	const file = path.join(dir, 'pw.json');
	fs.writeFileSync(file, serialize(GOOD));
	const res = await load([cluster.url('app', password), file, '--table', 'pw_orders']);
	assert.equal(res.code, 4, describe(res));
	assert.match(res.stderr, /password authentication failed/i, describe(res));
	assert.ok(!res.stderr.includes(password), 'the password does not appear on stderr');
	assert.ok(!res.stdout.includes(password), 'the password does not appear on stdout');
	assert.equal(await tableState(cluster, 'pw_orders'), 'absent');
});

test('unreachable server: exit 4, promptly, password masked', async () => {
	const port = await freePort();
	const password = 'Unre4ch-Pw-91x';
	const file = path.join(dir, 'unreach.json');
	fs.writeFileSync(file, serialize(GOOD));
	const res = await load([`postgres://app:${password}@127.0.0.1:${port}/app?sslmode=disable`, file], { timeout: 30000 });
	assert.equal(res.code, 4, describe(res));
	assert.match(res.stderr, /^loader: error: cannot connect to /m, describe(res));
	assert.ok(res.stderr.includes(`127.0.0.1:${port}`), `the message names the server\n${describe(res)}`);
	assert.ok(!res.stderr.includes(password), `the password is not printed\n${describe(res)}`);
	assert.ok(res.durationMs < 10000, `took ${res.durationMs} ms`);
});

test('a server that accepts and never answers: SIGINT or SIGTERM stops the connection attempt at once (exit 130), ' +
	'connect_timeout ends it (exit 4, saying so)', async (t) => {
	// Before, the loader waited in libpq's connect, deaf to signals: for
	// connect_timeout, and for ever with connect_timeout=0.
	const net = require('node:net');
	const sockets = [];
	const silent = net.createServer((socket) => sockets.push(socket));
	await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
	const url = (timeout) => `postgres://app@127.0.0.1:${silent.address().port}/app?sslmode=disable&connect_timeout=${timeout}`;
	const file = path.join(dir, 'silent.json');
	fs.writeFileSync(file, serialize(GOOD));
	try {
		for (const signal of ['SIGINT', 'SIGTERM']) {
			await t.test(`${signal}, connect_timeout=0`, async () => {
				let child;
				const pending = load([url(0), file], { timeout: 20000, onSpawn: (c) => { child = c; } });
				const accepted = sockets.length;
				await waitFor(async () => sockets.length > accepted, 5000, 'the loader connected');
				await new Promise((r) => setTimeout(r, 300));
				const sent = Date.now();
				child.kill(signal);
				const res = await pending;
				assert.equal(res.timedOut, false, describe(res));
				assert.equal(res.code, 130, describe(res));
				assert.match(res.stderr, /^loader: error: interrupted$/m, describe(res));
				assert.ok(Date.now() - sent < 3000, `stopped ${Date.now() - sent} ms after the signal`);
			});
		}
		await t.test('connect_timeout=2', async () => {
			const res = await load([url(2), file], { timeout: 20000 });
			assert.equal(res.code, 4, describe(res));
			assert.match(res.stderr, /cannot connect to .*timeout expired/, describe(res));
			assert.ok(res.durationMs >= 1900 && res.durationMs < 8000, `took ${res.durationMs} ms`);
		});
		await t.test('PGCONNECT_TIMEOUT=2, none in the URL: it applies, as with libpq', async () => {
			// Before, the loader's own 10 s default overrode the variable.
			const res = await load([url('').replace(/&connect_timeout=$/, ''), file],
				{ timeout: 20000, env: { PGCONNECT_TIMEOUT: '2' } });
			assert.equal(res.code, 4, describe(res));
			assert.match(res.stderr, /cannot connect to .*timeout expired \(connect_timeout 2 s\)/, describe(res));
			assert.ok(res.durationMs >= 1900 && res.durationMs < 8000, `took ${res.durationMs} ms`);
		});
		await t.test('a service file\'s connect_timeout applies, as with libpq', async () => {
			const services = path.join(dir, 'pg_service.conf');
			fs.writeFileSync(services, `[silent]\nhost=127.0.0.1\nport=${silent.address().port}\n` +
				'user=app\ndbname=app\nsslmode=disable\nconnect_timeout=2\n');
			const res = await load(['service=silent', file], { timeout: 20000, env: { PGSERVICEFILE: services } });
			assert.equal(res.code, 4, describe(res));
			assert.match(res.stderr, /cannot connect to .*timeout expired \(connect_timeout 2 s\)/, describe(res));
			assert.ok(res.durationMs >= 1900 && res.durationMs < 8000, `took ${res.durationMs} ms`);
		});
		await t.test('two hosts, the first silent: after its connect_timeout the second is tried, as libpq does', async () => {
			const both = `postgres://app:secret@127.0.0.1:${silent.address().port},127.0.0.1:${cluster.port}/app` +
				'?sslmode=disable&connect_timeout=2';
			const res = await load([both, file, '--table', 'second_host'], { timeout: 20000 });
			assert.equal(res.code, 0, describe(res));
			assert.ok(res.durationMs >= 1900, `the first host had its 2 s: ${res.durationMs} ms`);
			assert.equal(await tableState(cluster, 'second_host'), String(GOOD.length));
		});
		await t.test('connect_timeout that is no integer: refused as libpq refuses it, at once', async () => {
			const res = await load([url('abc'), file], { timeout: 20000 });
			assert.equal(res.code, 4, describe(res));
			assert.match(res.stderr, /invalid integer value "abc" for connection option "connect_timeout"/, describe(res));
			assert.ok(res.durationMs < 5000, `took ${res.durationMs} ms`);
		});
	} finally {
		for (const socket of sockets)
			socket.destroy();
		silent.close();
	}
});

test('started with stdin and stderr closed: the loader loads, and /dev/stdin reads as empty (its own pipe is never its input)', async (t) => {
	// Before, the stop pipe took descriptors 0 and 2: messages to stderr
	// went into it and read as a stop (exit 130, nothing loaded), and
	// /dev/stdin opened the pipe itself and waited for ever.
	const file = path.join(dir, 'closedfds.json');
	fs.writeFileSync(file, serialize(GOOD));
	const closed = (args) => run('sh', ['-c', 'exec "$0" "$@" <&- 2>&-', LOADER, ...args], { timeout: 20000 });
	await t.test('a file', async () => {
		const res = await closed([cluster.url(), file, '--table', 'closed_fds']);
		assert.equal(res.code, 0, describe(res));
		assert.equal(await tableState(cluster, 'closed_fds'), String(GOOD.length));
	});
	await t.test('/dev/stdin', async () => {
		const res = await closed([cluster.url(), '/dev/stdin', '--table', 'closed_fds_stdin']);
		assert.equal(res.timedOut, false, describe(res));
		assert.equal(res.code, 3, `an empty input: ${describe(res)}`);
		assert.equal(await tableState(cluster, 'closed_fds_stdin'), 'absent');
	});
});

test('the reader of stderr gone once the run started (2>&1 | head -1): exit 0, rows loaded, spans sent, --profile-out written', async (t) => {
	const r = await startReceiver({ grpc: false });
	t.after(() => r.close());
	const sub = makeTempDir('traceprof-load-stderr-gone-');
	t.after(() => removeTempDir(sub));
	const prof = path.join(sub, 'run.svg');
	const res = await load([cluster.url(), jsonFile, '--table', 'stderr_gone', '--profile-out', prof],
		{ env: { OTEL_EXPORTER_OTLP_ENDPOINT: r.httpEndpoint }, onSpawn: closeOutputAfterFirstLine });
	assert.equal(res.signal, null, `not killed by SIGPIPE\n${describe(res)}`);
	assert.equal(res.code, 0, describe(res));
	assert.equal(await tableState(cluster, 'stderr_gone'), String(N));
	assert.ok(fs.existsSync(prof), `the profile was written\n${describe(res)}`);
	const spans = r.requests.flatMap((q) => decodeTraces(q.body).spans);
	assert.ok(spans.some((s) => s.name === 'loader.run'), `loader.run was exported: ${spans.map((s) => s.name)}`);
});

test('malformed URL: a connection error, exit 4, password masked', async (t) => {
	// --help: "4 database error: connection, ..."; the URL is libpq's to parse.
	const file = path.join(dir, 'badurl.json');
	fs.writeFileSync(file, serialize(GOOD));
	const password = 'Malf0rmed-Pw-3k';
	for (const url of [
		`postgres://app:${password}@127.0.0.1:notaport/app`,
		`postgres://app:${password}@127.0.0.1:5432/app?sslmode=bogus`,
		`postgres://app:${password}@127.0.0.1:5432/app?nosuchoption=1`,
		`postgres://app:${password}@[::1/app`,
		`host=127.0.0.1 password=${password} port=`,
		`host=127.0.0.1 password='${password}`,
	]) {
		await t.test(url, async () => {
			const res = await load([url, file], { timeout: 30000 });
			assert.equal(res.code, 4, describe(res));
			assert.match(res.stderr, /^loader: error: /m, describe(res));
			assert.ok(!res.stderr.includes(password), `the password is not printed\n${describe(res)}`);
		});
	}
});

test('a password libpq misreads or is not told is one: not in messages, not in exported spans', async (t) => {
	const file = path.join(dir, 'misread.json');
	fs.writeFileSync(file, serialize(GOOD));
	const r = await startReceiver({ grpc: false });
	t.after(() => r.close());
	const port = cluster.port;
	// [case, URL, pieces of the password that must appear nowhere]
	const cases = [
		// '/' ends libpq's user info: it reads port "Pa55", database "word99@..."
		['slash in the password', `postgres://app:Pa55/word99@127.0.0.1:${port}/app`, ['Pa55', 'word99']],
		// libpq's user info ends at the first '@': host "ssw0rdXYZ@127.0.0.1"
		['@ in the password', `postgres://app:p@ssw0rdXYZ@127.0.0.1:${port}/app`, ['ssw0rdXYZ']],
		// not a URI to libpq: the whole string is the database name
		['upper-case scheme', `POSTGRES://app:UpperSecret@127.0.0.1:${port}/app`, ['UpperSecret']],
		// libpq decodes the name to password: a wrong one, refused by the server
		['percent-encoded parameter name', `postgresql://app@127.0.0.1:${port}/app?sslmode=disable&pass%77ord=TopSecret1`, ['TopSecret1']],
		['wrong password with an encoded slash', `postgresql://app:Wr0ng%2FPass@127.0.0.1:${port}/app?sslmode=disable`, ['Wr0ng', '%2FPass', '/Pass']],
		['PASSWORD=', `host=127.0.0.1 port=${port} PASSWORD=Sekret99`, ['Sekret99']],
		['passwd=', `host=127.0.0.1 port=${port} passwd=Sekret98`, ['Sekret98']],
	];
	for (const [name, url, secrets] of cases) {
		await t.test(name, async () => {
			r.reset();
			const res = await load([url, file, '--table', 'misread'],
				{ env: { OTEL_EXPORTER_OTLP_ENDPOINT: r.httpEndpoint }, timeout: 30000 });
			assert.equal(res.code, 4, describe(res));
			assert.match(res.stderr, /^loader: error: cannot connect to /m, describe(res));
			const spans = r.requests.flatMap((q) => decodeTraces(q.body).spans);
			const connect = spans.find((s) => s.name === 'loader.connect');
			assert.ok(connect, `a loader.connect span arrived: ${spans.map((s) => s.name)}`);
			assert.equal(connect.status.code, 2, 'loader.connect failed');
			const exported = JSON.stringify(spans.map((s) => [s.attributes, s.status, s.events]),
				(k, v) => (typeof v === 'bigint' ? String(v) : v));
			for (const secret of secrets) {
				assert.ok(!res.stderr.includes(secret), `${secret} is not printed\n${describe(res)}`);
				assert.ok(!exported.includes(secret), `${secret} is not exported: ${exported}`);
			}
		});
	}
	assert.equal(await tableState(cluster, 'misread'), 'absent');
});

test('other connection forms: key=value string, PGPASSWORD, SCHEMA.NAME table', async () => {
	const file = path.join(dir, 'forms.json');
	fs.writeFileSync(file, serialize(GOOD));
	let res = await load([`host=127.0.0.1 port=${cluster.port} user=app password=secret dbname=app sslmode=disable`,
		file, '--table', 'forms_kv']);
	assert.equal(res.code, 0, describe(res));
	assert.ok(!res.stderr.includes('password=secret'));
	assert.equal(await tableState(cluster, 'forms_kv'), '5');

	res = await load([`postgres://app@127.0.0.1:${cluster.port}/app?sslmode=disable`, file, '--table', 'forms_env'],
		{ env: { PGPASSWORD: 'secret' } });
	assert.equal(res.code, 0, describe(res));
	assert.equal(await tableState(cluster, 'forms_env'), '5');

	await cluster.psql('CREATE SCHEMA sales AUTHORIZATION app');
	res = await load([cluster.url(), file, '--table', 'sales.MixedCase']);
	assert.equal(res.code, 0, describe(res));
	assert.equal(await cluster.psql(`SELECT count(*) FROM sales."MixedCase"`), '5');
	assert.equal(await tableState(cluster, 'sales.mixedcase'), 'absent', 'the name is taken literally');
});

async function waitFor(check, timeoutMs, what) {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		if (await check())
			return;
		await new Promise((r) => setTimeout(r, 50));
	}
	throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
}

test('--profile-out or TRACEPROF_PROFILE_OUT naming FILE (as is, through a link, a hard link): a usage error, FILE untouched', async (t) => {
	const sub = makeTempDir('traceprof-load-prof-same-');
	t.after(() => removeTempDir(sub));
	const file = path.join(sub, 'in.json');
	const text = serialize(GOOD);
	fs.writeFileSync(file, text);
	fs.symlinkSync('in.json', path.join(sub, 'link.json'));
	fs.linkSync(file, path.join(sub, 'hard.json'));
	const cases = [
		[['--profile-out', file], {}, '--profile-out'],
		[['--profile-out', path.join(sub, '.', 'link.json')], {}, '--profile-out'],
		[['--profile-out', path.join(sub, 'hard.json')], {}, '--profile-out'],
		[[], { TRACEPROF_PROFILE_OUT: `${sub}/../${path.basename(sub)}/in.json` }, 'TRACEPROF_PROFILE_OUT'],
	];
	for (const [extra, env, source] of cases) {
		const res = await load([cluster.url(), file, '--table', 'prof_same', ...extra], { env, timeout: 20000 });
		assert.equal(res.code, 2, describe(res));
		assert.match(res.stderr, new RegExp(`^loader: error: ${source} ".*" is the same file as FILE "${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`),
			describe(res));
		assert.equal(fs.readFileSync(file, 'utf8'), text, `FILE is untouched\n${describe(res)}`);
	}
	assert.equal(await tableState(cluster, 'prof_same'), 'absent', 'nothing was loaded');
	assert.deepEqual(fs.readdirSync(sub).sort(), ['hard.json', 'in.json', 'link.json']);
});

test('usage errors exit 2 and touch nothing', async (t) => {
	const file = path.join(dir, 'usage.json');
	fs.writeFileSync(file, serialize(GOOD));
	const cases = [
		[],
		[cluster.url()],
		['', file],
		[cluster.url(), file, 'extra'],
		[cluster.url(), file, '--bogus'],
		[cluster.url(), file, '--table'],
		[cluster.url(), file, '--table', ''],
		[cluster.url(), file, '--table', 'a.b.c'],
		[cluster.url(), file, '--table', 'x'.repeat(64)],
		[cluster.url(), file, '--batch-size', 'x'],
		[cluster.url(), file, '--batch-size', '-1'],
		[cluster.url(), file, '--batch-size', '99999999999999999999999'],
		// A forgotten value: the next option is no table name nor file.
		[cluster.url(), file, '--table', '--batch-size', '10'],
		[cluster.url(), file, '--profile-out', '--table', 't'],
	];
	for (const args of cases) {
		await t.test(JSON.stringify(args.map((a) => a.replace(/:secret@/, ':***@'))), async () => {
			const res = await load(args);
			assert.equal(res.code, 2, describe(res));
			if (args.includes('99999999999999999999999'))
				assert.match(res.stderr, /--batch-size: 99999999999999999999999 is too large \(at most \d+ records/, describe(res));
			assert.match(res.stderr, /^loader: error: .*usage/m, describe(res));
			assert.doesNotMatch(res.stderr, /:secret@/);
			assert.equal(res.stdout, '');
		});
	}
	const help = await load(['--help']);
	assert.equal(help.code, 0, describe(help));
	assert.match(help.stdout, /Usage: loader POSTGRES_URL FILE/);
});

test('--table that is not UTF-8: a usage error (exit 2) found before connecting', async (t) => {
	// The connection's client_encoding is UTF8, so the server could never
	// take the name; the loader knew before connecting, so the server here
	// is unreachable and the answer still exit 2, not a connection error.
	const file = path.join(dir, 'badname.json');
	fs.writeFileSync(file, serialize(GOOD));
	const port = await freePort();
	const url = `postgres://app:secret@127.0.0.1:${port}/app?sslmode=disable`;
	// Node cannot pass a byte that is not UTF-8 in an argument: printf can.
	for (const [name, bytes] of [['a lone 0xff', 'ab\\377'], ['an overlong "/" in the schema', 's\\300\\257.x']]) {
		await t.test(name, async () => {
			const res = await run('sh', ['-c', 'exec "$0" "$1" "$2" --table "$(printf "$3")"', LOADER, url, file, bytes],
				{ timeout: 30000 });
			assert.equal(res.code, 2, describe(res));
			assert.match(res.stderr, /^loader: error: --table: ".*" is not valid UTF-8 .*usage/m, describe(res));
			assert.doesNotMatch(res.stderr, /cannot connect/, describe(res));
		});
	}
});

// A FIFO with a writer that stays: a read end opened O_RDWR makes the
// loader's open() return at once, and keeps the FIFO open with no data.
