'use strict';
// The shared-memory span ring (extension/shm_ring.c).
//
// 1. A backend preempted between taking its slot of the span ring and
// publishing it, while other backends write a whole lap of the ring (no
// exporter: the ring keeps the newest positions).  gdb holds the backend at
// shm_ring_end_write, its span copied and not yet published: the spans
// that come round to its slot must be dropped and counted, never copied
// over it.  Before the fix the lapping span was copied into the held slot
// and published; the held backend then published over it, so both spans
// were lost and neither counted as dropped (and a reader could be shown
// one backend's fields with another's query text).
//
// 2. A scan of a full ring of 65,536 slots can be cancelled: a 20 ms
//    statement_timeout stops it long before its end.  And it holds one
//    row's memory at a time: before the fix every row's texts and jsonb
//    stayed allocated until the scan ended (a backend's peak virtual size
//    grew by ~7 kB a span: gigabytes for the largest ring).
//
// 3. The lapping spans of 1 gave their positions up: nobody will publish
//    them.  When an endpoint is set next, export starts at the ring's end
//    and never waits for them: 300 spans written once it exports (more
//    than the ring's 128 slots) all arrive, none dropped.  It had waited
//    for such a position for ever (every later span dropped), then 5 s,
//    while writers, which never lap the exporter, dropped every span once
//    the ring was full.
//
// 4. A traceprof.reset() that lands while a backend writes a span longer
//    than a slot, between its claim of the positions and settling the count
//    of the slots past the first (gdb holds it there): spans_created after the
//    reset counts exactly the spans traceprof.spans shows.  Before the fix
//    the held span's extra slots were subtracted from the new period:
//    created was 2 short (the span takes 3 slots), or 0 instead of 1.
//
// 5. The other way round: the reset held after it read the ring's end,
//    before it zeroed that count, while another backend writes a span of 3
//    slots.  Before the fix the count was zeroed under the span, whose 3
//    positions then counted as 3 spans.
//
// 6. Export switched off while a backend runs a long statement that
//    writes nested spans: the backend, which reloads its settings only at
//    its next command, follows the exporter's switch at once (the ring's
//    keep mode lives in shared memory).  Before the fix it kept waiting for
//    an export that had stopped: once the ring was full, every later span
//    of the statement was dropped (~250 of 384).
//
// 7. Export switched on while a backend is held mid-write (gdb), so that
//    its slot is still being written when another backend's span comes to
//    it a lap later: that span gives its position up, and the exporter,
//    told so, passes it at once.  Before the fix the exporter waited 5 s at
//    that position while the other backend filled the ring: most of its
//    later spans were dropped.  The held span, written before export
//    started, is published when its writer resumes, not exported.
//
// 8. A backend held mid-write with export on: the exporter waits 5 s at
//    its position, then goes on without it.  When the backend resumes, its
//    span is dropped and counted once, neither exported nor shown.  Before
//    the fix it was published after the exporter passed it (shown in SQL,
//    never exported), and whether it counted as dropped depended on the
//    exporter having recorded its progress yet.
//
// 9. The same, the backend held after it looked whether the exporter passed
//    it and before it publishes: it publishes over the exporter's mark.
//    The exporter takes the span back at its next round and counts it as
//    dropped.  Before the fix it stayed shown, counted as created, and was
//    neither exported nor counted as dropped.
//
// 10. spans_created read 200,000 times while four backends write spans of
//    3 slots: it never goes down.  Before the fix a read between a claim
//    and its count of the slots past the first counted those as spans, and
//    the next read fewer (1 to 11 falls a run).
//
// 11. A span of 3 slots claimed while a reset that published its period is
//    still flagged counts its slots anew (gdb holds both): a reader in
//    between sees it as one span at most (4 before the fix, kept so).
//
// 12. A span published over the exporter's mark while a failed export kept
//    the exporter before it: exported once the collector is back, not
//    taken back (before the fix: dropped; or, read meanwhile, counted as
//    exported and as dropped).
//
// A real PostgreSQL 15 cluster (shared_preload_libraries = 'traceprof',
// max_spans at its minimum, 128) and gdb attached to one backend.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const { newContext, waitFor, startTraced, connect } = require('./lib/traced');
const { startReceiver } = require('./lib/receiver');
const { requireExecutable, ROOT } = require('./lib/paths');
const { makeTempDir, removeTempDir } = require('./lib/tmp');

