/*
 * pg_binary.c - PostgreSQL binary COPY encoding and the text parsers that
 * feed it (bigint, numeric, timestamptz).
 */
#include "pg_binary.h"

#include <stdio.h>
#include <stdlib.h>

/* "PGCOPY\n\377\r\n\0": survives neither newline translation nor NUL-stripping. */
static const char copy_signature[11] = {
	'P', 'G', 'C', 'O', 'P', 'Y', '\n', '\377', '\r', '\n', '\0'
};

void
pgb_buf_init(pgb_buf *buf)
{
	buf->data = NULL;
	buf->len = 0;
	buf->cap = 0;
}

void
pgb_buf_free(pgb_buf *buf)
{
	free(buf->data);
	pgb_buf_init(buf);
}

bool
pgb_buf_reserve(pgb_buf *buf, size_t extra)
{
	size_t		need;
	size_t		cap;
	char	   *data;

	if (buf->cap - buf->len >= extra)
		return true;
	if (extra > SIZE_MAX / 2 - buf->len)
		return false;
	need = buf->len + extra;
	cap = buf->cap ? buf->cap : 4096;
	while (cap < need)
		cap *= 2;
	data = realloc(buf->data, cap);
	if (data == NULL)
		return false;
	buf->data = data;
	buf->cap = cap;
	return true;
}

void
pgb_put_copy_header(pgb_buf *buf)
{
	pgb_put_bytes(buf, copy_signature, sizeof(copy_signature));
	pgb_put_uint32(buf, 0);		/* flags: no OIDs */
	pgb_put_uint32(buf, 0);		/* header extension length */
}

void
pgb_put_copy_trailer(pgb_buf *buf)
{
	pgb_put_uint16(buf, 0xFFFF);
}

static inline bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

pgb_int_status
pgb_int8_from_text(const char *text, size_t len, int64_t *out)
{
	const char *p = text;
	const char *end = text + len;
	bool		negative = false;
	uint64_t	limit;
	uint64_t	acc = 0;

	if (p < end && *p == '-')
	{
		negative = true;
		p++;
	}
	if (p == end)
		return PGB_INT_SYNTAX;
	if (end - p <= 18)
	{
		/* up to 18 digits cannot overflow */
		for (; p < end; p++)
		{
			if (!is_digit(*p))
				return PGB_INT_SYNTAX;
			acc = acc * 10 + (uint64_t) (*p - '0');
		}
		*out = negative ? -(int64_t) acc : (int64_t) acc;
		return PGB_INT_OK;
	}
	limit = negative ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;
	for (; p < end; p++)
	{
		unsigned	d;

		if (!is_digit(*p))
			return PGB_INT_SYNTAX;
		d = (unsigned) (*p - '0');
		if (acc > (limit - d) / 10)
		{
			/* Keep checking the syntax: "99999999999999999999x" is a syntax error. */
			for (p++; p < end; p++)
				if (!is_digit(*p))
					return PGB_INT_SYNTAX;
			return PGB_INT_RANGE;
		}
		acc = acc * 10 + d;
	}
	if (negative)
		*out = acc == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) acc;
	else
		*out = (int64_t) acc;
	return PGB_INT_OK;
}

/* Value of n (at most 4) decimal digits. */
static int16_t
digits_value(const char *digits, int n)
{
	int			v = 0;

	for (int i = 0; i < n; i++)
		v = v * 10 + (digits[i] - '0');
	return (int16_t) v;
}

