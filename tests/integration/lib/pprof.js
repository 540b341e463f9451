'use strict';
// The tables of a decoded pprof (npm pprof-format, a decoder we did not
// write), checked for the structure pprof-format itself does not enforce:
// string_table[0] is "", every string index is in range, ids are non-zero
// and unique.

const assert = require('node:assert/strict');
const zlib = require('node:zlib');
const { Profile } = require('pprof-format');

/** {s(i): string, mappings, functions, locations} (Maps by id) of profile p. */
function pprofTables(p) {
	const strings = p.stringTable.strings;
	const s = (i) => {
		const n = Number(i);
		assert.ok(Number.isInteger(n) && n >= 0 && n < strings.length, `string index ${i} out of range`);
		return strings[n];
	};
	assert.equal(strings[0], '', 'string_table[0] must be ""');
	const byId = (list, what) => {
		const map = new Map();
		for (const e of list) {
			const id = Number(e.id);
			assert.ok(id > 0, `${what} id must be non-zero`);
			assert.ok(!map.has(id), `${what} id ${id} is not unique`);
			map.set(id, e);
		}
		return map;
	};
	return {
		s,
		mappings: byId(p.mapping, 'mapping'),
		functions: byId(p.function, 'function'),
		locations: byId(p.location, 'location'),
	};
}

/**
 * Decode a gzip pprof with pprof-format into plain objects (frames as
 * function names, leaf first; labels as an object), checking on the way
 * what a truncated or inconsistent profile would break: gzip magic, ids
 * non-zero and unique, references resolving, string indices in range, one
 * value per sample type, a stack per sample, and bytes that re-encode the
 * same (nothing skipped).
 */
function decodePprof(gz) {
	assert.ok(gz.length > 2 && gz[0] === 0x1f && gz[1] === 0x8b, 'gzip magic');
	const raw = zlib.gunzipSync(gz);
	const p = Profile.decode(raw);
	const { s, mappings, functions, locations } = pprofTables(p);
	const loc = (id) => {
		const l = locations.get(Number(id));
		assert.ok(l, `location ${id} is referenced but missing`);
		assert.ok(l.line.length >= 1, `location ${id} has a line`);
		const mappingId = Number(l.mappingId);
		if (mappingId !== 0)
			assert.ok(mappings.has(mappingId), `mapping ${mappingId} is referenced but missing`);
		const f = functions.get(Number(l.line[0].functionId));
		assert.ok(f, `function ${l.line[0].functionId} is referenced but missing`);
		return s(f.name);
	};
	const samples = p.sample.map((smp) => {
		assert.equal(smp.value.length, p.sampleType.length, 'one value per sample type');
		assert.ok(smp.locationId.length > 0, 'a sample has a stack');
		const labels = {};
		for (const l of smp.label) {
			const k = s(l.key);
			assert.ok(!(k in labels), `label ${k} repeats in a sample`);
			labels[k] = s(l.str);
		}
		return { values: smp.value.map(Number), frames: smp.locationId.map(loc), labels };
	});
	for (const m of mappings.values())
		s(m.filename);
	// Re-encoding gives the same bytes: nothing was skipped while decoding.
	assert.equal(Buffer.compare(Buffer.from(Profile.decode(raw).encode()), raw), 0,
		'pprof-format re-encodes the profile to the same bytes');
	return { ...profileFields(p, s), samples };
}

/** The profile-wide fields of p, strings resolved through s. */
function profileFields(p, s) {
	return {
		sampleTypes: p.sampleType.map((t) => `${s(t.type)}/${s(t.unit)}`),
		periodType: p.periodType ? `${s(p.periodType.type)}/${s(p.periodType.unit)}` : null,
		period: Number(p.period),
		defaultSampleType: s(p.defaultSampleType),
		timeNanos: BigInt(p.timeNanos),
		durationNanos: BigInt(p.durationNanos),
	};
}

module.exports = { pprofTables, profileFields, decodePprof };
