/*
 * test_json_reader.c - the streaming order-record reader (and the value
 * checks of order_row.c that report through it).
 *
 * Every input is also parsed with the bytes arriving in every possible
 * split, to show that JR_NEED_MORE handling never changes a result or an
 * error position.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_reader.h"
#include "order_row.h"
#include "pg_binary.h"
#include "unit.h"

static char result[1 << 16];

static void
append(const char *fmt, ...)
{
	size_t		n = strlen(result);
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(result + n, sizeof(result) - n, fmt, ap);
	va_end(ap);
}

static void
append_slice(ld_slice s)
{
	size_t		n = strlen(result);

	if (n + s.len + 1 < sizeof(result))
	{
		memcpy(result + n, s.ptr, s.len);
		result[n + s.len] = '\0';
	}
}

/*
 * Parse input as the loader does: records go through order_row_append().
 * The reader sees the first 'first' bytes, then 'step' more on each
 * JR_NEED_MORE; each call gets an exactly sized copy so over-reads show up
 * under valgrind.  Returns "rec;rec;...;END" or "...;ERROR: message".
 */
static const char *
run_chunked(const char *input, size_t len, size_t first, size_t step,
			size_t max_record)
{
	jr_reader	r;
	pgb_buf		out;
	size_t		start = 0;
	size_t		visible = first < len ? first : len;

	result[0] = '\0';
	jr_init(&r);
	if (max_record)
		r.max_record = max_record;
	pgb_buf_init(&out);
	for (int guard = 0; guard < 1000000; guard++)
	{
		size_t		n = visible - start;
		char	   *copy = malloc(n ? n : 1);
		size_t		consumed;
		jr_record	rec;
		jr_result	res;

		memcpy(copy, input + start, n);
		res = jr_next(&r, copy, n, visible == len, &consumed, &rec);
		if (res == JR_RECORD && !order_row_append(&r, &rec, &out))
			res = JR_ERROR;
		if (res == JR_RECORD)
		{
			append_slice(rec.id);
			append("|");
			append_slice(rec.customer_id);
			append("|");
			append_slice(rec.customer_name);
			append("|");
			append_slice(rec.amount);
			append("|");
			append_slice(rec.currency);
			append("|");
			append_slice(rec.created_at);
			append("|");
			for (size_t i = 0; i < rec.ntags; i++)
			{
				append(i ? "," : "");
				append_slice(rec.tags[i]);
			}
			append("|");
			append_slice(rec.attributes);
			append(";");
		}
		free(copy);
		start += consumed;
		if (res == JR_END)
		{
			append("END");
			break;
		}
		if (res == JR_ERROR)
		{
			char		msg[1024];

			jr_format_error(&r.error, "t.json", msg, sizeof(msg));
			append("ERROR: %s", msg);
			break;
		}
		if (res == JR_NEED_MORE)
		{
			if (visible == len)
			{
				append("BUG: NEED_MORE at eof");
				break;
			}
			visible = visible + step < len ? visible + step : len;
		}
	}
	jr_free(&r);
	pgb_buf_free(&out);
	return result;
}

/* Parse whole, then check every split gives the same answer. */
static char expected_result[sizeof(result)];
static int	split_mismatches;

static const char *
run_len(const char *input, size_t len)
{
	run_chunked(input, len, len, 1, 0);
	memcpy(expected_result, result, sizeof(result));
	for (size_t k = 0; k <= len; k++)
	{
		run_chunked(input, len, k, len, 0);
		if (strcmp(result, expected_result) != 0)
		{
			if (split_mismatches++ < 5)
				printf("  split at %zu changes the result:\n    %s\n    %s\n", k, expected_result, result);
		}
	}
	for (size_t step = 1; step <= 3; step++)
	{
		run_chunked(input, len, 0, step, 0);
		if (strcmp(result, expected_result) != 0 && split_mismatches++ < 5)
			printf("  step %zu changes the result:\n    %s\n    %s\n", step, expected_result, result);
	}
	memcpy(result, expected_result, sizeof(result));
	return result;
}

static const char *
run(const char *input)
{
	return run_len(input, strlen(input));
}

/* A record with the given values (NULL: a valid default). */
static char *
record(const char *id, const char *name, const char *amount, const char *currency,
	   const char *created_at, const char *tags, const char *attributes)
{
	static char buf[8][16384];
	static int	next;
	char	   *b = buf[next++ % 8];

	snprintf(b, sizeof(buf[0]),
			 "{\"id\":%s,\"customer_id\":7,\"customer_name\":%s,\"amount\":%s,"
			 "\"currency\":%s,\"created_at\":%s,\"tags\":%s,\"attributes\":%s}",
			 id ? id : "1", name ? name : "\"Ann\"", amount ? amount : "12.50",
			 currency ? currency : "\"EUR\"",
			 created_at ? created_at : "\"2026-03-14T09:26:53Z\"",
			 tags ? tags : "[\"a\"]", attributes ? attributes : "{}");
	return b;
}

