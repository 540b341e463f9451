'use strict';
// The loader stopped by SIGINT or SIGTERM: at any moment of its run, while
// the input stalls, while the server stops reading or answering, during
// COMMIT and during the final export; exit 130, nothing half-committed, the
// run's spans and profile still sent where they can be.  Its own file: the
// runner gives a file 120 s, and loader.test.js was close to it.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { GENERATOR, LOADER, requireExecutable } = require('./lib/paths');
const { run, describe } = require('./lib/run');
const { startCluster, freePort } = require('./lib/cluster');
const { startReceiver } = require('./lib/receiver');
const { decodeTraces } = require('./lib/otlp');
const { makeTempDir, removeTempDir } = require('./lib/tmp');
const { sampleRecords, serialize, ORDERS_DDL } = require('./lib/records');
const { tableState } = require('./lib/loadcheck');
const { waitFor: waitForWhat } = require('./lib/traced');

let cluster;
let dir;

before(async () => {
	requireExecutable(GENERATOR);
	requireExecutable(LOADER);
	dir = makeTempDir('traceprof-load-signals-');
	cluster = await startCluster();
});

after(async () => {
	if (cluster)
		await cluster.stop();
	removeTempDir(dir);
});

function load(args, options = {}) {
	return run(LOADER, args, { timeout: 120000, ...options });
}

const waitFor = (check, timeoutMs, what) => waitForWhat(what, check, timeoutMs, 50);

/** A file of five records. */
function smallFile() {
	const file = path.join(dir, 'five.json');
	fs.writeFileSync(file, serialize(sampleRecords(5)));
	return file;
}

