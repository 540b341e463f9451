/*
 * pprof_writer.c - the aggregate as a gzip-compressed pprof profile.
 *
 * Two values per sample: the sample count and the time it stands for
 * ({"samples","count"}, {"cpu"|"wall","nanoseconds"}), as Go's CPU profiles
 * have them, so Pyroscope files it under the usual CPU profile type.
 * span_id, trace_id and span_name are the sample labels, each where the
 * sample has it.  Pyroscope keeps span_id on the sample and makes every
 * other label a series label: a trace_id one a series per trace, which is
 * why the extension can leave it out (traceprof.profile_trace_id).
 */
#include <stdlib.h>
#include <string.h>

#include "gzip.h"
#include "pprof.pb-c.h"
#include "profile_internal.h"
#include "trace_context.h"

#define LABELS_PER_SAMPLE 3

/* The string table: every string once, "" first; owns its copies. */
typedef struct strtab
{
	char	  **strings;
	uint32_t	count;
	uint32_t	cap;
	tp_prof_index index;
	bool		failed;			/* out of memory somewhere */
} strtab;

static bool
strtab_eq(uint32_t entry, const void *key, const void *ctx)
{
	const strtab *tab = ctx;

	return strcmp(tab->strings[entry], key) == 0;
}

/* Index of s; 0 ("") after an out-of-memory, noted in tab->failed. */
static int64_t
intern(strtab *tab, const char *s)
{
	uint64_t	hash = tp_prof_hash(s, strlen(s), 0x57);
	uint32_t	found = tp_prof_index_find(&tab->index, hash, strtab_eq, s, tab);
	char	   *copy;

	if (found != TP_PROF_NONE)
		return found;
	if (tab->count == tab->cap)
	{
		uint32_t	cap = tab->cap ? tab->cap * 2 : 64;
		char	  **grown = realloc(tab->strings, cap * sizeof(char *));

		if (grown == NULL)
		{
			tab->failed = true;
			return 0;
		}
		tab->strings = grown;
		tab->cap = cap;
	}
	copy = strdup(s);
	if (copy == NULL || !tp_prof_index_insert(&tab->index, hash, tab->count))
	{
		free(copy);
		tab->failed = true;
		return 0;
	}
	tab->strings[tab->count] = copy;
	return tab->count++;
}

static void
strtab_free(strtab *tab)
{
	for (uint32_t i = 0; i < tab->count; i++)
		free(tab->strings[i]);
	free(tab->strings);
	tp_prof_index_free(&tab->index);
}

/* The protobuf-c message tree; every array is one allocation. */
typedef struct tree
{
	Traceprof__Pprof__ValueType value_types[3];
	Traceprof__Pprof__ValueType *sample_type_ptrs[2];
	Traceprof__Pprof__Sample *samples;
	Traceprof__Pprof__Sample **sample_ptrs;
	uint64_t   *location_ids;
	int64_t    *values;
	Traceprof__Pprof__Label *labels;
	Traceprof__Pprof__Label **label_ptrs;
	Traceprof__Pprof__Location *locations;
	Traceprof__Pprof__Location **location_ptrs;
	Traceprof__Pprof__Line *lines;
	Traceprof__Pprof__Line **line_ptrs;
	Traceprof__Pprof__Function *functions;
	Traceprof__Pprof__Function **function_ptrs;
	Traceprof__Pprof__Mapping *mappings;
	Traceprof__Pprof__Mapping **mapping_ptrs;
} tree;

static void
tree_free(tree *t)
{
	free(t->samples);
	free(t->sample_ptrs);
	free(t->location_ids);
	free(t->values);
	free(t->labels);
	free(t->label_ptrs);
	free(t->locations);
	free(t->location_ptrs);
	free(t->lines);
	free(t->line_ptrs);
	free(t->functions);
	free(t->function_ptrs);
	free(t->mappings);
	free(t->mapping_ptrs);
}