/* "line L, column C, byte offset O" of the nth (1-based) needle in input. */
static const char *
where(const char *input, const char *needle, int nth)
{
	static char buf[128];
	const char *p = input;
	const char *line_start = input;
	int			line = 1;

	if (needle == NULL)
		p = input + strlen(input) + (nth - 1);	/* nth - 1: an offset from the end */
	else
		for (int i = 0; i < nth; i++)
		{
			p = strstr(i ? p + 1 : p, needle);
			if (p == NULL)
				return "needle not found";
		}
	for (const char *q = input; q < p; q++)
		if (*q == '\n')
		{
			line++;
			line_start = q + 1;
		}
	snprintf(buf, sizeof(buf), "line %d, column %d, byte offset %d",
			 line, (int) (p - line_start) + 1, (int) (p - input));
	return buf;
}

static char *
cat(const char *a, const char *b, const char *c)
{
	static char buf[4][16384];
	static int	next;
	char	   *o = buf[next++ % 4];

	snprintf(o, sizeof(buf[0]), "%s%s%s", a, b ? b : "", c ? c : "");
	return o;
}

static void
check_error(const char *input, int record_no, const char *needle, int nth,
			const char *message, int line)
{
	char		expected[2048];

	if (record_no > 0)
		snprintf(expected, sizeof(expected), "t.json: record %d (%s): %s", record_no,
				 where(input, needle, nth), message);
	else
		snprintf(expected, sizeof(expected), "t.json: %s: %s", where(input, needle, nth), message);
	run(input);
	{
		const char *e = strstr(result, "ERROR: ");

		unit_checks++;
		if (e == NULL || strcmp(e + 7, expected) != 0)
		{
			unit_failures++;
			printf("  line %d:\n    got      %s\n    expected %s\n", line, e ? e + 7 : result, expected);
		}
	}
}

#define ERR(input, rec, needle, nth, message) \
	check_error(input, rec, needle, nth, message, __LINE__)

/* An error at the end of the input. */
#define ERR_END(input, rec, message) \
	check_error(input, rec, NULL, 1, message, __LINE__)

/* ---- valid input ---- */

TEST(array_layout)
{
	const char *in = "[\n"
		"{\"id\":1,\"customer_id\":48213,\"customer_name\":\"Zo\xc3\xab \\\"Ace\\\" O'Brien\","
		"\"amount\":1234.56,\"currency\":\"EUR\",\"created_at\":\"2026-03-14T09:26:53.589793+01:00\","
		"\"tags\":[\"gift\",\"priority\"],\"attributes\":{\"channel\":\"web\",\"items\":3,"
		"\"gift_wrap\":true,\"coupon\":null,\"note\":\"Leave at door\\nRing twice\"}},\n"
		"{\"attributes\":{},\"tags\":[],\"created_at\":\"2024-02-29T23:59:59.5-05:30\","
		"\"currency\":\"JPY\",\"amount\":-0.01,\"customer_name\":\"\",\"customer_id\":-9223372036854775808,"
		"\"id\":9223372036854775807}\n"
		"]\n";

	CHECK_STR(run(in),
			  "1|48213|Zo\xc3\xab \"Ace\" O'Brien|1234.56|EUR|2026-03-14T09:26:53.589793+01:00|gift,priority|"
			  "{\"channel\":\"web\",\"items\":3,\"gift_wrap\":true,\"coupon\":null,\"note\":\"Leave at door\\nRing twice\"};"
			  "9223372036854775807|-9223372036854775808||-0.01|JPY|2024-02-29T23:59:59.5-05:30||{};END");
	CHECK(split_mismatches == 0);
}

TEST(array_layout_compact_and_spaced)
{
	char		in[8192];

	snprintf(in, sizeof(in), "[%s,%s]", record("1", NULL, NULL, NULL, NULL, NULL, NULL),
			 record("2", NULL, NULL, NULL, NULL, NULL, NULL));
	CHECK_STR(run(in), "1|7|Ann|12.50|EUR|2026-03-14T09:26:53Z|a|{};2|7|Ann|12.50|EUR|2026-03-14T09:26:53Z|a|{};END");
	CHECK_STR(run(" \t\r\n[ \n{ \"id\" : 5 , \"customer_id\":7,\"customer_name\":\"x\",\"amount\":0,"
				  "\"currency\":\"USD\",\"created_at\":\"2000-01-01t00:00:00z\",\"tags\":[ \"a\" , \"b\" ],"
				  "\"attributes\":{ \"k\" : [ 1 , { } , [ ] ] } } \n ] \n\n"),
			  "5|7|x|0|USD|2000-01-01t00:00:00z|a,b|{ \"k\" : [ 1 , { } , [ ] ] };END");
	CHECK(split_mismatches == 0);
}

