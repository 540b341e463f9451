'use strict';
// Run a binary asynchronously.  Never spawnSync: the capture receiver lives
// in this same process and must keep answering while the child runs.

const { spawn } = require('node:child_process');

// Variables that would change what the binaries do.  They are removed from
// the inherited environment so that a developer's shell cannot leak into a
// test; a test sets what it needs explicitly.
const SCRUBBED = /^(OTEL_|PYROSCOPE_|PG[A-Z]+$|TRACEPROF_)/;

function baseEnv() {
	const env = {};
	for (const [k, v] of Object.entries(process.env)) {
		if (!SCRUBBED.test(k))
			env[k] = v;
	}
	return env;
}

/**
 * run(file, args, options) -> Promise<{code, signal, stdout, stderr,
 *                                      durationMs, timedOut, command}>
 *
 * options.env      merged over the scrubbed environment; a value of
 *                  undefined or null removes the variable
 * options.timeout  ms before the child is killed with SIGKILL (default 60 s);
 *                  the result then has timedOut = true
 * options.input    string/Buffer written to stdin (stdin is closed either way)
 * options.cwd      working directory
 * options.uid/gid  run as that user (root only)
 * options.onSpawn  called with the ChildProcess right after it started
 *
 * The promise always resolves (a failed spawn rejects): callers assert on
 * the result.
 */
function run(file, args = [], options = {}) {
	const env = baseEnv();
	for (const [k, v] of Object.entries(options.env || {})) {
		if (v === undefined || v === null)
			delete env[k];
		else
			env[k] = String(v);
	}
	const timeout = options.timeout ?? 60000;
	const command = [file, ...args].join(' ');

	return new Promise((resolve, reject) => {
		const started = process.hrtime.bigint();
		let child;
		try {
			child = spawn(file, args, {
				env,
				cwd: options.cwd,
				stdio: ['pipe', 'pipe', 'pipe'],
				...(options.uid !== undefined ? { uid: options.uid } : {}),
				...(options.gid !== undefined ? { gid: options.gid } : {}),
			});
		} catch (err) {
			reject(new Error(`cannot run ${command}: ${err.message}`));
			return;
		}
		const out = [];
		const err = [];
		let timedOut = false;
		child.stdout.on('data', (d) => out.push(d));
		child.stderr.on('data', (d) => err.push(d));
		const timer = setTimeout(() => {
			timedOut = true;
			child.kill('SIGKILL');
		}, timeout);
		child.on('error', (e) => {
			clearTimeout(timer);
			reject(new Error(`cannot run ${command}: ${e.message}`));
		});
		child.on('close', (code, signal) => {
			clearTimeout(timer);
			const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
			resolve({
				command,
				code,
				signal,
				stdout: Buffer.concat(out).toString('utf8'),
				stderr: Buffer.concat(err).toString('utf8'),
				stdoutBuffer: Buffer.concat(out),
				durationMs,
				timedOut,
			});
		});
		child.stdin.on('error', () => { /* child may exit before reading */ });
		if (options.onSpawn)
			options.onSpawn(child);
		if (options.input !== undefined)
			child.stdin.end(options.input);
		else
			child.stdin.end();
	});
}

/** A one-line summary of a run result, for assertion messages. */
function describe(res) {
	return `${res.command}\n  exit=${res.code} signal=${res.signal} ` +
		`timedOut=${res.timedOut} ${res.durationMs.toFixed(0)} ms\n` +
		`  stderr: ${JSON.stringify(res.stderr.slice(0, 4000))}\n` +
		`  stdout: ${JSON.stringify(res.stdout.slice(0, 2000))}`;
}

/**
 * An options.onSpawn for run(): like `2>&1 | head -1`, the reader goes away
 * once the first line of stderr arrived, closing the child's stdout and
 * stderr pipes; later writes to them fail (EPIPE, or SIGPIPE).
 */
function closeOutputAfterFirstLine(child) {
	child.stderr.on('data', (d) => {
		if (d.includes(10)) {
			child.stdout.destroy();
			child.stderr.destroy();
		}
	});
}

/** The same for stdout only, after its first bytes (`| head -c 1`). */
function closeStdoutAfterFirstBytes(child) {
	child.stdout.once('data', () => child.stdout.destroy());
}

module.exports = { run, describe, baseEnv, closeOutputAfterFirstLine, closeStdoutAfterFirstBytes };
