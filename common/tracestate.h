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
 * the blanks and empty members around them.  Past TP_TRACESTATE_MAX bytes,
 * whole members are dropped as the specification says: those longer than
 * 128 bytes first, then from the end.  A value that is no tracestate (the
 * grammar, more than 32 members, a key twice) returns false, out empty,
 * with *why pointed at what was expected: it is passed on not at all.
 */
bool		tp_tracestate_parse(const char *text, size_t len, char *out, size_t *out_len,
								const char **why);

#endif
