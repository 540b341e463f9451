'use strict';
// Where the things under test live.  Tests never build anything: the
// binaries must already exist (make / make check-integration builds them),
// and a missing one fails the test loudly instead of skipping it.

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = path.join(ROOT, 'build', 'bin');
const GENERATOR = path.join(BIN, 'generator');
const LOADER = path.join(BIN, 'loader');
const PG_BIN = process.env.PG_BIN || '/usr/lib/postgresql/15/bin';

function requireExecutable(file) {
	try {
		fs.accessSync(file, fs.constants.X_OK);
	} catch (err) {
		throw new Error(`required executable ${file} is missing or not executable ` +
			`(${err.code}); build it first: make -C ${ROOT}`);
	}
	return file;
}

module.exports = { ROOT, BIN, GENERATOR, LOADER, PG_BIN, requireExecutable };
