/*
 * query_text.c - the db.query.text of a span, per traceprof.query_text.
 *
 * "normalized" replaces literal constants with $n (numbered after the
 * statement's own parameters), so spans of the same statement group together
 * and literal values (often personal data) never leave the server.  Which
 * constants: when PostgreSQL computed a query id (compute_query_id = on, or
 * a module such as pg_stat_statements asked for it), those its query jumble
 * recorded, as pg_stat_statements does ("-5" is one constant, a typmod
 * stays); otherwise every literal token (common/sql_normalize.c).  We do
 * not jumble statements ourselves: that alone cost 2.8% of a select-only
 * transaction.  Text after the last token (the trailing sqlcommenter
 * comment with its per-request ids) is dropped too.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "parser/parser.h"
#include "utils/memutils.h"
#include "utils/queryjumble.h"

#include "sql_normalize.h"
#include "traceprof.h"

/*
 * Constant offsets of recently parsed statements, relative to the
 * statement's text.  A few suffice: a statement is executed soon after it
 * is parsed (or its prepared form, whose parse we also saw).  Keyed by the
 * text as well as the query id: texts that differ in spacing or comments
 * share a query id but not the offsets.
 */
#define REMEMBERED 32

typedef struct RememberedConstants
{
	uint64		query_id;		/* 0: free slot */
	uint32		text_hash;
	int			text_len;
	tp_sql_constants constants;
	int			capacity;		/* of the offsets array */
} RememberedConstants;

static RememberedConstants remembered[REMEMBERED];
static int	next_slot;

static int
compare_ints(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	return (x > y) - (x < y);
}

static RememberedConstants *
remembered_for(uint64 query_id, const char *text, int len)
{
	uint32		hash;

	if (query_id == 0)
		return NULL;
	hash = hash_bytes((const unsigned char *) text, len);
	for (int i = 0; i < REMEMBERED; i++)
		if (remembered[i].query_id == query_id && remembered[i].text_hash == hash &&
			remembered[i].text_len == len)
			return &remembered[i];
	return NULL;
}

/*
 * The constants the jumble found in a statement's text (len bytes at text,
 * which starts at text_location of the source text the jumble saw).
 */
void
query_text_remember_constants(uint64 query_id, const char *text, int len, int text_location,
							  const JumbleState *jstate)
{
	RememberedConstants *slot;
	int		   *offsets;

	if (query_id == 0 || remembered_for(query_id, text, len) != NULL)
		return;
	slot = &remembered[next_slot];
	next_slot = (next_slot + 1) % REMEMBERED;
	if (slot->capacity < jstate->clocations_count)
	{
		if (slot->constants.offsets != NULL)
			pfree((void *) slot->constants.offsets);
		slot->capacity = Max(jstate->clocations_count, 8);
		slot->constants.offsets = MemoryContextAlloc(TopMemoryContext,
													 sizeof(int) * slot->capacity);
	}
	offsets = (int *) slot->constants.offsets;
	for (int i = 0; i < jstate->clocations_count; i++)
		offsets[i] = jstate->clocations[i].location - text_location;
	qsort(offsets, jstate->clocations_count, sizeof(int), compare_ints);
	slot->constants.count = jstate->clocations_count;
	slot->constants.highest_param = jstate->highest_extern_param_id;
	slot->query_id = query_id;
	slot->text_hash = hash_bytes((const unsigned char *) text, len);
	slot->text_len = len;
}

/*
 * Store the text to keep of the len bytes at text in dest (room for
 * traceprof.max_query_length bytes and a NUL), cut to that length on a
 * character boundary; returns its length.
 */
int
query_text_for_span(const char *text, int len, uint64 query_id, char *dest)
{
	const RememberedConstants *known;

	switch (traceprof_query_text)
	{
		case QUERY_TEXT_OFF:
			len = 0;
			break;
		case QUERY_TEXT_FULL:
			memcpy(dest, text, Min(len, traceprof_max_query_length));
			break;
		case QUERY_TEXT_NORMALIZED:
			known = remembered_for(query_id, text, len);
			len = (int) tp_sql_normalize(text, len, standard_conforming_strings,
										 known ? &known->constants : NULL,
										 dest, traceprof_max_query_length);
			break;
	}
	if (len >= traceprof_max_query_length)
		len = pg_mbcliplen(dest, traceprof_max_query_length, traceprof_max_query_length);
	dest[len] = '\0';
	return len;
}
