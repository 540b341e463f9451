/*
 * tracestate.h - W3C Trace Context's tracestate: the vendors' key=value
 * list that travels with a traceparent, kept on the spans made under it.
 *
 * https://www.w3.org/TR/trace-context/#tracestate-header
 */
#ifndef TP_TRACESTATE_H
#define TP_TRACESTATE_H

#include <stdbool.h>
#include <stddef.h>

/* What we keep of one: the least the specification asks a vendor to pass on. */
#define TP_TRACESTATE_MAX 512
#define TP_TRACESTATE_MAX_MEMBERS 32

/*
 * Check a tracestate of len bytes and copy what is kept into out
 * (TP_TRACESTATE_MAX + 1 bytes, NUL-terminated): its list members without
 * the blanks and empty members around them, those past 32 or past
 * TP_TRACESTATE_MAX bytes dropped from the end, as the specification
 * allows.  On a value that is no tracestate returns false, out empty, and
 * points *why at what was expected: such a value is passed on not at all.
 */
bool		tp_tracestate_parse(const char *text, size_t len, char *out, size_t *out_len,
								const char **why);

#endif
