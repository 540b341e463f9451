'use strict';
// Temp dirs that the `postgres` OS user can traverse and read (the server
// reads expected data with pg_read_file), removed by the caller.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function makeTempDir(prefix = 'traceprof-test-') {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
	fs.chmodSync(dir, 0o755);
	return dir;
}

function removeTempDir(dir) {
	if (dir && !process.env.TRACEPROF_KEEP_TMP)
		fs.rmSync(dir, { recursive: true, force: true });
}

/** {uid, gid} of an OS user from /etc/passwd; throws when absent. */
function lookupUser(name) {
	const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n')
		.find((l) => l.split(':')[0] === name);
	if (!line)
		throw new Error(`there is no OS user "${name}"`);
	const f = line.split(':');
	return { uid: Number(f[2]), gid: Number(f[3]) };
}

module.exports = { makeTempDir, removeTempDir, lookupUser };
