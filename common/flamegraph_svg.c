/*
 * flamegraph_svg.c - a flame graph layout (flamegraph_layout.c) as a
 * self-contained interactive SVG, plain or differential, and the entry
 * points that take a tp_profile.
 *
 * Horizontal geometry is in percent, so the graph fills any width without
 * scaling its text.  Each frame is a nested <svg>, which clips its label to
 * the frame (nested SVG viewports hide overflow), so labels stay inside
 * even without the script; the script only re-fits them with "..".
 * Labels are first fitted for a REF_WIDTH-pixel graph.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph.h"
#include "profile_internal.h"
#include "text.h"

#define REF_WIDTH 1200.0		/* px the labels are fitted for in C */
#define CHAR_WIDTH 7.0			/* average px per glyph at 12px */
#define LABEL_PAD 3
#define ROW_HEIGHT 16
#define FRAME_HEIGHT 15
#define TOP 52					/* title, subtitle and controls */
#define BOTTOM 30				/* the details line */

/* Diff colours: neutral grey, towards red or blue at the largest change. */
#define NEUTRAL 224
#define STRONG 90
#define HOT 240

static const char style[] =
"text { font-family: Verdana, 'DejaVu Sans', sans-serif; font-size: 12px; fill: #000; }\n"
".tp-bg { fill: #fbfbf6; }\n"
".tp-title { font-size: 17px; text-anchor: middle; }\n"
".tp-sub { fill: #555; text-anchor: middle; }\n"
".tp-ctl { fill: #1b4f9c; cursor: pointer; }\n"
".tp-ctl:hover { text-decoration: underline; }\n"
".tp-end { text-anchor: end; }\n"
".f { cursor: pointer; }\n"
".f rect { stroke: #fbfbf6; stroke-width: 1px; }\n"
".f:hover rect { stroke: #000; }\n"
".f text { pointer-events: none; }\n"
".f.hide { display: none; }\n"
".f.anc { opacity: 0.6; }\n"
".f.hl rect { fill: #c93ccf; }\n";

/*
 * Hover, zoom, search and label fitting.  Kept free of '"', '\' and the
 * CDATA end, so it can live in a C string and a CDATA section as is.
 */
