'use strict';
// What a load left in PostgreSQL, compared with the file it came from.

const fs = require('node:fs');

const { checkRecord, splitRecords, checksums, checksumSql, parseChecksumRow } = require('./records');

const sqlLiteral = (s) => `'${String(s).replace(/'/g, "''")}'`;

/** 'absent' when the table does not exist, else its row count as a string. */
async function tableState(cluster, table) {
	const exists = await cluster.psql(`SELECT to_regclass(${sqlLiteral(table)}) IS NOT NULL`);
	if (exists !== 't')
		return 'absent';
	return cluster.psql(`SELECT count(*) FROM ${table}`);
}

/** Exact checksums of the file computed in JS, and of the table in SQL. */
async function compareChecksums(cluster, table, file, format) {
	const text = fs.readFileSync(file, 'utf8').replace(/^\ufeff/, '');
	const records = splitRecords(text, format).map(checkRecord);
	const expected = checksums(records);
	const actual = parseChecksumRow(await cluster.psql(checksumSql(table)));
	return { expected, actual };
}

/**
 * Rows that differ between the table and the file as PostgreSQL's own JSON
 * parser reads it (a decoder we did not write): every column, attributes
 * compared as jsonb.  Returns {missing, extra, differing, samples}.
 * The file must be readable by the server (pg_read_file, superuser).
 */
async function compareRows(cluster, table, file, format) {
	const source = format === 'ndjson'
		? `SELECT l::json AS j FROM doc, regexp_split_to_table(doc.t, E'\\n') AS l WHERE l <> ''`
		: `SELECT j FROM doc, json_array_elements(doc.t::json) AS j`;
	const sql = `
WITH doc AS (SELECT pg_read_file(${sqlLiteral(file)}) AS t),
src AS (${source}),
e AS (
  SELECT (j->>'id')::bigint AS id,
         (j->>'customer_id')::bigint AS customer_id,
         j->>'customer_name' AS customer_name,
         (j->>'amount')::numeric AS amount,
         j->>'currency' AS currency,
         (j->>'created_at')::timestamptz AS created_at,
         ARRAY(SELECT json_array_elements_text(j->'tags')) AS tags,
         (j->'attributes')::jsonb AS attributes
  FROM src),
d AS (
  SELECT e.id AS eid, o.id AS oid, e.* , o.customer_id AS o_customer_id, o.customer_name AS o_customer_name,
         o.amount AS o_amount, o.currency AS o_currency, o.created_at AS o_created_at, o.tags AS o_tags,
         o.attributes AS o_attributes
  FROM e FULL JOIN ${table} AS o ON o.id = e.id
  WHERE e.id IS NULL OR o.id IS NULL
     OR (e.customer_id, e.customer_name, e.amount, e.currency, e.created_at, e.tags, e.attributes)
        IS DISTINCT FROM
        (o.customer_id, o.customer_name, o.amount, o.currency, o.created_at, o.tags, o.attributes))
SELECT json_build_object(
  'missing', (SELECT count(*) FROM d WHERE oid IS NULL),
  'extra', (SELECT count(*) FROM d WHERE eid IS NULL),
  'differing', (SELECT count(*) FROM d WHERE eid IS NOT NULL AND oid IS NOT NULL),
  'samples', (SELECT json_agg(x) FROM (SELECT * FROM d ORDER BY coalesce(eid, oid) LIMIT 3) AS x))`;
	return JSON.parse(await cluster.psql(sql));
}

/** Column name -> formatted type, and the primary key columns. */
async function tableShape(cluster, table) {
	const cols = await cluster.psql(`
SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
                  CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY a.attnum)
FROM pg_attribute a WHERE a.attrelid = ${sqlLiteral(table)}::regclass AND a.attnum > 0 AND NOT a.attisdropped`);
	const pk = await cluster.psql(`
SELECT string_agg(a.attname, ',') FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
WHERE i.indrelid = ${sqlLiteral(table)}::regclass AND i.indisprimary`);
	return { columns: cols, primaryKey: pk };
}

module.exports = { tableState, compareChecksums, compareRows, tableShape, sqlLiteral };