TEST(ndjson_layout)
{
	char		in[8192];

	snprintf(in, sizeof(in), "%s\n%s\r\n\n  \n%s", record("1", NULL, NULL, NULL, NULL, NULL, NULL),
			 record("2", NULL, NULL, NULL, NULL, NULL, NULL), record("3", NULL, NULL, NULL, NULL, NULL, NULL));
	CHECK_STR(run(in), "1|7|Ann|12.50|EUR|2026-03-14T09:26:53Z|a|{};2|7|Ann|12.50|EUR|2026-03-14T09:26:53Z|a|{};"
			  "3|7|Ann|12.50|EUR|2026-03-14T09:26:53Z|a|{};END");
	strcat(in, "\n");
	CHECK(strstr(run(in), ";END") != NULL);
	CHECK(split_mismatches == 0);
}

TEST(byte_order_mark)
{
	char		in[8192];

	snprintf(in, sizeof(in), "\xef\xbb\xbf[%s]", record("1", NULL, NULL, NULL, NULL, NULL, NULL));
	CHECK_STR(run(in), "1|7|Ann|12.50|EUR|2026-03-14T09:26:53Z|a|{};END");
	snprintf(in, sizeof(in), "\xef\xbb\xbf%s\n", record("1", NULL, NULL, NULL, NULL, NULL, NULL));
	CHECK_STR(run(in), "1|7|Ann|12.50|EUR|2026-03-14T09:26:53Z|a|{};END");
	/* columns count from after the mark; offsets include it */
	CHECK_STR(strstr(run("\xef\xbb\xbfx"), "ERROR"),
			  "ERROR: t.json: line 1, column 1, byte offset 3: expected '[' (a JSON array of records) or '{' (ndjson records) at the start, got 'x'");
	/* a mark anywhere else is just a bad byte */
	CHECK_STR(strstr(run(" \xef\xbb\xbf[]"), "ERROR"),
			  "ERROR: t.json: line 1, column 2, byte offset 1: expected '[' (a JSON array of records) or '{' (ndjson records) at the start, got byte 0xef");
	CHECK_STR(run("\xef\xbb\xbf"), "ERROR: t.json: the file holds only blanks (no records)");
	CHECK_STR(run("\xef\xbb"), "ERROR: t.json: line 1, column 1, byte offset 0: expected '[' (a JSON array of records) or '{' (ndjson records) at the start, got byte 0xef");
	CHECK(split_mismatches == 0);
}

TEST(escapes_and_utf8)
{
	char		in[8192];

	snprintf(in, sizeof(in), "[%s]",
			 record("1", "\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t e\\u00e9\\u00C9 euro\\u20ac smile\\ud83d\\ude00 raw\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
					NULL, "\"\\u0045UR\"", NULL, "[\"\\u00e9\",\"x\\ty\",\"\"]",
					"{\"k\\u0000\":1}"));
	/* \u0000 is refused even inside attributes (jsonb cannot store it) */
	CHECK(strstr(run(in), "\\u0000 (NUL) is not allowed") != NULL);

	snprintf(in, sizeof(in), "[%s]",
			 record("1", "\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t e\\u00e9\\u00C9 euro\\u20ac smile\\ud83d\\ude00 raw\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
					NULL, "\"\\u0045UR\"", NULL, "[\"\\u00e9\",\"x\\ty\",\"\"]",
					"{\"\\ud83d\\ude00\":\"\\u00e9\xc3\xa9\"}"));
	CHECK_STR(run(in),
			  "1|7|q\" b\\ s/ \b\f\n\r\t e\xc3\xa9\xc3\x89 euro\xe2\x82\xac smile\xf0\x9f\x98\x80 raw\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|"
			  "12.50|EUR|2026-03-14T09:26:53Z|\xc3\xa9,x\ty,|{\"\\ud83d\\ude00\":\"\\u00e9\xc3\xa9\"};END");
	/* keys may be escaped too */
	CHECK_STR(run("{\"\\u0069d\":3,\"customer_id\":7,\"customer_name\":\"x\",\"amount\":1,\"currency\":\"USD\","
				  "\"created_at\":\"2000-01-01T00:00:00Z\",\"tags\":[],\"attributes\":{}}"),
			  "3|7|x|1|USD|2000-01-01T00:00:00Z||{};END");
	/* the boundaries of each UTF-8 length */
	snprintf(in, sizeof(in), "[%s]", record("1", "\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"",
											NULL, NULL, NULL, NULL, NULL));
	CHECK_STR(run(in), "1|7|\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf|12.50|EUR|2026-03-14T09:26:53Z|a|{};END");
	CHECK(split_mismatches == 0);
}