static bool
tree_alloc(tree *t, const tp_profile *profile, const tp_prof_numbering *num)
{
	size_t		frames = 0;
	size_t		n = profile->nsamples;

	for (uint32_t i = 0; i < profile->nsamples; i++)
		frames += profile->samples[i].depth;
	/* +1: calloc(0) may return NULL, which would look like a failure */
	t->samples = calloc(n + 1, sizeof(*t->samples));
	t->sample_ptrs = calloc(n + 1, sizeof(*t->sample_ptrs));
	t->location_ids = calloc(frames + 1, sizeof(*t->location_ids));
	t->values = calloc(2 * n + 1, sizeof(*t->values));
	t->labels = calloc(LABELS_PER_SAMPLE * n + 1, sizeof(*t->labels));
	t->label_ptrs = calloc(LABELS_PER_SAMPLE * n + 1, sizeof(*t->label_ptrs));
	t->locations = calloc(num->nlocations + 1, sizeof(*t->locations));
	t->location_ptrs = calloc(num->nlocations + 1, sizeof(*t->location_ptrs));
	t->lines = calloc(num->nlocations + 1, sizeof(*t->lines));
	t->line_ptrs = calloc(num->nlocations + 1, sizeof(*t->line_ptrs));
	t->functions = calloc(num->nfunctions + 1, sizeof(*t->functions));
	t->function_ptrs = calloc(num->nfunctions + 1, sizeof(*t->function_ptrs));
	t->mappings = calloc(num->nmappings + 1, sizeof(*t->mappings));
	t->mapping_ptrs = calloc(num->nmappings + 1, sizeof(*t->mapping_ptrs));
	return t->samples && t->sample_ptrs && t->location_ids && t->values &&
		t->labels && t->label_ptrs && t->locations && t->location_ptrs &&
		t->lines && t->line_ptrs && t->functions && t->function_ptrs &&
		t->mappings && t->mapping_ptrs;
}

static void
add_label(Traceprof__Pprof__Sample *ps, Traceprof__Pprof__Label *label,
		  int64_t key, int64_t str)
{
	traceprof__pprof__label__init(label);
	label->key = key;
	label->str = str;
	ps->label[ps->n_label++] = label;
}

static void
fill_samples(tree *t, const tp_profile *profile, const tp_prof_numbering *num,
			 strtab *tab)
{
	uint64_t   *ids = t->location_ids;
	int64_t		k_trace = intern(tab, "trace_id");
	int64_t		k_span = intern(tab, "span_id");
	int64_t		k_name = intern(tab, "span_name");

	for (uint32_t i = 0; i < profile->nsamples; i++)
	{
		const tp_prof_sample *s = &profile->samples[i];
		Traceprof__Pprof__Sample *ps = &t->samples[i];
		Traceprof__Pprof__Label *labels = &t->labels[i * LABELS_PER_SAMPLE];
		char		hex[TP_TRACE_ID_HEX + 1];

		traceprof__pprof__sample__init(ps);
		ps->location_id = ids;
		ps->n_location_id = s->depth;
		for (uint32_t d = 0; d < s->depth; d++)
			*ids++ = num->location_id[s->locations[d]];
		ps->value = &t->values[2 * i];
		ps->n_value = 2;
		ps->value[0] = (int64_t) s->weight;
		ps->value[1] = (int64_t) s->ns;
		ps->label = &t->label_ptrs[i * LABELS_PER_SAMPLE];
		if (!tp_id_is_zero(s->span_id, sizeof(s->span_id)))
		{
			tp_hex_encode(s->span_id, sizeof(s->span_id), hex);
			add_label(ps, &labels[ps->n_label], k_span, intern(tab, hex));
		}
		if (!tp_id_is_zero(s->trace_id, sizeof(s->trace_id)))
		{
			tp_hex_encode(s->trace_id, sizeof(s->trace_id), hex);
			add_label(ps, &labels[ps->n_label], k_trace, intern(tab, hex));
		}
		if (s->span_name != TP_PROF_NONE)
			add_label(ps, &labels[ps->n_label], k_name,
					  intern(tab, profile->span_names[s->span_name]));
		t->sample_ptrs[i] = ps;
	}
}

