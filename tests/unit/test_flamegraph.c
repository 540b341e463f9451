/*
 * test_flamegraph.c - the flame graph tree, its layout and the SVG writer
 * on hand-made stacks: structure, escaping, geometry, determinism, the
 * differential colours and the omission of tiny frames.  The SVG is read
 * back with small string scans, not an XML library: what matters is that
 * tags balance and the attributes the script relies on are right.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph.h"
#include "profile.h"
#include "unit.h"

/* Add "a;b;c"-style stacks: names split at ';', root first. */
static void
add(tp_flame_stacks *s, const char *folded, uint64_t weight)
{
	char		buf[512];
	const char *frames[32];
	size_t		depth = 0;

	snprintf(buf, sizeof(buf), "%s", folded);
	for (char *tok = strtok(buf, ";"); tok != NULL && depth < 32; tok = strtok(NULL, ";"))
		frames[depth++] = tok;
	CHECK(tp_flame_stacks_add(s, frames, depth, weight));
}

static size_t
count(const char *text, const char *needle)
{
	size_t		n = 0;

	for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

/*
 * Tags balance: every <name ...> is closed by </name> or "/>", in order,
 * outside the XML declaration and the CDATA section; the root is <svg>.
 */
static bool
balanced(const char *svg)
{
	char		stack[64][32];
	int			depth = 0;
	bool		seen_root = false;
	const char *p = svg;

	while ((p = strchr(p, '<')) != NULL)
	{
		char		name[32];
		size_t		n = 0;
		const char *end;

		if (strncmp(p, "<?", 2) == 0 || strncmp(p, "<![CDATA[", 9) == 0)
		{
			end = strstr(p, p[1] == '?' ? "?>" : "]]>");
			if (end == NULL)
				return false;
			p = end + 2;
			continue;
		}
		end = strchr(p, '>');
		if (end == NULL)
			return false;
		if (p[1] == '/')
		{
			for (const char *q = p + 2; q < end && n < sizeof(name) - 1; q++)
				name[n++] = *q;
			name[n] = '\0';
			if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
				return false;
			depth--;
		}
		else
		{
			for (const char *q = p + 1; q < end && *q != ' ' && *q != '/' && n < sizeof(name) - 1; q++)
				name[n++] = *q;
			name[n] = '\0';
			/* Attribute values are escaped, so '<' cannot occur inside a tag. */
			if (memchr(p + 1, '<', (size_t) (end - p - 1)) != NULL)
				return false;
			if (!seen_root && strcmp(name, "svg") != 0)
				return false;
			if (seen_root && depth == 0)
				return false;	/* a second root */
			seen_root = true;
			if (end[-1] != '/')
			{
				if (depth == 64)
					return false;
				strcpy(stack[depth++], name);
			}
		}
		p = end + 1;
	}
	return seen_root && depth == 0;
}

/* The <g class="f" ...> ... </g> of the frame named name (nth match). */
static const char *
frame(const char *svg, const char *name, int nth)
{
	char		needle[256];
	const char *p = svg;

	snprintf(needle, sizeof(needle), "<g class=\"f\" data-n=\"%s\"", name);
	for (int i = 0; p != NULL && i <= nth; i++)
		if ((p = strstr(i == 0 ? p : p + 1, needle)) == NULL)
			return NULL;
	return p;
}

/* A percentage attribute (x or width) of a frame's box, or -1. */
static double
frame_percent(const char *svg, const char *name, const char *attr)
{
	const char *f = frame(svg, name, 0);
	char		needle[32];
	const char *box;
	const char *a;

	if (f == NULL || (box = strstr(f, "<svg ")) == NULL)
		return -1;
	snprintf(needle, sizeof(needle), " %s=\"", attr);
	if ((a = strstr(box, needle)) == NULL)
		return -1;
	return strtod(a + strlen(needle), NULL);
}

/* The fill of a frame's rect. */
static bool
frame_rgb(const char *svg, const char *name, int rgb[3])
{
	const char *f = frame(svg, name, 0);
	const char *fill;

	if (f == NULL || (fill = strstr(f, "fill=\"rgb(")) == NULL)
		return false;
	return sscanf(fill, "fill=\"rgb(%d,%d,%d)", &rgb[0], &rgb[1], &rgb[2]) == 3;
}

/* The label text of a frame. */
static void
frame_label(const char *svg, const char *name, char *buf, size_t len)
{
	const char *f = frame(svg, name, 0);
	const char *t = f != NULL ? strstr(f, "<text") : NULL;
	const char *start = t != NULL ? strchr(t, '>') : NULL;
	const char *end = start != NULL ? strstr(start, "</text>") : NULL;
	size_t		n;

	buf[0] = '\0';
	if (end == NULL)
		return;
	n = (size_t) (end - start - 1);
	if (n >= len)
		n = len - 1;
	memcpy(buf, start + 1, n);
	buf[n] = '\0';
}

static tp_flame_stacks *
sample_stacks(void)
{
	tp_flame_stacks *s = tp_flame_stacks_new();

	add(s, "main;a;b", 3);
	add(s, "main;a;c", 1);
	add(s, "main;d", 4);
	return s;
}

TEST(test_tree_and_layout)
{
	tp_flame_stacks *s = sample_stacks();
	tp_flame_layout l;
	static const char *names[] = {"all", "main", "a", "b", "c", "d"};
	static const uint64_t starts[] = {0, 0, 0, 0, 3, 4};
	static const uint64_t weights[] = {8, 8, 4, 3, 1, 4};
	static const uint32_t depths[] = {0, 1, 2, 3, 3, 2};

	CHECK(tp_flame_stacks_total(s) == 8);
	CHECK(tp_flame_layout_build(s, NULL, &l));
	CHECK(l.count == 6);
	CHECK(l.max_depth == 3);
	CHECK(l.total == 8);
	CHECK(l.omitted == 0);
	for (size_t i = 0; i < 6 && i < l.count; i++)
	{
		CHECK_STR(l.frames[i].name, names[i]);
		CHECK(l.frames[i].start == starts[i]);
		CHECK(l.frames[i].weight == weights[i]);
		CHECK(l.frames[i].depth == depths[i]);
	}
	CHECK(l.count == 6 && l.frames[0].parent == TP_FLAME_NONE);
	CHECK(l.count == 6 && l.frames[3].parent == 2 && l.frames[5].parent == 1);
	tp_flame_layout_free(&l);
	tp_flame_stacks_free(s);
}

TEST(test_svg_well_formed)
{
	tp_flame_stacks *s = sample_stacks();
	char	   *svg = tp_flame_stacks_svg(s, "My <graph>", NULL);

	/* The checker itself rejects what it should. */
	CHECK(balanced("<svg><g/><g></g></svg>"));
	CHECK(!balanced("<svg><g></svg>"));
	CHECK(!balanced("<svg><g a=\"<\"/></svg>"));
	CHECK(!balanced("<svg></svg><svg></svg>"));
	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(strncmp(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"", 36) == 0);
		CHECK(balanced(svg));
		CHECK(count(svg, "<g class=\"f\"") == 6);
		CHECK(strstr(svg, "width=\"100%\"") != NULL);
		CHECK(strstr(svg, "data-total=\"8\"") != NULL);
		CHECK(strstr(svg, "data-unit=\"samples\"") != NULL);
		CHECK(strstr(svg, "<title>My &lt;graph&gt;</title>") != NULL);
		/* Self-contained: the namespace is the only URL. */
		CHECK(count(svg, "http") == 1);
		CHECK(strstr(svg, "href") == NULL);
		/* Each frame has a tooltip with name, weight and percent. */
		CHECK(strstr(svg, "<title>b&#10;3 samples, 37.50%</title>") != NULL);
		CHECK(strstr(svg, "<script><![CDATA[") != NULL);
	}
	free(svg);
	tp_flame_stacks_free(s);
}

