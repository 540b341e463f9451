/* tracestate.c - check a W3C tracestate and keep what may be passed on. */
#include "tracestate.h"

#include <string.h>

/* Entries longer than this go first when a tracestate must be cut (W3C). */
#define LARGE_MEMBER 128

typedef struct member
{
	const char *text;
	size_t		len;
	size_t		key_len;
} member;

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

/* Whether members[0..count) already has key. */
static bool
has_key(const member *members, int count, const char *key, size_t key_len)
{
	for (int i = 0; i < count; i++)
		if (members[i].key_len == key_len && memcmp(members[i].text, key, key_len) == 0)
			return true;
	return false;
}

/* The members, checked: false with *why on the first fault of the whole list. */
static bool
split_members(const char *text, size_t len, member *members, int *count, const char **why)
{
	const char *end = text + len;
	const char *p = text;

	*count = 0;
	for (;;)
	{
		const char *comma = memchr(p, ',', (size_t) (end - p));
		const char *stop = comma != NULL ? comma : end;
		const char *eq;

		while (p < stop && is_ows(*p))
			p++;
		while (stop > p && is_ows(stop[-1]))
			stop--;
		if (stop > p)
		{
			eq = memchr(p, '=', (size_t) (stop - p));
			if (eq == NULL || !key_is_valid(p, (size_t) (eq - p)) ||
				!value_is_valid(eq + 1, (size_t) (stop - eq - 1)))
			{
				*why = "expected key=value list members separated by commas, keys of lowercase letters, "
					"digits and _-*/ (tenant@system allowed), values of printable ASCII but , and =";
				return false;
			}
			if (*count == TP_TRACESTATE_MAX_MEMBERS)
			{
				*why = "at most 32 list members are allowed";
				return false;
			}
			if (has_key(members, *count, p, (size_t) (eq - p)))
			{
				*why = "a key may appear only once";
				return false;
			}
			members[*count] = (member) {p, (size_t) (stop - p), (size_t) (eq - p)};
			(*count)++;
		}
		if (comma == NULL)
			return true;
		p = comma + 1;
	}
}

/* Its length joined with commas. */
static size_t
joined_length(const member *members, int count)
{
	size_t		len = count > 0 ? (size_t) count - 1 : 0;

	for (int i = 0; i < count; i++)
		len += members[i].len;
	return len;
}

/* The last member longer than LARGE_MEMBER, or the last one. */
static int
member_to_drop(const member *members, int count)
{
	for (int i = count - 1; i >= 0; i--)
		if (members[i].len > LARGE_MEMBER)
			return i;
	return count - 1;
}

bool
tp_tracestate_parse(const char *text, size_t len, char *out, size_t *out_len,
					const char **why)
{
	member		members[TP_TRACESTATE_MAX_MEMBERS];
	int			count;
	size_t		kept = 0;

	*out_len = 0;
	out[0] = '\0';
	if (!split_members(text, len, members, &count, why))
		return false;
	/* Too long: large entries go first, then entries from the end (W3C). */
	while (joined_length(members, count) > TP_TRACESTATE_MAX)
	{
		int			drop = member_to_drop(members, count);

		memmove(&members[drop], &members[drop + 1], (count - drop - 1) * sizeof(member));
		count--;
	}
	for (int i = 0; i < count; i++)
	{
		if (i > 0)
			out[kept++] = ',';
		memcpy(out + kept, members[i].text, members[i].len);
		kept += members[i].len;
	}
	out[kept] = '\0';
	*out_len = kept;
	return true;
}
