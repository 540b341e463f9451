/*
 * query_text.c - the db.query.text of a span, per traceprof.query_text.
 *
 * "normalized" replaces every literal constant with $n (numbered after the
 * statement's own parameters) using PostgreSQL's own lexer, so spans of the
 * same statement group together and literal values (often personal data)
 * never leave the server.  Text after the last token (the trailing
 * sqlcommenter comment with its per-request ids) is dropped too.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "parser/gramparse.h"
#include "parser/scanner.h"

#include "traceprof.h"

typedef struct Literal
{
	int			location;
	int			length;
} Literal;

static bool
is_literal(int token)
{
	return token == ICONST || token == FCONST || token == SCONST ||
		token == USCONST || token == BCONST || token == XCONST;
}

static char *
normalize(const char *text, int len)
{
	char	   *copy = pnstrdup(text, len);
	core_yy_extra_type extra;
	core_yyscan_t scanner;
	core_YYSTYPE value;
	YYLTYPE		location;
	Literal    *literals = NULL;
	int			literal_count = 0;
	int			literal_capacity = 0;
	int			highest_param = 0;
	int			end_of_tokens = 0;
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
		else if (is_literal(token))
		{
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
 * The text to store for the len bytes at text (palloc'd), cut to
 * traceprof.max_query_length bytes on a character boundary.
 */
char *
query_text_for_span(const char *text, int location, int len)
{
	char	   *result;
	int			cut;

	text += location;
	switch (traceprof_query_text)
	{
		case QUERY_TEXT_OFF:
			return pstrdup("");
		case QUERY_TEXT_FULL:
			result = pnstrdup(text, len);
			break;
		default:
			result = normalize(text, len);
			break;
	}
	cut = pg_mbcliplen(result, strlen(result), traceprof_max_query_length);
	result[cut] = '\0';
	return result;
}
