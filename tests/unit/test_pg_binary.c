/*
 * test_pg_binary.c - binary COPY encodings and the text parsers behind
 * them.  Expected timestamps were computed independently (Python's
 * datetime, and PostgreSQL itself for years before 1).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pg_binary.h"
#include "unit.h"

/* Hex of buf's bytes from 'from', for comparing encodings. */
static const char *
hex(const pgb_buf *buf, size_t from)
{
	static char out[4096];
	size_t		o = 0;

	for (size_t i = from; i < buf->len && o + 3 < sizeof(out); i++)
		o += (size_t) snprintf(out + o, sizeof(out) - o, "%02x", (unsigned char) buf->data[i]);
	out[o] = '\0';
	return out;
}

/* "ndigits weight sign dscale d1 d2 ..." or the failure status */
static const char *
numeric(const char *text, int max_int, int max_frac)
{
	static char out[512];
	pgb_numeric n;
	pgb_numeric_status st;
	size_t		o;

	memset(&n, 0x55, sizeof(n));
	st = pgb_numeric_from_text(text, strlen(text), max_int, max_frac, &n);
	switch (st)
	{
		case PGB_NUMERIC_OK:
			break;
		case PGB_NUMERIC_SYNTAX:
			return "SYNTAX";
		case PGB_NUMERIC_EXPONENT:
			return "EXPONENT";
		case PGB_NUMERIC_FRACTION_DIGITS:
			return "FRACTION";
		case PGB_NUMERIC_INTEGER_DIGITS:
			return "INTEGER";
	}
	o = (size_t) snprintf(out, sizeof(out), "%d %d %s %d", n.ndigits, n.weight,
						  n.sign == PGB_NUMERIC_NEG ? "-" : n.sign == PGB_NUMERIC_POS ? "+" : "?",
						  n.dscale);
	for (int i = 0; i < n.ndigits; i++)
		o += (size_t) snprintf(out + o, sizeof(out) - o, " %d", n.digits[i]);
	return out;
}

TEST(numeric_values)
{
	CHECK_STR(numeric("0", 10, 2), "0 0 + 0");
	CHECK_STR(numeric("0.00", 10, 2), "0 0 + 2");
	CHECK_STR(numeric("-0.00", 10, 2), "0 0 + 2");
	CHECK_STR(numeric("-0", 10, 2), "0 0 + 0");
	CHECK_STR(numeric("0.01", 10, 2), "1 -1 + 2 100");
	CHECK_STR(numeric("0.5", 10, 2), "1 -1 + 1 5000");
	CHECK_STR(numeric("-12.30", 10, 2), "2 0 - 2 12 3000");
	CHECK_STR(numeric("12.3", 10, 2), "2 0 + 1 12 3000");
	CHECK_STR(numeric("1", 10, 2), "1 0 + 0 1");
	CHECK_STR(numeric("9999", 10, 2), "1 0 + 0 9999");
	CHECK_STR(numeric("10000", 10, 2), "1 1 + 0 1");
	CHECK_STR(numeric("10000.00", 10, 2), "1 1 + 2 1");
	CHECK_STR(numeric("99999999.99", 10, 2), "3 1 + 2 9999 9999 9900");
	CHECK_STR(numeric("1234567890.12", 10, 2), "4 2 + 2 12 3456 7890 1200");
	CHECK_STR(numeric("-9999999999.99", 10, 2), "4 2 - 2 99 9999 9999 9900");
	CHECK_STR(numeric("100000000.5", 10, 2), "4 2 + 1 1 0 0 5000");
	CHECK_STR(numeric("1234.56", 10, 2), "2 0 + 2 1234 5600");
	CHECK_STR(numeric("0012.5", 10, 2), "2 0 + 1 12 5000");
	CHECK_STR(numeric("0.0001", 10, 4), "1 -1 + 4 1");
	CHECK_STR(numeric("0.00001", 10, 8), "1 -2 + 5 1000");
	CHECK_STR(numeric("123456789.123456789", 20, 20), "6 2 + 9 1 2345 6789 1234 5678 9000");
}

