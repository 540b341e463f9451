/*
 * test_flamegraph_ascii.c - flame graphs written in ASCII only
 * (tp_flame_stacks_set_ascii), as the extension returns them to a database
 * or client whose encoding is not UTF-8: every other character becomes a
 * numeric character reference, so the document is the same in any
 * ASCII-compatible encoding and still says what its UTF-8 form says.
 */
#include <stdlib.h>
#include <string.h>

#include "flamegraph.h"
#include "unit.h"

static bool
all_ascii(const char *s)
{
	for (const unsigned char *p = (const unsigned char *) s; *p; p++)
		if (*p >= 0x80)
			return false;
	return true;
}

static int
count(const char *s, const char *needle)
{
	int			n = 0;

	for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* One, two, three and four bytes of UTF-8, and a narrow frame for the subtitle's "·". */
static tp_flame_stacks *
stacks_with_names(void)
{
	tp_flame_stacks *s = tp_flame_stacks_new();
	const char *wide[] = {"main", "caf\xc3\xa9", "\xe2\x82\xac_sum", "\xf0\x9f\x94\xa5<&"};
	const char *odd[] = {"main", "bad\xff", "\xef\xbf\xbeok"};
	const char *narrow[] = {"main", "rare"};

	CHECK(tp_flame_stacks_add(s, wide, 4, 100000));
	CHECK(tp_flame_stacks_add(s, odd, 3, 100000));
	CHECK(tp_flame_stacks_add(s, narrow, 2, 1));
	return s;
}

TEST(test_plain_graph_ascii)
{
	tp_flame_stacks *s = stacks_with_names();
	char	   *utf8 = tp_flame_stacks_svg(s, "t\xc2\xb5", "\xc2\xb5s");
	char	   *ascii;

	CHECK(!tp_flame_stacks_ascii(s));
	tp_flame_stacks_set_ascii(s, true);
	CHECK(tp_flame_stacks_ascii(s));
	ascii = tp_flame_stacks_svg(s, "t\xc2\xb5", "\xc2\xb5s");
	CHECK(utf8 != NULL && ascii != NULL);
	if (utf8 != NULL && ascii != NULL)
	{
		/* By default UTF-8 as it was. */
		CHECK(!all_ascii(utf8));
		CHECK(strstr(utf8, "data-unit=\"\xc2\xb5s\"") != NULL);
		/* ASCII: the same document, with references. */
		CHECK(all_ascii(ascii));
		CHECK(strncmp(ascii, "<?xml version=\"1.0\" encoding=\"UTF-8\"", 36) == 0);
		CHECK(strstr(ascii, "data-unit=\"&#181;s\"") != NULL);
		CHECK(strstr(ascii, "<title>t&#181;</title>") != NULL);
		CHECK(count(ascii, "data-n=\"caf&#233;\"") == 1);
		CHECK(count(ascii, "data-n=\"&#8364;_sum\"") == 1);
		CHECK(count(ascii, "data-n=\"&#128293;&lt;&amp;\"") == 1);
		/* What was '?' stays '?': invalid UTF-8, U+FFFE. */
		CHECK(count(ascii, "data-n=\"bad?\"") == 1);
		CHECK(count(ascii, "data-n=\"?ok\"") == 1);
		/* The subtitle's separator (a frame under 0.1% was left out). */
		CHECK(strstr(ascii, " &#183; 1 frame under 0.1% not drawn") != NULL);
		CHECK(strstr(utf8, " \xc2\xb7 1 frame under 0.1% not drawn") != NULL);
		/* Labels: "café" fits as a whole, as in UTF-8. */
		CHECK(strstr(ascii, ">caf&#233;</text>") != NULL);
		CHECK(strstr(utf8, ">caf\xc3\xa9</text>") != NULL);
	}
	free(utf8);
	free(ascii);
	tp_flame_stacks_free(s);
}

TEST(test_diff_graph_ascii)
{
	tp_flame_stacks *t = stacks_with_names();
	tp_flame_stacks *b = stacks_with_names();
	char	   *diff;

	tp_flame_stacks_set_ascii(t, true);
	diff = tp_flame_stacks_diff_svg(t, b, "d", "\xc2\xb5s");
	CHECK(diff != NULL);
	if (diff != NULL)
	{
		CHECK(all_ascii(diff));
		CHECK(strstr(diff, " &#183; colour: change of share from baseline, ") != NULL);
		CHECK(count(diff, "data-n=\"caf&#233;\"") == 1);
		CHECK(strstr(diff, "data-btotal=\"200001\"") != NULL);
	}
	free(diff);
	tp_flame_stacks_free(t);
	tp_flame_stacks_free(b);
}

int
main(void)
{
	RUN(test_plain_graph_ascii);
	RUN(test_diff_graph_ascii);
	return unit_summary();
}