static const char script[] =
"(function () {\n"
"'use strict';\n"
"var cs = document.currentScript;\n"
"var svg = (cs && cs.ownerSVGElement) || document.documentElement;\n"
"function q(c) { return svg.querySelector('.' + c); }\n"
"var total = Number(svg.getAttribute('data-total'));\n"
"var diff = svg.hasAttribute('data-btotal');\n"
"var btotal = Number(svg.getAttribute('data-btotal') || 0);\n"
"var unit = svg.getAttribute('data-unit');\n"
"var details = q('tp-details'), matched = q('tp-matched');\n"
"var resetCtl = q('tp-reset'), searchCtl = q('tp-search'), clearCtl = q('tp-clear');\n"
"var frames = [], nodes = svg.querySelectorAll('g.f');\n"
"for (var i = 0; i < nodes.length; i++) {\n"
"\tvar g = nodes[i], box = g.querySelector('svg');\n"
"\tvar f = { g: g, box: box, label: g.querySelector('text'),\n"
"\t\tname: g.getAttribute('data-n'), v: Number(g.getAttribute('data-v')),\n"
"\t\tx: Number(g.getAttribute('data-x')), d: Number(g.getAttribute('data-d')),\n"
"\t\tb: Number(g.getAttribute('data-b') || 0), w: parseFloat(box.getAttribute('width')),\n"
"\t\txs: box.getAttribute('x'), ws: box.getAttribute('width') };\n"
"\tg.tpFrame = f;\n"
"\tframes.push(f);\n"
"}\n"
"var root = frames[0], term = '';\n"
"\n"
"function pct(x) { return (100 * x).toFixed(2) + '%'; }\n"
"function share(v, t) { return t > 0 ? v / t : 0; }\n"
"function describe(f) {\n"
"\tif (!diff)\n"
"\t\treturn f.name + ': ' + f.v + ' ' + unit + ' (' + pct(share(f.v, total)) + ')';\n"
"\tvar d = 100 * (share(f.v, total) - share(f.b, btotal)), pp = Math.abs(d).toFixed(2);\n"
"\treturn f.name + ': target ' + pct(share(f.v, total)) + ' (' + f.v + ' ' + unit +\n"
"\t\t'), baseline ' + pct(share(f.b, btotal)) + ', change ' +\n"
"\t\t(d < 0 && pp !== '0.00' ? '-' : '+') + pp + ' pp';\n"
"}\n"
"\n"
"/*\n"
" * Labels: the whole name when it fits, else the longest prefix that fits\n"
" * with '..'.  Text is measured on a canvas in the labels' font, so fitting\n"
" * never waits for the SVG's layout; without a canvas, 7 px a character.\n"
" */\n"
"var pen = null;\n"
"try {\n"
"\tpen = new OffscreenCanvas(1, 1).getContext('2d');\n"
"} catch (e) {\n"
"\tpen = null;\n"
"}\n"
"function textWidth(s) { return pen ? pen.measureText(s).width : 7 * Array.from(s).length; }\n"
"function fitted(f, room) {\n"
"\tif (f.full <= room)\n"
"\t\treturn f.name;\n"
"\tvar dots = textWidth('..'), lo = 0, hi = f.cps.length - 1;\n"
"\twhile (lo < hi) {\n"
"\t\tvar mid = (lo + hi + 1) >> 1;\n"
"\t\tif (textWidth(f.cps.slice(0, mid).join('')) + dots <= room)\n"
"\t\t\tlo = mid;\n"
"\t\telse\n"
"\t\t\thi = mid - 1;\n"
"\t}\n"
"\treturn lo >= 2 ? f.cps.slice(0, lo).join('') + '..' : '';\n"
"}\n"
"function relabel() {\n"
"\tvar width = svg.getBoundingClientRect().width || 1200;\n"
"\tfor (var i = 0; i < frames.length; i++) {\n"
"\t\tvar f = frames[i];\n"
"\t\tvar room = f.w / 100 * width - 6;\n"
"\t\tif (f.hidden || room === f.room)\n"
"\t\t\tcontinue;\n"
"\t\tf.room = room;\n"
"\t\tvar text = fitted(f, room);\n"
"\t\tif (text !== f.text) {\n"
"\t\t\tf.text = text;\n"
"\t\t\tf.label.textContent = text;\n"
"\t\t}\n"
"\t}\n"
"}\n"
"var pending = false;\n"
"window.addEventListener('resize', function () {\n"
"\tif (pending)\n"
"\t\treturn;\n"
"\tpending = true;\n"
"\trequestAnimationFrame(function () { pending = false; relabel(); });\n"
"});\n"
"\n"
"function place(f, x, w, state) {\n"
"\tf.hidden = state === 'hide';\n"
"\tf.g.classList.toggle('hide', f.hidden);\n"
"\tf.g.classList.toggle('anc', state === 'anc');\n"
"\tif (f.hidden)\n"
"\t\treturn;\n"
"\tvar xs = x.toFixed(4) + '%', ws = w.toFixed(4) + '%';\n"
"\tf.w = w;\n"
"\tif (xs !== f.xs) {\n"
"\t\tf.xs = xs;\n"
"\t\tf.box.setAttribute('x', xs);\n"
"\t}\n"
"\tif (ws !== f.ws) {\n"
"\t\tf.ws = ws;\n"
"\t\tf.box.setAttribute('width', ws);\n"
"\t}\n"
"}\n"
"/* z's subtree fills the width; its callers stay, stretched and faded. */\n"
"function zoom(z) {\n"
"\tif (!(z.v > 0))\n"
"\t\treturn;\n"
"\tfor (var i = 0; i < frames.length; i++) {\n"
"\t\tvar f = frames[i];\n"
"\t\tif (f.d < z.d && f.x <= z.x && f.x + f.v >= z.x + z.v)\n"
"\t\t\tplace(f, 0, 100, 'anc');\n"
"\t\telse if ((f === z || f.d > z.d) && f.x >= z.x && f.x + f.v <= z.x + z.v)\n"
"\t\t\tplace(f, 100 * (f.x - z.x) / z.v, 100 * f.v / z.v, '');\n"
"\t\telse\n"
"\t\t\tplace(f, 0, 0, 'hide');\n"
"\t}\n"
"\tresetCtl.setAttribute('visibility', z === root ? 'hidden' : 'visible');\n"
"\trelabel();\n"
"}\n"
"\n"
"/* Highlight names matching re; the matched share counts nested frames once. */\n"
"function search(text) {\n"
"\tvar re;\n"
"\ttry {\n"
"\t\tre = new RegExp(text);\n"
"\t} catch (e) {\n"
"\t\tdetails.textContent = 'Not a regular expression: ' + text;\n"
"\t\treturn;\n"
"\t}\n"
"\tterm = text;\n"
"\tvar hits = [];\n"
"\tfor (var i = 1; i < frames.length; i++) {\n"
"\t\tvar hit = re.test(frames[i].name);\n"
"\t\tframes[i].g.classList.toggle('hl', hit);\n"
"\t\tif (hit)\n"
"\t\t\thits.push(frames[i]);\n"
"\t}\n"
"\thits.sort(function (a, b) { return a.x - b.x || b.v - a.v; });\n"
"\tvar sum = 0, end = 0;\n"
"\tfor (var j = 0; j < hits.length; j++) {\n"
"\t\tvar e = hits[j].x + hits[j].v;\n"
"\t\tif (e > end) {\n"
"\t\t\tsum += e - Math.max(end, hits[j].x);\n"
"\t\t\tend = e;\n"
"\t\t}\n"
"\t}\n"
"\tmatched.textContent = 'Matched: ' + pct(share(sum, total)) + ' (' + hits.length + ' frames)';\n"
"\tclearCtl.setAttribute('visibility', 'visible');\n"
"}\n"
"function clearSearch() {\n"
"\tterm = '';\n"
"\tfor (var i = 0; i < frames.length; i++)\n"
"\t\tframes[i].g.classList.remove('hl');\n"
"\tmatched.textContent = '';\n"
"\tclearCtl.setAttribute('visibility', 'hidden');\n"
"}\n"
"function ask() {\n"
"\tvar text = window.prompt('Search frames (regular expression)', term);\n"
"\tif (text === null)\n"
"\t\treturn;\n"
"\tif (text === '')\n"
"\t\tclearSearch();\n"
"\telse\n"
"\t\tsearch(text);\n"
"}\n"
"\n"
"function frameOf(e) {\n"
"\tvar g = e.target.closest && e.target.closest('g.f');\n"
"\treturn g ? g.tpFrame : null;\n"
"}\n"
"var area = q('tp-frames');\n"
"area.addEventListener('click', function (e) {\n"
"\tvar f = frameOf(e);\n"
"\tif (f)\n"
"\t\tzoom(f);\n"
"});\n"
"area.addEventListener('mouseover', function (e) {\n"
"\tvar f = frameOf(e);\n"
"\tif (f)\n"
"\t\tdetails.textContent = describe(f);\n"
"});\n"
"area.addEventListener('mouseout', function () { details.textContent = ''; });\n"
"resetCtl.addEventListener('click', function () { zoom(root); });\n"
"searchCtl.addEventListener('click', ask);\n"
"clearCtl.addEventListener('click', clearSearch);\n"
"document.addEventListener('keydown', function (e) {\n"
"\tif ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) {\n"
"\t\te.preventDefault();\n"
"\t\task();\n"
"\t} else if (e.key === '/' && !e.ctrlKey && !e.metaKey) {\n"
"\t\te.preventDefault();\n"
"\t\task();\n"
"\t} else if (e.key === 'Escape') {\n"
"\t\tzoom(root);\n"
"\t\tclearSearch();\n"
"\t}\n"
"});\n"
"if (pen && frames.length > 0) {\n"
"\tvar font = getComputedStyle(frames[0].label);\n"
"\tpen.font = font.fontStyle + ' ' + font.fontWeight + ' ' + font.fontSize + ' ' + font.fontFamily;\n"
"}\n"
"frames.forEach(function (f) {\n"
"\tf.cps = Array.from(f.name);\n"
"\tf.full = textWidth(f.name);\n"
"\tf.text = f.label.textContent;\n"
"});\n"
"relabel();\n"
"/* Without the script (an <img>) there is nothing to search with. */\n"
"searchCtl.setAttribute('visibility', 'visible');\n"
"})();\n";