TEST(long_strings)
{
	/* long enough for the 8-byte fast path, with escapes at every alignment */
	static char in[65536];
	char		name[4096];
	char		expect_name[4096];
	size_t		n = 0;
	size_t		e = 0;

	name[n++] = '"';
	for (int i = 0; i < 300; i++)
	{
		if (i % 13 == 5)
		{
			memcpy(name + n, "\\n", 2);
			n += 2;
			expect_name[e++] = '\n';
		}
		else if (i % 17 == 3)
		{
			memcpy(name + n, "\xc3\xa9", 2);
			n += 2;
			memcpy(expect_name + e, "\xc3\xa9", 2);
			e += 2;
		}
		else
		{
			name[n++] = (char) ('a' + i % 26);
			expect_name[e++] = (char) ('a' + i % 26);
		}
	}
	name[n++] = '"';
	name[n] = '\0';
	expect_name[e] = '\0';
	snprintf(in, sizeof(in), "[%s]", record("1", name, NULL, NULL, NULL, NULL, NULL));
	run(in);
	CHECK(strstr(result, expect_name) != NULL);
	CHECK(strstr(result, ";END") != NULL);
	CHECK(split_mismatches == 0);
}

/* ---- errors: top level ---- */

TEST(empty_inputs)
{
	CHECK_STR(run(""), "ERROR: t.json: the file is empty (no records)");
	CHECK_STR(run(" \n\t\r\n"), "ERROR: t.json: the file holds only blanks (no records)");
	ERR("[]", 0, "]", 1, "no records: the array is empty");
	ERR("[ \n ]\n", 0, "]", 1, "no records: the array is empty");
	ERR("x", 0, "x", 1, "expected '[' (a JSON array of records) or '{' (ndjson records) at the start, got 'x'");
	ERR("\n\n  \"a\"", 0, "\"", 1, "expected '[' (a JSON array of records) or '{' (ndjson records) at the start, got '\"'");
	CHECK(split_mismatches == 0);
}

TEST(array_structure_errors)
{
	char	   *r1 = record("1", NULL, NULL, NULL, NULL, NULL, NULL);
	char	   *in;

	CHECK(strlen(r1) == 143);
	in = cat("[", r1, "");
	ERR_END(in, 0, "unexpected end of input after record 1: expected ',' or ']' (truncated file?)");
	CHECK(strstr(result, "line 1, column 145, byte offset 144:") != NULL);
	in = cat("[", r1, ",\n");
	ERR_END(in, 0, "unexpected end of input after ',': expected a record (truncated file?)");
	CHECK(strstr(result, "line 2, column 1, byte offset 146:") != NULL);
	in = cat("[", r1, "]x");
	ERR(in, 0, "x", 1, "unexpected data after the closing ']' of the array: 'x'");
	in = cat("[", r1, "] []");
	ERR(in, 0, "[]", 1, "unexpected data after the closing ']' of the array: '['");
	CHECK(strstr(result, "line 1, column 147, byte offset 146:") != NULL);
	in = cat("[", r1, ",]");
	ERR(in, 0, "]", 2, "trailing comma before ']'");
	CHECK(strstr(result, "line 1, column 146, byte offset 145:") != NULL);
	in = cat("[", r1, " {");
	ERR(in, 0, NULL, 0, "expected ',' or ']' after record 1, got '{'");
	CHECK(strstr(result, "line 1, column 146, byte offset 145:") != NULL);
	/* a value where a record belongs is that record, wrong */
	ERR("[1]", 1, "1", 1, "expected a record (a JSON object), got 1");
	ERR("[\n  \"x\"]", 1, "\"", 1, "expected a record (a JSON object), got \"x\"");
	in = cat("[", r1, ",null]");
	ERR(in, 2, "null", 1, "expected a record (a JSON object), got null");
	in = cat("[", r1, ",\n[1,\n2]]");
	ERR(in, 2, "[1", 1, "expected a record (a JSON object), got [1,\\n2]");
	ERR("[x]", 1, "x", 1, "expected a JSON value, got 'x'");
	ERR("[[1,}]", 1, "}", 1, "expected a JSON value, got '}'");
	ERR_END("[", 0, "unexpected end of input after '[' (truncated file?)");
	CHECK_STR(run("["), "ERROR: t.json: line 1, column 2, byte offset 1: unexpected end of input after '[' (truncated file?)");
	CHECK(split_mismatches == 0);
}

