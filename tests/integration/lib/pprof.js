'use strict';
// The tables of a decoded pprof (npm pprof-format, a decoder we did not
// write), checked for the structure pprof-format itself does not enforce:
// string_table[0] is "", every string index is in range, ids are non-zero
// and unique.

const assert = require('node:assert/strict');

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

module.exports = { pprofTables };
