'use strict';
// The order record format (docs/record-format.md), checked from the test
// side: a strict validator, a raw-token scanner (JSON.parse hides repeated
// keys and rounds big numbers), and exact checksums for comparing a file
// with what landed in PostgreSQL.

const crypto = require('node:crypto');

const KEYS = ['id', 'customer_id', 'customer_name', 'amount', 'currency', 'created_at', 'tags', 'attributes'];

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INTEGER_RE = /^-?(0|[1-9][0-9]*)$/;
const AMOUNT_RE = /^-?(0|[1-9][0-9]{0,9})(\.[0-9]{1,2})?$/;
const CURRENCY_RE = /^[A-Z]{3}$/;
const RFC3339_RE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?(Z|([+-])([0-9]{2}):([0-9]{2}))$/;

/**
 * Scan one JSON value (already known to be valid JSON) and return
 * {raw, members?: [[key, raw], ...]} for the top level, plus every repeated
 * key anywhere as a path in `duplicates`.
 */
function scanJson(text) {
	let i = 0;
	const duplicates = [];
	const isWs = (c) => c === ' ' || c === '\t' || c === '\n' || c === '\r';
	const ws = () => { while (i < text.length && isWs(text[i])) i++; };
	const str = () => {
		const start = i++;
		while (text[i] !== '"') {
			if (text[i] === '\\')
				i++;
			i++;
		}
		i++;
		return text.slice(start, i);
	};
	const value = (path) => {
		ws();
		const start = i;
		const c = text[i];
		if (c === '{') {
			i++;
			const members = [];
			const seen = new Set();
			ws();
			if (text[i] === '}') {
				i++;
				return { raw: text.slice(start, i), members };
			}
			for (;;) {
				ws();
				const key = JSON.parse(str());
				ws();
				i++;	/* ':' */
				const v = value(`${path}.${key}`);
				if (seen.has(key))
					duplicates.push(`${path}.${key}`);
				seen.add(key);
				members.push([key, v.raw]);
				ws();
				if (text[i++] === ',')
					continue;
				break;
			}
			return { raw: text.slice(start, i), members };
		}
		if (c === '[') {
			i++;
			ws();
			if (text[i] === ']') {
				i++;
				return { raw: text.slice(start, i) };
			}
			for (let n = 0; ; n++) {
				value(`${path}[${n}]`);
				ws();
				if (text[i++] === ',')
					continue;
				break;
			}
			return { raw: text.slice(start, i) };
		}
		if (c === '"') {
			str();
			return { raw: text.slice(start, i) };
		}
		while (i < text.length && !isWs(text[i]) && text[i] !== ',' && text[i] !== '}' && text[i] !== ']')
			i++;
		return { raw: text.slice(start, i) };
	};
	const top = value('$');
	return { ...top, duplicates };
}

function daysInMonth(y, m) {
	return new Date(Date.UTC(y, m, 0)).getUTCDate();
}

/** RFC 3339 text -> microseconds since the epoch (BigInt), or null if invalid. */
function rfc3339Micros(s) {
	const m = RFC3339_RE.exec(s);
	if (!m)
		return null;
	const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number);
	if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo) || h > 23 || mi > 59 || se > 59)
		return null;
	let offsetMin = 0;
	if (m[8] !== 'Z') {
		const oh = Number(m[10]);
		const om = Number(m[11]);
		if (oh > 23 || om > 59)
			return null;
		offsetMin = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
	}
	const frac = BigInt((m[7] || '').padEnd(6, '0'));
	const ms = Date.UTC(y, mo - 1, d, h, mi, se);	/* y >= 100 here: no 2-digit year quirk */
	if (y < 100)
		return null;
	return BigInt(ms) * 1000n + frac - BigInt(offsetMin) * 60000000n;
}

/** Amount text ("-12.5") -> exact cents as BigInt. */
function amountCents(raw) {
	const neg = raw.startsWith('-');
	const [int, frac = ''] = (neg ? raw.slice(1) : raw).split('.');
	const cents = BigInt(int) * 100n + BigInt(frac.padEnd(2, '0'));
	return neg ? -cents : cents;
}

