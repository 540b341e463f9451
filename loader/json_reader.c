/*
 * json_reader.c - strict streaming parser for order records (RFC 8259).
 *
 * Structure: jr_next() walks the top level (array or ndjson lines) as a
 * small state machine that consumes separators and blanks as it goes, and
 * parses each record in one go with parse_record().  A record is only
 * consumed once complete; when the buffer ends inside one, everything
 * parsed of it is forgotten and the caller hands it over again with more
 * bytes (JR_NEED_MORE).  Record parsing never allocates: decoded strings go
 * to a scratch area at least as large as the bytes available, since
 * decoding never makes a string longer.
 *
 * Hot path: string bodies are skipped eight bytes at a time while they hold
 * only printable ASCII without quotes or backslashes.
 */
#include "json_reader.h"
#include "text.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const jr_field_names[JR_NFIELDS] = {
	"id", "customer_id", "customer_name", "amount", "currency",
	"created_at", "tags", "attributes"
};

#define ALL_FIELDS ((1u << JR_NFIELDS) - 1)

enum
{
	ST_START,					/* before the first non-blank byte */
	ST_ARRAY_FIRST,				/* after '[' */
	ST_ARRAY_AFTER,				/* after a record inside the array */
	ST_ARRAY_ELEM,				/* after ',' inside the array */
	ST_ARRAY_DONE,				/* after the closing ']' */
	ST_NDJSON_LINE,				/* at the start of an ndjson line */
	ST_NDJSON_AFTER,			/* after an ndjson record, before its newline */
	ST_END,
	ST_FAILED
};

/* Parse results inside a record. */
#define JP_OK 0
#define JP_NEED 1
#define JP_ERR 2

/* State of one parse attempt of one record. */
typedef struct jp
{
	const unsigned char *p;
	const unsigned char *end;
	bool		eof;
	bool		ndjson;
	jr_reader  *r;
	char	   *out;			/* next free byte of r->scratch */
	const char *key;			/* the key whose value is being parsed */
	size_t		ntags;
} jp;

static inline bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* ---- positions and errors ---- */

/* Move the committed position over data[from, to). */
static void
advance(jr_reader *r, const unsigned char *from, const unsigned char *to)
{
	const unsigned char *p = from;
	const unsigned char *nl;

	while (p < to && (nl = memchr(p, '\n', (size_t) (to - p))) != NULL)
	{
		r->line++;
		r->line_start = r->offset + (uint64_t) (nl + 1 - from);
		p = nl + 1;
	}
	r->offset += (uint64_t) (to - from);
}

/* Remember the committed position as the base for positions after ptr. */
static void
snapshot(jr_reader *r, const unsigned char *ptr, uint64_t record)
{
	r->snap_ptr = (const char *) ptr;
	r->snap_offset = r->offset;
	r->snap_line = r->line;
	r->snap_line_start = r->line_start;
	r->snap_record = record;
}

static void
set_position(jr_reader *r, const char *at)
{
	const char *p = r->snap_ptr;
	const char *nl;
	uint64_t	line = r->snap_line;
	uint64_t	line_start = r->snap_line_start;
	uint64_t	offset = r->snap_offset + (uint64_t) (at - r->snap_ptr);

	while (p < at && (nl = memchr(p, '\n', (size_t) (at - p))) != NULL)
	{
		line++;
		line_start = r->snap_offset + (uint64_t) (nl + 1 - r->snap_ptr);
		p = nl + 1;
	}
	r->error.has_position = true;
	r->error.record = r->snap_record;
	r->error.offset = offset;
	r->error.line = line;
	r->error.column = offset - line_start + 1;
}

static void
vfail(jr_reader *r, const char *key, const char *at, const char *fmt, va_list ap)
{
	char	   *msg = r->error.message;
	size_t		size = sizeof(r->error.message);
	int			n = 0;

	if (key != NULL)
		n = snprintf(msg, size, "\"%s\": ", key);
	if (n < 0 || (size_t) n >= size)
		n = 0;
	vsnprintf(msg + n, size - (size_t) n, fmt, ap);
	r->error.out_of_memory = false;
	set_position(r, at);
	r->state = ST_FAILED;
}

static int	jp_fail(jp *s, const unsigned char *at, const char *fmt, ...)
			__attribute__((format(printf, 3, 4)));

static int
jp_fail(jp *s, const unsigned char *at, const char *fmt, ...)
{
	va_list		ap;

	va_start(ap, fmt);
	vfail(s->r, s->key, (const char *) at, fmt, ap);
	va_end(ap);
	return JP_ERR;
}

void
jr_fail_at(jr_reader *r, const char *at, const char *fmt, ...)
{
	va_list		ap;

	va_start(ap, fmt);
	vfail(r, NULL, at, fmt, ap);
	va_end(ap);
}

/* The input ended where more was needed. */
static int
jp_end(jp *s)
{
	if (!s->eof)
		return JP_NEED;
	return jp_fail(s, s->end, "unexpected end of input inside the record (truncated file?)");
}

#define NEED_BYTE(s) \
	do { if ((s)->p == (s)->end) return jp_end(s); } while (0)

