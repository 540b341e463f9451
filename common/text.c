/* text.c - small string helpers shared by the parsers of common/. */
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
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

/* What C's isspace() means in the "C" locale, whatever the locale is. */
static bool
is_env_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

char *
tp_getenv_trimmed(const char *name)
{
	const char *value = getenv(name);
	const char *end;

	if (value == NULL)
		return NULL;
	end = value + strlen(value);
	while (value < end && is_env_space(*value))
		value++;
	while (end > value && is_env_space(end[-1]))
		end--;
	if (value == end)
		return NULL;
	return strndup(value, (size_t) (end - value));
}

size_t
tp_utf8_char_length(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80;
	unsigned char hi = 0xbf;
	size_t		n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
	{
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;			/* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f;			/* no surrogates */
	}
	else if (c >= 0xf0 && c <= 0xf4)
	{
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;			/* nothing above U+10FFFF */
	}
	else
		return 0;
	if (avail < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t k = 2; k < n; k++)
		if ((s[k] & 0xc0) != 0x80)
			return 0;
	return n;
}

bool
tp_utf8_is_valid(const char *s, size_t len)
{
	size_t		i = 0;

	while (i < len)
	{
		size_t		n = tp_utf8_char_length((const unsigned char *) s + i, len - i);

		if (n == 0)
			return false;
		i += n;
	}
	return true;
}

void
tp_make_printable(char *s)
{
	size_t		len = strlen(s);
	size_t		i = 0;

	while (i < len)
	{
		size_t		n = tp_utf8_char_length((const unsigned char *) s + i, len - i);

		if (s[i] == '\n' || s[i] == '\r' || s[i] == '\t')
			s[i] = ' ';			/* libpq's multi-line errors stay readable */
		else if (n == 0 || (unsigned char) s[i] < 0x20 || s[i] == 0x7f)
			s[i] = '?';
		i += n > 0 ? n : 1;
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
	int			kept = (int) strcspn(url, "?#");	/* a query may carry a token */

	/* No scheme (user:pw@host:port/x): the authority starts the text. */
	if (authority == NULL || authority - url > (ptrdiff_t) strcspn(url, "/?#"))
		authority = url;
	else
		authority += 3;
	end = authority + strcspn(authority, "/?#");
	for (const char *p = authority; p < end; p++)
		if (*p == '@')
			at = p;				/* the last '@' ends the user info */
	if (at == NULL)
		snprintf(out, outlen, "%.*s", kept, url);
	else
		snprintf(out, outlen, "%.*s%s%.*s", (int) (authority - url), url, replacement,
				 (int) (url + kept - (at + 1)), at + 1);
}
