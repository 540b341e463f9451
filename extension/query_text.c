/*
 * query_text.c - the db.query.text of a span, per traceprof.query_text.
 *
 * "normalized" replaces literal constants with $n (numbered after the
 * statement's own parameters), so spans of the same statement group together
 * and literal values (often personal data) never leave the server.  Which
 * constants: those the query jumble recorded in post-parse analysis, as
 * pg_stat_statements does (so "-5" is one constant and a typmod stays), when
 * that statement was parsed while traced; otherwise every literal token of
 * PostgreSQL's own lexer.  Text after the last token (the trailing
 * sqlcommenter comment with its per-request ids) is dropped too.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "parser/analyze.h"
#include "parser/gramparse.h"
#include "parser/scanner.h"
#include "utils/memutils.h"
#include "utils/queryjumble.h"

#include "traceprof.h"

typedef struct Literal
{
	int			location;
	int			length;
} Literal;

/*
 * Constant locations of recently parsed statements, by query id, relative
 * to the statement's start.  A few suffice: a statement is executed soon
 * after it is parsed (or its prepared form, whose parse we also saw).
 */
#define REMEMBERED 32

typedef struct RememberedConstants
{
	uint64		query_id;		/* 0: free slot */
	int			count;
	int		   *locations;		/* sorted */
	int			highest_param;
} RememberedConstants;

static RememberedConstants remembered[REMEMBERED];
static int	next_slot;

/*
 * Normalized texts by query id, so that a statement traced again is not
 * lexed again (lexing cost more than the rest of its span).  As in
 * pg_stat_statements, the first text seen stands for its query id, even if
 * a later one differs in spacing or comments.  Direct-mapped: a collision
 * only costs a new normalization.
 */
#define NORMALIZED_CACHE 64

typedef struct NormalizedText
{
	uint64		query_id;		/* 0: empty */
	char	   *text;			/* cut to traceprof.max_query_length, fixed at start */
	int			len;
} NormalizedText;

static NormalizedText normalized_cache[NORMALIZED_CACHE];

static NormalizedText *
normalized_entry(uint64 query_id)
{
	return &normalized_cache[query_id % NORMALIZED_CACHE];
}

static bool
is_normalized_cached(uint64 query_id)
{
	const NormalizedText *entry = normalized_entry(query_id);

	return query_id != 0 && entry->query_id == query_id;
}

static int
compare_ints(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	return (x > y) - (x < y);
}

void
query_text_remember_constants(uint64 query_id, int stmt_location, const JumbleState *jstate)
{
	RememberedConstants *slot = &remembered[next_slot];

	if (query_id == 0 || jstate == NULL || is_normalized_cached(query_id))
		return;
	next_slot = (next_slot + 1) % REMEMBERED;
	if (slot->locations != NULL)
		pfree(slot->locations);
	slot->locations = MemoryContextAlloc(TopMemoryContext,
										 sizeof(int) * Max(jstate->clocations_count, 1));
	slot->count = jstate->clocations_count;
	for (int i = 0; i < slot->count; i++)
		slot->locations[i] = jstate->clocations[i].location - Max(stmt_location, 0);
	qsort(slot->locations, slot->count, sizeof(int), compare_ints);
	slot->highest_param = jstate->highest_extern_param_id;
	slot->query_id = query_id;
}

static const RememberedConstants *
constants_of(uint64 query_id)
{
	for (int i = 0; i < REMEMBERED; i++)
		if (query_id != 0 && remembered[i].query_id == query_id)
			return &remembered[i];
	return NULL;
}

static bool
is_remembered(const RememberedConstants *known, int location)
{
	return bsearch(&location, known->locations, known->count, sizeof(int), compare_ints) != NULL;
}

static bool
is_literal(int token)
{
	return token == ICONST || token == FCONST || token == SCONST ||
		token == USCONST || token == BCONST || token == XCONST;
}

