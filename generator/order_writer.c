/*
 * order_writer.c - one order record at a time, straight into a buffer.
 *
 * This is the generator's hot path (millions of records per second): the
 * pools are pre-escaped, numbers and dates are formatted by hand, and the
 * fixed JSON punctuation is copied as literals.
 */
#include "order_writer.h"

#include <string.h>

#include "civil_time.h"
#include "numfmt.h"

/* Copy a string literal (without its NUL). */
#define PUT_LIT(p, lit) \
	do { memcpy((p), (lit), sizeof(lit) - 1); (p) += sizeof(lit) - 1; } while (0)

#define US_PER_DAY		INT64_C(86400000000)

/*
 * Offsets in minutes east of UTC, with repetition as weights.  Zero is
 * written as "Z" except in one entry that asks for "+00:00"; half-hour and
 * 45-minute zones catch code that assumes whole hours.
 */
static const struct
{
	int16_t		minutes;
	int8_t		zulu;
}			offsets[16] = {
	{0, 1}, {0, 1}, {0, 1}, {0, 0},
	{60, 0}, {120, 0}, {330, 0}, {345, 0},
	{540, 0}, {780, 0}, {-180, 0}, {-300, 0},
	{-300, 0}, {-480, 0}, {-570, 0}, {-720, 0},
};

/* Longest literal/number text a record can hold beyond the pool strings. */
#define RECORD_FIXED_MAX 1024
#define MAX_TAGS 4
#define MAX_LINES 3

static inline char *
put_str(char *p, const gen_str *s)
{
	memcpy(p, s->s, s->len);
	return p + s->len;
}

static inline const gen_str *
pick(gen_rng *rng, const gen_pool *pool)
{
	return &pool->items[gen_rng_below(rng, pool->count)];
}

void
gen_orders_init(gen_orders *g, uint64_t seed)
{
	gen_rng_seed(&g->rng, seed);
	g->pools = gen_pools_get();
	g->next_id = 1;

	/* Orders fall in 2019..2026 UTC: eight years, two of them leap years. */
	g->first_us = gen_days_from_civil(2019, 1, 1) * US_PER_DAY;
	g->span_us = (uint64_t) (gen_days_from_civil(2027, 1, 1) * US_PER_DAY
							 - g->first_us);
}

size_t
gen_orders_max_record(const gen_orders *g)
{
	const gen_pools *pl = g->pools;

	/* Every pool string a record can contain, at its longest, plus slack. */
	return RECORD_FIXED_MAX
		+ pl->first_names.max_len + pl->last_names.max_len
		+ pl->currencies.max_len
		+ MAX_TAGS * pl->tags.max_len
		+ pl->channels.max_len + pl->coupons.max_len + pl->notes.max_len
		+ pl->ship_methods.max_len + pl->countries.max_len;
}

/*
 * amount in cents: mostly everyday purchases, some large orders, a few
 * refunds (negative) and free orders, rarely close to numeric(12,2)'s limit.
 */
static int64_t
draw_amount_cents(gen_rng *rng)
{
	uint32_t	kind = gen_rng_below(rng, 1000);

	if (kind < 50)
		return -(int64_t) (1 + gen_rng_below(rng, 49999));
	if (kind < 60)
		return 0;
	if (kind < 900)
		return 100 + gen_rng_below(rng, 99900);
	if (kind < 995)
		return 100000 + gen_rng_below(rng, 9900000);
	/* Up to 9999999999.99: 10 integer digits, the column's maximum. */
	return (int64_t) (gen_rng_next(rng) % INT64_C(1000000000000));
}

static char *
put_attributes(gen_orders *g, char *p)
{
	gen_rng    *rng = &g->rng;
	const gen_pools *pl = g->pools;

	PUT_LIT(p, "{\"channel\":\"");
	p = put_str(p, pick(rng, &pl->channels));
	PUT_LIT(p, "\",\"items\":");
	p = gen_put_u64(p, 1 + gen_rng_below(rng, 12));
	if (gen_rng_chance(rng, 15))
		PUT_LIT(p, ",\"gift_wrap\":true");
	else
		PUT_LIT(p, ",\"gift_wrap\":false");
	if (gen_rng_chance(rng, 70))
		PUT_LIT(p, ",\"coupon\":null");
	else
	{
		PUT_LIT(p, ",\"coupon\":\"");
		p = put_str(p, pick(rng, &pl->coupons));
		*p++ = '"';
	}
	/* Loyalty points: refunds take points back, so negative occurs. */
	PUT_LIT(p, ",\"points\":");
	p = gen_put_i64(p, (int64_t) gen_rng_below(rng, 2500) - 500);

	if (gen_rng_chance(rng, 25))
	{
		PUT_LIT(p, ",\"note\":\"");
		p = put_str(p, pick(rng, &pl->notes));
		*p++ = '"';
	}
	if (gen_rng_chance(rng, 60))
	{
		PUT_LIT(p, ",\"shipping\":{\"method\":\"");
		p = put_str(p, pick(rng, &pl->ship_methods));
		PUT_LIT(p, "\",\"country\":\"");
		p = put_str(p, pick(rng, &pl->countries));
		PUT_LIT(p, "\",\"weight_kg\":");
		p = gen_put_decimal(p, 1 + gen_rng_below(rng, 30000), 3);
		if (gen_rng_chance(rng, 20))
			PUT_LIT(p, ",\"insured\":true}");
		else
			PUT_LIT(p, ",\"insured\":false}");
	}
	if (gen_rng_chance(rng, 20))
	{
		/* An array of objects; sometimes empty. */
		uint32_t	lines = gen_rng_below(rng, MAX_LINES + 1);
		uint32_t	i;

		PUT_LIT(p, ",\"lines\":[");
		for (i = 0; i < lines; i++)
		{
			if (i > 0)
				*p++ = ',';
			PUT_LIT(p, "{\"sku\":\"SKU-");
			p = gen_put_u64(p, 10000 + gen_rng_below(rng, 90000));
			PUT_LIT(p, "\",\"qty\":");
			p = gen_put_u64(p, 1 + gen_rng_below(rng, 5));
			PUT_LIT(p, "}");
		}
		*p++ = ']';
	}
	*p++ = '}';
	return p;
}

