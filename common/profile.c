/*
 * profile.c - aggregate symbolized stack samples.
 *
 * Every distinct address becomes one location, symbolized once; every
 * distinct (function name, module) one function; every mapped module one
 * mapping.  A sample is (locations leaf first, trace_id, span_id, span
 * name); samples with the same key are merged and their weights summed.
 * All lookups go through hash indexes, so adding a sample costs its depth.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"
#include "text.h"

/* Beyond this many cached locations tp_profile_clear() starts afresh. */
#define LOCATION_CACHE_MAX 65536

/* ---- hashing and the generic index ---- */

uint64_t
tp_prof_hash(const void *data, size_t len, uint64_t seed)
{
	const uint8_t *p = data;
	uint64_t	h = 0xcbf29ce484222325ULL ^ seed;	/* FNV-1a */

	for (size_t i = 0; i < len; i++)
	{
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t
hash_string(const char *s, uint64_t seed)
{
	return tp_prof_hash(s ? s : "", s ? strlen(s) + 1 : 0, seed);
}

uint32_t
tp_prof_index_find(const tp_prof_index *index, uint64_t hash,
				   tp_prof_key_eq eq, const void *key, const void *ctx)
{
	uint32_t	h = (uint32_t) (hash ^ (hash >> 32));

	if (index->slots == NULL)
		return TP_PROF_NONE;
	for (uint32_t i = h & index->mask;; i = (i + 1) & index->mask)
	{
		const tp_prof_slot *slot = &index->slots[i];

		if (slot->entry_plus1 == 0)
			return TP_PROF_NONE;
		if (slot->hash == h && eq(slot->entry_plus1 - 1, key, ctx))
			return slot->entry_plus1 - 1;
	}
}

static void
place(tp_prof_slot *slots, uint32_t mask, uint32_t h, uint32_t entry_plus1)
{
	uint32_t	i = h & mask;

	while (slots[i].entry_plus1 != 0)
		i = (i + 1) & mask;
	slots[i].entry_plus1 = entry_plus1;
	slots[i].hash = h;
}

/* Keep the load factor at most one half: probes stay short. */
bool
tp_prof_index_insert(tp_prof_index *index, uint64_t hash, uint32_t entry)
{
	uint32_t	h = (uint32_t) (hash ^ (hash >> 32));

	if (index->slots == NULL || (index->used + 1) * 2 > index->mask + 1)
	{
		uint32_t	cap = index->slots ? (index->mask + 1) * 2 : 64;
		tp_prof_slot *slots = calloc(cap, sizeof(tp_prof_slot));

		if (slots == NULL)
			return false;
		for (uint32_t i = 0; index->slots != NULL && i <= index->mask; i++)
			if (index->slots[i].entry_plus1 != 0)
				place(slots, cap - 1, index->slots[i].hash, index->slots[i].entry_plus1);
		free(index->slots);
		index->slots = slots;
		index->mask = cap - 1;
	}
	place(index->slots, index->mask, h, entry + 1);
	index->used++;
	return true;
}

void
tp_prof_index_free(tp_prof_index *index)
{
	free(index->slots);
	memset(index, 0, sizeof(*index));
}

/* Grow an array of elements of size each to hold one more; false on OOM. */
static bool
reserve(void **array, uint32_t *cap, uint32_t count, size_t size)
{
	void	   *grown;
	uint32_t	newcap;

	if (count < *cap)
		return true;
	newcap = *cap ? *cap * 2 : 16;
	grown = realloc(*array, (size_t) newcap * size);
	if (grown == NULL)
		return false;
	*array = grown;
	*cap = newcap;
	return true;
}

/* Length of the valid UTF-8 sequence at s, or 0; control characters count as invalid. */
static size_t
utf8_length(const unsigned char *s, size_t avail)
{
	if (s[0] < 0x20 || s[0] == 0x7f)
		return 0;
	return tp_utf8_char_length(s, avail);
}

/*
 * A copy that is valid UTF-8 without control characters, so that every
 * writer (protobuf strings, JSON, one-line folded stacks) can use it as is:
 * any other byte becomes '?'.
 */
char *
tp_prof_clean_copy(const char *s)
{
	size_t		len = strlen(s);
	char	   *out = malloc(len + 1);
	size_t		i = 0;

	if (out == NULL)
		return NULL;
	while (i < len)
	{
		size_t		n = utf8_length((const unsigned char *) s + i, len - i);

		if (n == 0)
		{
			out[i++] = '?';
			continue;
		}
		memcpy(out + i, s + i, n);
		i += n;
	}
	out[len] = '\0';
	return out;
}

/* ---- construction ---- */

tp_profile *
tp_profile_new(const char *sample_type, uint64_t period_ns)
{
	tp_profile *profile = calloc(1, sizeof(tp_profile));

	if (profile == NULL)
		return NULL;
	profile->sample_type = strdup(sample_type ? sample_type : "cpu");
	if (profile->sample_type == NULL)
	{
		free(profile);
		return NULL;
	}
	profile->period_ns = period_ns;
	return profile;
}

void
tp_profile_set_window(tp_profile *profile, uint64_t start_ns, uint64_t end_ns)
{
	profile->start_ns = start_ns;
	profile->end_ns = end_ns;
}

void
tp_profile_set_period(tp_profile *profile, uint64_t period_ns)
{
	profile->period_ns = period_ns;
}

uint64_t
tp_profile_total(const tp_profile *profile)
{
	return profile->total;
}

/* ---- mappings, functions, locations ---- */

typedef struct mapping_key
{
	uint64_t	start;
	const char *file;
} mapping_key;

static bool
mapping_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_profile *profile = ctx;
	const mapping_key *k = key;
	const tp_prof_mapping *m = &profile->mappings[entry];

	return m->start == k->start && strcmp(m->file, k->file) == 0;
}

/* file: the cleaned module path (a copy is kept). */
static uint32_t
mapping_for(tp_profile *profile, const tp_symbol *symbol, const char *file)
{
	mapping_key key = {symbol->module_start, file};
	uint64_t	hash = hash_string(file, symbol->module_start);
	uint32_t	found = tp_prof_index_find(&profile->mapping_index, hash, mapping_eq,
										   &key, profile);
	tp_prof_mapping *m;

	if (found != TP_PROF_NONE)
		return found;
	if (!reserve((void **) &profile->mappings, &profile->mappings_cap,
				 profile->nmappings, sizeof(tp_prof_mapping)))
		return TP_PROF_NONE;
	m = &profile->mappings[profile->nmappings];
	memset(m, 0, sizeof(*m));
	m->start = symbol->module_start;
	m->limit = symbol->module_end;
	m->offset = symbol->module_offset;
	m->file = strdup(file);
	m->build_id = symbol->build_id ? tp_prof_clean_copy(symbol->build_id) : NULL;
	if (m->file == NULL ||
		!tp_prof_index_insert(&profile->mapping_index, hash, profile->nmappings))
	{
		free(m->file);
		free(m->build_id);
		return TP_PROF_NONE;
	}
	return profile->nmappings++;
}

typedef struct function_key
{
	const char *name;
	const char *file;
} function_key;

static bool
function_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_profile *profile = ctx;
	const function_key *k = key;
	const tp_prof_function *f = &profile->functions[entry];

	if (strcmp(f->name, k->name) != 0)
		return false;
	if (f->file == NULL || k->file == NULL)
		return f->file == k->file;
	return strcmp(f->file, k->file) == 0;
}