const GDB = '/usr/bin/gdb';
const SLOTS = 128;

let cluster;
let dir;

before(async () => {
	requireExecutable(GDB);
	dir = makeTempDir('traceprof-lap-');
	cluster = await startTraced({
		'traceprof.max_spans': String(SLOTS),
		'traceprof.track_planning': 'off',
		'traceprof.query_text': 'full',
		'traceprof.profile': 'off',
	});
});

after(async () => {
	if (cluster)
		await cluster.stop();
	removeTempDir(dir);
});

/**
 * gdb attached to pid, stopped at the first time it reaches where (a
 * function, or file:line), after gdb commands then (e.g. finish: once the
 * function returned); it lets the backend go on once release() is called.
 */
let holds = 0;

function holdAt(pid, where, then = []) {
	const hold = ++holds;
	const file = (name) => path.join(dir, `${name}-${hold}`);
	const gdb = spawn(GDB, ['-p', String(pid), '-batch', '-nx',
		// PostgreSQL's own signals (latches, timeouts) must not stop it early.
		'-ex', 'handle SIGUSR1 SIGUSR2 SIGALRM SIGPROF SIGWINCH SIGINT SIGTERM SIGQUIT SIGPIPE nostop noprint pass',
		'-ex', `break ${where}`,
		'-ex', `shell touch ${file('armed')}`,
		'-ex', 'continue',
		...then.flatMap((command) => ['-ex', command]),
		'-ex', `shell touch ${file('held')}`,
		'-ex', `shell while [ ! -e ${file('go')} ]; do sleep 0.05; done`,
		'-ex', 'delete',
		'-ex', 'detach'], { stdio: ['ignore', 'pipe', 'pipe'] });
	let output = '';
	gdb.stdout.on('data', (d) => { output += d; });
	gdb.stderr.on('data', (d) => { output += d; });
	const exited = new Promise((resolve) => gdb.on('exit', resolve));
	return {
		armed: async () => {
			await waitFor(() => `gdb to attach: ${output}`, () => fs.existsSync(file('armed')), 30000);
			// A location gdb cannot place would let the backend run on.
			assert.doesNotMatch(output, /No line|not defined|No symbol/, `gdb: break ${where}: ${output}`);
		},
		held: () => waitFor(() => `the backend at ${where}: ${output}`, () => fs.existsSync(file('held')), 30000),
		release: async () => {
			fs.writeFileSync(file('go'), '');
			// Never reached: gdb quits on SIGTERM, detaching (its SIGINT
			// would go to the backend, as a cancel).
			if (!fs.existsSync(file('held')))
				gdb.kill('SIGTERM');
			const code = await exited;
			assert.equal(code, 0, `gdb: ${output}`);
		},
	};
}

function holdAtPublish(pid) {
	return holdAt(pid, 'shm_ring_end_write');
}

/**
 * The line of publish() right after its writer looked for the exporter's
 * mark, before it stores: a writer held there publishes over a mark set
 * meanwhile.
 */
function afterLookingForTheMark() {
	const lines = fs.readFileSync(path.join(ROOT, 'extension', 'shm_ring.c'), 'utf8').split('\n');
	const marker = lines.findIndex((l) => l.includes('holds a writer here, before the store'));
	assert.ok(marker >= 0, 'the comment before publish()\'s check in extension/shm_ring.c');
	return `shm_ring.c:${marker + 2}`;
}

/**
 * One traced span of held, held by gdb between taking its slot and
 * publishing it (or at where): its backend's pid, its context, gdb and the
 * query.
 */