TEST(ndjson_structure_errors)
{
	char	   *r1 = record("1", NULL, NULL, NULL, NULL, NULL, NULL);
	char	   *r2 = record("2", NULL, NULL, NULL, NULL, NULL, NULL);
	char	   *in;

	in = cat(r1, " ", r2);
	ERR(in, 0, "{", 3, "expected a line break after record 1 (ndjson holds one record per line), got '{'");
	CHECK(strstr(result, "line 1, column 145, byte offset 144:") != NULL);
	in = cat(r1, "\n[]", "");
	ERR(in, 2, "[", 2, "expected a record (a JSON object), got []");
	CHECK(strstr(result, "record 2 (line 2, column 1, byte offset 144):") != NULL);
	in = cat(r1, "\n\"a\nb\"", "");
	ERR(in, 2, "\nb", 1, "control character U+000A must be escaped inside a string");
	in = cat(r1, ",\n", r2);
	ERR(in, 0, ",\n", 1, "expected a line break after record 1 (ndjson holds one record per line), got ','");
	ERR("{\"id\":1,\n\"customer_id\":2}", 1, "\n", 1, "line break inside a record (ndjson holds one record per line)");
	/* a truncated last line */
	in = cat(r1, "\n{\"id\":2,\"custo", "");
	ERR_END(in, 2, "unexpected end of input inside the record (truncated file?)");
	CHECK(strstr(result, "record 2 (line 2, column 15, byte offset 158)") != NULL);
	CHECK(split_mismatches == 0);
}

/* ---- errors: record shape ---- */

TEST(record_shape_errors)
{
	char		in[8192];

	ERR("[{\"id\":1,\"customer_id\":7}]", 1, "}", 1, "missing key \"customer_name\"");
	ERR("[{}]", 1, "}", 1, "missing key \"id\"");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{},\"extra\":1"));
	ERR(in, 1, "\"extra\"", 1, "unknown key \"extra\" (allowed: id, customer_id, customer_name, amount, currency, created_at, tags, attributes)");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{},\"id\":2"));
	ERR(in, 1, "\"id\"", 2, "duplicate key \"id\"");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{},"));
	ERR(in, 1, "}]", 1, "trailing comma before '}'");
	ERR("[{\"id\" 1}]", 1, "1", 1, "expected ':' after the key \"id\", got '1'");
	ERR("[{\"id\":1 \"customer_id\":2}]", 1, "\"customer_id\"", 1, "expected ',' or '}' after the value of \"id\", got '\"'");
	ERR("[{id:1}]", 1, "id", 1, "expected a key (a string), got 'i'");
	ERR("[{\"id\":1,}]", 1, "}", 1, "trailing comma before '}'");
	ERR("[{\"id\":01}]", 1, "01", 1, "\"id\": invalid number: leading zeros are not allowed");
	ERR("[{\"id\":-x}]", 1, "-x", 1, "\"id\": invalid number: expected a digit after '-', got 'x'");
	ERR("[{\"id\":1.}]", 1, "1.", 1, "\"id\": invalid number: expected a digit after '.', got '}'");
	ERR("[{\"id\":1e+}]", 1, "1e", 1, "\"id\": invalid number: expected a digit in the exponent, got '}'");
	ERR("[{\"id\":1x}]", 1, "x", 1, "expected ',' or '}' after the value of \"id\", got 'x'");
	CHECK(split_mismatches == 0);
}

TEST(type_errors)
{
	char		in[8192];

	snprintf(in, sizeof(in), "[%s]", record("\"1\"", NULL, NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\"1\"", 1, "\"id\": expected an integer, got \"1\"");
	snprintf(in, sizeof(in), "[%s]", record("1", "5", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "5", 1, "\"customer_name\": expected a string, got 5");
	snprintf(in, sizeof(in), "[%s]", record("1", "null", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "null", 1, "\"customer_name\": expected a string, got null");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, "\"1.00\"", NULL, NULL, NULL, NULL));
	ERR(in, 1, "\"1.00\"", 1, "\"amount\": expected a number, got \"1.00\"");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, "\"gift\"", NULL));
	ERR(in, 1, "\"gift\"", 1, "\"tags\": expected an array of strings, got \"gift\"");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, "[\"a\",2]", NULL));
	ERR(in, 1, "2]", 1, "\"tags\": element 2 must be a string, got 2");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, "[null]", NULL));
	ERR(in, 1, "null", 1, "\"tags\": element 1 must be a string, got null");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, "[\"a\",]", NULL));
	ERR(in, 1, "]", 1, "\"tags\": trailing comma before ']'");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, "[\"a\" \"b\"]", NULL));
	ERR(in, 1, "\"b\"", 1, "\"tags\": expected ',' or ']' after element 1, got '\"'");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "[1,2]"));
	ERR(in, 1, "[1,2]", 1, "\"attributes\": expected an object, got [1,2]");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "null"));
	ERR(in, 1, "null", 1, "\"attributes\": expected an object, got null");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL,
											"\"a very long string that will not be shown in full, no\""));
	ERR(in, 1, "\"a very", 1, "\"attributes\": expected an object, got \"a very long string that will not be sho...");
	CHECK(split_mismatches == 0);
}

