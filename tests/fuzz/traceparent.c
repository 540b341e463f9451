/*
 * traceparent.c - libFuzzer target for tp_traceparent_parse().
 *
 * The header comes from clients (SET traceprof.traceparent, HTTP-style
 * carriers) inside PostgreSQL backends, so no input may crash or over-read.
 * Invariants: a rejected input always says why; an accepted one has
 * non-zero ids and formats back to its own version-00 text, which parses
 * to the same context; hex decoding round-trips.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "trace_context.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *) data;
	tp_span_context ctx;
	tp_span_context again;
	const char *why = NULL;
	char		formatted[TP_TRACEPARENT_LEN + 1];
	uint8_t		bytes[64];

	if (!tp_traceparent_parse(text, size, &ctx, &why))
		FUZZ_CHECK(why != NULL && why[0] != '\0');
	else
	{
		FUZZ_CHECK(size >= TP_TRACEPARENT_LEN);
		FUZZ_CHECK(!tp_id_is_zero(ctx.trace_id, TP_TRACE_ID_BYTES));
		FUZZ_CHECK(!tp_id_is_zero(ctx.span_id, TP_SPAN_ID_BYTES));
		tp_traceparent_format(&ctx, formatted);
		FUZZ_CHECK(strlen(formatted) == TP_TRACEPARENT_LEN);
		/* Only the version may differ: later versions are read as 00. */
		FUZZ_CHECK(memcmp(formatted + 2, text + 2, TP_TRACEPARENT_LEN - 2) == 0);
		FUZZ_CHECK(text[0] != '0' || text[1] != '0' || size == TP_TRACEPARENT_LEN);
		FUZZ_CHECK(tp_traceparent_parse(formatted, TP_TRACEPARENT_LEN, &again, &why));
		FUZZ_CHECK(memcmp(&ctx.trace_id, &again.trace_id, TP_TRACE_ID_BYTES) == 0);
		FUZZ_CHECK(memcmp(&ctx.span_id, &again.span_id, TP_SPAN_ID_BYTES) == 0);
		FUZZ_CHECK(ctx.flags == again.flags);
	}

	/* Hex: whatever decodes re-encodes to the same lowercase digits. */
	if (size / 2 <= sizeof(bytes) && tp_hex_decode(text, bytes, size / 2))
	{
		char		hex[2 * sizeof(bytes) + 1];

		tp_hex_encode(bytes, size / 2, hex);
		FUZZ_CHECK(memcmp(hex, text, size / 2 * 2) == 0);
	}
	return 0;
}