function isPlainObject(v) {
	return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Problems with one record's text (an empty list when it is valid).
 * Returns {problems, value, raw} where raw maps each key to its raw token.
 */
function checkRecord(text) {
	const problems = [];
	let value;
	try {
		value = JSON.parse(text);
	} catch (err) {
		return { problems: [`not JSON: ${err.message}`] };
	}
	if (!isPlainObject(value))
		return { problems: ['not an object'] };
	const scan = scanJson(text);
	if (scan.duplicates.length)
		problems.push(`repeated keys ${scan.duplicates.join(', ')}`);
	const raw = Object.fromEntries(scan.members);
	const keys = scan.members.map(([k]) => k);
	const missing = KEYS.filter((k) => !keys.includes(k));
	const extra = keys.filter((k) => !KEYS.includes(k));
	if (missing.length)
		problems.push(`missing keys ${missing.join(', ')}`);
	if (extra.length)
		problems.push(`extra keys ${extra.join(', ')}`);
	for (const k of ['id', 'customer_id']) {
		if (raw[k] === undefined)
			continue;
		if (!INTEGER_RE.test(raw[k]) || BigInt(raw[k]) < INT64_MIN || BigInt(raw[k]) > INT64_MAX)
			problems.push(`${k} ${raw[k]} is not a 64-bit integer`);
	}
	if (raw.customer_name !== undefined &&
		(typeof value.customer_name !== 'string' || value.customer_name.includes('\u0000')))
		problems.push(`customer_name ${raw.customer_name} is not a string without U+0000`);
	if (raw.amount !== undefined && !AMOUNT_RE.test(raw.amount))
		problems.push(`amount ${raw.amount} is not a decimal with <= 10 integer and <= 2 fraction digits`);
	if (raw.currency !== undefined && (typeof value.currency !== 'string' || !CURRENCY_RE.test(value.currency)))
		problems.push(`currency ${raw.currency} is not 3 uppercase letters`);
	if (raw.created_at !== undefined &&
		(typeof value.created_at !== 'string' || rfc3339Micros(value.created_at) === null))
		problems.push(`created_at ${raw.created_at} is not an RFC 3339 date-time with offset`);
	if (raw.tags !== undefined &&
		(!Array.isArray(value.tags) || !value.tags.every((t) => typeof t === 'string')))
		problems.push(`tags ${raw.tags} is not an array of strings`);
	if (raw.attributes !== undefined && !isPlainObject(value.attributes))
		problems.push(`attributes ${raw.attributes} is not an object`);
	return { problems, value, raw };
}

/**
 * Split a generated file into record texts, checking its layout:
 * json: "[" records separated by ",\n" "]" (whitespace allowed just inside
 * the brackets and after "]"); ndjson: one record per line, each ending
 * with "\n".  Throws on a layout error.
 */
function splitRecords(text, format) {
	if (format === 'ndjson') {
		if (text === '')
			return [];
		if (!text.endsWith('\n'))
			throw new Error('ndjson file does not end with a newline');
		const lines = text.slice(0, -1).split('\n');
		lines.forEach((l, n) => {
			if (!l.startsWith('{') || !l.endsWith('}'))
				throw new Error(`ndjson line ${n + 1} is not one object: ${l.slice(0, 80)}`);
		});
		return lines;
	}
	const m = /^\[\s*([\s\S]*?)\s*\]\s*$/.exec(text);
	if (!m)
		throw new Error(`json file is not "[" ... "]": starts ${JSON.stringify(text.slice(0, 20))}, ends ${JSON.stringify(text.slice(-20))}`);
	if (m[1] === '')
		return [];
	const parts = m[1].split(',\n');
	parts.forEach((p, n) => {
		if (!p.startsWith('{') || !p.endsWith('}'))
			throw new Error(`json record ${n + 1} is not one object between ",\\n" separators: ${p.slice(0, 80)}`);
	});
	return parts;
}

const md5 = (s) => crypto.createHash('md5').update(s, 'utf8').digest('hex');

/**
 * Exact checksums over a list of {value, raw} records, mirrored by
 * CHECKSUM_SQL below.  Strings are concatenated in id order with control
 * separators; both sides build identical UTF-8 text.
 */
function checksums(records) {
	const sorted = records.slice().sort((a, b) => {
		const x = BigInt(a.raw.id);
		const y = BigInt(b.raw.id);
		return x < y ? -1 : x > y ? 1 : 0;
	});
	let sumId = 0n;
	let sumCustomer = 0n;
	let sumCents = 0n;
	let sumMicros = 0n;
	let tagCount = 0;
	const names = [];
	const currencies = [];
	const tags = [];
	for (const r of sorted) {
		sumId += BigInt(r.raw.id);
		sumCustomer += BigInt(r.raw.customer_id);
		sumCents += amountCents(r.raw.amount);
		sumMicros += rfc3339Micros(r.value.created_at);
		tagCount += r.value.tags.length;
		names.push(r.value.customer_name);
		currencies.push(r.value.currency);
		tags.push(r.value.tags.join('\x1f') + '\x1e');
	}
	return {
		count: String(sorted.length),
		sum_id: String(sumId),
		sum_customer_id: String(sumCustomer),
		sum_cents: String(sumCents),
		sum_created_us: String(sumMicros),
		tag_count: String(tagCount),
		md5_names: md5(names.join('\x1d')),
		md5_currencies: md5(currencies.join(',')),
		md5_tags: md5(tags.join('')),
	};
}

/** One row, '|'-separated in checksums() key order (psql -At). */
function checksumSql(table) {
	return `SELECT count(*),
       coalesce(sum(id), 0),
       coalesce(sum(customer_id), 0),
       coalesce(sum(amount * 100)::bigint, 0),
       coalesce(sum((extract(epoch FROM created_at) * 1000000)::bigint), 0),
       coalesce(sum(cardinality(tags)), 0),
       md5(coalesce(string_agg(customer_name, E'\\x1d' ORDER BY id), '')),
       md5(coalesce(string_agg(currency, ',' ORDER BY id), '')),
       md5(coalesce(string_agg(array_to_string(tags, E'\\x1f') || E'\\x1e', '' ORDER BY id), ''))
FROM ${table}`;
}

const CHECKSUM_KEYS = ['count', 'sum_id', 'sum_customer_id', 'sum_cents', 'sum_created_us', 'tag_count',
	'md5_names', 'md5_currencies', 'md5_tags'];

function parseChecksumRow(line) {
	const f = line.split('|');
	return Object.fromEntries(CHECKSUM_KEYS.map((k, n) => [k, f[n]]));
}

module.exports = {
	KEYS,
	scanJson,
	checkRecord,
	splitRecords,
	rfc3339Micros,
	amountCents,
	checksums,
	checksumSql,
	parseChecksumRow,
	md5,
};

/**
 * n valid records made here (not by the generator), with the awkward cases
 * the format allows: non-ASCII, escapes, negative and integral amounts,
 * offsets, fractions, empty tags, nested attributes with null.
 */
function sampleRecords(n, firstId = 1) {
	const names = ['Zoë "Ace" O\'Brien', 'Ålesund \\ back', 'plain', '日本語 テキスト', 'tab\there', 'emoji 😀', 'new\nline', ''];
	const out = [];
	for (let k = 0; k < n; k++) {
		const id = firstId + k;
		out.push({
			id,
			customer_id: 1000 + (k * 7919) % 100000,
			customer_name: names[k % names.length],
			amount: [1234.56, -0.5, 0, 99999.99, 12, 0.01][k % 6],
			currency: ['EUR', 'USD', 'JPY'][k % 3],
			created_at: ['2026-03-14T09:26:53.589793+01:00', '2025-12-31T23:59:59Z', '2024-02-29T12:00:00.5-05:30'][k % 3],
			tags: [[], ['gift'], ['gift', 'priority', 'ü']][k % 3],
			attributes: [
				{ channel: 'web', items: 3, gift_wrap: true, coupon: null, note: 'Leave at door\nRing twice' },
				{},
				{ nested: { a: [1, 2.5, 'x', null, false] }, big: 12345678901234 },
			][k % 3],
		});
	}
	return out;
}

/** Records as a json-layout document (optionally ndjson). */
function serialize(records, format = 'json') {
	const texts = records.map((r) => (typeof r === 'string' ? r : JSON.stringify(r)));
	if (format === 'ndjson')
		return texts.map((t) => t + '\n').join('');
	return texts.length ? '[\n' + texts.join(',\n') + '\n]\n' : '[]\n';
}

/** The columns the loader creates, for tables a test makes itself: `CREATE TABLE t ${ORDERS_DDL}`. */
const ORDERS_DDL = `(id bigint PRIMARY KEY, customer_id bigint NOT NULL, customer_name text NOT NULL,
	amount numeric(12,2) NOT NULL, currency text NOT NULL, created_at timestamptz NOT NULL,
	tags text[] NOT NULL, attributes jsonb NOT NULL)`;

module.exports.sampleRecords = sampleRecords;
module.exports.serialize = serialize;
module.exports.ORDERS_DDL = ORDERS_DDL;
