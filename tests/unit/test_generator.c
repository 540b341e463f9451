/*
 * test_generator.c - unit tests for the generator: number, date and string
 * formatting, determinism, the record layout of docs/record-format.md
 * (checked by a small strict JSON reader written here, independent of the
 * writer), and the all-or-nothing output file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "civil_time.h"
#include "numfmt.h"
#include "order_writer.h"
#include "outfile.h"
#include "pools.h"
#include "rng.h"
#include "unit.h"

/* ---------- helpers ---------- */

typedef struct membuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	int			calls;
} membuf;

static bool
mem_sink(void *arg, const char *data, size_t len)
{
	membuf	   *m = arg;

	if (m->len + len + 1 > m->cap)
	{
		m->cap = (m->len + len + 1) * 2;
		m->data = realloc(m->data, m->cap);
		if (m->data == NULL)
			abort();
	}
	memcpy(m->data + m->len, data, len);
	m->len += len;
	m->data[m->len] = '\0';
	m->calls++;
	return true;
}

static bool
failing_sink(void *arg, const char *data, size_t len)
{
	(void) arg;
	(void) data;
	(void) len;
	return false;
}

/* The whole document for (seed, format, n), staged through bufsize bytes. */
static membuf
generate(uint64_t seed, gen_format format, uint64_t n, size_t bufsize)
{
	membuf		m = {0};
	char	   *buf = malloc(bufsize);

	m.data = calloc(1, 1);
	if (!gen_orders_emit(seed, format, n, buf, bufsize, mem_sink, &m))
	{
		free(m.data);
		m.data = NULL;
	}
	free(buf);
	return m;
}

static size_t
min_bufsize(void)
{
	gen_orders	g;

	gen_orders_init(&g, 1);
	return gen_orders_max_record(&g) + 16;
}

#define FMT_CHECK(expr, expected) \
	do { \
		char		buf_[64]; \
		char	   *end_ = (expr); \
		*end_ = '\0'; \
		CHECK_STR(buf_, expected); \
	} while (0)

/* ---------- numbers ---------- */

TEST(test_integers)
{
	FMT_CHECK(gen_put_u64(buf_, 0), "0");
	FMT_CHECK(gen_put_u64(buf_, 7), "7");
	FMT_CHECK(gen_put_u64(buf_, 10), "10");
	FMT_CHECK(gen_put_u64(buf_, 99), "99");
	FMT_CHECK(gen_put_u64(buf_, 100), "100");
	FMT_CHECK(gen_put_u64(buf_, 1000000), "1000000");
	FMT_CHECK(gen_put_u64(buf_, UINT64_MAX), "18446744073709551615");
	FMT_CHECK(gen_put_i64(buf_, -1), "-1");
	FMT_CHECK(gen_put_i64(buf_, INT64_MAX), "9223372036854775807");
	FMT_CHECK(gen_put_i64(buf_, INT64_MIN), "-9223372036854775808");
}

TEST(test_decimals)
{
	FMT_CHECK(gen_put_decimal(buf_, 0, 2), "0.00");
	FMT_CHECK(gen_put_decimal(buf_, 5, 2), "0.05");
	FMT_CHECK(gen_put_decimal(buf_, 50, 2), "0.50");
	FMT_CHECK(gen_put_decimal(buf_, 100, 2), "1.00");
	FMT_CHECK(gen_put_decimal(buf_, 123456, 2), "1234.56");
	FMT_CHECK(gen_put_decimal(buf_, -5, 2), "-0.05");
	FMT_CHECK(gen_put_decimal(buf_, -100, 2), "-1.00");
	FMT_CHECK(gen_put_decimal(buf_, -123407, 2), "-1234.07");
	/* numeric(12,2) limits */
	FMT_CHECK(gen_put_decimal(buf_, INT64_C(999999999999), 2), "9999999999.99");
	FMT_CHECK(gen_put_decimal(buf_, -INT64_C(999999999999), 2), "-9999999999.99");
	FMT_CHECK(gen_put_decimal(buf_, 1, 3), "0.001");
	FMT_CHECK(gen_put_decimal(buf_, 12345, 3), "12.345");
	FMT_CHECK(gen_put_decimal(buf_, INT64_MIN, 2), "-92233720368547758.08");
}

/* ---------- dates ---------- */

