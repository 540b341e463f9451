'use strict';
// The SVG flame graph in a real browser.  The generator profiles its own
// run and writes the graph (--profile-out x.svg); Debian's Chromium,
// headless and driven by playwright-core, opens it from disk and we check
// what a user sees: a screenshot with frames in it, the hottest function's
// frame, hover details, click-to-zoom, reset, search, and labels that fit
// at any width.  A small C fixture (fixtures/write_flamegraph.c) adds a
// differential graph and names that need escaping.  Chromium missing or
// failing to start fails every test here; nothing is skipped.

const { test, describe: suite, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const { ROOT, GENERATOR, requireExecutable } = require('./lib/paths');
const { run, describe } = require('./lib/run');
const { makeTempDir, removeTempDir } = require('./lib/tmp');

let chromium;
try {
	({ chromium } = require('playwright-core'));
} catch (err) {
	throw new Error(`npm playwright-core is missing (${err.message}); run 'make deps'`);
}

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const COMMON_LIB = path.join(ROOT, 'build', 'libtraceprof_common.a');
const FIXTURE_SRC = path.join(__dirname, 'fixtures', 'write_flamegraph.c');
const RECORDS = 3000000;		// about a second of CPU: ~100 samples at 100 Hz
const WIDTH = 1200;

let dir;
let context;
let genSvg;
let fixtureDir;

/** The Makefile's LDLIBS: what the common library links against. */
function linkLibraries() {
	const makefile = fs.readFileSync(path.join(ROOT, 'Makefile'), 'utf8');
	const libs = [];
	for (const m of makefile.matchAll(/^LDLIBS\s*[:+]?=\s*(.*)$/gm))
		libs.push(...m[1].trim().split(/\s+/).filter(Boolean));
	return libs;
}

before(async () => {
	requireExecutable(GENERATOR);
	if (!fs.existsSync(CHROMIUM))
		throw new Error(`${CHROMIUM} is missing: install Debian's chromium package ('make deps')`);
	dir = makeTempDir('traceprof-flame-');

	// The workload: its JSON output is not needed, only the profile.
	genSvg = path.join(dir, 'gen.svg');
	const out = path.join(dir, 'out.json');
	const res = await run(GENERATOR, [String(RECORDS), out, '--profile-out', genSvg], { timeout: 120000 });
	fs.rmSync(out, { force: true });
	assert.equal(res.code, 0, describe(res));
	assert.match(res.stderr, /profile written to .*gen\.svg \((\d+) samples\)/, describe(res));

	if (!fs.existsSync(COMMON_LIB))
		throw new Error(`${COMMON_LIB} is missing; build it first: make -C ${ROOT}`);
	const fixture = path.join(dir, 'write_flamegraph');
	const cc = await run(process.env.CC || 'cc', [
		'-std=c11', '-O0', '-g', '-Wall', '-Wextra', '-Werror', '-D_GNU_SOURCE',
		'-I', path.join(ROOT, 'common'), '-I', path.join(ROOT, 'build', 'proto'),
		'-o', fixture, FIXTURE_SRC, COMMON_LIB, ...linkLibraries(),
	]);
	assert.equal(cc.code, 0, `cannot compile the fixture:\n${describe(cc)}`);
	fixtureDir = path.join(dir, 'fixture');
	fs.mkdirSync(fixtureDir);
	const fx = await run(fixture, [fixtureDir]);
	assert.equal(fx.code, 0, describe(fx));

	// A fresh profile directory; flags that keep Chromium off the network.
	const userDataDir = path.join(dir, 'chromium-profile');
	try {
		context = await chromium.launchPersistentContext(userDataDir, {
			executablePath: CHROMIUM,
			headless: true,
			viewport: { width: WIDTH, height: 800 },
			args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
				'--disable-background-networking', '--disable-component-update', '--disable-sync'],
			timeout: 60000,
		});
	} catch (err) {
		throw new Error(`cannot start ${CHROMIUM} headless: ${err.message}`);
	}
});

after(async () => {
	if (context)
		await context.close();
	removeTempDir(dir);
});

