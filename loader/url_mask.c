/*
 * url_mask.c - find the passwords in a libpq connection string.
 *
 * Follows libpq's parsing rules closely enough to find the password where
 * libpq would: in a URI the user info ends at the first '@' before the
 * first '/', and the password starts after its first ':'.
 */
#include "url_mask.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SPANS 8

typedef struct span
{
	size_t		start;
	size_t		end;
} span;

static void
add_span(span *spans, int *n, size_t start, size_t end)
{
	if (*n < MAX_SPANS && end > start)
	{
		spans[*n].start = start;
		spans[*n].end = end;
		(*n)++;
	}
}

static int
uri_passwords(const char *s, const char *authority, span *spans)
{
	const char *p = authority;
	const char *q;
	int			n = 0;

	while (*p && *p != '@' && *p != '/')
		p++;
	if (*p == '@')
	{
		const char *colon = memchr(authority, ':', (size_t) (p - authority));

		if (colon != NULL)
			add_span(spans, &n, (size_t) (colon + 1 - s), (size_t) (p - s));
	}
	q = strchr(authority, '?');
	while (q != NULL)
	{
		const char *key = q + 1;
		const char *amp = strchr(key, '&');
		const char *stop = amp ? amp : key + strlen(key);
		const char *eq = memchr(key, '=', (size_t) (stop - key));

		if (eq != NULL && eq - key == 8 && strncmp(key, "password", 8) == 0)
			add_span(spans, &n, (size_t) (eq + 1 - s), (size_t) (stop - s));
		q = amp;
	}
	return n;
}

static int
keyword_passwords(const char *s, span *spans)
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
			break;
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
		if (keylen == 8 && strncmp(key, "password", 8) == 0)
			add_span(spans, &n, (size_t) (value - s), (size_t) (p - s));
		if (*p == '\'')
			p++;
	}
	return n;
}

static int
find_passwords(const char *s, span *spans)
{
	if (strncmp(s, "postgresql://", 13) == 0)
		return uri_passwords(s, s + 13, spans);
	if (strncmp(s, "postgres://", 11) == 0)
		return uri_passwords(s, s + 11, spans);
	return keyword_passwords(s, spans);
}

void
ld_mask_conninfo(const char *conninfo, char *out, size_t outlen)
{
	span		spans[MAX_SPANS];
	int			n = find_passwords(conninfo, spans);
	size_t		pos = 0;
	size_t		o = 0;

	if (outlen == 0)
		return;
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
	{
		size_t		len = strlen(p);

		if (o + len >= msgsize)
			len = msgsize - o - 1;
		memcpy(out + o, p, len);
		o += len;
	}
	out[o] = '\0';
	memcpy(msg, out, o + 1);
	free(out);
}

void
ld_scrub_message(const char *conninfo, char *msg, size_t msgsize)
{
	span		spans[MAX_SPANS];
	int			n = find_passwords(conninfo, spans);
	char	   *masked;
	size_t		size = strlen(conninfo) + 3 * MAX_SPANS + 1;

	if (n == 0)
		return;
	masked = malloc(size);
	if (masked != NULL)
	{
		ld_mask_conninfo(conninfo, masked, size);
		replace_all(msg, msgsize, conninfo, strlen(conninfo), masked);
		free(masked);
	}
	for (int i = 0; i < n; i++)
	{
		size_t		len = spans[i].end - spans[i].start;
		char	   *quoted = malloc(len + 3);

		if (quoted == NULL)
			continue;
		quoted[0] = '"';
		memcpy(quoted + 1, conninfo + spans[i].start, len);
		quoted[len + 1] = '"';
		quoted[len + 2] = '\0';
		replace_all(msg, msgsize, quoted, len + 2, "\"***\"");
		if (len >= 4)
			replace_all(msg, msgsize, conninfo + spans[i].start, len, "***");
		free(quoted);
	}
}
