/*
 * span_attributes.h - a stored span seen as a common/ tp_span, for the
 * exporter and the SQL view.
 *
 * The view borrows: its strings point into the TraceprofSpan record and the
 * SpanAttributes next to it, so building one allocates nothing unless
 * Pyroscope links are configured.  It must not be given to tp_span_clear.
 */
#ifndef TRACEPROF_SPAN_ATTRIBUTES_H
#define TRACEPROF_SPAN_ATTRIBUTES_H

#include "span.h"
#include "traceprof.h"

/* More than the attributes span_view() sets at most (19). */
#define SPAN_MAX_ATTRIBUTES 24

typedef struct SpanAttributes
{
	tp_attr		items[SPAN_MAX_ATTRIBUTES];
	char		profile_id[TP_SPAN_ID_HEX + 1];
	char	   *profile_url;	/* malloc'd Pyroscope links, or NULL */
	char	   *baseline_url;
} SpanAttributes;

/*
 * Fill out with a view of record, its attributes kept in attrs.  Without
 * include_private the query text, query id, table name (in the span's name
 * too, which keeps the operation) and Pyroscope links are left out and the
 * error message blank.  Without include_links the Pyroscope links are left
 * out too: they show traceprof.pyroscope_url, a superuser-only setting.
 */
extern void span_view(const TraceprofSpan *record, bool include_private,
					  bool include_links, SpanAttributes *attrs, tp_span *out);

/* Release what span_view allocated (the Pyroscope links). */
extern void span_view_release(SpanAttributes *attrs);

#endif
