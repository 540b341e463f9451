/*
 * kvlist.h - "key=value,key=value" lists as used by OTEL_RESOURCE_ATTRIBUTES,
 * OTEL_EXPORTER_OTLP_HEADERS (W3C Baggage syntax, percent-encoded values)
 * and PYROSCOPE_TAGS (plain).
 */
#ifndef TP_KVLIST_H
#define TP_KVLIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tp_kv
{
	char	   *key;
	char	   *value;
} tp_kv;

typedef struct tp_kvlist
{
	tp_kv	   *items;
	size_t		count;
} tp_kvlist;

#define TP_KV_PERCENT_DECODE 0x01	/* values are %XX-encoded */
#define TP_KV_SECRET 0x02		/* errors name members by position, never by content */

/*
 * Parse text into out (which must be zeroed or freed).  Whitespace around
 * keys and values is trimmed; empty members ("a=1,,b=2") are skipped.
 * On the first bad member returns false, leaves out empty and writes a
 * message naming the bad part into err.
 */
bool		tp_kvlist_parse(const char *text, int flags, tp_kvlist *out,
							char *err, size_t errlen);

/* Append a copy of key/value; replaces nothing.  False on out-of-memory. */
bool		tp_kvlist_add(tp_kvlist *list, const char *key, const char *value);

/* Replace the value of key, or append it.  False on out-of-memory. */
bool		tp_kvlist_set(tp_kvlist *list, const char *key, const char *value);

/* The value for key, or NULL. */
const char *tp_kvlist_get(const tp_kvlist *list, const char *key);

void		tp_kvlist_free(tp_kvlist *list);

#endif
