/*
 * profile_internal.h - the aggregate behind tp_profile, shared by
 * profile.c (which fills it) and the writers (pprof, folded, speedscope),
 * which only read it.  Not for use outside common/ and its unit tests.
 *
 * Locations, functions and mappings live in arrays and refer to each other
 * by array index; the writers number what the current samples use, so the
 * output never carries entries that only the caches remember.
 */
#ifndef TP_PROFILE_INTERNAL_H
#define TP_PROFILE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile.h"

#define TP_PROF_NONE UINT32_MAX

/* Open addressing over entry indices; the owner compares the keys. */
typedef struct tp_prof_slot
{
	uint32_t	entry_plus1;	/* 0: empty */
	uint32_t	hash;
} tp_prof_slot;

typedef struct tp_prof_index
{
	tp_prof_slot *slots;
	uint32_t	mask;			/* capacity - 1; capacity is a power of 2 */
	uint32_t	used;
} tp_prof_index;

typedef bool (*tp_prof_key_eq) (uint32_t entry, const void *key, const void *ctx);

uint64_t	tp_prof_hash(const void *data, size_t len, uint64_t seed);
uint32_t	tp_prof_index_find(const tp_prof_index *index, uint64_t hash,
							   tp_prof_key_eq eq, const void *key, const void *ctx);
bool		tp_prof_index_insert(tp_prof_index *index, uint64_t hash, uint32_t entry);
void		tp_prof_index_free(tp_prof_index *index);

typedef struct tp_prof_mapping
{
	uint64_t	start;
	uint64_t	limit;
	uint64_t	offset;			/* file offset of start */
	char	   *file;
	char	   *build_id;		/* NULL when unknown */
	bool		has_functions;	/* some address here resolved to a name */
} tp_prof_mapping;

typedef struct tp_prof_function
{
	char	   *name;
	char	   *file;			/* module path, NULL when unknown */
} tp_prof_function;

typedef struct tp_prof_location
{
	uint64_t	address;		/* the pc; pc - 1 for a return address */
	uint32_t	mapping;		/* TP_PROF_NONE: no module */
	uint32_t	function;
} tp_prof_location;

typedef struct tp_prof_sample
{
	uint32_t   *locations;		/* leaf first */
	uint32_t	depth;
	uint32_t	span_name;		/* index into span_names, or TP_PROF_NONE */
	uint8_t		trace_id[TP_TRACE_ID_BYTES];	/* all zero: none */
	uint8_t		span_id[TP_SPAN_ID_BYTES];
	uint64_t	weight;
	uint64_t	ns;				/* time the weight stands for */
} tp_prof_sample;

struct tp_profile
{
	char	   *sample_type;	/* "cpu" or "wall" */
	uint64_t	period_ns;
	uint64_t	start_ns;
	uint64_t	end_ns;
	uint64_t	total;

	tp_prof_sample *samples;	/* in order of first appearance */
	uint32_t	nsamples;
	uint32_t	samples_cap;
	tp_prof_index sample_index;

	tp_prof_location *locations;
	uint32_t	nlocations;
	uint32_t	locations_cap;
	tp_prof_index location_index;

	tp_prof_function *functions;
	uint32_t	nfunctions;
	uint32_t	functions_cap;
	tp_prof_index function_index;

	tp_prof_mapping *mappings;
	uint32_t	nmappings;
	uint32_t	mappings_cap;
	tp_prof_index mapping_index;

	char	  **span_names;
	uint32_t	nspan_names;
	uint32_t	span_names_cap;
	tp_prof_index span_name_index;
};

/*
 * Number the locations, functions and mappings the samples use, 1, 2, ...
 * in order of first use (0: unused).  Arrays are sized nlocations,
 * nfunctions and nmappings; returns false on out-of-memory.
 */
typedef struct tp_prof_numbering
{
	uint32_t   *location_id;
	uint32_t   *function_id;
	uint32_t   *mapping_id;
	uint32_t	nlocations;
	uint32_t	nfunctions;
	uint32_t	nmappings;
} tp_prof_numbering;

bool		tp_prof_number(const tp_profile *profile, tp_prof_numbering *out);
void		tp_prof_numbering_free(tp_prof_numbering *numbering);

/*
 * The samples merged by their stack of functions (labels ignored), sorted
 * by frame names root first, so the flame-graph writers are deterministic.
 */
typedef struct tp_prof_stack
{
	uint32_t   *frames;			/* function indices, root first */
	uint32_t	depth;
	uint64_t	weight;
} tp_prof_stack;

bool		tp_prof_collapse(const tp_profile *profile, tp_prof_stack **stacks,
							 size_t *count);
void		tp_prof_stacks_free(tp_prof_stack *stacks, size_t count);

/*
 * A malloc'd copy that is valid UTF-8 without control characters (any
 * other byte becomes '?'), so every writer can use it as is.
 */
char	   *tp_prof_clean_copy(const char *s);

/* Name an address without a function name (exposed for unit tests). */
void		tp_prof_unknown_name(const tp_symbol *symbol, bool have_symbols,
								 uint64_t address, char *buf, size_t buflen);

#endif
