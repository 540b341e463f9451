/* Unit tests: traceparent extraction from sqlcommenter comments. */
#include "sqlcommenter.h"
#include "unit.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static tp_comment_result
extract(const char *sql, tp_span_context *ctx)
{
	return tp_sqlcomment_traceparent(sql, strlen(sql), ctx);
}

/* The tracestate the comment that ends sql carries, or a word for its absence. */
static const char *
tracestate_of(const char *sql)
{
	static tp_comment_context c;

	tp_sqlcomment_context(sql, strlen(sql), &c);
	switch (c.state_result)
	{
		case TP_COMMENT_NONE:
			return "none";
		case TP_COMMENT_MALFORMED:
			return "malformed";
		case TP_COMMENT_VALID:
			break;
	}
	return strlen(c.state) == c.state_len ? c.state : "length differs";
}

TEST(tracestate_beside_the_traceparent)
{
	/* sqlcommenter's form: keys sorted, values URL-encoded */
	CHECK_STR(tracestate_of("SELECT 1 /*traceparent='" TP "',tracestate='congo%3Dt61rcWkgMzE%2Crojo%3D00f067aa0ba902b7'*/"),
			  "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
	CHECK_STR(tracestate_of("SELECT 1 /*traceparent='" TP "'*/"), "none");
	CHECK_STR(tracestate_of("SELECT 1 /*tracestate='ot%3Dth%3A8'*/;"), "ot=th:8");
	CHECK_STR(tracestate_of("SELECT 1 /*traceparent='" TP "',tracestate='Bad%3D1'*/"), "malformed");
	CHECK_STR(tracestate_of("SELECT 1 /*traceparent='" TP "',tracestate=a%3D1*/"), "malformed");
	CHECK_STR(tracestate_of("SELECT 1 /*traceparent='" TP "',tracestate=''*/"), "");
	CHECK_STR(tracestate_of("SELECT 1 /* tracestate='a%3D1' */ + 1"), "none");
}

/* One pass finds both keys, in either order, each judged on its own. */
TEST(both_keys_in_one_pass)
{
	tp_comment_context c;
	const char *sql = "SELECT 1 /*a='x',tracestate='ot%3Dth%3A8',traceparent='" TP "'*/";

	tp_sqlcomment_context(sql, strlen(sql), &c);
	CHECK(c.parent_result == TP_COMMENT_VALID);
	CHECK(c.parent.flags == 1);
	CHECK(c.state_result == TP_COMMENT_VALID);
	CHECK_STR(c.state, "ot=th:8");
	sql = "SELECT 1 /*traceparent='00-zz',tracestate='a%3D1'*/";
	tp_sqlcomment_context(sql, strlen(sql), &c);
	CHECK(c.parent_result == TP_COMMENT_MALFORMED);
	CHECK(c.state_result == TP_COMMENT_VALID);
	sql = "SELECT 1 /*traceparent='" TP "'*/";
	tp_sqlcomment_context(sql, strlen(sql), &c);
	CHECK(c.parent_result == TP_COMMENT_VALID);
	CHECK(c.state_result == TP_COMMENT_NONE && c.state_len == 0 && c.state[0] == '\0');
	sql = "SELECT 1";
	tp_sqlcomment_context(sql, strlen(sql), &c);
	CHECK(c.parent_result == TP_COMMENT_NONE && c.state_result == TP_COMMENT_NONE);
}

TEST(appended_comment)
{
	tp_span_context ctx;
	char		hex[17];

	CHECK(extract("SELECT 1 /*traceparent='" TP "'*/", &ctx) == TP_COMMENT_VALID);
	tp_hex_encode(ctx.span_id, 8, hex);
	CHECK_STR(hex, "00f067aa0ba902b7");
	CHECK(ctx.flags == 1);
	/* the comment may be the whole text: the search reaches its first byte */
	CHECK(extract("/*traceparent='" TP "'*/", &ctx) == TP_COMMENT_VALID);
	CHECK(extract("/**/", &ctx) == TP_COMMENT_NONE);
}

TEST(sorted_keys_and_url_encoding)
{
	tp_span_context ctx;

	CHECK(extract("SELECT * FROM t /*action='%2Fparam*d',controller='index',"
				  "db_driver='psycopg2',traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',"
				  "tracestate='congo%3Dt61rcWkgMzE%2Crojo%3D00f067aa0ba902b7'*/", &ctx) == TP_COMMENT_VALID);
	/* The traceparent itself percent-encoded is decoded first. */
	CHECK(extract("SELECT 1 /*traceparent='00%2D4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/",
				  &ctx) == TP_COMMENT_VALID);
}

/* Other keys' values are skipped whatever their length: a route may be long. */
TEST(long_values_of_other_keys)
{
	tp_span_context ctx;
	char		sql[4096];
	char		route[1024];
	char		hex[17];

	memset(route, 'a', 1000);
	route[1000] = '\0';
	snprintf(sql, sizeof(sql), "SELECT 1 /*route='%s',traceparent='" TP "'*/", route);
	CHECK(extract(sql, &ctx) == TP_COMMENT_VALID);
	tp_hex_encode(ctx.span_id, 8, hex);
	CHECK_STR(hex, "00f067aa0ba902b7");
	/* escaped quotes and percent escapes, 400 bytes once decoded */
	memset(route, 0, sizeof(route));
	for (int i = 0; i < 200; i++)
		strcat(route, i % 2 ? "%2Fa" : "\\'b");
	snprintf(sql, sizeof(sql), "SELECT 1 /*action='%s',route='%s',traceparent='" TP "'*/", route, route);
	CHECK(extract(sql, &ctx) == TP_COMMENT_VALID);
	/* unterminated: not a sqlcommenter comment */
	snprintf(sql, sizeof(sql), "SELECT 1 /*route='%s*/", route);
	CHECK(extract(sql, &ctx) == TP_COMMENT_NONE);
}

TEST(no_comment_or_no_key)
{
	tp_span_context ctx;

	CHECK(extract("SELECT 1", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("SELECT 1 /* just a note */", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("SELECT 1 /*route='/x'*/", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("SELECT 1 -- traceparent='" TP "'", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("*/", &ctx) == TP_COMMENT_NONE);
	/* A comment inside the statement is not read; the ending one is. */
	CHECK(extract("SELECT /*traceparent='" TP "'*/ 1", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("SELECT 1 /*traceparent='" TP "'*/ ;\n", &ctx) == TP_COMMENT_VALID);
}

TEST(malformed_values_are_reported)
{
	tp_span_context ctx;

	CHECK(extract("SELECT 1 /*traceparent='00-zz'*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*traceparent='" TP "*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*traceparent='%G0'*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*traceparent='00-00000000000000000000000000000000-00f067aa0ba902b7-01'*/",
				  &ctx) == TP_COMMENT_MALFORMED);
}

TEST(malformed_pairs_of_our_key_are_reported)
{
	tp_span_context ctx;

	/* Not sqlcommenter's key='value', but meant for us: counted, not ignored. */
	CHECK(extract("SELECT 1 /*traceparent=" TP "*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*traceparent=\"" TP "\"*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /* traceparent = '" TP "' */", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*traceparent ='" TP "'*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*traceparent*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*route='/x',traceparent*/", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("SELECT 1 /*traceparent=*/", &ctx) == TP_COMMENT_MALFORMED);
	/* Another key, or the word in prose, is no pair of ours. */
	CHECK(extract("SELECT 1 /*tracestate=x*/", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("SELECT 1 /*traceparents='" TP "'*/", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("SELECT 1 /* no traceparent here */", &ctx) == TP_COMMENT_NONE);
	/* Blanks around the pairs are no fault: newlines as some drivers write them. */
	CHECK(extract("SELECT 1 /*\ntraceparent='" TP "'\n*/", &ctx) == TP_COMMENT_VALID);
}

TEST(last_comment_wins)
{
	tp_span_context ctx;
	char		hex[17];

	CHECK(extract("/*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01'*/ SELECT 1 "
				  "/*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-2222222222222222-01'*/", &ctx) == TP_COMMENT_VALID);
	tp_hex_encode(ctx.span_id, 8, hex);
	CHECK_STR(hex, "2222222222222222");
}

/*
 * A comment opening the statement (leading blanks aside) counts when the
 * one ending it holds no traceparent: some sqlcommenters prepend theirs.
 */
TEST(leading_comment)
{
	tp_span_context ctx;
	tp_comment_context c;
	char		hex[17];
	const char *sql;

	CHECK(extract("/*traceparent='" TP "'*/ SELECT 1", &ctx) == TP_COMMENT_VALID);
	tp_hex_encode(ctx.span_id, 8, hex);
	CHECK_STR(hex, "00f067aa0ba902b7");
	CHECK(extract(" \n/*db_driver='x',traceparent='" TP "'*/SELECT 1;", &ctx) == TP_COMMENT_VALID);
	CHECK(extract("/*traceparent='00-zz'*/ SELECT 1", &ctx) == TP_COMMENT_MALFORMED);
	CHECK(extract("/* list the orders */ SELECT 1", &ctx) == TP_COMMENT_NONE);
	/* comments nest: the pairs are read to the end of the outer one */
	CHECK(extract("/*a='/* b */',traceparent='" TP "'*/ SELECT 1", &ctx) == TP_COMMENT_VALID);
	/* the ending one without a traceparent leaves the leading one */
	CHECK(extract("/*traceparent='" TP "'*/ SELECT 1 /*route='%2Fx'*/", &ctx) == TP_COMMENT_VALID);
	CHECK(extract("/*traceparent='" TP "'*/ SELECT 1 /* a note */", &ctx) == TP_COMMENT_VALID);
	/* the ending one with a traceparent, valid or not, is the one read */
	CHECK(extract("/*traceparent='" TP "'*/ SELECT 1 /*traceparent='00-zz'*/", &ctx) == TP_COMMENT_MALFORMED);
	/* a second comment, or one not first, is not read */
	CHECK(extract("/* x */ /*traceparent='" TP "'*/ SELECT 1", &ctx) == TP_COMMENT_NONE);
	CHECK(extract("-- x\n/*traceparent='" TP "'*/ SELECT 1", &ctx) == TP_COMMENT_NONE);
	/* unterminated within the bytes given: none */
	sql = "/*traceparent='" TP "'*/ SELECT 1";
	CHECK(tp_sqlcomment_traceparent(sql, 20, &ctx) == TP_COMMENT_NONE);
	/* the tracestate goes with the traceparent's comment */
	sql = "/*traceparent='" TP "',tracestate='a%3D1'*/ SELECT 1 /*tracestate='b%3D2'*/";
	tp_sqlcomment_context(sql, strlen(sql), &c);
	CHECK(c.parent_result == TP_COMMENT_VALID && c.state_result == TP_COMMENT_VALID);
	CHECK_STR(c.state, "a=1");
	/* a pair of ours past one of another kind still makes the ending comment the caller's */
	CHECK(extract("/*traceparent='" TP "'*/ SELECT 1 /*action=index,traceparent='" TP "'*/", &ctx) == TP_COMMENT_NONE);
	/* a form feed is a blank, before and after */
	CHECK(extract("\f/*traceparent='" TP "'*/ SELECT 1", &ctx) == TP_COMMENT_VALID);
	CHECK(extract("SELECT 1 /*traceparent='" TP "'*/\f", &ctx) == TP_COMMENT_VALID);
	CHECK(tp_sqlcomment_present("  /**/ SELECT 1", 15));
	CHECK(!tp_sqlcomment_present("SELECT /**/ 1", 13));
}

TEST(length_bounds_the_search)
{
	tp_span_context ctx;
	const char *sql = "SELECT 1 /*traceparent='" TP "'*/";

	/* Cut before the closing marker: no comment in the first len bytes. */
	CHECK(tp_sqlcomment_traceparent(sql, strlen(sql) - 2, &ctx) == TP_COMMENT_NONE);
}

int
main(void)
{
	RUN(appended_comment);
	RUN(tracestate_beside_the_traceparent);
	RUN(both_keys_in_one_pass);
	RUN(sorted_keys_and_url_encoding);
	RUN(long_values_of_other_keys);
	RUN(no_comment_or_no_key);
	RUN(malformed_values_are_reported);
	RUN(malformed_pairs_of_our_key_are_reported);
	RUN(last_comment_wins);
	RUN(leading_comment);
	RUN(length_bounds_the_search);
	return unit_summary();
}
