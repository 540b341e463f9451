'use strict';
// A backend profiled in code without frame pointers keeps its memory.
// Samples there are unwound by libunwind, from the tables of the loaded
// objects that common/dwarf_unwind.c hands it.  Registered with libunwind
// as "dynamic" information, they cost ~150 bytes that libunwind never
// freed per lookup its cache missed (every sample's leaf address): a
// backend profiled in PL/Perl grew by ~600 kB per 1,000 calls at 250 Hz.
//
// A real PostgreSQL 15 cluster with PL/Perl (libperl has no frame
// pointers); the backend's VmData is read from /proc.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');

const { newContext, startTraced, connect, traced } = require('./lib/traced');

const PERL_WORK = `CREATE FUNCTION perl_work(n int, k int) RETURNS bigint LANGUAGE plperl AS $$
	my ($n, $k) = @_; my %h; my $s = 0;
	for my $i (1..$n) {
		my $x = join(',', map { $_ * $k } (1..20)); $h{$x . $i} = length($x);
		my @a = sort { $b <=> $a } split(/,/, $x); $s += $a[0] + length(sprintf('%08x', $i ^ $k));
	}
	return $s; $$`;

const vmDataKb = (pid) => Number(/VmData:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

test('a backend sampled at 250 Hz in PL/Perl for 600 calls: its memory stops growing once warm', async (t) => {
	const cluster = await startTraced({ 'traceprof.sample_hz': '250' });
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	await client.query('CREATE EXTENSION plperl');
	await client.query(PERL_WORK);
	const ctx = newContext();
	await client.query(`SET traceprof.traceparent = '${ctx.header}'`);
	const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
	const calls = async (from, count) => {
		for (let k = from; k < from + count; k++)
			await client.query('SELECT perl_work(3000, $1)', [k]);
	};
	await calls(0, 150);	// warm: libunwind's cache, perl's arenas, the sample ring
	// Two halves of 300 calls: a leak per sample grows both (the old one,
	// ~170 kB each); the names of the addresses sampled, kept per backend
	// until a bound, grow ever slower, and the heap in steps of 132 kB.
	const warm = vmDataKb(pid);
	await calls(150, 300);
	const half = vmDataKb(pid);
	await calls(450, 300);
	const grown = [half - warm, vmDataKb(pid) - half];
	await client.query('RESET traceprof.traceparent');

	// The samples were unwound through libperl, or the test shows nothing.
	const perlFrames = (await client.query(
		"SELECT count(*)::int AS n FROM traceprof.profile($1) WHERE stack LIKE '%Perl\\_%' ESCAPE '\\'", [ctx.traceId])).rows[0].n;
	assert.ok(perlFrames > 0, 'stacks through libperl\'s functions');
	assert.ok(Math.min(...grown) <= 64, `VmData grew by ${grown[0]} kB and ${grown[1]} kB over two runs of 300 profiled calls`);
});

test('a PL/Perl function waiting in SQL it runs through SPI: its wall-mode samples reach main through libperl', async (t) => {
	// Server -> plperl.so -> libperl (no frame pointers) -> plperl.so ->
	// SPI -> ... -> epoll_wait: only libunwind follows the chain through
	// libperl.  A build that handed the walk to frame pointers at the first
	// server frame out of libc lost everything outside libperl: 375 of 376
	// samples began at Perl_pp_entersub (helper-102's review).
	const cluster = await startTraced({ 'traceprof.sample_hz': '250', 'traceprof.profile_mode': 'wall' });
	t.after(() => cluster.stop());
	const client = await connect(cluster);
	t.after(() => client.end());
	await client.query('CREATE EXTENSION plperl');
	await client.query(`CREATE FUNCTION perl_spi_sleep(s float8) RETURNS int LANGUAGE plperl AS $$
		my ($s) = @_; spi_exec_query("SELECT pg_sleep($s)"); return 1; $$`);
	const ctx = newContext();
	await traced(client, ctx, 'SELECT perl_spi_sleep(0.8)');
	const rows = (await client.query('SELECT stack, samples FROM traceprof.profile($1)', [ctx.traceId])).rows
		.map((r) => ({ stack: r.stack, samples: Number(r.samples) }));
	const all = rows.reduce((n, r) => n + r.samples, 0);
	const rooted = rows.filter((r) => r.stack.startsWith('main;')).reduce((n, r) => n + r.samples, 0);
	const show = rows.map((r) => `  ${r.samples} ${r.stack}`).join('\n');
	assert.ok(all >= 50, `wall samples of the 0.8 s wait (${all}):\n${show}`);
	assert.ok(rows.some((r) => /Perl_.*plperl_spi_exec.*pg_sleep/.test(r.stack)), `stacks through libperl into SPI:\n${show}`);
	assert.ok(rooted >= 0.97 * all, `${rooted} of ${all} samples rooted at main:\n${show}`);
});
