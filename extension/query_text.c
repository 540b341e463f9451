/*
 * query_text.c - the db.query.text of a span, per traceprof.query_text.
 *
 * "normalized" replaces literal constants with $n (numbered after the
 * statement's own parameters), so spans of the same statement group together
 * and literal values (often personal data) never leave the server.  Which
 * constants: when PostgreSQL computed a query id (compute_query_id = on, or
 * a module such as pg_stat_statements asked for it), those its query jumble
 * recorded, as pg_stat_statements does ("-5" is one constant, a typmod
 * stays), replaced as the span is made; otherwise every literal token
 * (common/sql_normalize.c), replaced where the span is read.  We do not
 * jumble statements ourselves: that alone cost 2.8% of a select-only
 * transaction.  Text before the first token and after the last (a
 * sqlcommenter comment with its per-request ids) is dropped too.
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
find_remembered(uint64 query_id, uint32 text_hash, int text_len)
{
	for (int i = 0; i < REMEMBERED; i++)
		if (remembered[i].query_id == query_id && remembered[i].text_hash == text_hash &&
			remembered[i].text_len == text_len)
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
	uint32		hash = hash_bytes((const unsigned char *) text, len);
	RememberedConstants *slot;
	int		   *offsets;

	if (query_id == 0 || find_remembered(query_id, hash, len) != NULL)
		return;
	slot = &remembered[next_slot];
	next_slot = (next_slot + 1) % REMEMBERED;
	slot->query_id = 0;			/* free until filled: the allocation may fail */
	if (slot->capacity < jstate->clocations_count)
	{
		int			capacity = Max(jstate->clocations_count, 8);

		if (slot->constants.offsets != NULL)
			pfree((void *) slot->constants.offsets);
		slot->constants.offsets = NULL;
		slot->capacity = 0;
		slot->constants.offsets = MemoryContextAlloc(TopMemoryContext, sizeof(int) * capacity);
		slot->capacity = capacity;
	}
	offsets = (int *) slot->constants.offsets;
	for (int i = 0; i < jstate->clocations_count; i++)
		offsets[i] = jstate->clocations[i].location - text_location;
	if (jstate->clocations_count > 1)	/* offsets is NULL while the slot never held one */
		qsort(offsets, jstate->clocations_count, sizeof(int), compare_ints);
	slot->constants.count = jstate->clocations_count;
	slot->constants.highest_param = jstate->highest_extern_param_id;
	slot->query_id = query_id;
	slot->text_hash = hash;
	slot->text_len = len;
}

/*
 * len bytes of text cut to fit in max_query_length bytes, on a character
 * boundary of encoding: the span's database's, not the reader's (the
 * exporter is connected to none, so its own is SQL_ASCII).
 */
static int
cut_length(const char *text, int len, int encoding)
{
	return len >= traceprof_max_query_length ?
		pg_encoding_mbcliplen(encoding, text, len, traceprof_max_query_length) : len;
}

/* text normalized into dest (max_query_length bytes), cut on a character boundary. */
static int
normalize_into(const char *text, int len, bool standard_strings,
			   const tp_sql_constants *constants, int encoding, char *dest)
{
	len = (int) tp_sql_normalize(text, len, standard_strings, constants, dest,
								 traceprof_max_query_length);
	return cut_length(dest, len, encoding);
}

/*
 * The span's text from the len bytes of its statement at text, into dest
 * (max_query_length bytes and a NUL); returns the byte after its NUL.
 * Normalized by the jumble's constants, these are replaced now (they are
 * known only here); by literal tokens, the statement's text is kept and
 * replaced where it is read (query_text_normalize_literals).
 */
char *
query_text_for_span(const char *text, int len, uint64 query_id, TraceprofSpan *span, char *dest)
{
	const RememberedConstants *known;

	switch (traceprof_query_text)
	{
		case QUERY_TEXT_OFF:
			len = 0;
			break;
		case QUERY_TEXT_NORMALIZED:
			known = query_id == 0 ? NULL :
				find_remembered(query_id, hash_bytes((const unsigned char *) text, len), len);
			if (known != NULL)
			{
				len = normalize_into(text, len, standard_conforming_strings, &known->constants,
									 span->encoding, dest);
				break;
			}
			span->query_form = standard_conforming_strings ?
				QUERY_FORM_LITERALS : QUERY_FORM_LITERALS_ESCAPED;
			/* Normalizing drops a leading comment: it takes none of the cut's room. */
			if (unlikely(len > 0 && (text[0] == '/' || text[0] == '-')))
			{
				int			skip = (int) tp_sql_first_token(text, len);

				text += skip;
				len -= skip;
			}
			/* FALLTHROUGH */
		case QUERY_TEXT_FULL:
			len = cut_length(text, len, span->encoding);
			memcpy(dest, text, len);
			break;
	}
	dest[len] = '\0';
	span->query_len = len;
	return dest + len + 1;
}

/*
 * A span's text kept as its statement wrote it (len bytes at text), with
 * every literal token replaced, into dest (max_query_length bytes and a
 * NUL); returns its length.
 */
int
query_text_normalize_literals(const char *text, int len, QueryForm form, int encoding, char *dest)
{
	len = normalize_into(text, len, form == QUERY_FORM_LITERALS, NULL, encoding, dest);
	dest[len] = '\0';
	return len;
}
