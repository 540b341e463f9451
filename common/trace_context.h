/*
 * trace_context.h - W3C Trace Context: ids and the traceparent header.
 *
 * https://www.w3.org/TR/trace-context/ : "00-<32 hex>-<16 hex>-<2 hex>",
 * lowercase only, all-zero ids invalid, version ff invalid, later versions
 * accepted when they extend the version-00 layout.
 */
#ifndef TP_TRACE_CONTEXT_H
#define TP_TRACE_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fast_random.h"

#define TP_TRACE_ID_BYTES 16
#define TP_SPAN_ID_BYTES 8
#define TP_TRACE_ID_HEX (TP_TRACE_ID_BYTES * 2)
#define TP_SPAN_ID_HEX (TP_SPAN_ID_BYTES * 2)
#define TP_TRACEPARENT_LEN 55	/* version 00, without NUL */

#define TP_FLAG_SAMPLED 0x01

typedef struct tp_span_context
{
	uint8_t		trace_id[TP_TRACE_ID_BYTES];
	uint8_t		span_id[TP_SPAN_ID_BYTES];
	uint8_t		flags;
} tp_span_context;

/*
 * Parse a traceparent of len bytes (not necessarily NUL-terminated).
 * On failure returns false and points *why at a static English phrase
 * saying what was expected (e.g. "trace-id must be 32 lowercase hex digits").
 */
bool		tp_traceparent_parse(const char *text, size_t len,
								 tp_span_context *out, const char **why);

/* Format as version 00; out must hold TP_TRACEPARENT_LEN + 1 bytes. */
void		tp_traceparent_format(const tp_span_context *ctx, char *out);

/* Lowercase hex of len bytes into out (2*len + 1 bytes, NUL-terminated). */
void		tp_hex_encode(const uint8_t *bytes, size_t len, char *out);

/* Decode exactly 2*len lowercase hex digits; false on any other input. */
bool		tp_hex_decode(const char *hex, uint8_t *bytes, size_t len);

/*
 * True when every byte is zero (an invalid trace or span id, or no parent).
 * Inline: with the id's constant length the loop unrolls, where a call
 * compared byte by byte (the exporter asks twice a span).
 */
static inline bool
tp_id_is_zero(const uint8_t *bytes, size_t len)
{
	uint8_t		any = 0;

	for (size_t i = 0; i < len; i++)
		any |= bytes[i];
	return any == 0;
}

/*
 * Fill with random bytes, not all zero (fast_random.h: seeded from the
 * kernel once per thread and per forked process, no system call per id).
 * Returns false only if the kernel refuses the seed, which callers report.
 * Inline: len is a constant at every call, so for trace and span ids this
 * is two or one draws, without the loop or the tail.
 */
static inline bool
tp_id_random(uint8_t *bytes, size_t len)
{
	uint64_t	any;

	do
	{
		any = 0;
		for (size_t filled = 0; filled < len; filled += sizeof(uint64_t))
		{
			uint64_t	word;

			if (!tp_random_u64(&word))
				return false;
			if (len - filled >= sizeof(word))
			{
				memcpy(bytes + filled, &word, sizeof(word));
				any |= word;
			}
			else
			{
				memcpy(bytes + filled, &word, len - filled);
				any |= !tp_id_is_zero(bytes + filled, len - filled);
			}
		}
	} while (any == 0);			/* all-zero ids are invalid */
	return true;
}

#endif