static char *
normalize(const char *text, int len, uint64 query_id)
{
	const RememberedConstants *known = constants_of(query_id);
	char	   *copy = pnstrdup(text, len);
	core_yy_extra_type extra;
	core_yyscan_t scanner;
	core_YYSTYPE value;
	YYLTYPE		location;
	Literal    *literals = NULL;
	int			literal_count = 0;
	int			literal_capacity = 0;
	int			highest_param = known ? known->highest_param : 0;
	int			end_of_tokens = 0;
	int			pending_minus = -1;	/* location of a remembered '-' */
	StringInfoData out;
	int			copied = 0;

	scanner = scanner_init(copy, &extra, &ScanKeywords, ScanKeywordTokens);
	extra.escape_string_warning = false;	/* no WARNING for text we only read */
	for (;;)
	{
		int			token = core_yylex(&value, &location, scanner);
		int			token_len;

		if (token == 0)
			break;
		/* The lexer NUL-terminates the current token inside scanbuf. */
		token_len = strlen(extra.scanbuf + location);
		end_of_tokens = location + token_len;
		if (token == PARAM)
			highest_param = Max(highest_param, value.ival);
		else if (known != NULL && token == '-' && is_remembered(known, location))
			pending_minus = location;	/* the jumble's constant starts at its sign */
		else if (known != NULL ? (is_remembered(known, location) || pending_minus >= 0) :
				 is_literal(token))
		{
			if (pending_minus >= 0)
			{
				token_len += location - pending_minus;
				location = pending_minus;
				pending_minus = -1;
			}
			if (literal_count == literal_capacity)
			{
				literal_capacity = literal_capacity ? literal_capacity * 2 : 16;
				literals = literals ? repalloc(literals, literal_capacity * sizeof(Literal))
					: palloc(literal_capacity * sizeof(Literal));
			}
			literals[literal_count].location = location;
			literals[literal_count].length = token_len;
			literal_count++;
		}
		else
			pending_minus = -1;
	}
	scanner_finish(scanner);

	initStringInfo(&out);
	for (int i = 0; i < literal_count; i++)
	{
		appendBinaryStringInfo(&out, text + copied, literals[i].location - copied);
		appendStringInfo(&out, "$%d", ++highest_param);
		copied = literals[i].location + literals[i].length;
	}
	if (end_of_tokens > copied)
		appendBinaryStringInfo(&out, text + copied, end_of_tokens - copied);
	pfree(copy);
	if (literals)
		pfree(literals);
	return out.data;
}

/*
 * Copy len bytes of text to dest, cut to traceprof.max_query_length bytes
 * on a character boundary.
 */
static int
copy_cut(char *dest, const char *text, int len)
{
	if (len > traceprof_max_query_length)
		len = pg_mbcliplen(text, len, traceprof_max_query_length);
	memcpy(dest, text, len);
	dest[len] = '\0';
	return len;
}

/*
 * Store the text to keep of the len bytes at text in dest (room for
 * traceprof.max_query_length bytes and a NUL); returns its length.  Written
 * in place: a copy handed back cost a palloc, a strlen and a pfree a span.
 */
int
query_text_for_span(const char *text, int len, uint64 query_id, char *dest)
{
	NormalizedText *entry;
	char	   *normalized;

	switch (traceprof_query_text)
	{
		case QUERY_TEXT_OFF:
			dest[0] = '\0';
			return 0;
		case QUERY_TEXT_FULL:
			return copy_cut(dest, text, len);
		default:
			break;
	}
	entry = normalized_entry(query_id);
	if (is_normalized_cached(query_id))
	{
		memcpy(dest, entry->text, entry->len + 1);
		return entry->len;
	}
	normalized = normalize(text, len, query_id);
	len = copy_cut(dest, normalized, strlen(normalized));
	pfree(normalized);
	if (query_id != 0)
	{
		if (entry->text != NULL)
			pfree(entry->text);
		entry->text = MemoryContextStrdup(TopMemoryContext, dest);
		entry->len = len;
		entry->query_id = query_id;
	}
	return len;
}