/* name and file are already clean copies; the table takes them over. */
static uint32_t
function_for(tp_profile *profile, char *name, char *file)
{
	function_key key = {name, file};
	uint64_t	hash = hash_string(file, hash_string(name, 0));
	uint32_t	found = tp_prof_index_find(&profile->function_index, hash, function_eq,
										   &key, profile);

	if (found != TP_PROF_NONE)
	{
		free(name);
		free(file);
		return found;
	}
	if (!reserve((void **) &profile->functions, &profile->functions_cap,
				 profile->nfunctions, sizeof(tp_prof_function)) ||
		!tp_prof_index_insert(&profile->function_index, hash, profile->nfunctions))
	{
		free(name);
		free(file);
		return TP_PROF_NONE;
	}
	profile->functions[profile->nfunctions].name = name;
	profile->functions[profile->nfunctions].file = file;
	return profile->nfunctions++;
}

static const char *
base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/*
 * Without a function name: "module+0xOFFSET" (the file offset, which stays
 * the same in every process despite ASLR, so samples from different
 * backends merge), "0xADDRESS" when the caller gave no symbols at all, and
 * "[unknown]" when the symbols know nothing about the address (JIT code,
 * anonymous memory).
 */
void
tp_prof_unknown_name(const tp_symbol *symbol, bool have_symbols,
					 uint64_t address, char *buf, size_t buflen)
{
	if (symbol != NULL && symbol->module != NULL)
		snprintf(buf, buflen, "%s+0x%" PRIx64, base_name(symbol->module),
				 (uint64_t) (address - symbol->module_start + symbol->module_offset));
	else if (!have_symbols)
		snprintf(buf, buflen, "0x%" PRIx64, address);
	else
		snprintf(buf, buflen, "[unknown]");
}