char *
gen_orders_record(gen_orders *g, char *p)
{
	gen_rng    *rng = &g->rng;
	const gen_pools *pl = g->pools;
	uint32_t	customer = 1 + gen_rng_below(rng, 99999);
	uint32_t	ntags;
	uint32_t	tag;
	uint32_t	stride;
	uint32_t	i;
	int64_t		when_us;
	uint32_t	zone;

	PUT_LIT(p, "{\"id\":");
	p = gen_put_u64(p, g->next_id++);
	PUT_LIT(p, ",\"customer_id\":");
	p = gen_put_u64(p, customer);

	/* The name follows from the id, so a customer keeps one name. */
	PUT_LIT(p, ",\"customer_name\":\"");
	p = put_str(p, &pl->first_names.items[customer % pl->first_names.count]);
	*p++ = ' ';
	p = put_str(p, &pl->last_names.items[customer / pl->first_names.count
										 % pl->last_names.count]);

	PUT_LIT(p, "\",\"amount\":");
	p = gen_put_decimal(p, draw_amount_cents(rng), 2);

	PUT_LIT(p, ",\"currency\":\"");
	p = put_str(p, pick(rng, &pl->currencies));

	PUT_LIT(p, "\",\"created_at\":\"");
	when_us = g->first_us + (int64_t) (gen_rng_next(rng) % g->span_us);
	zone = gen_rng_below(rng, 16);
	p = gen_put_timestamp(p, when_us, offsets[zone].minutes, offsets[zone].zulu);

	/*
	 * 0..4 distinct tags: with a prime pool size, stepping by any stride
	 * in 1..count-1 from any start visits distinct entries.
	 */
	PUT_LIT(p, "\",\"tags\":[");
	ntags = gen_rng_below(rng, MAX_TAGS + 1);
	tag = gen_rng_below(rng, pl->tags.count);
	stride = 1 + gen_rng_below(rng, pl->tags.count - 1);
	for (i = 0; i < ntags; i++)
	{
		if (i > 0)
			*p++ = ',';
		*p++ = '"';
		p = put_str(p, &pl->tags.items[tag]);
		*p++ = '"';
		tag = (tag + stride) % pl->tags.count;
	}

	PUT_LIT(p, "],\"attributes\":");
	p = put_attributes(g, p);
	*p++ = '}';
	return p;
}

bool
gen_orders_emit(uint64_t seed, gen_format format, uint64_t n,
				char *buf, size_t bufsize, gen_sink sink, void *arg)
{
	gen_orders	g;
	size_t		room;
	char	   *p = buf;
	char	   *limit;
	uint64_t	i;

	gen_orders_init(&g, seed);
	room = gen_orders_max_record(&g) + 16;	/* + document framing */
	if (bufsize < room)
		return false;
	limit = buf + bufsize - room;

	if (format == GEN_FORMAT_JSON)
	{
		if (n == 0)
			PUT_LIT(p, "[]\n");
		else
			PUT_LIT(p, "[\n");
	}

	for (i = 0; i < n; i++)
	{
		if (p > limit)
		{
			if (!sink(arg, buf, (size_t) (p - buf)))
				return false;
			p = buf;
		}
		if (format == GEN_FORMAT_JSON)
		{
			if (i > 0)
				PUT_LIT(p, ",\n");
			p = gen_orders_record(&g, p);
		}
		else
		{
			p = gen_orders_record(&g, p);
			*p++ = '\n';
		}
	}

	if (format == GEN_FORMAT_JSON && n > 0)
		PUT_LIT(p, "\n]\n");

	return p == buf || sink(arg, buf, (size_t) (p - buf));
}