TEST(attributes_errors)
{
	char		in[8192];

	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":[1,]}"));
	ERR(in, 1, "]}", 1, "\"attributes\": trailing comma before ']'");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":1,}"));
	ERR(in, 1, "}}", 1, "\"attributes\": trailing comma before '}'");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\" 1}"));
	ERR(in, 1, "1}", 1, "\"attributes\": expected ':' after an object key, got '1'");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{1:2}"));
	ERR(in, 1, "1:2", 1, "\"attributes\": expected a key (a string) in an object, got '1'");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":tru}"));
	ERR(in, 1, "tru", 1, "\"attributes\": invalid literal: expected true");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":nul}"));
	ERR(in, 1, "nul", 1, "\"attributes\": invalid literal: expected null");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":[1 2]}"));
	ERR(in, 1, "2]", 1, "\"attributes\": expected ',' or ']', got '2'");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":'x'}"));
	ERR(in, 1, "'x'", 1, "\"attributes\": expected a JSON value, got '''");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":1e131072}"));
	ERR(in, 1, "1e131072", 1, "\"attributes\": number 1e131072 is outside the range of PostgreSQL's numeric type");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":0.0e-16383}"));
	ERR(in, 1, "0.0e", 1, "\"attributes\": number 0.0e-16383 is outside the range of PostgreSQL's numeric type");
	/* numeric_in's exponent limit holds for a zero too */
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":0e1073741823}"));
	ERR(in, 1, "0e1073741823", 1, "\"attributes\": number 0e1073741823 is outside the range of PostgreSQL's numeric type");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":-0.0E+10737418220}"));
	ERR(in, 1, "-0.0E", 1, "\"attributes\": number -0.0E+10737418220 is outside the range of PostgreSQL's numeric type");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":0e99999999999999999999}"));
	ERR(in, 1, "0e9999", 1, "\"attributes\": number 0e99999999999999999999 is outside the range of PostgreSQL's numeric type");
	/* the largest and smallest that still fit */
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL,
											"{\"a\":1e131071,\"b\":-9.9e-16382,\"c\":0e16383,\"d\":12345.6e-16379,"
											"\"e\":0e1073741822}"));
	CHECK(strstr(run(in), ";END") != NULL);
	CHECK(split_mismatches == 0);
}

/* {"k":[[...]]} nested depth levels deep in all (attributes is level 1) */
static const char *
nested_attributes(int depth)
{
	static char attrs[2 * JR_MAX_DEPTH + 64];
	size_t		n = 0;

	memcpy(attrs, "{\"k\":", 5);
	n = 5;
	for (int i = 1; i < depth; i++)
		attrs[n++] = '[';
	for (int i = 1; i < depth; i++)
		attrs[n++] = ']';
	attrs[n++] = '}';
	attrs[n] = '\0';
	return attrs;
}

TEST(nesting_limit)
{
	static char in[2 * JR_MAX_DEPTH + 4096];

	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, nested_attributes(JR_MAX_DEPTH)));
	CHECK(strstr(run_chunked(in, strlen(in), strlen(in), 1, 0), ";END") != NULL);
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, nested_attributes(JR_MAX_DEPTH + 1)));
	run_chunked(in, strlen(in), strlen(in), 1, 0);
	CHECK(strstr(result, "\"attributes\": nesting deeper than 4096 levels") != NULL);
	/* the error points at the first bracket too many */
	CHECK(strstr(result, "byte offset 4241)") != NULL);
}

