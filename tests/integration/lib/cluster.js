'use strict';
// A throwaway PostgreSQL 15 cluster: initdb into a temp dir, start the
// postmaster on a free port, stop it by PID with SIGINT (fast shutdown).
//
// As root, initdb and postgres refuse to run, so they are executed as the
// `postgres` OS user (spawn with its uid/gid: the same as `runuser -u
// postgres --`, but the child we hold is the postmaster itself, so we can
// signal it by PID and wait for it to exit).  The temp dir lives in
// os.tmpdir() with mode 0755 so that user can traverse it.
//
// Authentication: superuser `postgres` is trusted on the unix socket (in the
// temp dir); TCP on 127.0.0.1 requires scram-sha-256.  A role `app` with
// password `secret` owns a database `app`.

const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const { PG_BIN, requireExecutable } = require('./paths');
const { run } = require('./run');
const { lookupUser: findUser } = require('./tmp');

const APP_USER = 'app';
const APP_PASSWORD = 'secret';
const APP_DB = 'app';

const live = new Set();
process.on('exit', () => {
	// Safety net only: tests stop their clusters in after() hooks.
	for (const child of live) {
		try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
	}
});

/** Bind port (0: any) on 127.0.0.1 and let it go: the port, or null if taken. */
function tryPort(port) {
	return new Promise((resolve, reject) => {
		const srv = net.createServer();
		srv.unref();
		srv.on('error', (err) => (err.code === 'EADDRINUSE' ? resolve(null) : reject(err)));
		srv.listen(port, '127.0.0.1', () => {
			const got = srv.address().port;
			srv.close(() => resolve(got));
		});
	});
}

/*
 * TRACEPROF_TEST_PORTS=LOW-HIGH keeps the ports picked within that range,
 * for machines where several suites run side by side, each given its own.
 */
let nextInRange = 0;