typedef struct svg_writer
{
	const tp_flame_stacks *stacks;	/* whose check stops the writing */
	bool		stopped;
	FILE	   *out;
	const tp_flame_layout *layout;
	const char *unit;
	bool		diff;
	bool		ascii;			/* see tp_flame_stacks_set_ascii */
	double		max_change;		/* diff: largest |share change| drawn */
} svg_writer;

/*
 * A character outside ASCII as a character reference (ascii mode); false
 * for U+FFFE and U+FFFF, which are no XML characters.
 */
static bool
put_reference(FILE *out, const unsigned char *p, size_t n)
{
	uint32_t	c = n == 2 ? p[0] & 0x1f : n == 3 ? p[0] & 0x0f : p[0] & 0x07;

	for (size_t k = 1; k < n; k++)
		c = c << 6 | (p[k] & 0x3f);
	if (c == 0xfffe || c == 0xffff)
		return false;
	fprintf(out, "&#%" PRIu32 ";", c);
	return true;
}

/*
 * XML text or attribute value.  Input is valid UTF-8 without control
 * characters (tp_prof_clean_copy); U+FFFE and U+FFFF are still not XML
 * characters, so they become '?'.  ascii: characters outside ASCII as
 * references.
 */
static void
put_xml_n(FILE *out, bool ascii, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;

	for (size_t i = 0; i < len; i++)
	{
		size_t		n;

		if (ascii && p[i] >= 0x80)
		{
			n = tp_utf8_char_length(p + i, len - i);
			if (n == 0 || !put_reference(out, p + i, n))
				fputc('?', out);
			i += n > 0 ? n - 1 : 0;
			continue;
		}
		switch (p[i])
		{
			case '&':
				fputs("&amp;", out);
				break;
			case '<':
				fputs("&lt;", out);
				break;
			case '>':
				fputs("&gt;", out);
				break;
			case '"':
				fputs("&quot;", out);
				break;
			case '\'':
				fputs("&apos;", out);
				break;
			case 0xef:
				if (i + 2 < len && p[i + 1] == 0xbf && (p[i + 2] == 0xbe || p[i + 2] == 0xbf))
				{
					fputc('?', out);
					i += 2;
					break;
				}
				/* FALLTHROUGH */
			default:
				fputc(p[i], out);
		}
	}
}