pgb_numeric_status
pgb_numeric_from_text(const char *text, size_t len, int max_integer_digits,
					  int max_fraction_digits, pgb_numeric *out)
{
	const char *p = text;
	const char *end = text + len;
	const char *int_start;
	const char *int_end;
	const char *frac_start = NULL;
	size_t		nint;
	size_t		nfrac = 0;
	bool		negative = false;
	int			int_groups;
	int			frac_groups;
	int			total;
	int			first;
	int			last;
	int			g = 0;
	int			weight;

	if (p < end && *p == '-')
	{
		negative = true;
		p++;
	}
	int_start = p;
	while (p < end && is_digit(*p))
		p++;
	int_end = p;
	if (int_end == int_start)
		return PGB_NUMERIC_SYNTAX;
	if (p < end && *p == '.')
	{
		frac_start = ++p;
		while (p < end && is_digit(*p))
			p++;
		nfrac = (size_t) (p - frac_start);
		if (nfrac == 0)
			return PGB_NUMERIC_SYNTAX;
	}
	if (p < end && (*p == 'e' || *p == 'E'))
		return PGB_NUMERIC_EXPONENT;
	if (p != end)
		return PGB_NUMERIC_SYNTAX;

	while (int_start < int_end && *int_start == '0')
		int_start++;
	nint = (size_t) (int_end - int_start);
	if (nfrac > (size_t) max_fraction_digits)
		return PGB_NUMERIC_FRACTION_DIGITS;
	if (nint > (size_t) max_integer_digits)
		return PGB_NUMERIC_INTEGER_DIGITS;

	int_groups = (int) ((nint + 3) / 4);
	frac_groups = (int) ((nfrac + 3) / 4);
	if (int_groups + frac_groups > PGB_NUMERIC_MAX_GROUPS)
		return nfrac > nint ? PGB_NUMERIC_FRACTION_DIGITS : PGB_NUMERIC_INTEGER_DIGITS;

	/* Integer part: the first group takes the leftover digits. */
	if (int_groups > 0)
	{
		int			lead = (int) (nint - 4 * (size_t) (int_groups - 1));
		const char *q = int_start + lead;

		out->digits[g++] = digits_value(int_start, lead);
		for (; q < int_end; q += 4)
			out->digits[g++] = digits_value(q, 4);
	}
	/* Fraction part: groups of four, the last one padded with zeros. */
	for (size_t i = 0; i < nfrac; i += 4)
	{
		static const int16_t scale[5] = {0, 1000, 100, 10, 1};
		int			n = (int) (nfrac - i < 4 ? nfrac - i : 4);

		out->digits[g++] = (int16_t) (digits_value(frac_start + i, n) * scale[n]);
	}
	total = g;
	weight = int_groups - 1;

	first = 0;
	while (first < total && out->digits[first] == 0)
	{
		first++;
		weight--;
	}
	last = total;
	while (last > first && out->digits[last - 1] == 0)
		last--;

	out->dscale = (int16_t) nfrac;
	if (first == last)
	{
		/* zero, whatever its sign and spelling */
		out->ndigits = 0;
		out->weight = 0;
		out->sign = PGB_NUMERIC_POS;
		return PGB_NUMERIC_OK;
	}
	if (first > 0)
		memmove(out->digits, out->digits + first, sizeof(int16_t) * (size_t) (last - first));
	out->ndigits = (int16_t) (last - first);
	out->weight = (int16_t) weight;
	out->sign = negative ? PGB_NUMERIC_NEG : PGB_NUMERIC_POS;
	return PGB_NUMERIC_OK;
}

void
pgb_put_numeric_field(pgb_buf *buf, const pgb_numeric *num)
{
	pgb_put_uint32(buf, (uint32_t) (8 + 2 * num->ndigits));
	pgb_put_uint16(buf, (uint16_t) num->ndigits);
	pgb_put_uint16(buf, (uint16_t) num->weight);
	pgb_put_uint16(buf, num->sign);
	pgb_put_uint16(buf, (uint16_t) num->dscale);
	for (int i = 0; i < num->ndigits; i++)
		pgb_put_uint16(buf, (uint16_t) num->digits[i]);
}

/* ---- timestamptz ---- */

static const char *const month_names[12] = {
	"January", "February", "March", "April", "May", "June", "July",
	"August", "September", "October", "November", "December"
};

static const int days_before_month[12] = {
	0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334
};

static bool
is_leap_year(int64_t year)
{
	return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

static int
days_in_month(int64_t year, int month)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	return month == 2 && is_leap_year(year) ? 29 : days[month - 1];
}

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	if (a % b != 0 && (a < 0) != (b < 0))
		q--;
	return q;
}

/*
 * Days from 0001-01-01 to the given date in the proleptic Gregorian
 * calendar (negative before it; year 0 is 1 BC).
 */
static int64_t
day_number(int64_t year, int month, int day)
{
	int64_t		y = year - 1;
	int64_t		days;

	days = 365 * y + floor_div(y, 4) - floor_div(y, 100) + floor_div(y, 400);
	days += days_before_month[month - 1];
	if (month > 2 && is_leap_year(year))
		days++;
	return days + day - 1;
}

