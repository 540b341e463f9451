/*
 * url_mask.c - find what may be a password in a connection string.
 *
 * Errs on the side of hiding: besides the password libpq reads (in a URI
 * the user info ends at the first '@' before the first '/'), a URI's user
 * info is taken to run to its last '@', since a password holding '/' or
 * '@' makes libpq read the rest as host, port or database (and quote it in
 * its messages).  Any "scheme://" counts as a URI, whatever its case.
 * Parameter names are compared percent-decoded and case-folded, as a
 * misspelt or encoded name may still carry a password.
 */
#include "url_mask.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * More secret values than this (libpq takes the last of repeated keys)
 * and the whole connection string counts as secret.
 */
#define MAX_SPANS 16
#define TOO_MANY_SPANS (MAX_SPANS + 1)

/* Shorter common runs with a secret are not taken to reveal it. */
#define MIN_REVEALING_RUN 4

typedef struct span
{
	size_t		start;
	size_t		end;
} span;

static void
add_span(span *spans, int *n, size_t start, size_t end)
{
	if (end <= start || *n == TOO_MANY_SPANS)
		return;
	if (*n == MAX_SPANS)
	{
		*n = TOO_MANY_SPANS;
		return;
	}
	spans[*n].start = start;
	spans[*n].end = end;
	(*n)++;
}

