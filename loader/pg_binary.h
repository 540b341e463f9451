/*
 * pg_binary.h - PostgreSQL binary COPY encoding.
 *
 * The layout is the one documented in the PostgreSQL manual ("COPY", "Binary
 * Format"): an 11-byte signature, a 32-bit flags field and a 32-bit header
 * extension length; then one tuple per row (16-bit field count, then per
 * field a 32-bit length followed by the value in the type's send/recv
 * format); then a 16-bit -1 trailer.  Every integer is big-endian.
 *
 * Writers come in pairs: *_len() says how many bytes a field takes (length
 * word included) so the caller can reserve a whole tuple once, and
 * pgb_put_*() writes it without further checks.  Parsers turn the loader's
 * text values (decimal numbers, RFC 3339 timestamps) into binary values and
 * say precisely what is wrong with a bad one.
 */
#ifndef LD_PG_BINARY_H
#define LD_PG_BINARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "slice.h"

/* A growable byte buffer that the put functions append to. */
typedef struct pgb_buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} pgb_buf;

void		pgb_buf_init(pgb_buf *buf);
void		pgb_buf_free(pgb_buf *buf);

/* Make room for extra more bytes; false on out-of-memory. */
bool		pgb_buf_reserve(pgb_buf *buf, size_t extra);

static inline void
pgb_put_bytes(pgb_buf *buf, const void *bytes, size_t len)
{
	memcpy(buf->data + buf->len, bytes, len);
	buf->len += len;
}

static inline void
pgb_put_uint16(pgb_buf *buf, uint16_t v)
{
	unsigned char *p = (unsigned char *) buf->data + buf->len;

	p[0] = (unsigned char) (v >> 8);
	p[1] = (unsigned char) v;
	buf->len += 2;
}

static inline void
pgb_put_uint32(pgb_buf *buf, uint32_t v)
{
	unsigned char *p = (unsigned char *) buf->data + buf->len;

	p[0] = (unsigned char) (v >> 24);
	p[1] = (unsigned char) (v >> 16);
	p[2] = (unsigned char) (v >> 8);
	p[3] = (unsigned char) v;
	buf->len += 4;
}

static inline void
pgb_put_uint64(pgb_buf *buf, uint64_t v)
{
	pgb_put_uint32(buf, (uint32_t) (v >> 32));
	pgb_put_uint32(buf, (uint32_t) v);
}

/* ---- stream framing ---- */

#define PGB_COPY_HEADER_LEN 19
#define PGB_COPY_TRAILER_LEN 2
#define PGB_TUPLE_HEADER_LEN 2

void		pgb_put_copy_header(pgb_buf *buf);
void		pgb_put_copy_trailer(pgb_buf *buf);

static inline void
pgb_put_tuple_header(pgb_buf *buf, int nfields)
{
	pgb_put_uint16(buf, (uint16_t) nfields);
}

/* ---- bigint (int8) ---- */

#define PGB_INT8_FIELD_LEN (4 + 8)

typedef enum pgb_int_status
{
	PGB_INT_OK,
	PGB_INT_SYNTAX,				/* not -?[0-9]+ */
	PGB_INT_RANGE,				/* outside int64 */
} pgb_int_status;

/* Parse -?[0-9]+ (leading zeros allowed) into a 64-bit signed integer. */
pgb_int_status pgb_int8_from_text(const char *text, size_t len, int64_t *out);

static inline void
pgb_put_int8_field(pgb_buf *buf, int64_t v)
{
	pgb_put_uint32(buf, 8);
	pgb_put_uint64(buf, (uint64_t) v);
}

/* ---- text ---- */

static inline size_t
pgb_text_field_len(size_t len)
{
	return 4 + len;
}

/* The bytes must be valid in the connection's client encoding, no NUL. */
static inline void
pgb_put_text_field(pgb_buf *buf, const char *text, size_t len)
{
	pgb_put_uint32(buf, (uint32_t) len);
	pgb_put_bytes(buf, text, len);
}