static bool
location_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_profile *profile = ctx;

	return profile->locations[entry].address == *(const uint64_t *) key;
}

/*
 * The location of pc.  A return address is recorded as pc - 1, inside the
 * call instruction: that is the line a reader wants to see, and it is what
 * tp_symbols_lookup() resolves for is_return_address.
 */
static uint32_t
location_for(tp_profile *profile, tp_symbols *symbols, uintptr_t pc,
			 bool is_return_address)
{
	uint64_t	address = is_return_address && pc > 0 ? (uint64_t) pc - 1 : (uint64_t) pc;
	uint64_t	hash = tp_prof_hash(&address, sizeof(address), 0x10c);
	uint32_t	found = tp_prof_index_find(&profile->location_index, hash, location_eq,
										   &address, profile);
	tp_symbol	symbol;
	char		unknown[256];
	char	   *name;
	char	   *file;
	uint32_t	mapping = TP_PROF_NONE;
	uint32_t	function;
	tp_prof_location *loc;

	if (found != TP_PROF_NONE)
		return found;

	/*
	 * A failed lookup still names the module when only the function is
	 * unknown (a stripped binary's static functions): keep what it found.
	 */
	memset(&symbol, 0, sizeof(symbol));
	if (symbols != NULL)
		(void) tp_symbols_lookup(symbols, pc, is_return_address, &symbol);
	if (symbol.function != NULL)
		name = tp_prof_clean_copy(symbol.function);
	else
	{
		tp_prof_unknown_name(&symbol, symbols != NULL, address, unknown, sizeof(unknown));
		name = strdup(unknown);
	}
	file = symbol.module ? tp_prof_clean_copy(symbol.module) : NULL;
	if (name == NULL || (symbol.module != NULL && file == NULL))
	{
		free(name);
		free(file);
		return TP_PROF_NONE;
	}
	if (symbol.module != NULL)
	{
		mapping = mapping_for(profile, &symbol, file);
		if (mapping != TP_PROF_NONE && symbol.function != NULL)
			profile->mappings[mapping].has_functions = true;
	}
	function = function_for(profile, name, file);
	if (function == TP_PROF_NONE ||
		!reserve((void **) &profile->locations, &profile->locations_cap,
				 profile->nlocations, sizeof(tp_prof_location)) ||
		!tp_prof_index_insert(&profile->location_index, hash, profile->nlocations))
		return TP_PROF_NONE;
	loc = &profile->locations[profile->nlocations];
	loc->address = address;
	loc->mapping = mapping;
	loc->function = function;
	return profile->nlocations++;
}

