/*
 * pools.h - the fixed vocabularies records are drawn from, JSON-escaped
 * once at start so the hot path only copies bytes.
 *
 * The pools deliberately hold text a JSON writer or reader can get wrong:
 * Latin accents (é, ü, ß), Cyrillic, Greek, CJK, an emoji outside the
 * Basic Multilingual Plane (a surrogate pair in UTF-16), double quotes,
 * backslashes, tab, newline and a raw control character (U+0001).
 */
#ifndef GEN_POOLS_H
#define GEN_POOLS_H

#include <stddef.h>
#include <stdint.h>

/* A JSON-escaped string, without the surrounding quotes. */
typedef struct gen_str
{
	const char *s;
	uint32_t	len;
} gen_str;

typedef struct gen_pool
{
	const gen_str *items;
	uint32_t	count;
	uint32_t	max_len;		/* longest escaped item, for buffer bounds */
} gen_pool;

typedef struct gen_pools
{
	gen_pool	first_names;
	gen_pool	last_names;
	gen_pool	tags;			/* count is prime: see order_writer.c */
	gen_pool	currencies;
	gen_pool	channels;
	gen_pool	coupons;
	gen_pool	notes;
	gen_pool	ship_methods;
	gen_pool	countries;
} gen_pools;

/* The pools, escaped on first use (single-threaded program). */
const gen_pools *gen_pools_get(void);

/*
 * Escape len bytes of UTF-8 for use inside a JSON string: '"', '\\' and
 * control characters are escaped (\n, \t, ... or \u00XX), everything else
 * is copied.  dst needs 6 * len bytes; returns the bytes written.
 */
size_t		gen_json_escape(char *dst, const char *src, size_t len);

#endif
