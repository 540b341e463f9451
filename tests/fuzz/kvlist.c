/*
 * kvlist.c - libFuzzer target for tp_kvlist_parse(), the "k=v,..." syntax
 * of OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS.
 *
 * The first byte picks the flags (percent-decoding, secret); the rest is
 * the list.  Invariants: a failure leaves the list empty and explains
 * itself in one line, never quoting a secret list; a success holds
 * trimmed, non-empty keys without ',' or '=', plain values without ','
 * (percent-decoded ones may hold anything but NUL), at most one member
 * per comma-separated part; set/get agree.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "kvlist.h"
#include "text.h"

static bool
is_trimmed(const char *s)
{
	size_t		n = strlen(s);

	return n == 0 || (!tp_is_blank(s[0]) && !tp_is_blank(s[n - 1]));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int			flags;
	char	   *text;
	tp_kvlist	list = {0};
	char		err[128];
	size_t		parts = 1;

	if (size == 0)
		return 0;
	flags = data[0] & (TP_KV_PERCENT_DECODE | TP_KV_SECRET);
	text = fuzz_cstring(data + 1, size - 1);
	for (const char *p = text; *p; p++)
		parts += *p == ',';

	memset(err, 'x', sizeof(err));
	if (!tp_kvlist_parse(text, flags, &list, err, sizeof(err)))
	{
		FUZZ_CHECK(list.count == 0 && list.items == NULL);
		FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
		FUZZ_CHECK(fuzz_is_one_line(err));
		if (flags & TP_KV_SECRET)
			FUZZ_CHECK(strchr(err, '"') == NULL);	/* members named by position only */
		free(text);
		return 0;
	}
	FUZZ_CHECK(list.count <= parts);
	for (size_t i = 0; i < list.count; i++)
	{
		const tp_kv *kv = &list.items[i];

		FUZZ_CHECK(kv->key[0] != '\0' && is_trimmed(kv->key));
		FUZZ_CHECK(strpbrk(kv->key, ",=") == NULL);
		if (!(flags & TP_KV_PERCENT_DECODE))
			FUZZ_CHECK(is_trimmed(kv->value) && strchr(kv->value, ',') == NULL);
		/* get() answers with the first member of that key */
		for (size_t j = 0; j < i; j++)
			if (strcmp(list.items[j].key, kv->key) == 0)
			{
				kv = &list.items[j];
				break;
			}
		FUZZ_CHECK(tp_kvlist_get(&list, kv->key) == kv->value);
	}
	if (list.count > 0)
	{
		size_t		count = list.count;

		FUZZ_CHECK(tp_kvlist_set(&list, list.items[0].key, "replaced"));
		FUZZ_CHECK(list.count == count);
		FUZZ_CHECK(strcmp(tp_kvlist_get(&list, list.items[0].key), "replaced") == 0);
	}
	tp_kvlist_free(&list);
	FUZZ_CHECK(list.count == 0 && list.items == NULL);
	free(text);
	return 0;
}