static void
put_xml(const svg_writer *w, const char *s)
{
	put_xml_n(w->out, w->ascii, s, strlen(s));
}

static double
share(uint64_t weight, uint64_t total)
{
	return total > 0 ? (double) weight / (double) total : 0.0;
}

/*
 * value with that many decimals, rounded half up like JavaScript's
 * toFixed, and with a '.' whatever LC_NUMERIC says (printf's %f would
 * follow a host program's locale).  plus: "+" before values >= 0, and
 * values that round to zero are never "-0.00".
 */
static void
put_decimal(FILE *out, double value, int decimals, bool plus)
{
	uint64_t	scale = 1;
	uint64_t	scaled;
	bool		negative = value < 0;

	for (int i = 0; i < decimals; i++)
		scale *= 10;
	scaled = (uint64_t) ((negative ? -value : value) * (double) scale + 0.5);
	if (negative && scaled > 0)
		fputc('-', out);
	else if (plus)
		fputc('+', out);
	fprintf(out, "%" PRIu64, scaled / scale);
	if (decimals > 0)
		fprintf(out, ".%0*" PRIu64, decimals, scaled % scale);
}

static double
change_of(const tp_flame_layout *layout, const tp_flame_frame *f)
{
	return share(f->weight, layout->total) - share(f->baseline, layout->baseline_total);
}

/* The first n code points' length in bytes, or the whole length. */
static size_t
prefix_bytes(const char *s, size_t n, size_t *count)
{
	size_t		i = 0;

	*count = 0;
	for (; s[i] != '\0'; i++)
	{
		if (((unsigned char) s[i] & 0xc0) == 0x80)
			continue;
		if (*count == n)
			return i;
		(*count)++;
	}
	return i;
}

