/*
 * pprof_parts.c - runs of a pprof's samples as pprofs of their own (see
 * pprof_parts.h).
 *
 * A part keeps the header (sample types, period, time window: Pyroscope
 * adds up profiles of the same series and window), a run of samples, and
 * only the locations, functions and mappings they reference; strings no
 * part member uses become "" so that no index moves.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gzip.h"
#include "pprof.pb-c.h"
#include "pprof_parts.h"

/* The unpacked profile, and per table which entries the part being built uses. */
struct tp_pprof_parts
{
	Traceprof__Pprof__Profile *profile;
	uint8_t    *raw;
	bool	   *used_string;
	Traceprof__Pprof__Location **locations;
	Traceprof__Pprof__Function **functions;
	Traceprof__Pprof__Mapping **mappings;
	char	  **strings;
};

tp_pprof_parts *
tp_pprof_parts_open(const uint8_t *gz, size_t len)
{
	tp_pprof_parts *sp = calloc(1, sizeof(*sp));
	size_t		raw_len = 0;

	if (sp == NULL)
		return NULL;
	sp->raw = tp_gunzip(gz, len, &raw_len);
	sp->profile = sp->raw ? traceprof__pprof__profile__unpack(NULL, raw_len, sp->raw) : NULL;
	if (sp->profile != NULL)
	{
		sp->used_string = calloc(sp->profile->n_string_table + 1, 1);
		sp->strings = calloc(sp->profile->n_string_table + 1, sizeof(char *));
		sp->locations = calloc(sp->profile->n_location + 1, sizeof(void *));
		sp->functions = calloc(sp->profile->n_function + 1, sizeof(void *));
		sp->mappings = calloc(sp->profile->n_mapping + 1, sizeof(void *));
	}
	if (sp->profile == NULL || sp->used_string == NULL || sp->strings == NULL ||
		sp->locations == NULL || sp->functions == NULL || sp->mappings == NULL)
	{
		tp_pprof_parts_close(sp);
		return NULL;
	}
	return sp;
}

void
tp_pprof_parts_close(tp_pprof_parts *sp)
{
	if (sp == NULL)
		return;
	if (sp->profile != NULL)
		traceprof__pprof__profile__free_unpacked(sp->profile, NULL);
	free(sp->raw);
	free(sp->used_string);
	free(sp->strings);
	free(sp->locations);
	free(sp->functions);
	free(sp->mappings);
	free(sp);
}

size_t
tp_pprof_parts_samples(const tp_pprof_parts *sp)
{
	return sp->profile->n_sample;
}

static void
use_string(tp_pprof_parts *sp, int64_t index)
{
	if (index > 0 && (size_t) index < sp->profile->n_string_table)
		sp->used_string[index] = true;
}

/*
 * The index of the entry with this id; n when absent.  Our writer numbers
 * ids 1..n in order, so id - 1 is tried first.
 */
static size_t
find_location(const Traceprof__Pprof__Profile *p, uint64_t id)
{
	if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
		return id - 1;
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return i;
	return p->n_location;
}

static size_t
find_function(const Traceprof__Pprof__Profile *p, uint64_t id)
{
	if (id >= 1 && id <= p->n_function && p->function[id - 1]->id == id)
		return id - 1;
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == id)
			return i;
	return p->n_function;
}

static size_t
find_mapping(const Traceprof__Pprof__Profile *p, uint64_t id)
{
	if (id >= 1 && id <= p->n_mapping && p->mapping[id - 1]->id == id)
		return id - 1;
	for (size_t i = 0; i < p->n_mapping; i++)
		if (p->mapping[i]->id == id)
			return i;
	return p->n_mapping;
}

uint64_t
tp_pprof_parts_weight(const tp_pprof_parts *sp, size_t first, size_t count)
{
	uint64_t	total = 0;

	for (size_t i = first; i < first + count; i++)
		if (sp->profile->sample[i]->n_value > 0 && sp->profile->sample[i]->value[0] > 0)
			total += (uint64_t) sp->profile->sample[i]->value[0];
	return total;
}

/* Mark what samples [first, first + count) use, into the tables of the part. */
static void
mark_part(tp_pprof_parts *sp, Traceprof__Pprof__Profile *part, size_t first, size_t count)
{
	const Traceprof__Pprof__Profile *p = sp->profile;
	bool	   *loc = calloc(p->n_location + 1, 1);
	bool	   *fn = calloc(p->n_function + 1, 1);
	bool	   *map = calloc(p->n_mapping + 1, 1);

	memset(sp->used_string, 0, p->n_string_table);
	part->n_location = part->n_function = part->n_mapping = 0;
	if (loc == NULL || fn == NULL || map == NULL)
		goto done;
	for (size_t i = first; i < first + count; i++)
	{
		const Traceprof__Pprof__Sample *sample = p->sample[i];

		for (size_t j = 0; j < sample->n_location_id; j++)
			loc[find_location(p, sample->location_id[j])] = true;
		for (size_t j = 0; j < sample->n_label; j++)
		{
			use_string(sp, sample->label[j]->key);
			use_string(sp, sample->label[j]->str);
			use_string(sp, sample->label[j]->num_unit);
		}
	}
	for (size_t i = 0; i < p->n_location; i++)
	{
		if (!loc[i])
			continue;
		sp->locations[part->n_location++] = p->location[i];
		map[find_mapping(p, p->location[i]->mapping_id)] = true;
		for (size_t j = 0; j < p->location[i]->n_line; j++)
			fn[find_function(p, p->location[i]->line[j]->function_id)] = true;
	}
	for (size_t i = 0; i < p->n_function; i++)
		if (fn[i])
		{
			sp->functions[part->n_function++] = p->function[i];
			use_string(sp, p->function[i]->name);
			use_string(sp, p->function[i]->system_name);
			use_string(sp, p->function[i]->filename);
		}
	for (size_t i = 0; i < p->n_mapping; i++)
		if (map[i])
		{
			sp->mappings[part->n_mapping++] = p->mapping[i];
			use_string(sp, p->mapping[i]->filename);
			use_string(sp, p->mapping[i]->build_id);
		}
done:
	free(loc);
	free(fn);
	free(map);
}

uint8_t *
tp_pprof_parts_encode(tp_pprof_parts *sp, size_t first, size_t count, size_t *len)
{
	const Traceprof__Pprof__Profile *p = sp->profile;
	Traceprof__Pprof__Profile part = *p;
	uint8_t    *packed;
	uint8_t    *gz = NULL;
	size_t		size;

	part.sample = p->sample + first;
	part.n_sample = count;
	part.location = sp->locations;
	part.function = sp->functions;
	part.mapping = sp->mappings;
	part.string_table = sp->strings;
	mark_part(sp, &part, first, count);
	for (size_t i = 0; i < p->n_sample_type; i++)
	{
		use_string(sp, p->sample_type[i]->type);
		use_string(sp, p->sample_type[i]->unit);
	}
	if (p->period_type != NULL)
	{
		use_string(sp, p->period_type->type);
		use_string(sp, p->period_type->unit);
	}
	use_string(sp, p->default_sample_type);
	for (size_t i = 0; i < p->n_string_table; i++)
		sp->strings[i] = sp->used_string[i] ? p->string_table[i] : (char *) "";
	size = traceprof__pprof__profile__get_packed_size(&part);
	packed = malloc(size);
	if (packed != NULL)
	{
		traceprof__pprof__profile__pack(&part, packed);
		gz = tp_gzip(packed, size, len);
	}
	free(packed);
	return gz;
}