TEST(test_name_once_per_node)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	char	   *svg;

	add(s, "main;a;x", 5);
	add(s, "main;b;x", 5);
	add(s, "main;a;x", 5);		/* the same node again */
	add(s, "main;x", 5);
	svg = tp_flame_stacks_svg(s, "t", "ms");
	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(count(svg, "data-n=\"x\"") == 3);
		CHECK(count(svg, "data-n=\"a\"") == 1);
		CHECK(count(svg, "data-n=\"main\"") == 1);
		CHECK(count(svg, "data-n=\"all\"") == 1);
		CHECK(strstr(svg, "data-unit=\"ms\"") != NULL);
		CHECK(strstr(svg, "<title>x&#10;10 ms, 50.00%</title>") != NULL);
	}
	free(svg);
	tp_flame_stacks_free(s);
}

TEST(test_escaping)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	const char *nasty[] = {"main", "a<b>&\"c'"};
	const char *bad[] = {"main", "ctl\x01x\xff", "\xef\xbf\xbeok"};
	char	   *svg;

	CHECK(tp_flame_stacks_add(s, nasty, 2, 10));
	CHECK(tp_flame_stacks_add(s, bad, 3, 10));
	svg = tp_flame_stacks_svg(s, "t&\"'", NULL);
	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(balanced(svg));
		CHECK(count(svg, "data-n=\"a&lt;b&gt;&amp;&quot;c&apos;\"") == 1);
		CHECK(strstr(svg, "<title>a&lt;b&gt;&amp;&quot;c&apos;&#10;") != NULL);
		CHECK(strstr(svg, ">a&lt;b&gt;&amp;&quot;c&apos;</text>") != NULL);
		CHECK(strstr(svg, "a<b") == NULL);
		CHECK(strstr(svg, "<title>t&amp;&quot;&apos;</title>") != NULL);
		/* A control character and invalid UTF-8 become '?', as do U+FFFE. */
		CHECK(count(svg, "data-n=\"ctl?x?\"") == 1);
		CHECK(count(svg, "data-n=\"?ok\"") == 1);
		CHECK(strchr(svg, '\x01') == NULL);
	}
	free(svg);
	tp_flame_stacks_free(s);
}