void
jr_excerpt(const char *text, size_t len, char *out, size_t outlen)
{
	const size_t max = 40;
	size_t		n = len;
	size_t		o = 0;
	bool		cut = false;

	if (outlen == 0)
		return;
	if (n > max)
	{
		n = max;
		while (n > 0 && ((unsigned char) text[n] & 0xC0) == 0x80)
			n--;
		cut = true;
	}
	for (size_t i = 0; i < n;)
	{
		unsigned char c = (unsigned char) text[i];
		bool		control = c < 0x20 || c == 0x7F;
		bool		short_escape = c == '\n' || c == '\r' || c == '\t';
		size_t		take = 1;	/* input bytes of the character */
		size_t		need;		/* output bytes it becomes */

		if (c >= 0x80 && (take = tp_utf8_char_length((const unsigned char *) text + i, n - i)) == 0)
			take = 1;
		need = short_escape ? 2 : control ? 6 : take;
		/*
		 * Whole characters only: escapes may fill the room before the
		 * text ends, and "..." and the NUL must still fit after them.
		 */
		if (o + need + 4 > outlen)
		{
			cut = true;
			break;
		}
		if (short_escape)
		{
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		}
		else if (control)
			o += (size_t) snprintf(out + o, outlen - o, "\\u%04x", c);
		else
		{
			memcpy(out + o, text + i, take);
			o += take;
		}
		i += take;
	}
	if (cut && o + 4 <= outlen)
	{
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

/* "'x'", "byte 0xc3" or "end of input", for "got ..." in messages. */
static const char *
describe(const jp *s, const unsigned char *at, char *buf, size_t buflen)
{
	if (at >= s->end)
		return "end of input";
	if (*at > 0x20 && *at < 0x7F)
		snprintf(buf, buflen, "'%c'", *at);
	else
		snprintf(buf, buflen, "byte 0x%02x", *at);
	return buf;
}

/* ---- lexical pieces ---- */

static inline int
skip_ws(jp *s)
{
	const unsigned char *p = s->p;

	/* everything significant is above ' ': the usual case costs one test */
	if (p < s->end && *p > ' ')
		return JP_OK;
	while (p < s->end)
	{
		unsigned char c = *p;

		if (c == ' ' || c == '\t' || c == '\r')
			p++;
		else if (c == '\n')
		{
			if (s->ndjson)
				return jp_fail(s, p, "line break inside a record (ndjson holds one record per line)");
			p++;
		}
		else
			break;
	}
	s->p = p;
	return JP_OK;
}

#define SKIP_WS(s) \
	do { if (skip_ws(s) != JP_OK) return JP_ERR; } while (0)

/*
 * Length of the well-formed UTF-8 sequence at p (a byte >= 0x80), 0 when
 * the buffer ends inside it, or -(index of the bad byte + 1).
 */
static int
utf8_sequence(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0];
	unsigned char lo = 0x80;
	unsigned char hi = 0xBF;
	int			n;

	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c == 0xE0)
	{
		n = 3;
		lo = 0xA0;				/* no overlong forms */
	}
	else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
		n = 3;
	else if (c == 0xED)
	{
		n = 3;
		hi = 0x9F;				/* no UTF-16 surrogates */
	}
	else if (c == 0xF0)
	{
		n = 4;
		lo = 0x90;
	}
	else if (c >= 0xF1 && c <= 0xF3)
		n = 4;
	else if (c == 0xF4)
	{
		n = 4;
		hi = 0x8F;				/* nothing above U+10FFFF */
	}
	else
		return -1;
	for (int i = 1; i < n; i++)
	{
		if (p + i >= end)
			return 0;
		if (p[i] < lo || p[i] > hi)
			return -(i + 1);
		lo = 0x80;
		hi = 0xBF;
	}
	return n;
}

static int
hex4(const unsigned char *p)
{
	int			v = 0;

	for (int i = 0; i < 4; i++)
	{
		unsigned char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static char *
put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80)
		*o++ = (char) cp;
	else if (cp < 0x800)
	{
		*o++ = (char) (0xC0 | (cp >> 6));
		*o++ = (char) (0x80 | (cp & 0x3F));
	}
	else if (cp < 0x10000)
	{
		*o++ = (char) (0xE0 | (cp >> 12));
		*o++ = (char) (0x80 | ((cp >> 6) & 0x3F));
		*o++ = (char) (0x80 | (cp & 0x3F));
	}
	else
	{
		*o++ = (char) (0xF0 | (cp >> 18));
		*o++ = (char) (0x80 | ((cp >> 12) & 0x3F));
		*o++ = (char) (0x80 | ((cp >> 6) & 0x3F));
		*o++ = (char) (0x80 | (cp & 0x3F));
	}
	return o;
}

/*
 * Bytes that end a run of plain string content: control bytes, '"', '\\'
 * and everything non-ASCII (checked as UTF-8 separately).
 */