static bool
is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned
month_days(int64_t y, unsigned m)
{
	static const unsigned len[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	return m == 2 && is_leap(y) ? 29 : len[m - 1];
}

TEST(test_civil_known_days)
{
	CHECK(gen_days_from_civil(1970, 1, 1) == 0);
	CHECK(gen_days_from_civil(1969, 12, 31) == -1);
	CHECK(gen_days_from_civil(2000, 1, 1) == 10957);
	CHECK(gen_days_from_civil(2019, 1, 1) == 17897);
	CHECK(gen_days_from_civil(2038, 1, 19) == 24855);	/* 2^31 s is in it */
	CHECK(gen_days_from_civil(0, 3, 1) == -719468);
	CHECK(gen_days_from_civil(1600, 1, 1) == -135140);
}

TEST(test_civil_month_ends_and_leap_years)
{
	int64_t		y;
	unsigned	m;

	/* Feb 29 exists in 2000 and 2024, not in 1900, 2023 or 2100. */
	CHECK(gen_days_from_civil(2000, 3, 1) - gen_days_from_civil(2000, 2, 28) == 2);
	CHECK(gen_days_from_civil(2024, 3, 1) - gen_days_from_civil(2024, 2, 28) == 2);
	CHECK(gen_days_from_civil(1900, 3, 1) - gen_days_from_civil(1900, 2, 28) == 1);
	CHECK(gen_days_from_civil(2023, 3, 1) - gen_days_from_civil(2023, 2, 28) == 1);
	CHECK(gen_days_from_civil(2100, 3, 1) - gen_days_from_civil(2100, 2, 28) == 1);

	/* Every month's length from the first of the next month, 1896..2104. */
	for (y = 1896; y <= 2104; y++)
		for (m = 1; m <= 12; m++)
		{
			int64_t		next = m == 12 ? gen_days_from_civil(y + 1, 1, 1)
				: gen_days_from_civil(y, m + 1, 1);

			if (next - gen_days_from_civil(y, m, 1) != month_days(y, m))
			{
				CHECK(!"month length");
				printf("  %lld-%02u\n", (long long) y, m);
				return;
			}
		}
	CHECK(true);
}

TEST(test_civil_walk)
{
	/* Walk day by day with the plain rules as an independent oracle. */
	int64_t		y = 1600;
	unsigned	m = 1;
	unsigned	d = 1;
	int64_t		day = gen_days_from_civil(1600, 1, 1);
	bool		ok = true;

	while (y <= 2500 && ok)
	{
		int64_t		ry;
		unsigned	rm;
		unsigned	rd;

		gen_civil_from_days(day, &ry, &rm, &rd);
		if (ry != y || rm != m || rd != d || gen_days_from_civil(y, m, d) != day)
		{
			printf("  day %lld: expected %lld-%02u-%02u, got %lld-%02u-%02u\n",
				   (long long) day, (long long) y, m, d, (long long) ry, rm, rd);
			ok = false;
		}
		day++;
		if (++d > month_days(y, m))
		{
			d = 1;
			if (++m > 12)
			{
				m = 1;
				y++;
			}
		}
	}
	CHECK(ok);
}

static int64_t
unix_us(int64_t y, unsigned mo, unsigned d, int h, int mi, int s, int64_t us)
{
	return ((gen_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s)
			* 1000000) + us;
}

TEST(test_timestamps)
{
	FMT_CHECK(gen_put_timestamp(buf_, 0, 0, 1), "1970-01-01T00:00:00.000000Z");
	FMT_CHECK(gen_put_timestamp(buf_, 0, 0, 0), "1970-01-01T00:00:00.000000+00:00");
	FMT_CHECK(gen_put_timestamp(buf_, -1, 0, 1), "1969-12-31T23:59:59.999999Z");
	FMT_CHECK(gen_put_timestamp(buf_, 0, -180, 1), "1969-12-31T21:00:00.000000-03:00");
	/* Offsets move the local date across leap days and month ends. */
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2024, 2, 29, 23, 59, 59, 999999), 330, 1),
			  "2024-03-01T05:29:59.999999+05:30");
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2024, 3, 1, 5, 0, 0, 1), -570, 1),
			  "2024-02-29T19:30:00.000001-09:30");
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2023, 2, 28, 20, 0, 0, 0), 330, 1),
			  "2023-03-01T01:30:00.000000+05:30");
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2023, 3, 1, 2, 0, 0, 0), -180, 1),
			  "2023-02-28T23:00:00.000000-03:00");
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2026, 12, 31, 23, 30, 0, 500000), 60, 1),
			  "2027-01-01T00:30:00.500000+01:00");
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2025, 4, 30, 20, 15, 0, 42), 345, 1),
			  "2025-05-01T02:00:00.000042+05:45");
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2100, 3, 1, 0, 0, 0, 0), -1, 1),
			  "2100-02-28T23:59:00.000000-00:01");
	FMT_CHECK(gen_put_timestamp(buf_, unix_us(2000, 2, 29, 12, 0, 0, 0), 0, 1),
			  "2000-02-29T12:00:00.000000Z");
}

/* ---------- strings ---------- */

TEST(test_json_escape)
{
	static const char in[] = "a\"b\\c\td\ne\001f\r\b\f\037 é🎉/";
	char		out[6 * sizeof(in)];
	size_t		n = gen_json_escape(out, in, sizeof(in) - 1);

	out[n] = '\0';
	CHECK_STR(out, "a\\\"b\\\\c\\td\\ne\\u0001f\\r\\b\\f\\u001f é🎉/");
	CHECK(gen_json_escape(out, "", 0) == 0);
}

