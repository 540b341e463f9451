/* sqlcommenter.c - find traceparent='...' in the comment ending or opening a statement. */
#include "sqlcommenter.h"

#include <string.h>

#include "sql_normalize.h"
#include "text.h"

/* Longest traceparent we decode: version 00 plus room for future fields. */
#define MAX_TRACEPARENT 256

/* Longest tracestate we decode, before it is cut to TP_TRACESTATE_MAX. */
#define MAX_TRACESTATE 4096

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
 * Decode a quoted value [p, end) starting after its opening quote into out
 * (max bytes): %XX escapes and \' are undone.  Returns the position after
 * the closing quote, or NULL when the value is unterminated, malformed or
 * too long.
 */
static const char *
decode_value(const char *p, const char *end, char *out, size_t max, size_t *out_len)
{
	const char *quote = memchr(p, '\'', (size_t) (end - p));
	size_t		n = 0;

	/* Values rarely hold escapes: a traceparent never does.  Copied at once. */
	if (quote != NULL && (size_t) (quote - p) <= max &&
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
		if (n == max)
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
is_key(const char *key, const char *eq, const char *name)
{
	return (size_t) (eq - key) == strlen(name) && memcmp(key, name, strlen(name)) == 0;
}

/*
 * The key [key, end) is name once blanks before end are left out: a pair
 * meant for us even if it is not written as sqlcommenter's key='value'
 * (traceparent = '...', traceparent="...", an unquoted value, no value).
 */
static bool
names_key(const char *key, const char *end, const char *name)
{
	while (end > key && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
		end--;
	return is_key(key, end, name);
}

/*
 * The keys names[0..n) of the comment whose text is [p, close), found in
 * one pass: results[i] says what became of names[i], whose decoded value
 * goes into values[i] (max[i] bytes; its length into lens[i]) when VALID.
 */
static void
read_pairs(const char *p, const char *close, int n, const char *const *names,
		   char *const *values, const size_t *max, size_t *lens, tp_comment_result *results)
{
	int			left = n;

	for (int i = 0; i < n; i++)
		results[i] = TP_COMMENT_NONE;
	while (p < close && left > 0)
	{
		const char *key = p;
		const char *eq = memchr(p, '=', (size_t) (close - p));
		int			ours = -1;

		while (key < close && (*key == ' ' || *key == '\t' || *key == '\n' ||
							   *key == '\r' || *key == ','))
			key++;
		for (int i = 0; i < n; i++)
			if (results[i] == TP_COMMENT_NONE && names_key(key, eq != NULL ? eq : close, names[i]))
				ours = i;
		/* Not a sqlcommenter pair: a comment of another kind, unless it names our key. */
		if (eq == NULL || eq + 1 >= close || eq[1] != '\'')
		{
			if (ours >= 0)
				results[ours] = TP_COMMENT_MALFORMED;
			return;
		}
		p = NULL;
		if (ours >= 0)
		{
			if (is_key(key, eq, names[ours]))
				p = decode_value(eq + 2, close, values[ours], max[ours], &lens[ours]);
			results[ours] = p != NULL ? TP_COMMENT_VALID : TP_COMMENT_MALFORMED;
			left--;
		}
		if (p == NULL)
			p = skip_value(eq + 2, close);
		if (p == NULL)
			return;
	}
}

/*
 * read_pairs over the comment that ends sql or, when that one does not
 * mention names[0] (the traceparent, which the tracestate goes with), the
 * one that opens it.  Mention, not hold: a pair of ours that read_pairs
 * never reached (past a pair of another kind) still makes the ending comment
 * the caller's, not the other one.  Only those two count: that is where
 * sqlcommenters put it, and it keeps the cost for statements without one at
 * a few byte comparisons.
 */
static void
find_values(const char *sql, size_t len, int n, const char *const *names,
			char *const *values, const size_t *max, size_t *lens, tp_comment_result *results)
{
	const char *close = tp_sqlcomment_close(sql, len);
	const char *open = close != NULL ? find_last_comment_open(sql, close) : NULL;
	size_t		comment_len;

	if (open != NULL)
	{
		read_pairs(open + 2, close, n, names, values, max, lens, results);
		if (results[0] != TP_COMMENT_NONE ||
			memmem(open + 2, (size_t) (close - open - 2), names[0], strlen(names[0])) != NULL)
			return;
	}
	else
		for (int i = 0; i < n; i++)
			results[i] = TP_COMMENT_NONE;
	open = tp_sqlcomment_open(sql, len);
	comment_len = open != NULL ? tp_sql_comment_len(open, (size_t) (sql + len - open)) : 0;
	if (comment_len > 0)
		read_pairs(open + 2, open + comment_len - 2, n, names, values, max, lens, results);
}

/* A traceparent's value into *out: MALFORMED when it is no traceparent. */
static tp_comment_result
parse_traceparent(tp_comment_result found, const char *value, size_t len, tp_span_context *out)
{
	const char *why;

	if (found == TP_COMMENT_VALID && !tp_traceparent_parse(value, len, out, &why))
		return TP_COMMENT_MALFORMED;
	return found;
}

/* A tracestate's value, checked and cut, into out: MALFORMED when it is no tracestate. */
static tp_comment_result
parse_tracestate(tp_comment_result found, const char *value, size_t len, char *out, size_t *out_len)
{
	const char *why;

	*out_len = 0;
	out[0] = '\0';
	if (found == TP_COMMENT_VALID && !tp_tracestate_parse(value, len, out, out_len, &why))
		return TP_COMMENT_MALFORMED;
	return found;
}

tp_comment_result
tp_sqlcomment_traceparent(const char *sql, size_t len, tp_span_context *out)
{
	static const char *const name = "traceparent";
	char		value[MAX_TRACEPARENT];
	char	   *const values[] = {value};
	const size_t max = sizeof(value);
	size_t		value_len = 0;
	tp_comment_result found;

	find_values(sql, len, 1, &name, values, &max, &value_len, &found);
	return parse_traceparent(found, value, value_len, out);
}

void
tp_sqlcomment_context(const char *sql, size_t len, tp_comment_context *out)
{
	static const char *const names[] = {"traceparent", "tracestate"};
	char		parent[MAX_TRACEPARENT];
	char		state[MAX_TRACESTATE];
	char	   *const values[] = {parent, state};
	const size_t max[] = {sizeof(parent), sizeof(state)};
	size_t		lens[2] = {0, 0};
	tp_comment_result results[2];

	find_values(sql, len, 2, names, values, max, lens, results);
	out->parent_result = parse_traceparent(results[0], parent, lens[0], &out->parent);
	out->state_result = parse_tracestate(results[1], state, lens[1], out->state, &out->state_len);
}