TEST(test_widths_proportional)
{
	tp_flame_stacks *s = sample_stacks();
	char	   *svg = tp_flame_stacks_svg(s, NULL, NULL);

	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(strstr(svg, "<title>Flame Graph</title>") != NULL);
		CHECK(frame_percent(svg, "all", "width") == 100.0);
		CHECK(frame_percent(svg, "main", "width") == 100.0);
		CHECK(frame_percent(svg, "a", "width") == 50.0);
		CHECK(frame_percent(svg, "b", "width") == 37.5);
		CHECK(frame_percent(svg, "c", "width") == 12.5);
		CHECK(frame_percent(svg, "c", "x") == 37.5);
		CHECK(frame_percent(svg, "d", "x") == 50.0);
		CHECK(frame_percent(svg, "d", "width") == 50.0);
		CHECK(strstr(svg, "data-n=\"c\" data-v=\"1\" data-x=\"3\" data-d=\"3\"") != NULL);
		/* The root is at the bottom: deeper frames are higher up. */
		CHECK(strstr(frame(svg, "all", 0), " y=\"100\"") != NULL);
		CHECK(strstr(frame(svg, "b", 0), " y=\"52\"") != NULL);
	}
	free(svg);
	tp_flame_stacks_free(s);
}

/* Numbers round half up (as the script's toFixed does), with a '.'. */
TEST(test_number_format)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	char	   *svg;

	add(s, "tie", 6);			/* 3.125% of 192 */
	add(s, "third", 64);		/* 33.333...% */
	add(s, "rest", 122);		/* 63.541666...% */
	svg = tp_flame_stacks_svg(s, "t", NULL);
	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(strstr(svg, "<title>tie&#10;6 samples, 3.13%</title>") != NULL);
		CHECK(strstr(svg, "<title>third&#10;64 samples, 33.33%</title>") != NULL);
		CHECK(strstr(frame(svg, "tie", 0), "x=\"96.8750%\" y=\"52\" width=\"3.1250%\"") != NULL);
		CHECK(strstr(frame(svg, "third", 0), "x=\"63.5417%\" y=\"52\" width=\"33.3333%\"") != NULL);
	}
	free(svg);
	tp_flame_stacks_free(s);
}

