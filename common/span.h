/*
 * span.h - an OpenTelemetry span as common/ keeps it before export.
 *
 * Plain heap data: the binaries build these through tracer.h; the
 * extension's exporter converts its shared-memory records into them.
 */
#ifndef TP_SPAN_H
#define TP_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kvlist.h"
#include "trace_context.h"

/* Values are OTLP's Span.SpanKind and Status.StatusCode. */
typedef enum tp_span_kind
{
	TP_SPAN_INTERNAL = 1,
	TP_SPAN_SERVER = 2,
	TP_SPAN_CLIENT = 3,
} tp_span_kind;

typedef enum tp_status_code
{
	TP_STATUS_UNSET = 0,
	TP_STATUS_OK = 1,
	TP_STATUS_ERROR = 2,
} tp_status_code;

typedef enum tp_attr_type
{
	TP_ATTR_STRING,
	TP_ATTR_INT,
	TP_ATTR_DOUBLE,
	TP_ATTR_BOOL,
} tp_attr_type;

typedef struct tp_attr
{
	char	   *key;
	/* strlen of key and of value.s when known, else 0: the encoder measures */
	uint32_t	key_len;
	uint32_t	value_len;
	tp_attr_type type;
	union
	{
		char	   *s;
		int64_t		i;
		double		d;
		bool		b;
	}			value;
} tp_attr;

/* Whether a span's parent is in another process, as OTLP's span flags say it. */
typedef enum tp_parent_place
{
	TP_PARENT_UNKNOWN = 0,
	TP_PARENT_LOCAL,			/* or no parent */
	TP_PARENT_REMOTE,
} tp_parent_place;

typedef struct tp_span
{
	tp_span_context context;	/* trace_id, span_id, flags */
	uint8_t		parent_span_id[TP_SPAN_ID_BYTES];	/* zero: root span */
	char	   *trace_state;	/* W3C tracestate, or NULL */
	char	   *name;
	tp_span_kind kind;
	uint64_t	start_unix_ns;
	uint64_t	end_unix_ns;
	tp_attr    *attrs;
	size_t		attr_count;
	size_t		attr_capacity;
	tp_status_code status;
	char	   *status_message;
	tp_parent_place parent_place;	/* OTLP Span.flags bits 8 and 9 */
	/*
	 * strlen of name, trace_state and status_message when known, else 0, as
	 * in tp_attr; whoever replaces one of these strings sets its length
	 * (tp_span_set_error does for the message).
	 */
	uint32_t	name_len;
	uint32_t	trace_state_len;
	uint32_t	status_message_len;
} tp_span;

/* Attribute setters copy key and value; a later set of a key replaces it. */
void		tp_span_set_string(tp_span *span, const char *key, const char *value);
void		tp_span_set_int(tp_span *span, const char *key, int64_t value);
void		tp_span_set_double(tp_span *span, const char *key, double value);
void		tp_span_set_bool(tp_span *span, const char *key, bool value);

/* Mark failed with a message (copied); OK/UNSET need no message. */
void		tp_span_set_error(tp_span *span, const char *message);

/* Release what the span owns (not the span struct itself). */
void		tp_span_clear(tp_span *span);

/*
 * Nanoseconds since the Unix epoch (CLOCK_REALTIME).  Inline: a traced
 * statement reads it two or three times, and its own call was about one
 * instruction-cache miss each.
 */
static inline uint64_t
tp_unix_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

#endif