/** A TCP port on 127.0.0.1 that was free a moment ago. */
async function freePort() {
	const range = /^(\d+)-(\d+)$/.exec(process.env.TRACEPROF_TEST_PORTS || '');
	if (!range)
		return tryPort(0);
	const low = Number(range[1]);
	const count = Number(range[2]) - low + 1;
	for (let i = 0; i < count; i++) {
		const port = low + (nextInRange++ + process.pid) % count;
		if (await tryPort(port) !== null)
			return port;
	}
	throw new Error(`no free port in TRACEPROF_TEST_PORTS=${process.env.TRACEPROF_TEST_PORTS}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function quoteConf(value) {
	return `'${String(value).replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

function chownTree(dir, uid, gid) {
	fs.chownSync(dir, uid, gid);
	for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
		const p = path.join(dir, ent.name);
		if (ent.isDirectory())
			chownTree(p, uid, gid);
		else
			fs.chownSync(p, uid, gid);
	}
}

function spawnAs(owner, file, args, opts = {}) {
	const env = {
		PATH: process.env.PATH || '/usr/bin:/bin',
		LANG: 'C.UTF-8',
		LC_ALL: 'C.UTF-8',
		TZ: 'UTC',
		...(opts.env || {}),
	};
	const o = { env, cwd: opts.cwd, stdio: opts.stdio || ['ignore', 'pipe', 'pipe'] };
	if (owner) {
		o.uid = owner.uid;
		o.gid = owner.gid;
	}
	return spawn(file, args, o);
}

function waitExit(child) {
	if (child.exitCode !== null || child.signalCode !== null)
		return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
	return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

async function runAs(owner, file, args, cwd) {
	const child = spawnAs(owner, file, args, { cwd });
	let out = '';
	child.stdout.on('data', (d) => { out += d; });
	child.stderr.on('data', (d) => { out += d; });
	const spawnError = new Promise((_, reject) => child.once('error', reject));
	const { code, signal } = await Promise.race([waitExit(child), spawnError]);
	if (code !== 0)
		throw new Error(`${file} ${args.join(' ')} failed (exit ${code}, signal ${signal}):\n${out}`);
	return out;
}

function tail(file, n = 40) {
	try {
		return fs.readFileSync(file, 'utf8').split('\n').slice(-n).join('\n');
	} catch (err) {
		return `(no log: ${err.message})`;
	}
}

/**
 * startCluster({settings, startTimeoutMs, standbyOf}) -> cluster
 *
 * settings: extra postgresql.conf parameters, e.g. {log_statement: 'all'}.
 * standbyOf: a running cluster to copy (pg_basebackup -R) and follow as a
 * hot standby, instead of a new initdb; its roles and databases come along.
 *
 * cluster = {
 *   port, host: '127.0.0.1', dataDir, socketDir, logFile, pid,
 *   url(user = 'app', pass = 'secret', db = 'app')  postgres:// URL over TCP
 *   psql(sql, {db = 'app', user = 'postgres'})      -> stdout (-X -At), the
 *        trailing newline removed; throws with psql's stderr on error
 *   readLog()                                        the server log so far
 *   restart()                                        fast shutdown, start again on the same port
 *   shutdown()                                       fast shutdown, the data directory kept (restart() starts it)
 *   stop()                                           SIGINT + wait, rm temp dir
 * }
 */
async function startCluster(options = {}) {
	for (const f of ['initdb', 'postgres', 'psql'])
		requireExecutable(path.join(PG_BIN, f));

	const owner = process.getuid() === 0 ? findUser('postgres') : null;
	const base = fs.mkdtempSync(path.join(os.tmpdir(), 'traceprof-pg-'));
	fs.chmodSync(base, 0o755);
	const dataDir = path.join(base, 'data');
	const logFile = path.join(base, 'server.log');
	let child = null;
	let stopped = false;

	const cluster = {
		host: '127.0.0.1',
		port: 0,
		dataDir,
		socketDir: base,
		logFile,
		pid: 0,
		url(user = APP_USER, pass = APP_PASSWORD, db = APP_DB) {
			const auth = pass === null || pass === undefined
				? encodeURIComponent(user)
				: `${encodeURIComponent(user)}:${encodeURIComponent(pass)}`;
			return `postgres://${auth}@127.0.0.1:${this.port}/${encodeURIComponent(db)}?sslmode=disable`;
		},
		async psql(sql, { db = APP_DB, user = 'postgres' } = {}) {
			const res = await run(path.join(PG_BIN, 'psql'),
				['-X', '-At', '-q', '-v', 'ON_ERROR_STOP=1',
					'-h', base, '-p', String(this.port), '-U', user, '-d', db, '-f', '-'],
				{ input: sql, timeout: 60000, env: { PGCONNECT_TIMEOUT: '10' } });
			if (res.code !== 0)
				throw new Error(`psql failed (exit ${res.code}) on ${JSON.stringify(sql.slice(0, 500))}:\n${res.stderr}`);
			return res.stdout.replace(/\n$/, '');
		},
		readLog() {
			return fs.readFileSync(logFile, 'utf8');
		},
		async restart() {
			await halt();
			await launch(this.port);
		},
		async shutdown() {
			await halt();
		},
		async stop() {
			if (stopped)
				return;
			stopped = true;
			await halt();
			if (!process.env.TRACEPROF_KEEP_CLUSTER)
				fs.rmSync(base, { recursive: true, force: true });
		},
	};

	/** Fast shutdown (SIGINT), SIGKILL after 30 s. */
	async function halt() {
		if (child && child.exitCode === null && child.signalCode === null) {
			try { process.kill(child.pid, 'SIGINT'); } catch { /* already gone */ }
			let timer;
			const exited = await Promise.race([waitExit(child),
				new Promise((r) => { timer = setTimeout(() => r(null), 30000); })]);
			clearTimeout(timer);
			if (exited === null) {
				try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
				await waitExit(child);
			}
		}
		if (child)
			live.delete(child);
	}

	/**
	 * Start the postmaster on fixedPort, or on a free port: one picked free
	 * can be taken before the postmaster binds it (tests run in parallel),
	 * so that is retried with another.
	 */
	async function launch(fixedPort) {
		for (let attempt = 1; ; attempt++) {
			const port = fixedPort || await freePort();
			const logFd = fs.openSync(logFile, 'a');
			child = spawnAs(owner, path.join(PG_BIN, 'postgres'), ['-D', dataDir, '-p', String(port)],
				// JIT profiling (jit_profiling_support) writes its jitdump files here.
				{ cwd: base, stdio: ['ignore', logFd, logFd], env: { JITDUMPDIR: base } });
			fs.closeSync(logFd);
			live.add(child);
			child.on('error', () => { /* reported through exit/wait below */ });
			cluster.port = port;
			cluster.pid = child.pid;
			const ready = await waitReady(cluster, child, options.startTimeoutMs ?? 60000);
			if (ready === true)
				break;
			live.delete(child);
			const log = tail(logFile);
			if (!fixedPort && attempt < 5 && /could not (bind|create listen)|Address already in use/i.test(log))
				continue;
			throw new Error(`postgres did not start (${ready}); log ${logFile}:\n${log}`);
		}
		const pidLine = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0];
		if (Number(pidLine) !== child.pid)
			throw new Error(`postmaster.pid says ${pidLine}, but we started ${child.pid}`);
	}

	try {
		if (owner)
			fs.chownSync(base, owner.uid, owner.gid);
		const primary = options.standbyOf;
		if (primary)
			await runAs(owner, path.join(PG_BIN, 'pg_basebackup'),
				['-D', dataDir, '-h', primary.socketDir, '-p', String(primary.port), '-U', 'postgres',
					'-R', '--no-sync', '--checkpoint=fast'], base);
		else
			await runAs(owner, path.join(PG_BIN, 'initdb'),
				['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync'],
				base);

		const conf = {
			listen_addresses: '127.0.0.1',
			unix_socket_directories: base,
			max_connections: '20',
			shared_buffers: '32MB',
			fsync: 'off',
			synchronous_commit: 'off',
			full_page_writes: 'off',
			timezone: 'UTC',
			log_timezone: 'UTC',
			log_line_prefix: '%m [%p] %q%u@%d ',
			password_encryption: 'scram-sha-256',
			...(options.settings || {}),
		};
		fs.appendFileSync(path.join(dataDir, 'postgresql.conf'),
			'\n# traceprof integration tests\n' +
			Object.entries(conf).map(([k, v]) => `${k} = ${quoteConf(v)}\n`).join(''));
		fs.writeFileSync(path.join(dataDir, 'pg_hba.conf'),
			'local all all trust\n' +
			'local replication all trust\n' +
			'host all all 127.0.0.1/32 scram-sha-256\n' +
			'host all all ::1/128 scram-sha-256\n');
		if (owner)
			chownTree(dataDir, owner.uid, owner.gid);

		await launch(0);
		if (!primary)
			await cluster.psql(
				`CREATE ROLE ${APP_USER} LOGIN PASSWORD '${APP_PASSWORD}';\n` +
				`CREATE DATABASE ${APP_DB} OWNER ${APP_USER};\n`, { db: 'postgres' });
		return cluster;
	} catch (err) {
		await cluster.stop().catch(() => {});
		throw err;
	}
}

async function waitReady(cluster, child, timeoutMs) {
	const deadline = Date.now() + timeoutMs;
	const socket = path.join(cluster.socketDir, `.s.PGSQL.${cluster.port}`);
	while (Date.now() < deadline) {
		if (child.exitCode !== null || child.signalCode !== null)
			return `postmaster exited with code ${child.exitCode} signal ${child.signalCode}`;
		if (fs.existsSync(socket)) {
			try {
				if ((await cluster.psql('SELECT 1', { db: 'postgres' })) === '1')
					return true;
			} catch { /* still starting up */ }
		}
		await sleep(100);
	}
	try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
	await waitExit(child);
	return `not ready within ${timeoutMs} ms`;
}

module.exports = { startCluster, freePort, APP_USER, APP_PASSWORD, APP_DB };