/* Parse exactly n digits at p; -1 when one is not a digit. */
static int
fixed_digits(const char *p, int n)
{
	int			v = 0;

	for (int i = 0; i < n; i++)
	{
		if (!is_digit(p[i]))
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

#define RFC3339_SHAPE "expected YYYY-MM-DDTHH:MM:SS[.ffffff] followed by Z or an offset +hh:mm/-hh:mm"

bool
pgb_timestamptz_from_rfc3339(const char *text, size_t len, int64_t *out,
							 char *why, size_t whylen)
{
	const char *p = text;
	const char *end = text + len;
	int			year;
	int			month;
	int			day;
	int			hour;
	int			minute;
	int			second;
	int64_t		usec = 0;
	int			offset_sign = 0;
	int			offset_hour = 0;
	int			offset_minute = 0;
	int64_t		seconds;

	/* YYYY-MM-DDTHH:MM:SS is 19 bytes; an offset needs at least 1 more. */
	if (len < 19 || p[4] != '-' || p[7] != '-' ||
		(p[10] != 'T' && p[10] != 't') || p[13] != ':' || p[16] != ':')
	{
		snprintf(why, whylen, RFC3339_SHAPE);
		return false;
	}
	year = fixed_digits(p, 4);
	month = fixed_digits(p + 5, 2);
	day = fixed_digits(p + 8, 2);
	hour = fixed_digits(p + 11, 2);
	minute = fixed_digits(p + 14, 2);
	second = fixed_digits(p + 17, 2);
	if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0)
	{
		snprintf(why, whylen, RFC3339_SHAPE);
		return false;
	}
	p += 19;

	if (p < end && *p == '.')
	{
		const char *f = ++p;
		int			n;

		while (p < end && is_digit(*p))
			p++;
		n = (int) (p - f);
		if (n == 0 || n > 6)
		{
			snprintf(why, whylen, "the fraction of a second must have 1 to 6 digits, it has %d", n);
			return false;
		}
		for (int i = 0; i < 6; i++)
			usec = usec * 10 + (i < n ? f[i] - '0' : 0);
	}

	if (p < end && (*p == 'Z' || *p == 'z'))
		p++;
	else if (p < end && (*p == '+' || *p == '-'))
	{
		offset_sign = *p == '+' ? 1 : -1;
		if (end - p < 6 || p[3] != ':' ||
			(offset_hour = fixed_digits(p + 1, 2)) < 0 ||
			(offset_minute = fixed_digits(p + 4, 2)) < 0)
		{
			snprintf(why, whylen, "the offset must be Z, +hh:mm or -hh:mm");
			return false;
		}
		p += 6;
	}
	else
	{
		snprintf(why, whylen, "missing time zone offset: expected Z, +hh:mm or -hh:mm after the time");
		return false;
	}
	if (p != end)
	{
		snprintf(why, whylen, "unexpected characters after the time zone offset");
		return false;
	}

	if (month < 1 || month > 12)
	{
		snprintf(why, whylen, "month %02d is out of range (01-12)", month);
		return false;
	}
	if (day < 1 || day > days_in_month(year, month))
	{
		snprintf(why, whylen, "day %02d is out of range for %s %04d (01-%02d)",
				 day, month_names[month - 1], year, days_in_month(year, month));
		return false;
	}
	if (hour > 23)
	{
		snprintf(why, whylen, "hour %02d is out of range (00-23)", hour);
		return false;
	}
	if (minute > 59)
	{
		snprintf(why, whylen, "minute %02d is out of range (00-59)", minute);
		return false;
	}
	if (second > 59)
	{
		snprintf(why, whylen, second == 60 ? "leap second 60 is not supported (00-59)"
				 : "second %02d is out of range (00-59)", second);
		return false;
	}
	if (offset_hour > 23 || offset_minute > 59)
	{
		snprintf(why, whylen, "offset %c%02d:%02d is out of range (hours 00-23, minutes 00-59)",
				 offset_sign > 0 ? '+' : '-', offset_hour, offset_minute);
		return false;
	}

	seconds = (day_number(year, month, day) - day_number(2000, 1, 1)) * 86400
		+ hour * 3600 + minute * 60 + second
		- offset_sign * (offset_hour * 3600 + offset_minute * 60);
	*out = seconds * 1000000 + usec;
	return true;
}

/* ---- text[] ---- */

size_t
pgb_text_array_field_len(const ld_slice *elems, size_t count)
{
	size_t		len = 4 + 12;	/* length word; ndim, flags, element type */

	if (count == 0)
		return len;
	len += 8;					/* dimension size, lower bound */
	for (size_t i = 0; i < count; i++)
		len += 4 + elems[i].len;
	return len;
}

void
pgb_put_text_array_field(pgb_buf *buf, const ld_slice *elems, size_t count)
{
	size_t		len = pgb_text_array_field_len(elems, count);

	pgb_put_uint32(buf, (uint32_t) (len - 4));
	pgb_put_uint32(buf, count > 0 ? 1 : 0); /* ndim */
	pgb_put_uint32(buf, 0);		/* has-nulls flag */
	pgb_put_uint32(buf, PGB_TEXTOID);
	if (count == 0)
		return;
	pgb_put_uint32(buf, (uint32_t) count);
	pgb_put_uint32(buf, 1);		/* lower bound */
	for (size_t i = 0; i < count; i++)
	{
		pgb_put_uint32(buf, (uint32_t) elems[i].len);
		pgb_put_bytes(buf, elems[i].ptr, elems[i].len);
	}
}