/** A new tab showing file; page errors fail the test that asks. */
async function open(file, width = WIDTH) {
	const page = await context.newPage();
	const errors = [];
	page.on('pageerror', (err) => errors.push(err.message));
	page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()); });
	await page.setViewportSize({ width, height: 800 });
	await page.goto(pathToFileURL(file).href);
	// An XML error would make Chromium show a <parsererror> page instead.
	const state = await page.evaluate(() => ({
		root: document.documentElement.localName,
		parseError: document.getElementsByTagName('parsererror').length,
	}));
	assert.deepEqual(state, { root: 'svg', parseError: 0 }, `${file} is not a well-formed SVG document`);
	page.errors = errors;
	return page;
}

/** Every frame as drawn: name, weight, left edge, depth, self weight. */
async function readFrames(page) {
	return page.evaluate(() => {
		const frames = [...document.querySelectorAll('g.f')].map((g, i) => ({
			i,
			name: g.getAttribute('data-n'),
			v: Number(g.getAttribute('data-v')),
			x: Number(g.getAttribute('data-x')),
			d: Number(g.getAttribute('data-d')),
			title: g.querySelector('title').textContent,
		}));
		for (const f of frames) {
			const kids = frames.filter((c) => c.d === f.d + 1 && c.x >= f.x && c.x + c.v <= f.x + f.v);
			f.self = f.v - kids.reduce((s, c) => s + c.v, 0);
		}
		return frames;
	});
}

const rectOf = (i) => `g.f >> nth=${i} >> rect`;

/** Is b inside a's subtree, or a itself? */
const within = (a, b) => b.d >= a.d && b.x >= a.x && b.x + b.v <= a.x + a.v;

/** Frame i's rectangle on screen, or null when it is not displayed. */
function boxOf(page, i) {
	return page.evaluate((n) => {
		const g = document.querySelectorAll('g.f')[n];
		if (getComputedStyle(g).display === 'none')
			return null;
		const r = g.querySelector('rect').getBoundingClientRect();
		return { x: r.x, y: r.y, width: r.width, height: r.height };
	}, i);
}

const near = (a, b, tol = 1.5) => Math.abs(a - b) <= tol;