TEST(string_errors)
{
	char		in[8192];

	snprintf(in, sizeof(in), "[%s]", record("1", "\"a\xff\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\xff", 1, "\"customer_name\": invalid UTF-8: byte cannot start a sequence 0xff");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"a\xc3(\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\xc3", 1, "\"customer_name\": invalid UTF-8: malformed sequence 0xc3 0x28");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"\xc0\xaf\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\xc0", 1, "\"customer_name\": invalid UTF-8: byte cannot start a sequence 0xc0");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"\xe0\x80\xaf\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\xe0", 1, "\"customer_name\": invalid UTF-8: malformed sequence 0xe0 0x80");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"\xed\xa0\x80\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\xed", 1, "\"customer_name\": invalid UTF-8: malformed sequence 0xed 0xa0");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"\xf4\x90\x80\x80\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\xf4", 1, "\"customer_name\": invalid UTF-8: malformed sequence 0xf4 0x90");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"\xf0\x9f\x98\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\xf0", 1, "\"customer_name\": invalid UTF-8: malformed sequence 0xf0 0x9f 0x98 0x22");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, "[\"\xf8\"]", NULL));
	ERR(in, 1, "\xf8", 1, "\"tags\": invalid UTF-8: byte cannot start a sequence 0xf8");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"\x80\":1}"));
	ERR(in, 1, "\x80", 1, "\"attributes\": invalid UTF-8: byte cannot start a sequence 0x80");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"line\nbreak\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\nbreak", 1, "\"customer_name\": control character U+000A must be escaped inside a string");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"tab\there\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\there", 1, "\"customer_name\": control character U+0009 must be escaped inside a string");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"x\\ud800\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\ud800", 1, "\"customer_name\": lone high surrogate \\uD800 (it must be followed by a \\uDC00-\\uDFFF escape)");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"x\\ud800\\n\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\ud800", 1, "\"customer_name\": lone high surrogate \\uD800 (it must be followed by a \\uDC00-\\uDFFF escape)");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"x\\uD83D\\u0041\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\uD83D", 1, "\"customer_name\": lone high surrogate \\uD83D (followed by \\u0041, not by a \\uDC00-\\uDFFF escape)");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"x\\ud83d\\ud83d\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\ud83d", 1, "\"customer_name\": lone high surrogate \\uD83D (followed by \\uD83D, not by a \\uDC00-\\uDFFF escape)");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"\\udc00x\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\udc00", 1, "\"customer_name\": lone low surrogate \\uDC00 (a low surrogate must follow a high one)");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, NULL, NULL, "{\"a\":\"\\uDFFF\"}"));
	ERR(in, 1, "\\uDFFF", 1, "\"attributes\": lone low surrogate \\uDFFF (a low surrogate must follow a high one)");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"a\\u0000b\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\u0000", 1, "\"customer_name\": \\u0000 (NUL) is not allowed: PostgreSQL cannot store it");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"a\\u12g4\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\u12g4", 1, "\"customer_name\": invalid escape: \\u must be followed by 4 hex digits");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"a\\x\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\x", 1, "\"customer_name\": invalid escape: '\\' followed by 'x'");
	snprintf(in, sizeof(in), "[%s]", record("1", "\"a\\'\"", NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "\\'", 1, "\"customer_name\": invalid escape: '\\' followed by '''");
	ERR("[{\"na\xffme\":1}]", 1, "\xff", 1, "invalid UTF-8: byte cannot start a sequence 0xff");
	ERR_END("[{\"id\":1,\"customer_id\":2,\"customer_name\":\"abc", 1, "\"customer_name\": unexpected end of input inside the record (truncated file?)");
	/* the position of a truncation is the end of the input */
	CHECK(strstr(result, "(line 1, column 46, byte offset 45)") != NULL);
	CHECK(split_mismatches == 0);
}

/* ---- errors found by order_row.c, positioned at the value ---- */