test('SIGINT: exit 130 and the open transaction is rolled back', async () => {
	const file = path.join(dir, 'interrupt.json');
	fs.writeFileSync(file, serialize(sampleRecords(2000)));
	await cluster.psql(`CREATE TABLE interrupted ${ORDERS_DDL};
		ALTER TABLE interrupted OWNER TO app;`);
	// Hold a lock so the loader waits inside its transaction.
	const holder = cluster.psql('BEGIN; LOCK TABLE interrupted IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(4); COMMIT;');
	await waitFor(async () => (await cluster.psql(
		"SELECT count(*) FROM pg_locks WHERE relation = 'interrupted'::regclass AND granted AND mode = 'AccessExclusiveLock'")) === '1',
	10000, 'the lock holder has the lock');
	let child;
	const pending = load([cluster.url(), file, '--table', 'interrupted'], { onSpawn: (c) => { child = c; } });
	await waitFor(async () => (await cluster.psql(
		"SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND wait_event_type = 'Lock'")) === '1',
	10000, 'the loader waits for the lock');
	child.kill('SIGINT');
	const res = await pending;
	await holder;
	assert.equal(res.code, 130, describe(res));
	assert.match(res.stderr, /^loader: error: interrupted/m, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM interrupted'), '0', 'nothing committed');
	await waitFor(async () => (await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")) === '0',
		5000, "the loader's session is gone");
});

test('SIGINT while the input stalls: exit 130 at once, nothing committed', async () => {
	// More than the loader's 1 MiB buffer, then the writer stalls with the
	// FIFO open: the loader sits in read() inside its COPY.
	const file = path.join(dir, 'stall.ndjson');
	const gen = await run(GENERATOR, ['6000', file, '--seed', '13', '--format', 'ndjson']);
	assert.equal(gen.code, 0, describe(gen));
	assert.ok(fs.statSync(file).size > 1.5 * 1024 * 1024);
	const fifo = path.join(dir, 'stall.fifo');
	const mk = await run('mkfifo', [fifo]);
	assert.equal(mk.code, 0, describe(mk));
	let child;
	const pending = load([cluster.url(), fifo, '--table', 'stalled'],
		{ timeout: 10000, onSpawn: (c) => { child = c; } });
	const writer = spawn('sh', ['-c', 'exec >"$1"; cat "$2"; exec sleep 60', 'sh', fifo, file], { stdio: 'ignore' });
	const writerDone = new Promise((resolve) => writer.on('exit', resolve));
	let res;
	let writerOpenAtExit;
	try {
		await waitFor(async () => (await cluster.psql(
			"SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND query LIKE 'COPY%'")) === '1',
		8000, 'the loader is inside its COPY');
		child.kill('SIGINT');
		res = await pending;
		writerOpenAtExit = writer.exitCode === null && writer.signalCode === null;
	} finally {
		writer.kill('SIGKILL');
		await writerDone;
	}
	assert.equal(writerOpenAtExit, true, 'the writer still held the FIFO open when the loader exited');
	assert.equal(res.timedOut, false, `the loader waited for the writer: ${describe(res)}`);
	assert.equal(res.code, 130, describe(res));
	assert.match(res.stderr, /^loader: error: interrupted$/m, describe(res));
	assert.equal(await tableState(cluster, 'stalled'), 'absent', 'the transaction that created it was rolled back');
	await waitFor(async () => (await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")) === '0',
		5000, "the loader's session is gone");
});

test('SIGINT while the server has stopped reading the COPY: exit 130 within seconds, spans and profile out, nothing committed', async (t) => {
	// The loader's backend is SIGSTOPped mid-COPY with far more data to come
	// than socket buffers hold.  The loader sat in libpq's send (a poll()
	// without a way out) until the backend ran again; a second SIGINT killed
	// it without a message, spans or profile.
	const file = path.join(dir, 'stopped-backend.json');
	t.after(() => fs.rmSync(file, { force: true }));
	const gen = await run(GENERATOR, ['600000', file, '--seed', '14']);
	assert.equal(gen.code, 0, describe(gen));
	const r = await startReceiver({ grpc: false });
	t.after(() => r.close());
	const profile = path.join(dir, 'stopped-backend.pprof');
	let child;
	const pending = load([cluster.url(), file, '--table', 'stopped_backend', '--profile-out', profile], {
		timeout: 60000,
		env: { OTEL_EXPORTER_OTLP_ENDPOINT: r.httpEndpoint },
		onSpawn: (c) => { child = c; },
	});
	let backend = 0;
	let res = null;
	let tookMs;
	try {
		await waitFor(async () => {
			backend = Number(await cluster.psql('SELECT pid FROM pg_stat_progress_copy JOIN pg_stat_activity USING (pid) ' +
				"WHERE usename = 'app' AND tuples_processed > 0"));
			return backend > 0;
		}, 20000, "the loader's COPY is under way");
		process.kill(backend, 'SIGSTOP');
		await new Promise((resolve) => setTimeout(resolve, 1000));	// the socket buffers fill up
		const sent = Date.now();
		child.kill('SIGINT');
		res = await Promise.race([pending, new Promise((resolve) => setTimeout(resolve, 5000, null))]);
		tookMs = Date.now() - sent;
	} finally {
		if (backend > 0)
			process.kill(backend, 'SIGCONT');
	}
	if (res === null) {
		res = await pending;
		assert.fail(`the loader was still running 5 s after SIGINT; it ended once the backend ran again\n${describe(res)}`);
	}
	assert.equal(res.code, 130, describe(res));
	assert.ok(tookMs < 5000, `took ${tookMs} ms after the signal`);
	assert.match(res.stderr, /^loader: error: interrupted$/m, describe(res));
	const spans = r.requests.flatMap((q) => decodeTraces(q.body).spans);
	const root = spans.find((s) => s.name === 'loader.run');
	assert.ok(root, `the run's spans were sent: ${spans.map((s) => s.name)}`);
	assert.deepEqual([root.status.code, root.status.message], [2, 'interrupted'], 'loader.run tells of the interruption');
	assert.ok(fs.statSync(profile).size > 0, '--profile-out was written');
	await waitFor(async () => (await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")) === '0',
		10000, "the loader's session is gone once its backend runs again");
	assert.equal(await tableState(cluster, 'stopped_backend'), 'absent', 'the transaction that created it was rolled back');
});

test('SIGINT while the postmaster is stalled: exit 130 within seconds; the cancel is delivered once it runs again', async () => {
	// The cancel request was sent from the signal handler, and PQcancel()
	// waits for the postmaster to take the request and close the
	// connection: with the postmaster stopped, the loader hung in its
	// handler until the postmaster ran again.
	const file = smallFile();
	await cluster.psql(`CREATE TABLE postmaster_stalled ${ORDERS_DDL}; ALTER TABLE postmaster_stalled OWNER TO app;`);
	const holder = cluster.psql('BEGIN; LOCK TABLE postmaster_stalled IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(6); COMMIT;');
	await waitFor(async () => (await cluster.psql(
		"SELECT count(*) FROM pg_locks WHERE relation = 'postmaster_stalled'::regclass AND granted AND mode = 'AccessExclusiveLock'")) === '1',
	10000, 'the lock holder has the lock');
	let child;
	const pending = load([cluster.url(), file, '--table', 'postmaster_stalled'], { timeout: 30000, onSpawn: (c) => { child = c; } });
	await waitFor(async () => (await cluster.psql(
		"SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND wait_event_type = 'Lock'")) === '1',
	10000, 'the loader waits for the lock');
	let res = null;
	process.kill(cluster.pid, 'SIGSTOP');
	try {
		child.kill('SIGINT');
		res = await Promise.race([pending, new Promise((resolve) => setTimeout(resolve, 4000, null))]);
	} finally {
		process.kill(cluster.pid, 'SIGCONT');
	}
	if (res === null) {
		res = await pending;
		assert.fail(`the loader was still running 4 s after SIGINT; it ended once the postmaster ran again\n${describe(res)}`);
	}
	assert.equal(res.code, 130, describe(res));
	assert.match(res.stderr, /^loader: error: interrupted$/m, describe(res));
	// The request waited in the listen queue: the lock wait is cancelled
	// long before the holder's 6 s are over.
	await waitFor(async () => (await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")) === '0',
		4000, "the loader's session is cancelled and gone once the postmaster runs again");
	await holder;
	assert.equal(await cluster.psql('SELECT count(*) FROM postmaster_stalled'), '0', 'nothing committed');
});

/**
 * Load 40 records in batches of 20 into a new table whose first COMMIT
 * sleeps `seconds` in a deferred trigger; once that COMMIT is under way,
 * returns { pending (the run's result), child, backend (its pid) }.
 */
async function loadUntilSlowCommit(table, seconds) {
	const file = path.join(dir, `${table}.json`);
	fs.writeFileSync(file, serialize(sampleRecords(40)));
	await cluster.psql(`CREATE TABLE ${table} ${ORDERS_DDL}; ALTER TABLE ${table} OWNER TO app;
		CREATE FUNCTION ${table}_wait() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN PERFORM pg_sleep(${seconds}); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER ${table}_wait AFTER INSERT ON ${table} DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (NEW.id = ${sampleRecords(1)[0].id}) EXECUTE FUNCTION ${table}_wait();`);
	let child;
	const pending = load([cluster.url(), file, '--table', table, '--batch-size', '20'],
		{ timeout: 20000, onSpawn: (c) => { child = c; } });
	let backend = 0;
	await waitFor(async () => {
		backend = Number(await cluster.psql(
			"SELECT pid FROM pg_stat_activity WHERE usename = 'app' AND query = 'COMMIT' AND state = 'active'"));
		return backend > 0;
	}, 10000, 'the first COMMIT is under way');
	return { pending, child, backend };
}

test('SIGINT during a slow COMMIT on a healthy server: its answer is awaited, so the outcome is known (the cancel rolled it back)', async () => {
	// The signal's cancel request stops the deferred trigger, and the COMMIT
	// fails.  The loader abandoned the connection at once and said it was
	// unknown whether the batch was committed, which the server was about to tell.
	const { pending, child } = await loadUntilSlowCommit('slow_commit', 1.5);
	child.kill('SIGINT');
	const res = await pending;
	assert.equal(res.code, 130, describe(res));
	assert.doesNotMatch(res.stderr, /unknown/, describe(res));
	assert.match(res.stderr, /^loader: error: interrupted \(0 rows in 0 earlier batches stay committed in slow_commit\)$/m, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM slow_commit'), '0', 'the first batch was rolled back');
});

test('SIGINT during a COMMIT the server does not answer: the loader waits 3 s for it, then says the outcome is unknown', async () => {
	const { pending, child, backend } = await loadUntilSlowCommit('stuck_commit', 5);
	let res;
	let tookMs;
	try {
		process.kill(backend, 'SIGSTOP');	// the cancel cannot end it: no answer comes
		const sent = Date.now();
		child.kill('SIGINT');
		res = await pending;
		tookMs = Date.now() - sent;
	} finally {
		process.kill(backend, 'SIGCONT');
	}
	assert.equal(res.code, 130, describe(res));
	assert.ok(tookMs >= 2500 && tookMs < 8000, `ended ${tookMs} ms after the signal (the grace is 3 s)`);
	assert.match(res.stderr, /^loader: error: interrupted during COMMIT; whether the last 20 rows were committed is unknown/m, describe(res));
	await waitFor(async () => (await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")) === '0',
		10000, "the loader's session is gone once its backend runs again");
	assert.equal(await cluster.psql('SELECT count(*) FROM stuck_commit'), '0', 'the abandoned COMMIT was rolled back');
});


function openStalledFifo(name, text) {
	const fifo = path.join(dir, name);
	fs.rmSync(fifo, { force: true });
	execFileSync('mkfifo', [fifo]);
	const fd = fs.openSync(fifo, 'r+');
	if (text)
		fs.writeSync(fd, text);
	return { fifo, close: () => fs.closeSync(fd) };
}


async function createOneRowTable(table) {
	await cluster.psql(`CREATE TABLE ${table} ${ORDERS_DDL}; ALTER TABLE ${table} OWNER TO app;
		INSERT INTO ${table} VALUES (999999, 1, 'kept', 1.00, 'EUR', now(), '{}', '{}')`);
}

test('SIGINT or SIGTERM at any moment while the FIFO stays open with no more data: exit 130 promptly, table unchanged', async (t) => {
	// Three records, then nothing: depending on when the signal lands, the
	// loader is starting, connecting, in its COPY, or waiting for input.
	const records = serialize(sampleRecords(3), 'ndjson');
	await createOneRowTable('signal_window');
	const rounds = 40;
	for (let i = 0; i < rounds; i++) {
		const delayMs = Math.round((i * 300) / rounds);
		const signal = i % 2 ? 'SIGTERM' : 'SIGINT';
		const { fifo, close } = openStalledFifo('window.fifo', records);
		let sentAt;
		let res;
		try {
			res = await load([cluster.url(), fifo, '--table', 'signal_window'], {
				timeout: 15000,
				// From its first line on: before main() has run, a signal kills any program.
				onSpawn: (c) => c.stderr.on('data', (d) => {
					if (sentAt === undefined && String(d).includes('trace_id=')) {
						sentAt = 0;
						setTimeout(() => { sentAt = Date.now(); c.kill(signal); }, delayMs);
					}
				}),
			});
		} finally {
			close();
		}
		const what = `${signal} ${delayMs} ms after its first line`;
		assert.equal(res.timedOut, false, `${what}: the loader went on waiting\n${describe(res)}`);
		assert.equal(res.code, 130, `${what}\n${describe(res)}`);
		assert.match(res.stderr, /^loader: error: interrupted$/m, `${what}\n${describe(res)}`);
		assert.ok(Date.now() - sentAt < 5000, `${what}: took ${Date.now() - sentAt} ms after the signal`);
	}
	await waitFor(async () => (await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")) === '0',
		5000, "the loader's sessions are gone");
	assert.equal(await cluster.psql('SELECT string_agg(id::text, \',\') FROM signal_window'), '999999',
		'every COPY was rolled back');
});

test('a signal that lands just before the wait for input still stops the loader (gdb delivers it there)', async () => {
	// gdb stops the loader at its second wait for input (the first one
	// returns the three records; the second would wait for ever), after
	// the check of the interrupted flag, and delivers SIGINT right there.
	// A read() would then sleep through it; the wait must not.
	requireExecutable('/usr/bin/gdb');
	await createOneRowTable('signal_race');
	const { fifo, close } = openStalledFifo('race.fifo', serialize(sampleRecords(3), 'ndjson'));
	const script = path.join(dir, 'race.gdb');
	fs.writeFileSync(script, [
		'set pagination off',
		'set confirm off',
		'handle SIGINT nostop noprint pass',
		'handle SIGPROF SIGWINCH nostop noprint pass',	// SIGWINCH: the sampler's
		'start',
		'break read if $_caller_is("refill")',
		'break poll if $_caller_is("refill")',
		'ignore 2 1',
		'ignore 3 1',
		'continue',
		'delete',
		'info inferiors',
		'signal SIGINT',
		'',
	].join('\n'));
	let res;
	try {
		res = await run('/usr/bin/gdb', ['-q', '-batch', '-x', script, '--args', LOADER, cluster.url(), fifo,
			'--table', 'signal_race'], { timeout: 20000 });
	} finally {
		close();
	}
	const inferior = /process (\d+)/.exec(res.stdout);
	if (res.timedOut && inferior) {
		// gdb was killed; the loader it left behind would go on waiting
		try { process.kill(Number(inferior[1]), 'SIGKILL'); } catch { /* gone */ }
	}
	// ("Thread 1 "loader" hit": the thread that sends a stop's cancel request is running)
	assert.match(res.stdout, /^(Thread 1 "loader" hit )?Breakpoint [23], /m, `gdb stopped the loader at its wait\n${describe(res)}`);
	assert.equal(res.timedOut, false, `the loader slept through the signal\n${describe(res)}`);
	assert.match(res.stdout, /exited with code 0202\]/, `exit 130 (0202 octal)\n${describe(res)}`);
	assert.match(res.stderr, /^loader: error: interrupted$/m, describe(res));
	await waitFor(async () => (await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")) === '0',
		5000, "the loader's session is gone");
	assert.equal(await cluster.psql('SELECT string_agg(id::text, \',\') FROM signal_race'), '999999',
		'the COPY was rolled back');
});

/**
 * Run the loader with its spans going to a collector that never answers
 * (OTEL_EXPORTER_OTLP_TIMEOUT 60 s), and send SIGINT once the final
 * export's request has arrived.  Returns the run's result.
 */
async function interruptFinalExport(t, args) {
	const r = await startReceiver({ grpc: false });
	t.after(() => r.close());
	r.setDefault({ hang: true });
	let child;
	const pending = load(args, {
		timeout: 30000,
		env: { OTEL_EXPORTER_OTLP_ENDPOINT: r.httpEndpoint, OTEL_EXPORTER_OTLP_TIMEOUT: '60000' },
		onSpawn: (c) => { child = c; },
	});
	await r.waitForRequests(1, 20000);
	child.kill('SIGINT');
	const res = await pending;
	assert.equal(r.requests.length, 1, 'one export request, never answered');
	return res;
}

test('SIGINT in mid-run with a collector that never answers: it says what it waits for, a second SIGINT ends it, "interrupted" once', async (t) => {
	// The first signal ended the run, then the loader sat silent for the
	// export's whole timeout (here 60 s); and it said "interrupted" twice.
	const r = await startReceiver({ grpc: false });
	t.after(() => r.close());
	r.setDefault({ hang: true });
	const fifo = path.join(dir, 'interrupt-twice.fifo');
	const mk = await run('mkfifo', [fifo]);
	assert.equal(mk.code, 0, describe(mk));
	const writer = spawn('sh', ['-c', 'exec >"$1"; exec sleep 60', 'sh', fifo], { stdio: 'ignore' });
	const writerDone = new Promise((resolve) => writer.on('exit', resolve));
	t.after(async () => {
		writer.kill('SIGKILL');
		await writerDone;
	});
	let child;
	let stderr = '';
	const pending = load([cluster.url(), fifo, '--table', 'interrupt_twice'], {
		timeout: 30000,
		env: { OTEL_EXPORTER_OTLP_ENDPOINT: r.httpEndpoint, OTEL_EXPORTER_OTLP_TIMEOUT: '60000' },
		onSpawn: (c) => {
			child = c;
			c.stderr.on('data', (d) => { stderr += d; });
		},
	});
	await waitFor(async () => stderr.includes('trace_id='), 10000, 'the loader runs');
	child.kill('SIGINT');
	await waitFor(async () => /interrupt again to skip them/.test(stderr), 10000, 'the loader says what it waits for');
	await r.waitForRequests(1, 20000);
	child.kill('SIGINT');
	const res = await pending;
	assert.equal(res.timedOut, false, describe(res));
	assert.equal(res.code, 130, describe(res));
	assert.equal(res.stderr.match(/^loader: error: interrupted$/gm)?.length, 1, `said once\n${describe(res)}`);
	assert.equal(await tableState(cluster, 'interrupt_twice'), 'absent', 'nothing loaded');
});

test('SIGINT during the final export of a loader that never connected: it stops at once, exit 130, saying what was lost', async (t) => {
	// The signal only set a flag nobody read: the loader waited for the
	// whole OTEL_EXPORTER_OTLP_TIMEOUT (here 60 s) before exiting 4.
	const port = await freePort();
	const res = await interruptFinalExport(t, [`postgres://app@127.0.0.1:${port}/postgres`, smallFile(), '--table', 'never_connected']);
	assert.equal(res.timedOut, false, `the loader waited for the export's timeout\n${describe(res)}`);
	assert.equal(res.code, 130, describe(res));
	assert.match(res.stderr, /^loader: error: cannot connect to /m, 'the run\'s own error is still told');
	assert.match(res.stderr, /^loader: warning: traces not exported: interrupted: 2 span\(s\) of 2 not sent$/m, describe(res));
	assert.match(res.stderr, /^loader: error: interrupted$/m, describe(res));
});

test('SIGINT during the final export of a loader that loaded: the same (not killed by the signal), the rows stay', async (t) => {
	// A connected loader restored SIGINT's default action after its run:
	// killed there, with no message (and a --profile-out not yet written).
	const file = path.join(dir, 'final-export.json');
	fs.writeFileSync(file, serialize(sampleRecords(50)));
	const res = await interruptFinalExport(t, [cluster.url(), file, '--table', 'final_export']);
	assert.equal(res.signal, null, `killed by the signal\n${describe(res)}`);
	assert.equal(res.timedOut, false, describe(res));
	assert.equal(res.code, 130, describe(res));
	assert.match(res.stderr, /^loader: loaded 50 rows into final_export /m);
	assert.match(res.stderr, /^loader: warning: traces not exported: interrupted: 4 span\(s\) of 4 not sent$/m, describe(res));
	assert.match(res.stderr, /^loader: error: interrupted$/m, describe(res));
	assert.equal(await cluster.psql('SELECT count(*) FROM final_export'), '50', 'the load was committed before');
});
