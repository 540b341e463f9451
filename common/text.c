/* text.c - small string helpers shared by the parsers of common/. */
#include "text.h"

#include <stdio.h>
#include <string.h>

bool
tp_is_blank(char c)
{
	return c == ' ' || c == '\t';
}

char *
tp_trimmed_copy(const char *start, const char *end)
{
	while (start < end && tp_is_blank(*start))
		start++;
	while (end > start && tp_is_blank(end[-1]))
		end--;
	return strndup(start, (size_t) (end - start));
}

void
tp_make_printable(char *s)
{
	for (; *s; s++)
	{
		if (*s == '\n' || *s == '\r' || *s == '\t')
			*s = ' ';			/* libpq's multi-line errors stay readable */
		else if ((unsigned char) *s < 0x20 || *s == 0x7f)
			*s = '?';
	}
}

int
tp_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void
tp_url_redact(const char *url, const char *replacement, char *out, size_t outlen)
{
	const char *authority = strstr(url, "://");
	const char *end;
	const char *at = NULL;

	if (authority == NULL)
	{
		snprintf(out, outlen, "%s", url);
		return;
	}
	authority += 3;
	end = authority + strcspn(authority, "/?#");
	for (const char *p = authority; p < end; p++)
		if (*p == '@')
			at = p;				/* the last '@' ends the user info */
	if (at == NULL)
		snprintf(out, outlen, "%s", url);
	else
		snprintf(out, outlen, "%.*s%s%s", (int) (authority - url), url, replacement, at + 1);
}
