/* Unit tests: W3C traceparent parsing/formatting and random ids. */
#include "trace_context.h"
#include "tracestate.h"
#include "unit.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define SPAN "00f067aa0ba902b7"

static bool
parses(const char *text)
{
	tp_span_context ctx;
	const char *why = NULL;
	bool		ok = tp_traceparent_parse(text, strlen(text), &ctx, &why);

	/* A rejection always explains itself. */
	if (!ok && (why == NULL || why[0] == '\0'))
		return true;
	return ok;
}

static const char *
reason(const char *text)
{
	tp_span_context ctx;
	const char *why = NULL;

	if (tp_traceparent_parse(text, strlen(text), &ctx, &why))
		return "(accepted)";
	return why;
}

TEST(valid_version_00)
{
	tp_span_context ctx;
	const char *why;
	const char *text = "00-" TRACE "-" SPAN "-01";
	char		hex[33];

	CHECK(tp_traceparent_parse(text, strlen(text), &ctx, &why));
	tp_hex_encode(ctx.trace_id, 16, hex);
	CHECK_STR(hex, TRACE);
	tp_hex_encode(ctx.span_id, 8, hex);
	CHECK_STR(hex, SPAN);
	CHECK(ctx.flags == TP_FLAG_SAMPLED);
	CHECK(parses("00-" TRACE "-" SPAN "-00"));
	/* Unknown flag bits are carried, not rejected. */
	CHECK(parses("00-" TRACE "-" SPAN "-ff"));
}

TEST(format_round_trip)
{
	tp_span_context ctx;
	const char *why;
	const char *text = "00-" TRACE "-" SPAN "-01";
	char		out[TP_TRACEPARENT_LEN + 1];

	CHECK(tp_traceparent_parse(text, strlen(text), &ctx, &why));
	tp_traceparent_format(&ctx, out);
	out[TP_TRACEPARENT_LEN] = '\0';
	CHECK_STR(out, text);
}

TEST(invalid_cases_from_the_spec)
{
	CHECK(!parses(""));
	CHECK(!parses("00"));
	CHECK_STR(reason("ff-" TRACE "-" SPAN "-01"), "version ff is forbidden");
	CHECK(!parses("0G-" TRACE "-" SPAN "-01"));
	CHECK(!parses("00-4BF92F3577B34DA6A3CE929D0E0E4736-" SPAN "-01"));	/* uppercase */
	CHECK(!parses("00-" TRACE "-00F067AA0BA902B7-01"));
	CHECK(!parses("00-" TRACE "-" SPAN "-0X"));
	CHECK_STR(reason("00-00000000000000000000000000000000-" SPAN "-01"),
			  "trace-id must not be all zeros");
	CHECK_STR(reason("00-" TRACE "-0000000000000000-01"),
			  "parent-id must not be all zeros");
	CHECK_STR(reason("00-" TRACE "-" SPAN "-01-extra"),
			  "version 00 must be exactly 55 characters");
	CHECK(!parses("00-" TRACE "-" SPAN "-1"));	/* short flags */
	CHECK(!parses("00_" TRACE "-" SPAN "-01"));
	CHECK(!parses("00-" TRACE "_" SPAN "-01"));
	CHECK(!parses("00-" TRACE "-" SPAN "_01"));
	CHECK(!parses(" 00-" TRACE "-" SPAN "-01"));
	CHECK(!parses("00-" TRACE "-" SPAN "-01 "));
}

TEST(future_versions)
{
	/* A higher version with the 00 layout, alone or followed by "-...". */
	CHECK(parses("cc-" TRACE "-" SPAN "-01"));
	CHECK(parses("01-" TRACE "-" SPAN "-01-what-the-future-holds"));
	/* ...but still not trailing data without a dash. */
	CHECK(!parses("01-" TRACE "-" SPAN "-01x"));
	CHECK(!parses("01-" TRACE "-" SPAN "-0"));
}

TEST(length_is_not_nul_terminated)
{
	tp_span_context ctx;
	const char *why;
	const char *text = "00-" TRACE "-" SPAN "-01 and more";

	CHECK(tp_traceparent_parse(text, TP_TRACEPARENT_LEN, &ctx, &why));
}

TEST(random_ids_are_nonzero_and_differ)
{
	uint8_t		a[16];
	uint8_t		b[16];

	CHECK(tp_id_random(a, sizeof(a)));
	CHECK(tp_id_random(b, sizeof(b)));
	CHECK(!tp_id_is_zero(a, sizeof(a)));
	CHECK(memcmp(a, b, sizeof(a)) != 0);

	/*
	 * Lengths that are no multiple of a word: the tail is filled too, and
	 * nothing past it is written.
	 */
	for (size_t len = 1; len < sizeof(a); len++)
	{
		int			tail_set = 0;

		for (int round = 0; round < 64; round++)
		{
			memset(a, 0, sizeof(a));
			a[len] = 0xa5;
			CHECK(tp_id_random(a, len));
			CHECK(!tp_id_is_zero(a, len));
			CHECK(a[len] == 0xa5);
			tail_set |= a[len - 1] != 0;
		}
		CHECK(tail_set);
	}
}