/* ---- span names ---- */

static bool
span_name_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_profile *profile = ctx;

	return strcmp(profile->span_names[entry], key) == 0;
}

static uint32_t
span_name_for(tp_profile *profile, const char *span_name)
{
	uint64_t	hash = hash_string(span_name, 0x5a);
	uint32_t	found = tp_prof_index_find(&profile->span_name_index, hash, span_name_eq,
										   span_name, profile);
	char	   *copy;

	if (found != TP_PROF_NONE)
		return found;
	/* Stored cleaned: look the cleaned form up too. */
	copy = tp_prof_clean_copy(span_name);
	if (copy == NULL)
		return TP_PROF_NONE;
	hash = hash_string(copy, 0x5a);
	found = tp_prof_index_find(&profile->span_name_index, hash, span_name_eq,
							   copy, profile);
	if (found != TP_PROF_NONE)
	{
		free(copy);
		return found;
	}
	if (!reserve((void **) &profile->span_names, &profile->span_names_cap,
				 profile->nspan_names, sizeof(char *)) ||
		!tp_prof_index_insert(&profile->span_name_index, hash, profile->nspan_names))
	{
		free(copy);
		return TP_PROF_NONE;
	}
	profile->span_names[profile->nspan_names] = copy;
	return profile->nspan_names++;
}

/* ---- samples ---- */

static uint64_t
sample_hash(const tp_prof_sample *s)
{
	uint64_t	h = tp_prof_hash(s->locations, s->depth * sizeof(uint32_t), s->depth);

	h = tp_prof_hash(s->trace_id, sizeof(s->trace_id), h);
	h = tp_prof_hash(s->span_id, sizeof(s->span_id), h);
	return tp_prof_hash(&s->span_name, sizeof(s->span_name), h);
}

static bool
sample_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_profile *profile = ctx;
	const tp_prof_sample *a = &profile->samples[entry];
	const tp_prof_sample *b = key;

	return a->depth == b->depth && a->span_name == b->span_name &&
		memcmp(a->trace_id, b->trace_id, sizeof(a->trace_id)) == 0 &&
		memcmp(a->span_id, b->span_id, sizeof(a->span_id)) == 0 &&
		memcmp(a->locations, b->locations, a->depth * sizeof(uint32_t)) == 0;
}

/* Merge a stack of locations with its labels into the aggregate. */
static void
add_locations(tp_profile *profile, uint32_t *locations, uint32_t depth,
			  const tp_sample_labels *labels, uint64_t weight, uint64_t ns,
			  const char *span_name)
{
	tp_prof_sample key;
	uint64_t	hash;
	uint32_t	found;

	for (uint32_t i = 0; i < depth; i++)
		if (locations[i] == TP_PROF_NONE)
			return;				/* out of memory */

	memset(&key, 0, sizeof(key));
	key.locations = locations;
	key.depth = depth;
	memcpy(key.trace_id, labels->trace_id, sizeof(key.trace_id));
	memcpy(key.span_id, labels->span_id, sizeof(key.span_id));
	key.span_name = TP_PROF_NONE;
	if (span_name != NULL && span_name[0] != '\0')
	{
		key.span_name = span_name_for(profile, span_name);
		if (key.span_name == TP_PROF_NONE)
			return;
	}
	hash = sample_hash(&key);
	found = tp_prof_index_find(&profile->sample_index, hash, sample_eq, &key, profile);
	if (found != TP_PROF_NONE)
	{
		profile->samples[found].weight += weight;
		profile->samples[found].ns += ns;
		profile->total += weight;
		return;
	}
	if (!reserve((void **) &profile->samples, &profile->samples_cap,
				 profile->nsamples, sizeof(tp_prof_sample)))
		return;
	key.locations = malloc(depth * sizeof(uint32_t));
	if (key.locations == NULL)
		return;
	memcpy(key.locations, locations, depth * sizeof(uint32_t));
	key.weight = weight;
	key.ns = ns;
	if (!tp_prof_index_insert(&profile->sample_index, hash, profile->nsamples))
	{
		free(key.locations);
		return;
	}
	profile->samples[profile->nsamples++] = key;
	profile->total += weight;
}

