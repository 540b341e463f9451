/* pools.c - vocabularies for synthetic orders, escaped once. */
#include "pools.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/*
 * Raw (unescaped) text.  Most entries are ordinary, as in real data; a
 * few carry the characters listed in pools.h.  "\001" is written in octal
 * because a hex escape would swallow the hex letters that follow it.
 */
static const char *const raw_first_names[] = {
	"Anna", "James", "Zoë \"Ace\"", "Jürgen", "José", "René", "Søren",
	"Łukasz", "María", "Ngozi", "Priya", "Wei", "Yuki", "Олег", "Ελένη",
	"太郎", "Mohammed", "Fatima", "Liam", "Emma", "Noah", "Olivia",
	"Back\\slash", "Tab\tAnn", "Multi\nLine", "Ctrl\001Char", "Party 🎉",
	"Chloé", "Björn", "Ines", "Kofi", "Sofia",
};

static const char *const raw_last_names[] = {
	"Smith", "O'Brien", "Müller", "Weiß", "Großmann", "García", "Nguyễn",
	"Dubois", "Kowalski", "Ivanov", "山田", "김", "Østergaard", "D'Angelo",
	"van der Berg", "Johnson", "Brown", "Schröder", "Lefèvre", "Rossi",
	"Tanaka", "Silva", "Okafor", "Patel", "Chen", "\"The Rock\" Jones",
	"Wilson", "Andersson", "Novák", "Yılmaz", "Cohen",
};

/* 19 entries: a prime, so any stride walks them without repeating. */
static const char *const raw_tags[] = {
	"gift", "priority", "express", "b2b", "fragile", "subscription",
	"first-order", "vip", "sale", "returned", "backorder", "international",
	"bulk", "café", "süß", "限定", "🎁 bundle", "say \"hi\"", "tab\tsep",
};

/* Weighted by repetition: common currencies appear more often. */
static const char *const raw_currencies[] = {
	"USD", "USD", "USD", "USD", "EUR", "EUR", "EUR", "EUR",
	"GBP", "GBP", "JPY", "CHF", "CAD", "INR", "BRL", "SEK",
};

static const char *const raw_channels[] = {
	"web", "web", "mobile", "mobile", "store", "phone", "partner", "marketplace",
};

static const char *const raw_coupons[] = {
	"SAVE10", "WELCOME", "BF-2025", "FREESHIP", "VIP20", "ÉTÉ-15",
};

static const char *const raw_notes[] = {
	"Leave at door\nRing twice",
	"Call \"Bob\" before delivery",
	"Path: C:\\Orders\\inbox",
	"tab\tseparated\tnote",
	"Bitte nicht knicken – danke!",
	"请放在门口",
	"🚚 fast please",
	"bell\007 and \001 control",
	"Deliver after 6pm",
	"Fragile: glass",
};

static const char *const raw_ship_methods[] = {
	"standard", "standard", "express", "pickup", "freight", "same-day",
};

static const char *const raw_countries[] = {
	"DE", "US", "FR", "JP", "BR", "IN", "GB", "ES", "CN", "AU", "NG", "CA",
};

size_t
gen_json_escape(char *dst, const char *src, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char	   *p = dst;
	size_t		i;

	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) src[i];

		switch (c)
		{
			case '"':
				*p++ = '\\';
				*p++ = '"';
				break;
			case '\\':
				*p++ = '\\';
				*p++ = '\\';
				break;
			case '\n':
				*p++ = '\\';
				*p++ = 'n';
				break;
			case '\t':
				*p++ = '\\';
				*p++ = 't';
				break;
			case '\r':
				*p++ = '\\';
				*p++ = 'r';
				break;
			case '\b':
				*p++ = '\\';
				*p++ = 'b';
				break;
			case '\f':
				*p++ = '\\';
				*p++ = 'f';
				break;
			default:
				if (c < 0x20)
				{
					memcpy(p, "\\u00", 4);
					p[4] = hex[c >> 4];
					p[5] = hex[c & 0xf];
					p += 6;
				}
				else
					*p++ = (char) c;	/* UTF-8 passes through unchanged */
				break;
		}
	}
	return (size_t) (p - dst);
}

/*
 * Escaped text and item arrays live in static storage: the pools are built
 * once and kept for the life of the process, so there is nothing to free.
 * The sizes cover the tables above with room to spare; overflowing them
 * is a programming error caught by the first run.
 */
static char arena[8192];
static size_t arena_used;
static gen_str item_store[256];
static size_t items_used;

static void
build_pool(gen_pool *pool, const char *const *raw, uint32_t count)
{
	gen_str    *items = item_store + items_used;
	uint32_t	i;

	if (items_used + count > sizeof(item_store) / sizeof(item_store[0]))
		abort();
	items_used += count;

	pool->max_len = 0;
	for (i = 0; i < count; i++)
	{
		size_t		raw_len = strlen(raw[i]);
		size_t		len;

		if (arena_used + 6 * raw_len > sizeof(arena))
			abort();
		len = gen_json_escape(arena + arena_used, raw[i], raw_len);
		items[i].s = arena + arena_used;
		items[i].len = (uint32_t) len;
		if (len > pool->max_len)
			pool->max_len = (uint32_t) len;
		arena_used += len;
	}
	pool->items = items;
	pool->count = count;
}

#define LENGTH(array) ((uint32_t) (sizeof(array) / sizeof(array[0])))

_Static_assert(LENGTH(raw_tags) == 19, "order_writer.c needs a prime tag count");

const gen_pools *
gen_pools_get(void)
{
	static gen_pools pools;
	static bool built;

	if (!built)
	{
		build_pool(&pools.first_names, raw_first_names, LENGTH(raw_first_names));
		build_pool(&pools.last_names, raw_last_names, LENGTH(raw_last_names));
		build_pool(&pools.tags, raw_tags, LENGTH(raw_tags));
		build_pool(&pools.currencies, raw_currencies, LENGTH(raw_currencies));
		build_pool(&pools.channels, raw_channels, LENGTH(raw_channels));
		build_pool(&pools.coupons, raw_coupons, LENGTH(raw_coupons));
		build_pool(&pools.notes, raw_notes, LENGTH(raw_notes));
		build_pool(&pools.ship_methods, raw_ship_methods, LENGTH(raw_ship_methods));
		build_pool(&pools.countries, raw_countries, LENGTH(raw_countries));
		built = true;
	}
	return &pools;
}