static bool
pool_contains(const gen_pool *pool, const char *needle)
{
	uint32_t	i;

	for (i = 0; i < pool->count; i++)
		if (memmem(pool->items[i].s, pool->items[i].len, needle, strlen(needle)))
			return true;
	return false;
}

TEST(test_pools_cover_hard_text)
{
	const gen_pools *p = gen_pools_get();
	static const char *const needles[] = {
		"é", "ü", "ß", "山田", "🎉", "\\\"", "\\\\", "\\t", "\\n", "\\u0001",
	};
	size_t		i;

	for (i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
	{
		bool		found = pool_contains(&p->first_names, needles[i]) ||
			pool_contains(&p->last_names, needles[i]);

		if (!found)
			printf("  customer names lack %s\n", needles[i]);
		CHECK(found);
	}
	CHECK(p->tags.count == 19);
	CHECK(gen_pools_get() == p);
}

/* ---------- rng ---------- */

TEST(test_rng)
{
	gen_rng		a;
	gen_rng		b;
	gen_rng		c;
	int			i;
	bool		same = true;
	bool		differ = false;
	bool		in_range = true;

	gen_rng_seed(&a, 1);
	gen_rng_seed(&b, 1);
	gen_rng_seed(&c, 2);
	for (i = 0; i < 1000; i++)
	{
		uint64_t	x = gen_rng_next(&a);

		same &= x == gen_rng_next(&b);
		differ |= x != gen_rng_next(&c);
		in_range &= gen_rng_below(&c, 7) < 7;
	}
	CHECK(same);
	CHECK(differ);
	CHECK(in_range);

	/* Seed 0 must not give the all-zero state, which only yields zeros. */
	gen_rng_seed(&a, 0);
	CHECK(a.s[0] | a.s[1] | a.s[2] | a.s[3]);
	CHECK(gen_rng_next(&a) != 0 || gen_rng_next(&a) != 0);
}

/* ---------- a strict JSON reader, for checking the writer ---------- */

typedef struct reader
{
	const char *start;
	const char *p;
	const char *end;
	const char *error;			/* first problem, or NULL */
} reader;

/* Set while feeding the reader bad input on purpose. */
static bool reader_quiet;

static bool
fail(reader *r, const char *why)
{
	if (r->error == NULL)
	{
		r->error = why;
		if (!reader_quiet)
			printf("  at byte %td: %s (near \"%.20s\")\n", r->p - r->start, why, r->p);
	}
	return false;
}

static bool
eat(reader *r, char c)
{
	if (r->p < r->end && *r->p == c)
	{
		r->p++;
		return true;
	}
	return false;
}

static bool
eat_lit(reader *r, const char *lit)
{
	size_t		n = strlen(lit);

	if ((size_t) (r->end - r->p) >= n && memcmp(r->p, lit, n) == 0)
	{
		r->p += n;
		return true;
	}
	return false;
}

static void
skip_ws(reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static long
read_u4(reader *r)
{
	long		v = 0;
	int			i;

	if (r->end - r->p < 4)
		return -1;
	for (i = 0; i < 4; i++)
	{
		int			h = hexval(r->p[i]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	r->p += 4;
	return v;
}

/* One UTF-8 sequence: shortest form, no surrogates, at most U+10FFFF. */
static bool
read_utf8(reader *r)
{
	const unsigned char *s = (const unsigned char *) r->p;
	size_t		avail = (size_t) (r->end - r->p);
	unsigned	cp;
	size_t		n;
	size_t		i;

	if (s[0] < 0x80)
		n = 1, cp = s[0];
	else if ((s[0] & 0xe0) == 0xc0)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, cp = s[0] & 0x07;
	else
		return fail(r, "invalid UTF-8 lead byte");
	if (avail < n)
		return fail(r, "truncated UTF-8");
	for (i = 1; i < n; i++)
	{
		if ((s[i] & 0xc0) != 0x80)
			return fail(r, "invalid UTF-8 continuation");
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000))
		return fail(r, "overlong UTF-8");
	if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return fail(r, "UTF-8 encodes a surrogate or beyond U+10FFFF");
	r->p += n;
	return true;
}

/* A string; its raw (still escaped) contents go to start and len. */
static bool
read_string(reader *r, const char **start, size_t *len)
{
	if (!eat(r, '"'))
		return fail(r, "expected string");
	if (start)
		*start = r->p;
	while (r->p < r->end && *r->p != '"')
	{
		unsigned char c = (unsigned char) *r->p;

		if (c < 0x20)
			return fail(r, "raw control character in string");
		if (c == '\\')
		{
			long		u;

			r->p++;
			if (r->p >= r->end)
				return fail(r, "truncated escape");
			switch (*r->p++)
			{
				case '"':
				case '\\':
				case '/':
				case 'b':
				case 'f':
				case 'n':
				case 'r':
				case 't':
					break;
				case 'u':
					u = read_u4(r);
					if (u < 0)
						return fail(r, "bad \\u escape");
					if (u == 0)
						return fail(r, "\\u0000 is not allowed");
					if (u >= 0xdc00 && u <= 0xdfff)
						return fail(r, "lone low surrogate");
					if (u >= 0xd800 && u <= 0xdbff)
					{
						long		lo;

						if (!eat_lit(r, "\\u") || (lo = read_u4(r)) < 0xdc00 || lo > 0xdfff)
							return fail(r, "high surrogate without low surrogate");
					}
					break;
				default:
					return fail(r, "unknown escape");
			}
		}
		else if (!read_utf8(r))
			return false;
	}
	if (len && start)
		*len = (size_t) (r->p - *start);
	if (!eat(r, '"'))
		return fail(r, "unterminated string");
	return true;
}

/* RFC 8259 number; counts of integer and fraction digits out. */
static bool
read_number(reader *r, int *int_digits, int *frac_digits, bool *has_exp)
{
	const char *s;

	*int_digits = *frac_digits = 0;
	*has_exp = false;
	eat(r, '-');
	s = r->p;
	if (eat(r, '0'))
		*int_digits = 1;
	else
	{
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
		*int_digits = (int) (r->p - s);
		if (*int_digits == 0 || *s == '0')
			return fail(r, "expected number");
	}
	if (eat(r, '.'))
	{
		s = r->p;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
		*frac_digits = (int) (r->p - s);
		if (*frac_digits == 0)
			return fail(r, "digits expected after '.'");
	}
	if (eat(r, 'e') || eat(r, 'E'))
	{
		*has_exp = true;
		if (!eat(r, '+'))
			eat(r, '-');
		s = r->p;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
		if (r->p == s)
			return fail(r, "digits expected in exponent");
	}
	return true;
}

static bool read_value(reader *r, int depth);

static bool
read_array(reader *r, int depth, int *count)
{
	*count = 0;
	if (!eat(r, '['))
		return fail(r, "expected array");
	skip_ws(r);
	if (eat(r, ']'))
		return true;
	do
	{
		skip_ws(r);
		if (!read_value(r, depth + 1))
			return false;
		(*count)++;
		skip_ws(r);
	} while (eat(r, ','));
	return eat(r, ']') || fail(r, "expected ',' or ']'");
}

static bool
read_object(reader *r, int depth)
{
	if (!eat(r, '{'))
		return fail(r, "expected object");
	skip_ws(r);
	if (eat(r, '}'))
		return true;
	do
	{
		skip_ws(r);
		if (!read_string(r, NULL, NULL))
			return false;
		skip_ws(r);
		if (!eat(r, ':'))
			return fail(r, "expected ':'");
		skip_ws(r);
		if (!read_value(r, depth + 1))
			return false;
		skip_ws(r);
	} while (eat(r, ','));
	return eat(r, '}') || fail(r, "expected ',' or '}'");
}

static bool
read_value(reader *r, int depth)
{
	int			a,
				b;
	bool		e;

	if (depth > 64)
		return fail(r, "nested too deeply");
	if (r->p >= r->end)
		return fail(r, "unexpected end");
	switch (*r->p)
	{
		case '{':
			return read_object(r, depth);
		case '[':
			return read_array(r, depth, &a);
		case '"':
			return read_string(r, NULL, NULL);
		case 't':
			return eat_lit(r, "true") || fail(r, "bad literal");
		case 'f':
			return eat_lit(r, "false") || fail(r, "bad literal");
		case 'n':
			return eat_lit(r, "null") || fail(r, "bad literal");
		default:
			return read_number(r, &a, &b, &e);
	}
}

static bool
expect_key(reader *r, const char *key)
{
	const char *s;
	size_t		len;

	if (!read_string(r, &s, &len))
		return false;
	if (len != strlen(key) || memcmp(s, key, len) != 0)
		return fail(r, "record keys out of order or unknown");
	return eat(r, ':') || fail(r, "expected ':'");
}

static bool
is_digits(const char *s, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* "YYYY-MM-DDTHH:MM:SS.ffffff" then "Z" or "+hh:mm"/"-hh:mm". */
static bool
valid_created_at(const char *s, size_t len)
{
	if (len != 27 && len != 32)
		return false;
	if (!is_digits(s, 4) || s[4] != '-' || !is_digits(s + 5, 2) || s[7] != '-' ||
		!is_digits(s + 8, 2) || s[10] != 'T' || !is_digits(s + 11, 2) ||
		s[13] != ':' || !is_digits(s + 14, 2) || s[16] != ':' ||
		!is_digits(s + 17, 2) || s[19] != '.' || !is_digits(s + 20, 6))
		return false;
	if (len == 27)
		return s[26] == 'Z';
	return (s[26] == '+' || s[26] == '-') && is_digits(s + 27, 2) && s[29] == ':' &&
		is_digits(s + 30, 2);
}

/* One record, key by key, with the per-key rules of record-format.md. */
static bool
read_record(reader *r, uint64_t expected_id)
{
	const char *s;
	size_t		len;
	int			idig,
				fdig,
				ntags;
	bool		exp;
	uint64_t	id = 0;

	if (!eat(r, '{'))
		return fail(r, "expected record object");

	if (!expect_key(r, "id"))
		return false;
	s = r->p;
	if (!read_number(r, &idig, &fdig, &exp) || fdig || exp || *s == '-')
		return fail(r, "id must be a positive integer");
	for (; s < r->p; s++)
		id = id * 10 + (uint64_t) (*s - '0');
	if (id != expected_id)
		return fail(r, "ids are not sequential");

	if (!eat(r, ',') || !expect_key(r, "customer_id"))
		return fail(r, "expected customer_id");
	if (!read_number(r, &idig, &fdig, &exp) || fdig || exp)
		return fail(r, "customer_id must be an integer");

	if (!eat(r, ',') || !expect_key(r, "customer_name") || !read_string(r, &s, &len))
		return fail(r, "expected customer_name string");
	if (len == 0)
		return fail(r, "empty customer_name");

	if (!eat(r, ',') || !expect_key(r, "amount"))
		return fail(r, "expected amount");
	if (!read_number(r, &idig, &fdig, &exp) || fdig != 2 || exp || idig > 10)
		return fail(r, "amount must have 2 fraction digits and at most 10 integer digits");

	if (!eat(r, ',') || !expect_key(r, "currency") || !read_string(r, &s, &len))
		return fail(r, "expected currency string");
	if (len != 3 || s[0] < 'A' || s[0] > 'Z' || s[1] < 'A' || s[1] > 'Z' ||
		s[2] < 'A' || s[2] > 'Z')
		return fail(r, "currency must be 3 uppercase letters");

	if (!eat(r, ',') || !expect_key(r, "created_at") || !read_string(r, &s, &len))
		return fail(r, "expected created_at string");
	if (!valid_created_at(s, len))
		return fail(r, "created_at is not RFC 3339 with 6 fraction digits");

	if (!eat(r, ',') || !expect_key(r, "tags"))
		return fail(r, "expected tags");
	if (!eat(r, '['))
		return fail(r, "tags must be an array");
	ntags = 0;
	if (!eat(r, ']'))
	{
		do
		{
			if (!read_string(r, NULL, NULL))
				return fail(r, "tags must hold strings");
			ntags++;
		} while (eat(r, ','));
		if (!eat(r, ']'))
			return fail(r, "expected ']' after tags");
	}
	if (ntags > 4)
		return fail(r, "more than 4 tags");

	if (!eat(r, ',') || !expect_key(r, "attributes"))
		return fail(r, "expected attributes");
	if (r->p >= r->end || *r->p != '{' || !read_object(r, 1))
		return fail(r, "attributes must be an object");

	return eat(r, '}') || fail(r, "record has extra keys");
}

/* A whole document in format, n records. */
static bool
check_document(const char *data, size_t len, gen_format format, uint64_t n)
{
	reader		r = {data, data, data + len, NULL};
	uint64_t	i;

	if (format == GEN_FORMAT_JSON)
	{
		if (n == 0)
			return len == 3 && memcmp(data, "[]\n", 3) == 0;
		if (!eat_lit(&r, "[\n"))
			return fail(&r, "json must start with \"[\\n\"");
		for (i = 1; i <= n; i++)
		{
			if (i > 1 && !eat_lit(&r, ",\n"))
				return fail(&r, "records must be joined by \",\\n\"");
			if (!read_record(&r, i))
				return false;
		}
		if (!eat_lit(&r, "\n]\n"))
			return fail(&r, "json must end with \"\\n]\\n\"");
	}
	else
	{
		for (i = 1; i <= n; i++)
			if (!read_record(&r, i) || !eat(&r, '\n'))
				return fail(&r, "ndjson record must end with a newline");
	}
	return r.p == r.end || fail(&r, "trailing bytes");
}

/* Each broken variant of a good record must be rejected. */
TEST(test_reader_rejects_bad_records)
{
	static const char good[] =
		"{\"id\":1,\"customer_id\":5,\"customer_name\":\"A\",\"amount\":1.00,"
		"\"currency\":\"EUR\",\"created_at\":\"2024-02-29T01:02:03.000004+05:30\","
		"\"tags\":[\"x\"],\"attributes\":{\"a\":[1,null,{\"b\":true}]}}\n";
	static const struct
	{
		const char *from;
		const char *to;
	}			breaks[] = {
		{"\"id\":1", "\"id\":2"},
		{"\"customer_id\":5,", ""},
		{"\"A\"", "\"A\x01\""},
		{"\"A\"", "\"A\xc3\""},
		{"\"A\"", "\"\xed\xa0\x80\""},
		{"\"A\"", "\"\\u0000\""},
		{"\"A\"", "\"\\ud800\""},
		{"1.00", "1.0"},
		{"1.00", "1e2"},
		{"1.00", "12345678901.00"},
		{"EUR", "eur"},
		{".000004+05:30", "+05:30"},
		{"+05:30", "+0530"},
		{"[\"x\"]", "[\"x\",1]"},
		{"true", "tru"},
		{"}}\n", "},\"extra\":1}\n"},
		{"}}\n", "}}"},
	};
	char		doc[512];
	size_t		i;

	CHECK(check_document(good, strlen(good), GEN_FORMAT_NDJSON, 1));
	reader_quiet = true;
	for (i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++)
	{
		const char *at = strstr(good, breaks[i].from);
		int			n;

		n = snprintf(doc, sizeof(doc), "%.*s%s%s", (int) (at - good), good,
					 breaks[i].to, at + strlen(breaks[i].from));
		if (check_document(doc, (size_t) n, GEN_FORMAT_NDJSON, 1))
		{
			printf("  accepted broken record %zu: %s", i, doc);
			CHECK(!"broken record accepted");
		}
	}
	reader_quiet = false;
	CHECK(true);
}

/* ---------- documents ---------- */

TEST(test_determinism)
{
	size_t		small = min_bufsize();
	membuf		a = generate(1, GEN_FORMAT_JSON, 3000, 1 << 20);
	membuf		b = generate(1, GEN_FORMAT_JSON, 3000, small);
	membuf		c = generate(2, GEN_FORMAT_JSON, 3000, 1 << 20);

	CHECK(a.data && b.data && c.data);
	/* Chunking changes nothing: one flush versus hundreds. */
	CHECK(a.calls == 1);
	CHECK(b.calls > 100);
	CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
	CHECK(a.len != c.len || memcmp(a.data, c.data, a.len) != 0);
	/* The first records of a longer run are the same records. */
	{
		membuf		d = generate(1, GEN_FORMAT_JSON, 10, 1 << 20);

		CHECK(d.len > 3 && memcmp(a.data, d.data, d.len - 3) == 0);
		free(d.data);
	}
	free(a.data);
	free(b.data);
	free(c.data);
}

TEST(test_json_and_ndjson_hold_the_same_records)
{
	membuf		j = generate(42, GEN_FORMAT_JSON, 500, 1 << 20);
	membuf		n = generate(42, GEN_FORMAT_NDJSON, 500, min_bufsize());
	char	   *p;
	char	   *q;

	CHECK(j.data && n.data);
	/* Raw newlines only separate records (inside strings they are "\n"). */
	CHECK(j.len == n.len + 499 + 4);
	CHECK(memcmp(j.data, "[\n", 2) == 0);
	for (p = j.data + 2, q = n.data; *q; p++, q++)
	{
		if (*q == '\n' && *p == ',')
			p++;
		if (*p != *q)
			break;
	}
	CHECK(*q == '\0');
	CHECK(strcmp(p, "]\n") == 0);
	free(j.data);
	free(n.data);
}

TEST(test_empty_documents)
{
	membuf		j = generate(1, GEN_FORMAT_JSON, 0, 1 << 20);
	membuf		n = generate(1, GEN_FORMAT_NDJSON, 0, 1 << 20);

	CHECK(j.data && j.len == 3 && memcmp(j.data, "[]\n", 3) == 0);
	CHECK(n.data && n.len == 0 && n.calls == 0);
	free(j.data);
	free(n.data);
}

TEST(test_documents_are_valid)
{
	static const uint64_t counts[] = {1, 2, 20000};
	size_t		i;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
	{
		membuf		j = generate(7, GEN_FORMAT_JSON, counts[i], min_bufsize());
		membuf		n = generate(7, GEN_FORMAT_NDJSON, counts[i], 1 << 20);

		CHECK(j.data && check_document(j.data, j.len, GEN_FORMAT_JSON, counts[i]));
		CHECK(n.data && check_document(n.data, n.len, GEN_FORMAT_NDJSON, counts[i]));
		free(j.data);
		free(n.data);
	}
}

TEST(test_records_cover_the_mix)
{
	membuf		m = generate(1, GEN_FORMAT_NDJSON, 20000, 1 << 20);
	static const char *const needles[] = {
		"\"amount\":-", "\"amount\":0.00,", "Z\",", "+05:30\"", "-03:00\"",
		"+00:00\"", "\"tags\":[]", "\"coupon\":null", "\"gift_wrap\":true",
		"\"lines\":[]", "\"lines\":[{", "\"shipping\":{", "\\u0001", "\\\"",
		"\\\\", "\\t", "\\n", "🎉", "é", "ü", "ß", "山田",
	};
	size_t		i;

	CHECK(m.data != NULL);
	for (i = 0; m.data && i < sizeof(needles) / sizeof(needles[0]); i++)
	{
		bool		found = strstr(m.data, needles[i]) != NULL;

		if (!found)
			printf("  no record contains %s\n", needles[i]);
		CHECK(found);
	}
	free(m.data);
}

TEST(test_record_size_bound)
{
	gen_orders	g;
	size_t		bound;
	size_t		longest = 0;
	char	   *buf;
	int			i;

	gen_orders_init(&g, 3);
	bound = gen_orders_max_record(&g);
	buf = malloc(bound * 2);
	for (i = 0; i < 200000; i++)
	{
		size_t		len = (size_t) (gen_orders_record(&g, buf) - buf);

		if (len > longest)
			longest = len;
	}
	CHECK(longest < bound);
	/* The bound should be a bound, not a guess ten times too big. */
	CHECK(bound < 8 * longest);
	free(buf);
}

TEST(test_buffer_too_small_and_sink_failure)
{
	char		buf[256];
	char	   *big = malloc(1 << 16);
	membuf		m = {0};

	CHECK(!gen_orders_emit(1, GEN_FORMAT_JSON, 1, buf, sizeof(buf), mem_sink, &m));
	CHECK(m.calls == 0);
	CHECK(!gen_orders_emit(1, GEN_FORMAT_JSON, 10000, big, 1 << 16, failing_sink, NULL));
	free(big);
}

/* ---------- output file ---------- */

static int
count_entries(const char *dir)
{
	DIR		   *d = opendir(dir);
	struct dirent *e;
	int			n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static char *
slurp(const char *path)
{
	FILE	   *fp = fopen(path, "rb");
	char	   *data = calloc(1, 1 << 16);

	if (fp == NULL)
	{
		free(data);
		return NULL;
	}
	(void) !fread(data, 1, (1 << 16) - 1, fp);
	fclose(fp);
	return data;
}

TEST(test_outfile)
{
	char		dir[] = "/tmp/test_generator.XXXXXX";
	char		path[128];
	char	   *got;
	gen_outfile f;
	struct stat st;
	mode_t		old_mask;
	struct rlimit old_limit;
	struct rlimit limit;
	void		(*old_xfsz) (int);
	char		chunk[8192];

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/out.json", dir);

	/* Commit: content in place, mode from the umask, no temporary left. */
	old_mask = umask(027);
	CHECK(gen_outfile_open(&f, path));
	CHECK(strstr(f.tmp_path, "/.out.json.tmp-") != NULL);
	CHECK(gen_outfile_write(&f, "hello\n", 6));
	CHECK(gen_outfile_commit(&f));
	umask(old_mask);
	got = slurp(path);
	CHECK_STR(got, "hello\n");
	free(got);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640);
	CHECK(f.bytes == 6);
	CHECK(count_entries(dir) == 1);

	/* Abort: the target keeps its old content, the temporary is gone. */
	CHECK(gen_outfile_open(&f, path));
	CHECK(gen_outfile_write(&f, "partial", 7));
	gen_outfile_abort(&f);
	got = slurp(path);
	CHECK_STR(got, "hello\n");
	free(got);
	CHECK(count_entries(dir) == 1);

	/* A write error (file size limit standing in for a full disk). */
	getrlimit(RLIMIT_FSIZE, &old_limit);
	limit = old_limit;
	limit.rlim_cur = 4096;
	old_xfsz = signal(SIGXFSZ, SIG_IGN);
	setrlimit(RLIMIT_FSIZE, &limit);
	memset(chunk, 'x', sizeof(chunk));
	CHECK(gen_outfile_open(&f, path));
	CHECK(!gen_outfile_write(&f, chunk, sizeof(chunk)));
	CHECK(strstr(f.err, path) != NULL);
	CHECK(strstr(f.err, strerror(EFBIG)) != NULL);
	gen_outfile_abort(&f);
	setrlimit(RLIMIT_FSIZE, &old_limit);
	signal(SIGXFSZ, old_xfsz);
	got = slurp(path);
	CHECK_STR(got, "hello\n");
	free(got);
	CHECK(count_entries(dir) == 1);

	/* A missing directory names the path and the reason. */
	snprintf(path, sizeof(path), "%s/no/such/out.json", dir);
	CHECK(!gen_outfile_open(&f, path));
	CHECK(strstr(f.err, path) != NULL);
	CHECK(strstr(f.err, strerror(ENOENT)) != NULL);

	/* A directory as target: refused before anything is created. */
	snprintf(path, sizeof(path), "%s/sub", dir);
	CHECK(mkdir(path, 0700) == 0);
	CHECK(!gen_outfile_open(&f, path));
	CHECK(strstr(f.err, path) != NULL);
	CHECK(strstr(f.err, "it is a directory; expected a regular file") != NULL);
	CHECK(count_entries(dir) == 2);
	rmdir(path);

	snprintf(path, sizeof(path), "%s/out.json", dir);
	unlink(path);
	CHECK(rmdir(dir) == 0);
}

/* Write "data" to path through gen_outfile. */
static bool
write_whole(const char *path, const char *data)
{
	gen_outfile f;

	if (!gen_outfile_open(&f, path))
		return false;
	if (!gen_outfile_write(&f, data, strlen(data)) || !gen_outfile_commit(&f))
	{
		gen_outfile_abort(&f);
		return false;
	}
	return true;
}

/* Symbolic links, FIFOs, devices, modes and long names as OUT. */
TEST(test_outfile_targets)
{
	char		dir[] = "/tmp/test_generator.XXXXXX";
	char		path[512];
	char		dest[512];
	char		name[251];
	char		buf[64];
	char	   *got;
	gen_outfile f;
	struct stat st;
	int			rfd;
	ssize_t		n;

	CHECK(mkdtemp(dir) != NULL);

	/* An existing file keeps its mode, whatever the umask. */
	snprintf(path, sizeof(path), "%s/kept.json", dir);
	CHECK(write_whole(path, "old\n"));
	CHECK(chmod(path, 0600) == 0);
	CHECK(write_whole(path, "new\n"));
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);

	/* A link stays a link; the file it names gets the data and keeps its mode. */
	snprintf(dest, sizeof(dest), "%s/link.json", dir);
	CHECK(symlink("kept.json", dest) == 0);
	CHECK(write_whole(dest, "via link\n"));
	CHECK(lstat(dest, &st) == 0 && S_ISLNK(st.st_mode));
	got = slurp(path);
	CHECK_STR(got, "via link\n");
	free(got);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	CHECK(count_entries(dir) == 2);
	unlink(dest);

	/* A dangling link is refused and left alone. */
	CHECK(symlink("missing.json", dest) == 0);
	CHECK(!gen_outfile_open(&f, dest));
	CHECK(strstr(f.err, dest) != NULL);
	CHECK(strstr(f.err, "symbolic link to \"missing.json\", which does not exist") != NULL);
	CHECK(lstat(dest, &st) == 0 && S_ISLNK(st.st_mode));
	CHECK(count_entries(dir) == 2);
	unlink(dest);

	/* A link to a directory is refused. */
	CHECK(symlink(".", dest) == 0);
	CHECK(!gen_outfile_open(&f, dest));
	CHECK(strstr(f.err, "it is a symbolic link to a directory") != NULL);
	unlink(dest);

	/* A FIFO is written in place and stays a FIFO. */
	snprintf(dest, sizeof(dest), "%s/fifo", dir);
	CHECK(mkfifo(dest, 0600) == 0);
	rfd = open(dest, O_RDWR | O_NONBLOCK);	/* a reader, so opening never waits */
	CHECK(rfd >= 0);
	CHECK(write_whole(dest, "piped\n"));
	n = read(rfd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_STR(buf, "piped\n");
	close(rfd);
	CHECK(lstat(dest, &st) == 0 && S_ISFIFO(st.st_mode));
	CHECK(count_entries(dir) == 2);
	unlink(dest);

	/*
	 * A character device too, reached through a link so that a regression
	 * replaces the link, never /dev/null itself.
	 */
	CHECK(symlink("/dev/null", dest) == 0);
	CHECK(write_whole(dest, "gone\n"));
	CHECK(lstat(dest, &st) == 0 && S_ISLNK(st.st_mode));
	CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
	CHECK(count_entries(dir) == 2);
	unlink(dest);

	/* A 250-byte name: the temporary name is no longer than it. */
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(dest, sizeof(dest), "%s/%s", dir, name);
	CHECK(gen_outfile_open(&f, dest));
	CHECK(strlen(strrchr(f.tmp_path, '/') + 1) <= strlen(name));
	CHECK(gen_outfile_write(&f, "long\n", 5) && gen_outfile_commit(&f));
	got = slurp(dest);
	CHECK_STR(got, "long\n");
	free(got);
	CHECK(count_entries(dir) == 2);
	unlink(dest);

	unlink(path);
	CHECK(rmdir(dir) == 0);
}

int
main(void)
{
	RUN(test_integers);
	RUN(test_decimals);
	RUN(test_civil_known_days);
	RUN(test_civil_month_ends_and_leap_years);
	RUN(test_civil_walk);
	RUN(test_timestamps);
	RUN(test_json_escape);
	RUN(test_pools_cover_hard_text);
	RUN(test_rng);
	RUN(test_reader_rejects_bad_records);
	RUN(test_determinism);
	RUN(test_json_and_ndjson_hold_the_same_records);
	RUN(test_empty_documents);
	RUN(test_documents_are_valid);
	RUN(test_records_cover_the_mix);
	RUN(test_record_size_bound);
	RUN(test_buffer_too_small_and_sink_failure);
	RUN(test_outfile);
	RUN(test_outfile_targets);
	return unit_summary();
}