/* Sort by start and merge overlapping spans, so masking copies in order. */
static int
merge_spans(span *spans, int n)
{
	int			out = 0;

	for (int i = 1; i < n; i++)
	{
		span		s = spans[i];
		int			j = i - 1;

		while (j >= 0 && spans[j].start > s.start)
		{
			spans[j + 1] = spans[j];
			j--;
		}
		spans[j + 1] = s;
	}
	for (int i = 0; i < n; i++)
	{
		if (out > 0 && spans[i].start <= spans[out - 1].end)
		{
			if (spans[i].end > spans[out - 1].end)
				spans[out - 1].end = spans[i].end;
		}
		else
			spans[out++] = spans[i];
	}
	return out;
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char) tolower((unsigned char) c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Is key (len bytes), percent-decoded and case-folded, a password's name? */
static bool
secret_key(const char *key, size_t len)
{
	static const char *const names[] = {"password", "passwd", "pass", "pwd"};
	char		name[64];
	size_t		n = 0;

	for (size_t i = 0; i < len; i++)
	{
		int			c = (unsigned char) key[i];

		if (c == '%' && i + 2 < len &&
			hex_value(key[i + 1]) >= 0 && hex_value(key[i + 2]) >= 0)
		{
			c = hex_value(key[i + 1]) * 16 + hex_value(key[i + 2]);
			i += 2;
		}
		if (n + 1 >= sizeof(name))
			return false;
		name[n++] = (char) tolower(c);
	}
	name[n] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	/* sslpassword, db_password and the like */
	return (n >= 8 && strcmp(name + n - 8, "password") == 0) ||
		(n >= 6 && strcmp(name + n - 6, "passwd") == 0);
}

/* Length of a "scheme://" prefix, or 0. */
static size_t
uri_prefix_length(const char *s)
{
	const char *p = s;

	if (!isalpha((unsigned char) *p))
		return 0;
	while (isalnum((unsigned char) *p) || *p == '+' || *p == '-' || *p == '.')
		p++;
	return strncmp(p, "://", 3) == 0 ? (size_t) (p + 3 - s) : 0;
}

/*
 * The user info's last '@': the last one before a '=' of the query (an '@'
 * in a query value is no user info, but a '?' may be part of a password).
 */
static const char *
user_info_end(const char *authority)
{
	const char *at = NULL;
	bool		in_query = false;

	for (const char *p = authority; *p; p++)
	{
		if (*p == '?')
			in_query = true;
		else if (*p == '=' && in_query)
			break;
		else if (*p == '@')
			at = p;
	}
	return at;
}

static int
uri_secrets(const char *s, const char *authority, span *spans)
{
	const char *p = authority;
	const char *at = user_info_end(authority);
	const char *q;
	int			n = 0;

	/* Everything after the user name, up to the last '@'. */
	if (at != NULL)
	{
		const char *colon = memchr(authority, ':', (size_t) (at - authority));

		if (colon != NULL)
			add_span(spans, &n, (size_t) (colon + 1 - s), (size_t) (at - s));
	}
	/* What libpq reads as the password. */
	while (*p && *p != '@' && *p != '/')
		p++;
	if (*p == '@')
	{
		const char *colon = memchr(authority, ':', (size_t) (p - authority));

		if (colon != NULL)
			add_span(spans, &n, (size_t) (colon + 1 - s), (size_t) (p - s));
	}
	q = strchr(at != NULL ? at : authority, '?');
	while (q != NULL)
	{
		const char *key = q + 1;
		const char *amp = strchr(key, '&');
		const char *stop = amp ? amp : key + strlen(key);
		const char *eq = memchr(key, '=', (size_t) (stop - key));

		if (eq != NULL && secret_key(key, (size_t) (eq - key)))
			add_span(spans, &n, (size_t) (eq + 1 - s), (size_t) (stop - s));
		q = amp;
	}
	return n;
}

/*
 * A URI as a keyword's value (dbname='postgres://u:pw@h/db'): libpq takes
 * it for a database name and quotes it whole in its messages.  Its pieces
 * are found in a copy; a value with escapes (whose offsets would shift) or
 * no memory for the copy is hidden whole.
 */
static void
nested_uri_secrets(const char *s, const char *value, const char *end, span *spans, int *n)
{
	size_t		len = (size_t) (end - value);
	size_t		prefix = uri_prefix_length(value);
	span		inner[MAX_SPANS];
	char	   *copy;
	int			k;

	if (prefix == 0 || prefix > len)
		return;
	copy = memchr(value, '\\', len) == NULL ? strndup(value, len) : NULL;
	if (copy == NULL)
	{
		add_span(spans, n, (size_t) (value - s), (size_t) (end - s));
		return;
	}
	k = uri_secrets(copy, copy + prefix, inner);
	if (k == TOO_MANY_SPANS)
		*n = TOO_MANY_SPANS;
	for (int i = 0; i < k && k != TOO_MANY_SPANS; i++)
		add_span(spans, n, (size_t) (value - s) + inner[i].start, (size_t) (value - s) + inner[i].end);
	free(copy);
}

static int
keyword_secrets(const char *s, span *spans)
{
	const char *p = s;
	int			n = 0;

	for (;;)
	{
		const char *key;
		size_t		keylen;
		const char *value;

		while (isspace((unsigned char) *p))
			p++;
		if (*p == '\0')
			break;
		key = p;
		while (*p && *p != '=' && !isspace((unsigned char) *p))
			p++;
		keylen = (size_t) (p - key);
		while (isspace((unsigned char) *p))
			p++;
		if (*p != '=')
			continue;			/* not key=value: look at what follows */
		p++;
		while (isspace((unsigned char) *p))
			p++;
		if (*p == '\'')
		{
			value = ++p;
			while (*p && *p != '\'')
			{
				if (*p == '\\' && p[1])
					p++;
				p++;
			}
		}
		else
		{
			value = p;
			while (*p && !isspace((unsigned char) *p))
			{
				if (*p == '\\' && p[1])
					p++;
				p++;
			}
		}
		if (secret_key(key, keylen))
			add_span(spans, &n, (size_t) (value - s), (size_t) (p - s));
		else
			nested_uri_secrets(s, value, p, spans, &n);
		if (*p == '\'')
			p++;
	}
	return n;
}

static int
find_secrets(const char *s, span *spans)
{
	size_t		prefix = uri_prefix_length(s);
	int			n;

	if (prefix > 0)
		n = uri_secrets(s, s + prefix, spans);
	else
		n = keyword_secrets(s, spans);
	return n == TOO_MANY_SPANS ? -1 : merge_spans(spans, n);
}

void
ld_mask_conninfo(const char *conninfo, char *out, size_t outlen)
{
	span		spans[MAX_SPANS];
	int			n = find_secrets(conninfo, spans);
	size_t		pos = 0;
	size_t		o = 0;

	if (outlen == 0)
		return;
	if (n < 0)
	{
		snprintf(out, outlen, "(a connection string of more than %d secret values)", MAX_SPANS);
		return;
	}
	for (int i = 0; i <= n; i++)
	{
		size_t		stop = i < n ? spans[i].start : strlen(conninfo);
		size_t		len = stop - pos;

		if (o + len >= outlen)
			len = outlen - o - 1;
		memcpy(out + o, conninfo + pos, len);
		o += len;
		if (i < n)
		{
			if (o + 3 < outlen)
			{
				memcpy(out + o, "***", 3);
				o += 3;
			}
			pos = spans[i].end;
		}
	}
	out[o] = '\0';
}

/*
 * Does text show some of secret: all of text is part of it, or they share
 * a run of MIN_REVEALING_RUN bytes (all of a shorter secret)?
 */
static bool
shows_secret(const char *text, size_t textlen, const char *secret, size_t seclen)
{
	size_t		run = seclen < MIN_REVEALING_RUN ? seclen : MIN_REVEALING_RUN;

	if (textlen == 0 || seclen == 0)
		return false;
	if (textlen <= seclen && memmem(secret, seclen, text, textlen) != NULL)
		return true;
	for (size_t i = 0; i + run <= seclen; i++)
		if (memmem(text, textlen, secret + i, run) != NULL)
			return true;
	return false;
}

bool
ld_conninfo_reveals(const char *conninfo, const char *text)
{
	span		spans[MAX_SPANS];
	int			n = find_secrets(conninfo, spans);

	if (n < 0)
		return true;
	for (int i = 0; i < n; i++)
		if (shows_secret(text, strlen(text), conninfo + spans[i].start,
						 spans[i].end - spans[i].start))
			return true;
	return false;
}

/*
 * The end of a rewrite of msg into out (msgsize bytes, o written): the rest
 * of msg from rest, cut to fit, copied back into msg; out is freed.
 */
static void
end_rewrite(char *out, size_t o, const char *rest, char *msg, size_t msgsize)
{
	size_t		len = strlen(rest);

	if (o + len >= msgsize)
		len = msgsize - o - 1;
	memcpy(out + o, rest, len);
	o += len;
	out[o] = '\0';
	memcpy(msg, out, o + 1);
	free(out);
}

/* Replace every occurrence of from (fromlen bytes) in msg by to. */
static void
replace_all(char *msg, size_t msgsize, const char *from, size_t fromlen, const char *to)
{
	char	   *out;
	size_t		o = 0;
	size_t		tolen = strlen(to);
	const char *p = msg;
	const char *hit;

	if (fromlen == 0 || (out = malloc(msgsize)) == NULL)
		return;
	while ((hit = memmem(p, strlen(p), from, fromlen)) != NULL)
	{
		size_t		len = (size_t) (hit - p);

		if (o + len + tolen >= msgsize)
			break;
		memcpy(out + o, p, len);
		o += len;
		memcpy(out + o, to, tolen);
		o += tolen;
		p = hit + fromlen;
	}
	end_rewrite(out, o, p, msg, msgsize);
}

/*
 * Replace each double-quoted token of msg that shows some of the secret by
 * "***": libpq quotes the pieces of a misread URI it complains about.
 */
static void
mask_quoted_tokens(char *msg, size_t msgsize, const char *secret, size_t seclen)
{
	char	   *out = malloc(msgsize);
	size_t		o = 0;
	const char *p = msg;
	const char *open;
	const char *close;

	if (out == NULL)
		return;
	while ((open = strchr(p, '"')) != NULL && (close = strchr(open + 1, '"')) != NULL)
	{
		size_t		keep = (size_t) (open + 1 - p);
		size_t		len = (size_t) (close - open - 1);
		bool		hide = shows_secret(open + 1, len, secret, seclen);

		if (!hide)
			keep += len;
		if (o + keep + 3 >= msgsize)
			break;
		memcpy(out + o, p, keep);
		o += keep;
		if (hide)
		{
			memcpy(out + o, "***", 3);
			o += 3;
		}
		p = close;				/* the closing quote opens nothing */
		out[o++] = '"';
		p++;
	}
	end_rewrite(out, o, p, msg, msgsize);
}

void
ld_scrub_message(const char *conninfo, char *msg, size_t msgsize)
{
	span		spans[MAX_SPANS];
	int			n = find_secrets(conninfo, spans);
	char	   *masked;
	size_t		size = strlen(conninfo) + 3 * MAX_SPANS + 1;

	if (n == 0)
		return;
	if (n < 0)
	{
		snprintf(msg, msgsize, "(message not shown: the connection string has more than %d secret values)",
				 MAX_SPANS);
		return;
	}
	masked = malloc(size);
	if (masked != NULL)
	{
		ld_mask_conninfo(conninfo, masked, size);
		replace_all(msg, msgsize, conninfo, strlen(conninfo), masked);
		free(masked);
	}
	for (int i = 0; i < n; i++)
	{
		const char *secret = conninfo + spans[i].start;
		size_t		len = spans[i].end - spans[i].start;

		mask_quoted_tokens(msg, msgsize, secret, len);
		if (len >= MIN_REVEALING_RUN)
		{
			char	   *copy = strndup(secret, len);

			if (copy != NULL)
				replace_all(msg, msgsize, copy, len, "***");
			free(copy);
		}
	}
}