/* The label for a frame px wide: the name, or its start and "..", or none. */
static void
put_label(const svg_writer *w, const char *name, double px)
{
	double		fits = (px - 2 * LABEL_PAD) / CHAR_WIDTH;
	size_t		n;
	size_t		count;
	size_t		bytes;

	if (fits < 3)
		return;
	n = (size_t) fits;
	bytes = prefix_bytes(name, n, &count);
	if (name[bytes] == '\0')
	{
		put_xml(w, name);
		return;
	}
	put_xml_n(w->out, w->ascii, name, prefix_bytes(name, n - 2, &count));
	fputs("..", w->out);
}

/* A stable warm colour (reds to yellows) from the name. */
static void
warm_colour(const char *name, char *buf, size_t len)
{
	uint64_t	h = tp_prof_hash(name, strlen(name), 0x7f4a7c15);

	snprintf(buf, len, "rgb(%u,%u,%u)",
			 (unsigned) (205 + h % 50),
			 (unsigned) (70 + (h >> 16) % 160),
			 (unsigned) (20 + (h >> 32) % 60));
}

static unsigned
mix(int from, int to, double t)
{
	return (unsigned) (from + (to - from) * t + 0.5);
}

/* Red when the share grew, blue when it shrank, grey when equal. */
static void
diff_colour(double change, double max_change, char *buf, size_t len)
{
	double		t = max_change > 0 ? (change < 0 ? -change : change) / max_change : 0;

	if (t > 1)
		t = 1;
	if (change > 0)
		snprintf(buf, len, "rgb(%u,%u,%u)", mix(NEUTRAL, HOT, t),
				 mix(NEUTRAL, STRONG, t), mix(NEUTRAL, STRONG, t));
	else if (change < 0)
		snprintf(buf, len, "rgb(%u,%u,%u)", mix(NEUTRAL, STRONG, t),
				 mix(NEUTRAL, STRONG, t), mix(NEUTRAL, HOT, t));
	else
		snprintf(buf, len, "rgb(%u,%u,%u)", NEUTRAL, NEUTRAL, NEUTRAL);
}

static void
put_tooltip(const svg_writer *w, const tp_flame_frame *f)
{
	const tp_flame_layout *l = w->layout;

	put_xml(w, f->name);
	if (!w->diff)
	{
		fprintf(w->out, "&#10;%" PRIu64 " ", f->weight);
		put_xml(w, w->unit);
		fputs(", ", w->out);
		put_decimal(w->out, 100.0 * share(f->weight, l->total), 2, false);
		fputc('%', w->out);
		return;
	}
	fputs("&#10;target ", w->out);
	put_decimal(w->out, 100.0 * share(f->weight, l->total), 2, false);
	fprintf(w->out, "%% (%" PRIu64 " ", f->weight);
	put_xml(w, w->unit);
	fputs(")&#10;baseline ", w->out);
	put_decimal(w->out, 100.0 * share(f->baseline, l->baseline_total), 2, false);
	fputs("%&#10;change ", w->out);
	put_decimal(w->out, 100.0 * change_of(l, f), 2, true);
	fputs(" pp", w->out);
}

static void
put_frame(const svg_writer *w, const tp_flame_frame *f)
{
	const tp_flame_layout *l = w->layout;
	double		x = 100.0 * share(f->start, l->total);
	double		width = l->total > 0 ? 100.0 * share(f->weight, l->total) : 100.0;
	int			y = TOP + (int) (l->max_depth - f->depth) * ROW_HEIGHT;
	char		colour[32];

	if (w->diff)
		diff_colour(change_of(l, f), w->max_change, colour, sizeof(colour));
	else
		warm_colour(f->name, colour, sizeof(colour));
	fputs("<g class=\"f\" data-n=\"", w->out);
	put_xml(w, f->name);
	fprintf(w->out, "\" data-v=\"%" PRIu64 "\" data-x=\"%" PRIu64 "\" data-d=\"%" PRIu32 "\"",
			f->weight, f->start, f->depth);
	if (w->diff)
		fprintf(w->out, " data-b=\"%" PRIu64 "\"", f->baseline);
	fputs("><title>", w->out);
	put_tooltip(w, f);
	fputs("</title><svg x=\"", w->out);
	put_decimal(w->out, x, 4, false);
	fprintf(w->out, "%%\" y=\"%d\" width=\"", y);
	put_decimal(w->out, width, 4, false);
	fprintf(w->out, "%%\" height=\"%d\"><rect width=\"100%%\" height=\"100%%\" fill=\"%s\"/>"
			"<text x=\"%d\" y=\"11.5\">", FRAME_HEIGHT, colour, LABEL_PAD);
	put_label(w, f->name, width / 100.0 * REF_WIDTH);
	fputs("</text></svg></g>\n", w->out);
}