static inline bool
is_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/*
 * Skip plain string bytes from p.  Eight bytes at a time: the mask has the
 * high bit set in each byte that is not plain.  Borrows can only spread
 * upwards from a byte that is itself not plain, so on a little-endian
 * machine the lowest set bit marks exactly the first such byte.
 */
static inline const unsigned char *
skip_plain(const unsigned char *p, const unsigned char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint64_t ones = 0x0101010101010101ULL;
	const uint64_t highs = 0x8080808080808080ULL;

	while (end - p >= 8)
	{
		uint64_t	x;
		uint64_t	q;
		uint64_t	b;
		uint64_t	mask;

		memcpy(&x, p, 8);
		q = x ^ (ones * '"');
		b = x ^ (ones * '\\');
		mask = (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & highs;
		if (mask != 0)
			return p + (__builtin_ctzll(mask) >> 3);
		p += 8;
	}
#endif
	while (p < end && is_plain(*p))
		p++;
	return p;
}

/*
 * Decode the \u escape(s) at p ("\uXXXX", or a surrogate pair as two
 * escapes) into *cp; returns the escape's length, 0 if the buffer ends
 * first, -1 after reporting an error.
 */
static int
unicode_escape(jp *s, const unsigned char *p, unsigned *cp)
{
	const unsigned char *end = s->end;
	int			hi;
	int			lo;

	if (end - p < 6)
		return 0;
	if ((hi = hex4(p + 2)) < 0)
		return jp_fail(s, p, "invalid escape: \\u must be followed by 4 hex digits"), -1;
	if (hi >= 0xDC00 && hi <= 0xDFFF)
		return jp_fail(s, p, "lone low surrogate \\u%04X (a low surrogate must follow a high one)", (unsigned) hi), -1;
	if (hi < 0xD800 || hi > 0xDBFF)
	{
		if (hi == 0)
			return jp_fail(s, p, "\\u0000 (NUL) is not allowed: PostgreSQL cannot store it"), -1;
		*cp = (unsigned) hi;
		return 6;
	}
	if (end - p < 7)
		return 0;
	if (p[6] != '\\')
		return jp_fail(s, p, "lone high surrogate \\u%04X (it must be followed by a \\uDC00-\\uDFFF escape)", (unsigned) hi), -1;
	if (end - p < 8)
		return 0;
	if (p[7] != 'u')
		return jp_fail(s, p, "lone high surrogate \\u%04X (it must be followed by a \\uDC00-\\uDFFF escape)", (unsigned) hi), -1;
	if (end - p < 12)
		return 0;
	lo = hex4(p + 8);
	if (lo < 0)
		return jp_fail(s, p + 6, "invalid escape: \\u must be followed by 4 hex digits"), -1;
	if (lo < 0xDC00 || lo > 0xDFFF)
		return jp_fail(s, p, "lone high surrogate \\u%04X (followed by \\u%04X, not by a \\uDC00-\\uDFFF escape)",
					   (unsigned) hi, (unsigned) lo), -1;
	*cp = 0x10000 + (((unsigned) hi - 0xD800) << 10) + ((unsigned) lo - 0xDC00);
	return 12;
}

/*
 * Parse the string whose opening quote is at s->p.  decode: resolve escapes
 * into *out (pointing into the input when there are none, else into the
 * scratch area); otherwise only validate, and *out (if not NULL) gets the
 * raw body.  Rejects control characters, invalid UTF-8, bad escapes, lone
 * surrogates and \u0000.
 */
static int
parse_string(jp *s, ld_slice *out, bool decode)
{
	const unsigned char *p = s->p + 1;
	const unsigned char *end = s->end;
	const unsigned char *run = p;	/* first byte not yet copied to o */
	char	   *o = NULL;		/* scratch output once an escape is seen */
	char	   *o_start = NULL;

	for (;;)
	{
		unsigned char c;

		p = skip_plain(p, end);
		if (p == end)
			return jp_end(s);
		c = *p;
		if (c == '"')
		{
			if (o != NULL)
			{
				memcpy(o, run, (size_t) (p - run));
				o += p - run;
				out->ptr = o_start;
				out->len = (size_t) (o - o_start);
				s->out = o;
			}
			else if (out != NULL)
			{
				out->ptr = (const char *) s->p + 1;
				out->len = (size_t) (p - (s->p + 1));
			}
			s->p = p + 1;
			return JP_OK;
		}
		if (c == '\\')
		{
			char		ch;

			if (decode && o == NULL)
				o = o_start = s->out;
			if (o != NULL)
			{
				memcpy(o, run, (size_t) (p - run));
				o += p - run;
			}
			if (end - p < 2)
				return jp_end(s);
			switch (p[1])
			{
				case '"':
				case '\\':
				case '/':
					ch = (char) p[1];
					break;
				case 'b':
					ch = '\b';
					break;
				case 'f':
					ch = '\f';
					break;
				case 'n':
					ch = '\n';
					break;
				case 'r':
					ch = '\r';
					break;
				case 't':
					ch = '\t';
					break;
				case 'u':
					{
						unsigned	cp;
						int			n = unicode_escape(s, p, &cp);

						if (n < 0)
							return JP_ERR;
						if (n == 0)
							return jp_end(s);
						if (o != NULL)
							o = put_utf8(o, cp);
						p += n;
						run = p;
						continue;
					}
				default:
					{
						char		got[16];

						return jp_fail(s, p, "invalid escape: '\\' followed by %s",
									   describe(s, p + 1, got, sizeof(got)));
					}
			}
			if (o != NULL)
				*o++ = ch;
			p += 2;
			run = p;
			continue;
		}
		if (c < 0x20)
			return jp_fail(s, p, "control character U+%04X must be escaped inside a string", c);
		/* c >= 0x80 */
		{
			int			n = utf8_sequence(p, end);

			if (n == 0)
				return jp_end(s);
			if (n < 0)
			{
				char		bytes[24];
				int			bad = -n;
				size_t		k = 0;

				for (int i = 0; i < bad; i++)
					k += (size_t) snprintf(bytes + k, sizeof(bytes) - k, "%s0x%02x", i ? " " : "", p[i]);
				return jp_fail(s, p, "invalid UTF-8: %s sequence %s",
							   bad == 1 ? "byte cannot start a" : "malformed", bytes);
			}
			p += n;
		}
	}
}

/*
 * Parse the number at s->p (JSON grammar).  check_range: also refuse what
 * PostgreSQL's numeric (and so jsonb) cannot hold: more than 16383 digits
 * after the point, or a magnitude of 10^131072 or more.
 */
static int
parse_number(jp *s, ld_slice *out, bool check_range)
{
	const unsigned char *start = s->p;
	const unsigned char *p = start;
	const unsigned char *end = s->end;
	const unsigned char *int_start;
	const unsigned char *int_end;
	const unsigned char *frac_start = NULL;
	const unsigned char *frac_end = NULL;
	int64_t		exponent = 0;
	char		got[16];

	if (*p == '-')
		p++;
	if (p == end)
		return jp_end(s);
	int_start = p;
	if (*p == '0')
	{
		p++;
		if (p < end && is_digit(*p))
			return jp_fail(s, start, "invalid number: leading zeros are not allowed");
	}
	else if (is_digit(*p))
	{
		while (p < end && is_digit(*p))
			p++;
	}
	else
		return jp_fail(s, start, "invalid number: expected a digit after '-', got %s",
					   describe(s, p, got, sizeof(got)));
	int_end = p;
	if (p == end)
		return jp_end(s);
	if (*p == '.')
	{
		p++;
		if (p == end)
			return jp_end(s);
		if (!is_digit(*p))
			return jp_fail(s, start, "invalid number: expected a digit after '.', got %s",
						   describe(s, p, got, sizeof(got)));
		frac_start = p;
		while (p < end && is_digit(*p))
			p++;
		frac_end = p;
		if (p == end)
			return jp_end(s);
	}
	if (*p == 'e' || *p == 'E')
	{
		bool		negative = false;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			negative = *p++ == '-';
		if (p == end)
			return jp_end(s);
		if (!is_digit(*p))
			return jp_fail(s, start, "invalid number: expected a digit in the exponent, got %s",
						   describe(s, p, got, sizeof(got)));
		while (p < end && is_digit(*p))
		{
			/* saturate past PG's limit, which then rejects it */
			if (exponent < INT_MAX)
				exponent = exponent * 10 + (*p - '0');
			p++;
		}
		if (p == end)
			return jp_end(s);
		if (negative)
			exponent = -exponent;
	}
	if (check_range)
	{
		int64_t		nfrac = frac_start ? frac_end - frac_start : 0;
		int64_t		nint = (int_end - int_start == 1 && *int_start == '0') ? 0 : int_end - int_start;
		int64_t		lead;		/* decimal exponent of the leading digit */
		bool		zero = false;

		if (nint > 0)
			lead = nint - 1 + exponent;
		else
		{
			const unsigned char *f = frac_start;

			while (f != NULL && f < frac_end && *f == '0')
				f++;
			zero = f == NULL || f == frac_end;
			lead = zero ? 0 : -(f - frac_start + 1) + exponent;
		}
		/* numeric_in refuses |exponent| >= INT_MAX / 2 even for a zero */
		if (exponent >= INT_MAX / 2 || exponent <= -(INT_MAX / 2) ||
			nfrac - exponent > 16383 || (!zero && lead > 131071))
		{
			char		text[64];

			jr_excerpt((const char *) start, (size_t) (p - start), text, sizeof(text));
			return jp_fail(s, start, "number %s is outside the range of PostgreSQL's numeric type", text);
		}
	}
	if (out != NULL)
	{
		out->ptr = (const char *) start;
		out->len = (size_t) (p - start);
	}
	s->p = p;
	return JP_OK;
}

static int
parse_literal(jp *s)
{
	const char *word = *s->p == 't' ? "true" : *s->p == 'f' ? "false" : "null";
	size_t		n = strlen(word);

	for (size_t i = 1; i < n; i++)
	{
		if (s->p + i == s->end)
			return jp_end(s);
		if (s->p[i] != (unsigned char) word[i])
			return jp_fail(s, s->p, "invalid literal: expected %s", word);
	}
	s->p += n;
	return JP_OK;
}

/* At an object member: "key" ws ':' ws; any key is fine. */
static int
member_key(jp *s)
{
	char		got[16];
	int			rc;

	NEED_BYTE(s);
	if (*s->p != '"')
		return jp_fail(s, s->p, "expected a key (a string) in an object, got %s",
					   describe(s, s->p, got, sizeof(got)));
	if ((rc = parse_string(s, NULL, false)) != JP_OK)
		return rc;
	SKIP_WS(s);
	NEED_BYTE(s);
	if (*s->p != ':')
		return jp_fail(s, s->p, "expected ':' after an object key, got %s",
					   describe(s, s->p, got, sizeof(got)));
	s->p++;
	SKIP_WS(s);
	return JP_OK;
}

/*
 * Validate any JSON value at s->p, leaving s->p after it.  Iterative, with
 * the nesting kept in r->stack (JR_MAX_DEPTH levels).
 */
static int
skip_value(jp *s, bool check_range)
{
	unsigned char *stack = s->r->stack;
	int			depth = 0;
	char		got[16];
	int			rc = JP_OK;

	for (;;)
	{
		bool		closed = false;

		/* a value starts here */
		NEED_BYTE(s);
		switch (*s->p)
		{
			case '{':
			case '[':
				if (depth == JR_MAX_DEPTH)
					return jp_fail(s, s->p, "nesting deeper than %d levels", JR_MAX_DEPTH);
				stack[depth++] = *s->p == '{' ? '}' : ']';
				s->p++;
				SKIP_WS(s);
				NEED_BYTE(s);
				if (*s->p == stack[depth - 1])
				{
					s->p++;
					depth--;
					closed = true;
				}
				else if (stack[depth - 1] == '}')
				{
					if ((rc = member_key(s)) != JP_OK)
						return rc;
					continue;
				}
				else
					continue;
				break;
			case '"':
				rc = parse_string(s, NULL, false);
				break;
			case '-':
			case '0':
			case '1':
			case '2':
			case '3':
			case '4':
			case '5':
			case '6':
			case '7':
			case '8':
			case '9':
				rc = parse_number(s, NULL, check_range);
				break;
			case 't':
			case 'f':
			case 'n':
				rc = parse_literal(s);
				break;
			default:
				return jp_fail(s, s->p, "expected a JSON value, got %s",
							   describe(s, s->p, got, sizeof(got)));
		}
		if (!closed && rc != JP_OK)
			return rc;

		/* after a value: close containers or move to the next element */
		for (;;)
		{
			unsigned char close;

			if (depth == 0)
				return JP_OK;
			close = stack[depth - 1];
			SKIP_WS(s);
			NEED_BYTE(s);
			if (*s->p == close)
			{
				s->p++;
				depth--;
				continue;
			}
			if (*s->p != ',')
				return jp_fail(s, s->p, "expected ',' or '%c', got %s", close,
							   describe(s, s->p, got, sizeof(got)));
			s->p++;
			SKIP_WS(s);
			NEED_BYTE(s);
			if (*s->p == close)
				return jp_fail(s, s->p, "trailing comma before '%c'", close);
			if (close == '}' && (rc = member_key(s)) != JP_OK)
				return rc;
			break;
		}
	}
}

/* A value of the wrong JSON type at s->p: parse it to show it, then fail. */
static int
wrong_type(jp *s, const char *expected)
{
	const unsigned char *start = s->p;
	char		text[64];
	int			rc;

	if ((rc = skip_value(s, false)) != JP_OK)
		return rc;
	jr_excerpt((const char *) start, (size_t) (s->p - start), text, sizeof(text));
	return jp_fail(s, start, "expected %s, got %s", expected, text);
}

static int
parse_tags(jp *s)
{
	jr_reader  *r = s->r;
	char		got[16];
	int			rc;

	s->ntags = 0;
	s->p++;						/* '[' */
	SKIP_WS(s);
	NEED_BYTE(s);
	if (*s->p == ']')
	{
		s->p++;
		return JP_OK;
	}
	for (;;)
	{
		if (*s->p != '"')
		{
			const unsigned char *start = s->p;
			char		text[64];

			if ((rc = skip_value(s, false)) != JP_OK)
				return rc;
			jr_excerpt((const char *) start, (size_t) (s->p - start), text, sizeof(text));
			return jp_fail(s, start, "element %zu must be a string, got %s", s->ntags + 1, text);
		}
		if (s->ntags == r->tags_cap)
		{
			size_t		cap = r->tags_cap ? r->tags_cap * 2 : 16;
			ld_slice   *tags = realloc(r->tags, cap * sizeof(ld_slice));

			if (tags == NULL)
			{
				jp_fail(s, s->p, "out of memory");
				r->error.out_of_memory = true;
				return JP_ERR;
			}
			r->tags = tags;
			r->tags_cap = cap;
		}
		if ((rc = parse_string(s, &r->tags[s->ntags], true)) != JP_OK)
			return rc;
		s->ntags++;
		SKIP_WS(s);
		NEED_BYTE(s);
		if (*s->p == ']')
		{
			s->p++;
			return JP_OK;
		}
		if (*s->p != ',')
			return jp_fail(s, s->p, "expected ',' or ']' after element %zu, got %s",
						   s->ntags, describe(s, s->p, got, sizeof(got)));
		s->p++;
		SKIP_WS(s);
		NEED_BYTE(s);
		if (*s->p == ']')
			return jp_fail(s, s->p, "trailing comma before ']'");
	}
}

static int
field_of(const char *key, size_t len)
{
	switch (len)
	{
		case 2:
			return memcmp(key, "id", 2) == 0 ? JR_ID : -1;
		case 4:
			return memcmp(key, "tags", 4) == 0 ? JR_TAGS : -1;
		case 6:
			return memcmp(key, "amount", 6) == 0 ? JR_AMOUNT : -1;
		case 8:
			return memcmp(key, "currency", 8) == 0 ? JR_CURRENCY : -1;
		case 10:
			if (memcmp(key, "created_at", 10) == 0)
				return JR_CREATED_AT;
			return memcmp(key, "attributes", 10) == 0 ? JR_ATTRIBUTES : -1;
		case 11:
			return memcmp(key, "customer_id", 11) == 0 ? JR_CUSTOMER_ID : -1;
		case 13:
			return memcmp(key, "customer_name", 13) == 0 ? JR_CUSTOMER_NAME : -1;
		default:
			return -1;
	}
}

static int
parse_value(jp *s, jr_field f, jr_record *rec)
{
	unsigned char c = *s->p;
	int			rc;

	switch (f)
	{
		case JR_ID:
		case JR_CUSTOMER_ID:
		case JR_AMOUNT:
			if (c != '-' && !is_digit(c))
				return wrong_type(s, f == JR_AMOUNT ? "a number" : "an integer");
			return parse_number(s, f == JR_ID ? &rec->id
								: f == JR_CUSTOMER_ID ? &rec->customer_id
								: &rec->amount, false);
		case JR_CUSTOMER_NAME:
		case JR_CURRENCY:
		case JR_CREATED_AT:
			if (c != '"')
				return wrong_type(s, "a string");
			return parse_string(s, f == JR_CUSTOMER_NAME ? &rec->customer_name
								: f == JR_CURRENCY ? &rec->currency
								: &rec->created_at, true);
		case JR_TAGS:
			if (c != '[')
				return wrong_type(s, "an array of strings");
			if ((rc = parse_tags(s)) != JP_OK)
				return rc;
			rec->tags = s->r->tags;
			rec->ntags = s->ntags;
			return JP_OK;
		case JR_ATTRIBUTES:
			{
				const unsigned char *start = s->p;

				if (c != '{')
					return wrong_type(s, "an object");
				if ((rc = skip_value(s, true)) != JP_OK)
					return rc;
				rec->attributes.ptr = (const char *) start;
				rec->attributes.len = (size_t) (s->p - start);
				return JP_OK;
			}
		default:
			return JP_ERR;
	}
}

/* Parse the record whose '{' is at s->p. */
static int
parse_record(jp *s, jr_record *rec)
{
	unsigned	seen = 0;
	char		got[16];
	int			rc;

	s->p++;
	SKIP_WS(s);
	NEED_BYTE(s);
	if (*s->p != '}')
	{
		for (;;)
		{
			const unsigned char *key_at = s->p;
			ld_slice	key;
			int			f;

			if (*s->p != '"')
				return jp_fail(s, s->p, "expected a key (a string), got %s",
							   describe(s, s->p, got, sizeof(got)));
			if ((rc = parse_string(s, &key, true)) != JP_OK)
				return rc;
			f = field_of(key.ptr, key.len);
			if (f < 0)
			{
				char		text[64];

				jr_excerpt(key.ptr, key.len, text, sizeof(text));
				return jp_fail(s, key_at, "unknown key \"%s\" (allowed: id, customer_id, customer_name, amount, currency, created_at, tags, attributes)", text);
			}
			if (seen & (1u << f))
				return jp_fail(s, key_at, "duplicate key \"%s\"", jr_field_names[f]);
			seen |= 1u << f;
			SKIP_WS(s);
			NEED_BYTE(s);
			if (*s->p != ':')
				return jp_fail(s, s->p, "expected ':' after the key \"%s\", got %s",
							   jr_field_names[f], describe(s, s->p, got, sizeof(got)));
			s->p++;
			SKIP_WS(s);
			NEED_BYTE(s);
			rec->value_at[f] = (const char *) s->p;
			s->key = jr_field_names[f];
			if ((rc = parse_value(s, (jr_field) f, rec)) != JP_OK)
				return rc;
			s->key = NULL;
			SKIP_WS(s);
			NEED_BYTE(s);
			if (*s->p == '}')
				break;
			if (*s->p != ',')
				return jp_fail(s, s->p, "expected ',' or '}' after the value of \"%s\", got %s",
							   jr_field_names[f], describe(s, s->p, got, sizeof(got)));
			s->p++;
			SKIP_WS(s);
			NEED_BYTE(s);
			if (*s->p == '}')
				return jp_fail(s, s->p, "trailing comma before '}'");
		}
	}
	if (seen != ALL_FIELDS)
	{
		for (int f = 0; f < JR_NFIELDS; f++)
			if (!(seen & (1u << f)))
				return jp_fail(s, s->p, "missing key \"%s\"", jr_field_names[f]);
	}
	s->p++;						/* '}' */
	return JP_OK;
}

/* ---- top level ---- */

void
jr_init(jr_reader *r)
{
	memset(r, 0, offsetof(jr_reader, stack));
	r->state = ST_START;
	r->line = 1;
	r->max_record = JR_MAX_RECORD;
}

void
jr_free(jr_reader *r)
{
	free(r->scratch);
	free(r->tags);
	r->scratch = NULL;
	r->tags = NULL;
	r->scratch_cap = r->tags_cap = 0;
}

static jr_result
fail_here(jr_reader *r, const unsigned char *at, const char *fmt, ...)
			__attribute__((format(printf, 3, 4)));

/* An error between records, at 'at' (the committed position is at 'at'). */
static jr_result
fail_here(jr_reader *r, const unsigned char *at, const char *fmt, ...)
{
	va_list		ap;

	snapshot(r, at, 0);
	va_start(ap, fmt);
	vfail(r, NULL, (const char *) at, fmt, ap);
	va_end(ap);
	return JR_ERROR;
}

static const char *
describe_top(const unsigned char *at, const unsigned char *end, char *buf, size_t buflen)
{
	jp			s = {.end = end};

	return describe(&s, at, buf, buflen);
}

/*
 * The value at p stands where record N+1 should be but is not an object:
 * parse it (to show it) and report it as that record.
 */
static jr_result
not_a_record(jr_reader *r, const unsigned char *p, const unsigned char *end, bool eof)
{
	jp			s = {.p = p, .end = end, .eof = eof, .r = r};
	char		text[64];
	int			rc;

	s.ndjson = r->layout == JR_LAYOUT_NDJSON;
	snapshot(r, p, r->records + 1);
	rc = skip_value(&s, false);
	if (rc == JP_ERR)
		return JR_ERROR;
	if (rc == JP_NEED)
	{
		if ((size_t) (end - p) < r->max_record)
			return JR_NEED_MORE;
		jr_fail_at(r, (const char *) p, "expected a record (a JSON object), got a value larger than %zu bytes",
				   r->max_record);
		return JR_ERROR;
	}
	jr_excerpt((const char *) p, (size_t) (s.p - p), text, sizeof(text));
	jr_fail_at(r, (const char *) p, "expected a record (a JSON object), got %s", text);
	return JR_ERROR;
}

/* Parse one record at p; on success move the committed position past it. */
static jr_result
record_at(jr_reader *r, const unsigned char *p, const unsigned char *end,
		  bool eof, const unsigned char **after, jr_record *rec)
{
	jp			s;
	size_t		avail = (size_t) (end - p);
	int			rc;

	snapshot(r, p, r->records + 1);
	if (r->scratch_cap < avail)
	{
		size_t		cap = r->scratch_cap ? r->scratch_cap : 65536;
		char	   *scratch;

		while (cap < avail)
			cap *= 2;
		scratch = malloc(cap);
		if (scratch == NULL)
		{
			jr_fail_at(r, (const char *) p, "out of memory");
			r->error.out_of_memory = true;
			return JR_ERROR;
		}
		free(r->scratch);
		r->scratch = scratch;
		r->scratch_cap = cap;
	}
	s.p = p;
	s.end = end;
	s.eof = eof;
	s.ndjson = r->layout == JR_LAYOUT_NDJSON;
	s.r = r;
	s.out = r->scratch;
	s.key = NULL;
	s.ntags = 0;
	rec->tags = NULL;
	rec->ntags = 0;

	rc = parse_record(&s, rec);
	if (rc == JP_ERR)
		return JR_ERROR;
	if (rc == JP_NEED || (size_t) (s.p - p) > r->max_record)
	{
		if (avail < r->max_record && rc == JP_NEED)
			return JR_NEED_MORE;
		jr_fail_at(r, (const char *) p, "the record is larger than %zu bytes (the limit)",
				   r->max_record);
		r->state = ST_FAILED;
		return JR_ERROR;
	}
	r->records++;
	advance(r, p, s.p);
	*after = s.p;
	return JR_RECORD;
}

jr_result
jr_next(jr_reader *r, const char *data, size_t len, bool eof,
		size_t *consumed, jr_record *rec)
{
	const unsigned char *base = (const unsigned char *) data;
	const unsigned char *p = base;
	const unsigned char *end = base + len;
	jr_result	res = JR_NEED_MORE;
	char		got[16];

	for (;;)
	{
		const unsigned char *q = p;

		if (r->state == ST_END)
		{
			res = JR_END;
			break;
		}
		if (r->state == ST_FAILED)
		{
			res = JR_ERROR;
			break;
		}

		/* Blanks: ndjson allows anything but a line break after a record. */
		if (r->state == ST_NDJSON_AFTER)
			while (q < end && (*q == ' ' || *q == '\t' || *q == '\r'))
				q++;
		else
			while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
				q++;
		advance(r, p, q);
		p = q;

		if (r->state == ST_START && !r->bom_checked)
		{
			/* A byte-order mark at offset 0 is skipped. */
			static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};

			if (r->offset > 0 || len >= 3 || eof || memcmp(p, bom, len) != 0)
			{
				r->bom_checked = true;
				if (r->offset == 0 && len >= 3 && memcmp(p, bom, 3) == 0)
				{
					advance(r, p, p + 3);
					p += 3;
					r->line_start = 3;	/* columns count from after the mark */
				}
				continue;
			}
			break;				/* a prefix of the mark: need more to know */
		}

		if (p == end)
		{
			if (!eof)
				break;
			switch (r->state)
			{
				case ST_START:
					r->state = ST_FAILED;
					r->error.has_position = false;
					r->error.record = 0;
					snprintf(r->error.message, sizeof(r->error.message),
							 r->offset == 0 ? "the file is empty (no records)"
							 : "the file holds only blanks (no records)");
					res = JR_ERROR;
					break;
				case ST_ARRAY_FIRST:
					res = fail_here(r, p, "unexpected end of input after '[' (truncated file?)");
					break;
				case ST_ARRAY_AFTER:
					res = fail_here(r, p, "unexpected end of input after record %llu: expected ',' or ']' (truncated file?)",
									(unsigned long long) r->records);
					break;
				case ST_ARRAY_ELEM:
					res = fail_here(r, p, "unexpected end of input after ',': expected a record (truncated file?)");
					break;
				default:
					r->state = ST_END;
					res = JR_END;
					break;
			}
			break;
		}

		switch (r->state)
		{
			case ST_START:
				if (*p == '[')
				{
					r->layout = JR_LAYOUT_ARRAY;
					r->state = ST_ARRAY_FIRST;
					advance(r, p, p + 1);
					p++;
					continue;
				}
				if (*p == '{')
				{
					r->layout = JR_LAYOUT_NDJSON;
					r->state = ST_NDJSON_LINE;
					continue;
				}
				res = fail_here(r, p, "expected '[' (a JSON array of records) or '{' (ndjson records) at the start, got %s",
								describe_top(p, end, got, sizeof(got)));
				break;
			case ST_ARRAY_FIRST:
			case ST_ARRAY_ELEM:
				if (*p == '{')
				{
					res = record_at(r, p, end, eof, &p, rec);
					if (res == JR_RECORD)
						r->state = ST_ARRAY_AFTER;
					break;
				}
				if (*p == ']' && r->state == ST_ARRAY_FIRST)
					res = fail_here(r, p, "no records: the array is empty");
				else if (*p == ']')
					res = fail_here(r, p, "trailing comma before ']'");
				else
					res = not_a_record(r, p, end, eof);
				break;
			case ST_ARRAY_AFTER:
				if (*p == ',' || *p == ']')
				{
					r->state = *p == ',' ? ST_ARRAY_ELEM : ST_ARRAY_DONE;
					advance(r, p, p + 1);
					p++;
					continue;
				}
				res = fail_here(r, p, "expected ',' or ']' after record %llu, got %s",
								(unsigned long long) r->records,
								describe_top(p, end, got, sizeof(got)));
				break;
			case ST_ARRAY_DONE:
				res = fail_here(r, p, "unexpected data after the closing ']' of the array: %s",
								describe_top(p, end, got, sizeof(got)));
				break;
			case ST_NDJSON_LINE:
				if (*p == '{')
				{
					res = record_at(r, p, end, eof, &p, rec);
					if (res == JR_RECORD)
						r->state = ST_NDJSON_AFTER;
					break;
				}
				res = not_a_record(r, p, end, eof);
				break;
			case ST_NDJSON_AFTER:
				if (*p == '\n')
				{
					r->state = ST_NDJSON_LINE;
					advance(r, p, p + 1);
					p++;
					continue;
				}
				res = fail_here(r, p, "expected a line break after record %llu (ndjson holds one record per line), got %s",
								(unsigned long long) r->records,
								describe_top(p, end, got, sizeof(got)));
				break;
		}
		break;
	}
	*consumed = (size_t) (p - base);
	return res;
}

void
jr_format_error(const jr_error *err, const char *name, char *out, size_t outlen)
{
	if (!err->has_position)
		snprintf(out, outlen, "%s: %s", name, err->message);
	else if (err->record > 0)
		snprintf(out, outlen, "%s: record %llu (line %llu, column %llu, byte offset %llu): %s",
				 name, (unsigned long long) err->record,
				 (unsigned long long) err->line, (unsigned long long) err->column,
				 (unsigned long long) err->offset, err->message);
	else
		snprintf(out, outlen, "%s: line %llu, column %llu, byte offset %llu: %s",
				 name, (unsigned long long) err->line,
				 (unsigned long long) err->column,
				 (unsigned long long) err->offset, err->message);
}