static bool
is_process_start(const tp_profile *profile, uint32_t location)
{
	return location != TP_PROF_NONE &&
		tp_symbol_is_process_start(profile->functions[profile->locations[location].function].name);
}

void
tp_profile_add(tp_profile *profile, tp_symbols *symbols,
			   const tp_sample *sample, const char *span_name)
{
	uint32_t	locations[TP_SAMPLER_MAX_FRAMES];
	uint32_t	depth = sample->depth;

	if (sample->weight == 0)
		return;					/* carries no time */
	if (depth > TP_SAMPLER_MAX_FRAMES)
		depth = TP_SAMPLER_MAX_FRAMES;
	/* An empty stack still took the time: show it as one unknown frame. */
	if (depth == 0)
	{
		locations[0] = location_for(profile, symbols, 0, false);
		depth = 1;
	}
	else
	{
		for (uint32_t i = 0; i < depth; i++)
		{
			locations[i] = location_for(profile, symbols, sample->pcs[i], i > 0);
			/* Rooted at main, however far the walk went (symbols.h). */
			if (i > 0 && is_process_start(profile, locations[i]))
			{
				depth = i;
				break;
			}
		}
	}
	add_locations(profile, locations, depth, &sample->labels, sample->weight,
				  sample->weight * profile->period_ns, span_name);
}

static bool
named_location_eq(uint32_t entry, const void *key, const void *ctx)
{
	const tp_profile *profile = ctx;
	const tp_prof_location *loc = &profile->locations[entry];

	return loc->address == 0 && loc->mapping == TP_PROF_NONE &&
		loc->function == *(const uint32_t *) key;
}

/* A location for a frame known only by name: no address, no mapping. */
static uint32_t
named_location_for(tp_profile *profile, const char *frame)
{
	char	   *name = tp_prof_clean_copy(frame && frame[0] ? frame : "[unknown]");
	uint32_t	function = name ? function_for(profile, name, NULL) : TP_PROF_NONE;
	uint64_t	hash;
	uint32_t	found;
	tp_prof_location *loc;

	if (function == TP_PROF_NONE)
		return TP_PROF_NONE;
	hash = tp_prof_hash(&function, sizeof(function), 0x4e4d);
	found = tp_prof_index_find(&profile->location_index, hash, named_location_eq,
							   &function, profile);
	if (found != TP_PROF_NONE)
		return found;
	if (!reserve((void **) &profile->locations, &profile->locations_cap,
				 profile->nlocations, sizeof(tp_prof_location)) ||
		!tp_prof_index_insert(&profile->location_index, hash, profile->nlocations))
		return TP_PROF_NONE;
	loc = &profile->locations[profile->nlocations];
	loc->address = 0;
	loc->mapping = TP_PROF_NONE;
	loc->function = function;
	return profile->nlocations++;
}

void
tp_profile_add_named(tp_profile *profile, const char *const *frames, uint32_t depth,
					 const tp_sample_labels *labels, uint32_t weight, uint64_t period_ns,
					 const char *span_name)
{
	uint32_t	locations[TP_SAMPLER_MAX_FRAMES];

	if (weight == 0)
		return;
	if (depth > TP_SAMPLER_MAX_FRAMES)
		depth = TP_SAMPLER_MAX_FRAMES;
	if (depth == 0)
	{
		locations[0] = named_location_for(profile, "[unknown]");
		depth = 1;
	}
	else
	{
		for (uint32_t i = 0; i < depth; i++)
			locations[i] = named_location_for(profile, frames[i]);
	}
	add_locations(profile, locations, depth, labels, weight,
				  weight * (period_ns ? period_ns : profile->period_ns), span_name);
}