/* ---- numeric ---- */

#define PGB_NUMERIC_POS 0x0000
#define PGB_NUMERIC_NEG 0x4000
#define PGB_NUMERIC_MAX_GROUPS 32	/* base-10000 digits we can hold */

/*
 * A numeric in PostgreSQL's external binary form: value =
 * sign * sum(digits[i] * 10000^(weight - i)), shown with dscale fraction
 * digits.  Zero has no digits and weight 0; otherwise the first and last
 * digits are non-zero (the form the server itself produces).
 */
typedef struct pgb_numeric
{
	int16_t		ndigits;
	int16_t		weight;
	uint16_t	sign;
	int16_t		dscale;
	int16_t		digits[PGB_NUMERIC_MAX_GROUPS];
} pgb_numeric;

typedef enum pgb_numeric_status
{
	PGB_NUMERIC_OK,
	PGB_NUMERIC_SYNTAX,			/* not -?[0-9]+(\.[0-9]+)? */
	PGB_NUMERIC_EXPONENT,		/* 1e3, 1.5E-2: exponents are refused */
	PGB_NUMERIC_FRACTION_DIGITS,	/* more than max_fraction_digits */
	PGB_NUMERIC_INTEGER_DIGITS, /* more than max_integer_digits */
} pgb_numeric_status;

/*
 * Parse a plain decimal number -?[0-9]+(\.[0-9]+)?.  Integer digits are
 * counted without leading zeros ("0.5" has none), fraction digits as
 * written ("1.50" has two, and dscale 2).  Both maxima must keep the total
 * within PGB_NUMERIC_MAX_GROUPS base-10000 digits.
 */
pgb_numeric_status pgb_numeric_from_text(const char *text, size_t len,
										 int max_integer_digits,
										 int max_fraction_digits,
										 pgb_numeric *out);

static inline size_t
pgb_numeric_field_len(const pgb_numeric *num)
{
	return 4 + 8 + 2 * (size_t) num->ndigits;
}

void		pgb_put_numeric_field(pgb_buf *buf, const pgb_numeric *num);

/* ---- timestamptz ---- */

#define PGB_TIMESTAMPTZ_FIELD_LEN (4 + 8)

/*
 * Parse an RFC 3339 date-time with a mandatory offset:
 * YYYY-MM-DDTHH:MM:SS[.F{1,6}](Z|+hh:mm|-hh:mm), "T" and "Z" in either
 * case.  The calendar is checked (month lengths, leap years; no leap
 * seconds).  *out receives microseconds since 2000-01-01 00:00:00 UTC,
 * PostgreSQL's timestamptz.  On failure returns false and writes one
 * phrase saying what is wrong into why.
 */
bool		pgb_timestamptz_from_rfc3339(const char *text, size_t len,
										 int64_t *out, char *why, size_t whylen);

static inline void
pgb_put_timestamptz_field(pgb_buf *buf, int64_t usecs)
{
	pgb_put_uint32(buf, 8);
	pgb_put_uint64(buf, (uint64_t) usecs);
}

/* ---- text[] ---- */

#define PGB_TEXTOID 25

/* A one-dimensional text array, lower bound 1, no NULLs; empty: ndim 0. */
size_t		pgb_text_array_field_len(const ld_slice *elems, size_t count);
void		pgb_put_text_array_field(pgb_buf *buf, const ld_slice *elems,
									 size_t count);

/* ---- jsonb ---- */

#define PGB_JSONB_VERSION 1

static inline size_t
pgb_jsonb_field_len(size_t json_len)
{
	return 4 + 1 + json_len;
}

/* jsonb's binary form is a version byte followed by the JSON text. */
static inline void
pgb_put_jsonb_field(pgb_buf *buf, const char *json, size_t len)
{
	pgb_put_uint32(buf, (uint32_t) (len + 1));
	buf->data[buf->len++] = PGB_JSONB_VERSION;
	pgb_put_bytes(buf, json, len);
}

#endif
