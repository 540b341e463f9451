/*
 * sqlcommenter.h - the traceparent and tracestate carried in a SQL comment.
 *
 * OpenTelemetry's database instrumentations append a comment such as
 *     SELECT ... / *traceparent='00-...-01',tracestate='...'* /
 * (written here with spaces; sqlcommenter: key='url-encoded value' pairs,
 * keys sorted, appended to the statement); some can be told to prepend it
 * (OpenTelemetry PHP's otel.sqlcommenter.prepend).
 */
#ifndef TP_SQLCOMMENTER_H
#define TP_SQLCOMMENTER_H

#include <stddef.h>

#include "trace_context.h"
#include "tracestate.h"

typedef enum tp_comment_result
{
	TP_COMMENT_NONE,			/* no comment, or no traceparent key in it */
	TP_COMMENT_VALID,			/* *out holds the caller's context */
	TP_COMMENT_MALFORMED,		/* a traceparent key whose value is invalid */
} tp_comment_result;

/*
 * Look at the comment that ends the len bytes at sql (trailing blanks and
 * semicolons aside) and, when it does not mention traceparent, at the one
 * that opens them (leading blanks aside); a comment elsewhere is not read.
 */
tp_comment_result tp_sqlcomment_traceparent(const char *sql, size_t len,
											tp_span_context *out);

/*
 * The traceparent and tracestate keys of the same comment (chosen as
 * above), in one pass:
 * what a traced statement needs.  The tracestate is checked and cut as
 * tp_tracestate_parse does.
 */
typedef struct tp_comment_context
{
	tp_comment_result parent_result;	/* VALID: parent holds the caller's context */
	tp_span_context parent;
	tp_comment_result state_result; /* VALID: state holds the tracestate kept */
	size_t		state_len;
	char		state[TP_TRACESTATE_MAX + 1];
} tp_comment_context;

void		tp_sqlcomment_context(const char *sql, size_t len, tp_comment_context *out);

/*
 * A blank around a statement: scanner_isspace's set in PostgreSQL 15 (not
 * \v, which its scanner rejects), without a call per byte.
 */
static inline bool
tp_sqlcomment_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/*
 * The end of the comment that ends the len bytes at sql (trailing blanks
 * and semicolons aside): where its closing star is; NULL when they end
 * otherwise.  Inline: the hooks ask it of every statement, most have none.
 */
static inline const char *
tp_sqlcomment_close(const char *sql, size_t len)
{
	const char *end = sql + len;

	while (end > sql && (tp_sqlcomment_blank(end[-1]) || end[-1] == ';'))
		end--;
	if (end - sql < 4 || end[-2] != '*' || end[-1] != '/')
		return NULL;
	return end - 2;
}

/* The comment that opens the len bytes at sql, leading blanks aside: its "/" "*", or NULL. */
static inline const char *
tp_sqlcomment_open(const char *sql, size_t len)
{
	const char *end = sql + len;

	while (sql < end && tp_sqlcomment_blank(*sql))
		sql++;
	if (end - sql < 4 || sql[0] != '/' || sql[1] != '*')
		return NULL;
	return sql;
}

/* Whether the len bytes at sql end or open with a comment: those the readers above look at. */
static inline bool
tp_sqlcomment_present(const char *sql, size_t len)
{
	return tp_sqlcomment_close(sql, len) != NULL || tp_sqlcomment_open(sql, len) != NULL;
}

#endif