TEST(numeric_rejects)
{
	CHECK_STR(numeric("1.234", 10, 2), "FRACTION");
	CHECK_STR(numeric("0.001", 10, 2), "FRACTION");
	CHECK_STR(numeric("1.000", 10, 2), "FRACTION");
	CHECK_STR(numeric("12345678901", 10, 2), "INTEGER");
	CHECK_STR(numeric("-12345678901.5", 10, 2), "INTEGER");
	CHECK_STR(numeric("00000000001234567890", 10, 2), "3 2 + 0 12 3456 7890");
	CHECK_STR(numeric("1e3", 10, 2), "EXPONENT");
	CHECK_STR(numeric("1.5E-2", 10, 2), "EXPONENT");
	CHECK_STR(numeric("", 10, 2), "SYNTAX");
	CHECK_STR(numeric("-", 10, 2), "SYNTAX");
	CHECK_STR(numeric("1.", 10, 2), "SYNTAX");
	CHECK_STR(numeric(".5", 10, 2), "SYNTAX");
	CHECK_STR(numeric("+1", 10, 2), "SYNTAX");
	CHECK_STR(numeric("1a", 10, 2), "SYNTAX");
	CHECK_STR(numeric("1 ", 10, 2), "SYNTAX");
	CHECK_STR(numeric("--1", 10, 2), "SYNTAX");
}

TEST(numeric_encoding)
{
	pgb_buf		b;
	pgb_numeric n;

	pgb_buf_init(&b);
	CHECK(pgb_numeric_from_text("-12.30", 6, 10, 2, &n) == PGB_NUMERIC_OK);
	CHECK(pgb_numeric_field_len(&n) == 16);
	CHECK(pgb_buf_reserve(&b, pgb_numeric_field_len(&n)));
	pgb_put_numeric_field(&b, &n);
	/* length 12 | ndigits 2 | weight 0 | sign NEG | dscale 2 | 12 | 3000 */
	CHECK_STR(hex(&b, 0), "0000000c" "0002" "0000" "4000" "0002" "000c" "0bb8");
	b.len = 0;
	CHECK(pgb_numeric_from_text("0.01", 4, 10, 2, &n) == PGB_NUMERIC_OK);
	pgb_put_numeric_field(&b, &n);
	/* weight -1 is 0xffff */
	CHECK_STR(hex(&b, 0), "0000000a" "0001" "ffff" "0000" "0002" "0064");
	b.len = 0;
	CHECK(pgb_numeric_from_text("0", 1, 10, 2, &n) == PGB_NUMERIC_OK);
	pgb_put_numeric_field(&b, &n);
	CHECK_STR(hex(&b, 0), "00000008" "0000" "0000" "0000" "0000");
	pgb_buf_free(&b);
}

static int64_t ts_value;
static char ts_why[200];

static bool
ts(const char *text)
{
	ts_why[0] = '\0';
	return pgb_timestamptz_from_rfc3339(text, strlen(text), &ts_value, ts_why, sizeof(ts_why));
}

TEST(timestamptz_values)
{
	CHECK(ts("2000-01-01T00:00:00Z") && ts_value == 0);
	CHECK(ts("2000-01-01T00:00:00.000001Z") && ts_value == 1);
	CHECK(ts("2000-01-01T00:00:00.5Z") && ts_value == 500000);
	CHECK(ts("2000-01-01t00:00:00z") && ts_value == 0);
	CHECK(ts("2000-01-01T01:00:00+01:00") && ts_value == 0);
	CHECK(ts("1999-12-31T19:00:00-05:00") && ts_value == 0);
	CHECK(ts("2000-01-01T00:00:00-00:00") && ts_value == 0);
	CHECK(ts("1999-12-31T23:59:59.999999Z") && ts_value == -1);
	CHECK(ts("1970-01-01T00:00:00Z") && ts_value == -INT64_C(946684800000000));
	CHECK(ts("2024-02-29T12:00:00Z") && ts_value == INT64_C(762523200000000));
	CHECK(ts("2000-02-29T00:00:00Z") && ts_value == INT64_C(59) * 86400 * 1000000);
	CHECK(ts("1900-03-01T00:00:00Z") && ts_value == -INT64_C(3150576000000000));
	CHECK(ts("2026-03-14T09:26:53.589793+01:00") && ts_value == INT64_C(826792013589793));
	CHECK(ts("2023-06-15T08:30:00-05:30") && ts_value == INT64_C(740152800000000));
	CHECK(ts("0001-01-01T00:00:00Z") && ts_value == -INT64_C(63082281600000000));
	/* year 0000 is 1 BC, as PostgreSQL counts it */
	CHECK(ts("0000-01-01T00:00:00Z") && ts_value == -INT64_C(63113904000000000));
	CHECK(ts("9999-12-31T23:59:59.999999-23:59") && ts_value == INT64_C(252455702339999999));
}