test('generator --profile-out x.svg writes a self-contained flame graph', () => {
	const text = fs.readFileSync(genSvg, 'utf8');
	assert.match(text, /^<\?xml version="1.0" encoding="UTF-8"/);
	assert.match(text, /<svg xmlns="http:\/\/www.w3.org\/2000\/svg"[^>]* width="100%"/);
	// The namespace is the only URL: nothing to fetch when opened from disk.
	assert.equal(text.match(/https?:/g).length, 1, 'no external references');
	assert.doesNotMatch(text, /href|@import|url\(/);
	const total = Number(/data-total="(\d+)"/.exec(text)[1]);
	assert.ok(total > 0, 'the profile has samples');
	assert.match(text, /<title>generator\.run<\/title>/, 'titled by the root span');
	assert.match(text, /data-n="main"/);
});

test('Chromium renders it: a screenshot full of frames', async () => {
	const page = await open(genSvg);
	const png = path.join(dir, 'flamegraph.png');
	// fullPage waits forever on a bare SVG document: shoot the viewport.
	await page.screenshot({ path: png });
	const bytes = fs.readFileSync(png);
	assert.ok(bytes.length > 2000, `screenshot is ${bytes.length} bytes`);
	assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
	assert.equal(bytes.readUInt32BE(16), WIDTH, 'PNG width');

	// Let Chromium decode the screenshot and count warm (frame) pixels.
	const blank = await context.newPage();
	const warm = await blank.evaluate(async (b64) => {
		const img = new Image();
		img.src = `data:image/png;base64,${b64}`;
		await img.decode();
		const canvas = document.createElement('canvas');
		canvas.width = img.width;
		canvas.height = img.height;
		const ctx = canvas.getContext('2d');
		ctx.drawImage(img, 0, 0);
		const px = ctx.getImageData(0, 0, img.width, img.height).data;
		let n = 0;
		for (let i = 0; i < px.length; i += 4)
			if (px[i] > 190 && px[i + 2] < 120)
				n++;
		return n;
	}, bytes.toString('base64'));
	await blank.close();
	// The root frame alone is a full-width row of 15 px.
	assert.ok(warm > WIDTH * 15 * 2, `only ${warm} warm pixels in the screenshot`);

	// The root spans the width at the bottom; the point above it is a callee.
	const frames = await readFrames(page);
	assert.equal(frames[0].name, 'all');
	const root = await boxOf(page, 0);
	assert.ok(near(root.x, 0) && near(root.width, WIDTH), `root box ${JSON.stringify(root)}`);
	const hit = await page.evaluate(([x, y]) => {
		const g = document.elementFromPoint(x, y).closest('g.f');
		return g && g.getAttribute('data-d');
	}, [5, root.y - 8]);
	assert.equal(hit, '1', 'a depth-1 frame sits on top of the root');
	assert.deepEqual(page.errors, []);
	await page.close();
});

test('it also renders as an <img> (without interactivity)', async () => {
	const html = path.join(dir, 'embed.html');
	fs.writeFileSync(html, '<!doctype html><img style="width:100%" src="gen.svg">');
	const page = await context.newPage();
	await page.goto(pathToFileURL(html).href);
	const img = await page.evaluate(async () => {
		const el = document.querySelector('img');
		await el.decode();
		return { width: el.getBoundingClientRect().width, height: el.naturalHeight };
	});
	const height = Number(/<svg [^>]*height="(\d+)"/.exec(fs.readFileSync(genSvg, 'utf8'))[1]);
	assert.equal(img.height, height, 'the image keeps the graph\'s height');
	assert.ok(img.width > WIDTH / 2, `the image is ${img.width} px wide`);
	await page.close();
});

test('the hottest function: hover details, click zooms, reset restores', async () => {
	const page = await open(genSvg);
	const frames = await readFrames(page);
	const total = frames[0].v;
	const hot = frames.slice(1).reduce((a, b) => (b.self > a.self ? b : a));
	assert.ok(hot.self > 0, 'some frame has self samples');
	assert.ok(hot.v < total, `${hot.name} is not the whole profile`);
	const pct = (100 * hot.v / total).toFixed(2);
	assert.equal(hot.title, `${hot.name}\n${hot.v} samples, ${pct}%`, 'tooltip text');

	const before = await boxOf(page, hot.i);
	assert.ok(near(before.width, WIDTH * hot.v / total), `${hot.name} is ${before.width} px wide`);

	// Hover: the details line names the frame, its samples and percent.
	await page.hover(rectOf(hot.i));
	const details = await page.textContent('.tp-details');
	assert.equal(details, `${hot.name}: ${hot.v} samples (${pct}%)`);

	// Click: the subtree fills the width, callers stay (faded), others hide.
	const unrelated = frames.find((f) => f.i !== 0 && !within(f, hot) && !within(hot, f));
	assert.ok(unrelated, 'the workload has a frame outside the hottest one\'s path');
	const ancestors = frames.filter((f) => f.d < hot.d && within(f, hot));
	assert.equal(ancestors.length, hot.d, 'one caller per level');
	assert.equal(await page.isVisible('.tp-reset'), false, 'no reset before zooming');
	await page.click(rectOf(hot.i));
	const zoomed = await boxOf(page, hot.i);
	assert.ok(near(zoomed.x, 0) && near(zoomed.width, WIDTH), `zoomed box ${JSON.stringify(zoomed)}`);
	assert.equal(await boxOf(page, unrelated.i), null, `${unrelated.name} is hidden`);
	for (const a of ancestors) {
		const box = await boxOf(page, a.i);
		assert.ok(box && near(box.width, WIDTH), `caller ${a.name} spans the width`);
		assert.match(await page.getAttribute(`g.f >> nth=${a.i}`, 'class'), /\banc\b/);
	}
	for (const c of frames.filter((f) => f.d > hot.d && within(hot, f))) {
		const box = await boxOf(page, c.i);
		assert.ok(box && near(box.width, WIDTH * c.v / hot.v), `callee ${c.name} scaled`);
	}
	const label = await page.textContent(`g.f >> nth=${hot.i} >> text`);
	assert.equal(label, hot.name, 'the zoomed frame shows its whole name');

	// Reset zoom: everything back where it was.
	assert.equal(await page.isVisible('.tp-reset'), true);
	await page.click('.tp-reset');
	const after = await boxOf(page, hot.i);
	assert.ok(near(after.x, before.x) && near(after.width, before.width), 'reset restores the frame');
	assert.notEqual(await boxOf(page, unrelated.i), null, `${unrelated.name} is shown again`);
	assert.equal(await page.isVisible('.tp-reset'), false);

	// Clicking a caller zooms out to it; Escape resets.
	await page.click(rectOf(hot.i));
	await page.click(rectOf(ancestors[ancestors.length - 1].i));
	assert.ok(near((await boxOf(page, ancestors[ancestors.length - 1].i)).width, WIDTH));
	await page.keyboard.press('Escape');
	assert.ok(near((await boxOf(page, hot.i)).width, before.width));
	assert.deepEqual(page.errors, []);
	await page.close();
});

test('search highlights matching frames and shows the matched share', async () => {
	const page = await open(genSvg);
	const frames = await readFrames(page);
	const total = frames[0].v;
	const hot = frames.slice(1).reduce((a, b) => (b.self > a.self ? b : a));
	const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

	// The matched share counts nested matches once (a union of intervals).
	const expected = (re) => {
		const hits = frames.slice(1).filter((f) => re.test(f.name)).sort((a, b) => a.x - b.x || b.v - a.v);
		let sum = 0;
		let end = 0;
		for (const f of hits) {
			if (f.x + f.v > end) {
				sum += f.x + f.v - Math.max(end, f.x);
				end = f.x + f.v;
			}
		}
		return { count: hits.length, text: `Matched: ${(100 * sum / total).toFixed(2)}% (${hits.length} frames)` };
	};

	const exact = `^${escape(hot.name)}$`;
	page.once('dialog', (d) => d.accept(exact));
	await page.click('.tp-search');
	let want = expected(new RegExp(exact));
	assert.ok(want.count >= 1);
	assert.equal(await page.locator('g.f.hl').count(), want.count);
	assert.equal(await page.getAttribute('g.f.hl >> nth=0', 'data-n'), hot.name);
	assert.equal(await page.textContent('.tp-matched'), want.text);
	// Highlighted frames change colour.
	const fill = await page.evaluate((i) => getComputedStyle(document.querySelectorAll('g.f rect')[i]).fill, hot.i);
	assert.equal(fill, 'rgb(201, 60, 207)');

	// Ctrl-F asks too; a pattern matching many functions, nested ones once.
	page.once('dialog', (d) => d.accept('^gen_|main'));
	await page.keyboard.press('Control+f');
	want = expected(/^gen_|main/);
	assert.ok(want.count >= 2, 'several generator frames');
	assert.equal(await page.locator('g.f.hl').count(), want.count);
	assert.equal(await page.textContent('.tp-matched'), want.text);

	// A broken pattern is reported, not thrown.
	page.once('dialog', (d) => d.accept('('));
	await page.keyboard.press('/');
	assert.match(await page.textContent('.tp-details'), /^Not a regular expression: \($/);

	// Clear removes the highlight.
	await page.click('.tp-clear');
	assert.equal(await page.locator('g.f.hl').count(), 0);
	assert.equal(await page.textContent('.tp-matched'), '');
	assert.deepEqual(page.errors, []);
	await page.close();
});

test('labels fit their frames at any width', async () => {
	for (const width of [420, 900, 1900]) {
		const page = await open(genSvg, width);
		const fits = await page.evaluate(() => [...document.querySelectorAll('g.f')].map((g) => {
			const text = g.querySelector('text');
			const box = g.querySelector('rect').getBoundingClientRect();
			return {
				name: g.getAttribute('data-n'),
				label: text.textContent,
				text: text.textContent ? text.getComputedTextLength() : 0,
				box: box.width,
			};
		}));
		for (const f of fits) {
			// Labels start 3 px in and must end inside the frame (an empty
			// label fits any frame, even one narrower than the indent).
			assert.ok(f.label === '' || 3 + f.text <= f.box + 0.5,
				`${width}px: "${f.label}" (${f.text} px) overflows ${f.name} (${f.box} px)`);
			assert.ok(f.label === '' || f.label === f.name ||
				(f.label.endsWith('..') && f.name.startsWith(f.label.slice(0, -2))),
				`${width}px: "${f.label}" is not a shortened ${f.name}`);
		}
		const root = fits[0];
		assert.equal(root.label, 'all');
		assert.ok(near(root.box, width), `${width}px: the root fills the width`);
		// Same text size at every width: the font is not scaled with the window.
		const size = await page.evaluate(() => getComputedStyle(document.querySelector('g.f text')).fontSize);
		assert.equal(size, '12px');
		await page.close();
	}
});

test('names that need escaping survive the XML round trip', async () => {
	const page = await open(path.join(fixtureDir, 'names.svg'));
	const frames = await readFrames(page);
	const names = frames.map((f) => f.name).sort();
	assert.deepEqual(names, [']]></script><script>alert(1)</script>', 'a<b>&"c\'', 'all',
		'caf\u00e9_\u20ac', 'main', 'operator<<(std::ostream&)']);
	assert.equal(await page.title(), '<names> & "quotes"');
	const odd = frames.find((f) => f.name === 'a<b>&"c\'');
	assert.equal(odd.title, 'a<b>&"c\'\n40 ms, 40.00%');
	await page.hover(rectOf(odd.i));
	assert.equal(await page.textContent('.tp-details'), 'a<b>&"c\': 40 ms (40.00%)');
	// Only our own script ran: the name is text, not markup.
	assert.equal(await page.locator('script').count(), 1);
	assert.deepEqual(page.errors, []);
	await page.close();
});

test('differential graph: red grew, blue shrank, grey equal; details show both shares', async () => {
	const page = await open(path.join(fixtureDir, 'diff.svg'));
	const frames = await readFrames(page);
	const colour = (name) => page.evaluate((n) => {
		const g = [...document.querySelectorAll('g.f')].find((e) => e.getAttribute('data-n') === n);
		return getComputedStyle(g.querySelector('rect')).fill.match(/\d+/g).map(Number);
	}, name);
	const [gr, gg, gb] = await colour('grew');
	assert.ok(gr > 200 && gg < 100 && gb < 100, `grew is red: ${gr},${gg},${gb}`);
	const [sr, sg, sb] = await colour('shrank');
	assert.ok(sb > 200 && sr < 100 && sg < 100, `shrank is blue: ${sr},${sg},${sb}`);
	const [er, eg, eb] = await colour('same');
	assert.ok(er === eg && eg === eb, `same is grey: ${er},${eg},${eb}`);
	const [fr, , fb] = await colour('fresh');
	assert.ok(fr > fb, 'a frame new in target is red');
	assert.equal(frames.find((f) => f.name === 'gone'), undefined, 'baseline-only frames are not drawn');

	const grew = frames.find((f) => f.name === 'grew');
	assert.equal(grew.title, 'grew\ntarget 50.00% (50 samples)\nbaseline 30.00%\nchange +20.00 pp');
	await page.hover(rectOf(grew.i));
	assert.equal(await page.textContent('.tp-details'),
		'grew: target 50.00% (50 samples), baseline 30.00%, change +20.00 pp');
	const shrank = frames.find((f) => f.name === 'shrank');
	await page.hover(rectOf(shrank.i));
	assert.equal(await page.textContent('.tp-details'),
		'shrank: target 10.00% (10 samples), baseline 30.00%, change -20.00 pp');
	// Widths follow the target.
	assert.ok(near((await boxOf(page, grew.i)).width, WIDTH / 2));
	assert.match(await page.textContent('.tp-sub'), /red: larger, blue: smaller/);
	assert.deepEqual(page.errors, []);
	await page.close();
});

// The SQL readers on a real cluster: traceprof.profile(), profile_top(),
// flamegraph() and flamegraph_diff() count the same samples, and their
// span_id filter returns nothing (never an error) for a span of another
// trace or one without samples.
suite('SQL profiles of one trace agree', () => {
	const { startTraced, connect, newContext, traced, hex } = require('./lib/traced');
	let cluster;
	let client;
	let ctx;
	let spanId;

	const totalOf = (svg, attr) => Number((svg.match(new RegExp(`${attr}="(\\d+)"`)) || [])[1]);
	const readers = async (traceId, spanArg) => {
		const p = (await client.query('SELECT stack, samples, nanoseconds FROM traceprof.profile($1, $2)', [traceId, spanArg])).rows;
		const top = (await client.query('SELECT self_samples, self_percent, self_ns FROM traceprof.profile_top($1, NULL, $2)', [traceId, spanArg])).rows;
		const svg = (await client.query('SELECT traceprof.flamegraph($1, $2) AS svg', [traceId, spanArg])).rows[0].svg;
		return { p, top, svg };
	};

	before(async () => {
		cluster = await startTraced();
		client = await connect(cluster);
		await client.query('SET traceprof.sample_hz = 250');
		ctx = newContext();
		await traced(client, ctx, 'SELECT sum(g::numeric * g) FROM generate_series(1, 2000000) AS g');
		spanId = (await client.query(
			"SELECT span_id FROM traceprof.spans WHERE trace_id = $1 AND kind = 'server'", [ctx.traceId])).rows[0].span_id;
	});

	after(async () => {
		if (client)
			await client.end().catch(() => {});
		if (cluster)
			await cluster.stop();
	});

	test('profile, profile_top and flamegraph count the same samples; no empty stack', async () => {
		for (const spanArg of [null, spanId]) {
			const { p, top, svg } = await readers(ctx.traceId, spanArg);
			assert.ok(p.length > 0, 'the statement was sampled');
			assert.deepEqual(p.filter((r) => r.stack === ''), [], 'no row with an empty stack');
			const ns = p.reduce((n, r) => n + Number(r.nanoseconds), 0);
			const samples = p.reduce((n, r) => n + Number(r.samples), 0);
			assert.equal(top.reduce((n, r) => n + Number(r.self_ns), 0), ns, 'profile_top self_ns sum = profile nanoseconds');
			assert.equal(top.reduce((n, r) => n + Number(r.self_samples), 0), samples, 'profile_top self_samples sum = profile samples');
			assert.ok(Math.abs(top.reduce((n, r) => n + r.self_percent, 0) - 100) < 1e-6, 'self_percent sums to 100');
			assert.equal(totalOf(svg, 'data-total') * 1000, ns, 'flamegraph total (µs) = profile nanoseconds');
		}
	});

	test('span_id of another trace, without samples, or NULL: right rows, no error', async () => {
		const other = newContext();
		for (const [traceId, spanArg, what] of [[other.traceId, spanId, "a span of another trace"],
			[ctx.traceId, hex(8), 'a span without samples']]) {
			const { p, top, svg } = await readers(traceId, spanArg);
			assert.deepEqual(p, [], `profile: ${what}`);
			assert.deepEqual(top, [], `profile_top: ${what}`);
			assert.equal(totalOf(svg, 'data-total'), 0, `flamegraph: ${what}`);
			const diff = (await client.query('SELECT traceprof.flamegraph_diff($1, $2) AS d', [traceId, spanArg])).rows[0].d;
			assert.doesNotMatch(diff, /NaN|Infinity/, `flamegraph_diff: ${what}`);
		}
		const all = await readers(ctx.traceId, null);
		const one = await readers(ctx.traceId, spanId);
		assert.ok(all.p.length >= one.p.length, 'NULL span_id: the whole trace');
	});

	test('flamegraph_diff whose baseline is only the target itself: equal totals, no NaN, no change', async () => {
		// The cluster's only sampled trace: the baseline (spans of the same names) is the target.
		for (const spanArg of [null, spanId]) {
			const diff = (await client.query('SELECT traceprof.flamegraph_diff($1, $2) AS d', [ctx.traceId, spanArg])).rows[0].d;
			assert.doesNotMatch(diff, /NaN|Infinity/);
			assert.ok(totalOf(diff, 'data-total') > 0);
			assert.equal(totalOf(diff, 'data-btotal'), totalOf(diff, 'data-total'));
			const changes = [...diff.matchAll(/change ([+-]?[0-9.]+)/g)];
			assert.ok(changes.length > 0, 'frames show their change');
			for (const m of changes)
				assert.equal(Number(m[1]), 0, `no frame changes: ${m[0]}`);
		}
	});
});
