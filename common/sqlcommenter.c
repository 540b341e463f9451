/* sqlcommenter.c - find traceparent='...' in a statement's last comment. */
#include "sqlcommenter.h"

#include <string.h>

#include "text.h"

/* Longest value we decode: a traceparent plus room for future fields. */
#define MAX_VALUE 256

/* Where the last comment opener in [start, end) is, or NULL. */
static const char *
find_last_comment_open(const char *start, const char *end)
{
	const char *slash;

	/* memrchr, not a byte loop: every statement ending in a comment runs this. */
	while ((slash = memrchr(start, '/', (size_t) (end - start))) != NULL)
	{
		if (slash + 1 < end && slash[1] == '*')
			return slash;
		end = slash;
	}
	return NULL;
}

/*
 * Decode a quoted value [p, end) starting after its opening quote: %XX
 * escapes and \' are undone.  Returns the position after the closing quote,
 * or NULL when the value is unterminated, malformed or too long.
 */
static const char *
decode_value(const char *p, const char *end, char *out, size_t *out_len)
{
	const char *quote = memchr(p, '\'', (size_t) (end - p));
	size_t		n = 0;

	/* Values rarely hold escapes: a traceparent never does.  Copied at once. */
	if (quote != NULL && quote - p <= MAX_VALUE &&
		memchr(p, '\\', (size_t) (quote - p)) == NULL &&
		memchr(p, '%', (size_t) (quote - p)) == NULL)
	{
		memcpy(out, p, (size_t) (quote - p));
		*out_len = (size_t) (quote - p);
		return quote + 1;
	}
	while (p < end && *p != '\'')
	{
		char		c = *p++;

		if (c == '\\' && p < end)
			c = *p++;
		else if (c == '%')
		{
			int			hi = p + 1 < end ? tp_hex_digit(p[0]) : -1;
			int			lo = hi >= 0 ? tp_hex_digit(p[1]) : -1;

			if (lo < 0)
				return NULL;
			c = (char) (hi << 4 | lo);
			p += 2;
		}
		if (n == MAX_VALUE)
			return NULL;
		out[n++] = c;
	}
	if (p == end)
		return NULL;
	*out_len = n;
	return p + 1;
}

/*
 * Skip a quoted value [p, end) starting after its opening quote, whatever
 * its length (another key's may be long: a route, a controller's action):
 * the position after its closing quote, or NULL when it is unterminated.
 */
static const char *
skip_value(const char *p, const char *end)
{
	while (p < end && *p != '\'')
		p += (*p == '\\' && p + 1 < end) ? 2 : 1;
	return p < end ? p + 1 : NULL;
}

static bool
is_traceparent_key(const char *key, const char *eq)
{
	return (size_t) (eq - key) == strlen("traceparent") &&
		memcmp(key, "traceparent", strlen("traceparent")) == 0;
}

/*
 * The key [key, end) is traceparent once blanks before end are left out: a
 * pair meant for us even if it is not written as sqlcommenter's key='value'
 * (traceparent = '...', traceparent="...", an unquoted value, no value).
 */
static bool
names_traceparent(const char *key, const char *end)
{
	while (end > key && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
		end--;
	return is_traceparent_key(key, end);
}

tp_comment_result
tp_sqlcomment_traceparent(const char *sql, size_t len, tp_span_context *out)
{
	/*
	 * Only a comment that ends the statement counts: that is where
	 * sqlcommenter puts it, and it keeps the cost for statements without one
	 * at a few byte comparisons.
	 */
	const char *close = tp_sqlcomment_close(sql, len);
	const char *open;
	const char *p;

	if (close == NULL)
		return TP_COMMENT_NONE;
	open = find_last_comment_open(sql, close);
	if (open == NULL)
		return TP_COMMENT_NONE;
	p = open + 2;
	while (p < close)
	{
		const char *key = p;
		const char *eq = memchr(p, '=', (size_t) (close - p));
		bool		ours;

		while (key < close && (*key == ' ' || *key == '\t' || *key == '\n' ||
							   *key == '\r' || *key == ','))
			key++;
		ours = names_traceparent(key, eq != NULL ? eq : close);
		/* Not a sqlcommenter pair: a comment of another kind, unless it names our key. */
		if (eq == NULL || eq + 1 >= close || eq[1] != '\'')
			return ours ? TP_COMMENT_MALFORMED : TP_COMMENT_NONE;
		if (ours)
		{
			char		value[MAX_VALUE];
			size_t		value_len;
			const char *why;

			if (!is_traceparent_key(key, eq) ||
				decode_value(eq + 2, close, value, &value_len) == NULL ||
				!tp_traceparent_parse(value, value_len, out, &why))
				return TP_COMMENT_MALFORMED;
			return TP_COMMENT_VALID;
		}
		p = skip_value(eq + 2, close);
		if (p == NULL)
			return TP_COMMENT_NONE;
	}
	return TP_COMMENT_NONE;
}