TEST(timestamptz_rejects)
{
	CHECK(!ts("2023-02-29T00:00:00Z"));
	CHECK_STR(ts_why, "day 29 is out of range for February 2023 (01-28)");
	CHECK(!ts("1900-02-29T00:00:00Z"));
	CHECK_STR(ts_why, "day 29 is out of range for February 1900 (01-28)");
	CHECK(!ts("2024-02-30T00:00:00Z"));
	CHECK_STR(ts_why, "day 30 is out of range for February 2024 (01-29)");
	CHECK(!ts("2023-04-31T00:00:00Z"));
	CHECK_STR(ts_why, "day 31 is out of range for April 2023 (01-30)");
	CHECK(!ts("2023-01-00T00:00:00Z"));
	CHECK_STR(ts_why, "day 00 is out of range for January 2023 (01-31)");
	CHECK(!ts("2023-13-01T00:00:00Z"));
	CHECK_STR(ts_why, "month 13 is out of range (01-12)");
	CHECK(!ts("2023-00-01T00:00:00Z"));
	CHECK_STR(ts_why, "month 00 is out of range (01-12)");
	CHECK(!ts("2023-01-01T24:00:00Z"));
	CHECK_STR(ts_why, "hour 24 is out of range (00-23)");
	CHECK(!ts("2023-01-01T23:60:00Z"));
	CHECK_STR(ts_why, "minute 60 is out of range (00-59)");
	CHECK(!ts("2016-12-31T23:59:60Z"));
	CHECK_STR(ts_why, "leap second 60 is not supported (00-59)");
	CHECK(!ts("2023-01-01T00:00:61Z"));
	CHECK_STR(ts_why, "second 61 is out of range (00-59)");
	CHECK(!ts("2023-01-01T00:00:00"));
	CHECK_STR(ts_why, "missing time zone offset: expected Z, +hh:mm or -hh:mm after the time");
	CHECK(!ts("2023-01-01T00:00:00+24:00"));
	CHECK_STR(ts_why, "offset +24:00 is out of range (hours 00-23, minutes 00-59)");
	CHECK(!ts("2023-01-01T00:00:00-01:60"));
	CHECK_STR(ts_why, "offset -01:60 is out of range (hours 00-23, minutes 00-59)");
	CHECK(!ts("2023-01-01T00:00:00+0100"));
	CHECK_STR(ts_why, "the offset must be Z, +hh:mm or -hh:mm");
	CHECK(!ts("2023-01-01T00:00:00+01"));
	CHECK_STR(ts_why, "the offset must be Z, +hh:mm or -hh:mm");
	CHECK(!ts("2023-01-01T00:00:00.1234567Z"));
	CHECK_STR(ts_why, "the fraction of a second must have 1 to 6 digits, it has 7");
	CHECK(!ts("2023-01-01T00:00:00.Z"));
	CHECK_STR(ts_why, "the fraction of a second must have 1 to 6 digits, it has 0");
	CHECK(!ts("2023-01-01T00:00:00Zjunk"));
	CHECK_STR(ts_why, "unexpected characters after the time zone offset");
	CHECK(!ts("2023-01-01 00:00:00Z"));
	CHECK_STR(ts_why, "expected YYYY-MM-DDTHH:MM:SS[.ffffff] followed by Z or an offset +hh:mm/-hh:mm");
	CHECK(!ts("2023-1-01T00:00:00Z"));
	CHECK(!ts("+2023-01-01T00:00:00Z"));
	CHECK(!ts("2023-01-01T0:00:00Z"));
	CHECK(!ts("20x3-01-01T00:00:00Z"));
	CHECK(!ts("2023-01-01"));
	CHECK(!ts(""));
	CHECK(!ts("2023-01-01T00:00:00 Z"));
}

TEST(timestamptz_encoding)
{
	pgb_buf		b;

	pgb_buf_init(&b);
	CHECK(pgb_buf_reserve(&b, 2 * PGB_TIMESTAMPTZ_FIELD_LEN));
	pgb_put_timestamptz_field(&b, -1);
	pgb_put_timestamptz_field(&b, INT64_C(826792013589793));
	CHECK_STR(hex(&b, 0), "00000008ffffffffffffffff" "00000008" "0002eff68445ed21");
	pgb_buf_free(&b);
}