TEST(test_labels_fit)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	char		label[256];
	char	   *svg;

	/* 1% of 1200 px holds only a dot or two: no label. */
	add(s, "tiny_function_name", 1);
	/* 10% is 120 px: about 16 glyphs, so this one is cut. */
	add(s, "a_rather_long_function_name_that_cannot_fit", 10);
	/* The rest is wide; a multi-byte name is cut at a character. */
	add(s, "short", 39);
	add(s, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 10);
	add(s, "wide", 40);
	svg = tp_flame_stacks_svg(s, "t", NULL);
	CHECK(svg != NULL);
	if (svg != NULL)
	{
		frame_label(svg, "tiny_function_name", label, sizeof(label));
		CHECK_STR(label, "");
		frame_label(svg, "a_rather_long_function_name_that_cannot_fit", label, sizeof(label));
		CHECK(strlen(label) > 5 && strlen(label) < 20);
		CHECK(strncmp(label, "a_rather_long_function_name", strlen(label) - 2) == 0);
		CHECK(strcmp(label + strlen(label) - 2, "..") == 0);
		frame_label(svg, "short", label, sizeof(label));
		CHECK_STR(label, "short");
		frame_label(svg, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
					"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
					label, sizeof(label));
		/* Whole two-byte characters, then "..". */
		CHECK(strlen(label) > 4 && strlen(label) % 2 == 0);
		CHECK(strncmp(label, "\xc3\xa9\xc3\xa9", 4) == 0);
		CHECK(strcmp(label + strlen(label) - 2, "..") == 0);
	}
	free(svg);
	tp_flame_stacks_free(s);
}

TEST(test_deterministic)
{
	tp_flame_stacks *a = tp_flame_stacks_new();
	tp_flame_stacks *b = tp_flame_stacks_new();
	char	   *sa;
	char	   *sa2;
	char	   *sb;

	add(a, "main;x;y", 2);
	add(a, "main;b", 3);
	add(a, "main;x;z", 5);
	add(a, "other", 1);
	/* The same stacks in another order, one split in two. */
	add(b, "other", 1);
	add(b, "main;x;z", 4);
	add(b, "main;b", 3);
	add(b, "main;x;z", 1);
	add(b, "main;x;y", 2);
	sa = tp_flame_stacks_svg(a, "t", NULL);
	sa2 = tp_flame_stacks_svg(a, "t", NULL);
	sb = tp_flame_stacks_svg(b, "t", NULL);
	CHECK(sa != NULL && sa2 != NULL && sb != NULL);
	if (sa != NULL && sa2 != NULL && sb != NULL)
	{
		CHECK(strcmp(sa, sa2) == 0);
		CHECK(strcmp(sa, sb) == 0);
		/* Siblings by name: b before x under main, main before other. */
		CHECK(strstr(sa, "data-n=\"b\"") < strstr(sa, "data-n=\"x\""));
		CHECK(strstr(sa, "data-n=\"main\"") < strstr(sa, "data-n=\"other\""));
	}
	free(sa);
	free(sa2);
	free(sb);
	tp_flame_stacks_free(a);
	tp_flame_stacks_free(b);
}

TEST(test_diff_colours)
{
	tp_flame_stacks *target = tp_flame_stacks_new();
	tp_flame_stacks *baseline = tp_flame_stacks_new();
	int			grew[3];
	int			same[3];
	int			shrank[3];
	int			fresh[3];
	char	   *svg;

	/* Target total 100, baseline total 200: only shares are compared. */
	add(target, "main;grew", 50);
	add(target, "main;same", 30);
	add(target, "main;shrank", 10);
	add(target, "main;fresh", 10);
	add(baseline, "main;grew", 60);
	add(baseline, "main;same", 60);
	add(baseline, "main;shrank", 60);
	add(baseline, "main;gone", 20);
	svg = tp_flame_stacks_diff_svg(target, baseline, "diff", NULL);
	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(balanced(svg));
		CHECK(strstr(svg, "data-btotal=\"200\"") != NULL);
		CHECK(frame_rgb(svg, "grew", grew));
		CHECK(frame_rgb(svg, "same", same));
		CHECK(frame_rgb(svg, "shrank", shrank));
		CHECK(frame_rgb(svg, "fresh", fresh));
		CHECK(grew[0] > grew[2] + 50 && grew[1] == grew[2]);
		CHECK(shrank[2] > shrank[0] + 50 && shrank[0] == shrank[1]);
		CHECK(same[0] == same[1] && same[1] == same[2]);
		CHECK(fresh[0] > fresh[2]);
		/* grew is +20 pp, the largest change: full red; fresh +10 pp, half. */
		CHECK(grew[0] - grew[2] > fresh[0] - fresh[2]);
		/* Only in the baseline: not drawn. */
		CHECK(frame(svg, "gone", 0) == NULL);
		/* Widths follow the target. */
		CHECK(frame_percent(svg, "grew", "width") == 50.0);
		CHECK(strstr(svg, "data-n=\"grew\" data-v=\"50\" data-x=\"10\" data-d=\"2\" data-b=\"60\"") != NULL);
		CHECK(strstr(svg, "data-n=\"fresh\" data-v=\"10\" data-x=\"0\" data-d=\"2\" data-b=\"0\"") != NULL);
		CHECK(strstr(svg, "<title>grew&#10;target 50.00% (50 samples)&#10;baseline 30.00%&#10;change +20.00 pp</title>") != NULL);
		CHECK(strstr(svg, "<title>shrank&#10;target 10.00% (10 samples)&#10;baseline 30.00%&#10;change -20.00 pp</title>") != NULL);
		CHECK(strstr(svg, "<title>same&#10;target 30.00% (30 samples)&#10;baseline 30.00%&#10;change +0.00 pp</title>") != NULL);
	}
	free(svg);
	tp_flame_stacks_free(target);
	tp_flame_stacks_free(baseline);
}

