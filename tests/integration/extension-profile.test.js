'use strict';
// The extension's CPU sampler end to end: real PostgreSQL 15 clusters with
// shared_preload_libraries = 'traceprof', traced statements (SET
// traceprof.traceparent), samples read back through traceprof.profile() /
// traceprof.profile_top() / traceprof.stats (the uploads to Pyroscope:
// extension-pyroscope.test.js).
//
// Sampling is statistical.  Every count is checked against a plausibility
// bound, never an exact value: a statement that burns C ms of CPU at H Hz
// should carry C * H / 1000 samples, and we accept anything within a factor
// of 2 of that (the kernel delivers CPU timers on its 250 Hz tick, the first
// and last period of a span are partial, and overruns are folded into
// weights).  Waits poll a condition with a deadline; nothing sleeps blindly
// except where a negative ("nothing arrives") is being checked.
//
// Debian's postgres is stripped: exported functions (PostgresMain,
// PortalRun, standard_ExecutorRun, ...) are named, static ones
// (exec_simple_query, ExecutePlan, ExecInterpExpr, ...) appear as
// "[unknown] (postgres)" or, from the unwind table, "postgres+0x<address>".

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');

const { sleep, hex, newContext, waitFor, connect, traced, assertRejectsWith } = require('./lib/traced');
const { connectWire, serialize } = require('./lib/wire');
const { startTraced, cpuSql, cpuResult, assertWithinFactor, closeAll, sampleStats, spansOf, serverSpan,
	topAndNested, profile, topFunctions, total, weightWhere, occurrences, showRows, isStaticPostgresFrame,
	inOrder, crashLines } = require('./lib/profiles');


// ---- tests 1, 2, 3 and 5 share one cluster (they run one after another) ----