/* ---- clearing ---- */

static void
free_samples(tp_profile *profile)
{
	for (uint32_t i = 0; i < profile->nsamples; i++)
		free(profile->samples[i].locations);
	free(profile->samples);
	profile->samples = NULL;
	profile->nsamples = profile->samples_cap = 0;
	tp_prof_index_free(&profile->sample_index);
	profile->total = 0;
}

static void
free_caches(tp_profile *profile)
{
	for (uint32_t i = 0; i < profile->nmappings; i++)
	{
		free(profile->mappings[i].file);
		free(profile->mappings[i].build_id);
	}
	for (uint32_t i = 0; i < profile->nfunctions; i++)
	{
		free(profile->functions[i].name);
		free(profile->functions[i].file);
	}
	free(profile->mappings);
	free(profile->functions);
	free(profile->locations);
	profile->mappings = NULL;
	profile->functions = NULL;
	profile->locations = NULL;
	profile->nmappings = profile->mappings_cap = 0;
	profile->nfunctions = profile->functions_cap = 0;
	profile->nlocations = profile->locations_cap = 0;
	tp_prof_index_free(&profile->mapping_index);
	tp_prof_index_free(&profile->function_index);
	tp_prof_index_free(&profile->location_index);
}

/* Span names may be many (one per statement text): never kept across windows. */
static void
free_span_names(tp_profile *profile)
{
	for (uint32_t i = 0; i < profile->nspan_names; i++)
		free(profile->span_names[i]);
	free(profile->span_names);
	profile->span_names = NULL;
	profile->nspan_names = profile->span_names_cap = 0;
	tp_prof_index_free(&profile->span_name_index);
}

/*
 * Forget the locations no module claimed: a library loaded later (and
 * picked up by tp_symbols_refresh) may explain them next time.
 */
static void
forget_unresolved(tp_profile *profile)
{
	uint32_t	kept = 0;

	tp_prof_index_free(&profile->location_index);
	for (uint32_t i = 0; i < profile->nlocations; i++)
	{
		tp_prof_location *loc = &profile->locations[i];
		uint64_t	hash;

		if (loc->mapping == TP_PROF_NONE)
			continue;
		hash = tp_prof_hash(&loc->address, sizeof(loc->address), 0x10c);
		profile->locations[kept] = *loc;
		if (!tp_prof_index_insert(&profile->location_index, hash, kept))
		{
			free_caches(profile);
			return;
		}
		kept++;
	}
	profile->nlocations = kept;
}

void
tp_profile_clear(tp_profile *profile)
{
	free_samples(profile);
	free_span_names(profile);
	profile->start_ns = profile->end_ns = 0;
	if (profile->nlocations > LOCATION_CACHE_MAX)
		free_caches(profile);	/* bounded memory in long-lived backends */
	else if (profile->nmappings > 0)
		forget_unresolved(profile);
}

void
tp_profile_free(tp_profile *profile)
{
	if (profile == NULL)
		return;
	free_samples(profile);
	free_span_names(profile);
	free_caches(profile);
	free(profile->sample_type);
	free(profile);
}

/* ---- helpers for the writers ---- */