TEST(test_diff_empty_baseline)
{
	tp_flame_stacks *target = sample_stacks();
	tp_flame_stacks *baseline = tp_flame_stacks_new();
	char	   *svg = tp_flame_stacks_diff_svg(target, baseline, NULL, NULL);
	int			rgb[3];

	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(strstr(svg, "<title>Differential Flame Graph</title>") != NULL);
		CHECK(frame_rgb(svg, "b", rgb) && rgb[0] > rgb[2]);
		CHECK(frame_rgb(svg, "all", rgb) && rgb[0] > rgb[2]);
	}
	free(svg);
	CHECK(tp_flame_stacks_diff_svg(target, NULL, NULL, NULL) == NULL);
	tp_flame_stacks_free(target);
	tp_flame_stacks_free(baseline);
}

TEST(test_tiny_frames_omitted)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	tp_flame_layout l;
	char	   *svg;

	add(s, "main;big", 9981);
	add(s, "main;edge;callee", 10);	/* exactly 0.1%: drawn */
	add(s, "main;tiny;below", 9);	/* under 0.1%: neither drawn */
	CHECK(tp_flame_layout_build(s, NULL, &l));
	CHECK(l.total == 10000);
	CHECK(l.count == 5);		/* all, main, big, edge, callee */
	CHECK(l.omitted == 1);
	tp_flame_layout_free(&l);
	svg = tp_flame_stacks_svg(s, "t", NULL);
	CHECK(svg != NULL);
	if (svg != NULL)
	{
		CHECK(frame(svg, "edge", 0) != NULL);
		CHECK(frame(svg, "callee", 0) != NULL);
		CHECK(frame(svg, "tiny", 0) == NULL);
		CHECK(frame(svg, "below", 0) == NULL);
		CHECK(strstr(svg, "1 frame under 0.1% not drawn") != NULL);
		/* The gap stays where tiny was: positions are not shifted. */
		CHECK(strstr(svg, "data-n=\"edge\" data-v=\"10\" data-x=\"9981\"") != NULL);
	}
	free(svg);
	tp_flame_stacks_free(s);
}

/* Many distinct stacks: the output stays bounded by the 0.1% rule. */
TEST(test_output_bounded)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	tp_flame_layout l;
	char	   *svg;
	uint32_t	seed = 12345;

	for (int i = 0; i < 20000; i++)
	{
		char		names[8][16];
		const char *frames[8];

		for (int d = 0; d < 8; d++)
		{
			seed = seed * 1103515245 + 12345;
			snprintf(names[d], sizeof(names[d]), "f%u", (seed >> 16) % (d < 2 ? 3 : 500));
			frames[d] = names[d];
		}
		CHECK(tp_flame_stacks_add(s, frames, 8, 1 + i % 3));
	}
	CHECK(tp_flame_layout_build(s, NULL, &l));
	CHECK(l.omitted > 1000);
	CHECK(l.count <= 1000 * (size_t) (l.max_depth + 1));
	tp_flame_layout_free(&l);
	svg = tp_flame_stacks_svg(s, "t", NULL);
	CHECK(svg != NULL && strlen(svg) < 1000000);
	CHECK(svg != NULL && balanced(svg));
	free(svg);
	tp_flame_stacks_free(s);
}