static void
put_subtitle(const svg_writer *w, const tp_flame_layout *l)
{
	FILE	   *out = w->out;

	if (l->total == 0)
	{
		fputs("no samples", out);
		return;
	}
	if (w->diff)
		fputs("width: target, ", out);
	fprintf(out, "%" PRIu64 " ", l->total);
	put_xml(w, w->unit);
	if (w->diff)
	{
		put_xml(w, " \xc2\xb7 colour: change of share from baseline, ");
		fprintf(out, "%" PRIu64 " ", l->baseline_total);
		put_xml(w, w->unit);
		fputs(" (red: larger, blue: smaller)", out);
	}
	if (l->omitted > 0)
	{
		put_xml(w, " \xc2\xb7 ");
		fprintf(out, "%zu frame%s under ", l->omitted, l->omitted == 1 ? "" : "s");
		put_decimal(out, TP_FLAME_MIN_PERMILLE / 10.0, 1, false);
		fputs("% not drawn", out);
	}
}

static void
put_document(svg_writer *w, const char *title)
{
	const tp_flame_layout *l = w->layout;
	FILE	   *out = w->out;
	int			height = TOP + (int) (l->max_depth + 1) * ROW_HEIGHT + BOTTOM;

	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
			"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"100%%\""
			" height=\"%d\" data-total=\"%" PRIu64 "\" data-unit=\"", height, l->total);
	put_xml(w, w->unit);
	fputc('"', out);
	if (w->diff)
		fprintf(out, " data-btotal=\"%" PRIu64 "\"", l->baseline_total);
	fputs(">\n<title>", out);
	put_xml(w, title);
	fprintf(out, "</title>\n<style>\n%s</style>\n", style);
	fputs("<rect class=\"tp-bg\" width=\"100%\" height=\"100%\"/>\n"
		  "<text class=\"tp-title\" x=\"50%\" y=\"22\">", out);
	put_xml(w, title);
	fputs("</text>\n<text class=\"tp-sub\" x=\"50%\" y=\"40\">", out);
	put_subtitle(w, l);
	fputs("</text>\n"
		  "<text class=\"tp-reset tp-ctl\" x=\"10\" y=\"22\" visibility=\"hidden\">Reset zoom</text>\n"
		  "<text class=\"tp-clear tp-ctl tp-end\" x=\"100%\" dx=\"-80\" y=\"22\" visibility=\"hidden\">Clear</text>\n"
		  "<text class=\"tp-search tp-ctl tp-end\" x=\"100%\" dx=\"-10\" y=\"22\" visibility=\"hidden\">Search</text>\n"
		  "<g class=\"tp-frames\">\n", out);
	for (size_t i = 0; i < l->count; i++)
	{
		if (!tp_flame_draw_tick(w->stacks))
		{
			w->stopped = true;
			return;
		}
		put_frame(w, &l->frames[i]);
	}
	fprintf(out, "</g>\n<text class=\"tp-details\" x=\"10\" y=\"%d\"></text>\n"
			"<text class=\"tp-matched tp-end\" x=\"100%%\" dx=\"-10\" y=\"%d\"></text>\n"
			"<script><![CDATA[\n%s]]></script>\n</svg>\n",
			height - 12, height - 12, script);
}

/*
 * Everything allocated here is recorded in the stacks' draw record before
 * each check, the memstream's buffer included (open_memstream writes its
 * pointer there, not into this frame, which a longjmp leaves behind).
 */