TEST(value_errors)
{
	char		in[8192];

	snprintf(in, sizeof(in), "[\n%s,\n%s\n]", record("1", NULL, NULL, NULL, NULL, NULL, NULL),
			 record("2", NULL, "1.234", NULL, NULL, NULL, NULL));
	ERR(in, 2, "1.234", 1, "\"amount\": expected a decimal number with at most 2 fraction digits, got 1.234");
	CHECK(strstr(result, "record 2 (line 3, column 56, byte offset 202)") != NULL);
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, "1e3", NULL, NULL, NULL, NULL));
	ERR(in, 1, "1e3", 1, "\"amount\": expected a decimal number without an exponent, got 1e3");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, "12345678901", NULL, NULL, NULL, NULL));
	ERR(in, 1, "12345678901", 1, "\"amount\": expected at most 10 digits before the decimal point (numeric(12,2)), got 12345678901");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, "-9999999999.99", NULL, NULL, NULL, NULL));
	CHECK(strstr(run(in), ";END") != NULL);
	snprintf(in, sizeof(in), "[%s]", record("1.5", NULL, NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "1.5", 1, "\"id\": expected an integer, got 1.5");
	snprintf(in, sizeof(in), "[%s]", record("1e2", NULL, NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "1e2", 1, "\"id\": expected an integer, got 1e2");
	snprintf(in, sizeof(in), "[%s]", record("9223372036854775808", NULL, NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "9223372036854775808", 1, "\"id\": 9223372036854775808 is out of range for bigint (a 64-bit signed integer)");
	snprintf(in, sizeof(in), "[%s]", record("-9223372036854775809", NULL, NULL, NULL, NULL, NULL, NULL));
	ERR(in, 1, "-9223372036854775809", 1, "\"id\": -9223372036854775809 is out of range for bigint (a 64-bit signed integer)");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, "\"eur\"", NULL, NULL, NULL));
	ERR(in, 1, "\"eur\"", 1, "\"currency\": expected 3 uppercase ASCII letters (ISO 4217), got \"eur\"");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, "\"EURO\"", NULL, NULL, NULL));
	ERR(in, 1, "\"EURO\"", 1, "\"currency\": expected 3 uppercase ASCII letters (ISO 4217), got \"EURO\"");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, "\"E\\nR\"", NULL, NULL, NULL));
	ERR(in, 1, "\"E\\n", 1, "\"currency\": expected 3 uppercase ASCII letters (ISO 4217), got \"E\\nR\"");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, "\"2023-02-29T00:00:00Z\"", NULL, NULL));
	ERR(in, 1, "\"2023-02-29", 1, "\"created_at\": invalid RFC 3339 date-time \"2023-02-29T00:00:00Z\": day 29 is out of range for February 2023 (01-28)");
	snprintf(in, sizeof(in), "[%s]", record("1", NULL, NULL, NULL, "\"2024-02-29T00:00:00\"", NULL, NULL));
	ERR(in, 1, "\"2024-02-29", 1, "\"created_at\": invalid RFC 3339 date-time \"2024-02-29T00:00:00\": missing time zone offset: expected Z, +hh:mm or -hh:mm after the time");
	CHECK(split_mismatches == 0);
}

/*
 * An excerpt in a message holds whole characters: control bytes grow six
 * times as \u escapes, and the room they fill must not end inside the
 * UTF-8 character after them (the fuzzer found a message cut so).
 */
TEST(excerpt_keeps_whole_characters)
{
	const char	text[] = "chan\x7f\x7f?\x7f\x7f\x7f\x7f\x7f" "cuscuZo\xe1\x97\xab tomer";
	char		out[64];
	size_t		len;

	jr_excerpt(text, sizeof(text) - 1, out, sizeof(out));
	len = strlen(out);
	CHECK(len >= 3 && strcmp(out + len - 3, "...") == 0);
	CHECK(strstr(out, "\xe1") == NULL || strstr(out, "\xe1\x97\xab") != NULL);
	CHECK(strncmp(out, "chan\\u007f\\u007f?", 17) == 0);
	/* Room for everything: the text whole, no "...". */
	jr_excerpt("caf\xc3\xa9 \t", 7, out, sizeof(out));
	CHECK_STR(out, "caf\xc3\xa9 \\t");
}

TEST(record_size_limit)
{
	char		in[8192];
	const char *r1 = record("1", NULL, NULL, NULL, NULL, NULL, NULL);
	size_t		len = strlen(r1);

	snprintf(in, sizeof(in), "[%s,\n%s]", r1, record("2", "\"a much longer name that pushes it over\"", NULL, NULL, NULL, NULL, NULL));
	/* the limit holds whatever the buffer splits */
	for (size_t k = 0; k <= strlen(in); k += 7)
	{
		run_chunked(in, strlen(in), k, 5, len + 5);
		char		expect[256];

		snprintf(expect, sizeof(expect), "ERROR: t.json: record 2 (line 2, column 1, byte offset %zu): the record is larger than %zu bytes (the limit)",
				 len + 3, len + 5);
		CHECK_STR(strstr(result, "ERROR"), expect);
	}
	/* exactly at the limit is fine */
	run_chunked(in, strlen(in), strlen(in), 1, len);
	CHECK(strstr(result, "1|7|Ann") == result);
}

int
main(void)
{
	RUN(array_layout);
	RUN(array_layout_compact_and_spaced);
	RUN(ndjson_layout);
	RUN(byte_order_mark);
	RUN(escapes_and_utf8);
	RUN(long_strings);
	RUN(empty_inputs);
	RUN(array_structure_errors);
	RUN(ndjson_structure_errors);
	RUN(record_shape_errors);
	RUN(type_errors);
	RUN(attributes_errors);
	RUN(nesting_limit);
	RUN(string_errors);
	RUN(value_errors);
	RUN(excerpt_keeps_whole_characters);
	RUN(record_size_limit);
	return unit_summary();
}
