/* kvlist.c - parse and hold "key=value,..." lists. */
#include "kvlist.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decode %XX sequences in place; false on a malformed one. */
static bool
percent_decode(char *s)
{
	char	   *out = s;

	for (const char *in = s; *in; in++)
	{
		if (*in != '%')
		{
			*out++ = *in;
			continue;
		}
		int			hi = tp_hex_digit(in[1]);
		int			lo = hi < 0 ? -1 : tp_hex_digit(in[2]);

		if (hi < 0 || lo < 0)
			return false;
		*out++ = (char) (hi << 4 | lo);
		in += 2;
	}
	*out = '\0';
	/* A decoded NUL would silently cut the value short. */
	return strlen(s) == (size_t) (out - s);
}

bool
tp_kvlist_add(tp_kvlist *list, const char *key, const char *value)
{
	tp_kv	   *grown = realloc(list->items, (list->count + 1) * sizeof(tp_kv));
	char	   *k = strdup(key);
	char	   *v = strdup(value);

	if (grown == NULL || k == NULL || v == NULL)
	{
		list->items = grown ? grown : list->items;
		free(k);
		free(v);
		return false;
	}
	list->items = grown;
	list->items[list->count].key = k;
	list->items[list->count].value = v;
	list->count++;
	return true;
}

bool
tp_kvlist_set(tp_kvlist *list, const char *key, const char *value)
{
	for (size_t i = 0; i < list->count; i++)
	{
		if (strcmp(list->items[i].key, key) == 0)
		{
			char	   *copy = strdup(value);

			if (copy == NULL)
				return false;
			free(list->items[i].value);
			list->items[i].value = copy;
			return true;
		}
	}
	return tp_kvlist_add(list, key, value);
}

const char *
tp_kvlist_get(const tp_kvlist *list, const char *key)
{
	for (size_t i = 0; i < list->count; i++)
		if (strcmp(list->items[i].key, key) == 0)
			return list->items[i].value;
	return NULL;
}

void
tp_kvlist_free(tp_kvlist *list)
{
	for (size_t i = 0; i < list->count; i++)
	{
		free(list->items[i].key);
		free(list->items[i].value);
	}
	free(list->items);
	list->items = NULL;
	list->count = 0;
}

/*
 * Name a member in an error message: quoted, or by position when the
 * list may carry secrets (OTEL_EXPORTER_OTLP_HEADERS).
 */
static void
describe_member(const char *start, const char *end, int flags, int position,
				char *buf, size_t buflen)
{
	if (flags & TP_KV_SECRET)
		snprintf(buf, buflen, "member %d", position);
	else
		snprintf(buf, buflen, "\"%.*s\"", (int) (end - start), start);
	tp_make_printable(buf);
}

/* Parse one "key=value" member [start, end) and append it. */
static bool
parse_member(const char *start, const char *end, int flags, int position,
			 tp_kvlist *out, char *err, size_t errlen)
{
	const char *eq = memchr(start, '=', (size_t) (end - start));
	char		member[256];
	char	   *key;
	char	   *value;
	bool		ok = false;

	describe_member(start, end, flags, position, member, sizeof(member));
	if (eq == NULL)
	{
		snprintf(err, errlen, "%s has no '=' (expected key=value)", member);
		return false;
	}
	key = tp_trimmed_copy(start, eq);
	value = tp_trimmed_copy(eq + 1, end);
	if (key == NULL || value == NULL)
		snprintf(err, errlen, "out of memory");
	else if (key[0] == '\0')
		snprintf(err, errlen, "%s has an empty key (expected key=value)", member);
	else if ((flags & TP_KV_PERCENT_DECODE) && !percent_decode(value))
		snprintf(err, errlen, "%s has a malformed percent-encoding (expected %%XX with two hex digits, not %%00)",
				 member);
	else if (!tp_utf8_is_valid(key, strlen(key)) || !tp_utf8_is_valid(value, strlen(value)))
		snprintf(err, errlen, "%s is not valid UTF-8%s", member,
				 (flags & TP_KV_PERCENT_DECODE) ? " once percent-decoded" : "");
	else if (!tp_kvlist_add(out, key, value))
		snprintf(err, errlen, "out of memory");
	else
		ok = true;
	free(key);
	free(value);
	return ok;
}

bool
tp_kvlist_parse(const char *text, int flags, tp_kvlist *out, char *err, size_t errlen)
{
	const char *p = text;
	int			position = 0;

	while (*p)
	{
		const char *end = strchr(p, ',');
		const char *s;

		if (end == NULL)
			end = p + strlen(p);
		for (s = p; s < end && tp_is_blank(*s); s++)
			;
		position++;
		if (s < end && !parse_member(p, end, flags, position, out, err, errlen))
		{
			tp_kvlist_free(out);
			return false;
		}
		p = *end ? end + 1 : end;
	}
	return true;
}