describe('profiles in SQL (one cluster)', () => {
	let cluster;
	let reader;			// a plain session with default settings, never traced

	before(async () => {
		cluster = await startTraced();
		reader = await connect(cluster);
		await reader.query(`CREATE FUNCTION burn(n int) RETURNS numeric LANGUAGE plpgsql AS $$
			DECLARE r numeric;
			BEGIN
				SELECT sum(g::numeric * g) INTO r FROM generate_series(1, n) AS g;
				RETURN r;
			END $$`);
	});

	after(async () => {
		await closeAll(reader);
		if (cluster) {
			const crashes = crashLines(cluster);
			await cluster.stop();
			assert.deepEqual(crashes, [], 'no backend crashed');
		}
	});

	test('1. a CPU-heavy traced statement: stacks, plausible counts, profile_top consistent, span filter, argument errors', async (t) => {
		const HZ = 250;
		const N = 3000000;
		const ctx = newContext();
		const client = await connect(cluster);
		let stmt;
		let rows;
		try {
			await client.query(`SET traceprof.sample_hz = ${HZ}`);
			const res = await traced(client, ctx, cpuSql(N));
			assert.equal(res.rows[0].s, cpuResult(N), 'profiling does not change results');

			const spans = await spansOf(client, ctx.traceId);
			stmt = serverSpan(spans, 'SELECT sum(');
			assert.equal(stmt.name, 'SELECT');
			assert.equal(stmt.parent_span_id, ctx.spanId);
			assert.ok(stmt.cpu_time_ms > 200, `the statement is CPU-heavy: cpu_time_ms ${stmt.cpu_time_ms}`);

			rows = await profile(client, ctx.traceId);
			const n = total(rows);
			// Plausibility bound: samples ~ cpu_time * sample_hz, within a factor of 2.
			assertWithinFactor(n, stmt.cpu_time_ms * HZ / 1000, 2,
				`samples of a statement with ${stmt.cpu_time_ms.toFixed(0)} ms CPU at ${HZ} Hz`);
			for (const r of rows) {
				assert.ok(r.samples > 0, 'every stack has a positive weight');
				assert.ok(r.frames.every((f) => f.length > 0), `no empty frame name in ${r.stack}`);
				assert.ok(r.frames.length <= 64, 'at most 64 frames');
			}
			// Root first: PostmasterMain → PostgresMain → PortalRun → standard_ExecutorRun.
			const chain = ['PostmasterMain', 'PostgresMain', 'PortalRun', 'standard_ExecutorRun'];
			const chained = weightWhere(rows, (r) => inOrder(r.frames, chain));
			assert.ok(chained >= 0.9 * n, `>= 90% of the samples (${chained}/${n}) have ${chain.join(' … ')} root first:\n${showRows(rows)}`);
			assert.ok(rows.every((r) => !r.frames.includes('standard_ExecutorRun') ||
				r.frames.indexOf('PostgresMain') < r.frames.indexOf('standard_ExecutorRun')),
			`no stack is leaf first:\n${showRows(rows)}`);
			// Rooted at main however the stack was walked (frame pointers stop
			// at one of libc's start frames, libunwind at another).
			const startFrames = new Set(['_start', '__libc_start_main', '__libc_start_main_impl', '__libc_start_call_main']);
			const mainRooted = weightWhere(rows, (r) => r.frames[0] === 'main');
			assert.ok(rows.every((r) => !r.frames.some((f) => startFrames.has(f))),
				`no stack keeps libc's start of the process:\n${showRows(rows)}`);
			assert.ok(mainRooted >= 0.9 * n, `>= 90% of the samples (${mainRooted}/${n}) have main as their root:\n${showRows(rows)}`);
			assert.ok(rows.some((r) => r.frames.some(isStaticPostgresFrame)),
				`static functions of the stripped postgres appear as "[unknown] (postgres)" or "postgres+0x<address>":\n${showRows(rows)}`);
			const leaves = new Set(rows.map((r) => r.frames[r.frames.length - 1]));
			assert.ok([...leaves].some((f) => /numeric|palloc|Memory|tuple/.test(f) || isStaticPostgresFrame(f)),
				`leaf frames are where the CPU went: ${[...leaves].join(', ')}`);

			// The samples carry the statement span's name.
			const names = new Set(spans.map((s) => s.name));
			for (const r of rows)
				assert.ok(names.has(r.span_name), `span_name ${JSON.stringify(r.span_name)} is the name of a span of the trace`);
			const ofStmt = await profile(client, ctx.traceId, stmt.span_id);
			assert.ok(ofStmt.length > 0);
			for (const r of ofStmt)
				assert.equal(r.span_name, stmt.name, 'samples of the statement span are named after it');
			assert.ok(total(ofStmt) >= 0.95 * n, `the statement span holds the samples (${total(ofStmt)}/${n})`);

			// profile(trace, span) partitions profile(trace).
			let perSpan = 0;
			for (const s of spans)
				perSpan += total(await profile(client, ctx.traceId, s.span_id));
			assert.equal(perSpan, n, 'the per-span profiles add up to the trace\'s profile');
			assert.deepEqual(await profile(client, ctx.traceId, hex(8)), [], 'a span id of no span: no rows');
			assert.deepEqual(await profile(client, hex(16)), [], 'another trace: no rows');
			assert.deepEqual(await profile(client, ctx.traceId, ctx.spanId), [],
				'the caller\'s (client-side) span has no server samples');

			// profile_top agrees with profile: self = leaf weight, total = weight of stacks holding it.
			const top = await topFunctions(client, ctx.traceId);
			assert.equal(top.reduce((a, f) => a + f.self_samples, 0), n, 'sum of self_samples = sum of samples');
			assert.ok(Math.abs(top.reduce((a, f) => a + f.self_percent, 0) - 100) < 1e-6, 'self_percent adds up to 100');
			assert.equal(new Set(top.map((f) => f.function)).size, top.length, 'one row per function');
			for (const f of top) {
				const self = weightWhere(rows, (r) => r.frames[r.frames.length - 1] === f.function);
				const tot = weightWhere(rows, (r) => r.frames.includes(f.function));
				assert.equal(f.self_samples, self, `self_samples of ${f.function}`);
				assert.equal(f.total_samples, tot, `total_samples of ${f.function} (recursion counted once)`);
				assert.ok(f.self_samples <= f.total_samples && f.total_samples <= n);
				assert.ok(Math.abs(f.self_percent - 100 * f.self_samples / n) < 1e-6, `self_percent of ${f.function}`);
			}
			const pm = top.find((f) => f.function === 'PostgresMain');
			assert.ok(pm && pm.total_samples >= 0.9 * n && pm.self_samples === 0, `PostgresMain is on (nearly) every stack: ${JSON.stringify(pm)}`);
			const topStmt = await topFunctions(client, ctx.traceId, stmt.span_id);
			assert.equal(topStmt.reduce((a, f) => a + f.self_samples, 0), total(ofStmt), 'profile_top(trace, span) = profile(trace, span)');

			// sampled_ms read in the sampling session: samples * 1000 / sample_hz ~ CPU time.
			const ms = rows.reduce((a, r) => a + r.sampled_ms, 0);
			assert.ok(Math.abs(ms - n * 1000 / HZ) < 1e-6, `sampled_ms = samples * ${1000 / HZ} ms`);
			assertWithinFactor(ms, stmt.cpu_time_ms, 2, 'sampled_ms (read in the sampling session) vs cpu_time_ms');
		} finally {
			await closeAll(client);
		}

		await t.test('sampled_ms does not depend on the reading session\'s traceprof.sample_hz', async () => {
			// The DBA reads the profile from another session (sample_hz at its default 100):
			// the samples still stand for 4 ms each, they were taken at 250 Hz.
			const other = await profile(reader, ctx.traceId);
			assert.equal(total(other), total(rows));
			const ms = other.reduce((a, r) => a + r.sampled_ms, 0);
			assertWithinFactor(ms, stmt.cpu_time_ms, 2,
				'sampled_ms read from a session with traceprof.sample_hz = 100, samples taken at 250 Hz, vs the span\'s cpu_time_ms');
		});

		await t.test('bad trace_id / span_id arguments: clear errors', async () => {
			// Upper case: the id's last digit as 'A' (a random id may have no letter to raise).
			const upper = (id) => id.slice(0, -1) + 'A';
			for (const fn of ['profile', 'profile_top']) {
				const args = fn === 'profile' ? '$1, $2' : '$1, NULL, $2';
				const call = (a, b = null) => reader.query(`SELECT * FROM traceprof.${fn}(${args})`, [a, b]);
				await assertRejectsWith(call(null), '22004', /^trace_id must not be NULL$/);
				for (const bad of ['abc', '', upper(ctx.traceId), 'g'.repeat(32), ctx.traceId + '0', ctx.traceId.slice(1),
					`00-${ctx.traceId}-${ctx.spanId}-01`])
					await assertRejectsWith(call(bad), '22023', new RegExp(`^invalid trace_id "${bad.replace(/[-]/g, '\\-')}"$`),
						/32 lowercase hex digits/);
				for (const bad of ['xyz', '', upper(stmt.span_id), stmt.span_id + '0', ctx.traceId])
					await assertRejectsWith(call(ctx.traceId, bad), '22023', new RegExp(`^invalid span_id "${bad}"$`),
						/16 lowercase hex digits/);
			}
		});
	});

	test('1b. a stack deeper than 64 frames keeps its innermost ones under a root frame named [truncated]', async () => {
		// Each PL/pgSQL call level is a dozen C frames: 30 levels are far deeper than 64.
		const HZ = 250;
		const ctx = newContext();
		const client = await connect(cluster);
		try {
			await client.query(`CREATE OR REPLACE FUNCTION deep_burn(n int) RETURNS numeric LANGUAGE plpgsql AS $$
				BEGIN
					IF n = 0 THEN
						RETURN (SELECT sum(g::numeric * g) FROM generate_series(1, 1500000) AS g);
					END IF;
					RETURN deep_burn(n - 1);
				END $$`);
			await client.query(`SET traceprof.sample_hz = ${HZ}`);
			await traced(client, ctx, 'SELECT deep_burn(30)');
			const rows = await profile(client, ctx.traceId);
			const n = total(rows);
			const deep = rows.filter((r) => r.frames.length === 64);
			const marked = weightWhere(rows, (r) => r.frames[0] === '[truncated]');
			assert.ok(weightWhere(deep, () => true) >= 0.5 * n, `most samples are 64 frames deep:\n${showRows(rows)}`);
			assert.ok(deep.every((r) => r.frames[0] === '[truncated]'), `each cut stack says so at its root:\n${showRows(deep)}`);
			assert.ok(rows.every((r) => r.frames[0] !== '[truncated]' || r.frames.length === 64),
				`only cut stacks are marked:\n${showRows(rows)}`);
			assert.ok(marked > 0);
		} finally {
			await client.query('DROP FUNCTION IF EXISTS deep_burn(int)').catch(() => {});
			await closeAll(client);
		}
	});

	test('1c. a backend\'s first traced statement, an aggregate, names the expression interpreter (ExecInterpExpr), not its address', async () => {
		// ExecInterpExpr is static: it was named only once some plan's
		// qual or projection had shown it, so a session whose first
		// statement was an aggregate read postgres+0x... there.
		const ctx = newContext();
		const client = await connect(cluster);
		try {
			await client.query('SET traceprof.sample_hz = 250; SET max_parallel_workers_per_gather = 0');
			await traced(client, ctx, 'SELECT sum(g::numeric * g) FROM generate_series(1, 1500000) AS g');
			const rows = await profile(client, ctx.traceId);
			const agg = rows.filter((r) => r.frames.includes('ExecAgg'));
			assert.ok(total(agg) > 0, `the aggregate was sampled:\n${showRows(rows)}`);
			assert.ok(rows.some((r) => inOrder(r.frames, ['ExecAgg', 'ExecInterpExpr'])),
				`the transition runs in the interpreter, named:\n${showRows(agg)}`);
		} finally {
			await closeAll(client);
		}
	});

	test('2. traceprof.profile: off samples nothing, traced skips untraced statements, all samples them without a trace', async (t) => {
		const N = 1000000;
		const session = await connect(cluster);
		const measure = async (fn) => {
			const before_ = await sampleStats(reader);
			await fn();
			await sleep(100);	// a negative is checked: give a late write the chance to show
			const after_ = await sampleStats(reader);
			return after_.stored - before_.stored;
		};
		try {
			// traced (the default), untraced statement: the timer is never armed.
			assert.equal((await session.query('SHOW traceprof.profile')).rows[0]['traceprof.profile'], 'traced');
			let d = await measure(() => session.query(cpuSql(N)));
			assert.equal(d, 0, 'profile = traced: an untraced statement stores no sample');

			// traced, traced statement: sampled (the control).
			const tracedCtx = newContext();
			d = await measure(() => traced(session, tracedCtx, cpuSql(N)));
			const tracedSamples = total(await profile(reader, tracedCtx.traceId));
			assert.ok(d > 0 && tracedSamples > 0, `profile = traced: a traced statement is sampled (${d} stored)`);

			// off, traced statement (in a backend whose sampler already ran): nothing.
			await session.query('SET traceprof.profile = off');
			const offCtx = newContext();
			d = await measure(() => traced(session, offCtx, cpuSql(N)));
			assert.equal(d, 0, 'profile = off stores no sample');
			assert.deepEqual(await profile(reader, offCtx.traceId), [], 'profile = off: profile(trace) is empty');
			assert.ok((await spansOf(reader, offCtx.traceId)).some((s) => s.kind === 'server'),
				'profile = off still records the span');

			// all, untraced statement: sampled, with no trace.
			await session.query("SET traceprof.profile = 'all'");
			d = await measure(() => session.query(cpuSql(N)));
			assert.ok(d >= 10, `profile = all: an untraced statement of ~0.3 s CPU stores samples (${d})`);
			assert.equal(total(await profile(reader, tracedCtx.traceId)), tracedSamples,
				'samples without a trace are not attributed to the trace that ran before in this backend');
		} catch (err) {
			await closeAll(session);
			throw err;
		}
		await session.query('RESET traceprof.profile');

		await t.test('an all-zero trace_id / span_id is rejected (it is not a valid id; it would read the untraced samples)', async () => {
			const zeroTrace = '0'.repeat(32);
			const zeroSpan = '0'.repeat(16);
			for (const fn of ['profile', 'profile_top']) {
				const args = fn === 'profile' ? '$1, $2' : '$1, NULL, $2';
				await assertRejectsWith(reader.query(`SELECT * FROM traceprof.${fn}($1)`, [zeroTrace]),
					'22023', /invalid trace_id/);
				await assertRejectsWith(reader.query(`SELECT * FROM traceprof.${fn}(${args})`, [hex(16), zeroSpan]),
					'22023', /invalid span_id/);
			}
		});

		await t.test('after profile = all, switching back to traced (or off) stops sampling untraced statements', async () => {
			// Immutable calls on constants are folded by the planner: all of
			// this statement's CPU is spent before ExecutorStart.  The switch
			// must stop the timer at once, not at the next statement's start.
			const planTimeSql = "SELECT length(sha256(repeat('x', 20000000)::bytea)) AS n";
			const untraced = [cpuSql(N), planTimeSql];
			const switches = [
				['SET traceprof.profile = traced'],
				['SET traceprof.profile = off'],
				['BEGIN', "SET LOCAL traceprof.profile = 'all'", 'SELECT 1', 'COMMIT'],
			];
			try {
				for (const statements of switches) {
					for (const sql of untraced) {
						if (statements.length === 1) {
							await session.query("SET traceprof.profile = 'all'");
							await session.query('SELECT 1');
						}
						for (const statement of statements)
							await session.query(statement);
						const d = await measure(() => session.query(sql));
						assert.equal(d, 0, `after ${statements.join('; ')} (profile = all before, same backend): ` +
							`${sql} stores no sample, stored ${d}`);
					}
				}
			} finally {
				await session.query('RESET traceprof.profile').catch(() => {});
			}
		});
		await closeAll(session);
	});

	test('3. profile_root_span_only with track = all: nested statements\' samples carry the top-level or the nested span id', async () => {
		const N = 1000000;
		const run = async (rootOnly) => {
			const client = await connect(cluster);
			const ctx = newContext();
			try {
				await client.query('SET traceprof.track = \'all\'');
				await client.query(`SET traceprof.profile_root_span_only = ${rootOnly ? 'on' : 'off'}`);
				const res = await traced(client, ctx, `SELECT burn(${N}) AS s`);
				assert.equal(res.rows[0].s, cpuResult(N));
			} finally {
				await closeAll(client);
			}
			const spans = await spansOf(reader, ctx.traceId);
			const { top, nested } = topAndNested(spans, 'SELECT burn(');
			const all = await profile(reader, ctx.traceId);
			return {
				ctx, top, nested, all,
				ofTop: await profile(reader, ctx.traceId, top.span_id),
				ofNested: await profile(reader, ctx.traceId, nested.span_id),
			};
		};
		// Inside the nested statement: plpgsql → SPI → a second executor.
		const insideNested = (r) => r.frames.includes('plpgsql_call_handler') &&
			occurrences(r.frames, 'standard_ExecutorRun') >= 2;

		// Without it: the innermost span labels the samples.
		const inner = await run(false);
		const n = total(inner.all);
		assertWithinFactor(n, inner.top.cpu_time_ms * 100 / 1000, 2, 'samples of burn() at 100 Hz');
		assert.ok(total(inner.ofNested) >= 0.8 * n,
			`the nested statement (where the CPU goes) holds most samples: ${total(inner.ofNested)}/${n}`);
		for (const r of inner.ofNested) {
			assert.equal(r.span_name, inner.nested.name);
			assert.ok(r.frames.includes('plpgsql_call_handler'), `nested samples were taken inside the function: ${r.stack}`);
		}
		assert.ok(inner.ofNested.some(insideNested), 'nested samples show the nested executor');
		assert.equal(weightWhere(inner.ofTop, insideNested), 0,
			`no sample taken inside the nested statement is labelled with the top-level span:\n${showRows(inner.ofTop)}`);

		// With it: every sample carries the top-level span id.
		const root = await run(true);
		const m = total(root.all);
		assertWithinFactor(m, root.top.cpu_time_ms * 100 / 1000, 2, 'samples of burn() at 100 Hz (root only)');
		assert.deepEqual(root.ofNested, [], 'profile_root_span_only: no sample carries the nested span id');
		assert.equal(total(root.ofTop), m, 'profile_root_span_only: every sample carries the top-level span id');
		assert.ok(weightWhere(root.ofTop, insideNested) >= 0.8 * m,
			`samples taken inside the nested statement are labelled with the top-level span:\n${showRows(root.ofTop)}`);
		for (const r of root.ofTop)
			assert.equal(r.span_name, root.top.name);
	});

	test('3b. a rate change inside a traced statement flushes the samples taken so far, still named after their span', async () => {
		// The nested statement changes traceprof.sample_hz first, then burns:
		// closing it restarts the timer, which flushes its samples before
		// the labels move back to the top-level span.
		const N = 1000000;
		const client = await connect(cluster);
		const ctx = newContext();
		try {
			await client.query('SET traceprof.track = \'all\'');
			await client.query(`CREATE OR REPLACE FUNCTION pg_temp.rehz_then_burn(n int) RETURNS numeric LANGUAGE plpgsql AS $$
				DECLARE r numeric;
				BEGIN
					SELECT sum(g::numeric * g) INTO r
					  FROM set_config('traceprof.sample_hz', '200', true) AS c, generate_series(1, n) AS g;
					RETURN r;
				END $$`);
			const res = await traced(client, ctx, `SELECT pg_temp.rehz_then_burn(${N}) AS s`);
			assert.equal(res.rows[0].s, cpuResult(N));
		} finally {
			await closeAll(client);
		}
		const spans = await spansOf(reader, ctx.traceId);
		const { nested } = topAndNested(spans, 'SELECT pg_temp.rehz_then_burn(');
		const ofNested = await profile(reader, ctx.traceId, nested.span_id);
		assert.ok(total(ofNested) >= 10, `the nested statement's samples were stored (${total(ofNested)})`);
		for (const r of ofNested)
			assert.equal(r.span_name, nested.name, `a sample of the nested span carries its name: ${r.stack}`);
	});

	test('3e. a rate change seen by the next span pauses the timer before it drains: the profiler\'s own work (the first drain loads the symbol tables) is no span\'s', async () => {
		// burn fills the backend's ring; the set_config span changes the rate;
		// the next span restarts the timer, draining the ring first.
		const client = await connect(cluster);
		const ctx = newContext();
		try {
			await client.query('SET traceprof.track = \'all\'; SET traceprof.sample_hz = 250');
			await client.query(`CREATE OR REPLACE FUNCTION pg_temp.burn_then_rehz(n int) RETURNS void LANGUAGE plpgsql AS $$
				BEGIN
					PERFORM sum(g::numeric * g) FROM generate_series(1, n) AS g;
					PERFORM set_config('traceprof.sample_hz', '50', true);
					PERFORM 1;
				END $$`);
			await traced(client, ctx, 'SELECT pg_temp.burn_then_rehz(1000000)');
		} finally {
			await closeAll(client);
		}
		const rows = await profile(reader, ctx.traceId);
		assert.ok(total(rows) >= 10, `the burn was sampled (${total(rows)} samples)`);
		const own = rows.filter((r) => /(^|;)(store_samples|tp_sampler_drain|tp_symbols_[a-z_]+|frame_name)(;|$)/.test(r.stack));
		assert.deepEqual(own.map((r) => r.stack), [], 'no sample of the traced statement is in the profiler\'s drain');
	});

	test('3d. a rate change between a span\'s queries (a rule\'s) restarts the timer: the span\'s later samples keep its name', async () => {
		// r1 changes the rate, r2 sleeps: r2 starts (the timer restarts)
		// while the INSERT's span stays labelled.  Before, the restarted
		// timer's count was compared with the old one's, and when they were
		// equal (5 samples before the span in wall mode, 5 in it) the span's
		// later samples were stored without its name.
		const admin = await connect(cluster);
		try {
			await admin.query(`CREATE TABLE rehz_t (x int);
				CREATE RULE r1 AS ON INSERT TO rehz_t DO ALSO SELECT set_config('traceprof.sample_hz', '101', false);
				CREATE RULE r2 AS ON INSERT TO rehz_t DO ALSO SELECT pg_sleep(0.05)`);
			for (let i = 0; i < 3; i++) {
				const client = await connect(cluster);
				const ctx = newContext();
				try {
					await client.query('SET traceprof.profile_mode = wall; SET traceprof.sample_hz = 100');
					await traced(client, newContext(), 'SELECT pg_sleep(0.05)');	// the old timer's count: ~5
					await traced(client, ctx, 'INSERT INTO rehz_t VALUES (1)');
				} finally {
					await closeAll(client);
				}
				const stmt = serverSpan(await spansOf(reader, ctx.traceId), 'INSERT INTO rehz_t');
				const rows = await profile(reader, ctx.traceId, stmt.span_id);
				assert.ok(total(rows) >= 2, `r2's pg_sleep(0.05) was sampled in wall mode (${total(rows)} samples)`);
				for (const r of rows)
					assert.equal(r.span_name, stmt.name, `trial ${i}: a sample of the span taken after the restart carries its name: ${r.stack}`);
			}
		} finally {
			await admin.query('DROP TABLE rehz_t');
			await closeAll(admin);
		}
	});

	test('3c. another role\'s profile is hidden as its query text is: only the role itself, superusers and pg_read_all_stats read it', async () => {
		// Before, any role read every role's stacks through the four
		// functions (the trace ids are public in traceprof.spans).
		const admin = await connect(cluster);
		await admin.query(`CREATE ROLE prof_owner LOGIN; CREATE ROLE prof_other LOGIN;
			CREATE ROLE prof_auditor LOGIN IN ROLE pg_read_all_stats`);
		const ctx = newContext();
		const owner = await connect(cluster, 'prof_owner');
		try {
			await traced(owner, ctx, cpuSql(1500000));
			assert.ok(total(await profile(owner, ctx.traceId)) > 0, 'the role reads its own samples');
		} finally {
			await closeAll(owner);
		}
		const seen = async (role) => {
			const c = await connect(cluster, role);
			const notices = [];
			c.on('notice', (n) => notices.push(n.message));
			try {
				const top = (await c.query('SELECT count(*) AS n FROM traceprof.profile_top($1)', [ctx.traceId])).rows[0];
				const svg = (await c.query('SELECT traceprof.flamegraph($1) AS svg, traceprof.flamegraph_diff($1) AS diff',
					[ctx.traceId])).rows[0];
				const result = { samples: total(await profile(c, ctx.traceId)), top: Number(top.n),
					flame: svg.svg.includes('numeric_mul'), diff: svg.diff.includes('numeric_mul') };
				// An empty answer says why: the samples are other roles'.
				const hidden = notices.map((m) => /^the (\d+) samples of this trace were taken in other roles' statements$/.exec(m)).filter(Boolean);
				result.hiddenSamples = hidden.length ? Number(hidden[0][1]) : 0;
				return { ...result, hidden: hidden.length, emptyTitle: svg.svg.includes('>no samples<') };
			} finally {
				await closeAll(c);
			}
		};
		const other = await seen('prof_other');
		const { hiddenSamples, ...shown } = other;
		assert.deepEqual(shown, { samples: 0, top: 0, flame: false, diff: false, hidden: 4, emptyTitle: true },
			'another role sees none of them, and a NOTICE from each of the four functions says why');
		const auditor = await seen('prof_auditor');
		assert.ok(auditor.samples > 0 && auditor.top > 0 && auditor.flame && auditor.diff && auditor.hidden === 0,
			`pg_read_all_stats sees them: ${JSON.stringify(auditor)}`);
		assert.equal(hiddenSamples, auditor.samples, 'the NOTICE counts the samples profile() shows those who may see them');
		assert.ok((await seen('postgres')).samples > 0, 'a superuser sees them');
		await admin.query('DROP ROLE prof_owner, prof_other, prof_auditor');
		await closeAll(admin);
	});

	test('5. sample_hz range; wall mode samples pg_sleep (leaf: the wait event Timeout:PgSleep over epoll_wait), CPU mode does not', async () => {
		const client = await connect(cluster);
		try {
			for (const bad of ['0', '1000', '251', '-1'])
				await assertRejectsWith(client.query(`SET traceprof.sample_hz = ${bad}`), '22023',
					new RegExp(`^${bad} is outside the valid range for parameter "traceprof.sample_hz" \\(1 \\.\\. 250\\)$`));
			for (const ok of ['1', '250']) {
				await client.query(`SET traceprof.sample_hz = ${ok}`);
				assert.equal((await client.query('SHOW traceprof.sample_hz')).rows[0]['traceprof.sample_hz'], ok);
			}
			await assertRejectsWith(client.query("SET traceprof.profile_mode = 'elapsed'"), '22023',
				/invalid value for parameter "traceprof.profile_mode"/);
		} finally {
			await closeAll(client);
		}

		const sleepProfile = async (mode) => {
			// profile_mode takes effect in a backend that has not sampled yet: a new session.
			const c = await connect(cluster);
			const ctx = newContext();
			try {
				await c.query(`SET traceprof.profile_mode = ${mode}`);
				await traced(c, ctx, 'SELECT pg_sleep(1)');
			} finally {
				await closeAll(c);
			}
			const span = serverSpan(await spansOf(reader, ctx.traceId), 'SELECT pg_sleep(');
			return { span, rows: await profile(reader, ctx.traceId), top: await topFunctions(reader, ctx.traceId) };
		};

		const wall = await sleepProfile('wall');
		const n = total(wall.rows);
		assert.ok(wall.span.duration_ms >= 990 && wall.span.cpu_time_ms < 100,
			`pg_sleep(1) waits: ${wall.span.duration_ms} ms elapsed, ${wall.span.cpu_time_ms} ms CPU`);
		assertWithinFactor(n, wall.span.duration_ms * 100 / 1000, 2, 'wall samples of pg_sleep(1) at 100 Hz');
		assertWithinFactor(wall.rows.reduce((a, r) => a + r.sampled_ms, 0), wall.span.duration_ms, 2, 'wall sampled_ms vs duration_ms');
		// What the wall samples look like: the backend sits in the kernel in
		// epoll_wait (libc, exported), called by WaitEventSetWait under
		// WaitLatch under pg_sleep, and the wait event it reported at that
		// instant is the leaf frame.
		const waiting = weightWhere(wall.rows, (r) => r.frames[r.frames.length - 1] === 'Timeout:PgSleep' &&
			r.frames[r.frames.length - 2] === 'epoll_wait' &&
			inOrder(r.frames, ['PostgresMain', 'PortalRun', 'standard_ExecutorRun', 'pg_sleep', 'WaitLatch', 'WaitEventSetWait']));
		assert.ok(waiting >= 0.9 * n,
			`>= 90% of wall samples (${waiting}/${n}) end …;pg_sleep;WaitLatch;WaitEventSetWait;epoll_wait;Timeout:PgSleep:\n${showRows(wall.rows)}`);
		const event = wall.top.find((f) => f.function === 'Timeout:PgSleep');
		assert.ok(event && event.self_samples >= 0.9 * n, 'profile_top: the wait event has the self samples');

		const cpu = await sleepProfile('cpu');
		assert.ok(total(cpu.rows) <= 3,
			`CPU mode: pg_sleep(1) burns no CPU, so (almost) no samples: ${total(cpu.rows)}\n${showRows(cpu.rows)}`);
	});

	test('7. a statement longer than the backend\'s sample ring (1024 samples): samples kept, or the loss counted', async () => {
		// 10 s at 250 Hz = ~2500 samples in one span.  Wall mode and pg_sleep
		// keep the CPU free for the other test files; the ring and its drain
		// (only when the outermost span closes) are the same in CPU mode,
		// where this happens past 4.1 s of CPU at 250 Hz or 10.2 s at 100 Hz.
		const HZ = 250;
		const c = await connect(cluster);
		const ctx = newContext();
		const before_ = await sampleStats(reader);
		try {
			await c.query('SET traceprof.profile_mode = wall');
			await c.query(`SET traceprof.sample_hz = ${HZ}`);
			await traced(c, ctx, 'SELECT pg_sleep(10)');
		} finally {
			await closeAll(c);
		}
		const span = serverSpan(await spansOf(reader, ctx.traceId), 'SELECT pg_sleep(');
		const n = total(await profile(reader, ctx.traceId));
		const after_ = await sampleStats(reader);
		const dropped = after_.dropped - before_.dropped;
		assertWithinFactor(n + dropped, span.duration_ms * HZ / 1000, 2,
			`samples stored (${n}) + samples_dropped (${dropped}) of a ${span.duration_ms.toFixed(0)} ms wall-mode span at ${HZ} Hz`);
	});

	test('7b. profile = all in wall time: a statement\'s waits are sampled, an idle session\'s are not', async () => {
		// Waiting for the client's next command is no statement: a pooled
		// connection idle for hours would otherwise fill the rings with ClientRead.
		const HZ = 250;
		const c = await connect(cluster);
		const counted = async () => {
			const s = await sampleStats(reader);
			return s.stored + s.dropped;
		};
		try {
			await c.query(`SET traceprof.profile = 'all'; SET traceprof.profile_mode = wall; SET traceprof.sample_hz = ${HZ}`);
			await c.query('SELECT 1');	// starts the sampler; its samples are stored at commit
			const start = await counted();
			await c.query('SELECT pg_sleep(0.5)');
			const slept = await counted() - start;
			assertWithinFactor(slept, 0.5 * HZ, 2, 'wall samples of pg_sleep(0.5) under profile = all');
			const idleFrom = await counted();
			await sleep(1500);			// the session waits for its client
			await c.query('SELECT 1');
			const idle = await counted() - idleFrom;
			assert.ok(idle < 0.2 * 1.5 * HZ,
				`1.5 s idle at ${HZ} Hz took ${idle} samples (stored or dropped); waiting for the client is no statement's time`);
		} finally {
			await closeAll(c);
		}
	});

	test('8. a traced parallel query: the workers\' samples carry the leader\'s span id and name, the workers add no span', async (t) => {
		// Before, a parallel worker never sampled (it opens no span), so with
		// the leader not participating the trace's profile was empty.
		const HZ = 250;
		const sql = 'SELECT sum(n * n * n) AS s FROM par_big';
		const client = await connect(cluster);
		const ctx = newContext();
		let serial;
		let parallel;
		let leaderPid;
		try {
			await client.query(`CREATE TABLE par_big AS SELECT g, g::numeric AS n FROM generate_series(1, 2000000) AS g;
				ANALYZE par_big`);
			await client.query(`SET traceprof.sample_hz = ${HZ}; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
				SET min_parallel_table_scan_size = 0; SET parallel_leader_participation = off`);
			leaderPid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
			// The same work serially, traced: the CPU the workers share between them.
			const serialCtx = newContext();
			await client.query('SET max_parallel_workers_per_gather = 0');
			serial = (await traced(client, serialCtx, sql)).rows[0].s;
			const serialSpan = serverSpan(await spansOf(client, serialCtx.traceId), 'SELECT sum(');
			await client.query('SET max_parallel_workers_per_gather = 2');
			const plan = (await client.query(`EXPLAIN (COSTS OFF) ${sql}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
			assert.match(plan, /Workers Planned: 2/, `the query runs in two workers:\n${plan}`);
			parallel = (await traced(client, ctx, sql)).rows[0].s;
			assert.equal(parallel, serial, 'profiling workers does not change results');

			const spans = await spansOf(client, ctx.traceId);
			const stmt = serverSpan(spans, 'SELECT sum(');
			assert.deepEqual(spans.filter((s) => s.backend_pid !== leaderPid).map((s) => [s.name, s.backend_pid]), [],
				`every span of the trace is the leader's (pid ${leaderPid}): the workers add none`);
			assert.equal(spans.filter((s) => s.kind === 'server').length, 1, 'one SERVER span');

			const rows = await profile(client, ctx.traceId);
			const ofWorkers = rows.filter((r) => r.frames.includes('ParallelWorkerMain'));
			const n = total(ofWorkers);
			const workersCpu = serialSpan.cpu_time_ms;
			// Plausibility bound: the workers' samples ~ the serial CPU * sample_hz, within a factor of 2.
			assertWithinFactor(n, workersCpu * HZ / 1000, 2,
				`samples taken in the workers (ParallelWorkerMain on the stack) of a query with ${workersCpu.toFixed(0)} ms ` +
				`of CPU serially, at ${HZ} Hz:\n${showRows(rows)}`);
			t.diagnostic(`workers' samples ${n}, expected ~${(workersCpu * HZ / 1000).toFixed(0)} ` +
				`(${workersCpu.toFixed(0)} ms serial CPU at ${HZ} Hz); leader's span CPU ${stmt.cpu_time_ms.toFixed(1)} ms`);
			const leaderAlone = stmt.cpu_time_ms * HZ / 1000;
			assert.ok(total(rows) > 5 * leaderAlone + 5,
				`the profile (${total(rows)} samples) holds far more than the leader's ${stmt.cpu_time_ms.toFixed(1)} ms of CPU could`);
			assert.ok(ofWorkers.some((r) => inOrder(r.frames, ['ParallelWorkerMain', 'ParallelQueryMain', 'standard_ExecutorRun'])),
				`worker stacks show the worker's executor:\n${showRows(ofWorkers)}`);

			// Labelled with the leader's span (the one open while the workers ran), named after it.
			const ofStmt = await profile(client, ctx.traceId, stmt.span_id);
			assert.equal(total(ofStmt.filter((r) => r.frames.includes('ParallelWorkerMain'))), n,
				'every worker sample carries the statement span\'s span_id');
			for (const r of ofWorkers)
				assert.equal(r.span_name, stmt.name, `a worker sample is named after the leader's span: ${r.stack}`);
		} finally {
			await closeAll(client);
		}

		await t.test('a role without privileges reads its own query\'s samples, its workers\' too', async () => {
			// The workers' samples carried no role (the span's was never
			// passed to them): only a superuser saw them.
			await reader.query('CREATE ROLE par_alice LOGIN; GRANT SELECT ON par_big TO par_alice');
			const alice = await connect(cluster, 'par_alice');
			const actx = newContext();
			try {
				await alice.query(`SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
					SET min_parallel_table_scan_size = 0; SET parallel_leader_participation = off`);
				assert.equal((await traced(alice, actx, sql)).rows[0].s, serial);
				const own = await profile(alice, actx.traceId);
				const all = await profile(reader, actx.traceId);
				const ofWorkers = all.filter((r) => r.frames.includes('ParallelWorkerMain'));
				assert.ok(total(ofWorkers) > 0, `the workers were sampled:\n${showRows(all)}`);
				assert.equal(total(own), total(all), `the role reads all ${total(all)} samples of its query (${total(ofWorkers)} in workers)`);
			} finally {
				await closeAll(alice);
				await reader.query('DROP OWNED BY par_alice; DROP ROLE par_alice');
			}
		});

		await t.test('an untraced parallel query after it samples nothing in the workers (traceprof.profile = traced)', async () => {
			const c = await connect(cluster);
			try {
				await c.query(`SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
					SET min_parallel_table_scan_size = 0; SET parallel_leader_participation = off`);
				await traced(c, newContext(), sql);
				const before_ = await sampleStats(reader);
				assert.equal((await c.query(sql)).rows[0].s, serial);
				await sleep(100);	// a negative is checked: give a late write the chance to show
				assert.equal((await sampleStats(reader)).stored, before_.stored, 'no sample stored for the untraced query');
			} finally {
				await closeAll(c);
				await reader.query('DROP TABLE par_big');
			}
		});
	});

	test('9. parallel workers of a traced CREATE INDEX and VACUUM sample with the statement\'s span', async (t) => {
		// A utility statement's workers run no executor hook: before, the
		// profile of a parallel index build held the leader's samples only
		// (none of ParallelWorkerMain), and VACUUM's index workers none.
		const HZ = 250;
		const client = await connect(cluster);
		const workerRows = (rows, entry) => rows.filter((r) => inOrder(r.frames, ['ParallelWorkerMain', entry]));
		let leaderPid;
		try {
			// Unlogged: the builds write no WAL.  Logged, the first build
			// created WAL segment files (XLogFileInit in its samples), and the
			// serial reference below varied from 684 to 1,380 ms of CPU, once
			// too much for the workers' share; unlogged, 675-755 ms.
			await client.query(`CREATE UNLOGGED TABLE idx_big AS SELECT g, md5(g::text) AS t FROM generate_series(1, 1000000) AS g;
				ALTER TABLE idx_big SET (parallel_workers = 2)`);
			// 32 MB of maintenance_work_mem per participant, or PostgreSQL plans fewer workers.
			await client.query(`SET traceprof.sample_hz = ${HZ}; SET maintenance_work_mem = '512MB';
				SET parallel_leader_participation = off`);
			leaderPid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;

			// The same build serially, traced: the CPU the workers share between them.
			await client.query('SET max_parallel_maintenance_workers = 0');
			const serialCtx = newContext();
			await traced(client, serialCtx, 'CREATE INDEX idx_big_serial ON idx_big (t)');
			const serialSpan = serverSpan(await spansOf(client, serialCtx.traceId), 'CREATE INDEX');
			assert.deepEqual(workerRows(await profile(client, serialCtx.traceId), '_bt_parallel_build_main'), [],
				'a serial build has no worker');
			await client.query('DROP INDEX idx_big_serial; SET max_parallel_maintenance_workers = 2');

			const ctx = newContext();
			await traced(client, ctx, 'CREATE INDEX idx_big_t ON idx_big (t)');
			const spans = await spansOf(client, ctx.traceId);
			const stmt = serverSpan(spans, 'CREATE INDEX');
			assert.deepEqual(spans.filter((s) => s.backend_pid !== leaderPid).map((s) => s.name), [], 'the workers add no span');
			const rows = await profile(client, ctx.traceId);
			const ofWorkers = workerRows(rows, '_bt_parallel_build_main');
			const n = total(ofWorkers);
			const serialExpected = serialSpan.cpu_time_ms * HZ / 1000;
			t.diagnostic(`workers' samples ${n}; the serial build's CPU ${serialSpan.cpu_time_ms.toFixed(0)} ms ` +
				`(~${serialExpected.toFixed(0)} samples at ${HZ} Hz), the parallel leader's ${stmt.cpu_time_ms.toFixed(0)} ms`);
			// The workers scan and sort; the leader merges and writes the index.
			// Their share was 0.30-0.50 of the serial build's samples (whose
			// CPU still varies, 690-1,000 ms): an eighth at least says they
			// sampled their work, not a stray sample or two.
			assert.ok(n >= serialExpected / 8 && n <= serialExpected * 2,
				`samples of the two workers (ParallelWorkerMain;…;_bt_parallel_build_main): ${n}, expected a share of ` +
				`the serial build's ~${serialExpected.toFixed(0)}:\n${showRows(rows)}`);
			const ofStmt = await profile(client, ctx.traceId, stmt.span_id);
			assert.equal(total(workerRows(ofStmt, '_bt_parallel_build_main')), n, 'every worker sample carries the span_id of CREATE INDEX');
			for (const r of ofWorkers)
				assert.equal(r.span_name, stmt.name, `a worker sample is named after the statement's span: ${r.stack}`);
			assert.equal((await client.query("SELECT current_setting('traceprof.utility_sampling') AS v")).rows[0].v, 'off',
				'the setting that reached the workers is back to its default');
		} finally {
			await closeAll(client);
		}

		await t.test('VACUUM (PARALLEL 2): its index workers sample with the VACUUM span', async () => {
			const c = await connect(cluster);
			try {
				await c.query(`SET traceprof.sample_hz = ${HZ}; SET maintenance_work_mem = '512MB'`);
				await c.query(`CREATE INDEX idx_big_g ON idx_big (g); CREATE INDEX idx_big_tg ON idx_big (t, g);
					DELETE FROM idx_big WHERE g % 2 = 0`);
				const ctx = newContext();
				await traced(c, ctx, 'VACUUM (PARALLEL 2) idx_big');
				const stmt = serverSpan(await spansOf(c, ctx.traceId), 'VACUUM');
				const ofWorkers = workerRows(await profile(c, ctx.traceId, stmt.span_id), 'parallel_vacuum_main');
				t.diagnostic(`VACUUM workers' samples ${total(ofWorkers)}, the leader's span CPU ${stmt.cpu_time_ms.toFixed(0)} ms`);
				assert.ok(total(ofWorkers) > 0,
					`samples of VACUUM's index workers (ParallelWorkerMain;…;parallel_vacuum_main) under its span:\n` +
					showRows(await profile(c, ctx.traceId)));
				for (const r of ofWorkers)
					assert.equal(r.span_name, stmt.name, `a worker sample is named after the VACUUM span: ${r.stack}`);
			} finally {
				await closeAll(c);
			}
		});

		await t.test('a parallel build that fails leaves the setting off; an untraced build after it samples nothing', async () => {
			const c = await connect(cluster);
			try {
				await c.query(`SET maintenance_work_mem = '512MB'; SET parallel_leader_participation = off`);
				await assertRejectsWith(traced(c, newContext(), 'CREATE UNIQUE INDEX idx_big_dup ON idx_big ((g % 10))'),
					'23505', /could not create unique index/);
				assert.equal((await c.query("SELECT current_setting('traceprof.utility_sampling') AS v")).rows[0].v, 'off');
				const before_ = await sampleStats(reader);
				await c.query('CREATE INDEX idx_big_untraced ON idx_big (t)');
				await sleep(100);	// a negative is checked: give a late write the chance to show
				assert.equal((await sampleStats(reader)).stored, before_.stored, 'no sample stored for the untraced build');
			} finally {
				await closeAll(c);
				await reader.query('DROP TABLE idx_big');
			}
		});
	});

	test('9b. a traced CREATE INDEX CONCURRENTLY that fails after its first commit leaves traceprof.utility_sampling on until the next commit only', async () => {
		// Set for the session (CONCURRENTLY and VACUUM commit transactions of
		// their own), the setting was left on for the rest of the session by
		// an error after such a commit: the abort went back to what that
		// commit kept.  Now the session's next commit resets it.
		const c = await connect(cluster);
		try {
			await c.query('CREATE TABLE cic_dup AS SELECT g % 10 AS n FROM generate_series(1, 1000) AS g');
			await assertRejectsWith(traced(c, newContext(), 'CREATE UNIQUE INDEX CONCURRENTLY cic_dup_n ON cic_dup (n)'),
				'23505', /could not create unique index/);
			// The build failed after the index's entry was committed: invalid, left behind.
			assert.equal((await c.query(
				"SELECT indisvalid FROM pg_index WHERE indexrelid = 'cic_dup_n'::regclass")).rows[0].indisvalid, false);
			assert.equal((await c.query("SELECT current_setting('traceprof.utility_sampling') AS v")).rows[0].v, 'off',
				'the setting is back to its default once a transaction committed after the failure');
			// A traced CONCURRENTLY build that succeeds resets it itself.
			await c.query('DROP INDEX cic_dup_n');
			await traced(c, newContext(), 'CREATE INDEX CONCURRENTLY cic_dup_n ON cic_dup (n)');
			assert.equal((await c.query("SELECT current_setting('traceprof.utility_sampling') AS v")).rows[0].v, 'off');
		} finally {
			await c.query('DROP TABLE IF EXISTS cic_dup').catch(() => {});
			await closeAll(c);
		}
	});

	test('10. traceprof.backend_samples set after the backend first sampled sizes its ring from then on', async () => {
		// The ring was sized once, when the sampler first started: a SET
		// later in the session (PGC_SUSET, for one long statement) did nothing.
		const HZ = 250;
		const c = await connect(cluster);
		try {
			await c.query('SET traceprof.profile_mode = wall');
			await c.query(`SET traceprof.sample_hz = ${HZ}`);
			await traced(c, newContext(), 'SELECT pg_sleep(0.05)');	// the sampler starts: 2048 samples
			await c.query('SET traceprof.backend_samples = 128');
			const before_ = await sampleStats(reader);
			const ctx = newContext();
			await traced(c, ctx, 'SELECT pg_sleep(2)');	// ~500 samples in one span
			const n = total(await profile(reader, ctx.traceId));
			const dropped = (await sampleStats(reader)).dropped - before_.dropped;
			assert.ok(n < 250, `${n} samples stored from a ring of 128 (dropped ${dropped})`);
			assert.ok(dropped >= 200, `samples_dropped grew by ${dropped}, stored ${n}`);
		} finally {
			await closeAll(c);
		}
	});

	test('11. one trace sampled at two rates: flame graph widths and profile_top shares are time, not sample counts', async () => {
		// sample_hz changed between two statements of one trace: at 250 Hz a
		// sample stands for 4 ms, at 25 Hz for 40 ms.  Counting samples would
		// make the first statement look ten times as costly per CPU second.
		const c = await connect(cluster);
		const ctx = newContext();
		try {
			await c.query('SET traceprof.sample_hz = 250');
			await traced(c, ctx, cpuSql(1500000));
			await c.query('SET traceprof.sample_hz = 25');
			await traced(c, ctx, 'SELECT count(DISTINCT md5(g::text)) AS n FROM generate_series(1, 1500000) AS g');
		} finally {
			await closeAll(c);
		}
		const rows = await profile(reader, ctx.traceId);
		const samples = total(rows);
		const ns = rows.reduce((a, r) => a + Number(r.nanoseconds), 0);
		assert.ok(ns > samples * 4e6 && ns < samples * 40e6,
			`both rates were sampled: ${samples} samples, ${ns} ns\n${showRows(rows)}`);

		const svgs = (await reader.query('SELECT traceprof.flamegraph($1) AS svg, traceprof.flamegraph_diff($1) AS diff',
			[ctx.traceId])).rows[0];
		for (const [what, svg] of Object.entries(svgs)) {
			const root = /<svg [^>]*data-total="(\d+)" data-unit="([^"]*)"/.exec(svg);
			assert.ok(root, `${what}: an <svg> with data-total and data-unit`);
			assert.equal(root[2], '\u00b5s', `${what}: the unit`);
			assert.equal(Number(root[1]), ns / 1000, `${what}: the total is traceprof.profile()'s time, in microseconds`);
		}

		const top = (await reader.query('SELECT function, self_percent, self_ns FROM traceprof.profile_top($1, NULL)',
			[ctx.traceId])).rows.map((r) => ({ ...r, self_ns: Number(r.self_ns) }));
		const selfNs = top.reduce((a, f) => a + f.self_ns, 0);
		assert.equal(selfNs, ns, 'self_ns adds up to traceprof.profile()\'s nanoseconds');
		for (const f of top)
			assert.ok(Math.abs(f.self_percent - 100 * f.self_ns / selfNs) < 1e-6,
				`self_percent of ${f.function} is its share of the self time: ${JSON.stringify(f)}`);
		for (let i = 1; i < top.length; i++)
			assert.ok(top[i - 1].self_ns >= top[i].self_ns, `ranked by self time: ${top[i - 1].function}, ${top[i].function}`);
	});

	test('12. a portal kept open labels no sample of a later statement: untraced ones sample nothing, traced ones their own span', async () => {
		// A top-level portal kept open through the extended protocol (a
		// named one read in pages, the unnamed SELECT portal of a
		// transaction block) stays on the stack of open spans while later
		// statements run.  Before, a later untraced statement started the
		// timer with the kept portal's labels (its CPU in the portal's
		// profile), and a named portal read again had its run labelled with
		// another portal opened since, as had a SELECT bound ahead of its
		// Execute with a later Bind's (pipelined), and the timer ran on with
		// a kept portal's labels through later messages (a Parse).  Told
		// apart by their stacks: burn() runs under plpgsql_call_handler, the
		// untraced statements either aggregate with no PL/pgSQL or fold
		// repeat() and sha256() while planned, a Parse parses.
		const HZ = 250;
		const N = 1000000;
		const comment = (ctx) => `/*traceparent='${ctx.header}'*/`;
		const kept = newContext();
		const later = newContext();
		const other = newContext();
		const unnamed = newContext();
		const piped = newContext();
		const pipedOther = newContext();
		const planTimeSql = "SELECT length(sha256(repeat('x', 20000000)::bytea)) AS n";
		const w = await connectWire(cluster, 'postgres', 'app');
		try {
			await w.query(`SET traceprof.sample_hz = ${HZ}`);
			await w.query('BEGIN');
			// k: a named portal that burns per row, one row of two read; kept open.
			w.send(serialize.parse({ name: 'k', text: `SELECT burn(${N}) AS b FROM generate_series(1, 2) g ${comment(kept)}` }),
				serialize.bind({ statement: 'k', portal: 'k' }), serialize.execute({ portal: 'k', rows: 1 }), serialize.sync());
			await w.until('readyForQuery');
			// A message that runs no statement: a Parse whose parsing takes CPU.
			const inList = Array.from({ length: 200000 }, (_, i) => i).join(',');
			w.send(serialize.parse({ name: 'big', text: `SELECT 1 AS big WHERE 1 IN (${inList})` }), serialize.sync());
			await w.until('readyForQuery');
			// Untraced: CPU while run, and while planned.
			await w.query(cpuSql(N));
			await w.query(planTimeSql);
			// Traced under another parent.
			await w.query(`SELECT burn(${N}) AS b ${comment(later)}`);
			// m: another named portal, read once; then k's second row.
			w.send(serialize.parse({ name: 'm', text: `SELECT g FROM generate_series(1, 3) g ${comment(other)}` }),
				serialize.bind({ statement: 'm', portal: 'm' }), serialize.execute({ portal: 'm', rows: 1 }),
				serialize.execute({ portal: 'k', rows: 1 }), serialize.sync());
			await w.until('readyForQuery');
			// The unnamed SELECT portal, run to its end and kept; then untraced statements through named portals.
			w.send(serialize.parse({ text: `SELECT g FROM generate_series(1, 2) g ${comment(unnamed)}` }),
				serialize.bind({}), serialize.execute({}), serialize.sync());
			await w.until('readyForQuery');
			w.send(serialize.parse({ name: 'u', text: cpuSql(N) }),
				serialize.bind({ statement: 'u', portal: 'u' }), serialize.execute({ portal: 'u' }),
				serialize.parse({ name: 'v', text: planTimeSql }),
				serialize.bind({ statement: 'v', portal: 'v' }), serialize.execute({ portal: 'v' }), serialize.sync());
			await w.until('readyForQuery');
			await w.query('COMMIT');
			// Binds pipelined ahead of their Executes: a's run comes after b's Bind.
			w.send(serialize.parse({ name: 'pa', text: `SELECT burn(${N}) AS b ${comment(piped)}` }),
				serialize.parse({ name: 'pb', text: `SELECT 1 AS one ${comment(pipedOther)}` }),
				serialize.bind({ statement: 'pa', portal: 'pa' }), serialize.bind({ statement: 'pb', portal: 'pb' }),
				serialize.execute({ portal: 'pa' }), serialize.execute({ portal: 'pb' }), serialize.sync());
			await w.until('readyForQuery');
		} finally {
			w.end();
		}
		const burnt = (r) => r.frames.includes('plpgsql_call_handler');
		// Only the untraced statements aggregate outside burn(), or fold repeat() and sha256() while planned.
		const untracedRun = (r) => r.frames.includes('ExecAgg') && !burnt(r);
		const untracedPlan = (r) => r.frames.includes('evaluate_expr') &&
			r.frames.some((f) => f === 'repeat' || /sha256|cryptohash/i.test(f));
		// Every statement's span opens once it is parsed: no trace holds a parse.
		const parsing = (r) => r.frames.includes('pg_parse_query') || r.frames.includes('pg_analyze_and_rewrite_fixedparams');
		// Every mismatch of the four traces at once, with its stacks.
		const wrong = [];
		const check = async (ctx, what, burns) => {
			const spans = await spansOf(reader, ctx.traceId);
			assert.equal(spans.filter((s) => s.kind === 'server').length, 1, `${what}: one server span`);
			const rows = await profile(reader, ctx.traceId);
			const found = [
				[weightWhere(rows, untracedRun), 'samples of an untraced statement\'s run (ExecAgg outside burn())'],
				[weightWhere(rows, untracedPlan), 'samples of an untraced statement\'s planning (folding repeat, sha256)'],
				[burns ? 0 : weightWhere(rows, burnt), 'samples of another statement\'s burn()'],
				[weightWhere(rows, parsing), 'samples of a later message\'s parsing'],
			].filter(([n]) => n > 0);
			if (burns && weightWhere(rows, burnt) === 0)
				found.push([0, 'samples of its own burn()']);
			if (found.length > 0)
				wrong.push(`${what}: ${found.map(([n, which]) => `${n} ${which}`).join(', ')}\n${showRows(rows)}`);
		};
		await check(kept, 'the named portal k, read twice', true);
		await check(later, 'the traced later statement', true);
		await check(other, 'the named portal m, read once while k was open', false);
		await check(unnamed, 'the unnamed portal kept', false);
		await check(piped, 'a SELECT bound, then another, then executed', true);
		await check(pipedOther, 'the SELECT bound after it', false);
		assert.deepEqual(wrong, [], wrong.join('\n'));
	});

	// The sampler needs the stack's bounds, the loaded objects and their
	// unwind tables; read in each backend (glibc reads /proc/self/maps for
	// the stack, twice), they cost its first traced statement ~1 ms.  The
	// postmaster reads them once; backends inherit them.
	test('13. a backend\'s first traced statement reads no file to start the sampler (the postmaster read the process)', async () => {
		const client = await connect(cluster, 'postgres', 'app', '-c traceprof.sample_rate=0');
		try {
			const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
			const bytesRead = () => Number(/^rchar: (\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'))[1]);
			const before = bytesRead();
			await traced(client, newContext(), 'SELECT 1');
			const read = bytesRead() - before;
			const profile = (await client.query('SHOW traceprof.profile')).rows[0]['traceprof.profile'];
			assert.equal(profile, 'traced', 'the statement started the sampler (profile = traced)');
			assert.equal(read, 0, `bytes read by the backend during its first traced statement: ${read}`);
		} finally {
			await client.end();
		}
	});

	test('14. trusted PL/Perl setting every signal back to its default ("local %SIG") in a traced statement: the backend lives on, ' +
		'and its samples come back once the sampler puts its handler back', async () => {
		// Before, the sampler's signal (SIGPROF, then a real-time one) was
		// reset to its default, which ends the process: the backend died at
		// the next expiry and the postmaster restarted the cluster.
		const client = await connect(cluster);
		try {
			await client.query('CREATE EXTENSION IF NOT EXISTS plperl');
			await client.query(`CREATE OR REPLACE FUNCTION pg_temp.reset_signals() RETURNS text LANGUAGE plperl AS $$
				{ local %SIG; }
				return 'reset';
			$$`);
			await client.query("SET traceprof.sample_hz = 250; SET traceprof.profile_mode = 'cpu'");
			const reset = newContext();
			const res = await traced(client, reset, 'SELECT pg_temp.reset_signals() AS r, burn(1000000) AS b');
			assert.equal(res.rows[0].r, 'reset');
			// 64 sampled statements put the handler back; then a burn is sampled again.
			for (let i = 0; i < 70; i++)
				await traced(client, newContext(), 'SELECT 1');
			const later = newContext();
			await traced(client, later, 'SELECT burn(1000000) AS b');
			assert.ok(total(await profile(reader, later.traceId)) >= 10, 'the later statement was sampled');
		} finally {
			await closeAll(client);
		}
		assert.deepEqual(crashLines(cluster), [], 'no backend died');
	});
});

// ---- 6: robustness -------------------------------------------------------

test('6. robustness at 250 Hz: pg_cancel_backend mid-statement, then 30 traced statements from 4 concurrent sessions', async (t) => {
	const HZ = 250;
	const cluster = await startTraced();
	let a;
	let b;
	const pool = [];
	try {
		a = await connect(cluster);
		b = await connect(cluster);
		const pid = (await a.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
		await a.query(`SET traceprof.sample_hz = ${HZ}`);

		// Cancel a long CPU-heavy traced statement from another session.
		const ctx = newContext();
		await a.query(`SET traceprof.traceparent = '${ctx.header}'`);
		const long = a.query(cpuSql(100000000)).then(() => null, (e) => e);
		await waitFor('the long statement to run', async () => (await b.query(
			"SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE 'SELECT sum(%' " +
			"AND now() - query_start > interval '600 ms'", [pid])).rowCount === 1);
		assert.equal((await b.query('SELECT pg_cancel_backend($1) AS ok', [pid])).rows[0].ok, true);
		const err = await long;
		assert.ok(err, 'the statement was cancelled');
		assert.equal(err.code, '57014', `SQLSTATE of ${err.message}`);
		assert.deepEqual(crashLines(cluster), [], 'no backend crashed');

		const spans = await spansOf(b, ctx.traceId);
		const cancelled = serverSpan(spans, 'SELECT sum(');
		assert.equal(cancelled.status, 'error');
		assert.equal(cancelled.status_message, 'canceling statement due to user request');
		assert.equal(cancelled.attributes['db.response.status_code'], '57014');
		assert.equal(cancelled.backend_pid, pid);

		await t.test('the cancelled statement\'s samples are stored when it ends, before the backend runs anything else', async () => {
			await waitFor(() => `samples of the cancelled span ${cancelled.span_id} (cpu ${cancelled.cpu_time_ms.toFixed(0)} ms) in traceprof.profile`,
				async () => total(await profile(b, ctx.traceId, cancelled.span_id)) > 0, 3000);
		});

		// The same backend goes on, and samples the next traced statement.
		assert.equal((await a.query('SELECT pg_backend_pid() AS pid')).rows[0].pid, pid, 'the backend survived');
		await a.query('RESET traceprof.traceparent');
		const next = newContext();
		const N = 600000;
		const res = await traced(a, next, cpuSql(N));
		assert.equal(res.rows[0].s, cpuResult(N));
		const nextSpan = serverSpan(await spansOf(b, next.traceId), 'SELECT sum(');
		assert.equal(nextSpan.status, 'unset');
		const nextRows = await profile(b, next.traceId);
		assertWithinFactor(total(nextRows), nextSpan.cpu_time_ms * HZ / 1000, 2, 'samples of the statement after the cancel');
		assert.ok(weightWhere(nextRows, (r) => r.frames.includes('standard_ExecutorRun')) >= 0.9 * total(nextRows),
			`the next statement's stacks are whole:\n${showRows(nextRows)}`);
		// By now (at the latest) the cancelled statement's samples are stored too, labelled with its span.
		assertWithinFactor(total(await profile(b, ctx.traceId, cancelled.span_id)), cancelled.cpu_time_ms * HZ / 1000, 2,
			'samples of the cancelled statement');

		// 30 traced statements from 4 sessions at once.
		for (let i = 0; i < 4; i++) {
			const c = await connect(cluster);
			await c.query(`SET traceprof.sample_hz = ${HZ}`);
			pool.push(c);
		}
		const M = 200000;
		const ctxs = Array.from({ length: 30 }, () => newContext());
		let nextIndex = 0;
		await Promise.all(pool.map(async (c) => {
			for (let i = nextIndex++; i < ctxs.length; i = nextIndex++) {
				const r = await traced(c, ctxs[i], cpuSql(M));
				assert.equal(r.rows[0].s, cpuResult(M));
			}
		}));
		let cpuMs = 0;
		let samples = 0;
		for (const c of ctxs) {
			const span = serverSpan(await spansOf(b, c.traceId), 'SELECT sum(');
			assert.equal(span.status, 'unset');
			const n = total(await profile(b, c.traceId));
			assert.ok(n > 0, `statement of trace ${c.traceId} (${span.cpu_time_ms.toFixed(0)} ms CPU) was sampled`);
			cpuMs += span.cpu_time_ms;
			samples += n;
		}
		assertWithinFactor(samples, cpuMs * HZ / 1000, 2, 'samples of the 30 concurrent statements');
		const st = await sampleStats(b);
		assert.ok(st.stored > 0);
		assert.equal(st.dropped, 0, 'no sample dropped');
		assert.equal(await cluster.psql('SELECT 1'), '1', 'the server is up');
		assert.deepEqual(crashLines(cluster), [], 'no backend crashed (no "terminated by signal" in the server log)');
	} finally {
		await closeAll(a, b, ...pool);
		await cluster.stop();
	}
});