TEST(test_edge_cases)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	const char *with_null[] = {"main", NULL};
	char	   *svg;

	/* Empty: just the root, full width, and "no samples". */
	svg = tp_flame_stacks_svg(s, "t", NULL);
	CHECK(svg != NULL && balanced(svg));
	CHECK(svg != NULL && strstr(svg, ">no samples</text>") != NULL);
	CHECK(svg != NULL && frame_percent(svg, "all", "width") == 100.0);
	free(svg);

	CHECK(tp_flame_stacks_add(s, with_null, 0, 5));	/* the root's own */
	CHECK(tp_flame_stacks_add(s, with_null, 2, 5));
	CHECK(tp_flame_stacks_add(s, with_null, 2, 0));	/* ignored */
	CHECK(tp_flame_stacks_total(s) == 10);
	svg = tp_flame_stacks_svg(s, "t", NULL);
	CHECK(svg != NULL && frame(svg, "?", 0) != NULL);
	CHECK(svg != NULL && frame_percent(svg, "main", "width") == 50.0);
	free(svg);
	CHECK(tp_flame_stacks_add(s, with_null, 1, UINT64_MAX - 10));
	CHECK(!tp_flame_stacks_add(s, with_null, 1, 1));	/* would overflow */
	CHECK(tp_flame_stacks_total(s) == UINT64_MAX);
	CHECK(!tp_flame_stacks_add(NULL, with_null, 1, 1));
	svg = tp_flame_stacks_svg(s, "t", NULL);
	CHECK(svg != NULL && balanced(svg));
	CHECK(svg != NULL && frame_percent(svg, "main", "width") == 100.0);
	free(svg);
	CHECK(tp_flame_stacks_svg(NULL, "t", NULL) == NULL);
	tp_flame_stacks_free(s);
	tp_flame_stacks_free(NULL);
}

/* The profile entry points equal the stacks they collapse to. */
TEST(test_profile_wrappers)
{
	tp_profile *p = tp_profile_new("cpu", 4000000);
	tp_profile *base = tp_profile_new("cpu", 4000000);
	tp_flame_stacks *s = tp_flame_stacks_new();
	tp_sample_labels labels;
	const char *leaf_first1[] = {"leaf", "mid", "root"};
	const char *leaf_first2[] = {"other", "root"};
	char	   *from_profile;
	char	   *from_stacks;
	char	   *diff;

	memset(&labels, 0, sizeof(labels));
	tp_profile_add_named(p, leaf_first1, 3, &labels, 4, 0, "span");
	labels.span_id[0] = 1;		/* another span: labels are ignored */
	tp_profile_add_named(p, leaf_first1, 3, &labels, 2, 0, "span");
	tp_profile_add_named(p, leaf_first2, 2, &labels, 3, 0, NULL);
	tp_profile_add_named(base, leaf_first2, 2, &labels, 3, 0, NULL);
	add(s, "root;mid;leaf", 6);
	add(s, "root;other", 3);
	from_profile = tp_flamegraph_svg(p, "title");
	from_stacks = tp_flame_stacks_svg(s, "title", "samples");
	CHECK(from_profile != NULL && from_stacks != NULL);
	if (from_profile != NULL && from_stacks != NULL)
		CHECK_STR(from_profile, from_stacks);
	diff = tp_flamegraph_diff_svg(p, base, "d");
	CHECK(diff != NULL && balanced(diff));
	CHECK(diff != NULL && strstr(diff, "data-n=\"leaf\" data-v=\"6\" data-x=\"0\" data-d=\"3\" data-b=\"0\"") != NULL);
	free(from_profile);
	free(from_stacks);
	free(diff);
	tp_flame_stacks_free(s);
	tp_profile_free(p);
	tp_profile_free(base);
}

/* ---- interrupting a draw ---- */

typedef struct interrupt_plan
{
	int			calls;			/* checks so far */
	int			stop_at;		/* 0: never; else stop at that call */
	bool		jump;			/* stop by longjmp (else by returning false) */
	jmp_buf		env;
} interrupt_plan;

static bool
interrupt_check(void *arg)
{
	interrupt_plan *plan = arg;

	plan->calls++;
	if (plan->stop_at != 0 && plan->calls == plan->stop_at)
	{
		if (plan->jump)
			longjmp(plan->env, 1);
		return false;
	}
	return true;
}