async function holdASpan(held, where) {
	const pid = (await held.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
	const ctx = newContext();
	await held.query(`SET traceprof.traceparent = '${ctx.header}'`);
	const gdb = where ? holdAt(pid, where) : holdAtPublish(pid);
	try {
		await gdb.armed();
		const heldQuery = held.query("SELECT 'held span' AS marker");
		heldQuery.catch(() => { /* reported by whoever awaits it, or moot after a failure */ });
		await gdb.held();
		return { pid, ctx, gdb, heldQuery };
	} catch (err) {
		await gdb.release().catch(() => {});
		throw err;
	}
}

/** A span of held held (holdASpan) while others writes laps * SLOTS spans. */
async function lapAHeldSlot(held, others, laps) {
	await others.query('SET traceprof.sample_rate = 1');
	const hold = await holdASpan(held);
	try {
		for (let i = 0; i < laps * SLOTS; i++)
			await others.query(`SELECT ${i} AS lapping`);
		return hold;
	} catch (err) {
		await hold.gdb.release().catch(() => {});
		throw err;
	}
}

test('a span whose slot is still being written is dropped, not copied over it', async () => {
	const held = await connect(cluster);
	const others = await connect(cluster);
	const reader = await connect(cluster);
	let gdb;
	try {
		const othersPid = (await others.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
		await reader.query('SELECT traceprof.reset()');
		// Two laps of the ring from another backend, which must not wait.
		const laps = 2;
		const lapped = await lapAHeldSlot(held, others, laps);
		const { pid, heldQuery } = lapped;
		gdb = lapped.gdb;
		const during = (await reader.query('SELECT spans_dropped FROM traceprof.stats')).rows[0];
		assert.equal(Number(during.spans_dropped), laps,
			'each lap over the held slot drops the span that came to it');
		const mixed = (await reader.query(
			'SELECT backend_pid, query FROM traceprof.spans WHERE backend_pid = $1', [pid])).rows;
		assert.deepEqual(mixed, [], 'nothing of the held backend is readable before it publishes');

		await gdb.release();
		gdb = null;
		await heldQuery;
		// The ring keeps the newest positions: the held span's, a lap and
		// more behind, is no longer among them; every span shown is whole.
		const shown = (await reader.query('SELECT backend_pid, query FROM traceprof.spans')).rows;
		assert.equal(shown.length, SLOTS - 1, 'the last lap but the slot held then');
		for (const row of shown) {
			assert.equal(row.backend_pid, othersPid, JSON.stringify(row));
			assert.match(row.query, /^SELECT \d+ AS lapping$/);
		}
		const stats = (await reader.query('SELECT spans_created, spans_dropped FROM traceprof.stats')).rows[0];
		assert.equal(Number(stats.spans_dropped), laps);
		// Created counts the spans that got a slot, not the dropped ones.
		assert.equal(Number(stats.spans_created), laps * SLOTS - laps + 1);
	} finally {
		// Detach cleanly: killed, gdb would leave its breakpoint in the backend.
		if (gdb)
			await gdb.release().catch(() => {});
		await Promise.all([held, others, reader].map((c) => c.end().catch(() => {})));
	}
});

test('a scan of traceprof.spans over 65,536 slots stops at statement_timeout, not at its end', async (t) => {
	// Before the fix the scan never checked for interrupts: a timeout or a
	// cancel took effect only once every slot had been read (seconds at the
	// largest traceprof.max_spans, with nothing able to stop it).
	const big = await startTraced({
		'traceprof.max_spans': '65536',
		'traceprof.track': 'all',
		'traceprof.track_planning': 'off',
		'traceprof.profile': 'off',
	});
	const client = await connect(big);
	try {
		await client.query('SET traceprof.sample_rate = 1');
		await client.query("DO $$ BEGIN FOR i IN 1..70000 LOOP EXECUTE 'SELECT ' || i; END LOOP; END $$");
		await client.query('SET traceprof.sample_rate = 0');
		let start = performance.now();
		const shown = Number((await client.query('SELECT count(*) AS n FROM traceprof.spans')).rows[0].n);
		const whole = performance.now() - start;
		assert.ok(shown > 65000, `a full ring to scan (${shown} spans)`);

		// The rows go to a tuplestore (work_mem, then disk); nothing else
		// may grow with the ring.
		const reader = await connect(big);
		try {
			const pid = (await reader.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
			const peakKb = () => Number(/^VmPeak:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
			const before = peakKb();
			await reader.query('SELECT * FROM traceprof.spans');
			const grown = peakKb() - before;
			assert.ok(grown < 64 * 1024, `a scan of ${shown} spans grew the backend's peak size by ${grown} kB`);
		} finally {
			await reader.end();
		}

		await client.query("SET statement_timeout = '20ms'");
		start = performance.now();
		await assert.rejects(client.query('SELECT count(*) FROM traceprof.spans'), (e) => e.code === '57014');
		const stopped = performance.now() - start;
		t.diagnostic(`the whole scan took ${whole.toFixed(0)} ms; the one the timeout stopped ${stopped.toFixed(0)} ms`);
		assert.ok(stopped < whole / 2,
			`the timeout stops the scan (${stopped.toFixed(0)} ms) well before its end (${whole.toFixed(0)} ms)`);
	} finally {
		await client.end();
		await big.stop();
	}
});

/** spans_created and spans_dropped, as numbers. */
async function ringCounts(client) {
	const row = (await client.query('SELECT spans_created, spans_dropped FROM traceprof.stats')).rows[0];
	return { created: Number(row.spans_created), dropped: Number(row.spans_dropped) };
}

/**
 * Export to receiver every 100 ms, set by admin; resolves once the exporter
 * took it: a span client writes then arrives (export starts with the spans
 * written after it was switched on, so one written before never does).
 */
async function exportTo(admin, receiver, client) {
	await admin.query(`ALTER SYSTEM SET traceprof.otlp_endpoint = '${receiver.httpEndpoint}'`);
	await admin.query("ALTER SYSTEM SET traceprof.export_interval = '100'");
	await admin.query('SELECT pg_reload_conf()');
	await waitFor('a span exported', async () => {
		const ctx = newContext();
		await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
		await client.query('SELECT 1 AS export_started');
		await client.query('RESET traceprof.traceparent');
		try {
			return await waitFor('the span', () => receiver.spans().some((sp) => sp.traceId === ctx.traceId), 1000);
		} catch {
			return false;
		}
	}, 30000);
}

async function stopExporting(admin) {
	await admin.query('ALTER SYSTEM RESET traceprof.otlp_endpoint');
	await admin.query('ALTER SYSTEM RESET traceprof.export_interval');
	await admin.query('SELECT pg_reload_conf()');
}

/** Until the exporter has sent everything the ring holds for it. */
async function waitForDrained(admin) {
	await waitFor('nothing left waiting in the ring', async () =>
		Number((await admin.query('SELECT spans_pending FROM traceprof.stats')).rows[0].spans_pending) === 0, 30000);
}

/**
 * fn(scene) with a receiver and three connections (held, others, admin);
 * then export is switched off, scene.gdb (if set) detached, all closed.
 */
async function exportScene(fn) {
	const scene = {
		receiver: await startReceiver({ grpc: false }),
		held: await connect(cluster),
		others: await connect(cluster),
		admin: await connect(cluster),
		gdb: null,
	};
	try {
		await fn(scene);
	} finally {
		if (scene.gdb)
			await scene.gdb.release().catch(() => {});
		await stopExporting(scene.admin).catch(() => {});
		await Promise.all([scene.held, scene.others, scene.admin].map((c) => c.end().catch(() => {})));
		await scene.receiver.close();
	}
}

/** n spans of a new trace, written by client after the held one; the trace's context. */
async function spansOfANewTrace(client, n) {
	const ctx = newContext();
	await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
	for (let i = 0; i < n; i++)
		await client.query(`SELECT ${i} AS after_held`);
	return ctx;
}

/**
 * Export from scene's cluster to its receiver, then a span of scene.held
 * held by gdb (scene.gdb) between taking its slot and publishing it, or at
 * where: the span's context and query.
 */
async function exportWithAHeldSpan(scene, where) {
	await exportTo(scene.admin, scene.receiver, scene.others);
	const hold = await holdASpan(scene.held, where);
	scene.gdb = hold.gdb;
	return { heldCtx: hold.ctx, heldQuery: hold.heldQuery };
}

test('positions given up while export was off do not stop export once an endpoint is set', async (t) => {
	await exportScene(async (scene) => {
		const { receiver, held, others, admin } = scene;
		const laps = await lapAHeldSlot(held, others, 2);
		scene.gdb = laps.gdb;
		await scene.gdb.release();
		scene.gdb = null;
		await laps.heldQuery;
		await others.query('SET traceprof.sample_rate = 0');

		await exportTo(admin, receiver, others);
		const dropped = async () => Number((await admin.query('SELECT spans_dropped FROM traceprof.stats')).rows[0].spans_dropped);
		const droppedBefore = await dropped();
		const ctx = newContext();
		const client = await connect(cluster);
		const SPANS = 300;
		try {
			await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
			for (let i = 0; i < SPANS; i++)
				await client.query(`SELECT ${i} AS after_laps`);
		} finally {
			await client.end();
		}
		const started = performance.now();
		const arrived = await waitFor(`the ${SPANS} spans of trace ${ctx.traceId} at the receiver`, () => {
			const spans = receiver.spans().filter((s) => s.traceId === ctx.traceId);
			return spans.length === SPANS ? spans : null;
		}, 30000);
		assert.equal(arrived.length, SPANS);
		assert.equal(await dropped(), droppedBefore, 'no span written after the switch was dropped');
		const stats = (await admin.query('SELECT spans_pending FROM traceprof.stats')).rows[0];
		assert.equal(Number(stats.spans_pending), 0, 'nothing left waiting in the ring');
		t.diagnostic(`exported ${((performance.now() - started) / 1000).toFixed(1)} s after the statements`);
	});
});

/** A span of several slots: a query text of ~1,000 bytes (slots hold 480). */
const LONG_SPAN_SQL = `SELECT '${'x'.repeat(1000)}' AS long_text`;

/** spans_created and the rows of traceprof.spans, read by client. */
async function createdAndShown(client) {
	const stats = (await client.query('SELECT spans_created FROM traceprof.stats')).rows[0];
	const shown = (await client.query('SELECT count(*) AS n FROM traceprof.spans')).rows[0];
	return { created: Number(stats.spans_created), shown: Number(shown.n) };
}

async function fiveShortSpans(client) {
	await client.query(`SET traceprof.traceparent = '${newContext().header}'`);
	for (let i = 0; i < 5; i++)
		await client.query(`SELECT ${i} AS after_reset`);
	await client.query('RESET traceprof.traceparent');
}

test('a reset while a backend claims a span of several slots: spans_created counts the spans shown', async () => {
	const held = await connect(cluster);
	const others = await connect(cluster);
	const reader = await connect(cluster);
	let gdb;
	try {
		const pid = (await held.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
		await reader.query('SELECT traceprof.reset()');
		await held.query(`SET traceprof.traceparent = '${newContext().header}'`);
		// After the claim's compare-and-swap (its slots past the first
		// counted before it), before that count is settled.
		gdb = holdAt(pid, 'settle_early_count');
		await gdb.armed();
		const heldQuery = held.query(LONG_SPAN_SQL);
		heldQuery.catch(() => { /* reported by the await below */ });
		await gdb.held();
		await reader.query('SELECT traceprof.reset()');
		await gdb.release();
		gdb = null;
		await heldQuery;
		// The held span was claimed before the reset: not shown, not counted.
		assert.deepEqual(await createdAndShown(reader), { created: 0, shown: 0 });
		await fiveShortSpans(others);
		assert.deepEqual(await createdAndShown(reader), { created: 5, shown: 5 });
	} finally {
		if (gdb)
			await gdb.release().catch(() => {});
		await Promise.all([held, others, reader].map((c) => c.end().catch(() => {})));
	}
});

test('a span of several slots claimed while a published reset is still flagged never counts as several spans', async () => {
	// Such a writer counts its extra slots again for its own period
	// (settle_early_count).  Before, it took its early count out before
	// counting anew: a reader in between saw its 3 slots as 3 spans, and
	// spans_created never goes down.
	const writer = await connect(cluster);
	const resetter = await connect(cluster);
	const reader = await connect(cluster);
	let holdReset;
	let holdWriter;
	try {
		// Once start_period returned: the new period published, the reset still flagged.
		holdReset = holdAt((await resetter.query('SELECT pg_backend_pid() AS pid')).rows[0].pid, 'start_period', ['finish']);
		await holdReset.armed();
		const resetQuery = resetter.query('SELECT traceprof.reset()');
		resetQuery.catch(() => { /* reported by the await below */ });
		await holdReset.held();
		await writer.query(`SET traceprof.traceparent = '${newContext().header}'`);
		holdWriter = holdAt((await writer.query('SELECT pg_backend_pid() AS pid')).rows[0].pid, 'count_extra_slots');
		await holdWriter.armed();
		const writeQuery = writer.query(LONG_SPAN_SQL);
		writeQuery.catch(() => { /* reported by the await below */ });
		await holdWriter.held();
		const during = await createdAndShown(reader);
		await holdWriter.release();
		holdWriter = null;
		await writeQuery;
		await holdReset.release();
		holdReset = null;
		await resetQuery;
		// The spans shown, and the held one at most (counted from its claim).
		assert.ok(during.created <= during.shown + 1,
			`spans_created ${during.created} with ${during.shown} spans shown while the span's count was settled`);
		const { created, shown } = await createdAndShown(reader);
		assert.equal(created, shown, 'spans_created counts the spans shown');
	} finally {
		for (const hold of [holdWriter, holdReset])
			if (hold)
				await hold.release().catch(() => {});
		await Promise.all([writer, resetter, reader].map((c) => c.end().catch(() => {})));
	}
});

test('spans_created never goes down while backends write spans of several slots', async () => {
	// Before, a reader between a writer's claim of its positions and its
	// count of those past the first saw the span's slots as spans, and then
	// fewer: a counter going down reads as a reset to whoever takes its rate.
	const writers = await Promise.all([0, 1, 2, 3].map(() => connect(cluster)));
	const reader = await connect(cluster);
	let writing = true;
	try {
		for (const w of writers)
			await w.query(`SET traceprof.traceparent = '${newContext().header}'`);
		const loops = writers.map(async (w) => {
			let n = 0;
			while (writing) {
				await w.query(LONG_SPAN_SQL);
				n++;
			}
			return n;
		});
		// A statement of its own for each read: a function scan asked again
		// in one statement keeps its first result.
		const notices = [];
		reader.on('notice', (n) => notices.push(n.message));
		await reader.query(`DO $$
			DECLARE prev bigint := 0; cur bigint; falls int := 0; rises int := 0;
			BEGIN
				FOR i IN 1..200000 LOOP
					SELECT spans_created INTO cur FROM traceprof.stats;
					IF cur < prev THEN falls := falls + 1; ELSIF cur > prev THEN rises := rises + 1; END IF;
					prev := cur;
				END LOOP;
				RAISE NOTICE 'falls=% rises=%', falls, rises;
			END $$`);
		writing = false;
		const written = (await Promise.all(loops)).reduce((a, b) => a + b, 0);
		const [, falls, rises] = /^falls=(\d+) rises=(\d+)$/.exec(notices.at(-1) ?? '') ?? [];
		assert.ok(Number(rises) > 1 && written > 0, `spans were written while it read: ${notices}, ${written} spans`);
		assert.equal(Number(falls), 0, `spans_created went down ${falls} times in 200,000 reads (${written} spans written)`);
	} finally {
		writing = false;
		await Promise.all([...writers, reader].map((c) => c.end().catch(() => {})));
	}
});

test('a span of several slots written while a reset is under way counts as one span', async () => {
	const writer = await connect(cluster);
	const resetter = await connect(cluster);
	const reader = await connect(cluster);
	let gdb;
	try {
		const pid = (await resetter.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
		// After the reset read the ring's end, before it settles the count
		// of slots past records' first.
		gdb = holdAt(pid, 'start_period');
		await gdb.armed();
		const resetQuery = resetter.query('SELECT traceprof.reset()');
		resetQuery.catch(() => { /* reported by the await below */ });
		await gdb.held();
		await writer.query(`SET traceprof.traceparent = '${newContext().header}'`);
		await writer.query(LONG_SPAN_SQL);
		await writer.query('RESET traceprof.traceparent');
		await gdb.release();
		gdb = null;
		await resetQuery;
		// The long span is on either side of the reset, shown and counted
		// as one span, or neither.
		const { created, shown } = await createdAndShown(reader);
		assert.ok(shown <= 1, `${shown} spans shown`);
		assert.equal(created, shown, 'spans_created counts the spans shown');
		await fiveShortSpans(writer);
		assert.deepEqual(await createdAndShown(reader), { created: shown + 5, shown: shown + 5 });
	} finally {
		if (gdb)
			await gdb.release().catch(() => {});
		await Promise.all([writer, resetter, reader].map((c) => c.end().catch(() => {})));
	}
});

test('a statement running when export is switched off drops none of its later spans', async () => {
	const receiver = await startReceiver({ grpc: false });
	const admin = await connect(cluster);
	const runner = await connect(cluster);
	try {
		await exportTo(admin, receiver, runner);
		const ctx = newContext();
		await runner.query(`SET traceprof.traceparent = '${ctx.header}'`);
		await runner.query("SET traceprof.track = 'all'");
		const before = await ringCounts(admin);
		const NESTED = 3 * SLOTS;
		// One statement, NESTED nested spans over ~2 s.
		const running = runner.query(`DO $$ BEGIN FOR i IN 1..${NESTED} LOOP
			PERFORM count(*) FROM pg_class WHERE oid = i; PERFORM pg_sleep(0.005); END LOOP; END $$`);
		running.catch(() => { /* reported by the await below */ });
		await waitFor('the statement under way', async () =>
			(await ringCounts(admin)).created >= before.created + 20, 30000, 10);
		const logFrom = cluster.readLog().length;
		await stopExporting(admin);
		await running;
		const after = await ringCounts(admin);
		assert.ok(after.created - before.created >= NESTED,
			`the statement's spans were written (${after.created - before.created})`);
		// Those waiting for export when it stopped are given up, counted as
		// dropped and logged; none written after it is.
		const abandoned = /export switched off with (\d+) spans not exported/.exec(cluster.readLog().slice(logFrom));
		assert.equal(after.dropped - before.dropped, abandoned ? Number(abandoned[1]) : 0,
			'no span dropped after export was switched off, but those it gave up');
		const shown = (await admin.query(
			"SELECT count(*) AS n FROM traceprof.spans WHERE trace_id = $1", [ctx.traceId])).rows[0];
		assert.ok(Number(shown.n) >= SLOTS - 1, `the ring keeps the newest spans (${shown.n})`);
	} finally {
		await stopExporting(admin).catch(() => {});
		await Promise.all([admin, runner].map((c) => c.end().catch(() => {})));
		await receiver.close();
	}
});

test('a position given up under a slot still being written is passed at once by the exporter', async (t) => {
	await exportScene(async (scene) => {
		const { receiver, held, others, admin } = scene;
		const hold = await holdASpan(held);
		const { ctx: heldCtx, heldQuery } = hold;
		scene.gdb = hold.gdb;
		await exportTo(admin, receiver, others);
		const before = await ringCounts(admin);

		// A lap and a half: one of them (not two) comes to the held slot.
		const ctx = newContext();
		const SPANS = SLOTS + SLOTS / 2;
		await others.query(`SET traceprof.traceparent = '${ctx.header}'`);
		for (let i = 0; i < SPANS; i++)
			await others.query(`SELECT ${i} AS past_held`);
		const started = performance.now();
		const arrived = await waitFor(() => `${SPANS - 1} spans of trace ${ctx.traceId} at the receiver (${receiver.spans().filter((s) => s.traceId === ctx.traceId).length} arrived)`, () => {
			const spans = receiver.spans().filter((s) => s.traceId === ctx.traceId);
			return spans.length >= SPANS - 1 ? spans : null;
		}, 30000);
		const waited = performance.now() - started;
		t.diagnostic(`exported ${(waited / 1000).toFixed(1)} s after the statements`);
		// Not the 5 s the exporter gives a position someone may still publish.
		assert.ok(waited < 4000, `export went on at once (${waited.toFixed(0)} ms)`);
		assert.equal(arrived.length, SPANS - 1, 'all but the span that came to the held slot');
		assert.equal((await ringCounts(admin)).dropped, before.dropped + 1, 'that one span dropped, counted');

		await scene.gdb.release();
		scene.gdb = null;
		await heldQuery;
		// Written before export started: published, not exported, not dropped.
		assert.equal((await ringCounts(admin)).dropped, before.dropped + 1);
		await waitForDrained(admin);
		assert.equal(receiver.spans().filter((s) => s.traceId === heldCtx.traceId).length, 0,
			'the held span never reached the receiver');
	});
});

test('a span its writer publishes after the exporter gave up waiting is dropped and counted, never shown', async (t) => {
	await exportScene(async (scene) => {
		const { receiver, others, admin } = scene;
		const { heldCtx, heldQuery } = await exportWithAHeldSpan(scene);
		const before = await ringCounts(admin);

		// Export stops at the held position, and goes on without it after 5 s.
		const SPANS = 20;
		const ctx = await spansOfANewTrace(others, SPANS);
		const started = performance.now();
		await waitFor(`the ${SPANS} spans after the held one at the receiver`,
			() => receiver.spans().filter((s) => s.traceId === ctx.traceId).length === SPANS, 30000);
		const waited = performance.now() - started;
		t.diagnostic(`exported ${(waited / 1000).toFixed(1)} s after the statements`);
		assert.ok(waited > 3000, `export waited for the held position (${waited.toFixed(0)} ms)`);

		// Its writer resumes after the exporter passed it: dropped, counted
		// once, and neither exported nor shown.
		await scene.gdb.release();
		scene.gdb = null;
		await heldQuery;
		const after = await ringCounts(admin);
		assert.equal(after.dropped, before.dropped + 1);
		// Counted when its position was claimed, taken out when dropped.
		assert.equal(after.created, before.created + SPANS - 1, 'created counts the spans stored');
		const shown = (await admin.query(
			'SELECT count(*) AS n FROM traceprof.spans WHERE trace_id = $1', [heldCtx.traceId])).rows[0];
		assert.equal(Number(shown.n), 0, 'a dropped span is not shown');
		await waitForDrained(admin);
		assert.equal(receiver.spans().filter((s) => s.traceId === heldCtx.traceId).length, 0);
		assert.equal(receiver.spans().filter((s) => s.traceId === ctx.traceId).length, SPANS);
	});
});

test('a span its writer publishes over the exporter\'s mark (held between its look for the mark and its store) is dropped and counted at the exporter\'s next round', async (t) => {
	// Before, the store wiped the mark: the span stayed in traceprof.spans,
	// counted as created, never exported and never counted as dropped.
	await exportScene(async (scene) => {
		const { receiver, others, admin } = scene;
		const { heldCtx, heldQuery } = await exportWithAHeldSpan(scene, afterLookingForTheMark());
		const before = await ringCounts(admin);

		const SPANS = 20;
		const ctx = await spansOfANewTrace(others, SPANS);
		await waitFor(`the ${SPANS} spans after the held one at the receiver (the exporter passed it)`,
			() => receiver.spans().filter((s) => s.traceId === ctx.traceId).length === SPANS, 30000);

		await scene.gdb.release();
		scene.gdb = null;
		await heldQuery;
		const after = await waitFor('the span published over the mark counted as dropped', async () => {
			const c = await ringCounts(admin);
			return c.dropped === before.dropped + 1 ? c : null;
		}, 10000);
		// The spans stored; or the held one too, if a read of the stats saw it
		// published before the exporter took it back: spans_created never
		// goes down.
		assert.ok([before.created + SPANS - 1, before.created + SPANS].includes(after.created),
			`created ${after.created}: the ${SPANS} stored since ${before.created} (which counted the held span)`);
		const shown = (await admin.query(
			'SELECT count(*) AS n FROM traceprof.spans WHERE trace_id = $1', [heldCtx.traceId])).rows[0];
		assert.equal(Number(shown.n), 0, 'a dropped span is not shown');
		await waitForDrained(admin);
		assert.equal(receiver.spans().filter((s) => s.traceId === heldCtx.traceId).length, 0);
	});
});

test('a span published over the exporter\'s mark while an export failure kept the exporter before it is exported, not taken back', async (t) => {
	// Before, the exporter took back every record published over its mark,
	// also one it would still read (its progress stayed below it after a
	// failed export): the span was dropped although it could go, or, read
	// in the meantime, counted both as exported and as dropped.
	await exportScene(async (scene) => {
		const { receiver, others, admin } = scene;
		const { heldCtx, heldQuery } = await exportWithAHeldSpan(scene, afterLookingForTheMark());
		const failures = async () => Number((await admin.query('SELECT export_failures FROM traceprof.stats')).rows[0].export_failures);
		const failed = await failures();
		const before = await ringCounts(admin);

		const ctx = newContext();
		await others.query(`SET traceprof.traceparent = '${ctx.header}'`);
		await others.query('SELECT 1 AS after_held');
		await receiver.pause();
		// The exporter passes the held position after 5 s, then fails to send the next span.
		await waitFor('an export failure past the held position', async () => (await failures()) > failed, 30000);
		await scene.gdb.release();
		scene.gdb = null;
		await heldQuery;
		await receiver.resume();
		await waitFor('the held span and the next at the receiver', () =>
			receiver.spans().some((sp) => sp.traceId === heldCtx.traceId) &&
			receiver.spans().some((sp) => sp.traceId === ctx.traceId), 30000);
		await waitForDrained(admin);
		const after = await ringCounts(admin);
		assert.equal(after.dropped, before.dropped, 'nothing dropped');
		assert.equal(receiver.spans().filter((sp) => sp.traceId === heldCtx.traceId).length, 1);
	});
});