TEST(int8_values)
{
	int64_t		v = 7;

	CHECK(pgb_int8_from_text("0", 1, &v) == PGB_INT_OK && v == 0);
	CHECK(pgb_int8_from_text("-0", 2, &v) == PGB_INT_OK && v == 0);
	CHECK(pgb_int8_from_text("00012", 5, &v) == PGB_INT_OK && v == 12);
	CHECK(pgb_int8_from_text("9223372036854775807", 19, &v) == PGB_INT_OK && v == INT64_MAX);
	CHECK(pgb_int8_from_text("-9223372036854775808", 20, &v) == PGB_INT_OK && v == INT64_MIN);
	CHECK(pgb_int8_from_text("9223372036854775808", 19, &v) == PGB_INT_RANGE);
	CHECK(pgb_int8_from_text("-9223372036854775809", 20, &v) == PGB_INT_RANGE);
	CHECK(pgb_int8_from_text("99999999999999999999999", 23, &v) == PGB_INT_RANGE);
	CHECK(pgb_int8_from_text("99999999999999999999.5", 22, &v) == PGB_INT_SYNTAX);
	CHECK(pgb_int8_from_text("", 0, &v) == PGB_INT_SYNTAX);
	CHECK(pgb_int8_from_text("-", 1, &v) == PGB_INT_SYNTAX);
	CHECK(pgb_int8_from_text("1.0", 3, &v) == PGB_INT_SYNTAX);
	CHECK(pgb_int8_from_text("1e3", 3, &v) == PGB_INT_SYNTAX);
	CHECK(pgb_int8_from_text("+1", 2, &v) == PGB_INT_SYNTAX);
}

TEST(framing_and_fields)
{
	pgb_buf		b;
	ld_slice	tags[2] = {{"ab", 2}, {"", 0}};

	pgb_buf_init(&b);
	CHECK(pgb_buf_reserve(&b, PGB_COPY_HEADER_LEN + PGB_COPY_TRAILER_LEN));
	pgb_put_copy_header(&b);
	CHECK(b.len == PGB_COPY_HEADER_LEN);
	CHECK_STR(hex(&b, 0), "5047434f50590aff0d0a00" "00000000" "00000000");
	pgb_put_copy_trailer(&b);
	CHECK_STR(hex(&b, PGB_COPY_HEADER_LEN), "ffff");

	b.len = 0;
	CHECK(pgb_buf_reserve(&b, 256));
	pgb_put_tuple_header(&b, 8);
	pgb_put_int8_field(&b, -2);
	CHECK_STR(hex(&b, 0), "0008" "00000008" "fffffffffffffffe");

	b.len = 0;
	pgb_put_text_field(&b, "Zo\xc3\xab", 4);
	CHECK_STR(hex(&b, 0), "00000004" "5a6fc3ab");

	/* text[]: ndim 1, no nulls, element type 25, 2 elements from 1 */
	b.len = 0;
	CHECK(pgb_text_array_field_len(tags, 2) == 4 + 20 + 6 + 4);
	pgb_put_text_array_field(&b, tags, 2);
	CHECK(b.len == pgb_text_array_field_len(tags, 2));
	CHECK_STR(hex(&b, 0), "0000001e" "00000001" "00000000" "00000019" "00000002" "00000001"
			  "00000002" "6162" "00000000");
	/* the empty array has no dimensions */
	b.len = 0;
	CHECK(pgb_text_array_field_len(tags, 0) == 16);
	pgb_put_text_array_field(&b, tags, 0);
	CHECK_STR(hex(&b, 0), "0000000c" "00000000" "00000000" "00000019");

	/* jsonb: version 1, then the text */
	b.len = 0;
	CHECK(pgb_jsonb_field_len(7) == 12);
	pgb_put_jsonb_field(&b, "{\"a\":1}", 7);
	CHECK_STR(hex(&b, 0), "00000008" "01" "7b2261223a317d");
	pgb_buf_free(&b);
}

TEST(buffer_growth)
{
	pgb_buf		b;

	bool		reserved = true;

	pgb_buf_init(&b);
	for (int i = 0; i < 100000 && reserved; i++)
	{
		reserved = pgb_buf_reserve(&b, 12);
		if (reserved)
			pgb_put_int8_field(&b, i);
	}
	CHECK(reserved);
	CHECK(b.len == 1200000 && b.cap >= b.len);
	CHECK_STR(hex(&b, 1200000 - 12), "00000008000000000001869f");
	pgb_buf_free(&b);
}

int
main(void)
{
	RUN(numeric_values);
	RUN(numeric_rejects);
	RUN(numeric_encoding);
	RUN(timestamptz_values);
	RUN(timestamptz_rejects);
	RUN(timestamptz_encoding);
	RUN(int8_values);
	RUN(framing_and_fields);
	RUN(buffer_growth);
	return unit_summary();
}