/*
 * Bytes malloc has handed out and not had back, give or take what its
 * per-thread cache holds (freed chunks it keeps count as in use): compare
 * over many rounds, not one.
 */
static size_t
heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* Wide enough that every frame is drawn: many nodes, many frames. */
static tp_flame_stacks *
many_stacks(void)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	char		leaf[32];
	char		mid[32];

	for (int i = 0; i < 900; i++)
	{
		const char *frames[] = {"main", mid, leaf};

		snprintf(mid, sizeof(mid), "m%d", i % 30);
		snprintf(leaf, sizeof(leaf), "leaf%d", i);
		CHECK(tp_flame_stacks_add(s, frames, 3, 10));
	}
	return s;
}

/*
 * A check is called while a large graph is drawn; stopping it at any of
 * its calls, by returning false or by a longjmp (PostgreSQL's
 * CHECK_FOR_INTERRUPTS raising a cancel), leaks nothing once the stacks
 * are freed, and the stacks draw again afterwards.
 */
TEST(test_draw_interrupted)
{
	interrupt_plan plan;
	tp_flame_stacks *s = many_stacks();
	tp_flame_stacks *base = many_stacks();
	char	   *plain = tp_flame_stacks_svg(s, "t", "samples");
	char	   *diff = tp_flame_stacks_diff_svg(s, base, "t", "samples");
	int			total;

	tp_flame_stacks_free(s);
	CHECK(plain != NULL && diff != NULL);

	/* Called, and a check that lets it go on changes nothing. */
	memset(&plan, 0, sizeof(plan));
	s = many_stacks();
	tp_flame_stacks_set_check(s, interrupt_check, &plan);
	{
		char	   *svg = tp_flame_stacks_svg(s, "t", "samples");

		CHECK(svg != NULL && plain != NULL && strcmp(svg, plain) == 0);
		free(svg);
	}
	total = plan.calls;
	CHECK(total >= 3);			/* nodes sorted, walked, frames written */
	tp_flame_stacks_free(s);

	for (volatile int jump = 0; jump <= 1; jump++)
	{
		for (volatile int stop = 1; stop <= total; stop++)
		{
			volatile size_t before = 0;

			/*
			 * Round 0 settles malloc's caches; 20 more stopped draws
			 * (each holding kilobytes when stopped) must leave nothing.
			 */
			for (volatile int round = 0; round <= 20; round++)
			{
				char	   *volatile svg = NULL;

				if (round == 1)
					before = heap_in_use();
				s = many_stacks();
				memset(&plan, 0, sizeof(plan));
				plan.stop_at = stop;
				plan.jump = jump;
				tp_flame_stacks_set_check(s, interrupt_check, &plan);
				if (setjmp(plan.env) == 0)
				{
					svg = tp_flame_stacks_svg(s, "t", "samples");
					CHECK(!jump);	/* returning false stops it with NULL */
					CHECK(svg == NULL);
				}
				CHECK(plan.calls == stop);
				free(svg);

				/* Drawn again on the same stacks: whole, what was left freed. */
				plan.stop_at = 0;
				svg = tp_flame_stacks_svg(s, "t", "samples");
				CHECK(svg != NULL && plain != NULL && strcmp(svg, plain) == 0);
				free(svg);

				/* And the diff stopped the same way, then the stacks freed. */
				plan.calls = 0;
				plan.stop_at = stop;
				svg = NULL;
				if (setjmp(plan.env) == 0)
				{
					svg = tp_flame_stacks_diff_svg(s, base, "t", "samples");
					CHECK(!jump && svg == NULL);
				}
				free(svg);
				tp_flame_stacks_free(s);
			}
			CHECK(heap_in_use() < before + 4096);
		}
	}
	free(plain);
	free(diff);
	tp_flame_stacks_free(base);
}

int
main(void)
{
	RUN(test_tree_and_layout);
	RUN(test_svg_well_formed);
	RUN(test_name_once_per_node);
	RUN(test_escaping);
	RUN(test_widths_proportional);
	RUN(test_number_format);
	RUN(test_labels_fit);
	RUN(test_deterministic);
	RUN(test_diff_colours);
	RUN(test_diff_empty_baseline);
	RUN(test_tiny_frames_omitted);
	RUN(test_output_bounded);
	RUN(test_edge_cases);
	RUN(test_profile_wrappers);
	RUN(test_draw_interrupted);
	return unit_summary();
}
