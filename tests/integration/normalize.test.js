'use strict';
// Normalized query text against pg_stat_statements, whose texts find each
// constant's extent with PostgreSQL's own lexer: a real PostgreSQL 15 with
// shared_preload_libraries = 'pg_stat_statements,traceprof', a corpus of
// the lexer's harder forms traced through a real driver (simple, extended
// and multi-statement queries).
//
// - With the query ids pg_stat_statements turns on, a span's text uses the
//   jumble's constants and must equal pg_stat_statements' text exactly.
// - With compute_query_id = off, traceprof reads every literal token itself
//   (common/sql_normalize.c); on the statements whose constants are all
//   literal tokens (no signed number, typmod, true or NULL), its text must
//   equal pg_stat_statements' too.
// - A minus the grammar folds through parentheses ("-(123456)") is one
//   constant at its sign: pg_stat_statements replaces only "-(" and shows
//   the number; a span's text must not.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');

const { newContext, waitFor, startTraced, connect } = require('./lib/traced');

// [sql, params, literal tokens only?]
const CORPUS = [
	['SELECT 1 AS a, \'x\' AS b, 1.5e3 AS c', null, true],
	['SELECT E\'it\\\'s\' AS e, U&\'d\\0061t\' AS u, B\'101\' AS bits, X\'1F\' AS hex', null, true],
	['SELECT $$dollar \'quoted\'$$ AS d1, $tag$ with $$ inside $tag$ AS d2', null, true],
	['SELECT \'con\'\n   \'tinued\' AS cont, \'two\' || \'parts\' AS concatenated', null, true],
	['SELECT /* it\'s 1 */ 2 AS after_comment -- 3\n, 4 AS next', null, true],
	['SELECT "quoted ""id"" 5" FROM (SELECT 6 AS "quoted ""id"" 5") s', null, true],
	['SELECT -5 AS neg, \'x\'::varchar(10) AS typmod, true AS t, NULL::int AS n', null, false],
	['SELECT g FROM generate_series(1, 10) g WHERE g IN (2, 3, 4) ORDER BY g LIMIT 5 OFFSET 1', null, true],
	['SELECT $1::int + 7 AS p, \'y\' AS q', [1], true],
	['SELECT 1.5 AS f, .5 AS g, 1. AS h, 2e-3 AS i, 3.0E+2 AS j', null, true],
	['SELECT N\'nchar\' AS nc, interval \'1 day\' AS iv, date \'2020-01-01\' AS dt', null, true],
	['SELECT ARRAY[1, 2] AS arr, \'{3,4}\'::int[] AS arr2, t1.x FROM (SELECT 8 AS x) t1', null, true],
	['SELECT 8 AS m1; SELECT 9 AS m2, \'z\' AS m3', null, true],
];

describe('normalized query text matches pg_stat_statements', () => {
	let cluster;
	let client;
	let pgss;			// query id -> pg_stat_statements' text

	before(async () => {
		cluster = await startTraced({ shared_preload_libraries: 'pg_stat_statements,traceprof' });
		await cluster.psql('CREATE EXTENSION pg_stat_statements;', { db: 'app' });
		client = await connect(cluster);
	});

	after(async () => {
		if (client)
			await client.end().catch(() => {});
		if (cluster)
			await cluster.stop();
	});

	/** Run the corpus traced (compute_query_id as given); the server spans' texts by query id. */
	async function tracedCorpus(computeQueryId) {
		const ctx = newContext();
		await client.query(`SET compute_query_id = ${computeQueryId}`);
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		let statements = 0;
		for (const [sql, params] of CORPUS) {
			await client.query(params ? { text: sql, values: params } : sql);
			statements += sql.split(';').length;
		}
		await client.query('RESET traceprof.traceparent');
		await client.query('RESET compute_query_id');
		const spans = await waitFor(`${statements} corpus spans of trace ${ctx.traceId}`, async () => {
			const rows = (await client.query(
				"SELECT query, attributes->>'traceprof.query_id' AS query_id FROM traceprof.spans " +
				"WHERE trace_id = $1 AND kind = 'server' AND name <> 'SET' AND name <> 'RESET' ORDER BY start_time",
				[ctx.traceId])).rows;
			return rows.length >= statements ? rows : null;
		});
		assert.equal(spans.length, statements);
		return spans;
	}

	test('with query ids: the jumble\'s constants, exactly as pg_stat_statements shows them', async () => {
		await client.query('SELECT pg_stat_statements_reset()');
		const spans = await tracedCorpus('on');
		pgss = new Map((await client.query('SELECT queryid::text AS id, query FROM pg_stat_statements')).rows
			.map((r) => [r.id, r.query]));
		for (const span of spans) {
			assert.ok(span.query_id, `a query id on the span of ${span.query}`);
			assert.equal(span.query, pgss.get(span.query_id), `query id ${span.query_id}`);
		}
		assert.equal(new Set(spans.map((s) => s.query_id)).size, spans.length, 'one span per corpus statement');
	});

	test('without query ids: every literal token, as pg_stat_statements where the constants are literals', async () => {
		assert.ok(pgss, 'the first test ran');
		const spans = await tracedCorpus('off');
		const expected = [];
		for (const [sql, , literalsOnly] of CORPUS)
			for (const one of sql.split(';'))
				expected.push({ literalsOnly, one });
		let compared = 0;
		const byText = new Set(pgss.values());
		spans.forEach((span, i) => {
			assert.equal(span.query_id, null, 'no query id with compute_query_id = off');
			// Without comments, quoted identifiers, $n and words, no digit, quote or $ is left.
			const rest = span.query.replace(/\/\*[^]*?\*\//g, '').replace(/--[^\n]*/g, '')
				.replace(/"(?:[^"]|"")*"/g, '').replace(/\$[0-9]+/g, '')
				.replace(/[A-Za-z_][A-Za-z_0-9$]*/g, '');
			assert.doesNotMatch(rest, /[0-9'$]/, `no literal left in ${span.query}`);
			if (expected[i].literalsOnly) {
				assert.ok(byText.has(span.query), `pg_stat_statements has the text ${JSON.stringify(span.query)} ` +
					`(for ${JSON.stringify(expected[i].one.trim())})`);
				compared++;
			}
		});
		assert.ok(compared >= 10, `${compared} texts compared`);
	});

	test('a minus folded through parentheses: the number inside is replaced with it, not shown', async () => {
		const ctx = newContext();
		await client.query('SET compute_query_id = on');
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		await client.query('SELECT -(123456) AS a, -((8)) AS b, -(-(5)) AS c, (-9) AS d, - 7 AS e');
		await client.query('RESET traceprof.traceparent');
		await client.query('RESET compute_query_id');
		const rows = await waitFor(`the span of trace ${ctx.traceId}`, async () => {
			const r = (await client.query(
				"SELECT query FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server' AND name = 'SELECT'",
				[ctx.traceId])).rows;
			return r.length > 0 ? r : null;
		});
		assert.equal(rows[0].query, 'SELECT $1 AS a, $2 AS b, $3 AS c, ($4) AS d, $5 AS e');
	});
});