bool
tp_prof_number(const tp_profile *profile, tp_prof_numbering *out)
{
	memset(out, 0, sizeof(*out));
	out->location_id = calloc(profile->nlocations + 1, sizeof(uint32_t));
	out->function_id = calloc(profile->nfunctions + 1, sizeof(uint32_t));
	out->mapping_id = calloc(profile->nmappings + 1, sizeof(uint32_t));
	if (out->location_id == NULL || out->function_id == NULL || out->mapping_id == NULL)
	{
		tp_prof_numbering_free(out);
		return false;
	}
	for (uint32_t i = 0; i < profile->nsamples; i++)
	{
		const tp_prof_sample *s = &profile->samples[i];

		for (uint32_t d = 0; d < s->depth; d++)
		{
			const tp_prof_location *loc = &profile->locations[s->locations[d]];

			if (out->location_id[s->locations[d]] != 0)
				continue;
			out->location_id[s->locations[d]] = ++out->nlocations;
			if (out->function_id[loc->function] == 0)
				out->function_id[loc->function] = ++out->nfunctions;
			if (loc->mapping != TP_PROF_NONE && out->mapping_id[loc->mapping] == 0)
				out->mapping_id[loc->mapping] = ++out->nmappings;
		}
	}
	return true;
}

void
tp_prof_numbering_free(tp_prof_numbering *numbering)
{
	free(numbering->location_id);
	free(numbering->function_id);
	free(numbering->mapping_id);
	memset(numbering, 0, sizeof(*numbering));
}

static int
compare_nullable(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

/*
 * Names first over the whole stack, then modules, then indices: stacks
 * that print the same stay next to each other.
 */
static int
compare_stacks(const void *pa, const void *pb, void *arg)
{
	const tp_profile *profile = arg;
	const tp_prof_stack *a = pa;
	const tp_prof_stack *b = pb;
	uint32_t	n = a->depth < b->depth ? a->depth : b->depth;
	int			c;

	for (uint32_t i = 0; i < n; i++)
		if ((c = strcmp(profile->functions[a->frames[i]].name,
						profile->functions[b->frames[i]].name)) != 0)
			return c;
	if (a->depth != b->depth)
		return a->depth < b->depth ? -1 : 1;
	for (uint32_t i = 0; i < n; i++)
		if ((c = compare_nullable(profile->functions[a->frames[i]].file,
								  profile->functions[b->frames[i]].file)) != 0)
			return c;
	for (uint32_t i = 0; i < n; i++)
		if (a->frames[i] != b->frames[i])
			return a->frames[i] < b->frames[i] ? -1 : 1;
	return 0;
}

void
tp_prof_stacks_free(tp_prof_stack *stacks, size_t count)
{
	for (size_t i = 0; stacks != NULL && i < count; i++)
		free(stacks[i].frames);
	free(stacks);
}

bool
tp_prof_collapse(const tp_profile *profile, tp_prof_stack **stacks, size_t *count)
{
	tp_prof_stack *all;
	size_t		merged = 0;

	*stacks = NULL;
	*count = 0;
	if (profile->nsamples == 0)
		return true;
	all = calloc(profile->nsamples, sizeof(tp_prof_stack));
	if (all == NULL)
		return false;
	for (uint32_t i = 0; i < profile->nsamples; i++)
	{
		const tp_prof_sample *s = &profile->samples[i];

		all[i].frames = malloc(s->depth * sizeof(uint32_t));
		if (all[i].frames == NULL)
		{
			tp_prof_stacks_free(all, profile->nsamples);
			return false;
		}
		all[i].depth = s->depth;
		all[i].weight = s->weight;
		for (uint32_t d = 0; d < s->depth; d++)
			all[i].frames[s->depth - 1 - d] =
				profile->locations[s->locations[d]].function;
	}
	qsort_r(all, profile->nsamples, sizeof(tp_prof_stack), compare_stacks,
			(void *) profile);
	for (uint32_t i = 0; i < profile->nsamples; i++)
	{
		if (merged > 0 && all[merged - 1].depth == all[i].depth &&
			memcmp(all[merged - 1].frames, all[i].frames,
				   all[i].depth * sizeof(uint32_t)) == 0)
		{
			all[merged - 1].weight += all[i].weight;
			free(all[i].frames);
			continue;
		}
		all[merged++] = all[i];
	}
	*stacks = all;
	*count = merged;
	return true;
}