static char *
render(const tp_flame_stacks *stacks, const tp_flame_stacks *baseline,
	   const char *title, const char *default_title, const char *unit)
{
	tp_flame_layout layout;
	tp_flame_draw *draw;
	svg_writer	w;
	char	   *text = NULL;
	bool		ok = false;

	if (stacks == NULL || !tp_flame_layout_build(stacks, baseline, &layout))
		return NULL;
	draw = tp_flame_stacks_draw(stacks);
	draw->frames = layout.frames;
	draw->title = tp_prof_clean_copy(title != NULL && title[0] != '\0' ? title : default_title);
	draw->unit = tp_prof_clean_copy(unit != NULL && unit[0] != '\0' ? unit : "samples");
	memset(&w, 0, sizeof(w));
	w.stacks = stacks;
	w.layout = &layout;
	w.unit = draw->unit;
	w.diff = baseline != NULL;
	w.ascii = tp_flame_stacks_ascii(stacks);
	for (size_t i = 0; w.diff && i < layout.count && !w.stopped; i++)
	{
		double		c = change_of(&layout, &layout.frames[i]);

		if ((c < 0 ? -c : c) > w.max_change)
			w.max_change = c < 0 ? -c : c;
		w.stopped = !tp_flame_draw_tick(stacks);
	}
	if (!w.stopped && draw->title != NULL && draw->unit != NULL &&
		(draw->out = open_memstream(&draw->text, &draw->size)) != NULL)
	{
		w.out = draw->out;
		put_document(&w, draw->title);
		ok = !ferror(w.out) && !w.stopped;
		draw->out = NULL;
		if (fclose(w.out) != 0)
			ok = false;
		if (ok)
		{
			text = draw->text;
			draw->text = NULL;
		}
	}
	/* layout.frames is draw->frames: freed with the rest. */
	tp_flame_draw_release(draw);
	return text;
}

char *
tp_flame_stacks_svg(const tp_flame_stacks *stacks, const char *title, const char *unit)
{
	return render(stacks, NULL, title, "Flame Graph", unit);
}

char *
tp_flame_stacks_diff_svg(const tp_flame_stacks *target, const tp_flame_stacks *baseline,
						 const char *title, const char *unit)
{
	if (baseline == NULL)
		return NULL;
	return render(target, baseline, title, "Differential Flame Graph", unit);
}

/* ---- profiles ---- */

tp_flame_stacks *
tp_flame_stacks_from_profile(const tp_profile *profile)
{
	tp_prof_stack *stacks;
	size_t		count;
	tp_flame_stacks *out = tp_flame_stacks_new();
	const char **names = NULL;
	size_t		names_cap = 0;
	bool		ok = out != NULL;

	if (!ok || !tp_prof_collapse(profile, &stacks, &count))
	{
		tp_flame_stacks_free(out);
		return NULL;
	}
	for (size_t i = 0; ok && i < count; i++)
	{
		if (stacks[i].depth > names_cap)
		{
			const char **grown = realloc(names, stacks[i].depth * sizeof(char *));

			if (grown == NULL)
			{
				ok = false;
				break;
			}
			names = grown;
			names_cap = stacks[i].depth;
		}
		for (uint32_t d = 0; d < stacks[i].depth; d++)
			names[d] = profile->functions[stacks[i].frames[d]].name;
		ok = tp_flame_stacks_add(out, names, stacks[i].depth, stacks[i].weight);
	}
	free(names);
	tp_prof_stacks_free(stacks, count);
	if (!ok)
	{
		tp_flame_stacks_free(out);
		return NULL;
	}
	return out;
}

char *
tp_flamegraph_svg(const tp_profile *profile, const char *title)
{
	tp_flame_stacks *stacks = tp_flame_stacks_from_profile(profile);
	char	   *svg = stacks != NULL ? tp_flame_stacks_svg(stacks, title, "samples") : NULL;

	tp_flame_stacks_free(stacks);
	return svg;
}

char *
tp_flamegraph_diff_svg(const tp_profile *target, const tp_profile *baseline,
					   const char *title)
{
	tp_flame_stacks *t = tp_flame_stacks_from_profile(target);
	tp_flame_stacks *b = t != NULL ? tp_flame_stacks_from_profile(baseline) : NULL;
	char	   *svg = b != NULL ? tp_flame_stacks_diff_svg(t, b, title, "samples") : NULL;

	tp_flame_stacks_free(t);
	tp_flame_stacks_free(b);
	return svg;
}