TEST(hex_decode_rejects_uppercase_and_junk)
{
	uint8_t		out[2];

	CHECK(tp_hex_decode("0aff", out, 2));
	CHECK(out[0] == 0x0a && out[1] == 0xff);
	CHECK(!tp_hex_decode("0AFF", out, 2));
	CHECK(!tp_hex_decode("0g00", out, 2));
}

/* What tp_tracestate_parse keeps of text, or "!" when it refuses it. */
static const char *
kept(const char *text)
{
	static char out[TP_TRACESTATE_MAX + 1];
	size_t		len;
	const char *why;

	if (!tp_tracestate_parse(text, strlen(text), out, &len, &why))
		return "!";
	return strlen(out) == len ? out : "length differs";
}

TEST(tracestate_members_are_checked_and_trimmed)
{
	CHECK_STR(kept("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"), "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
	/* blanks around members and empty members go; blanks inside a value stay */
	CHECK_STR(kept(" a=1 ,\t, b=x y ,"), "a=1,b=x y");
	CHECK_STR(kept(""), "");
	CHECK_STR(kept("ot=th:8;rv:abc"), "ot=th:8;rv:abc");
	CHECK_STR(kept("tenant1@vendor=x,0tenant@v-1=y"), "tenant1@vendor=x,0tenant@v-1=y");
	CHECK_STR(kept("a*/_-9=!\"#$%&'()*+-./09:;<>?@AZ[\\]^_`az{|}~"), "a*/_-9=!\"#$%&'()*+-./09:;<>?@AZ[\\]^_`az{|}~");
	/* what the grammar refuses */
	CHECK_STR(kept("Upper=1"), "!");
	CHECK_STR(kept("9key=1"), "!");	/* a digit starts only a tenant */
	CHECK_STR(kept("a=1,b"), "!");
	CHECK_STR(kept("a="), "!");
	CHECK_STR(kept("a=x=y"), "!");
	CHECK_STR(kept("a=\x01"), "!");
	CHECK_STR(kept("a=\xc3\xa9"), "!");
	CHECK_STR(kept("t@=1"), "!");
	CHECK_STR(kept("t@9sys=1"), "!");
	CHECK_STR(kept("t@systemnamelong=1"), "t@systemnamelong=1");	/* system id: at most 14 */
	CHECK_STR(kept("t@systemnamelonge=1"), "!");
}

/* More than 32 members, or a key twice, make it no tracestate (W3C's test suite). */
TEST(tracestate_limits_of_the_list)
{
	char		text[4096];
	size_t		n = 0;

	for (int i = 0; i < 32; i++)
		n += snprintf(text + n, sizeof(text) - n, "%sk%d=v", i ? "," : "", i);
	CHECK_STR(kept(text), text);
	strcat(text, ",k32=v");
	CHECK_STR(kept(text), "!");
	CHECK_STR(kept("foo=1,bar=2,foo=3"), "!");
	CHECK_STR(kept("t@sys=1,t@other=2,t=3"), "t@sys=1,t@other=2,t=3");
}

/* Past 512 bytes, whole members go: those over 128 bytes first, then from the end. */
TEST(tracestate_is_cut_at_whole_members)
{
	char		large_a[300];
	char		large_b[300];
	char		text[2048];
	char		expected[2048];

	/* two 258-byte members and a small one: the later large one goes, the small one stays */
	snprintf(large_a, sizeof(large_a), "a=%0256d", 1);
	snprintf(large_b, sizeof(large_b), "b=%0256d", 2);
	snprintf(text, sizeof(text), "%s,%s,c=1", large_a, large_b);
	CHECK(strlen(text) > TP_TRACESTATE_MAX);
	snprintf(expected, sizeof(expected), "%s,c=1", large_a);
	CHECK_STR(kept(text), expected);

	/* only small members: from the end, 512 bytes kept whole */
	{
		size_t		n = 0;
		size_t		e = 0;

		for (int i = 0; i < 6; i++)
		{
			char		member[120];

			snprintf(member, sizeof(member), "%sk%d=%0100d", i ? "," : "", i, i);
			n += snprintf(text + n, sizeof(text) - n, "%s", member);
			if (e + strlen(member) <= TP_TRACESTATE_MAX)
				e += snprintf(expected + e, sizeof(expected) - e, "%s", member);
		}
		CHECK_STR(kept(text), expected);
	}
	/* a bad member after the cut still makes it no tracestate */
	strcat(text, ",Bad=1");
	CHECK_STR(kept(text), "!");
}

int
main(void)
{
	RUN(valid_version_00);
	RUN(format_round_trip);
	RUN(invalid_cases_from_the_spec);
	RUN(future_versions);
	RUN(length_is_not_nul_terminated);
	RUN(random_ids_are_nonzero_and_differ);
	RUN(hex_decode_rejects_uppercase_and_junk);
	RUN(tracestate_members_are_checked_and_trimmed);
	RUN(tracestate_limits_of_the_list);
	RUN(tracestate_is_cut_at_whole_members);
	return unit_summary();
}
