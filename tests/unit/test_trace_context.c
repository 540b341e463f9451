/* Unit tests: W3C traceparent parsing/formatting and random ids. */
#include "trace_context.h"
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
	return unit_summary();
}