/* Locations, functions and mappings, each in the order of their new ids. */
static void
fill_tables(tree *t, const tp_profile *profile, const tp_prof_numbering *num,
			strtab *tab)
{
	for (uint32_t i = 0; i < profile->nlocations; i++)
	{
		const tp_prof_location *loc = &profile->locations[i];
		uint32_t	id = num->location_id[i];
		Traceprof__Pprof__Location *pl;
		Traceprof__Pprof__Line *line;

		if (id == 0)
			continue;
		pl = &t->locations[id - 1];
		line = &t->lines[id - 1];
		traceprof__pprof__location__init(pl);
		traceprof__pprof__line__init(line);
		pl->id = id;
		pl->address = loc->address;
		if (loc->mapping != TP_PROF_NONE)
			pl->mapping_id = num->mapping_id[loc->mapping];
		line->function_id = num->function_id[loc->function];
		t->line_ptrs[id - 1] = line;
		pl->line = &t->line_ptrs[id - 1];
		pl->n_line = 1;
		t->location_ptrs[id - 1] = pl;
	}
	for (uint32_t i = 0; i < profile->nfunctions; i++)
	{
		const tp_prof_function *f = &profile->functions[i];
		uint32_t	id = num->function_id[i];
		Traceprof__Pprof__Function *pf;

		if (id == 0)
			continue;
		pf = &t->functions[id - 1];
		traceprof__pprof__function__init(pf);
		pf->id = id;
		pf->name = intern(tab, f->name);
		pf->system_name = pf->name;
		if (f->file != NULL)
			pf->filename = intern(tab, f->file);
		t->function_ptrs[id - 1] = pf;
	}
	for (uint32_t i = 0; i < profile->nmappings; i++)
	{
		const tp_prof_mapping *m = &profile->mappings[i];
		uint32_t	id = num->mapping_id[i];
		Traceprof__Pprof__Mapping *pm;

		if (id == 0)
			continue;
		pm = &t->mappings[id - 1];
		traceprof__pprof__mapping__init(pm);
		pm->id = id;
		pm->memory_start = m->start;
		pm->memory_limit = m->limit;
		pm->file_offset = m->offset;
		pm->filename = intern(tab, m->file);
		if (m->build_id != NULL)
			pm->build_id = intern(tab, m->build_id);
		pm->has_functions = m->has_functions;
		t->mapping_ptrs[id - 1] = pm;
	}
}

uint8_t *
tp_profile_pprof(const tp_profile *profile, size_t *len)
{
	Traceprof__Pprof__Profile msg = TRACEPROF__PPROF__PROFILE__INIT;
	tp_prof_numbering num;
	strtab		tab;
	tree		t;
	uint8_t    *packed = NULL;
	uint8_t    *gz = NULL;
	size_t		size;

	*len = 0;
	memset(&tab, 0, sizeof(tab));
	memset(&t, 0, sizeof(t));
	if (!tp_prof_number(profile, &num))
		return NULL;
	if (!tree_alloc(&t, profile, &num))
		goto done;

	intern(&tab, "");
	for (int i = 0; i < 3; i++)
		traceprof__pprof__value_type__init(&t.value_types[i]);
	t.value_types[0].type = intern(&tab, "samples");
	t.value_types[0].unit = intern(&tab, "count");
	t.value_types[1].type = intern(&tab, profile->sample_type);
	t.value_types[1].unit = intern(&tab, "nanoseconds");
	t.value_types[2] = t.value_types[1];
	t.sample_type_ptrs[0] = &t.value_types[0];
	t.sample_type_ptrs[1] = &t.value_types[1];
	msg.sample_type = t.sample_type_ptrs;
	msg.n_sample_type = 2;
	msg.period_type = &t.value_types[2];
	msg.period = (int64_t) profile->period_ns;
	msg.default_sample_type = t.value_types[1].type;
	msg.time_nanos = (int64_t) profile->start_ns;
	if (profile->end_ns > profile->start_ns)
		msg.duration_nanos = (int64_t) (profile->end_ns - profile->start_ns);

	fill_samples(&t, profile, &num, &tab);
	fill_tables(&t, profile, &num, &tab);
	if (tab.failed)
		goto done;
	msg.sample = t.sample_ptrs;
	msg.n_sample = profile->nsamples;
	msg.location = t.location_ptrs;
	msg.n_location = num.nlocations;
	msg.function = t.function_ptrs;
	msg.n_function = num.nfunctions;
	msg.mapping = t.mapping_ptrs;
	msg.n_mapping = num.nmappings;
	msg.string_table = tab.strings;
	msg.n_string_table = tab.count;

	size = traceprof__pprof__profile__get_packed_size(&msg);
	packed = malloc(size + 1);
	if (packed == NULL)
		goto done;
	traceprof__pprof__profile__pack(&msg, packed);
	gz = tp_gzip(packed, size, len);

done:
	free(packed);
	tree_free(&t);
	strtab_free(&tab);
	tp_prof_numbering_free(&num);
	return gz;
}
