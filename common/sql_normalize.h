/*
 * sql_normalize.h - a statement's literal constants replaced by $n.
 *
 * The scan follows PostgreSQL 15's lexical rules (scan.l) for everything
 * that decides where a token starts and ends: strings in all their forms
 * (E'', B'', X'', U&'', N'', dollar quotes, quoted continuation across
 * newlines), quoted identifiers, nested comments, numbers and parameters.
 * It runs once per span (in the backend or in the span's reader), so it
 * makes one pass, allocates nothing and stops once the output is full: a
 * few instructions a byte, where PostgreSQL's own lexer plus the query
 * jumble cost thousands a statement.
 */
#ifndef TP_SQL_NORMALIZE_H
#define TP_SQL_NORMALIZE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tp_sql_constants
{
	/*
	 * Byte offsets, ascending, of the tokens to replace: the constants the
	 * query jumble recorded (pg_stat_statements' rules: "-5" is one
	 * constant, a typmod is none).  NULL: replace every literal token.
	 */
	const int  *offsets;
	int			count;
	/* The statement's highest $n, when offsets is given; else scanned for. */
	int			highest_param;
} tp_sql_constants;

/*
 * Write the len bytes at sql to out (cap bytes, not NUL-terminated) with
 * the constants replaced by $n, numbered after the statement's own
 * parameters; text before the first token and after the last (comments,
 * such as sqlcommenter's with its per-request ids, and blanks) is dropped.
 * standard_conforming_strings as the server has it (off: backslashes
 * escape in '...').  Returns the bytes written; cap when the output was
 * cut (perhaps inside a multibyte character: the caller knows the
 * encoding).
 */
size_t		tp_sql_normalize(const char *sql, size_t len, bool standard_conforming_strings,
							 const tp_sql_constants *constants, char *out, size_t cap);

/* The offset of the first token in the len bytes at sql: the blanks and comments before it skipped. */
size_t		tp_sql_first_token(const char *sql, size_t len);

/*
 * The length of the block comment sql starts with ("/" "*"), through the
 * end of the comments nested in it, as PostgreSQL's scanner reads it; 0
 * when it does not end within len bytes.
 */
size_t		tp_sql_comment_len(const char *sql, size_t len);

#endif
