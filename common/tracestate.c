/* tracestate.c - check a W3C tracestate and keep what may be passed on. */
#include "tracestate.h"

#include <string.h>

static bool
is_lcalpha(char c)
{
	return c >= 'a' && c <= 'z';
}

static bool
is_key_char(char c)
{
	return is_lcalpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

/* A value's characters but blank: printable ASCII but ',' and '='. */
static bool
is_value_char(char c)
{
	return c >= 0x21 && c <= 0x7e && c != ',' && c != '=';
}

/*
 * key: lcalpha then up to 255 key characters; or tenant@system, tenant a
 * letter or digit then up to 240, system a letter then up to 13.
 */
static bool
key_is_valid(const char *key, size_t len)
{
	const char *at = memchr(key, '@', len);
	size_t		first = at != NULL ? (size_t) (at - key) : len;

	if (first == 0 || first > (at != NULL ? 241 : 256) ||
		!(is_lcalpha(key[0]) || (at != NULL && key[0] >= '0' && key[0] <= '9')))
		return false;
	for (size_t i = 1; i < first; i++)
		if (!is_key_char(key[i]))
			return false;
	if (at == NULL)
		return true;
	if (len - first - 1 == 0 || len - first - 1 > 14 || !is_lcalpha(at[1]))
		return false;
	for (size_t i = first + 2; i < len; i++)
		if (!is_key_char(key[i]))
			return false;
	return true;
}

/* value: up to 256 characters, blanks inside only (the last is no blank). */
static bool
value_is_valid(const char *value, size_t len)
{
	if (len == 0 || len > 256 || value[len - 1] == ' ')
		return false;
	for (size_t i = 0; i < len; i++)
		if (value[i] != ' ' && !is_value_char(value[i]))
			return false;
	return true;
}

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

bool
tp_tracestate_parse(const char *text, size_t len, char *out, size_t *out_len,
					const char **why)
{
	const char *end = text + len;
	const char *p = text;
	size_t		kept = 0;
	int			members = 0;
	bool		full = false;

	*out_len = 0;
	out[0] = '\0';
	while (p <= end)
	{
		const char *comma = memchr(p, ',', (size_t) (end - p));
		const char *stop = comma != NULL ? comma : end;
		const char *eq;
		size_t		member_len;

		while (p < stop && is_ows(*p))
			p++;
		while (stop > p && is_ows(stop[-1]))
			stop--;
		member_len = (size_t) (stop - p);
		if (member_len > 0)
		{
			eq = memchr(p, '=', member_len);
			if (eq == NULL || !key_is_valid(p, (size_t) (eq - p)) ||
				!value_is_valid(eq + 1, (size_t) (stop - eq - 1)))
			{
				*why = "expected key=value list members separated by commas, keys of lowercase letters, "
					"digits and _-*/ (tenant@system allowed), values of printable ASCII but , and =";
				out[0] = '\0';
				return false;
			}
			/* Whole members only, and none after the first that does not fit. */
			if (!full && members < TP_TRACESTATE_MAX_MEMBERS &&
				kept + (kept > 0) + member_len <= TP_TRACESTATE_MAX)
			{
				if (kept > 0)
					out[kept++] = ',';
				memcpy(out + kept, p, member_len);
				kept += member_len;
				members++;
			}
			else
				full = true;
		}
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	out[kept] = '\0';
	*out_len = kept;
	return true;
}
